"""k-means building blocks shared by DPLloyd, KMeansGuarantee and SubClustering, and by the
mixture's initialisation: Su et al.'s budget split and iteration rule, the public sphere-packing
initialisation, noisy centroids and their plan items, exact k-means costs (local diagnostics,
never released) and the end every centre fit shares."""

from __future__ import annotations

import math

import numpy as np
from scipy.spatial import cKDTree

from .._geometry import block_rows, nearest_centres
from .._parallel import on_cores
from ..privacy import Mechanisms
from ._base import is_dask_input, nearest_centre

SU_RHO = 0.225  # Su et al.'s coordinate constant rho (the value diffprivlib also uses)
SU_MAX_ITER = 7  # Su et al.: at most 7 iterations ...
SU_MIN_ITER = 2  # ... and at least 2


def su_budget_split(epsilon: float, d: int, rho: float = SU_RHO) -> tuple[float, float]:
    """``(eps_count, eps_sum)``: one iteration's budget split between counts and sums.

    Su et al. minimise the centroid's mean squared error over the split. With coordinates
    scaled to ``[-1, 1]`` every dimension's sum has sensitivity 1 and the count has sensitivity
    1; their optimum gives each of the ``d`` sum coordinates the budget ``1`` and the count the
    budget ``cbrt(4 d rho^2)``, normalised to the iteration's total:

    ``eps_count = eps * c / (d + c)``, ``eps_sum = eps * d / (d + c)``, ``c = cbrt(4 d rho^2)``.

    ``eps_sum`` is the budget of the whole ``d``-dimensional sum (released with one L1 Laplace
    mechanism of sensitivity ``d``, i.e. ``eps_sum / d`` per coordinate). The two returned values
    are named in this order on purpose: diffprivlib's helper returns ``(per-coordinate, count)``
    and its caller unpacks ``(count, per-coordinate)``, so its counts get the per-coordinate
    budget and *every* coordinate gets the count's: it spends ``(1 + d c) / (d + c)`` times its
    claim (1.52 at d = 20). ``tests/test_lloyd.py`` measures the noise actually drawn to rule
    that out here.
    """
    c = float(np.cbrt(4.0 * d * rho**2))
    return epsilon * c / (d + c), epsilon * d / (d + c)


def su_iterations(epsilon: float, n_hat: float, k: int, d: int, max_iter: int = SU_MAX_ITER,
                  rho: float = SU_RHO) -> int:
    """Su et al.'s number of iterations: ``clip(floor(eps / eps_m), 2, 7)`` (capped by max_iter).

    ``eps_m = sqrt(500 k^3 / n^2 * (d + cbrt(4 d rho^2))^3)`` is the smallest per-iteration
    budget whose centroid error stays below their MSE threshold (1/500); more iterations than
    ``eps / eps_m`` would push every iteration below it. ``n_hat`` must be a *released* count
    (the rule in diffprivlib uses the exact n, which makes the number of iterations, and so every
    noise scale, depend on the data without accounting).
    """
    n = max(float(n_hat), 1.0)
    c = float(np.cbrt(4.0 * d * rho**2))
    eps_m = math.sqrt(500.0 * k**3 / n**2 * (d + c) ** 3)
    t = int(max(min(epsilon / eps_m, SU_MAX_ITER), SU_MIN_ITER))
    return max(1, min(t, int(max_iter)))


def sphere_packing_init(generator: np.random.Generator, bounds: np.ndarray, k: int,
                        max_retries: int = 100) -> np.ndarray:
    """Su et al.'s data-independent initialisation ("sphere packing").

    Draw centres uniformly in the box shrunk by ``a`` on every side and keep a draw only if it
    is at least ``2a`` from every centre already placed (at most ``max_retries`` tries per
    centre); if the ``k`` centres do not fit, halve ``a`` and start again. ``a`` starts at half
    the narrowest side. Reads no data: the randomness is public (from the fit's generator).
    """
    lo, hi = bounds[:, 0], bounds[:, 1]
    width = hi - lo
    d = lo.size
    a = float(width.min()) / 2.0
    log_box = float(np.sum(np.log(width)))
    for _ in range(60):
        # k disjoint balls of radius a inside the box cannot hold more volume than the box:
        # skip a radius that cannot fit without trying it (the tries cost O(k^2))
        log_balls = math.log(k) + d / 2 * math.log(math.pi) - math.lgamma(d / 2 + 1) \
            + d * math.log(a)
        if log_balls > log_box:
            a /= 2.0
            continue
        centres = _pack(generator, lo, hi, a, k, max_retries)
        if centres is not None:
            return centres
        a /= 2.0
    return generator.uniform(lo, hi, size=(k, d))  # a -> 0: plain uniform draws


