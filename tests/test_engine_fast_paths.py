"""The local engine's faster passes (sides of LSHSplits' hyperplanes from one product, gaps of
only the dithered columns, sorted exact group sums, threaded histograms, chunked clipping)
return exactly what the plain computations return."""

from __future__ import annotations

import numpy as np
import pytest

from privclust.engine._exact import row_group_sums
from privclust.engine.local import LocalEngine, LocalGrouping, _column_runs


def _data(n, d, dtype=np.float64, seed=0, rounded=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(0, 30, size=(n, d))
    if rounded:
        X = np.round(X)
    return np.clip(X, -100, 100).astype(dtype)


def _box(d):
    return np.tile([-100.0, 100.0], (d, 1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [7, 80_000])  # one chunk; 9 chunks (threads)
def test_prepared_hyperplanes_route_as_without_the_hint(dtype, n):
    """Routes after prepare_oblique equal the routes of a fresh engine, level by level,
    including records on a hyperplane (rounded data, axis normals: left undecided) and parked
    and dropped records."""
    d = 30
    X = _data(n, d, dtype, seed=2, rounded=True)
    X[::3, 4] = 3.0
    rng = np.random.default_rng(3)
    normals = rng.normal(size=(6, d)) / 100.0
    normals[1] = 0.0
    normals[1, 4] = 1.0  # x_4 <= 3: many records exactly on it
    offsets = rng.normal(0, 0.2, 6)
    offsets[1] = 3.0
    hinted, plain = LocalEngine(X, _box(d)), LocalEngine(X, _box(d))
    hinted.prepare_oblique(normals, offsets)
    assert hinted._oblique[3].size > 0  # the records on x_4 = 3 are undecided
    group = rng.integers(-3, 4, n).astype(np.int32)  # -1: no group; -2, -3: parked
    g_hint, g_plain = LocalGrouping(group, 4), LocalGrouping(group.copy(), 4)
    for lv in range(6):
        m = g_plain.n_groups
        left = np.arange(m) * 2
        right = left + 1
        right[0] = left[0]  # a group that moves untested
        if m > 2:
            left[2] = right[2] = -1  # a dropped group
        args = (normals[lv], np.full(m, offsets[lv]), left, right, 2 * m)
        g_hint = hinted.regroup_oblique(g_hint, *args)
        g_plain = plain.regroup_oblique(g_plain, *args)
        assert np.array_equal(g_hint.group, g_plain.group)
    # a hyperplane that was not prepared takes the plain path
    other = plain.regroup_oblique(g_plain, normals[0] * 2, np.zeros(g_plain.n_groups),
                                  np.zeros(g_plain.n_groups, int),
                                  np.ones(g_plain.n_groups, int), 2)
    assert np.array_equal(hinted.regroup_oblique(g_plain, normals[0] * 2,
                                                 np.zeros(g_plain.n_groups),
                                                 np.zeros(g_plain.n_groups, int),
                                                 np.ones(g_plain.n_groups, int), 2).group,
                          other.group)


def test_undithered_gaps_are_reused_for_the_columns_left_undithered():
    X = _data(5000, 21, seed=1, rounded=True)
    res = np.zeros(21)
    res[[0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 20]] = 1.0

    def dither(seed):
        gen = np.random.default_rng(seed)
        return res, lambda n: gen.random(n) - 0.5

    fresh = LocalEngine(X, _box(21)).neighbour_gaps(dither=dither(5))
    engine = LocalEngine(X, _box(21))
    plain = engine.neighbour_gaps()
    reused = engine.neighbour_gaps(dither=dither(5), undithered=plain)
    assert np.shares_memory(reused, plain)
    assert reused.shape == fresh.shape and reused.dtype == fresh.dtype
    assert np.array_equal(reused, fresh)


def test_column_runs():
    mask = np.array([1, 1, 0, 1, 0, 0] + [1] * 12, bool)
    assert _column_runs(mask, 8) == [(0, 2), (3, 4), (6, 14), (14, 18)]
    assert _column_runs(np.zeros(3, bool), 8) == []


@pytest.mark.parametrize("k", [1, 2, 150])
def test_sorted_group_sums_equal_a_bincount(k):
    rng = np.random.default_rng(k)
    t = np.trunc(rng.uniform(-2.0**31, 2.0**31, (3000, 17)))
    lab = rng.integers(0, k, 3000).astype(np.intp)
    key = (lab[:, None] * 17 + np.arange(17)).ravel()
    want = np.bincount(key, weights=t.ravel(), minlength=k * 17).reshape(k, 17)
    assert np.array_equal(row_group_sums(lab, t, k), want)
    assert np.array_equal(row_group_sums(lab[:0], t[:0], k), np.zeros((k, 17)))


@pytest.mark.parametrize("per_group", [False, True])
def test_threaded_histograms_equal_one_bincount(per_group):
    X = _data(80_000, 30, seed=4)  # 9 chunks: on threads
    engine = LocalEngine(X, _box(30))
    rng = np.random.default_rng(5)
    group = rng.integers(-3, 6, X.shape[0]).astype(np.int32)
    lo, width = np.full(30, -100.0), np.full(30, 200.0 / 26)
    if per_group:
        lo = lo + rng.uniform(0, 5, (6, 30))
        width = width * rng.uniform(0.5, 1.5, (6, 30))
    got = engine.axis_histogram(LocalGrouping(group, 6), lo, width, 26)
    keep = group >= 0
    gi = np.maximum(group, 0)
    lo_r = lo if lo.ndim == 1 else lo[gi]
    w_r = width if width.ndim == 1 else width[gi]
    b = np.clip(np.floor((X - lo_r) / w_r), 0, 25).astype(np.int64)
    key = (group[keep, None] * 30 + np.arange(30)) * 26 + b[keep]
    want = np.bincount(key.ravel(), minlength=6 * 30 * 26).reshape(6, 30, 26)
    assert got.dtype == np.int32 and np.array_equal(got, want)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_chunked_clipping_equals_one_clip(dtype, order):
    X = np.asarray(np.random.default_rng(6).normal(0, 60, (30_000, 40)), dtype, order=order)
    bounds = _box(40)
    engine = LocalEngine(X, bounds)
    kind = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
    want = np.clip(X, bounds[:, 0].astype(kind), bounds[:, 1].astype(kind), dtype=kind)
    assert engine.X.dtype == want.dtype and np.array_equal(engine.X, want)
    assert engine.X.strides == want.strides  # the same layout: products see the same operands
    assert engine.n_clipped_records == int(((X < -100) | (X > 100)).any(axis=1).sum())
