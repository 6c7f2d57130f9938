"""Which span of a DP-DBSCAN model a point falls in: ``predict`` and ``labels_``.

Post-processing of the released spans applied to points (no release, no noise). A point in a
core cell takes that cell's span; with ``border=True`` a point within ``eps`` of a core cell
takes the span of the nearest one (Sec. 5.3). The work is one table lookup per point: every
cell is given a *code* from the released cells alone (its span; -1, no span; or
:data:`NEEDS_POINTS`, when the answer depends on where in the cell the point lies), and only
the points whose cell says :data:`NEEDS_POINTS` go through the point-by-point rule.
"""

from __future__ import annotations

import numpy as np

from .._geometry import flat_cell_keys, rows_outside
from .._parallel import each_chunk
from .._scratch import scratch
from ._grid import _c_strides, _unflat, neighbour_offsets

#: The code of a cell whose points need the point-by-point border rule.
NEEDS_POINTS = -2
_CHUNK = 1 << 20  # points per lookup chunk
_BORDER_CHUNK = 1 << 18  # points per border-pass chunk: bounded temporaries
_LUT_CELLS = 1 << 24  # grids up to this many cells get a dense lookup table
_PAIRS = 1 << 23  # (core cell, offset) pairs per step of the near-cell reduction


def _reduce_by_key(keys, high, low, covered):
    """Per distinct key (sorted): the largest and smallest label and whether any pair covers."""
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return (keys[starts], np.maximum.reduceat(high[order], starts),
            np.minimum.reduceat(low[order], starts), np.logical_or.reduceat(covered[order], starts))