def _pack(generator, lo, hi, a, k, max_retries):
    """One packing attempt at radius ``a``: each centre is the first of up to ``max_retries``
    uniform draws at least ``2a`` from those placed (drawn a few at a time: most first draws
    fit). None if a centre finds no place. Distances go to a k-d tree of the centres placed so
    far (rebuilt every 256) plus the few placed since: O(k log k), not O(k^2)."""
    d = lo.size
    centres = np.empty((k, d))
    top = np.maximum(hi - a, lo + a)  # rounding can put lo + a above hi - a
    tree, built, min_d2 = None, 0, (2.0 * a) ** 2
    for placed in range(k):
        tried = 0
        while tried < max_retries:
            m = min(8 if tried == 0 else 32, max_retries - tried)
            cand = generator.uniform(lo + a, top, size=(m, d))
            tried += m
            ok = np.ones(m, dtype=bool)
            if tree is not None:
                ok &= tree.query(cand, k=1)[0] ** 2 >= min_d2
            recent = centres[built:placed]
            if recent.size:
                ok &= ((cand[:, None, :] - recent[None]) ** 2).sum(axis=2).min(axis=1) >= min_d2
            hit = np.flatnonzero(ok)
            if hit.size:
                centres[placed] = cand[hit[0]]
                break
        else:
            return None
        if placed + 1 - built >= 256:
            tree, built = cKDTree(centres[: placed + 1]), placed + 1
    return centres


def bounds_mid(bounds) -> np.ndarray:
    """The middle of the public bounds ``(d, 2)``: the point the released sums are taken about
    (``Engine.nearest_centre_moments(centres, about=bounds_mid(bounds))``)."""
    bounds = np.asarray(bounds, dtype=float)
    return (bounds[:, 0] + bounds[:, 1]) / 2.0


def noisy_centroids(mech: Mechanisms, counts, sums, fallback, bounds, epsilon: float, *,
                    label: str, items: tuple[str, str] | None = None):
    """One DP-Lloyd release: noisy sizes and noisy sums of ``k`` disjoint clusters.

    The sums are taken of ``u = (x - mid) / half`` (``mid``, ``half``: centre and half-width of
    the public bounds), so every clipped record adds a vector in ``[-1, 1]^d``: L1 sensitivity
    ``d`` under add/remove, released with one Laplace mechanism at ``eps_sum``; the sizes get
    two-sided geometric noise at ``eps_count`` (:func:`su_budget_split` of ``epsilon``). The
    clusters are disjoint, so each release is one batch (parallel composition) and the pair
    costs ``epsilon``. ``items`` names the plan's line items for the sizes and the sums
    (see :func:`plan_centroid_items`).

    ``sums`` are the clusters' sums of ``x - mid``, centred exactly by the engine
    (``Engine.nearest_centre_moments(centres, about=bounds_mid(bounds))``): the release divides
    them once by the public ``half``, a function of the exact totals alone, so one record moves
    its exact input by its own rescaled contribution. (Centring the engine's sums of ``x`` here,
    ``(S - n mid) / half``, would carry their rounding, about ``n |mid| 2**-53``, into the
    release: far above the sensitivity when the bounds lie far from zero.)

    Post-processing: ``centre = mid + half * clip(sum_hat / n_hat, -1, 1)`` where the noisy size
    ``n_hat >= 1``, else ``fallback`` (the previous centre). Returns ``(centres, n_hat,
    unit_sum_hat)``; rows of ``counts``/``sums`` may also be independent trials (audits).
    """
    counts = np.asarray(counts, dtype=np.int64)
    sums = np.asarray(sums, dtype=float)
    d = sums.shape[1]
    lo, hi = bounds[:, 0], bounds[:, 1]
    mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0
    eps_count, eps_sum = su_budget_split(epsilon, d)
    unit = sums / half  # one division of an exact total by a public number
    count_item, sum_item = items if items is not None else (None, None)
    n_hat = mech.count(counts, eps_count, target=f"cluster sizes, {label}",
                       note="Su et al. split: count share cbrt(4 d rho^2) / (d + cbrt(...))",
                       item=count_item)
    s_hat = mech.laplace(
        unit, float(d), eps_sum, target=f"cluster sums of (x - mid) / half-width, {label}",
        note="L1 sensitivity d: a clipped record adds a vector in [-1, 1]^d", item=sum_item,
    )
    ok = n_hat >= 1
    mean = np.clip(s_hat / np.maximum(n_hat, 1)[:, None], -1.0, 1.0)
    # mid + half * 1 can round one ulp past hi when the bounds are off-centre: clip it back
    inside = np.clip(mid + half * mean, lo, hi)
    centres = np.where(ok[:, None], inside, np.asarray(fallback, dtype=float))
    return centres, n_hat, s_hat


