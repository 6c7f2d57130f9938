"""CoresetKMeans' passes over the records: on a small box every level of the tree is counted in
one pass with the record count (the finest level's cells counted densely, the coarser levels
read off them), with the cells and counts of a pass per level; on the Dask engine the fit then
splits no level on the chunks, and the final labels and cost come from one pass."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from privclust.cluster._shifted_tree import ShiftedGrid
from privclust.engine._level_cells import level_cells, nested_plan
from privclust.engine.local import LocalEngine


def _cells(X, origin, width):
    """Every record's cell, in float64 from the record as stored: unique rows and counts."""
    idx = np.floor((np.asarray(X, dtype=np.float64) - origin) / width).astype(np.int64)
    return np.unique(idx, axis=0, return_counts=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_level_in_one_pass_equals_a_pass_per_level(dtype, seed):
    rng = np.random.default_rng(seed)
    d = 2 if seed < 2 else 3
    bounds = np.column_stack([rng.uniform(-7.3, -0.1, d), rng.uniform(0.2, 9.9, d)])
    X = rng.normal(scale=3.0, size=(20000, d))
    X[:50] = bounds[:, 0]  # records on the bounds (float32 may round a bound outward)
    X[50:100] = bounds[:, 1]
    X = np.clip(X, bounds[:, 0], bounds[:, 1]).astype(dtype)
    engine = LocalEngine(X, bounds)
    grid = ShiftedGrid(bounds, rng.uniform(0, 1, d) * (bounds[:, 1] - bounds[:, 0]))
    widths = np.stack([grid.width(lv) for lv in range(1, 7)])
    got = level_cells(engine, grid.origin, widths)
    assert got is not None and got.n == X.shape[0]
    for (cells, counts), w in zip(got.levels, widths, strict=True):
        want_cells, want_counts = _cells(engine.X, grid.origin, w)
        np.testing.assert_array_equal(cells, want_cells)
        np.testing.assert_array_equal(counts, want_counts)


def test_grids_not_nested_or_too_fine_are_declined():
    bounds = np.array([[0.0, 1.0], [0.0, 1.0]])
    origin = np.zeros(2)
    assert nested_plan(bounds, np.float64, origin, [[0.5, 0.5], [0.3, 0.25]]) is None
    assert nested_plan(bounds, np.float64, origin, [[2.0**-12] * 2]) is None  # 2^24 cells
    assert nested_plan(bounds, np.float64, origin, [[0.5, 0.5], [0.125, 0.25]]) is not None


def test_the_dask_fit_counts_the_tree_in_one_pass(dask_client):
    """Given k on 2-D records in three chunks: no level is split on the chunks (one dense
    count per chunk for the record count and every level), and the final labels and cost
    read each chunk once; the release equals the NumPy engine's."""
    da = pytest.importorskip("dask.array")


    rng = np.random.default_rng(4)
    X = rng.normal(size=(9000, 2)) + rng.choice([-4.0, 0.0, 4.0], size=(9000, 1))
    Xd = da.from_array(X, chunks=(3000, 2))
    a, b, kinds = _fits_and_task_kinds(dask_client, X, Xd)
    assert kinds.count("split_block") == 0
    assert kinds.count("fine_counts") == 3
    assert kinds.count("_clipped_cost") == 0  # the cost comes with the labels
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert [r.to_dict() for r in a.privacy_report_.releases] == \
        [r.to_dict() for r in b.privacy_report_.releases]


def test_grid_counts_equal_a_binary_search():
    from privclust.cluster._coreset.data import grid_counts
    from privclust.privacy.mechanisms import quantile_grid

    rng = np.random.default_rng(5)
    for grid in (quantile_grid(2e-5, 20.0, 4096, log_scale=True),
                 quantile_grid(0.5, 3.0, 100, log_scale=False), np.linspace(-1.0, 1.0, 80)):
        v = np.abs(rng.normal(scale=grid[-1] / 3, size=200_000))
        v[:64] = grid[rng.integers(0, grid.size, 64)]  # on the candidates
        v[64:128] = np.nextafter(v[:64], np.inf)
        v[128:130] = (0.0, np.inf)
        v[130:140] = 10 * grid[-1]
        want = np.bincount(np.minimum(np.searchsorted(grid, v, side="left"), grid.size - 1),
                           minlength=grid.size)
        np.testing.assert_array_equal(grid_counts(v, grid), want)


def test_row_group_sums_by_bincount_equal_the_sorted_sums():
    from privclust.engine import _exact

    rng = np.random.default_rng(6)
    for d in (1, 2, 5):
        lab = rng.integers(0, 24, 50_000).astype(np.intp)
        t = np.trunc(rng.normal(scale=2.0**30, size=(50_000, d)))
        t[:10] = -0.0
        got = _exact.row_group_sums(lab, t, 24)
        order = np.argsort(lab, kind="stable")  # the sums in another order: exact integers
        want = np.zeros((24, d))
        np.add.at(want, lab[order], t[order])
        np.testing.assert_array_equal(got, want)


def test_lloyd_labels_kept_when_they_fit_though_the_records_do_not(dask_client, monkeypatch):
    """Records not persisted (over the workers' share), a grid-quantile Lloyd step's labels
    (one byte a record) kept: the ball pass reads them instead of labelling the chunk again."""
    da = pytest.importorskip("dask.array")

    import privclust.engine.dask as dask_engine
    from privclust.cluster._coreset import quantile

    rng = np.random.default_rng(7)
    n = 20_000
    X = rng.normal(size=(n, 2)) + rng.choice([-4.0, 0.0, 4.0], size=(n, 1))
    Xd = da.from_array(X, chunks=(7000, 2))
    memory = dask_engine.workers_memory(dask_client)
    monkeypatch.setattr(dask_engine, "PERSIST_SHARE", 4.0 * n / memory)  # 16 n bytes: no
    monkeypatch.setattr(quantile, "GRID_QUANTILE_RECORDS", 1000)
    a, b, kinds = _fits_and_task_kinds(dask_client, X, Xd)
    assert kinds.count("_corrected_counts") == 2 * 3  # two Lloyd steps, three chunks, once
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    assert [r.to_dict() for r in a.privacy_report_.releases] == \
        [r.to_dict() for r in b.privacy_report_.releases]


def _fits_and_task_kinds(dask_client, X, Xd):
    """The same CoresetKMeans fit on ``X`` (NumPy engine) and ``Xd`` (Dask engine), and the
    kind of every task the Dask fit ran (its key's name up to the first dash)."""
    from distributed import get_task_stream

    from privclust import CoresetKMeans

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = CoresetKMeans(3, epsilon=1.0, bounds=(-8, 8), random_state=0).fit(X)
        with get_task_stream(dask_client) as ts:
            b = CoresetKMeans(3, epsilon=1.0, bounds=(-8, 8), random_state=0).fit(Xd)
    kinds = [(r["key"][0] if isinstance(r["key"], tuple) else r["key"]).split("-")[0]
             for r in ts.data]
    return a, b, kinds
