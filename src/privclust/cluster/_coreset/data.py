"""Where :class:`~privclust.cluster.coreset.CoresetKMeans` reads the records: in memory (a
:class:`~privclust.engine.LocalEngine`) or chunk by chunk where the chunks live (a
:class:`~privclust.engine.dask.DaskEngine`), with the same values bit for bit.

Every value read here is per-record arithmetic (a record's label, distance, projected image,
place in the Poisson sample and silhouette term depend on that record and public values
only) or an exact aggregate (counts; sums on the public fixed-point grid; silhouette terms
rounded to a public grid and added as integers), so no value depends on the chunking:

* :func:`projected_engine`: the tree's engine, over the public projection of the records
  (each chunk projected where it lives);
* :func:`nearest_labels`, :func:`corrected_labels`: every record's cluster (on the Dask engine,
  :class:`ChunkLabels` left on the workers, beside their chunks) and, for the Lloyd steps, its
  corrected distance (one value per record, brought to the client for the private quantile);
  the nearest of many anchors in 2 coordinates (the coreset step) from a public grid of
  buckets, each listing the few anchors that can be nearest to a point of it
  (:func:`anchor_buckets`, :func:`nearest_anchors`), in 3 to ``TREE_MAX_DIMS`` coordinates
  from a k-d tree over the anchors, certified against the product (:func:`anchor_tree`,
  :func:`nearest_in_tree`);
* :func:`ball_totals`: the exact sizes and centred sums of the clusters' balls;
* :func:`distances_from`: every record's distance from a public point (for a private quantile);
* :func:`distance_counts`, :func:`corrected_counts`: the same distances counted into the cells
  of a public grid of candidates (exact integers added per chunk: nothing per record comes to
  the client), for the grid quantile of large fits;
* :func:`sample_scores`: the choice of k's silhouette sums over a Poisson sample, each chunk
  drawing its own records' public uniforms from the fit's generator moved ahead to the chunk's
  first row (the same draws, in the records' order, as one pass in memory makes).
"""

from __future__ import annotations

import copy

import numpy as np
from scipy.spatial import cKDTree

from ..._geometry import nearest_centres
from ...engine.local import LocalEngine, LocalGrouping
from .select import SCORE_UNITS, poisson_sample, silhouette_sums

__all__ = ["AnchorBuckets", "AnchorTree", "ChunkLabels", "anchor_buckets", "anchor_tree",
           "ball_totals", "corrected_labels", "corrected_nearest", "corrected_counts",
           "distance_counts", "distances_from", "grid_counts", "is_dask_engine",
           "nearest_anchors", "nearest_in_tree", "nearest_labels", "outside",
           "projected_engine", "records_for_labels", "sample_scores"]

_ROWS = 1 << 16
#: The coreset step's labels (the nearest of many anchors) in at most this many coordinates
#: come from a public grid of buckets over the bounds (:func:`anchor_buckets`): each record
#: measures its distance to the few anchors that can be nearest to a point of its bucket, not
#: to all of them (measured on 4,000,000 x 2, 565 anchors: 3.6 s -> 0.3 s).
BUCKET_DIMS = 2
#: ... with at least this many anchors (fewer: :func:`~privclust._geometry.nearest_centres`);
#: the buckets' candidates are found on a grid of ``_COARSE`` buckets along each coordinate,
#: then on grids twice as fine until one has ``_FINE`` per anchor (at most ``_MAX_BUCKETS``).
BUCKET_MIN_ANCHORS = 32
_COARSE = 4
_FINE = 32
_MAX_BUCKETS = 1 << 18
#: In more than ``BUCKET_DIMS`` and at most this many coordinates, with at least
#: ``TREE_MIN_ANCHORS`` anchors, the coreset step's labels come from a k-d tree over the
#: anchors (:func:`anchor_tree`, :func:`nearest_in_tree`); in more coordinates a tree visits
#: most of its leaves and the product of :func:`~privclust._geometry.nearest_centres` is
#: cheaper.
TREE_MAX_DIMS = 10
TREE_MIN_ANCHORS = 1024
_LEAF = 128
#: State entries of a bit generator that a draw of doubles leaves alone (a buffered 32-bit
#: half): kept when the client's generator is moved ahead instead of drawing.
_BUFFERED = ("has_uint32", "uinteger")
#: 32-bit words per block of randomgen's ChaCha.
_CHACHA_BLOCK = 16


