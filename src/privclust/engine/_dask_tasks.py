"""The tasks of the Dask engine: what runs on the workers, one chunk (or one sorting
partition) at a time, and the fixed tree that adds the chunks' aggregates.

Every task is pure: it receives a chunk and public parameters, applies the NumPy engine's own
code (:class:`~privclust.engine.local.LocalEngine`) or a piece of a distributed sort, and
returns an exact aggregate. Nothing here draws random numbers, so a retried task cannot draw
noise.
"""

from __future__ import annotations

import copy

import numpy as np
from dask import delayed

from .._geometry import flat_cell_keys
from .._scratch import scratch
from ._exact import ExactSums
from .base import AssignmentStats
from .local import LocalGrouping, records_outside

#: Rows per step of a chunk's cell-key pass (temporaries that stay in cache).
_KEY_ROWS = 1 << 17
#: Key ranges up to which a chunk's raw cell keys are cut by one mask per range (above: by
#: one sort of the keys).
_MASKED_PARTS = 8
#: Chunk sums merged per node of the reduction tree.
_FAN_IN = 8


def add(*parts):
    """Sum aggregates in the order given (arrays, exact totals, or tuples of them / None)."""
    first = parts[0]
    if isinstance(first, tuple):
        return tuple(None if f is None else add(*[p[i] for p in parts])
                     for i, f in enumerate(first))
    if isinstance(first, ExactSums):  # integer limbs: exact in any order
        out = first
        for p in parts[1:]:
            out = out + p
        return out
    out = np.array(first, copy=True)
    for p in parts[1:]:
        out += p
    return out


def tree(parts):
    """A fixed reduction tree over the chunk aggregates (its shape depends on the chunking)."""
    while len(parts) > 1:
        parts = [delayed(add)(*parts[i : i + _FAN_IN]) for i in range(0, len(parts), _FAN_IN)]
    return parts[0]


def on_block(proto, method, x, g, n_groups, args, kwargs):
    """``LocalEngine.method`` on one chunk (the chunk's group labels in ``g``, or None)."""
    eng = copy.copy(proto)
    eng.X = x
    if g is not None:
        args = (LocalGrouping(g, n_groups), *args)
    out = getattr(eng, method)(*args, **kwargs)
    if isinstance(out, AssignmentStats):
        return (out.counts, out.sums, out.moments, out.sq_norms)
    if isinstance(out, LocalGrouping):
        return out.group
    if isinstance(out, (tuple, ExactSums)):  # cell_counts: (cells, counts); exact sums
        return out
    return np.asarray(out, dtype=np.int64) if out.dtype.kind in "iu" else out


def regroup_chain(proto, ops, x, g, keep=None):
    """The chunk's group labels after the regroupings ``ops`` ((method, args, n_groups of
    its input) each), applied in order by the NumPy engine's code; with ``keep``, also the
    labels after the first ``keep`` of them, as a (2, rows) array (one pass for both)."""
    kept = g if keep == 0 else None
    for i, (method, args, n_groups) in enumerate(ops, 1):
        g = on_block(proto, method, x, g, n_groups, args, {})
        if i == keep:
            kept = g
    return g if keep is None else np.stack([kept, g])


def bins_block(x, proto, lo, width, n_bins):
    """The chunk's bin of every (record, dimension), as LocalEngine caches it."""
    eng = copy.copy(proto)
    eng.X = x
    return eng._bins(lo, width, n_bins)


def histogram_block(proto, x, bins, key, g, n_groups, lo, width, n_bins):
    """``LocalEngine.axis_histogram`` on one chunk, with the chunk's persisted bins."""
    eng = copy.copy(proto)
    eng.X = x
    eng._bins_cache = (key, bins)
    return eng.axis_histogram(LocalGrouping(g, n_groups), lo, width, n_bins)


def clip(x, lo, hi):
    """The chunk clipped to ``[lo, hi]`` (``np.clip``), or the chunk itself when no value lies
    outside and it has the bounds' type: the same values without a copy of the chunk (as the
    NumPy engine keeps its input)."""
    if x.dtype == lo.dtype and not outside(x, lo, hi)[0]:
        return x
    return np.clip(x, lo, hi)


def outside(x, lo, hi):
    """Rows of the chunk with a value outside ``[lo, hi]`` (a local diagnostic)."""
    return np.array([records_outside(x, lo, hi)], dtype=np.int64)


def bucket(v, lo, inv_width, n_buckets):
    b = np.floor((np.asarray(v, dtype=np.float64) - lo) * inv_width)
    np.clip(b, 0, n_buckets - 1, out=b)
    return b.astype(np.int64)


def bucket_hist(x, lo, inv_width, n_buckets, g=None, per_group=0):
    """Per column, the number of values in each bucket (``g``: buckets within groups)."""
    out = np.zeros((x.shape[1], n_buckets), dtype=np.int64)
    keep = None if g is None else g >= 0
    for j in range(x.shape[1]):
        col = x[:, j] if keep is None else x[keep, j]
        if g is None:
            b = bucket(col, lo[j], inv_width[j], n_buckets)
        else:
            b = g[keep].astype(np.int64) * per_group + bucket(col, lo[j], inv_width[j],
                                                               per_group)
        out[j] = np.bincount(b, minlength=n_buckets)
    return out