def border_cell_codes(core_keys, core_labels, shape, offsets, width, eps):
    """The code of every cell with a core cell in its NB: ``(keys (sorted), codes)``.

    A core cell's code is its span. Another cell's code is the one span of all the core cells
    in its NB when there is exactly one and one of those cells is within ``eps`` of every
    point of the cell (offset ``o`` with ``width * ||o|| < eps``: the farthest point of the cell
    is that far from the box of cell ``c + o``), so every point of the cell has that label
    under the point-by-point rule; else :data:`NEEDS_POINTS`. Computed on the core cells and
    their offsets only (a sort of ``kappa`` pairs per core cell, in steps), never on the grid.
    """
    shape = np.asarray(shape, dtype=np.int64)
    strides = _c_strides(shape)
    cols = np.ascontiguousarray(_unflat(np.asarray(core_keys, dtype=np.int64), strides).T)
    labels = np.asarray(core_labels, dtype=np.int64)
    # strictly inside the open ball, with a margin for the rounding of the point distances
    whole = (offsets.astype(float) ** 2).sum(axis=1) * width * width < eps * eps * (1.0 - 1e-9)
    acc = None
    step = max(1, _PAIRS // max(1, labels.size))
    for start in range(0, offsets.shape[0], step):
        parts = []
        for o, cover in zip(offsets[start : start + step], whole[start : start + step],
                            strict=True):  # 1-D columns per offset: no (pairs, d) arrays
            ok = np.ones(labels.size, dtype=bool)
            key = np.zeros(labels.size, dtype=np.int64)
            for j in range(shape.size):
                c = cols[j] + o[j]
                ok &= (c >= 0) & (c < shape[j])
                key += c * strides[j]
            labs = labels[ok]
            parts.append((key[ok], labs, labs, np.full(labs.size, cover)))
        if acc is not None:
            parts.append(acc)
        acc = _reduce_by_key(*(np.concatenate(p) for p in zip(*parts, strict=True)))
    keys, high, low, covered = acc
    codes = np.where(covered & (low == high), high, NEEDS_POINTS)
    codes[np.searchsorted(keys, core_keys)] = labels  # offset 0 is in NB: every core key is there
    return keys, codes


class SpanLookup:
    """A fitted DP-DBSCAN model's lookup of points (see the module docstring).

    Parameters
    ----------
    model : DPDBSCAN
        A fitted model (its released attributes are read once, here).
    """

    def __init__(self, model):
        self.core_keys = model._core_keys
        self.core_labels = np.asarray(model.span_labels_, dtype=np.int64)
        self.shape = np.asarray(model.grid_shape_, dtype=np.int64)
        self.strides = _c_strides(self.shape)
        self.n_cells = int(model.n_cells_)
        self.origin = np.asarray(model.grid_origin_, dtype=np.float64)
        self.width = float(model.cell_width_)
        self.lo = np.asarray(model.bounds_[:, 0], dtype=np.float64)
        self.hi = np.asarray(model.bounds_[:, 1], dtype=np.float64)
        self.border = bool(getattr(model, "border", False))
        self.eps = float(model.eps)
        self.offsets = neighbour_offsets(self.shape.size, float(model.eta))
        self.n_clusters = int(model.n_clusters_)
        self._table = None

    def table(self):
        """``(keys, codes)``, sorted: the cells that are not simply 'no span'."""
        if self._table is None:
            if self.border and self.core_keys.size:
                self._table = border_cell_codes(self.core_keys, self.core_labels, self.shape,
                                                self.offsets, self.width, self.eps)
            else:
                self._table = (self.core_keys, self.core_labels)
        return self._table

    def __call__(self, arr, dtype=np.int64) -> np.ndarray:
        """The span of every row of ``arr`` (-1: in no span, or outside the public bounds), as
        ``dtype`` (a Dask chunk's labels travel as int32: written so, not copied)."""
        n = arr.shape[0]
        if self.core_keys.size == 0 or n == 0:
            return np.full(n, -1, dtype=dtype)
        out = np.empty(n, dtype=dtype)  # every chunk writes its slice
        keys, codes = self.table()
        lut = None
        if self.n_cells <= _LUT_CELLS and self.n_cells <= 8 * n:
            lut = np.full(self.n_cells, -1, dtype=np.int32 if self.n_clusters < 2**31 else
                          np.int64)
            lut[keys] = codes
        d = self.shape.size
        width = np.full(d, self.width)
        zero = np.zeros(d, dtype=np.int64)

        def cell_codes(start):  # the chunks write disjoint slices of out
            x = arr[start : start + _CHUNK]
            outside = rows_outside(x, self.lo, self.hi)
            # rows outside the bounds get -1 below; clipped first, their cell index stays
            # finite (values near the float limit would overflow it)
            inside = x if outside is None else np.clip(x, self.lo, self.hi)
            m = x.shape[0]  # keys and labels in this thread's scratch arrays
            key = flat_cell_keys(inside, self.origin, width, zero, self.shape, self.strides,
                                 out=scratch("span cell keys", (m,), np.int64))
            if lut is not None:
                lab = np.take(lut, key, out=scratch("span labels", (m,), lut.dtype),
                              mode="clip")  # every key is a cell of the grid
            else:
                pos = np.minimum(np.searchsorted(keys, key), keys.size - 1)
                lab = np.where(keys[pos] == key, codes[pos], -1)
            if outside is not None:
                lab[outside] = -1
            out[start : start + x.shape[0]] = lab

        each_chunk(cell_codes, range(0, n, _CHUNK), n)
        rows = np.flatnonzero(out == NEEDS_POINTS) if self.border else None
        if rows is not None and rows.size:
            core_lut = None
            if lut is not None:  # reused: the core cells' spans, -1 elsewhere
                lut.fill(-1)
                lut[self.core_keys] = self.core_labels
                core_lut = lut
            self._border(arr, out, rows, core_lut)
        return out

    def _border(self, arr, out, rows, core_lut) -> None:
        """The point-by-point rule on ``rows`` (their cells' codes said so); ``core_lut``: the
        core cells' spans over the whole grid, or None (binary search instead)."""
        d = self.shape.size

        def chunk(start):  # the chunks' rows are disjoint
            r = rows[start : start + _BORDER_CHUNK]
            m = r.size  # in this thread's scratch arrays, as the whole pass
            raw = np.take(arr, r, axis=0, out=scratch("border rows", (m, d), arr.dtype),
                          mode="clip")  # "raise" would fill a temporary copy of out
            x = scratch("border x", (m, d))
            np.copyto(x, raw)
            c = scratch("border coords", (m, d))
            np.subtract(x, self.origin, out=c)
            c /= self.width
            np.floor(c, out=c)
            np.clip(c, 0, self.shape - 1, out=c)
            coords = scratch("border cells", (m, d), np.int64)
            np.copyto(coords, c, casting="unsafe")
            out[r] = self.nearest_core_span(x, coords, core_lut)

        each_chunk(chunk, range(0, rows.size, _BORDER_CHUNK), rows.size)

    def nearest_core_span(self, x, coords, core_lut=None) -> np.ndarray:
        """Span of the nearest core cell within ``eps`` of each point (-1: none), over the
        offsets NB of the point's cell (``coords``: its grid coordinates; ``core_lut``: the
        core cells' spans over the grid, else a binary search in the core cells). Its
        temporaries are this thread's scratch arrays (:mod:`privclust._scratch`): a Dask
        worker maps every large array afresh, and a border pass needs dozens per chunk."""
        w, shape, keys_ref = self.width, self.shape, self.core_keys
        m, d = x.shape
        best = scratch("nb best", (m,))
        best.fill(self.eps**2)
        label = np.full(m, -1, dtype=np.int64)
        cell = np.matmul(coords, self.strides, out=scratch("nb cell", (m,), np.int64))
        # per dimension, 1-D columns: the point's cell index and its position inside the cell
        cols = scratch("nb cols", (d, m), np.int64)
        np.copyto(cols, coords.T)
        frac = scratch("nb frac", (d, m))
        for j in range(d):
            np.multiply(cols[j], w, out=frac[j])
            frac[j] += self.origin[j]
            np.subtract(x[:, j], frac[j], out=frac[j])
        # per dimension and per offset value o, once: the squared gap to the cell o cells away
        # (max(o w - f, f - (o + 1) w, 0) with f in [0, w] the position inside the cell) and
        # whether that cell exists; every offset then only adds its dimensions' arrays
        sq, inside = {}, {}
        tmp = scratch("nb tmp", (m,))
        moved = scratch("nb moved", (m,), np.int64)
        for j in range(self.offsets.shape[1]):
            for o in np.unique(self.offsets[:, j]):
                o = int(o)
                if o == 0:
                    continue
                gap = sq[j, o] = scratch(f"nb gap {j} {o}", (m,))
                np.subtract(o * w, frac[j], out=gap)
                np.subtract(frac[j], (o + 1) * w, out=tmp)
                np.maximum(gap, tmp, out=gap)
                np.maximum(gap, 0.0, out=gap)
                np.multiply(gap, gap, out=gap)
                np.add(cols[j], o, out=moved)
                ok = inside[j, o] = scratch(f"nb inside {j} {o}", (m,), bool)
                np.greater_equal(moved, 0, out=ok)
                ok &= np.less(moved, shape[j], out=scratch("nb below", (m,), bool))
        ok = scratch("nb ok", (m,), bool)
        off_grid = scratch("nb off grid", (m,), bool)
        dist = scratch("nb dist", (m,))
        key = scratch("nb key", (m,), np.int64)
        better = scratch("nb better", (m,), bool)
        for off in self.offsets:
            ok.fill(True)
            dist.fill(0.0)
            for j in np.flatnonzero(off):
                ok &= inside[j, int(off[j])]
                dist += sq[j, int(off[j])]
            np.logical_not(ok, out=off_grid)
            np.add(cell, int(off @ self.strides), out=key)
            np.copyto(key, 0, where=off_grid)
            if core_lut is not None:
                lab = np.take(core_lut, key, out=scratch("nb lab", (m,), core_lut.dtype),
                              mode="clip")  # every key is a cell of the grid
                np.copyto(lab, -1, where=off_grid)
            else:
                pos = np.minimum(np.searchsorted(keys_ref, key), keys_ref.size - 1)
                lab = np.where(ok & (keys_ref[pos] == key), self.core_labels[pos], -1)
            np.greater_equal(lab, 0, out=better)
            better &= np.less(dist, best, out=off_grid)  # strict: the open ball B(p, eps)
            np.copyto(best, dist, where=better)
            np.copyto(label, lab, where=better)
        return label