def is_dask_engine(engine) -> bool:
    """Whether ``engine`` holds its records in chunks on a Dask cluster."""
    return hasattr(engine, "_xblocks")


class ChunkLabels:
    """Every record's cluster on the Dask engine: one int64 array per chunk of the records
    (delayed objects, persisted on the workers or computed with the query that reads them),
    ``-1`` for no cluster."""

    def __init__(self, blocks: list):
        self.blocks = blocks


# ------------------------------------------------------------------------ per chunk
def outside(X, group, anchors, radius) -> np.ndarray:
    """Records whose distance from their cluster's anchor exceeds its radius (chunked)."""
    far = np.zeros(group.size, dtype=bool)
    every = bool((group >= 0).all())  # the usual case: slices, no gather of the rows
    rows = None if every else np.flatnonzero(group >= 0)
    r2 = radius ** 2
    step = max(256, (_ROWS // 8) // max(X.shape[1], 1))  # 64 KB temporaries: no fresh mapping
    for start in range(0, group.size if every else rows.size, step):
        r = slice(start, start + step) if every else rows[start:start + step]
        g = group[r]
        diff = np.asarray(X[r], dtype=np.float64) - anchors[g]
        far[r] = np.einsum("ij,ij->i", diff, diff) > r2[g]
    return far


def corrected_nearest(X, centres, offset):
    """For every record, the centre ``j`` that minimises ``||x - c_j||^2 - offset_j`` and that
    value, at least 0 (chunked): with ``offset_j`` the expected squared norm of the noise of
    ``c_j``, the expected squared distance from the cluster's mean. Returns ``(labels,
    corrected distances)``. Per-record arithmetic: the labels come from
    :func:`~privclust._geometry.nearest_centres` (blocks whose shape does not depend on the
    number of records), the distance from the record and its centre alone, so neither moves
    when another record is added or removed."""
    n = X.shape[0]
    offset = np.broadcast_to(np.asarray(offset, dtype=np.float64), centres.shape[:1])
    labels = nearest_centres(X, centres, offset=offset)
    dist = np.empty(n)
    for start in range(0, n, _ROWS // 16):
        x = np.asarray(X[start:start + _ROWS // 16], dtype=np.float64)
        diff = x - centres[labels[start:start + x.shape[0]]]
        best = np.einsum("ij,ij->i", diff, diff) - offset[labels[start:start + x.shape[0]]]
        dist[start:start + x.shape[0]] = np.sqrt(np.maximum(best, 0.0))
    return labels, dist


class AnchorBuckets:
    """A public grid of ``G^p`` buckets over ``bounds`` and, for each bucket, the anchors that
    can be nearest to a point of it (:func:`anchor_buckets`): ``table`` (buckets, C) int32,
    each row its candidates in increasing order, padded with its last; ``size`` the number of
    candidates of each bucket."""

    def __init__(self, anchors, lo, width, G, table, size):
        self.anchors, self.lo, self.width, self.G = anchors, lo, width, G
        self.table, self.size = table, size


def _bucket_table(A, lo, width, G, parent, f):
    """Candidates of every bucket of the grid of ``G^p`` buckets (row-major), each bucket
    checking the candidates of its parent, the bucket of the grid ``f`` times coarser that
    holds it (``parent``: ``(table, size)`` of that grid; None: every anchor), as flat
    (bucket, anchor) pairs. Returns ``(table, size)``."""
    m, p = A.shape
    cells = np.indices((G,) * p).reshape(p, -1).T
    if parent is None:
        bucket = np.repeat(np.arange(cells.shape[0]), m)
        anchor = np.tile(np.arange(m), cells.shape[0])
    else:
        table, size = parent
        up = np.ravel_multi_index(tuple((cells // f).T), (G // f,) * p)
        bucket = np.repeat(np.arange(cells.shape[0]), size[up])
        anchor = table[up][np.arange(table.shape[1]) < size[up][:, None]]
    pad = 1e-9 * width
    near = np.zeros(bucket.size)
    far = np.zeros(bucket.size)
    for i in range(p):
        a = A[anchor, i]
        blo = lo[i] + cells[bucket, i] * width[i] - pad[i]
        bhi = blo + width[i] + 2 * pad[i]
        near += np.square(np.maximum(np.maximum(blo - a, a - bhi), 0.0))
        far += np.square(np.maximum(np.abs(a - blo), np.abs(a - bhi)))
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    reach = np.minimum.reduceat(far, starts)  # every bucket has a candidate
    keep = near <= reach[bucket] * (1.0 + 1e-6)
    bucket, anchor = bucket[keep], anchor[keep]
    size = np.bincount(bucket, minlength=cells.shape[0])
    table = np.empty((cells.shape[0], int(size.max())), dtype=np.int32)
    first = np.cumsum(size) - size
    table[bucket, np.arange(bucket.size) - first[bucket]] = anchor  # increasing per bucket
    last = table[np.arange(table.shape[0]), size - 1]
    fill = np.arange(table.shape[1]) >= size[:, None]
    table[fill] = np.broadcast_to(last[:, None], table.shape)[fill]
    return table, size


def anchor_buckets(anchors, bounds) -> AnchorBuckets | None:
    """The buckets of :func:`nearest_anchors` for ``anchors`` (m, p) in the public ``bounds``
    (p, 2) (records lie inside them), or None (over ``BUCKET_DIMS`` coordinates or under
    ``BUCKET_MIN_ANCHORS`` anchors: the product of
    :func:`~privclust._geometry.nearest_centres` is cheaper). Public values only. Anchor ``j``
    is a candidate of a bucket when its least distance from the bucket (a box, widened by
    ``1e-9`` of its width so that a record's rounded bucket still holds it) is at most the
    least, over the anchors, of the greatest distance from the bucket (with a relative margin
    of ``1e-6``): every other anchor is farther from every point of the bucket than one of
    the candidates, by far more than the rounding of a distance. Built coarse to fine (a
    bucket's candidates are among those of the bucket that holds it)."""
    A = np.asarray(anchors, dtype=np.float64)
    m, p = A.shape
    if p > BUCKET_DIMS or m < BUCKET_MIN_ANCHORS:
        return None
    lo, hi = (np.asarray(bounds, dtype=np.float64)[:, i] for i in (0, 1))
    G, found = _COARSE, None
    while True:  # each grid twice as fine as the last along every coordinate
        width = np.where(hi > lo, (hi - lo) / G, 1.0)
        found = _bucket_table(A, lo, width, G, found, 2)
        if G**p >= min(_FINE * m, _MAX_BUCKETS // 2**p):
            return AnchorBuckets(A, lo, width, G, *found)
        G *= 2


def nearest_anchors(X, buckets: AnchorBuckets) -> np.ndarray:
    """Index of the nearest anchor of every record (ties to the lower index), from its
    bucket's candidates (:func:`anchor_buckets`). Per-record arithmetic: a record's bucket,
    candidates and squared distances (``sum_i (x_i - a_i)^2`` in float64, coordinate by
    coordinate) depend on that record and public values only."""
    A, lo, width, G, table = (buckets.anchors, buckets.lo, buckets.width, buckets.G,
                              buckets.table)
    n, p = X.shape
    out = np.empty(n, dtype=np.int64)
    cols = [np.ascontiguousarray(A[:, i]) for i in range(p)]
    step = _ROWS // 8  # every temporary at most 128 KB: no fresh mapping in a Dask worker
    for start in range(0, n, step):
        x = np.asarray(X[start:start + step], dtype=np.float64)
        b = np.zeros(x.shape[0], dtype=np.int64)
        for i in range(p):
            c = np.floor((x[:, i] - lo[i]) / width[i])
            b = b * G + np.clip(c, 0, G - 1).astype(np.int64)
        size = buckets.size[b]
        cand = table[b]
        best = np.full(x.shape[0], np.inf)
        label = np.zeros(x.shape[0], dtype=np.int64)
        for j in range(table.shape[1]):  # candidate slots: a few, each over all the rows
            rows = np.flatnonzero(size > j) if j else slice(None)
            c = cand[rows, j]
            d2 = np.square(x[rows, 0] - cols[0][c])
            for i in range(1, p):
                d2 += np.square(x[rows, i] - cols[i][c])
            better = d2 < best[rows]  # strict: ties keep the lower index
            if j:
                rows = rows[better]
            else:
                rows = np.flatnonzero(better)
            best[rows] = d2[better]
            label[rows] = c[better]
        out[start:start + x.shape[0]] = label
    return out


class AnchorTree:
    """A k-d tree over the anchors (public) for :func:`nearest_in_tree`: ``anchors`` (m, p),
    ``shift`` their mean and ``reach`` the greatest distance of an anchor from it (as
    :func:`~privclust._geometry.nearest_centres` shifts them), ``tree`` the
    :class:`scipy.spatial.cKDTree`."""

    def __init__(self, anchors):
        self.anchors = np.asarray(anchors, dtype=np.float64)
        self.shift = self.anchors.mean(axis=0)
        Cs = self.anchors - self.shift
        self.reach = float(np.sqrt(np.einsum("ij,ij->i", Cs, Cs).max()))
        self.tree = cKDTree(self.anchors, leafsize=_LEAF, balanced_tree=False)


def anchor_tree(anchors) -> AnchorTree | None:
    """The tree of :func:`nearest_in_tree` for ``anchors`` (m, p), or None (outside ``3 <= p <=
    TREE_MAX_DIMS`` or under ``TREE_MIN_ANCHORS`` anchors: buckets or the product are
    cheaper). Public values only."""
    A = np.asarray(anchors, dtype=np.float64)
    m, p = A.shape
    if not BUCKET_DIMS < p <= TREE_MAX_DIMS or m < TREE_MIN_ANCHORS:
        return None
    return AnchorTree(A)


def nearest_in_tree(X, tree: AnchorTree) -> np.ndarray:
    """Index of the nearest anchor of every record: exactly the label of
    :func:`~privclust._geometry.nearest_centres` (its product's rounding and its ties to the
    lower index included). Per-record arithmetic: a record's label depends on that record
    and the public anchors only (not on the other records, their number or the chunking).

    The tree gives each record its two nearest anchors, at ``t1 <= t2``. The product's
    score of anchor ``j`` is ``||x - c_j||^2 - ||x - s||^2`` (``s`` the anchors' mean) up to
    at most ``(p + 5) u (r + R)^2`` (``u`` the unit roundoff, ``r = ||x - s||``, ``R`` the
    anchors' ``reach``: the dot product's, the shift's and the sum's roundings), and the
    tree's squared distances are within ``(p + 3) u t^2 <= (p + 3) u (r + R)^2`` of the
    exact ones (an anchor the tree's pruning could miss is no nearer than ``t2`` less that
    rounding). When ``t2^2 - t1^2`` exceeds ``8 (p + 8) eps (r + R)^2`` (``eps = 2u``: four
    times the sum of those bounds) the product's argmin is the tree's nearest anchor; the
    other records (near ties, copies of an anchor: a few per million) take
    :func:`~privclust._geometry.nearest_centres` itself, whose label of a record does not
    depend on the rows beside it."""
    A, shift, reach = tree.anchors, tree.shift, tree.reach
    n, p = X.shape
    out = np.empty(n, dtype=np.int64)
    scale = 8.0 * (p + 8) * np.finfo(np.float64).eps
    for start in range(0, n, _ROWS):
        x = np.asarray(X[start:start + _ROWS], dtype=np.float64)
        dist, idx = tree.tree.query(x, k=2)
        xs = x - shift
        margin = scale * np.square(np.sqrt(np.einsum("ij,ij->i", xs, xs)) + reach)
        label = idx[:, 0].astype(np.int64)
        unsure = np.flatnonzero(~(np.square(dist[:, 1]) - np.square(dist[:, 0]) > margin))
        if unsure.size:
            label[unsure] = nearest_centres(x[unsure], A)
        out[start:start + x.shape[0]] = label
    return out


def _nearest(X, centres, index=None) -> np.ndarray:
    if index is None:
        return nearest_centres(X, centres)
    if isinstance(index, AnchorTree):
        return nearest_in_tree(X, index)
    return nearest_anchors(X, index)


def _distances(X, point) -> np.ndarray:
    dist = np.empty(X.shape[0])
    for start in range(0, dist.size, _ROWS):
        diff = np.asarray(X[start:start + _ROWS], dtype=np.float64) - point
        dist[start:start + diff.shape[0]] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    return dist


def grid_counts(values, grid) -> np.ndarray:
    """How many ``values`` fall in each cell ``(grid[j-1], grid[j]]`` of the public increasing
    ``grid`` (int64, ``grid.shape``; cell 0 holds the values at most ``grid[0]``, the last the
    values above ``grid[-1]`` too): a value's cell depends on that value and the grid alone.

    On a grid of positive candidates (the quantiles' log-spaced grids) each value's cell is
    guessed from its logarithm, checked against the grid's two candidates about it, and found
    by a binary search only where the guess missed: the cells of ``np.searchsorted(grid,
    values, side="left")`` (at most the last), about 10x faster on 4,096 candidates."""
    m = grid.size
    values = np.asarray(values, dtype=np.float64).ravel()
    if m < 64 or not grid[0] > 0:
        cell = np.minimum(np.searchsorted(grid, values, side="left"), m - 1)
        return np.bincount(cell, minlength=m).astype(np.int64)
    acc = np.zeros(m, dtype=np.int64)
    step, inv0 = (m - 1) / float(np.log(grid[-1] / grid[0])), 1.0 / grid[0]
    for start in range(0, values.size, _ROWS // 8):  # blocks of 64 KB: no fresh mapping
        v = values[start : start + _ROWS // 8]
        with np.errstate(divide="ignore", invalid="ignore"):
            g = np.log(v * inv0)
            g *= step
            np.ceil(g, out=g)
            cell = g.astype(np.intp)  # 0, inf, nan: any index, clipped, then searched
        np.clip(cell, 0, m - 1, out=cell)
        ok = (grid[cell - 1] < v) | (cell == 0)  # exactly searchsorted's cell, or searched
        ok &= (v <= grid[cell]) | (cell == m - 1)
        if not ok.all():
            bad = np.flatnonzero(~ok)
            cell[bad] = np.minimum(np.searchsorted(grid, v[bad], side="left"), m - 1)
        acc += np.bincount(cell, minlength=m)
    return acc


def _distance_counts(X, point, grid) -> np.ndarray:
    return grid_counts(_distances(X, point), grid)


def _corrected_counts(X, centres, offset, grid, dtype=np.int64):
    labels, dist = corrected_nearest(X, centres, offset)
    return labels.astype(dtype, copy=False), grid_counts(dist, grid)


def _ball(proto, X, labels, anchors, radius):
    """Exact sizes and centred sums (:class:`~privclust.engine._exact.ExactSums`) of the
    records of every cluster within its ball, on ``X`` (all records, or one chunk)."""
    k = anchors.shape[0]
    group = np.asarray(labels, dtype=np.int64).copy()
    group[outside(X, group, anchors, radius)] = -1
    counts = np.bincount(group[group >= 0], minlength=k).astype(np.int64)
    eng = copy.copy(proto)
    eng.X = X
    return counts, eng.exact_centred_sums(LocalGrouping(group, k), anchors)


def _chunk_scores(Y, candidates, draw, anchors=None, noise2=None):
    """The chunk's silhouette sums against every candidate, as integers (units of
    ``1 / SCORE_UNITS``); ``draw``: None (every record) or ``(bit generator, first row,
    rate)``; ``anchors``, ``noise2``: as for
    :func:`~privclust.cluster._coreset.select.silhouette_sums`."""
    if draw is not None:
        bitgen, first, rate = draw
        bitgen = copy.deepcopy(bitgen)
        _skip(bitgen, first)
        Y = Y[np.random.Generator(bitgen).random(Y.shape[0]) < rate]
    return np.rint(silhouette_sums(Y, candidates, anchors, noise2)
                   * SCORE_UNITS).astype(np.int64)


def _first(pair):
    return pair[0]


def _second(pair):
    return pair[1]


# ------------------------------------------------------------------------ the fit's reads
def projected_engine(engine, space):
    """The tree's engine: ``engine`` itself, or (projected) an engine over the records'
    images :meth:`~privclust.cluster._coreset.tree.Space.project` inside ``space.box``, each
    chunk projected where it lives on the Dask engine."""
    if not space.projected:
        return engine
    if is_dask_engine(engine):
        from ...engine.dask import mapped_engine

        return mapped_engine(engine, space.project, space.box, space.G.shape[0])
    return LocalEngine(space.project(engine.X), space.box)


def nearest_labels(engine, centres):
    """Every record's nearest centre: an (n,) array in memory, :class:`ChunkLabels` (computed
    with the query that reads them) on the Dask engine. Many centres in few coordinates (the
    coreset step): from public buckets in 2 coordinates (:func:`anchor_buckets`,
    :func:`nearest_anchors`), from a k-d tree in 3 to ``TREE_MAX_DIMS``
    (:func:`anchor_tree`, :func:`nearest_in_tree`), the same labels as the product's."""
    centres = np.asarray(centres, dtype=float)
    index = anchor_buckets(centres, engine.bounds)
    if index is None:
        index = anchor_tree(centres)
    if not is_dask_engine(engine):
        return _nearest(engine.X, centres, index)
    from dask import delayed

    if index is not None:
        index = engine._client.scatter(index, broadcast=True)
    return ChunkLabels([delayed(_nearest)(x, centres, index) for x in engine._xblocks])


def corrected_labels(engine, centres, offset):
    """:func:`corrected_nearest` of every record: ``(labels, corrected distances (n,))``; on
    the Dask engine the labels stay on the workers (:class:`ChunkLabels`) and the distances
    come to the client."""
    if not is_dask_engine(engine):
        return corrected_nearest(engine.X, centres, offset)
    from dask import delayed

    pairs = engine.keep([delayed(corrected_nearest)(x, centres, offset)
                         for x in engine._xblocks])
    dist = engine._compute(*[delayed(_second)(p) for p in pairs])
    return ChunkLabels([delayed(_first)(p) for p in pairs]), _concat(dist)


def ball_totals(engine, labels, anchors, radius):
    """The exact size (int64, (k,)) and sum of ``x - anchors[j]`` ((k, d), the exact total
    converted once) of the records of every cluster ``j`` (``labels``) within ``radius[j]`` of
    ``anchors[j]``: one pass over the records."""
    if not is_dask_engine(engine):
        counts, sums = _ball(engine, engine.X, labels, anchors, radius)
        return counts, sums.to_float()
    from dask import delayed

    from ...engine._dask_tasks import tree

    counts, sums = engine._compute(tree([
        delayed(_ball)(engine._proto, x, g, anchors, radius)
        for x, g in zip(engine._xblocks, labels.blocks, strict=True)]))[0]
    return counts, sums.to_float()


def distances_from(engine, point) -> np.ndarray:
    """Every record's distance from the public ``point`` (float64, (n,), in the records'
    order; on the Dask engine computed per chunk and gathered on the client)."""
    point = np.asarray(point, dtype=np.float64)
    if not is_dask_engine(engine):
        return _distances(engine.X, point)
    from dask import delayed

    return _concat(engine._compute(*[delayed(_distances)(x, point)
                                     for x in engine._xblocks]))


def distance_counts(engine, point, grid) -> np.ndarray:
    """:func:`grid_counts` of every record's distance from the public ``point``: on the Dask
    engine counted per chunk and added as integers on the workers."""
    point = np.asarray(point, dtype=np.float64)
    if not is_dask_engine(engine):
        return _distance_counts(engine.X, point, grid)
    from dask import delayed

    from ...engine._dask_tasks import tree

    return engine._compute(tree([delayed(_distance_counts)(x, point, grid)
                                 for x in engine._xblocks]))[0]


def corrected_counts(engine, centres, offset, grid):
    """:func:`corrected_nearest` of every record, its distances counted into the cells of the
    public ``grid`` (:func:`grid_counts`): ``(labels, counts)``; on the Dask engine the labels
    stay on the workers (:class:`ChunkLabels`) and only the counts, added as integers, come to
    the client."""
    if not is_dask_engine(engine):
        return _corrected_counts(engine.X, centres, offset, grid)
    from dask import delayed

    from ...engine._dask_tasks import tree

    # the labels in the narrowest integer type, kept on the workers when they fit there even
    # if the records do not: the ball pass that reads them then draws no label again
    dtype = np.min_scalar_type(-max(len(centres), 1))
    pairs = engine.keep([delayed(_corrected_counts)(x, centres, offset, grid, dtype)
                         for x in engine._xblocks], engine.X.shape[0] * dtype.itemsize)
    counts = engine._compute(tree([delayed(_second)(p) for p in pairs]))[0]
    return ChunkLabels([delayed(_first)(p) for p in pairs]), counts


def sample_scores(engine, rate, generator, candidates, anchors=None,
                  noise2=None) -> np.ndarray:
    """The silhouette sums (:func:`~privclust.cluster._coreset.select.silhouette_sums`) of the
    records of a Poisson sample of ``rate`` (:func:`~privclust.cluster._coreset.select.
    poisson_sample`: one uniform draw of ``generator`` per record, in the records' order; every
    record when ``rate >= 1``) against every candidate. On the Dask engine each chunk draws its
    records' uniforms itself, from a copy of the generator moved ahead to the chunk's first row
    (a generator that cannot be moved ahead exactly draws them here and sends each chunk its
    part), the sums are added as integers on the workers, and ``generator`` ends where one pass
    in memory leaves it: the same sample and the same scores whatever the chunking.
    ``anchors``: the public points the candidates were fitted on (near-centre scoring), and
    ``noise2``: the candidates' centres' public expected squared noise, as for
    :func:`~privclust.cluster._coreset.select.silhouette_sums`."""
    if not is_dask_engine(engine):
        X = engine.X
        sample = X[poisson_sample(X.shape[0], rate, generator)] if rate < 1.0 else X
        return silhouette_sums(sample, candidates, anchors, noise2)
    from dask import delayed

    from ...engine._dask_tasks import tree

    cands = [np.asarray(c, dtype=np.float64) for c in candidates]
    starts = np.cumsum((0, *engine.X.chunks[0]))
    n = int(starts[-1])
    bitgen = generator.bit_generator
    if rate >= 1.0:
        draws = [None] * len(engine._xblocks)
    elif _moves_ahead(bitgen):
        first = copy.deepcopy(bitgen)  # the chunks' copies start here
        draws = [(first, int(s), float(rate)) for s in starts[:-1]]
        _skip(bitgen, n)
    else:  # drawn here, chunk by chunk in the records' order, each chunk sent its part
        blocks = [delayed(_masked)(x, engine._client.scatter(poisson_sample(b - a, rate,
                                                                            generator)))
                  for x, a, b in zip(engine._xblocks, starts[:-1], starts[1:], strict=True)]
        draws = [None] * len(blocks)
        total = engine._compute(tree([delayed(_chunk_scores)(b, cands, None, anchors, noise2)
                                             for b in blocks]))
        return total[0] / SCORE_UNITS
    total = engine._compute(tree([delayed(_chunk_scores)(x, cands, dr, anchors, noise2)
                                  for x, dr in zip(engine._xblocks, draws, strict=True)]))
    return total[0] / SCORE_UNITS


def records_for_labels(engine, X):
    """What the fit's final labels and cost read: on the Dask engine its persisted records
    when they hold the values of ``X`` clipped to the bounds (bounds exact in the records'
    dtype), so that pass reads the workers' memory instead of the input again (re-read files,
    re-drawn chunks); else ``X`` (and above ``LAZY_LABELS`` records, whose lazy labels would
    hold the persisted records on the workers as long as the model lives). The same labels
    and cost either way."""
    if not is_dask_engine(engine) or not engine.persisted or hasattr(engine, "_source"):
        return X
    from ...engine.dask import LAZY_LABELS, DaskData

    if X.shape[0] > LAZY_LABELS:
        return X
    b = engine.bounds
    if not np.array_equal(b.astype(engine.X.dtype).astype(np.float64), b):
        return X
    return DaskData(engine.X, getattr(X, "columns", None))


def _masked(x, keep):
    return x[keep]


def _concat(parts) -> np.ndarray:
    return np.concatenate(parts) if len(parts) else np.zeros(0)


# ------------------------------------------------------------------------ the generator
def _skip(bitgen, n: int) -> None:
    """Move ``bitgen`` ahead by ``n`` doubles of ``Generator.random``: ``advance`` (PCG64,
    Philox, ...), keeping the buffered 32-bit half that a draw of doubles leaves alone; or,
    for randomgen's ChaCha (the secure default: a counter of 32-bit words, two per double),
    the counter set to the block boundary before the target and the words left to it drawn.
    :func:`_moves_ahead` checks the result on copies before a fit relies on it."""
    if n <= 0:
        return
    before = bitgen.state
    if hasattr(bitgen, "advance"):
        bitgen.advance(n)
        after = bitgen.state
        for key in _BUFFERED:
            if key in before:
                after[key] = before[key]
        bitgen.state = after
        return
    inner = before.get("state")
    if not isinstance(inner, dict) or not {"ctr", "block"} <= set(inner) or len(
            inner["block"]) != _CHACHA_BLOCK:
        raise TypeError(f"{type(bitgen).__name__} cannot move ahead")
    ctr = inner["ctr"]
    target = int(ctr[0]) + (int(ctr[1]) << 64) + 2 * int(n)
    start = target - target % _CHACHA_BLOCK  # a fresh block is made at the boundary
    inner["ctr"] = np.array([start & ((1 << 64) - 1), start >> 64], dtype=np.uint64)
    bitgen.state = before
    if target > start:
        np.random.Generator(bitgen).integers(0, 2**32 - 1, size=target - start,
                                             dtype=np.uint32, endpoint=True)


def _moves_ahead(bitgen) -> bool:
    """Whether :func:`_skip` moves ``bitgen`` exactly as drawing doubles does (checked on
    copies, across a block boundary: PCG64 and ChaCha do; MT19937 does not)."""
    try:
        drawn = copy.deepcopy(bitgen)
        ref = np.random.Generator(drawn).random(53)
        for first in (7, 37):
            moved = copy.deepcopy(bitgen)
            _skip(moved, first)
            if not np.array_equal(np.random.Generator(moved).random(53 - first), ref[first:]):
                return False
        whole = copy.deepcopy(bitgen)
        _skip(whole, 53)
        a, b = np.random.Generator(drawn), np.random.Generator(whole)
        return bool(np.array_equal(a.random(3), b.random(3)) and np.array_equal(
            a.integers(0, 1 << 31, 3, dtype=np.int32), b.integers(0, 1 << 31, 3,
                                                                   dtype=np.int32)))
    except Exception:  # noqa: BLE001 - any failure: draw on the client
        return False
