"""Dask engine: records in a ``dask.array`` on a ``distributed`` cluster (extra ``[dask]``).

The records are clipped to the public bounds lazily and persisted once on the workers when
they fit in :data:`PERSIST_SHARE` of the workers' memory (else every pass recomputes its chunks,
re-reading or re-drawing them: the same values, so the same aggregates); a grouping is a
persisted array of group labels aligned with the records' row chunks. Every query
runs one task per row chunk that returns a small exact aggregate (the NumPy engine's own code,
:class:`~privclust.engine.local.LocalEngine`, applied to the chunk), and the aggregates are
merged in a fixed tree over the chunks. The client receives aggregates only; nothing here draws
random numbers or touches a fit's generator, so a retried task cannot draw noise (noise is
drawn by :mod:`privclust.privacy` on the client, from the merged values).

Exactness: counts, histograms, cell counts, group labels and neighbour gaps equal the NumPy
engine's bit for bit, whatever the chunking. So do the sums (``centred_sums`` and the sums,
moments and squared norms of ``assignment_stats``): every chunk returns its exact integer
totals on the public grid (:mod:`privclust.engine._exact`, the NumPy engine's own code), the
tree adds them exactly, and the client converts the total to float64 once.

Neighbour gaps need each feature sorted across chunks: up to ``_COLUMN_VALUES`` records a
task sorts whole columns (a few per task, each gathered chunk by chunk); above, a bucket sort
on splitters from the public bounds (equal-width buckets; a first pass counts the buckets so
that consecutive buckets are grouped into partitions of similar size), one task per partition
sorts its values, and the gap across a partition edge joins the last value of one non-empty
partition and the first of the next. A single bucket is never split, so heavily tied data puts
its ties in one task.
"""

from __future__ import annotations

import math
import os
import weakref
from pathlib import Path

import dask
import dask.array as da
import numpy as np
from dask import delayed

from . import _dask_cells, _dask_keys
from . import _dask_tasks as tasks
from ._dask_cluster import client_or_local, close, one_at_a_time, workers_memory
from ._exact import float_stats
from .base import Engine, Grouping, NearestCentre
from .local import LocalEngine, cell_index_box, cells_of_keys

__all__ = ["DaskData", "DaskEngine", "DaskGrouping", "as_dask_data", "chunk_totals",
           "unit_box_engine"]

#: Values of one feature per sorting partition (a task sorts about this many).
_PART_VALUES = 1 << 22
#: Grid cells up to which every chunk counts its records in a dense array of the whole grid
#: (if no larger than the chunk), added in the fixed tree: no exchange by key range.
_DENSE_CELLS = 1 << 24
#: Values per feature batch of a neighbour-gap pass (bounds the workers' memory for the gaps).
_BATCH_VALUES = 1 << 25
#: Records up to which a neighbour-gap pass sorts whole columns, a task per few columns (the
#: NumPy engine's sort, without the bucket sort's counting and splitting passes over the
#: records: on 10M x 10 float32 those two passes cost about as much as the sorts).
_COLUMN_VALUES = 1 << 25
#: Chunks whose labels are gathered at once (bounds the client's memory for labels_).
_LABEL_BATCH = 8
#: Records above which labels stay on the cluster as a lazy dask array (2^27 int64 labels
#: are 1 GiB: more would not fit the client's memory beside the fit).
LAZY_LABELS = 1 << 27
#: Share of the workers' memory (the sum of their memory limits) that the clipped records may
#: take when the engine keeps them on the workers; larger inputs are not persisted, and every
#: pass recomputes its chunks where it reads them (re-reads the files, re-draws generated
#: chunks). A decision from public facts (the input's shape and dtype, the cluster's
#: configuration) that changes how the aggregates are computed, never their values.
PERSIST_SHARE = 0.25
_CACHE: dict = {}  # the last validated inputs: one pass per input, even across nested fits


# ---------------------------------------------------------------------------- the input
class DaskData:
    """A validated dask input: an (n, d) float dask array with known row chunks.

    What ``check_X`` returns for a dask array, a dask DataFrame or a Parquet path. ``shape``,
    ``dtype`` and ``columns`` (the feature names, or None) are known without a pass over the
    data; ``np.asarray(data)`` and ``data[rows]`` compute (on the current scheduler).

    Parameters
    ----------
    array : dask.array.Array
        (n, d) float32 or float64, finite, known chunks, one chunk along the features.
    columns : list of str or None
        Feature names.
    """

    def __init__(self, array, columns=None):
        self.array = array
        self.columns = columns
        self.shape = tuple(int(s) for s in array.shape)
        self.dtype = array.dtype
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype=None, copy=None):
        out = np.asarray(self.array.compute())
        return out if dtype is None else out.astype(dtype, copy=False)

    def __getitem__(self, key):
        return np.asarray(self.array[key].compute())

    def __repr__(self) -> str:
        return f"DaskData(shape={self.shape}, dtype={self.dtype}, chunks={self.array.chunks[0]})"


