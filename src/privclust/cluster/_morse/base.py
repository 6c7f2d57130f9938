"""The base model of a Morse merge: pooling its centres, and what it has released."""

from __future__ import annotations

import numbers

import numpy as np

from .._base import (
    check_bounds,
)
from ..mixture import (
    DPGaussianMixture,
)


# =========================================================================== estimator
def pool_centres(centres, sizes=None, max_components: int = 20):
    """Ward agglomeration of a centre model's public centres down to ``max_components``
    (post-processing of released values: the centres and the noisy cluster sizes).

    A centre model may release many more centres than the Morse step needs (DPM finds 60-80
    leaves on uci_shuttle and uci_magic, most holding a few hundred records), and the TEV search
    costs about ``K0^3`` field evaluations. While more than ``max_components`` centres remain,
    the pair whose merge least increases the size-weighted scatter,
    ``n_a n_b / (n_a + n_b) |c_a - c_b|^2``, is replaced by its size-weighted mean (the first
    such pair in row-major order of the remaining centres on a tie). Sizes are the released
    noisy sizes clipped at 1 (equal if none are released). Returns the pooled centres and, for
    every input centre, the index of its pooled centre.

    Each remaining centre keeps its cheapest partner (:class:`_NearestPartners`), so a merge
    recomputes the merged centre's costs and, when they could come first, those of the
    centres whose partner took part in it: about ``K0^2 d`` work in all (under a second for
    5,000 centres in 3 dimensions; :func:`_pooling_seconds`) where recomputing every pair at
    every merge took ``K0^3 d``, with the same pairs merged in the same order and every value
    equal bit for bit.
    """
    c = np.atleast_2d(np.asarray(centres, dtype=float)).copy()
    k = c.shape[0]
    owner = np.arange(k)
    if k <= max_components:
        return c, owner
    n = np.ones(k) if sizes is None else np.maximum(np.asarray(sizes, dtype=float), 1.0).copy()
    partners = _NearestPartners(c, n)
    for _ in range(k - max(int(max_components), 1)):
        a, b = partners.best_pair()
        partners.merge(a, b)
        owner[owner == b] = a
    keep = np.flatnonzero(partners.alive)
    remap = np.full(k, -1, dtype=np.int64)
    remap[keep] = np.arange(keep.size)
    return c[keep], remap[owner]


def _pooling_seconds(k: int, d: int) -> float:
    """Predicted time of :func:`pool_centres` on ``k`` centres in ``d`` dimensions (measured on
    2 cores: 2 s at k = 10,000, d = 3; 14 s at d = 20; 39 s at d = 50; it grows like k^2 d)."""
    return 1e-8 * float(k) ** 2 * (0.3 + 0.8 * max(int(d), 1))


def _check_pooling_cost(k: int, d: int, param: str = "n_clusters", limit: float = 10.0) -> None:
    """Refuse to pool ``k`` centres in ``d`` dimensions when :func:`_pooling_seconds` predicts
    more than ``limit`` seconds; ``param`` names the base model's parameter that sets ``k``."""
    predicted = _pooling_seconds(k, d)
    if predicted > limit:
        most = int((limit / _pooling_seconds(1, d)) ** 0.5)
        raise ValueError(
            f"pooling the base model's {k} centres in {d} dimensions would take about "
            f"{predicted:,.0f} s (its cost grows like the square of the number of centres "
            f"times the dimension); ask the base model for at most {most} centres ({param})"
        )


def _centre_param(est) -> str:
    """The base model's parameter that sets its number of centres, for a message."""
    params = est.get_params(deep=False) if hasattr(est, "get_params") else {}
    return "its n_clusters" if "n_clusters" in params else "through its parameters"


def _centre_count(est, fitted, X):
    """``(number of centres, d)`` of a centre model where known before its fit, else
    ``(None, None)``."""
    if fitted:
        centres = np.atleast_2d(np.asarray(est.cluster_centers_))
        return centres.shape[0], centres.shape[1]
    k = est.get_params(deep=False).get("n_clusters") if hasattr(est, "get_params") else None
    shape = np.shape(X) if X is not None else ()
    if isinstance(k, numbers.Integral) and not isinstance(k, bool) and len(shape) == 2:
        return int(k), int(shape[1])
    return None, None


