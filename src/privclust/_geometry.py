"""Nearest-centre assignment, per-group sums and grid-cell keys: one implementation for
prediction, evaluation and the engine.

Imports nothing from privclust but its scratch arrays (privclust._scratch), so every layer
may use it.
"""

from __future__ import annotations

import numpy as np

from ._scratch import scratch

__all__ = ["block_rows", "flat_cell_keys", "group_column_sums", "most_likely_labeller",
           "nearest_centres", "project_rows", "projected_box", "rows_outside",
           "single_threaded_blas"]

_BLOCK_ELEMENTS = 1 << 16  # (rows, centres) distances per block: fits in cache
_SCRATCH_ELEMENTS = 1 << 20  # values of the rows per block, at most
_BLOCK_ALIGN = 64  # every block's rows are a multiple of this (whole kernel tiles)
#: Whitened differences (component x feature, row) per block of the most-likely assignment:
#: 2 MiB, so the block stays in cache between the product that writes it and the squares
#: (measured: 2**17 to 2**20 within 10% on 200,000 x 20, K = 32; 2**15 twice as slow).
_WHITENED_ELEMENTS = 1 << 18
_controller = None


def single_threaded_blas():
    """A context in which BLAS runs on one thread (process-wide while it lasts).

    The distance blocks are skinny products (rows x d times d x k) for which a threaded BLAS
    gains little and, on a machine with other work, loses a lot to oversubscription (measured:
    6x slower on 2 busy cores); scikit-learn's k-means makes the same choice. Processing the
    blocks in a thread pool instead was measured slower still (the blocks are too small to
    amortise the hand-offs), so they run one after the other.
    """
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")


