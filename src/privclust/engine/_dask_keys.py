"""A tree level's cells kept where the records are (:meth:`DaskEngine.split_keys`).

Every record carries its cell's key at the level above (``-1``: a cell not released, or no
cell). A level is one task per chunk: the record's parent rank among the released keys of the
level above and its halves along the level's block give its key at this level,
``rank * 2^b + bits`` (the key :func:`~privclust.cluster._shifted_tree.grow` releases); the
chunk's keys are counted and cut at fixed key ranges, and one task per range merges the
chunks' pieces. The level's cells stay on the workers, a part per key range, and the release
reads them part by part (:class:`LevelParts`, a source of cells in parts, as
:func:`privclust.privacy.histogram.sparse_histogram` reads them): the client never holds a
level's cells at once, only the part being noised. The same keys and counts as the NumPy
engine's walk, whatever the chunking; how many parts, from the records' count (how, never
what).
"""

from __future__ import annotations

import copy

import numpy as np
from dask import delayed

from .._sorted_keys import in_sorted, listed_below

__all__ = ["LevelParts", "root_keys", "split_keys"]

#: A level's cells are cut into about one part per this many records (at most MAX_PARTS).
RECORDS_PER_PART = 1 << 22
MAX_PARTS = 64


def root_keys(engine):
    """Every record's key at the root (level 0): 0, the root cell holds every record."""
    import dask.array as da

    g = da.zeros(engine.X.shape[0], chunks=(engine.X.chunks[0],), dtype=np.int32)
    return engine._client.persist(g, retries=engine.retries) if engine.persisted else g


def _count_keys(keys: np.ndarray, total: int):
    """Sorted distinct keys in ``[0, total)`` and their counts (int64)."""
    if total <= 2 * keys.size + (1 << 16):  # a table of the key space: no sort
        acc = np.bincount(keys, minlength=total)
        u = np.flatnonzero(acc)
        return u, acc[u].astype(np.int64)
    keys = np.sort(keys)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if keys.size else \
        np.zeros(0, dtype=np.int64)
    return keys[starts].astype(np.int64), np.diff(np.append(starts, keys.size)).astype(np.int64)


def level_block(proto, x, labels, released, origin, cell_width, dims, cuts, wide):
    """One chunk's level: ``(keys, piece_0, ..., piece_P-1)``, each record's key at the level
    (-1: its cell at the level above was not released) and the chunk's cells cut at the key
    ranges' starts ``cuts``, a ``(keys, counts)`` piece per range."""
    eng = copy.copy(proto)
    eng.X = x
    b = dims.size
    rank = np.searchsorted(released, labels)
    np.minimum(rank, max(released.size - 1, 0), out=rank)
    inside = (labels >= 0) & (released[rank] == labels) if released.size else \
        np.zeros(labels.shape, dtype=bool)
    bits = eng._half_bits(origin[dims], cell_width[dims], dims)
    out = np.full(labels.shape, -1, dtype=np.int64 if wide else np.int32)
    out[inside] = (rank[inside] << b) | bits[inside]
    u, c = _count_keys(out[inside], released.size << b)
    at = np.searchsorted(u, cuts)
    return (out, *[(u[a:z], c[a:z]) for a, z in zip(np.r_[0, at], np.r_[at, u.size],
                                                     strict=True)])


def merge_pieces(*pieces):
    """One key range's cells from the chunks' pieces (each sorted): sorted keys, summed
    counts."""
    keys = [p[0] for p in pieces if p[0].size]
    if len(keys) <= 1:
        return (keys[0], [p[1] for p in pieces if p[0].size][0]) if keys else \
            (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    k = np.concatenate(keys)
    c = np.concatenate([p[1] for p in pieces if p[0].size])
    order = np.argsort(k, kind="stable")  # sorted runs: merged in linear time
    k, c = k[order], c[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    return k[starts], np.add.reduceat(c, starts)


def _size(part) -> int:
    return int(part[0].size)


def _contains(part, values):
    return in_sorted(values, part[0])


def _below(part, offset, ranks):
    return listed_below(part[0], offset, ranks)


class LevelParts:
    """A level's cells on the workers, a part per key range (futures): the source
    of cells in parts a sparse histogram reads."""

    def __init__(self, engine, parts):
        self.engine, self._parts = engine, parts
        self.sizes = [int(s) for s in engine._compute(*[delayed(_size)(p) for p in parts])]
        self.offsets = np.cumsum([0, *self.sizes[:-1]]).tolist()

    def parts(self):
        client = self.engine._client
        for p in self._parts:  # one part on the client at a time
            yield client.gather(p)

    def contains(self, values):
        masks = self.engine._compute(*[delayed(_contains)(p, values) for p in self._parts])
        return np.logical_or.reduce(masks) if masks else np.zeros(np.shape(values), bool)

    def below(self, ranks):
        counts = self.engine._compute(*[delayed(_below)(p, o, ranks)
                                        for p, o in zip(self._parts, self.offsets, strict=True)])
        return np.sum(counts, axis=0).astype(np.int64) if counts else \
            np.zeros(np.shape(ranks), dtype=np.int64)


def split_keys(engine, labels, released, origin, cell_width, dims):
    """The next level of a tree walked by key (see :mod:`._dask_keys`): ``(labels, cells)``,
    every record's key at this level (a persisted dask array; -1 where its cell at the level
    above is not among the sorted ``released`` keys) and the level's cells (:class:`LevelParts`).
    ``labels``: every record's key at the level above (:func:`root_keys` at the root)."""
    import dask.array as da

    origin = np.asarray(origin, dtype=float)
    cell_width = np.asarray(cell_width, dtype=float)
    dims = np.asarray(dims, dtype=np.int64)
    released = np.asarray(released, dtype=np.int64)
    b = dims.size
    if not 0 < b <= 62 or released.size >= 1 << (62 - b):
        raise ValueError(f"a level's keys need 1 to 62 bits, got {b} bits below "
                         f"{released.size} released cells")
    n_parts = int(min(MAX_PARTS, max(1, released.size),
                      max(1, -(-engine.X.shape[0] // RECORDS_PER_PART))))
    cuts = np.array([(j * released.size // n_parts) << b for j in range(1, n_parts)],
                    dtype=np.int64)
    wide = released.size << b >= 2**31
    client = engine._client
    if released.size > 4096:  # once to the workers, not once per task
        released = client.scatter(released, broadcast=True)
    blocks = labels.to_delayed()
    outs = [delayed(level_block, nout=n_parts + 1)(engine._proto, x, g, released, origin,
                                                   cell_width, dims, cuts, wide)
            for x, g in zip(engine._xblocks, blocks, strict=True)]
    parts = [delayed(merge_pieces)(*[o[j + 1] for o in outs]) for j in range(n_parts)]
    # one submission reads every chunk once: the records' keys and the parts, as futures
    done = client.compute([*[o[0] for o in outs], *parts], retries=engine.retries)
    rows = engine.X.chunks[0]
    dtype = np.int64 if wide else np.int32
    keys = [da.from_delayed(delayed(f), shape=(r,), dtype=dtype)
            for f, r in zip(done[:len(outs)], rows, strict=True)]
    keys = da.concatenate(keys) if keys else da.zeros(0, dtype=dtype)
    if keys.chunks != (rows,):  # concatenate drops empty chunks: the engine's chunks again
        keys = keys.rechunk((rows,))
    return client.persist(keys, retries=engine.retries), LevelParts(engine, done[len(outs):])