def split_block(x, lo, inv_width, n_buckets, lut, n_parts, g=None, per_group=0, span=None):
    """The chunk's values of every column cut into the sorting partitions: a flat list
    (column-major) of ``n_parts`` pieces per column; with groups, pieces are (keys, groups)."""
    keep = None if g is None else g >= 0
    out = []
    for j in range(x.shape[1]):
        col = x[:, j] if keep is None else x[keep, j]
        if g is not None:
            gk = g[keep]
            key = (col - lo[j]) + gk.astype(float) * span[j]  # LocalEngine's sort key
            b = gk.astype(np.int64) * per_group + bucket(col, lo[j], inv_width[j], per_group)
        else:
            key = col
            b = bucket(col, lo[j], inv_width[j], n_buckets) if n_parts > 1 else None
        if n_parts == 1:
            out.append(key if g is None else (key, gk))
            continue
        part = lut[j].astype(np.min_scalar_type(n_parts))[b]  # 8 or 16 bits: a radix sort
        if n_parts <= 8:  # a mask per partition: its rows in order, as the stable sort's
            pieces = [np.flatnonzero(part == p) for p in range(n_parts)]
        else:
            order = np.argsort(part, kind="stable")
            edges = np.searchsorted(part[order], np.arange(n_parts + 1))
            pieces = [order[a:z] for a, z in zip(edges[:-1], edges[1:], strict=True)]
        for rows in pieces:
            out.append(key[rows] if g is None else (key[rows], gk[rows]))
    return out


def sort_part(*pieces):
    """One partition sorted: ``(gaps, first, last)`` (None when it is empty)."""
    v = np.sort(np.concatenate(pieces)) if pieces else np.zeros(0)
    if v.size == 0:
        return None
    return np.subtract(v[1:], v[:-1]), v[0], v[-1]


def take_columns(x, cols):
    """Columns ``cols`` of a chunk, one row per column, (len(cols), rows): what a sorting task
    fetches from another worker, each column contiguous."""
    out = np.empty((len(cols), x.shape[0]), dtype=x.dtype)
    for i, j in enumerate(cols):
        out[i] = x[:, j]
    return out


def gap_block(x, cols, dtype, offsets):
    """A chunk's columns ``cols`` as a neighbour-gap pass sorts them: each plus its public
    dither offsets (``offsets[i]``, float64, or None) and cast to ``dtype``, (rows, len(cols))."""
    out = np.empty((x.shape[0], len(cols)), dtype=dtype)
    for i, j in enumerate(cols):
        out[:, i] = x[:, j] if offsets[i] is None else x[:, j] + offsets[i]
    return out


def sort_columns(dtype, offsets, *blocks):
    """Some columns of all chunks sorted in one task, from each chunk's
    :func:`take_columns`: their gaps, (columns, n - 1). ``offsets`` maps a column's position
    to its public dither (the values the NumPy engine adds, in float64, before the cast). Each
    column is gathered chunk by chunk into this worker thread's scratch arrays
    (:mod:`privclust._scratch`): no copy of all the columns at once."""
    n = sum(b.shape[1] for b in blocks)
    n_cols = blocks[0].shape[0]
    out = np.empty((n_cols, max(n - 1, 0)), dtype=dtype)
    for i in range(n_cols):
        v = scratch("gap sorted", (n,), dtype)
        pos = 0
        for b in blocks:
            m = b.shape[1]
            if i in offsets:  # the NumPy engine's float64 sum, then the cast
                np.copyto(v[pos : pos + m], np.add(b[i], offsets[i][pos : pos + m],
                                                   out=scratch("gap dithered", (m,))),
                          casting="unsafe")
            else:
                np.copyto(v[pos : pos + m], b[i], casting="unsafe")
            pos += m
        v.sort()
        np.subtract(v[1:], v[:-1], out=out[i])
    return out


def sort_group_part(span, *pieces):
    """One partition of (key, group) sorted: gaps within groups, as LocalEngine computes them
    (``(key - g * span)`` of consecutive keys), plus the first and last (value, group)."""
    keys = np.concatenate([p[0] for p in pieces]) if pieces else np.zeros(0)
    if keys.size == 0:
        return None
    groups = np.concatenate([p[1] for p in pieces])
    order = np.argsort(keys, kind="stable")
    gs = groups[order]
    v = keys[order] - gs.astype(float) * span
    same = gs[1:] == gs[:-1]
    return np.maximum(np.diff(v)[same], 0.0), (v[0], gs[0]), (v[-1], gs[-1])