def is_parquet_path(X) -> bool:
    """Whether ``X`` is a path to a ``.parquet`` file or to a directory of Parquet files."""
    if not isinstance(X, (str, os.PathLike)):
        return False
    p = Path(X)
    if p.suffix.lower() == ".parquet":
        return True
    return p.is_dir() and any(p.glob("*.parquet"))


def _block_stats(x) -> np.ndarray:
    """(rows, rows with a non-finite value, first such row, its first bad column)."""
    bad = ~np.isfinite(x)
    rows = np.flatnonzero(bad.any(axis=1))
    if rows.size == 0:
        return np.array([x.shape[0], 0, -1, -1], dtype=np.int64)
    return np.array([x.shape[0], rows.size, rows[0], np.flatnonzero(bad[rows[0]])[0]],
                    dtype=np.int64)


def _frame_to_float(frame, dtype):
    return frame.to_numpy(dtype=dtype, na_value=np.nan)


def _frame_blocks(df, name: str):
    """Delayed float blocks of a dask DataFrame (nullable dtypes: missing values -> NaN)."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    bad = [str(c) for c, t in df.dtypes.items() if not (is_numeric_dtype(t) or is_bool_dtype(t))]
    if bad:
        raise ValueError(f"{name} must be numeric; column(s) {', '.join(bad[:5])} are not. Drop "
                         "or encode non-numeric columns first.")
    dtype = np.float32 if all(str(t) == "float32" for t in df.dtypes) else np.float64
    cols = list(df.columns)
    names = cols if cols and all(isinstance(c, str) for c in cols) else None
    return [delayed(_frame_to_float)(p, dtype) for p in df.to_delayed()], len(cols), dtype, names


def _array_blocks(X, name: str):
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {X.shape}")
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool) or np.issubdtype(
            X.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real and numeric; got dtype {X.dtype}")
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    X = X.astype(dtype) if X.dtype != dtype else X
    if X.numblocks[1] != 1:
        X = X.rechunk({1: -1})
    return X, list(X.to_delayed()[:, 0]), int(X.shape[1]), dtype


def _cache_key(X):
    if isinstance(X, (str, os.PathLike)):
        p = Path(X).resolve()
        return ("path", str(p), p.stat().st_mtime_ns if p.exists() else None)
    return ("dask", getattr(X, "name", None) or getattr(X, "_name", None))


def as_dask_data(X, name: str = "X") -> DaskData:
    """Validate a dask array, dask DataFrame or Parquet path in one pass over the data.

    The pass counts the rows of every chunk (so ``n`` is known) and the rows with a NaN or an
    infinite value, which are refused as the NumPy path refuses them.

    Returns
    -------
    DaskData
    """
    if isinstance(X, DaskData):
        return X
    key = _cache_key(X)
    if key[1] is not None and key in _CACHE:
        return _CACHE[key]
    if isinstance(X, (str, os.PathLike)):
        import dask.dataframe as dd

        if not Path(X).exists():
            raise FileNotFoundError(f"{name}: {X} does not exist")
        X = dd.read_parquet(str(X))
    array, names = None, None
    if isinstance(X, da.Array):
        array, blocks, d, dtype = _array_blocks(X, name)
    elif hasattr(X, "to_delayed") and hasattr(X, "dtypes"):
        blocks, d, dtype, names = _frame_blocks(X, name)
    else:
        raise TypeError(f"{name}: expected a dask array, a dask DataFrame or a Parquet path, "
                        f"got {type(X).__name__}")
    if d == 0:
        raise ValueError(f"{name} has no features (0 columns)")
    stats = np.stack(dask.compute(*[delayed(_block_stats)(b) for b in blocks])) if blocks else \
        np.zeros((0, 4), dtype=np.int64)
    lengths = stats[:, 0]
    n = int(lengths.sum())
    if n == 0:
        raise ValueError(f"{name} has 0 samples; at least 1 needed (an empty data set cannot "
                         "be clustered)")
    if stats[:, 1].any():
        i = int(np.flatnonzero(stats[:, 1])[0])
        raise ValueError(
            f"{name} contains NaN or infinite values in {int(stats[:, 1].sum())} row(s) (first: "
            f"row {int(lengths[:i].sum() + stats[i, 2])}, column {int(stats[i, 3])}); remove or "
            "impute them before fitting")
    if array is None or any(math.isnan(c) for c in array.chunks[0]):
        array = da.concatenate([da.from_delayed(b, shape=(int(m), d), dtype=dtype)
                                for b, m in zip(blocks, lengths, strict=True)], axis=0)
    out = DaskData(array, names)
    if key[1] is not None:
        while len(_CACHE) >= 4:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = out
    return out


def record_labels(data: DaskData, fn, *args) -> np.ndarray:
    """``fn(chunk, *args)``, an integer label per record, on every chunk where it lives,
    gathered into one int64 NumPy array (int32 in transit when the labels fit), one chunk at
    a time on a ``distributed`` client: the client holds the result and one chunk's labels,
    never every chunk's labels and their concatenation at once. Above :data:`LAZY_LABELS`
    records the labels are not gathered: the result is a lazy int64 dask array, one block per
    chunk, computed where the chunks live when it is read (``.compute()``, ``to_parquet``, a
    reduction)."""
    if data.shape[0] > LAZY_LABELS:
        def labels64(x, *a):
            return np.asarray(fn(x, *a)).astype(np.int64, copy=False)

        return data.array.map_blocks(labels64, *args, drop_axis=1, dtype=np.int64)
    narrow = data.shape[0] < 2**31

    def labels(x, *a):
        out = np.asarray(fn(x, *a))
        return out.astype(np.int32, copy=False) if narrow else out

    blocks = data.array.map_blocks(labels, *args, drop_axis=1,
                                   dtype=np.int32 if narrow else np.int64).to_delayed()
    out = np.empty(data.shape[0], dtype=np.int64)
    pos = 0
    for part in one_at_a_time(list(blocks), _LABEL_BATCH):
        out[pos : pos + part.size] = part
        pos += part.size
    return out


def chunk_totals(data: DaskData, fn, *args) -> np.ndarray:
    """``fn(chunk, *args)``, an exact integer aggregate of one chunk of the raw (validated,
    unclipped) records, on every chunk where it lives, the chunks' aggregates added in the
    fixed tree: one pass over the data, one small array to the client, equal to ``fn`` on all
    the records at once whatever the chunking (an empty chunk adds zeros). Computed on the
    current scheduler; draws nothing."""
    blocks = list(data.array.to_delayed()[:, 0])
    return np.asarray(dask.compute(tasks.tree([delayed(fn)(b, *args) for b in blocks]))[0])


def nearest_centre_labels(data: DaskData, centres) -> np.ndarray:
    """Nearest-centre index of every record (chunk by chunk on the cluster), as NumPy."""
    from .._geometry import nearest_centres

    return record_labels(data, nearest_centres, np.asarray(centres, dtype=float))


# ---------------------------------------------------------------------------- the cluster
def keeps_records(client, shape, dtype) -> bool:
    """Whether records of ``shape`` and ``dtype`` fit in :data:`PERSIST_SHARE` of the
    workers' memory, so that the engine persists them there."""
    nbytes = int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize
    return nbytes <= PERSIST_SHARE * workers_memory(client)


