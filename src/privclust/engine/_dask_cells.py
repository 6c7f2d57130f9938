"""The shifted grid tree's splits on the Dask engine (:meth:`DaskEngine.split_cells`,
:meth:`DaskEngine.group_cells`): every chunk splits its own records' cells with the NumPy
engine's code (:meth:`~privclust.engine.local.LocalEngine.split_cells`), the client merges the
chunks' children (one ``(parent, bits, count)`` row per child and chunk: cells, never records)
into the children of the level in ``(parent, bits)`` order, and each chunk renumbers its labels
to them where it lives. The same children, counts and labels as the NumPy engine, whatever the
chunking; no client-side lookup of a cell's parent among the cells of the level above."""

from __future__ import annotations

import copy

import numpy as np
from dask import delayed

from .local import LocalGrouping

__all__ = ["group_cells", "split_cells"]


def split_block(proto, x, g, n_groups, origin, cell_width, dims, keep=None):
    eng = copy.copy(proto)
    eng.X = x
    children, parent, bits, counts = eng.split_cells(LocalGrouping(g, n_groups), origin,
                                                     cell_width, dims, keep)
    return children.group, parent, bits, counts


def _head(part):
    return part[1:]


def _renumber(part, table, wide):
    local = part[0]
    out = np.full(local.shape, -1, dtype=np.int64 if wide else np.int32)
    inside = local >= 0
    out[inside] = table[local[inside]]
    return out


def _merge(heads, b: int, n_groups: int):
    """The level's children in ``(parent, bits)`` order from the chunks' (each in that order):
    ``(parent, bits, counts, index of each chunk child among them)``."""
    P = np.concatenate([h[0] for h in heads])
    B = np.concatenate([h[1] for h in heads])
    C = np.concatenate([h[2] for h in heads])
    if n_groups <= (1 << (62 - b)):
        order = np.argsort((P << b) | B, kind="stable")  # sorted runs: merged in linear time
    else:
        order = np.lexsort((B, P))
    p_s, b_s = P[order], B[order]
    new = np.ones(order.size, dtype=bool)
    new[1:] = (p_s[1:] != p_s[:-1]) | (b_s[1:] != b_s[:-1])
    starts = np.flatnonzero(new)
    index = np.empty(order.size, dtype=np.int64)
    index[order] = np.cumsum(new) - 1
    counts = np.add.reduceat(C[order], starts) if starts.size else np.zeros(0, np.int64)
    return p_s[starts], b_s[starts], counts.astype(np.int64), index


def split_cells(engine, grouping, origin, cell_width, dims, keep=None):
    """:meth:`privclust.engine.local.LocalEngine.split_cells` on ``engine``'s chunks:
    ``(children's labels (a persisted dask array), parent, bits, counts)``, equal to the NumPy
    engine's."""
    import dask.array as da

    origin = np.asarray(origin, dtype=float)
    cell_width = np.asarray(cell_width, dtype=float)
    dims = np.asarray(dims, dtype=np.int64)
    if not 0 < dims.size <= 62:
        raise ValueError(f"split_cells splits 1 to 62 features at once, got {dims.size}")
    client = engine._client
    if keep is not None:
        keep = np.asarray(keep, dtype=bool)
        if keep.size > 4096:  # once to the workers, not once per task
            keep = client.scatter(keep, broadcast=True)
    parts = client.persist([delayed(split_block)(engine._proto, x, g, grouping.n_groups,
                                                  origin, cell_width, dims, keep)
                            for x, g in zip(engine._xblocks, grouping.blocks, strict=True)],
                           retries=engine.retries)
    heads = engine._compute(*[delayed(_head)(p) for p in parts])
    parent, bits, counts, index = _merge(heads, dims.size, grouping.n_groups)
    wide = parent.size >= 2**31
    ends = np.cumsum([h[0].size for h in heads])
    tables = np.split(index, ends[:-1])
    rows = engine.X.chunks[0]
    dtype = np.int64 if wide else np.int32
    blocks = [da.from_delayed(delayed(_renumber)(p, client.scatter(t) if t.size > 4096 else t,
                                                 wide), shape=(r,), dtype=dtype)
              for p, t, r in zip(parts, tables, rows, strict=True)]
    group = da.concatenate(blocks) if blocks else da.zeros(0, dtype=dtype)
    if group.chunks != (rows,):  # concatenate drops empty chunks: the engine's chunks again
        group = group.rechunk((rows,))
    group = client.persist(group, retries=engine.retries)
    return group, parent, bits, counts


def _cells_block(proto, x, g, n_groups, origin, cell_width):
    inside = g >= 0
    eng = copy.copy(proto)
    eng.X = x
    return np.unique(g[inside]), eng.group_cells(LocalGrouping(g, n_groups), origin, cell_width)


def group_cells(engine, grouping, origin, cell_width):
    """:meth:`privclust.engine.local.LocalEngine.group_cells` on ``engine``'s chunks: each
    chunk reads the cells of the groups it holds (every record of a group lies in its cell)."""
    origin = np.asarray(origin, dtype=float)
    cell_width = np.asarray(cell_width, dtype=float)
    out = np.zeros((grouping.n_groups, engine.X.shape[1]), dtype=np.int64)
    for ids, cells in engine._compute(*[
            delayed(_cells_block)(engine._proto, x, g, grouping.n_groups, origin, cell_width)
            for x, g in zip(engine._xblocks, grouping.blocks, strict=True)]):
        out[ids] = cells
    return out