def block_rows(k: int, d: int) -> int:
    """Rows per block of every product over records with ``k`` columns out and ``d`` in
    (:func:`nearest_centres`, :func:`project_rows`): a multiple of 64 from ``(k, d)`` only,
    never from the number of records, so a block holds at most about ``2^16`` products'
    results and ``2^20`` values of the rows."""
    rows = min(_BLOCK_ELEMENTS // max(k, 1), _SCRATCH_ELEMENTS // max(d, 1))
    return max(_BLOCK_ALIGN, rows // _BLOCK_ALIGN * _BLOCK_ALIGN)


def _blocks(n: int, rows: int):
    """``(start, rows used)`` of every block of ``rows`` rows over ``n`` records."""
    for start in range(0, n, rows):
        yield start, min(rows, n - start)


def nearest_centres(X, centres, *, return_sq_distance: bool = False, chunk_rows=None,
                    offset=None):
    """Index of the nearest centre (Euclidean; ties to the lower index) for every row of X:
    ``argmin_j ||x - c_j||^2 - offset_j`` (``offset``: (k,) public values, default 0).

    Per-record arithmetic: a row's label depends on that row and the centres only, never on
    the other rows, their number or the row's position. The squared distances come from
    ``|c|^2 - 2 x.c`` (``|x|^2`` does not change the argmin), both sides shifted by the
    centres' mean to limit cancellation far from the origin, one matrix product per block of
    rows; every block has exactly :func:`block_rows` rows (from ``(k, d)`` only; the last
    block is padded with zero rows, whose results are dropped), so every row is computed by
    the same BLAS kernel with the same blocking wherever it sits (a product's edge rows take
    another kernel, whose rounding differs in the last bits: a block whose shape followed n
    could move a record at a near tie to another centre when one record is added). With
    ``return_sq_distance`` the squared distance to the chosen centre is recomputed exactly
    from the row and that centre. ``chunk_rows`` is accepted for compatibility and changes
    nothing (memory is ``O(block * max(k, d))`` already).
    """
    del chunk_rows  # the block shape must not depend on the caller
    C = np.asarray(centres, dtype=float)
    n, k = X.shape[0], C.shape[0]
    d = C.shape[1]
    rows = block_rows(k, d)
    shift = C.mean(axis=0)
    Cs = C - shift
    c_sq = np.einsum("ij,ij->i", Cs, Cs)
    if offset is not None:
        c_sq = c_sq - np.broadcast_to(np.asarray(offset, dtype=np.float64), (k,))
    minus_2c = -2.0 * Cs.T
    idx = np.empty(n, dtype=np.int64)
    dist = np.empty(n) if return_sq_distance else None
    if n == 0:
        return (idx, dist) if return_sq_distance else idx
    # this thread's scratch arrays (see privclust._scratch), the same shape for every block
    Xs = scratch("nearest rows", (rows, d))
    scores = scratch("nearest scores", (rows, k))
    with single_threaded_blas():
        for start, m in _blocks(n, rows):
            np.subtract(X[start:start + m], shift, out=Xs[:m])
            if m < rows:
                Xs[m:] = 0.0  # the padding: its labels are dropped
            np.matmul(Xs, minus_2c, out=scores)
            scores += c_sq
            j = np.argmin(scores[:m], axis=1)
            idx[start:start + m] = j
            if return_sq_distance:
                diff = Xs[:m] - Cs[j]
                dist[start:start + m] = np.einsum("ij,ij->i", diff, diff)
    return (idx, dist) if return_sq_distance else idx


def projected_box(G, bounds) -> np.ndarray:
    """The box (p, 2) that holds ``G (x - mid)`` of every ``x`` in the public ``bounds`` (d, 2):
    ``|y_j| <= sum_l |G_jl| half_l``, padded by ``1e-9`` of itself and ``1e-12`` for the
    rounding of the projection. Public values only."""
    half = (bounds[:, 1] - bounds[:, 0]) / 2.0
    reach = np.abs(G) @ half * (1.0 + 1e-9) + 1e-12
    return np.column_stack([-reach, reach])


def project_rows(X, mid, G, out=None) -> np.ndarray:
    """``(X - mid) @ G.T`` (``G``: (p, d), ``mid``: (d,); rows of X as float64): every record's
    image from that record and the public map alone (per-record arithmetic, as
    :func:`nearest_centres`: blocks of exactly :func:`block_rows` rows, the last padded with
    zero rows, on one BLAS thread), so a record's projection, and the cell it falls in, does
    not depend on the other records or their number. Returns ``out`` (n, p) when given."""
    G = np.asarray(G, dtype=np.float64)
    mid = np.asarray(mid, dtype=np.float64)
    n = X.shape[0]
    p, d = G.shape
    if out is None:
        out = np.empty((n, p))
    rows = block_rows(p, d)
    Xs = scratch("projected rows", (rows, d))
    Ys = scratch("projected images", (rows, p))
    Gt = np.ascontiguousarray(G.T)
    with single_threaded_blas():
        for start, m in _blocks(n, rows):
            np.subtract(X[start:start + m], mid, out=Xs[:m])
            if m < rows:
                Xs[m:] = 0.0
            np.matmul(Xs, Gt, out=Ys)
            out[start:start + m] = Ys[:m]
    return out


def group_column_sums(group: np.ndarray, x: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group, the column sums of ``x`` (n, d): (n_groups, d); ``group`` (n,) in
    ``[0, n_groups)``.

    One ``bincount`` over the combined key ``group * d + column`` (twice as fast as one per
    column). It visits the values in row order, as a per-column ``bincount`` would, so every
    group's sum is accumulated in the same fixed order.
    """
    d = x.shape[1]
    key = (np.asarray(group, dtype=np.int64)[:, None] * d + np.arange(d)).ravel()
    return np.bincount(key, weights=np.asarray(x, dtype=float).ravel(),
                       minlength=n_groups * d).reshape(n_groups, d)


def flat_cell_keys(x, origin, width, lo, span, strides, out=None) -> np.ndarray:
    """The flat key of the grid cell of every row of ``x``:
    ``sum_j clip(floor((x_j - origin_j) / width_j) - lo_j, 0, span_j - 1) * strides_j``.

    Each coordinate is computed in float64 (float32 input is widened first), as every grid
    pass of the library computes it, so the engine's cell counts and a model's lookups put a
    point in the same cell. Column by column with in-place temporaries: about 5x faster than
    the (rows, d) array expression on 2-D data. The sum is accumulated in float64 when every
    key is below 2**53 (exact for integers), otherwise in int64.

    Parameters
    ----------
    x : (m, d) array of finite numbers.
    origin, width : (d,) floats; ``lo``, ``span``, ``strides`` : (d,) ints.
    out : (m,) integer array to fill, optional.

    Returns
    -------
    (m,) integer array (``out`` when given, else int64).
    """
    m, d = x.shape
    if out is None:
        out = np.empty(m, dtype=np.int64)
    in_float = float(np.prod(np.asarray(span, dtype=float))) <= 2.0**53
    # this thread's scratch arrays (privclust._scratch): no fresh temporaries per chunk
    acc = scratch("cell keys sum", (m,), np.float64 if in_float else np.int64)
    acc.fill(0)
    c = scratch("cell keys coordinate", (m,))
    for j in range(d):
        np.subtract(x[:, j], origin[j], out=c, dtype=np.float64)
        c /= width[j]
        np.floor(c, out=c)
        if lo[j]:
            c -= lo[j]
        np.clip(c, 0, span[j] - 1, out=c)
        if in_float:
            c *= strides[j]
            acc += c
        else:
            acc += c.astype(np.int64) * strides[j]
    out[...] = acc
    return out


def rows_outside(x, lo, hi):
    """Which rows of ``x`` have a value outside ``[lo, hi]`` (a boolean mask), or None when
    none does: two column reductions first (the common case, about 10x faster than the
    (rows, d) comparison), the comparison only when some value lies outside."""
    if x.shape[0] == 0 or all(x[:, j].min() >= lo[j] and x[:, j].max() <= hi[j]
                              for j in range(x.shape[1])):
        return None
    return ((x < lo) | (x > hi)).any(axis=1)


def most_likely_labeller(means, cov_cholesky, log_weights):
    """A function ``x -> labels``: for every row of ``x`` (m, d; float32 or float64) the most
    likely Gaussian component, ``argmax_k log_weights[k] - log|det L_k| - ||z_k||^2 / 2`` with
    ``z_k = L_k^-1 (x - means[k])`` and ``L = cov_cholesky`` (k, d, d) lower triangular: the
    hard-EM assignment of the mixture (the engines' ``MostLikelyComponent``) and its
    ``predict``.

    The coefficients are computed once: ``W_k = L_k^-1`` by forward substitution (for all
    components at once) and ``b_k = W_k (mu_k - s)`` about the means' centroid ``s``. Each block
    of rows is then one matrix product, ``[W; -b] [(x - s)^T; 1]`` (every component's whitened
    difference), then its squares summed per component (one ``einsum``) and the argmin of
    ``||z_k||^2 - 2 (log_weights[k] - log|det L_k|)``, which is exactly ``-2`` times the score
    (scaling by a power of two is exact), so the same row as the score's argmax. Everything is
    float64 (float32 rows are widened exactly before the subtraction), with rounding of the
    order of a triangular solve's: the quadratic form is not expanded (``x^T P x - 2 x^T P mu
    + ...`` would be faster but cancels, with an error growing with the condition number of
    the covariance, not of its Cholesky factor), and float32 would move labels at gaps of
    1e-6 relative, so neither is used.

    Ties: a row goes to the lowest index among the components whose computed values are equal
    (``argmin``); components whose exact scores differ by less than the rounding of float64
    may come in either order. The result of a row depends only on the row, the coefficients
    and the block shape, and the block shape only on ``(k, d)``: every call pads its last block
    to the full width, so the product has the same shape and the row the same arithmetic
    however the records are chunked (the NumPy and Dask engines give the same labels).
    Callers choose the BLAS threads (``single_threaded_blas`` for the engine passes).
    """
    means = np.asarray(means, dtype=np.float64)
    chol = np.asarray(cov_cholesky, dtype=np.float64)
    k, d = means.shape
    inv = np.zeros((k, d, d))
    for i in range(d):  # forward substitution: row i of L^-1 from rows < i, all components
        rhs = -np.einsum("kj,kjl->kl", chol[:, i, :i], inv[:, :i, :])
        rhs[:, i] += 1.0
        inv[:, i, :] = rhs / chol[:, i, i : i + 1]
    shift = means.mean(axis=0) if k else np.zeros(d)
    coef = np.empty((k * d, d + 1))
    coef[:, :d] = inv.reshape(k * d, d)
    coef[:, d] = -np.einsum("kij,kj->ki", inv, means - shift).reshape(-1)
    log_det = np.log(np.abs(np.diagonal(chol, axis1=1, axis2=2))).sum(axis=1)
    offset = -2.0 * (np.asarray(log_weights, dtype=np.float64) - log_det)
    # rows per block: a power of two, from (k, d) only (the same on every engine)
    rows = 1 << max(0, min(13, (_WHITENED_ELEMENTS // max(k * d, 1)).bit_length() - 1))

    def labels(x) -> np.ndarray:
        m = x.shape[0]
        out = np.empty(m, dtype=np.intp)
        xa = np.zeros((d + 1, rows))
        xa[d] = 1.0
        z = np.empty((k * d, rows))
        zz = z.reshape(k, d, rows)  # a view: component, feature, row
        q = np.empty((k, rows))
        for start in range(0, m, rows):
            b = min(rows, m - start)
            np.subtract(x[start : start + b].T, shift[:, None], out=xa[:d, :b])
            if b < rows:
                xa[:d, b:] = 0.0  # the padding's labels are dropped
            np.matmul(coef, xa, out=z)
            np.einsum("kjr,kjr->kr", zz, zz, out=q)  # squared norms, one pass
            q += offset[:, None]
            out[start : start + b] = _first_min(q[:, :b])
        return out

    return labels


def _first_min(q) -> np.ndarray:
    """``np.argmin(q, axis=0)`` (the first minimum; the first NaN where there is one), faster
    for long rows: the minimum, then the lowest index equal to it (a few passes over
    contiguous rows instead of a strided scan; Python's cost per component is amortised from
    about 2048 rows, measured)."""
    k, m = q.shape
    if m < 2048:
        return np.argmin(q, axis=0)
    best = q.min(axis=0)
    out = np.full(m, k - 1, dtype=np.intp)
    for c in range(k - 2, -1, -1):
        np.copyto(out, c, where=q[c] == best)
    nan = np.isnan(best)
    if nan.any():
        out[nan] = np.argmin(q[:, nan], axis=0)
    return out