class DaskGrouping(Grouping):
    """Group index per record (-1 = in no group), a persisted dask array aligned with the
    records' row chunks, or a chain of regroupings not yet applied to one.

    A regrouping stays pending until a query reads it: the chain from the last persisted
    grouping (DPM's relabel and next split, the leaf routing's one test per depth) is then
    applied by one task per chunk and persisted, submitted with the query that reads it (one
    round trip, no task and no scheduler hop per link).
    """

    def __init__(self, group, n_groups: int, *, base=None, ops=(), engine=None, parent=None):
        self.group = group  # None while pending
        self.n_groups = int(n_groups)
        self._base, self._ops, self._engine = base, tuple(ops), engine
        self._blocks = None
        # the pending grouping this one extends (weakly: only while the caller holds it)
        self._parent = None if parent is None else weakref.ref(parent)

    def then(self, engine, method: str, args: tuple, n_groups: int) -> DaskGrouping:
        """This grouping regrouped by ``LocalEngine.method(..., *args)``, pending."""
        if self.group is None:
            base, ops = self._base, self._ops
        else:
            base, ops = self, ()
        return DaskGrouping(None, n_groups, base=base,
                            ops=(*ops, (method, args, self.n_groups)), engine=engine,
                            parent=self if self.group is None else None)

    @property
    def blocks(self) -> list:
        """The persisted chunks of ``group``, as delayed objects (applied on first use)."""
        if self._blocks is None:
            if self.group is None:
                self._apply()
            self._blocks = list(self.group.to_delayed())
        return self._blocks

    def _apply(self) -> None:
        """Apply the pending chain. A pending parent still in use (DPM reads a level's
        children only through their left halves, then regroups the children again) gets its
        groups from the same pass, else every later chain would redo all the regroupings
        since the base; a parent applied since is the shorter chain's base."""
        parent = None if self._parent is None else self._parent()
        base, ops, engine = self._base, self._ops, self._engine
        if parent is not None and parent.group is None and parent._base is base:
            parent.group, self.group = engine._apply_chain(base, ops, keep=len(parent._ops))
            parent._base, parent._ops, parent._engine = None, (), None
        else:
            if parent is not None and parent.group is not None:
                base, ops = parent, ops[len(ops) - 1:]  # the link from the parent
            self.group = engine._apply_chain(base, ops)
        self._base, self._ops, self._engine, self._parent = None, (), None, None