def partition_lut(hist, n_parts):
    """Per column, the partition of every bucket: consecutive buckets, ~equal counts."""
    lut = np.empty(hist.shape, dtype=np.int64)
    for j, h in enumerate(hist):
        cum = np.cumsum(h) - h  # values before each bucket
        total = max(int(h.sum()), 1)
        lut[j] = np.minimum(cum * n_parts // total, n_parts - 1)
    return lut


def _keys(x, origin, width, lo, span, strides):
    """The chunk's flat cell keys, as LocalEngine computes them (int32 when they fit)."""
    total = int(np.prod(span))
    keys = np.empty(x.shape[0], dtype=np.int32 if total < 2**31 else np.int64)
    for i in range(0, x.shape[0], _KEY_ROWS):  # in cache-sized steps: 2-3x faster
        flat_cell_keys(x[i : i + _KEY_ROWS], origin, width, lo, span, strides,
                       out=keys[i : i + _KEY_ROWS])
    return keys


def dense_cell_counts(x, origin, width, lo, span, strides, dtype):
    """The chunk's count of records in every cell of the grid (a dense array of ``dtype``)."""
    counts = np.bincount(_keys(x, origin, width, lo, span, strides),
                         minlength=int(np.prod(span)))
    return counts.astype(dtype, copy=False)


def cell_keys(x, origin, width, lo, span, strides, n_parts, part_width):
    """The chunk's cell keys (as LocalEngine computes them) cut by key range: one piece per
    range, ``(keys, counts)`` when the grid has no more cells than the chunk has rows (it
    counts its keys itself: its non-empty cells and their counts, int32 when they fit, weigh
    less than its raw keys), else ``(keys, None)``, the raw keys (int32 when they fit: 4 bytes
    a record, and no pass over the whole grid per chunk), cut by masks for a few ranges and
    by one sort for more."""
    total = int(np.prod(span))
    keys = _keys(x, origin, width, lo, span, strides)
    narrow = total < 2**31 and keys.size < 2**31
    if total <= keys.size:  # the chunk counts its keys: 8 bytes a non-empty cell
        acc = np.bincount(keys, minlength=total)
        keys = np.flatnonzero(acc)
        counts = acc[keys]
        if narrow:
            keys, counts = keys.astype(np.int32), counts.astype(np.int32)
        edges = np.searchsorted(keys, np.arange(n_parts + 1) * part_width)
        return [(keys[a:b], counts[a:b]) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    if n_parts == 1:
        return [(keys, None)]
    if n_parts > _MASKED_PARTS:  # one sort, not a pass over the keys per range
        keys = np.sort(keys)
        edges = np.searchsorted(keys, np.arange(n_parts + 1) * part_width)
        return [(keys[a:b], None) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    part = keys // part_width
    return [(keys[part == p], None) for p in range(n_parts)]


def merge_cells(first, width, *pieces):
    """The chunks' pieces of the key range ``[first, first + width)`` counted: ``(keys,
    counts)`` of its non-empty cells, by a bincount over the range when it is not much larger
    than the records, else by sorting."""
    raw = [k for k, c in pieces if c is None]
    n_keys = sum(k.size for k in raw) + sum(k.size for k, c in pieces if c is not None)
    if width <= max(4 * n_keys, 1 << 16):
        acc = np.bincount(np.concatenate(raw).astype(np.int64) - first, minlength=width) if raw \
            else np.zeros(width, dtype=np.int64)
        for k, c in pieces:  # a counted piece's keys are distinct: one fancy-index add each
            if c is not None:
                acc[k - first] += c
        ukeys = np.flatnonzero(acc)
        return ukeys + first, acc[ukeys]
    keys = np.concatenate([k.astype(np.int64) for k, _ in pieces])
    counts = np.concatenate([np.ones(k.size, dtype=np.int64) if c is None else c
                             for k, c in pieces])
    ukeys, inv = np.unique(keys, return_inverse=True)
    return ukeys, np.bincount(inv, weights=counts, minlength=ukeys.size).astype(np.int64)


def merge_cell_rows(*pieces):
    cells = np.concatenate([p[0] for p in pieces])
    counts = np.concatenate([p[1] for p in pieces])
    ucells, inv = np.unique(cells, axis=0, return_inverse=True)
    return ucells, np.bincount(inv.ravel(), weights=counts, minlength=len(ucells)).astype(
        np.int64)


def stitch(parts, out) -> None:
    """Write one column's sorted-partition results into ``out`` (n - 1 gaps, in order)."""
    pos, last = 0, None
    for r in parts:
        if r is None:
            continue
        gaps, first, end = r
        if last is not None:
            out[pos] = first - last  # the gap across the partition edge
            pos += 1
        out[pos : pos + gaps.size] = gaps
        pos += gaps.size
        last = end


def stitch_groups(parts):
    """One column's grouped results: (gaps, groups of the gaps) in (group, value) order."""
    gaps, gid, last = [], [], None
    for r in parts:
        if r is None:
            continue
        g_in, (v0, g0), end = r
        if last is not None and last[1] == g0:
            gaps.append(np.array([max(v0 - last[0], 0.0)]))
            gid.append(np.array([g0]))
        gaps.append(g_in)
        last = end
    return (np.concatenate(gaps) if gaps else np.zeros(0)), gid