def plan_centroid_items(plan, name: str, epsilon: float, d: int) -> tuple[str, str]:
    """Add the two line items of a series of :func:`noisy_centroids` releases worth
    ``epsilon`` in total (Su et al.'s split between sizes and sums); returns their names."""
    eps_count, eps_sum = su_budget_split(epsilon, d)
    names = (f"cluster sizes, {name}", f"cluster sums, {name}")
    plan.add(names[0], "two-sided geometric", "pure", eps_count)
    plan.add(names[1], "laplace", "pure", eps_sum)
    return names


def centroid_stats(engine, centres, bounds):
    """One Lloyd step's pass: ``(counts, sums, cost)`` per nearest centre, the sums of
    ``x - mid`` (centred exactly by the engine, what :func:`noisy_centroids` releases) and the
    exact k-means cost of ``centres`` (a local diagnostic, never released)."""
    mid = bounds_mid(bounds)
    counts, sums, sq = engine.nearest_centre_moments(centres, about=mid)
    return counts, sums, kmeans_cost(np.asarray(centres, dtype=float) - mid, counts, sums, sq)


def kmeans_cost(centres, counts, sums, sq_norms) -> float:
    """Exact k-means cost from :meth:`~privclust.engine.Engine.nearest_centre_moments`
    (a local diagnostic for the data holder, never released). With sums and squared norms
    about a point ``a``, pass ``centres - a``."""
    c = np.asarray(centres, dtype=float)
    per = sq_norms - 2.0 * np.einsum("kd,kd->k", c, sums) + counts * (c**2).sum(axis=1)
    return float(np.maximum(per, 0.0).sum())


def _nearest_labels(X, centres) -> np.ndarray:
    """The same assignment as ``predict`` (one shared implementation)."""
    return nearest_centre(X, centres)


def _clipped_labels(x, bounds, centres) -> np.ndarray:
    """The nearest centre of each clipped row of one chunk (as ``predict``: the point as the
    fit saw it)."""
    return nearest_centres(np.clip(x, bounds[:, 0], bounds[:, 1]), centres)


def _clipped_cost(x, bounds, centres) -> np.ndarray:
    """One chunk's k-means cost of its clipped rows at ``centres``, as a length-1 array (a
    diagnostic: float, so its last bits may depend on the chunking)."""
    return _labels_and_cost(x, bounds, centres, True)[1]