class DaskEngine(Engine):
    """Records held in a ``dask.array`` on a ``distributed`` cluster, clipped to the public
    bounds.

    Parameters
    ----------
    X : dask.array.Array, DaskData or numpy.ndarray
        (n, d) finite numbers (float32 is kept as float32, anything else becomes float64).
        Validate user input with :func:`as_dask_data` first; the engine assumes finite values.
    bounds : (d, 2) public bounds.
    retries : int, default 2
        How often the scheduler may rerun a failed task (tasks are pure: a rerun returns the
        same aggregate and draws nothing).

    Notes
    -----
    Computations run on the current ``distributed`` client; without one, the engine starts a
    ``LocalCluster`` of its own (one worker, a thread per core) and closes it when the engine
    is garbage-collected (at the end of the fit).

    On worker processes, ``distributed`` sets ``MALLOC_TRIM_THRESHOLD_`` by default
    (``distributed.nanny.pre-spawn-environ``), which pins glibc's mmap threshold at 128 KiB:
    every large NumPy temporary of a task is then a fresh mapping that page-faults. The
    busiest passes (regroupings, gap sorts, exact sums, grid keys, labels) reuse per-thread
    scratch arrays (:mod:`privclust._scratch`), so this costs little there, but other
    temporaries remain (measured on 2 worker processes: DPM on 10M x 10 1.40-1.45x the NumPy
    engine with it, 1.25x without). Where worker memory allows, start the cluster without it
    (``dask.config.set({"distributed.nanny.pre-spawn-environ": {}})`` before
    ``LocalCluster``); ``benchmarks/scale.py --no-malloc-trim`` measures both.
    """

    def __init__(self, X, bounds, *, retries: int = 2, _transform=None):
        self.bounds = np.asarray(bounds, dtype=float)
        self.retries = int(retries)
        raw = _as_array(X)
        self._client, cluster = client_or_local()
        if cluster is not None:
            weakref.finalize(self, close, self._client, cluster)
        if _transform is None:
            dtype = raw.dtype if raw.dtype in (np.float32, np.float64) else np.dtype(np.float64)
            lo = self.bounds[:, 0].astype(dtype)
            hi = self.bounds[:, 1].astype(dtype)
            clipped = raw.map_blocks(tasks.clip, lo, hi, dtype=dtype)
        else:  # (transform, dtype, lo, hi): a public map applied before the engine's clip
            fn, dtype, lo, hi = _transform
            clipped = raw.map_blocks(fn, dtype=dtype)
        outside = raw.map_blocks(tasks.outside, lo, hi, drop_axis=1,
                                 chunks=((1,) * raw.numblocks[0],), dtype=np.int64)
        self.persisted = keeps_records(self._client, raw.shape, dtype)
        self.on_clipped, self._clip_count = None, None
        if self.persisted:
            self.X, outside = self._client.persist([clipped, outside], retries=self.retries)
            # Local diagnostic for the data holder; never part of a release.
            self.n_clipped_records = int(self._compute(outside.sum())[0])
        else:  # every pass recomputes its chunks: nothing per record stays on the workers
            self.X = clipped
            # counted with the first computation, from the chunks it draws (the graphs left
            # unfused, so that both read the same tasks' chunks)
            self._clip_count = tasks.tree([delayed(tasks.outside)(b, lo, hi) for b in
                                           raw.to_delayed(optimize_graph=False)[:, 0]])
        self._proto = LocalEngine(np.zeros((0, self.X.shape[1]), dtype=dtype), self.bounds)
        self._bins_cache = None  # (key, bin blocks, persisted bins) of the last axis histogram
        self._xblocks = list(self.X.to_delayed(optimize_graph=self.persisted)[:, 0])

    @property
    def n_records(self) -> int:
        """Exact n: for engine-internal use and tests, never released without noise."""
        return int(self.X.shape[0])

    def _chunk_workers(self) -> list:
        """For every chunk of ``X``, the workers holding it (None where unknown): a placement
        for tasks that read one chunk."""
        held = self._client.who_has(self.X)
        return [list(held.get(x.key, ())) or None for x in self._xblocks]

    def keep(self, objs: list, nbytes: int = 0) -> list:
        """``objs`` (one per chunk) persisted when the records are, or when they take ``nbytes``
        (> 0) within :data:`PERSIST_SHARE` of the workers' memory; else recomputed by readers."""
        if self.persisted or 0 < nbytes <= PERSIST_SHARE * workers_memory(self._client):
            return self._client.persist(list(objs), retries=self.retries)
        return list(objs)

    @property
    def n_clipped_records(self) -> int:
        """Records with a value outside the bounds (a local diagnostic for the data holder,
        never part of a release). Records that are not persisted are counted with the first
        computation that reads them (``on_clipped``, when set, is then called with the
        count); read before that, the count costs a pass of its own."""
        if self._clip_count is not None:
            self._compute()
        return self._n_clipped

    @n_clipped_records.setter
    def n_clipped_records(self, value) -> None:
        self._n_clipped = int(value)

    @property
    def clip_count_pending(self) -> bool:
        """Whether ``n_clipped_records`` waits for the first computation."""
        return getattr(self, "_clip_count", None) is not None

    def _compute(self, *objs):
        pending = getattr(self, "_clip_count", None)
        futures = self._client.compute([*objs, *([] if pending is None else [pending])],
                                       retries=self.retries)
        out = self._client.gather(futures)
        if pending is not None:
            self._clip_count = None
            self._n_clipped = int(np.asarray(out.pop()).sum())
            if self._n_clipped and self.on_clipped is not None:
                self.on_clipped(self._n_clipped)
        return out

    def _agg_graph(self, method, grouping, *args, **kwargs):
        """A LocalEngine query on every chunk, the chunk results added in a fixed tree
        (delayed: several queries can go in one computation)."""
        gs = grouping.blocks if grouping is not None else [None] * len(self._xblocks)
        n_groups = grouping.n_groups if grouping is not None else 0
        return tasks.tree([delayed(tasks.on_block)(self._proto, method, x, g, n_groups, args,
                                                   kwargs)
                           for x, g in zip(self._xblocks, gs, strict=True)])

    def _agg(self, method, grouping, *args, **kwargs):
        """:meth:`_agg_graph`, computed."""
        return self._compute(self._agg_graph(method, grouping, *args, **kwargs))[0]

    def _regroup(self, method, grouping, args, n_groups):
        return grouping.then(self, method, args, n_groups)

    def _apply_chain(self, base, ops, keep=None):
        """``base``'s groups regrouped by ``ops`` in one task per chunk, persisted; with
        ``keep``, also the groups after the first ``keep`` ops, from the same tasks:
        ``(kept, final)``."""
        if keep is None:
            g = da.blockwise(tasks.regroup_chain, "i", self._proto, None, ops, None, self.X,
                             "ij", base.group, "i", dtype=np.int32, concatenate=True)
            return self._client.persist(g, retries=self.retries)
        both = self._client.persist(da.blockwise(
            tasks.regroup_chain, "ki", self._proto, None, ops, None, self.X, "ij", base.group,
            "i", keep, None, new_axes={"k": 2}, dtype=np.int32, concatenate=True),
            retries=self.retries)
        return tuple(self._client.persist([both[0], both[1]], retries=self.retries))

    # groupings -------------------------------------------------------------------------
    def root(self) -> DaskGrouping:
        """See :meth:`privclust.engine.base.Engine.root`."""
        g = da.zeros(self.X.shape[0], chunks=(self.X.chunks[0],), dtype=np.int32)
        return DaskGrouping(self._client.persist(g) if self.persisted else g, 1)

    def regroup(self, grouping, feature, threshold, left, right, n_groups,
                parked=None) -> DaskGrouping:
        """See :meth:`privclust.engine.base.Engine.regroup`."""
        args = tuple(np.asarray(a) for a in (feature, threshold, left, right)) + (
            n_groups, None if parked is None else np.asarray(parked))
        return self._regroup("regroup", grouping, args, n_groups)

    def regroup_oblique(self, grouping, normal, offset, left, right, n_groups) -> DaskGrouping:
        """See :meth:`privclust.engine.base.Engine.regroup_oblique`."""
        args = tuple(np.asarray(a) for a in (normal, offset, left, right)) + (n_groups,)
        return self._regroup("regroup_oblique", grouping, args, n_groups)

    # aggregates ------------------------------------------------------------------------
    def count(self, grouping) -> np.ndarray:
        """See :meth:`privclust.engine.base.Engine.count`."""
        return self._agg("count", grouping)

    def axis_histogram(self, grouping, lo, width, n_bins) -> np.ndarray:
        """See :meth:`privclust.engine.base.Engine.axis_histogram`."""
        lo = np.asarray(lo, dtype=float)
        width = np.asarray(width, dtype=float)
        n_bins = int(n_bins)
        return self._compute(self._histogram_graph(grouping, lo, width, n_bins))[0]

    def count_and_histogram(self, grouping, lo, width, n_bins):
        """See :meth:`privclust.engine.base.Engine.count_and_histogram` (one computation)."""
        lo = np.asarray(lo, dtype=float)
        width = np.asarray(width, dtype=float)
        return tuple(self._compute(self._agg_graph("count", grouping),
                                   self._histogram_graph(grouping, lo, width, int(n_bins))))

    def _histogram_graph(self, grouping, lo, width, n_bins):
        """The delayed histogram: the chunks' histograms from their persisted bins (or, for
        bins per group, from the records), added in the fixed tree."""
        if lo.ndim == 2:
            return self._agg_graph("axis_histogram", grouping, lo, width, n_bins)
        key, bins = self._bins(lo, width, n_bins)
        return tasks.tree([delayed(tasks.histogram_block)(self._proto, x, b, key, g,
                                                          grouping.n_groups, lo, width, n_bins)
                           for x, b, g in zip(self._xblocks, bins, grouping.blocks, strict=True)])

    def _bins(self, lo, width, n_bins):
        """The bin of every (record, dimension), persisted on the workers beside the records
        (the NumPy engine's cache: DPM asks with the same bins at every level), and its key."""
        key = (lo.tobytes(), width.tobytes(), n_bins)
        if self._bins_cache is None or self._bins_cache[0] != key:
            self._bins_cache = None  # the old bins are released before the new ones exist
            dtype = np.uint8 if n_bins <= 256 else (np.uint16 if n_bins <= 65536 else np.int32)
            bins = self._client.persist(self.X.map_blocks(
                tasks.bins_block, self._proto, lo, width, n_bins, dtype=dtype),
                retries=self.retries)
            self._bins_cache = (key, list(bins.to_delayed()[:, 0]), bins)
        return self._bins_cache[0], self._bins_cache[1]

    def centred_sums(self, grouping, centres) -> np.ndarray:
        """See :meth:`privclust.engine.base.Engine.centred_sums` (the chunks' exact totals
        added, then converted once: equal to the NumPy engine's bit for bit)."""
        return self._agg("exact_centred_sums", grouping,
                         np.asarray(centres, dtype=float)).to_float()

    def lattice_misses(self, feature, steps):
        """See :meth:`privclust.engine.base.Engine.lattice_misses`."""
        return self._agg("lattice_misses", None, int(feature), np.asarray(steps, dtype=float))

    def assignment_stats(self, assignment, *, second_moments=False, squared_norms=False,
                         about=None):
        """See :meth:`privclust.engine.base.Engine.assignment_stats` (the chunks' exact totals
        added, then centred and converted once on the client: the NumPy engine's bits)."""
        about = self._check_about(about)
        if isinstance(assignment, NearestCentre):  # the chunks need no cache of their own
            assignment = NearestCentre(np.asarray(assignment.centres, dtype=float))
        return float_stats(*self._agg("exact_assignment_stats", None, assignment,
                                      second_moments=second_moments,
                                      squared_norms=squared_norms), about)

    def zone_cell_counts(self, centres, zone_centres, zone_radii, cell_centres) -> np.ndarray:
        """See :meth:`privclust.engine.base.Engine.zone_cell_counts`."""
        return self._agg("zone_cell_counts", None, *(np.asarray(a, dtype=float) for a in (
            centres, zone_centres, zone_radii, cell_centres)))

    def zone_records(self, centres, zone_centres, zone_radii):
        """See :meth:`privclust.engine.base.Engine.zone_records`."""
        raise NotImplementedError(
            "zone_records is not available on the Dask engine: it returns records, not "
            "aggregates (only faithful, non-private reproductions ask for it); load the data "
            "into memory (a NumPy array) for those variants")

    def cell_counts(self, origin, cell_width):
        """See :meth:`privclust.engine.base.Engine.cell_counts`."""
        origin = np.asarray(origin, dtype=float)
        cell_width = np.asarray(cell_width, dtype=float)
        n, d = self.X.shape
        if n == 0:
            return np.zeros((0, d), dtype=np.int64), np.zeros(0, dtype=np.int64)
        lo, span, strides = cell_index_box(self.bounds, origin, cell_width)
        if strides is None:  # keys would overflow: rows
            parts = [delayed(tasks.on_block)(self._proto, "cell_counts", x, None, 0,
                                             (origin, cell_width), {}) for x in self._xblocks]
            return self._compute(delayed(tasks.merge_cell_rows)(*parts))[0]
        total = int(np.prod(span))
        if total <= min(_DENSE_CELLS, max(self.X.chunks[0])):  # dense counts, added in a tree
            dense = self._compute(tasks.tree([
                delayed(tasks.dense_cell_counts)(x, origin, cell_width, lo, span, strides,
                                                 np.int32 if n < 2**31 else np.int64)
                for x in self._xblocks]))[0]
            ukeys = np.flatnonzero(dense)
            return cells_of_keys(ukeys, lo, strides), dense[ukeys].astype(np.int64)
        n_parts = max(1, min(-(-n // _PART_VALUES), total))
        width = -(-total // n_parts)  # key range per partition
        n_parts = -(-total // width)  # no empty range past the grid's last key
        splits = [delayed(tasks.cell_keys, nout=n_parts)(x, origin, cell_width, lo, span,
                                                         strides, n_parts, width)
                  for x in self._xblocks]
        res = self._compute(*[delayed(tasks.merge_cells)(p * width,
                                                         min(width, total - p * width),
                                                         *[s[p] for s in splits])
                              for p in range(n_parts)])
        ukeys = np.concatenate([r[0] for r in res])  # partitions are key ranges, in order
        counts = np.concatenate([r[1] for r in res])
        return cells_of_keys(ukeys, lo, strides), counts

    def split_cells(self, grouping, origin, cell_width, dims, keep=None):
        """See :meth:`.LocalEngine.split_cells` (per chunk, merged: :mod:`._dask_cells`)."""
        group, parent, bits, counts = _dask_cells.split_cells(self, grouping, origin,
                                                              cell_width, dims, keep)
        return DaskGrouping(group, parent.size), parent, bits, counts

    def group_cells(self, grouping, origin, cell_width):
        """See :meth:`privclust.engine.local.LocalEngine.group_cells`."""
        return _dask_cells.group_cells(self, grouping, origin, cell_width)

    root_keys, split_keys = _dask_keys.root_keys, _dask_keys.split_keys  # trees by key
    # neighbour gaps: a distributed bucket sort per feature -----------------------------
    def _sort_pass(self, blocks, lo, inv_width, n_values, n_cols, groups=None, span=None):
        """Sort every column of ``blocks`` across chunks; the per-partition results in column
        order (``n_parts`` per column) and ``n_parts``."""
        hist, plan = self._sort_hist(blocks, lo, inv_width, n_values, groups)
        if hist is not None:
            hist = self._compute(hist)[0]
        return self._compute(*self._sort_parts(blocks, lo, inv_width, plan, hist, n_cols,
                                               groups, span)), plan[0]

    def _sort_hist(self, blocks, lo, inv_width, n_values, groups=None):
        """A sort pass's bucket counts, delayed (None for one partition per column), and its
        ``(n_parts, n_buckets, per_group)``."""
        n_parts = max(1, -(-n_values // _PART_VALUES))
        n_buckets, per_group, hist = 1, 0, None
        gblocks = groups.blocks if groups is not None else [None] * len(blocks)
        if groups is not None:
            per_group = max(1, -(-256 * n_parts // max(groups.n_groups, 1)))
            n_buckets = per_group * groups.n_groups
        if n_parts > 1:
            n_buckets = n_buckets if groups is not None else 256 * n_parts
            hist = tasks.tree([
                delayed(tasks.bucket_hist)(x, lo, inv_width, n_buckets, g, per_group)
                for x, g in zip(blocks, gblocks, strict=True)])
        return hist, (n_parts, n_buckets, per_group)

    def _sort_parts(self, blocks, lo, inv_width, plan, hist, n_cols, groups=None, span=None):
        """A sort pass's sorted partitions, delayed, from its bucket counts ``hist``."""
        n_parts, n_buckets, per_group = plan
        lut = None if hist is None else tasks.partition_lut(hist, n_parts)
        gblocks = groups.blocks if groups is not None else [None] * len(blocks)
        splits = [delayed(tasks.split_block, nout=n_cols * n_parts)(
            x, lo, inv_width, n_buckets, lut, n_parts, g, per_group, span)
            for x, g in zip(blocks, gblocks, strict=True)]
        if groups is None:
            return [delayed(tasks.sort_part)(*[s[k] for s in splits])
                    for k in range(n_cols * n_parts)]
        return [delayed(tasks.sort_group_part)(span[k // n_parts], *[s[k] for s in splits])
                for k in range(n_cols * n_parts)]

    def neighbour_gaps(self, dtype=np.float32, dither=None) -> np.ndarray:
        """Gaps per dimension, (n-1, d), in ``dtype``: equal to the NumPy engine's, in the same
        order. ``dither``'s offsets are drawn here, on the client, in the NumPy engine's order
        (one call per dithered dimension); only the resulting public values reach the tasks."""
        n, d = self.X.shape
        gaps = np.empty((d, max(n - 1, 0)), dtype=dtype)
        if n == 0:
            return gaps.T
        batch = max(1, _BATCH_VALUES // n)
        if n <= min(_COLUMN_VALUES, _BATCH_VALUES):  # tasks sort whole columns, dithered or not
            offsets = {}  # drawn here, in the NumPy engine's order: one call per dithered column
            for j in range(d):
                if dither is not None and dither[0][j] > 0:  # sent once, not in the graph
                    offsets[j] = self._client.scatter(dither[0][j] * np.asarray(dither[1](n)))
            groups = np.array_split(np.arange(d), max(min(d, 4), -(-d // batch)))
            res = self._compute(*[
                delayed(tasks.sort_columns)(  # only the group's columns leave their worker
                    dtype, {i: offsets[j] for i, j in enumerate(c) if j in offsets},
                    *[delayed(tasks.take_columns)(x, c) for x in self._xblocks])
                for c in groups])
            for c, r in zip(groups, res, strict=True):
                gaps[c] = r
            return gaps.T
        starts = list(range(0, d, batch))
        # pipelined: a batch's bucket counts are computed while the batch before it is split,
        # sorted, gathered and stitched (one wait per batch instead of two)
        nxt = self._gap_batch(starts[0], batch, dither, dtype)
        for i in range(len(starts)):
            js, blocks, lo, inv_width, hist, plan = nxt
            hist = None if hist is None else hist.result()
            parts = self._client.compute(
                self._sort_parts(blocks, lo, inv_width, plan, hist, js.size),
                retries=self.retries)
            if i + 1 < len(starts):
                nxt = self._gap_batch(starts[i + 1], batch, dither, dtype)
            res, n_parts = self._client.gather(parts), plan[0]
            for k, j in enumerate(js):
                tasks.stitch(res[k * n_parts : (k + 1) * n_parts], gaps[j])
        return gaps.T

    def _gap_batch(self, start, batch, dither, dtype):
        """One batch of :meth:`neighbour_gaps`' features: its dither offsets drawn (here, in
        the NumPy engine's order) and each chunk's part scattered, the chunks' delayed blocks,
        and its bucket counts submitted: ``(js, blocks, lo, inv_width, hist future, plan)``."""
        n, d = self.X.shape
        edges = np.cumsum((0, *self.X.chunks[0]))
        js = np.arange(start, min(d, start + batch))
        offs, pad = [[] for _ in self.X.chunks[0]], []
        for j in js:
            w = dither[0][j] if dither is not None and dither[0][j] > 0 else 0.0
            v = w * np.asarray(dither[1](n)) if w else None
            for b, part in enumerate(offs):
                part.append(None if v is None else
                            self._client.scatter(v[edges[b] : edges[b + 1]]))
            pad.append(abs(w))
        lo = self.bounds[js, 0] - np.asarray(pad)
        inv_width = 1.0 / (self.bounds[js, 1] - self.bounds[js, 0] + 2 * np.asarray(pad))
        inv_width = inv_width * 256 * max(1, -(-n // _PART_VALUES))  # as it always was
        # one task per chunk, kept on its worker: the bucket count and the split both read it.
        # Placed where its chunk lives: while the batch before it is sorted, the scheduler
        # would send some to the idle worker, which then fetches the whole chunk (~1 s for
        # 5M x 10 float64 between two local processes)
        blocks = [self._client.persist(delayed(tasks.gap_block)(x, js, dtype, off),
                                       retries=self.retries, workers=where,
                                       allow_other_workers=True)
                  for x, off, where in zip(self._xblocks, offs, self._chunk_workers(),
                                           strict=True)]
        hist, plan = self._sort_hist(blocks, lo, inv_width, n)
        fut = None if hist is None else self._client.compute(hist, retries=self.retries)
        return js, blocks, lo, inv_width, fut, plan

    def group_neighbour_gaps(self, grouping):
        """Per group and dimension, the gaps between consecutive sorted values of the group's
        records: ``(gaps (m, d) float64, group (m,))``, equal to the NumPy engine's."""
        n_g = self.count(grouping)
        m = int(np.maximum(n_g - 1, 0).sum())
        d = self.n_features
        gid = np.repeat(np.arange(grouping.n_groups), np.maximum(n_g - 1, 0)).astype(
            np.int32 if grouping.n_groups < 2**31 else np.int64)
        out = np.empty((m, d))
        if m == 0:
            return out, gid
        n_in = int(n_g.sum())
        lo = self.bounds[:, 0]
        rng = self.bounds[:, 1] - lo
        batch = max(1, _BATCH_VALUES // n_in)
        for start in range(0, d, batch):
            js = np.arange(start, min(d, start + batch))
            sub = self.X[:, start : start + js.size]
            n_parts = max(1, -(-n_in // _PART_VALUES))
            per_group = max(1, -(-256 * n_parts // max(grouping.n_groups, 1)))
            res, n_parts = self._sort_pass(list(sub.to_delayed()[:, 0]), lo[js],
                                           per_group / rng[js], n_in, js.size, grouping,
                                           2.0 * rng[js])
            for i, j in enumerate(js):
                out[:, j] = tasks.stitch_groups(res[i * n_parts : (i + 1) * n_parts])[0]
        return out, gid


def _as_array(X):
    """A dask array with known row chunks and one chunk along the features."""
    if isinstance(X, DaskData):
        return X.array
    if isinstance(X, np.ndarray):
        return da.from_array(X, chunks=(max(1, _PART_VALUES // max(X.shape[1], 1)), -1))
    if any(math.isnan(c) for c in X.chunks[0]):
        X = X.compute_chunk_sizes()
    return X.rechunk({1: -1}) if X.numblocks[1] != 1 else X


def unit_box_engine(X, bounds) -> DaskEngine:
    """The mixture's engine: records clipped to ``bounds`` and mapped to ``[-1, 1]^d`` (a public
    map), as ``privclust.cluster.mixture`` builds it for NumPy input, in one persisted pass;
    ``n_clipped_records`` counts the records outside ``bounds``."""
    bounds = np.asarray(bounds, dtype=float)
    lo, hi = bounds[:, 0], bounds[:, 1]
    mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0

    def to_unit(x):
        return np.clip((np.clip(x, lo, hi) - mid) / half, -1.0, 1.0)

    d = bounds.shape[0]
    return DaskEngine(X, np.tile([-1.0, 1.0], (d, 1)),
                      _transform=(to_unit, np.dtype(np.float64), lo, hi))


def mapped_engine(engine: DaskEngine, fn, bounds, n_features: int) -> DaskEngine:
    """A Dask engine over ``fn`` (a public per-record map, float64 rows of ``n_features``
    values inside ``bounds``) applied to every chunk of ``engine``'s clipped records where the
    chunk lives, persisted there, on ``engine``'s client (no pass to validate or clip: ``fn``'s
    values lie inside ``bounds``). CoresetKMeans grows its tree on the records' images under
    a public projection this way."""
    out = DaskEngine.__new__(DaskEngine)
    out.bounds = np.asarray(bounds, dtype=float)
    out.retries = engine.retries
    out._client = engine._client
    out._source = engine  # keeps a cluster the engine started open as long as this one
    images = engine.X.map_blocks(fn, dtype=np.float64,
                                 chunks=(engine.X.chunks[0], (int(n_features),)))
    out.persisted = keeps_records(engine._client, images.shape, images.dtype)
    out.X = engine._client.persist(images, retries=engine.retries) if out.persisted else images
    out.on_clipped, out._clip_count = None, None
    out.n_clipped_records = 0
    out._proto = LocalEngine(np.zeros((0, int(n_features))), out.bounds)
    out._bins_cache = None
    out._xblocks = list(out.X.to_delayed()[:, 0])
    return out
