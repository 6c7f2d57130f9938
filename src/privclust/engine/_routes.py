"""Where a chunk's records go in a regrouping (the NumPy engine's code; the Dask engine runs it
on each chunk): tests of one feature against a threshold, or of a hyperplane, per group.

The axis test works in this thread's scratch arrays (:mod:`privclust._scratch`): a fresh
chunk-sized temporary every chunk costs page faults, and in a Dask worker process, whose
allocator maps every large array afresh, several times the work done with it."""

from __future__ import annotations

import numpy as np

from .._scratch import scratch

__all__ = ["axis_targets", "oblique_targets", "unpark"]

_ROW_STARTS: dict = {}
_SCRATCH_ROWS = 1 << 20  # the regroupings' chunk: masks up to this size are kept per thread


def _row_starts(m: int, d: int) -> np.ndarray:
    """``arange(0, m * d, d)`` (int64, read only), kept: a chunk's first flat index per row."""
    key = (m, d)
    starts = _ROW_STARTS.get(key)
    if starts is None:
        if len(_ROW_STARTS) > 64:  # a few chunk sizes recur; odd tails do not
            _ROW_STARTS.clear()
        starts = np.arange(0, m * d, d, dtype=np.int64)
        starts.flags.writeable = False
        _ROW_STARTS[key] = starts
    return starts


def unpark(before: np.ndarray, after: np.ndarray, parked=None) -> np.ndarray:
    """``after`` with the parked records of ``before`` (ids <= -2) kept parked, or moved to
    ``parked[-2 - id]`` when a table is given."""
    # a chunk's mask in a scratch array (a whole grouping's, rare, is not kept)
    low = np.less_equal(before, -2, out=scratch("parked", before.shape, bool)
                        if before.size <= _SCRATCH_ROWS else None)
    if parked is None:
        np.copyto(after, before, where=low)  # one masked pass, no gather
    elif low.any():
        after[low] = np.asarray(parked, dtype=np.int32)[-2 - before[low]]
    return after


def axis_targets(X, g, feature_t, threshold_t, left_t, right_t, parked, out, sl) -> None:
    """``out[sl]``: the targets of the records ``sl`` when each group ``j`` tests
    ``x[feature_t[j]] <= threshold_t[j]`` (left) or not (right); feature -1: no test, left.
    The tables end with the entry of "no group" (index -1)."""
    gs = g[sl]
    m = gs.shape[0]
    # parked records read the no-group entry (-1: the tables' last), then keep theirs
    gi = np.maximum(gs, -1, out=scratch("regroup group", (m,), gs.dtype))
    f = np.take(feature_t, gi, out=scratch("regroup feature", (m,), np.int32), mode="wrap")
    # every record's tested value in one gather from the flat chunk (record i's feature j at
    # i * d + j; feature 0 for records not tested)
    flat = np.ascontiguousarray(X[sl]).reshape(-1)
    at = np.maximum(f, 0, out=scratch("regroup at", (m,), np.int64))
    at += _row_starts(m, X.shape[1])
    values = np.take(flat, at, out=scratch("regroup values", (m,), flat.dtype), mode="clip")
    limits = np.take(threshold_t, gi, out=scratch("regroup limits", (m,)), mode="wrap")
    goes_left = np.less_equal(values, limits, out=scratch("regroup left", (m,), bool))
    goes_left |= np.less(f, 0, out=scratch("regroup untested", (m,), bool))
    target = np.take(right_t, gi, out=scratch("regroup target", (m,), np.int32), mode="wrap")
    np.copyto(target, np.take(left_t, gi, mode="wrap", out=scratch(
        "regroup left target", (m,), np.int32)), where=goes_left)
    out[sl] = unpark(gs, target, parked)


def oblique_targets(X, g, normal, offset_t, left_t, right_t, split_t, out, sl) -> None:
    """``out[sl]``: the targets of the records ``sl`` in ``LocalEngine.regroup_oblique``, the
    tested rows of the chunk gathered and projected row by row (``einsum``, not a BLAS
    product: a product's rounding depends on the block a row sits in, so a record near a
    hyperplane could change sides when another record is added; ``einsum`` adds each row's
    terms in the same order wherever the row sits, and is as fast)."""
    gs = g[sl]
    target = unpark(gs, left_t[np.maximum(gs, -1)])
    rows = np.flatnonzero(split_t[np.maximum(gs, -1)])
    if rows.size:
        x = X[sl][rows].astype(float, copy=False)
        gr = gs[rows]
        proj = np.einsum("ij,j->i", x, normal) if normal.ndim == 1 else np.einsum(
            "ij,ij->i", x, normal[gr])
        right_side = proj > offset_t[gr]
        target[rows[right_side]] = right_t[gr[right_side]]
    out[sl] = target