def _labels_and_cost(x, bounds, centres, narrow):
    """One chunk's :func:`_clipped_labels` (int32 when ``narrow``) and :func:`_clipped_cost`,
    from one assignment: clipped and labelled in blocks of rows (split at blocks of
    :func:`nearest_centres`, so the labels are the whole chunk's), each block's squared
    differences written into one (n, d) buffer, summed once (the bits of one sum of the
    chunk's squares; one temporary of the chunk's size instead of four)."""
    n, d = x.shape
    labels = np.empty(n, dtype=np.int32 if narrow else np.int64)
    block = block_rows(centres.shape[0], d)
    rows = block * max(1, (1 << 18) // (block * max(d, 1)))
    buf = np.empty((n, d))
    for start in range(0, n, rows):
        sl = slice(start, min(n, start + rows))
        xc = np.clip(x[sl], bounds[:, 0], bounds[:, 1])
        lab = nearest_centres(xc, centres)
        labels[sl] = lab
        np.subtract(xc, centres[lab], out=buf[sl])
        np.square(buf[sl], out=buf[sl])
    return labels, np.array([float(buf.sum()) if n else 0.0])


def _dask_cost_and_labels(X, bounds, centres):
    """:func:`final_cost_and_labels` of a dask input, chunk by chunk where the chunks live:
    below ``LAZY_LABELS`` records one pass gives the labels (gathered one chunk at a time, as
    :func:`~privclust.engine.dask.record_labels` gathers them) and the chunks' costs (added in
    the engine's fixed tree); above, the labels stay a lazy dask array and the cost takes the
    pass."""
    from dask import delayed

    from ..engine import _dask_tasks as tasks
    from ..engine._dask_cluster import one_at_a_time
    from ..engine.dask import LAZY_LABELS, chunk_totals, record_labels

    if X.shape[0] > LAZY_LABELS:
        return (record_labels(X, _clipped_labels, bounds, centres),
                float(chunk_totals(X, _clipped_cost, bounds, centres)[0]))
    narrow = X.shape[0] < 2**31
    labels = np.empty(X.shape[0], dtype=np.int64)
    costs, pos = [], 0
    for part, cost in one_at_a_time([delayed(_labels_and_cost)(b, bounds, centres, narrow)
                                     for b in X.array.to_delayed()[:, 0]], 8):
        labels[pos : pos + part.size] = part
        pos += part.size
        costs.append(cost)
    while len(costs) > 1:  # the order of tasks.tree's additions
        costs = [tasks.add(*costs[i : i + tasks._FAN_IN])
                 for i in range(0, len(costs), tasks._FAN_IN)]
    return labels, float(costs[0][0])


def final_cost_and_labels(X, bounds, centres):
    """Labels of X (nearest centre: post-processing of the model) and the exact k-means cost of
    the clipped records at ``centres`` (the data holder's diagnostic), from one assignment.

    Chunk by chunk in one (n, d) buffer, on the cores: each chunk is clipped into the buffer,
    labelled (per-record arithmetic: the same labels however it is split; split at blocks of
    :func:`nearest_centres`, so no block is padded but the last) and replaced by
    its squared differences; one sum over the whole buffer then adds them in the same order
    as a sum of the (n, d) array of squares would."""
    if is_dask_input(X):  # chunk by chunk where the chunks live: no record to the client
        return _dask_cost_and_labels(X, bounds, centres)
    n = X.shape[0]
    k = centres.shape[0]
    buf = np.empty(X.shape, dtype=np.result_type(X.dtype, bounds.dtype))
    labels = np.empty(n, dtype=np.int64)
    block = block_rows(k, centres.shape[1])  # nearest_centres' rows per block
    rows = block * max(1, (1 << 18) // (block * max(X.shape[1], 1)))  # ~2 MB of X a chunk

    def fill(start):
        sl = slice(start, min(n, start + rows))
        xc = np.clip(X[sl], bounds[:, 0], bounds[:, 1], out=buf[sl])
        labels[sl] = nearest_centres(xc, centres)
        np.subtract(xc, centres[labels[sl]], out=xc)
        np.square(xc, out=xc)

    on_cores(fill, range(0, n, rows), min_chunks=2, one_blas_thread=True)
    return labels, float(buf.sum())




def public_init(init, generator, bounds, k: int) -> tuple[np.ndarray, str]:
    """Data-independent initial centres: 'sphere_packing', 'uniform' or a public (k, d) array."""
    d = bounds.shape[0]
    if isinstance(init, str):
        if init == "sphere_packing":
            return sphere_packing_init(generator, bounds, k), "sphere packing (Su et al.)"
        if init == "uniform":
            # data-independent randomness: uniform in the public bounds
            return generator.uniform(bounds[:, 0], bounds[:, 1], size=(k, d)), "uniform"
        raise ValueError(
            f"init must be 'sphere_packing', 'uniform' or a ({k}, {d}) array of public "
            f"centres; got {init!r}"
        )
    arr = np.asarray(init, dtype=float)
    if arr.shape != (k, d) or not np.isfinite(arr).all():
        raise ValueError(f"init array must be finite with shape ({k}, {d}), got {arr.shape}")
    return np.clip(arr, bounds[:, 0], bounds[:, 1]), "user-supplied public centres"


def finish_centre_fit(est, X, bounds, centres, sizes, history, costs, report, plan, accountant):
    """The end every k-means fit shares: set the released centres and noisy sizes, the
    iteration history and the exact local cost diagnostics (``costs`` gets the cost at the
    released centres), attach the report, and label X (post-processing of the release)."""
    labels, cost = final_cost_and_labels(X, bounds, centres)
    costs.append(cost)
    est.cluster_centers_ = centres
    est.cluster_sizes_ = np.asarray(sizes, dtype=np.int64)
    est.n_clusters_ = centres.shape[0]
    est.n_iter_ = len(history) - 1
    est.centers_history_ = np.stack(history)
    est.cost_history_ = np.asarray(costs)
    est.n_features_in_ = X.shape[1]
    est.privacy_report_ = report
    est._close_plan(plan, report, accountant)
    est.labels_ = labels
    return est