def _sq_dists(ct, rows, cols, work):
    """``|c_r - c_j|^2`` for ``rows`` x ``cols`` from the transposed centres ``ct`` (d, K), equal
    bit for bit to ``((c[rows][:, None] - c[cols][None]) ** 2).sum(axis=2)``, written into
    ``work[0]`` (``work``: at least 9 rows of at least ``rows.size * cols.size``): up to 128
    coordinates the terms are added in the order NumPy's pairwise sum adds them along a
    contiguous axis (one by one below 8; else eight running sums over the terms' residues
    mod 8, joined pairwise, then the remainder one by one), without the (rows, cols, d)
    block; past 128, that sum itself over blocks of columns."""
    d, shape = ct.shape[0], (rows.size, cols.size)
    acc = [work[i, : rows.size * cols.size].reshape(shape) for i in range(9)]
    if d > 128 or d == 0:
        c, step = ct.T, max(1, (1 << 13) // max(rows.size * d, 1))
        for s in range(0, cols.size, step):
            cj = cols[s : s + step]
            acc[0][:, s : s + step] = ((c[rows][:, None, :] - c[cj][None, :, :]) ** 2).sum(axis=2)
        return acc[0]
    cr, cc = ct[:, rows], ct[:, cols]

    def term(t, out):
        np.subtract(cr[t][:, None], cc[t][None, :], out=out)
        return np.square(out, out=out)

    tmp = acc[8]
    if d < 8:
        term(0, acc[0])
        for t in range(1, d):
            acc[0] += term(t, tmp)
        return acc[0]
    for j in range(8):
        term(j, acc[j])
    main = d - d % 8
    for i in range(8, main, 8):
        for j in range(8):
            acc[j] += term(i + j, tmp)
    for j in (0, 2, 4, 6):  # ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        acc[j] += acc[j + 1]
    acc[0] += acc[2]
    acc[4] += acc[6]
    acc[0] += acc[4]
    for t in range(main, d):
        acc[0] += term(t, tmp)
    return acc[0]


class _NearestPartners:
    """The greedy merges of :func:`pool_centres`: for every remaining centre ``r``, the least
    merge cost over the remaining centres and the first centre (lowest index) attaining it.

    Costs are ``n_r n_j / (n_r + n_j) * |c_r - c_j|^2`` evaluated in that order of operations,
    so every value is the one the full cost matrix would hold, bit for bit (and the matrix is
    symmetric); its diagonal is infinite and a NaN counts as smaller than any number (the order
    ``np.argmin`` uses), which the keys here hold as ``-inf``. The pair to merge, the first
    minimum of the matrix in row-major order, is the cheapest row's partner, the lowest row on
    a tie. A merge changes one row and column and removes another: a row whose partner took
    part in it and now costs more goes *stale* (partner -1), its old least cost a lower bound
    of the row, and is recomputed only once it could come first (:meth:`best_pair`).
    """

    _BLOCK = 1 << 15  # costs evaluated at once (the (rows, cols) temporaries stay in cache)

    def __init__(self, c, n):
        self.c, self.n = c, n  # updated in place by merge
        self.ct = np.ascontiguousarray(c.T)
        k = c.shape[0]
        self.alive = np.ones(k, dtype=bool)
        self.idx = np.arange(k)  # the remaining centres, ascending
        self.key = np.full(k, np.inf)
        self.arg = np.zeros(k, dtype=np.int64)
        self._work = np.empty((11, max(self._BLOCK, k)))  # reused: no allocation per block
        # all rows, over the upper triangle's blocks (a block's column minima are its mirror's
        # row minima); columns come in ascending blocks, so an earlier block wins a tie
        s = max(1, int(np.sqrt(self._BLOCK)))
        for lo in range(0, k, s):
            rows = self.idx[lo : lo + s]
            for lo2 in range(lo, k, s):
                cols = self.idx[lo2 : lo2 + s]
                cost = self._costs(rows, cols)
                self._offer(rows, cols, cost)
                if lo2 > lo:
                    self._offer(cols, rows, cost.T)

    def _costs(self, rows, cols):
        """Keys of the costs of ``rows`` against ``cols`` (ascending), in a view of the work
        buffers that the next call overwrites."""
        work = self._work
        if work.shape[1] < rows.size * cols.size:
            work = np.empty((11, rows.size * cols.size))
        d2 = _sq_dists(self.ct, rows, cols, work)
        w, den = (work[i, : d2.size].reshape(d2.shape) for i in (9, 10))
        nr, nc = self.n[rows][:, None], self.n[cols][None, :]
        np.multiply(nr, nc, out=w)
        np.divide(w, np.add(nr, nc, out=den), out=w)
        cost = np.multiply(w, d2, out=w)
        cost[np.isnan(cost)] = -np.inf
        pos = np.minimum(np.searchsorted(cols, rows), cols.size - 1)
        diag = np.flatnonzero(cols[pos] == rows)
        cost[diag, pos[diag]] = np.inf
        return cost

    def _offer(self, rows, cols, cost):
        """Take each row's least entry of ``cost`` where below its present one (``cols`` lie
        right of the columns seen so far)."""
        j = np.argmin(cost, axis=1)
        kj = cost[np.arange(rows.size), j]
        better = kj < self.key[rows]
        self.key[rows[better]], self.arg[rows[better]] = kj[better], cols[j[better]]

    def _refresh(self, rows):
        """Recompute the least cost and its partner of ``rows``."""
        cols = self.idx
        step = max(1, self._BLOCK // max(cols.size, 1))
        for s in range(0, rows.size, step):
            r = rows[s : s + step]
            cost = self._costs(r, cols)
            j = np.argmin(cost, axis=1)
            self.key[r] = cost[np.arange(r.size), j]
            self.arg[r] = cols[j]

    def best_pair(self):
        """The pair to merge next, ``(a, b)`` with ``a < b``; the stale rows that could come
        before the least exact one are recomputed first."""
        idx = self.idx
        keys = self.key[idx]
        pos = int(np.argmin(keys))
        if self.arg[idx[pos]] < 0:
            fresh = np.flatnonzero(self.arg[idx] >= 0)
            stale = np.flatnonzero(self.arg[idx] < 0)
            if fresh.size:
                f = fresh[np.argmin(keys[fresh])]
                stale = stale[(keys[stale] < keys[f]) | ((keys[stale] == keys[f]) & (stale < f))]
            self._refresh(idx[stale])
            pos = int(np.argmin(self.key[idx]))
        r = int(idx[pos])
        j = int(self.arg[r])
        return min(r, j), max(r, j)

    def merge(self, a, b):
        """Pool centre ``b`` into centre ``a`` (``a < b``) and update the partners."""
        c, n = self.c, self.n
        c[a] = (n[a] * c[a] + n[b] * c[b]) / (n[a] + n[b])
        n[a] += n[b]
        self.ct[:, a] = c[a]
        self.alive[b] = False
        idx = self.idx = self.idx[self.idx != b]
        new = self._costs(np.array([a]), idx)[0].copy()  # row a, and by symmetry column a
        j = int(np.argmin(new))
        self.key[a], self.arg[a] = new[j], idx[j]
        others = idx != a
        r, v = idx[others], new[others]
        key, arg = self.key[r], self.arg[r]
        # the partner was b: the rest of the row is >= key, its ties lie right of b > a; it
        # was a, whose cost changed: the rest is >= key, its ties lie right of a. Otherwise
        # the new cost to a takes the lead if below (or tied left of) the partner's; a stale
        # row (-1) becomes exact only below its bound
        lost = (arg == a) | (arg == b)
        take = np.where(lost, v <= key, (v < key) | ((v == key) & (a < arg)))
        self.key[r[take]], self.arg[r[take]] = v[take], a
        self.arg[r[lost & ~take]] = -1  # the old least cost bounds the row from below


def _is_fitted(est) -> bool:
    return hasattr(est, "means_") or hasattr(est, "cluster_centers_")


def _is_mixture(est) -> bool:
    if _is_fitted(est):
        return all(hasattr(est, a) for a in ("means_", "covariances_", "weights_"))
    return isinstance(est, DPGaussianMixture)


def _releases_sizes(est) -> bool:
    """True when the base releases noisy cluster sizes the delta rule can use (privclust's
    centre models do; a fitted model of another kind must show ``cluster_sizes_``)."""
    if _is_fitted(est):
        return getattr(est, "cluster_sizes_", None) is not None
    return bool(getattr(est, "releases_cluster_sizes", False))


def _base_bounds(est, d):
    b = getattr(est, "bounds_", None)
    if b is not None:
        return check_bounds(b, d, rows=True)
    b = getattr(est, "bounds", None)
    if b is None:
        return None
    return check_bounds(b, d)


def _positive_delta(delta, who: str):
    """The pipeline's delta: None (the delta rule) or > 0. Every pipeline that spends here has
    a Gaussian release (the covariance pass, or a mixture base), so delta = 0 cannot hold."""
    if delta == 0:
        raise ValueError(
            f"MorseMerging needs delta > 0 ({who} is 0), since its Gaussian releases are "
            "(epsilon, delta)-DP; pass delta=1e-6, or delta=None for the delta rule"
        )
    return delta

def _zcdp_base_message(base) -> str:
    """One sentence for an unfitted base that keeps a zCDP block (CoresetKMeans with delta):
    the covariance pass keeps one too, and one plan holds one."""
    return (f"{type(base).__name__} keeps its sums in a zCDP block of its own, which cannot "
            "share MorseMerging's plan with the covariance pass's block (a plan holds one); "
            "fit it first, with its own epsilon and delta or a shared accountant, then pass the "
            "fitted model with MorseMerging(epsilon=...) for the covariance pass")
