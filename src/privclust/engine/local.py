"""In-memory NumPy engine: the default.

Every query is one vectorised pass over the records (a ``bincount`` over integer keys), done in
chunks so temporary memory stays bounded whatever n is.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from functools import partial
from itertools import compress

import numpy as np

from .._geometry import (
    flat_cell_keys,
    most_likely_labeller,
    nearest_centres,
    rows_outside,
    single_threaded_blas,
)
from .._parallel import N_THREADS, on_cores, on_cores_per_thread
from .._parallel import each_chunk as _each_chunk
from ._exact import (
    MAX_CHUNK_VALUES,
    BoxGrid,
    ExactSums,
    as_scratch,
    centred_exponents,
    centred_units,
    check_width,
    float_stats,
    group_sums,
    moment_parts,
    row_group_sums,
    scratch,
    sq_norm_parts,
)
from ._routes import axis_targets as _axis_targets
from ._routes import oblique_targets as _oblique_targets
from ._routes import unpark as _unpark
from .base import AssignmentStats, Engine, Grouping, MostLikelyComponent, NearestCentre

__all__ = ["LocalEngine", "LocalGrouping"]

_CHUNK_ELEMENTS = 1 << 18  # (row, dimension) cells per chunk: small temporaries, still fast
#: split_cells counts its keys into a table (no sort) while the table has at most this many
#: slots per record (measured on 4,000,000 keys over 1,016 slots: 20 ms against 550 ms)
_DENSE_KEYS = 2
assert _CHUNK_ELEMENTS <= MAX_CHUNK_VALUES  # chunk sums of grid units stay exact in float64


class LocalGrouping(Grouping):
    """Group index per record (-1 = not in any group)."""

    def __init__(self, group: np.ndarray, n_groups: int):
        self.group = group
        self.n_groups = int(n_groups)


class LocalCells(LocalGrouping):
    """A grouping into grid cells (:meth:`LocalEngine.split_cells`), with one record of every
    cell (``first``, record indices) to read the cells' indices from."""

    def __init__(self, group: np.ndarray, n_groups: int, first: np.ndarray):
        super().__init__(group, n_groups)
        self.first = first


