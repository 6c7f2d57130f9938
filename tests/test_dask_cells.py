"""The shifted grid tree's splits on the Dask engine (``split_cells``, ``group_cells``): the
same children, parents, bits, counts, labels and cells as the NumPy engine level after level,
on four chunkings; the tree walk uses them (no parent lookup on the client)."""

from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")

from tests._dask_cases import CHUNKINGS  # noqa: E402

from privclust.cluster._shifted_tree import CellWalk, ShiftedGrid  # noqa: E402
from privclust.engine import LocalEngine  # noqa: E402
from privclust.engine.dask import DaskEngine  # noqa: E402


def _records(n=3000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 2.0
    X[::5] = np.round(X[::5])  # records on cell edges
    return X


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_split_cells_equals_the_numpy_engine(dask_client, chunking):
    X = _records()
    bounds = np.tile([-8.0, 8.0], (3, 1))
    L = LocalEngine(X, bounds)
    D = DaskEngine(da.from_array(X, chunks=(CHUNKINGS[chunking](X.shape[0]), 3)), bounds)
    gl, gd = L.root(), D.root()
    origin = np.array([-8.0, -8.5, -9.0])
    width = np.full(3, 32.0)  # the root cell holds the bounds
    keep = None
    for level in range(1, 7):
        dims = np.array([0, 1, 2]) if level % 2 else np.array([1])
        width[dims] /= 2  # every group is one cell of this grid
        gl, *out_l = L.split_cells(gl, origin, width, dims, keep)
        gd, *out_d = D.split_cells(gd, origin, width, dims, keep)
        # from level 3 on, the groups of odd index are not split further (a pruned tree)
        keep = np.arange(gl.n_groups) % 2 == 0 if level >= 2 else None
        for a, b in zip(out_l, out_d, strict=True):
            np.testing.assert_array_equal(a, b)
        assert gl.n_groups == gd.n_groups
        labels = D._compute(gd.group)[0]
        np.testing.assert_array_equal(gl.group, labels)
        assert labels.dtype == gl.group.dtype
        np.testing.assert_array_equal(L.group_cells(gl, origin, width),
                                      D.group_cells(gd, origin, width))


def test_split_cells_keeps_only_the_kept_groups_children():
    """A group not kept sends its records to no child; the children of the kept groups, their
    parents, bits and counts are those of the split of every group."""
    X = _records(4000, 3, 2)
    bounds = np.tile([-8.0, 8.0], (3, 1))
    L = LocalEngine(X, bounds)
    origin, width, dims = np.array([-8.0, -8.5, -9.0]), np.full(3, 4.0), np.arange(3)
    groups, *_ = L.split_cells(L.root(), origin, width, dims)
    keep = np.random.default_rng(0).random(groups.n_groups) < 0.5
    width = width / 2
    full, p_all, b_all, c_all = L.split_cells(groups, origin, width, dims)
    kept, p_k, b_k, c_k = L.split_cells(groups, origin, width, dims, keep)
    sel = keep[p_all]
    assert 0 < sel.sum() < sel.size
    for a, b in ((p_k, p_all[sel]), (b_k, b_all[sel]), (c_k, c_all[sel])):
        np.testing.assert_array_equal(a, b)
    dropped = ~keep[groups.group]
    assert (kept.group[dropped] == -1).all()
    # a kept record's child is its child in the full split, renumbered among the kept ones
    renumber = np.cumsum(sel) - 1
    np.testing.assert_array_equal(kept.group[~dropped], renumber[full.group[~dropped]])
    assert kept.n_groups == sel.sum()
    np.testing.assert_array_equal(L.group_cells(kept, origin, width),
                                  L.group_cells(full, origin, width)[sel])


def test_the_tree_walk_splits_cells_on_the_dask_engine(dask_client):
    """Each level splits the cells of the level above where the records live: the walk gives
    what the walk on the NumPy engine gives, and never asks for the grid's cell counts."""
    X = _records(2000, 2, 1)
    bounds = np.tile([-8.0, 8.0], (2, 1))
    grid = ShiftedGrid(bounds, np.array([3.0, 5.0]))
    D = DaskEngine(da.from_array(X, chunks=((700, 0, 1300), 2)), bounds)
    D.cell_counts = None  # the walk must not read the grid's cell counts
    walks = CellWalk(LocalEngine(X, bounds), grid, keep=2), CellWalk(D, grid, keep=2)
    assert walks[1].split
    for level in range(1, 6):
        (keys, counts), got = walks[0].next(level), walks[1].next(level)
        for a, b in zip((keys, counts), got, strict=True):
            np.testing.assert_array_equal(a, b)
        for a, b in zip(walks[0].cells(level), walks[1].cells(level), strict=True):
            np.testing.assert_array_equal(a, b)
        for w in walks:  # every other cell released: the next level splits only those
            w.released(np.sort(keys)[::2])


@pytest.mark.parametrize("width", [0.25, 0.01], ids=["grid-smaller-than-chunks", "fine-grid"])
@pytest.mark.parametrize("part_values", [1 << 22, 500, 40], ids=["one-range", "masks", "sort"])
@pytest.mark.parametrize("dense", [True, False], ids=["dense", "by-key-range"])
def test_grid_cell_counts_equal_local(dask_client, monkeypatch, width, part_values, dense):
    """DPDBSCAN's grid counts on Dask: every chunk counts the whole grid when it is small
    (dense arrays added in a tree); else a chunk counts its own keys when the grid has no more
    cells than it has rows, or sends its raw keys cut by key range (by masks for a few ranges,
    by one sort for more); every way gives the NumPy engine's cells and counts."""
    import privclust.engine.dask as dask_engine

    monkeypatch.setattr(dask_engine, "_PART_VALUES", part_values)
    if not dense:
        monkeypatch.setattr(dask_engine, "_DENSE_CELLS", 0)
    X = np.clip(_records(n=3000, d=2), -3.0, 3.0)
    bounds = np.tile([-3.0, 3.0], (2, 1))
    origin, cells = np.array([-3.0, -3.0]), np.array([width, width])
    want = LocalEngine(X, bounds).cell_counts(origin, cells)
    for chunking in CHUNKINGS.values():
        got = DaskEngine(da.from_array(X, chunks=(chunking(3000), 2)), bounds).cell_counts(
            origin, cells)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_a_walk_by_key_keeps_the_level_on_the_workers(dask_client, monkeypatch):
    """On the Dask engine a tree that reads no level twice is walked by key: each level's
    cells are parts on the workers (many here), equal to the NumPy walk's keys and counts;
    the parts answer the empty-cell sampler's membership and rank queries as the array does."""
    from privclust.engine import _dask_keys
    from privclust.privacy._cell_parts import SortedCells

    monkeypatch.setattr(_dask_keys, "RECORDS_PER_PART", 150)
    X = _records(3000, 3, 3)
    bounds = np.tile([-8.0, 8.0], (3, 1))
    grid = ShiftedGrid(bounds, np.array([3.0, 5.0, 1.0]))
    D = DaskEngine(da.from_array(X, chunks=(CHUNKINGS["empty"](3000), 3)), bounds)
    walks = CellWalk(LocalEngine(X, bounds), grid), CellWalk(D, grid)
    assert walks[1].by_key and not walks[0].by_key
    rng = np.random.default_rng(0)
    for level in range(1, 6):
        keys, counts = walks[0].next(level)
        parts, none = walks[1].next(level)
        assert none is None
        got = list(parts.parts())
        assert len(got) == len(parts.sizes) and (level == 1 or len(got) > 1)
        np.testing.assert_array_equal(np.concatenate([k for k, _ in got]), np.sort(keys))
        one = SortedCells(keys, counts)
        np.testing.assert_array_equal(np.concatenate([c for _, c in got]), one.counts)
        probe = rng.integers(0, max(keys.max(), 1) + 50, size=200)
        np.testing.assert_array_equal(parts.contains(probe), one.contains(probe))
        np.testing.assert_array_equal(parts.below(np.arange(40)), one.below(np.arange(40)))
        rel = np.sort(keys)[rng.random(keys.size) < 0.6]  # a subset released
        for w in walks:
            w.released(rel)
