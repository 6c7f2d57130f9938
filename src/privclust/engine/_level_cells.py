"""The cell counts of several nested grids in one pass over the records (the levels of a shifted
grid tree on a small box): every chunk counts its records into a dense array of the finest
grid's cells, the chunks' arrays are added, and each coarser grid's counts are read off the
finest grid's non-empty cells.

Widths a power of two apart give ``floor((x - o) / w) == floor((x - o) / w_fine) >> s``
exactly (``w = 2^s w_fine``: the division's quotient is scaled exactly, and ``floor(y / 2^s)
== floor(y) >> s``), so a record's cell on every coarser grid comes from its finest cell: the
same cells and counts as a pass per grid (:meth:`LocalEngine.cell_counts`, or a level split
from the level above by :meth:`LocalEngine.split_cells`), each cell index computed in float64
from the record as stored, as every grid pass of the library computes it. The choice of this
path reads public values only (the bounds, the records' dtype, the grids).
"""

from __future__ import annotations

import numpy as np

__all__ = ["MAX_CELLS", "LevelCells", "fine_counts", "level_cell_counts", "level_cells",
           "nested_plan"]

#: The finest grid's cells over the bounds up to which one pass counts every level (a dense
#: array of that many int64 per chunk).
MAX_CELLS = 1 << 20
_ROWS = 1 << 16


class LevelCells:
    """The exact record count ``n`` and, per grid (in the order asked), ``(cells (m, d) int64,
    counts (m,) int64)`` of its non-empty cells, in increasing flat key order."""

    def __init__(self, n: int, levels: list):
        self.n, self.levels = int(n), levels


def nested_plan(bounds, dtype, origin, widths):
    """``(fine width, shifts (grids, d), lo, span)`` of the finest grid over the records (the
    bounds as the records are stored: ``dtype``), or None when the grids are not nested by
    powers of two or the finest has over :data:`MAX_CELLS` cells over the bounds."""
    widths = np.asarray(widths, dtype=np.float64)
    origin = np.asarray(origin, dtype=np.float64)
    if widths.ndim != 2 or not widths.shape[0] or not (widths > 0).all():
        return None
    fine = widths.min(axis=0)
    with np.errstate(all="ignore"):
        s = np.frexp(widths / fine)[1] - 1
        if not (np.ldexp(fine, s) == widths).all() or (fine < np.finfo(float).tiny * 2**64).any():
            return None
        box = np.asarray(bounds, dtype=np.float64).astype(dtype).astype(np.float64)
        lo = np.floor((box[:, 0] - origin) / fine)
        hi = np.floor((box[:, 1] - origin) / fine)
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        return None
    span = hi - lo + 1
    if float(np.prod(span)) > MAX_CELLS:
        return None
    return fine, s.astype(np.int64), lo.astype(np.int64), span.astype(np.int64)


def fine_counts(x, origin, fine, lo, span) -> np.ndarray:
    """The records of ``x`` counted into the dense array of the finest grid's cells (int64, row
    major over the box ``lo``, ``span``): cell ``floor((x_j - o_j) / fine_j)`` of every record,
    in float64, in blocks of rows."""
    total = int(np.prod(span))
    acc = np.zeros(total, dtype=np.int64)
    m, d = x.shape
    rows = max(_ROWS, total)
    key = np.empty(min(rows, m), dtype=np.int64)
    c = np.empty(min(rows, m))
    for start in range(0, m, rows):
        xb = x[start : start + rows]
        k, cb = key[: xb.shape[0]], c[: xb.shape[0]]
        k.fill(0)
        for j in range(d):
            np.subtract(xb[:, j], origin[j], out=cb, dtype=np.float64)
            cb /= fine[j]
            np.floor(cb, out=cb)
            cb -= lo[j]
            np.clip(cb, 0, span[j] - 1, out=cb)  # never binds: the box holds every record
            k *= span[j]
            k += cb.astype(np.int64)
        acc += np.bincount(k, minlength=total)
    return acc


def level_cell_counts(dense, lo, span, shifts) -> LevelCells:
    """:class:`LevelCells` of every grid from the finest grid's dense counts: a coarser cell is
    the finest cells' index shifted right by the grid's ``shifts`` row."""
    keys = np.flatnonzero(dense)
    counts = dense[keys].astype(np.int64)
    fine = np.empty((keys.size, span.size), dtype=np.int64)
    rest = keys
    for j in range(span.size - 1, -1, -1):
        rest, fine[:, j] = np.divmod(rest, span[j])
    fine += lo
    levels = []
    for s in shifts:
        cells = fine >> s
        top = cells.max(axis=0) if cells.size else np.zeros(span.size, dtype=np.int64)
        low = cells.min(axis=0) if cells.size else np.zeros(span.size, dtype=np.int64)
        flat = np.zeros(keys.size, dtype=np.int64)
        for j in range(span.size):
            flat = flat * (top[j] - low[j] + 1) + (cells[:, j] - low[j])
        order = np.argsort(flat, kind="stable")
        fs = flat[order]
        starts = np.flatnonzero(np.r_[True, fs[1:] != fs[:-1]]) if fs.size else \
            np.zeros(0, dtype=np.int64)
        levels.append((cells[order[starts]], np.add.reduceat(counts[order], starts)
                       if starts.size else np.zeros(0, dtype=np.int64)))
    return LevelCells(int(counts.sum()), levels)


def level_cells(engine, origin, widths) -> LevelCells | None:
    """The cells and counts of the grids of ``widths`` ((grids, d), nested by powers of two)
    anchored at ``origin``, and the record count, in one pass over ``engine``'s records (on
    the Dask engine one task per chunk where it lives, the dense counts added in the fixed
    tree: one small array to the client); None when :func:`nested_plan` declines."""
    origin = np.asarray(origin, dtype=np.float64)
    plan = nested_plan(engine.bounds, engine.X.dtype, origin, widths)
    if plan is None:
        return None
    fine, shifts, lo, span = plan
    if hasattr(engine, "_xblocks"):  # the Dask engine
        from dask import delayed

        from ._dask_tasks import tree

        dense = engine._compute(tree([delayed(fine_counts)(x, origin, fine, lo, span)
                                      for x in engine._xblocks]))[0]
    else:
        dense = fine_counts(engine.X, origin, fine, lo, span)
    return level_cell_counts(dense, lo, span, shifts)