class LocalEngine(Engine):
    """Records held as a NumPy array, clipped to the public bounds.

    Parameters
    ----------
    X : (n, d) array of finite numbers (float32 is kept as float32 to save memory).
    bounds : (d, 2) public bounds.
    """

    def __init__(self, X: np.ndarray, bounds: np.ndarray):
        self.bounds = np.asarray(bounds, dtype=float)
        dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
        lo = self.bounds[:, 0].astype(dtype)
        hi = self.bounds[:, 1].astype(dtype)
        step = max(1, _CHUNK_ELEMENTS // max(X.shape[1], 1))
        chunks = [slice(i, i + step) for i in range(0, X.shape[0], step)]
        outside = np.zeros(len(chunks), dtype=np.int64)

        def count_outside(i):  # whole-chunk comparisons: 2x faster than column by column
            out = np.less(X[chunks[i]], lo, out=scratch("outside", X[chunks[i]].shape, bool))
            out |= X[chunks[i]] > hi
            outside[i] = np.count_nonzero(out.any(axis=1)) if out.any() else 0

        on_cores(count_outside, range(len(chunks)))
        # Local diagnostic for the data holder; never part of a release.
        self.n_clipped_records = int(outside.sum())
        self.X = np.array(X, dtype=dtype, copy=X.dtype != dtype) if not \
            self.n_clipped_records else np.empty_like(X, dtype=dtype)  # np.clip's layout
        if self.n_clipped_records:  # chunk by chunk on the cores: the values of one np.clip
            on_cores(lambda sl: np.clip(X[sl], lo, hi, out=self.X[sl], dtype=dtype), chunks)
        self._bins_cache: tuple | None = None
        self._grid: BoxGrid | None = None  # the exact-sum grid (public: from the bounds)
        # (centres, labels) of the last nearest-centre assignment: iterative k-means queries ask
        # several questions of the same centres in one iteration, and the assignment is the
        # expensive part (n x k distances)
        self._labels_cache: tuple | None = None
        self._oblique: tuple | None = None  # hyperplanes' sides from prepare_oblique

    @property
    def n_records(self) -> int:
        """Exact n: for engine-internal use and tests, never released without noise."""
        return int(self.X.shape[0])

    def _chunks(self, elements: int = _CHUNK_ELEMENTS):
        n, d = self.X.shape
        step = max(1, elements // max(d, 1))
        for start in range(0, n, step):
            yield slice(start, min(n, start + step))

    # groupings -------------------------------------------------------------------------
    def root(self) -> LocalGrouping:
        """See :meth:`privclust.engine.base.Engine.root`."""
        return LocalGrouping(np.zeros(self.X.shape[0], dtype=np.int32), 1)

    def regroup(self, grouping, feature, threshold, left, right, n_groups,
                parked=None) -> LocalGrouping:
        """See :meth:`privclust.engine.base.Engine.regroup`."""
        feature = np.asarray(feature, dtype=np.int64)
        threshold = np.asarray(threshold, dtype=float)
        left = np.asarray(left, dtype=np.int32)
        right = np.asarray(right, dtype=np.int32)
        g = grouping.group
        if (feature < 0).all():  # pure relabel: no record needs a test
            table = np.append(left, np.int32(-1))  # index -1 (no group) maps to -1
            return LocalGrouping(_unpark(g, table[np.maximum(g, -1)], parked), n_groups)
        out = np.empty(g.shape, dtype=np.int32)
        left_t = np.append(left, np.int32(-1))  # index -1 (no group) maps to -1
        right_t = np.append(right, np.int32(-1))
        feature_t = np.append(feature.astype(np.int32), np.int32(-1))
        threshold_t = np.append(threshold, 0.0)
        for sl in self._chunks(1 << 20):  # chunked: temporaries stay small whatever n is
            _axis_targets(self.X, g, feature_t, threshold_t, left_t, right_t, parked, out, sl)
        return LocalGrouping(out, n_groups)

    def regroup_oblique(self, grouping, normal, offset, left, right, n_groups) -> LocalGrouping:
        """See :meth:`privclust.engine.base.Engine.regroup_oblique`."""
        normal = np.asarray(normal, dtype=float)
        offset_t = np.append(np.asarray(offset, dtype=float), 0.0)
        left_t = np.append(np.asarray(left, dtype=np.int32), np.int32(-1))  # -1 maps to -1
        right_t = np.append(np.asarray(right, dtype=np.int32), np.int32(-1))
        split_t = left_t != right_t  # only these groups need the test
        g = grouping.group
        if not split_t.any():  # pure relabel: no record needs a test
            return LocalGrouping(_unpark(g, left_t[np.maximum(g, -1)]), n_groups)

        out = np.empty(g.shape, dtype=np.int32)
        route = partial(_oblique_targets, self.X, g, normal, offset_t, left_t, right_t, split_t,
                        out)  # one chunk: writes out[sl] only
        known = self._known_sides(normal, offset_t[:-1])
        if known is None:  # chunked: small temporaries; the products release the GIL
            on_cores(route, self._chunks(), min_chunks=4, one_blas_thread=True)
        else:  # sides found by prepare_oblique: no pass over X
            gi = np.maximum(g, -1)
            out[...] = np.where(split_t[gi] & known[0], right_t[gi], left_t[gi])
            _unpark(g, out)
            for sl in compress(self._chunks(), known[1]):  # records near the hyperplane
                route(sl)  # as without the hint
        return LocalGrouping(out, n_groups)

    def prepare_oblique(self, normals, offsets) -> None:
        """A hint that :meth:`regroup_oblique` will test the hyperplanes ``x . normals[l] <=
        offsets[l]`` (one normal and offset a call, as LSHSplits' levels): every record's side
        of all of them from one product over X. A chunk with a record within the rounding
        error of a hyperplane is routed as without the hint (its side could depend on the
        order of the sum), so every route is the same either way."""
        normals = np.array(normals, dtype=float, ndmin=2)
        offsets = np.asarray(offsets, dtype=float)
        chunks = list(self._chunks())
        # |fl(x . r) - x . r| <= d 2^-53 |x| |r| in any order of the sum (|x| within the
        # public box): both sums together, with a margin
        tol = 4.0 * (self.X.shape[1] + 2) * 2.0**-53 * np.sqrt(
            (self.bounds**2).max(axis=1).sum() * (normals**2).sum(axis=1))
        sides = np.empty((self.X.shape[0], -(-normals.shape[0] // 8)), dtype=np.uint8)
        near = np.zeros((normals.shape[0], len(chunks)), dtype=bool)

        def fill(c):
            proj = self.X[chunks[c]].astype(float, copy=False) @ normals.T
            proj -= offsets  # the sign of the rounded difference is the sign of the exact one
            sides[chunks[c]] = np.packbits(proj > 0, axis=1, bitorder="little")
            near[:, c] = (np.abs(proj) <= tol).any(axis=0)

        on_cores(fill, range(len(chunks)), one_blas_thread=True)
        self._oblique = (normals, offsets, sides, near)

    def _known_sides(self, normal, offset):
        """``(right side (n,) bool, chunks to route as without the hint)`` of the hyperplane
        ``(normal, offset)`` from :meth:`prepare_oblique`; None when it was not prepared."""
        if self._oblique is None or normal.ndim != 1 or not offset.size:
            return None
        normals, offsets, sides, near = self._oblique
        if (offset != offset[0]).any():
            return None
        for lv in np.flatnonzero(offsets == offset[0]).tolist():
            if np.array_equal(normals[lv], normal):
                right = (sides[:, lv >> 3] >> np.uint8(lv & 7)) & np.uint8(1)
                return right.view(bool), near[lv]
        return None

    # aggregates ------------------------------------------------------------------------
    def count(self, grouping) -> np.ndarray:
        """See :meth:`privclust.engine.base.Engine.count`."""
        g = grouping.group
        return np.bincount(g[g >= 0], minlength=grouping.n_groups).astype(np.int64)

    def _bins(self, lo, width, n_bins):
        """Bin index of every (record, dimension), cached: DPM asks with the same bins per level."""
        key = (lo.tobytes(), width.tobytes(), int(n_bins))
        if self._bins_cache is not None and self._bins_cache[0] == key:
            return self._bins_cache[1]
        dtype = np.uint8 if n_bins <= 256 else (np.uint16 if n_bins <= 65536 else np.int32)
        bins = np.empty(self.X.shape, dtype=dtype)

        def fill(sl):  # in place in a scratch chunk, on the cores
            b = np.subtract(self.X[sl], lo, out=scratch("bins", self.X[sl].shape))
            b /= width
            np.floor(b, out=b)
            np.clip(b, 0, n_bins - 1, out=b)
            bins[sl] = b

        on_cores(fill, self._chunks())
        self._bins_cache = (key, bins)
        return bins

    def axis_histogram(self, grouping, lo, width, n_bins) -> np.ndarray:
        """See :meth:`privclust.engine.base.Engine.axis_histogram`."""
        lo = np.asarray(lo, dtype=float)
        width = np.asarray(width, dtype=float)
        n_bins = int(n_bins)
        n, d = self.X.shape
        n_groups = grouping.n_groups
        size = n_groups * d * n_bins
        per_group = lo.ndim == 2  # (n_groups, d) bins: computed per chunk, not cached
        bins = None if per_group else self._bins(lo, width, n_bins)
        offsets = (np.arange(d, dtype=np.intp) * n_bins)[None, :]
        g = grouping.group

        def add_chunk(acc, sl):  # one int64 histogram per thread
            gs = g[sl]
            gc = np.maximum(gs, 0)
            b = bins[sl] if not per_group else np.clip(
                np.floor((self.X[sl] - lo[gc]) / width[gc]), 0, n_bins - 1).astype(np.intp)
            keep = gs >= 0
            if not keep.all():
                if not keep.any():
                    return
                gs, b = _kept_rows(keep, gs, b)
            keys = np.add(b, offsets, out=scratch("histogram keys", b.shape, np.intp))
            first = as_scratch("histogram groups", gs, np.intp)
            first *= d * n_bins
            keys += first[:, None]  # (group, dimension, bin)
            np.add.at(acc, keys.ravel(), 1)  # int64 counts, intp keys: 2x a bincount, no GIL

        parts = on_cores_per_thread(lambda: np.zeros(size, dtype=np.int64), add_chunk,
                                    self._chunks())
        # int32 counts when no bin can overflow: halves the (groups, d, bins) array
        out = sum(parts, np.zeros(size, dtype=np.int64))
        return out.astype(np.int32 if n < 2**31 else np.int64).reshape(n_groups, d, n_bins)

    def centred_sums(self, grouping, centres) -> np.ndarray:
        """See :meth:`privclust.engine.base.Engine.centred_sums`."""
        return self.exact_centred_sums(grouping, centres).to_float()

    def exact_centred_sums(self, grouping, centres) -> ExactSums:
        """:meth:`centred_sums` as exact integer totals (:mod:`privclust.engine._exact`)."""
        centres = np.asarray(centres, dtype=float)
        n_groups = grouping.n_groups
        d = self.X.shape[1]
        check_width(d)
        exp = centred_exponents(self.bounds, centres)
        inv_step = np.ldexp(1.0, -exp)
        g = grouping.group

        def add_chunk(total, sl):  # one exact total per thread (and scratch arrays)
            gs = g[sl]
            keep = gs >= 0
            x = self.X[sl]
            if not keep.all():
                if not keep.any():
                    return
                gs, x = _kept_rows(keep, gs, x)
            gs = as_scratch("labels", gs, np.intp)
            total.add(row_group_sums(gs, centred_units(x, centres, gs, inv_step), n_groups))

        # exact totals do not depend on the order of the additions: threads change nothing
        parts = on_cores_per_thread(lambda: ExactSums.zeros((n_groups, d), exp), add_chunk,
                                    self._chunks(), min_chunks=4)
        return sum(parts, ExactSums.zeros((n_groups, d), exp))

    def group_neighbour_gaps(self, grouping):
        """Per group and dimension, the gaps between consecutive sorted values of the group's
        records: ``(gaps (m, d) float64, group (m,))`` with ``m = sum(n_g - 1)``."""
        g = grouping.group
        rows = np.flatnonzero(g >= 0)
        order = rows[np.argsort(g[rows], kind="stable")]
        gs = g[order].astype(float)[:, None]
        lo = self.bounds[:, 0]
        span = 2.0 * (self.bounds[:, 1] - lo)
        # groups are contiguous after the argsort; an offset of group * 2 * range keeps them
        # apart while one sort per column orders the values inside each group
        keys = (self.X[order] - lo) + gs * span
        keys.sort(axis=0)
        keys -= gs * span
        gaps = np.diff(keys, axis=0)
        same = gs[1:, 0] == gs[:-1, 0]
        return np.maximum(gaps[same], 0.0), g[order][1:][same]

    def neighbour_gaps(self, dtype=np.float32, dither=None, undithered=None) -> np.ndarray:
        """Gaps per dimension, (n-1, d), in ``dtype`` (float32 by default: several times faster
        to sort; rounding is monotone, so a record inserted between two others still splits one
        gap into two that are each no larger, which is all the interval-size sensitivity uses).
        ``dither``: see :meth:`Engine.neighbour_gaps`. ``undithered``: the gaps of an earlier
        call without dither (in ``dtype``), overwritten and returned: only the dithered columns
        are computed (the others would come out the same), with the same draws.

        A few columns at a time (:data:`_GAP_COLUMNS`): one read of their cache lines of X
        instead of one per column; the dither offsets are drawn on this thread in column order
        (the draws keep their order), and every block is cast, dithered, sorted and
        differenced on a pool thread (NumPy's casts and sort release the GIL). Every column is
        sorted by the same ``np.sort`` as one column alone, so the gaps are the same bit for
        bit; memory stays one copy of X plus a few blocks of columns."""
        n, d = self.X.shape
        if undithered is None:
            gaps = np.empty((d, max(n - 1, 0)), dtype=dtype)
            blocks = [(j0, min(d, j0 + _GAP_COLUMNS)) for j0 in range(0, d, _GAP_COLUMNS)]
        else:
            gaps = undithered.T
            blocks = [] if dither is None else _column_runs(dither[0] > 0, _GAP_COLUMNS)
        if n < 2 or d == 0:
            return gaps.T

        def finish(j0, j1, offsets):
            block = _gap_columns(self.X, j0, j1, dtype, offsets)
            block.sort(axis=1)
            np.subtract(block[:, 1:], block[:, :-1], out=gaps[j0:j1])

        with ThreadPoolExecutor(N_THREADS) as pool:
            pending = []
            for j0, j1 in blocks:
                offsets = {} if dither is None else {  # drawn here, in column order
                    j: dither[0][j] * dither[1](n) for j in range(j0, j1) if dither[0][j] > 0}
                pending.append(pool.submit(finish, j0, j1, offsets))
                if len(pending) > N_THREADS:  # bounded memory: a few blocks in flight
                    pending.pop(0).result()
            for job in pending:
                job.result()
        return gaps.T

    def lattice_misses(self, feature, steps):
        """See :meth:`privclust.engine.base.Engine.lattice_misses`."""
        # one pass over the distinct values (few: this is asked for features with many ties)
        values, counts = np.unique(self.X[:, feature].astype(float), return_counts=True)
        out = np.empty(len(steps), dtype=np.int64)
        for i, step in enumerate(steps):
            off = np.abs(values - step * np.round(values / step))
            out[i] = counts[off > 2e-6 * np.maximum(np.abs(values), step)].sum()
        return out

    def cell_counts(self, origin, cell_width):
        """See :meth:`privclust.engine.base.Engine.cell_counts`."""
        origin = np.asarray(origin, dtype=float)
        cell_width = np.asarray(cell_width, dtype=float)
        n, d = self.X.shape
        if n == 0:
            return np.zeros((0, d), dtype=np.int64), np.zeros(0, dtype=np.int64)
        lo, span, strides = cell_index_box(self.bounds, origin, cell_width)
        if strides is None:  # keys would overflow: unique rows
            idx = np.floor((self.X - origin) / cell_width).astype(np.int64)
            cells, counts = np.unique(idx, axis=0, return_counts=True)
            return cells, counts.astype(np.int64)
        total = int(np.prod(span))
        keys = np.empty(n, dtype=np.int32 if total < 2**31 else np.int64)

        def fill(sl):  # one integer key per record, chunk by chunk
            flat_cell_keys(self.X[sl], origin, cell_width, lo, span, strides, out=keys[sl])

        _each_chunk(fill, self._chunks(), n)
        # one bincount over the box beats sorting the keys only while the box is not much
        # larger than n (measured: 1.1 vs 1.2 ms at n keys over n cells, 20 vs 0.3 ms over 100 n)
        if total <= n:
            acc = np.bincount(keys, minlength=total)  # memory-bound: threads do not help
            del keys
            ukeys = np.flatnonzero(acc)
            counts = acc[ukeys]
        else:
            ukeys, counts = np.unique(keys, return_counts=True)
        cells = cells_of_keys(ukeys, lo, strides)
        return cells, counts.astype(np.int64)

    def split_cells(self, grouping, origin, cell_width, dims, keep=None):
        """Split every group into its halves along ``dims`` on a grid (one level of a quadtree
        per call: HSTKMeans and EMMC).

        A record of group ``g`` goes to the child ``(g, bits)``, ``bits = sum_i (c_i & 1) << i``
        with ``c_i = floor((x_{dims[i]} - origin) / cell_width)`` its cell index along
        ``dims[i]`` (in float64, as :func:`flat_cell_keys` computes cells): its half of the
        group. When every group is one cell of the grid twice as wide along ``dims``, the
        children are the non-empty cells of this grid (the cell widths are powers of two
        apart, so ``floor(2 y) >> 1 == floor(y)`` exactly). One pass over the split features
        and one sort of the records' integer keys: no per-cell work in Python and no sort of
        (record, feature) rows.

        ``keep``: a boolean per group, or None (all); a group not kept has no children (a tree
        grows only below its released cells: in many dimensions the others are most cells).

        Returns ``(children, parent, bits, counts)``: a :class:`LocalCells` grouping whose
        group ``i`` holds the records of child ``i`` (records in no group stay in none) and,
        per child in ``(parent, bits)`` order, its parent group, bits and count ((m,) int64).
        """
        origin = np.asarray(origin, dtype=float)
        cell_width = np.asarray(cell_width, dtype=float)
        dims = np.asarray(dims, dtype=np.int64)
        b = dims.size
        if not 0 < b <= 62:
            raise ValueError(f"split_cells splits 1 to 62 features at once, got {b}")
        g = grouping.group
        bits = self._half_bits(origin[dims], cell_width[dims], dims)
        inside = np.flatnonzero(g >= 0)
        if keep is not None:
            inside = inside[np.asarray(keep, dtype=bool)[g[inside]]]
        parent = g[inside].astype(np.int64)
        if grouping.n_groups <= (1 << (62 - b)):  # one int64 key per record
            ukeys, first, inverse, counts = self._unique_keys((parent << b) | bits[inside],
                                                              grouping.n_groups << b)
            uparent, ubits = ukeys >> b, ukeys & ((1 << b) - 1)
        else:  # keys would overflow: sort (parent, bits) pairs
            pb = bits[inside]
            order = np.lexsort((pb, parent))
            p_s, b_s = parent[order], pb[order]
            new = np.ones(order.size, dtype=bool)
            new[1:] = (p_s[1:] != p_s[:-1]) | (b_s[1:] != b_s[:-1])
            starts = np.flatnonzero(new)
            first, uparent, ubits = order[starts], p_s[starts], b_s[starts]
            counts = np.diff(np.append(starts, order.size))
            inverse = np.empty(order.size, dtype=np.int64)
            inverse[order] = np.cumsum(new) - 1
        m = uparent.size
        out = np.full(g.shape, -1, dtype=np.int32 if m < 2**31 else np.int64)
        out[inside] = inverse.ravel()
        return (LocalCells(out, m, inside[first]), uparent.astype(np.int64),
                ubits.astype(np.int64), counts.astype(np.int64))

    @staticmethod
    def _unique_keys(keys, total):
        """``np.unique(keys, return_index=True, return_inverse=True, return_counts=True)`` of
        keys in ``[0, total)``: counted into a table of ``total`` slots when that is at most
        ``_DENSE_KEYS`` per key (linear time: the tree's levels over few cells), else from an
        unstable argsort (several times faster than the stable one of ``np.unique``); the first
        index of a key is the least record index holding it."""
        if total <= _DENSE_KEYS * keys.size + (1 << 16):
            acc = np.bincount(keys, minlength=total)
            ukeys = np.flatnonzero(acc)
            rank = np.zeros(total, dtype=np.int64)
            rank[ukeys] = np.arange(ukeys.size)
            first = np.full(total, keys.size, dtype=np.int64)
            np.minimum.at(first, keys, np.arange(keys.size))
            return ukeys, first[ukeys], rank[keys], acc[ukeys]
        order = np.argsort(keys)
        ks = keys[order]
        new = np.ones(ks.size, dtype=bool)
        np.not_equal(ks[1:], ks[:-1], out=new[1:])
        starts = np.flatnonzero(new)
        inverse = np.empty(ks.size, dtype=np.int64)
        inverse[order] = np.cumsum(new) - 1
        first = np.minimum.reduceat(order, starts) if ks.size else starts
        return ks[starts], first, inverse, np.diff(np.append(starts, ks.size))

    def _half_bits(self, origin, cell_width, dims):
        """``sum_i (floor((x_{dims[i]} - origin_i) / cell_width_i) & 1) << i`` per record."""
        n, d = self.X.shape
        b = dims.size
        shifts = self._fine_cells(origin, cell_width, dims)
        out = np.empty(n, dtype=np.int64)
        exact = b <= 52  # a float64 dot of 0/1 values with powers of two is exact below 2^53
        weights = np.exp2(np.arange(b)) if exact else None
        for sl in self._chunks(_CHUNK_ELEMENTS * d // b):
            if shifts is not None:  # bit s of the cached finer cell index: the cell's parity
                q = (self._cell_cache[0][dims, sl] >> shifts[:, None]).T & np.int16(1)
            else:
                q = np.subtract(self.X[sl][:, dims], origin, dtype=np.float64)
                q /= cell_width
                np.floor(q, out=q)
                half = np.floor(q * 0.5)
                q -= half + half  # the parity of the cell index: 0.0 or 1.0
            if exact:
                out[sl] = q.astype(np.float64, copy=False) @ weights
            else:
                out[sl] = (q.astype(np.int64) << np.arange(b, dtype=np.int64)).sum(axis=1)
        return out

    def _fine_cells(self, origin, cell_width, dims):
        """Shifts ``s`` with ``floor((x_j - o_j) / w_j) == cells[j] >> s_j`` (j in ``dims``),
        ``cells`` a cache of the records' cell indices on grids ``2^K`` times finer (the most
        int16 holds), filled where it cannot answer; None: no such K. Widths a power of two
        apart give ``(x - o) / (w 2^-K) == 2^K ((x - o) / w)`` and ``floor(2^K y) >> K ==
        floor(y)`` exactly: the float path's cells from one pass over a feature."""
        n, d = self.X.shape
        cache = getattr(self, "_cell_cache", None)
        if cache is None or cache[3] is not self.X:  # (a copy of the engine on other records)
            cache = self._cell_cache = (np.empty((d, n), np.int16), np.full(d, np.nan),
                                        np.full(d, np.nan), self.X)  # pages: rows filled only
        cells, org, fine = cache[:3]
        box = self.bounds[dims].astype(self.X.dtype).astype(np.float64)  # records as stored
        with np.errstate(all="ignore"):
            s = np.frexp(cell_width / fine[dims])[1] - 1
            ok = (org[dims] == origin) & (s >= 0) & (s < 16)
            ok &= np.ldexp(fine[dims], s) == cell_width
            # indices are monotone in the value: the bounds' indices bound every record's
            top = np.maximum(-np.floor((box[:, 0] - origin) / cell_width),
                             np.floor((box[:, 1] - origin) / cell_width) + 1.0)
            room = 15.0 - np.ceil(np.log2(np.maximum(top, 1.0)))  # halvings int16 holds
        if ok.all():
            return s.astype(np.int16)
        need = np.flatnonzero(~ok)
        if not ((room[need] >= 0).all() and (cell_width > 0).all()):
            return None
        k = room[need].astype(np.int64)
        if ((step := np.ldexp(cell_width[need], -k)) < np.finfo(float).tiny).any():
            return None  # scaling by 2^-K must stay exact (normal floats)
        rows = dims[need]
        for sl in self._chunks(_CHUNK_ELEMENTS * d // need.size):
            q = np.subtract(self.X[sl][:, rows], origin[need], dtype=np.float64)
            q /= step
            cells[rows, sl] = np.floor(q, out=q).T  # integers that int16 holds (room)
        org[rows], fine[rows], s[need] = origin[need], step, k
        return s.astype(np.int16)

    def group_cells(self, grouping, origin, cell_width):
        """The grid cell of every group, for groups that each lie in one cell (the children
        of :meth:`split_cells`): ``floor((x - origin) / cell_width)`` of one record of each
        group, (n_groups, d) int64."""
        origin = np.asarray(origin, dtype=float)
        cell_width = np.asarray(cell_width, dtype=float)
        first = getattr(grouping, "first", None)
        if first is None:
            g = grouping.group
            inside = np.flatnonzero(g >= 0)
            _, at = np.unique(g[inside], return_index=True)
            first = inside[at]
        x = np.subtract(self.X[first], origin, dtype=np.float64)
        x /= cell_width
        return np.floor(x).astype(np.int64)

    def assignment_stats(self, assignment, *, second_moments=False, squared_norms=False,
                         about=None):
        """See :meth:`privclust.engine.base.Engine.assignment_stats`."""
        about = self._check_about(about)
        st = self.exact_assignment_stats(assignment, second_moments=second_moments,
                                         squared_norms=squared_norms)
        return float_stats(st.counts, st.sums, st.moments, st.sq_norms, about)

    def exact_assignment_stats(self, assignment, *, second_moments=False, squared_norms=False):
        """:meth:`assignment_stats` with exact integer totals (:class:`ExactSums`) for the
        sums, moments and squared norms (:mod:`privclust.engine._exact`).

        One pass over the chunks: each chunk's labels, then its exact statistics. A
        most-likely assignment (``k d (d + 1)`` multiply-adds a record) shares the chunks
        between threads on big data, each adding into its own exact totals, which are then
        added: exact sums do not depend on the order, so the result is the same bit for bit
        (:func:`_on_threads`)."""
        threaded = most_likely = False
        label_dtype = np.intp
        if isinstance(assignment, NearestCentre):
            centres = np.asarray(assignment.centres, dtype=float)
            labels = self._labels(centres)  # cached: Lloyd asks twice for the same centres
            k = centres.shape[0]

            def chunk_labels(sl, x):
                return labels[sl]
        elif isinstance(assignment, MostLikelyComponent):
            chunk_labels = _most_likely(assignment)
            k = np.asarray(assignment.means).shape[0]
            most_likely = True
            threaded = _share_cores(self.n_records, k, self.n_features)
            label_dtype = _label_dtype(k)
        else:
            raise TypeError(f"unknown assignment {type(assignment).__name__}")
        d = self.n_features
        check_width(d)
        grid = self._grid
        if grid is None or grid.dtype != self.X.dtype:
            grid = self._grid = BoxGrid(self.bounds, self.X.dtype)
        classes = grid.square_classes()

        def new_stats():
            return AssignmentStats(
                np.zeros(k, dtype=np.int64), ExactSums.zeros((k, d), grid.exp),
                ExactSums.zeros((k, d, d), grid.exp[:, None] + grid.exp)
                if second_moments else None,
                ExactSums.zeros((len(classes), k), 2 * np.array(
                    [grid.exp[c[0]] for c in classes])[:, None]) if squared_norms else None)

        def add_chunk(st, sl):
            x = self.X[sl]
            lab = as_scratch("labels", chunk_labels(sl, x), label_dtype)
            u = grid.units(x)
            st.counts += np.bincount(lab, minlength=k)
            st.sums.add(group_sums(lab, u, k))
            if squared_norms:
                st.sq_norms.add_parts(sq_norm_parts(lab, u, k, classes))
            if second_moments:
                st.moments.add_parts(moment_parts(lab, u, k))

        if threaded:
            with single_threaded_blas():  # small products (see most_likely_labeller)
                return _on_threads(new_stats, add_chunk, list(self._chunks()))
        st = new_stats()
        with single_threaded_blas() if most_likely else nullcontext():
            for sl in self._chunks():
                add_chunk(st, sl)
        return st

    # k-means family ------------------------------------------------------------------
    def _labels(self, centres: np.ndarray) -> np.ndarray:
        """Nearest-centre index of every record, cached for the last ``centres`` asked."""
        cached = self._labels_cache
        if cached is not None and np.array_equal(cached[0], centres):
            return cached[1]
        labels = nearest_centres(self.X, centres)
        if centres.shape[0] <= np.iinfo(np.int32).max:
            labels = labels.astype(np.int32)  # half the memory of the cache
        self._labels_cache = (centres.copy(), labels)
        return labels

    @staticmethod
    def _zone_members(x, lab, zone_centres, zone_radii):
        inside = ((x - zone_centres[lab]) ** 2).sum(axis=1) < zone_radii[lab] ** 2
        return lab, inside

    def zone_cell_counts(self, centres, zone_centres, zone_radii, cell_centres):
        """See :meth:`privclust.engine.base.Engine.zone_cell_counts`."""
        centres = np.asarray(centres, dtype=float)
        zone_centres = np.asarray(zone_centres, dtype=float)
        zone_radii = np.asarray(zone_radii, dtype=float)
        cell_centres = np.asarray(cell_centres, dtype=float)
        k, m = cell_centres.shape[:2]
        out = np.zeros(k * m, dtype=np.int64)
        labels = self._labels(centres)
        cc2 = (cell_centres**2).sum(axis=2)  # (k, m)
        for sl in self._chunks():
            x = self.X[sl].astype(float, copy=False)
            lab, inside = self._zone_members(x, labels[sl], zone_centres, zone_radii)
            if not inside.any():
                continue
            x, lab = x[inside], lab[inside]
            d2 = cc2[lab] - 2.0 * np.einsum("nd,nmd->nm", x, cell_centres[lab])
            out += np.bincount(lab * m + np.argmin(d2, axis=1), minlength=k * m)
        return out.reshape(k, m)

    def zone_records(self, centres, zone_centres, zone_radii):
        """See :meth:`privclust.engine.base.Engine.zone_records`."""
        centres = np.asarray(centres, dtype=float)
        zone_centres = np.asarray(zone_centres, dtype=float)
        zone_radii = np.asarray(zone_radii, dtype=float)
        k = centres.shape[0]
        labels = self._labels(centres)
        points, zone = [], []
        for sl in self._chunks():
            x = self.X[sl].astype(float, copy=False)
            lab, inside = self._zone_members(x, labels[sl], zone_centres, zone_radii)
            rows = np.flatnonzero(inside)
            points.append(x[rows])
            zone.append(lab[rows])
        points = np.concatenate(points)
        zone = np.concatenate(zone)
        order = np.argsort(zone, kind="stable")  # by zone, records in their original order
        edges = np.searchsorted(zone[order], np.arange(k + 1))
        points = points[order]
        return [points[edges[i] : edges[i + 1]] for i in range(k)]


def _most_likely(assignment: MostLikelyComponent):
    """A function ``(slice, x) -> labels``: the most likely component of each record
    (:func:`privclust._geometry.most_likely_labeller`, the one implementation both engines
    run; ties to the lower index)."""
    labeller = most_likely_labeller(assignment.means, assignment.cov_cholesky,
                                    assignment.log_weights)

    def labels(sl, x):
        return labeller(x)

    return labels


def _label_dtype(k: int):
    """The smallest integer type of ``k`` labels: 8 or 16-bit labels take NumPy's radix sort in
    ``moment_parts``'s stable argsort (3x faster than on intp, measured; a stable sort's
    result does not depend on the type, and every other use of the labels is an index)."""
    return np.uint8 if k <= 1 << 8 else (np.int16 if k <= 1 << 15 else np.intp)


#: Multiply-adds (records x components x (features + 1)^2) above which a most-likely pass
#: shares its chunks between threads (about 5 ms of work on one core: far above the cost of
#: starting the threads).
_THREADED_WORK = 1 << 26


def _share_cores(n: int, k: int, d: int) -> bool:
    """Whether a most-likely pass over ``n`` records runs on threads: on big enough data, with
    more than one core and more than one chunk, and only from the main thread (a pass that
    already runs in a worker thread, e.g. a Dask task, leaves the cores to its pool)."""
    return (N_THREADS > 1 and n * k * (d + 1) ** 2 >= _THREADED_WORK
            and n > _CHUNK_ELEMENTS // max(d, 1)
            and threading.current_thread() is threading.main_thread())


def _on_threads(new_stats, add_chunk, chunks) -> AssignmentStats:
    """``add_chunk(stats, chunk)`` for every chunk on a pool of threads, each thread into its
    own ``new_stats()`` (scratch arrays are per thread too), then the threads' totals added.
    Counts are integers and :class:`ExactSums` add exactly, so the result does not depend on
    which thread took which chunk."""
    out = new_stats()
    for st in on_cores_per_thread(new_stats, add_chunk, chunks, min_chunks=2):
        out = AssignmentStats(
            out.counts + st.counts, out.sums + st.sums,
            None if st.moments is None else out.moments + st.moments,
            None if st.sq_norms is None else out.sq_norms + st.sq_norms)
    return out


#: Columns per block of :meth:`LocalEngine.neighbour_gaps`: 8 float64 columns share one
#: cache line of a row.
_GAP_COLUMNS = 8


def _column_runs(mask, longest: int) -> list[tuple[int, int]]:
    """``(j0, j1)`` runs of consecutive columns where ``mask`` holds, ``longest`` at most."""
    ends = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return [(j, min(b, j + longest)) for a, b in ends.reshape(-1, 2).tolist()
            for j in range(a, b, longest)]


def _gap_columns(X, j0, j1, dtype, offsets) -> np.ndarray:
    """Columns ``j0:j1`` of X as rows of a ``(j1 - j0, n)`` array in ``dtype``; a column ``j``
    in ``offsets`` is dithered as :meth:`LocalEngine.neighbour_gaps` always did
    (``x + step * offsets`` in float64, then cast)."""
    block = np.empty((j1 - j0, X.shape[0]), dtype=dtype)
    block[...] = X[:, j0:j1].T  # the same cast as astype
    for j, shift in offsets.items():
        block[j - j0] = X[:, j] + shift
    return block


def _kept_rows(keep, *arrays) -> list:
    """The rows of each array where ``keep`` is true, in this thread's scratch arrays (a fresh
    copy per chunk costs page faults, and in a Dask worker, whose allocator maps every large
    array afresh, more than the pass itself)."""
    rows = np.flatnonzero(keep)
    # take, mode "clip" (every index is valid): compress, and take with "raise", first fill
    # a temporary copy of their output
    return [np.take(a, rows, axis=0, mode="clip",
                    out=scratch(f"kept rows {i}", (rows.size, *a.shape[1:]), a.dtype))
            for i, a in enumerate(arrays)]


def records_outside(x, lo, hi) -> int:
    """How many rows of ``x`` have a value outside ``[lo, hi]`` (see :func:`rows_outside`),
    counted in cache-sized steps of rows (a whole array's column reductions would each read
    all of it)."""
    step = max(1, _OUTSIDE_VALUES // max(x.shape[1], 1))
    total = 0
    for i in range(0, x.shape[0], step):
        mask = rows_outside(x[i : i + step], lo, hi)
        total += 0 if mask is None else int(np.count_nonzero(mask))
    return total


_OUTSIDE_VALUES = 1 << 18  # values per step of records_outside: its masks stay in cache


def cell_index_box(bounds, origin, cell_width):
    """``(lo, span, strides)`` of the grid cells the bounds cover: records are clipped to the
    public bounds, so the index box comes from them (no pass over the data). ``strides`` is
    None when flat keys would overflow 62 bits."""
    lo = np.floor((bounds[:, 0] - origin) / cell_width).astype(np.int64)
    hi = np.floor((bounds[:, 1] - origin) / cell_width).astype(np.int64)
    span = hi - lo + 1
    if float(np.prod(span.astype(float))) >= 2.0**62:
        return lo, span, None
    return lo, span, np.cumprod(np.r_[1, span[:0:-1]])[::-1].astype(np.int64)


def cells_of_keys(keys: np.ndarray, lo: np.ndarray, strides: np.ndarray) -> np.ndarray:
    """The (m, d) cell indices of flat keys over the box ``lo`` with ``strides``."""
    cells = np.empty((keys.size, strides.size), dtype=np.int64)
    rest = keys
    for j in range(strides.size):
        cells[:, j], rest = np.divmod(rest, strides[j])
    cells += lo
    return cells
