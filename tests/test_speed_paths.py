"""The local engine's fast passes return exactly what their plain reference computations
returned (the references are kept here, slow and simple)."""

from __future__ import annotations

import numpy as np
import pytest

from privclust.engine.local import LocalEngine, LocalGrouping


def _reference_gaps(X, dtype=np.float32, dither=None):
    """One column at a time, as the engine computed the gaps before blocks and threads."""
    n, d = X.shape
    gaps = np.empty((d, max(n - 1, 0)), dtype=dtype)
    for j in range(d):
        col = X[:, j]
        if dither is not None and dither[0][j] > 0:
            col = col + dither[0][j] * dither[1](n)
        col = np.sort(col.astype(dtype))
        np.subtract(col[1:], col[:-1], out=gaps[j])
    return gaps.T


def _reference_histogram(X, group, n_groups, lo, width, n_bins):
    """One (group, dimension, bin) count at a time, from the bins of every value."""
    b = np.clip(np.floor((X - lo) / width), 0, n_bins - 1).astype(np.int64)
    out = np.zeros((n_groups, X.shape[1], n_bins), dtype=np.int64)
    for r in np.flatnonzero(group >= 0):
        out[group[r], np.arange(X.shape[1]), b[r]] += 1
    return out


def _data(n, d, dtype, seed=0, rounded=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(0, 30, size=(n, d))
    if rounded:
        X = np.round(X)
    return np.clip(X, -100, 100).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 3), (2, 1), (50, 7), (3000, 21)])
def test_neighbour_gaps_match_reference(dtype, shape):
    X = _data(*shape, dtype, rounded=True)
    engine = LocalEngine(X, np.tile([-100.0, 100.0], (shape[1], 1)))
    got = engine.neighbour_gaps()
    want = _reference_gaps(engine.X)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_dithered_gaps_match_reference_and_draw_in_order():
    X = _data(4000, 19, np.float64, seed=1, rounded=True)
    engine = LocalEngine(X, np.tile([-100.0, 100.0], (19, 1)))
    res = np.zeros(19)
    res[[0, 3, 8, 9, 17]] = [1.0, 0.5, 1.0, 2.0, 1.0]

    def offsets(seed):
        rng = np.random.default_rng(seed)
        return lambda m: rng.uniform(-0.5, 0.5, m)

    got = engine.neighbour_gaps(dither=(res, offsets(5)))
    want = _reference_gaps(engine.X, dither=(res, offsets(5)))
    assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_axis_histogram_matches_reference(dtype):
    X = _data(5000, 13, dtype, seed=2)
    engine = LocalEngine(X, np.tile([-100.0, 100.0], (13, 1)))
    rng = np.random.default_rng(3)
    group = rng.integers(-4, 9, X.shape[0]).astype(np.int32)  # -1: none, <= -2: parked
    lo, width = np.full(13, -100.0), np.full(13, 200.0 / 37)
    got = engine.axis_histogram(LocalGrouping(group, 9), lo, width, 37)
    assert np.array_equal(got, _reference_histogram(engine.X, group, 9, lo, width, 37))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dpm_children_histograms_match_direct_request(dtype):
    """DPM histograms only the left children; each right child is its parent less its left
    sibling, and the counts are bin sums: exactly what ``count_and_histogram`` returned."""
    from privclust.cluster.dpm import _children_histograms, _split_table

    X = _data(6000, 11, dtype, seed=4)
    engine = LocalEngine(X, np.tile([-100.0, 100.0], (11, 1)))
    rng = np.random.default_rng(5)
    group = rng.integers(-3, 5, X.shape[0]).astype(np.int32)  # 5 active groups, some parked
    grouping = LocalGrouping(group, 5)
    lo, width, n_bins = np.full(11, -100.0), np.full(11, 200.0 / 64), 64
    parent = engine.axis_histogram(grouping, lo, width, n_bins)
    rows = np.array([0, 2, 3, 4])  # group 1 halts: its records are parked
    feat, thr = rng.integers(0, 11, rows.size), rng.uniform(-30, 30, rows.size)
    children = engine.regroup(grouping, *_split_table(list(range(5)), rows, feat, thr),
                              2 * rows.size)
    counts, hist = _children_histograms(engine, children, parent[rows], lo, width, n_bins)
    want_counts, want_hist = engine.count_and_histogram(children, lo, width, n_bins)
    assert counts.dtype == np.int64 and np.array_equal(counts, want_counts)
    assert hist.dtype == want_hist.dtype and np.array_equal(hist, want_hist)
    assert np.array_equal(hist, _reference_histogram(engine.X, children.group, 2 * rows.size,
                                                     lo, width, n_bins))


def test_threaded_oblique_routes_and_exact_sums_match_one_chunk_at_a_time():
    """regroup_oblique and exact_centred_sums on threads (many chunks) give what one chunk
    at a time gives (a single chunk holding every record runs on no thread)."""
    X = _data(40_000, 30, np.float64, seed=6)
    engine = LocalEngine(X, np.tile([-100.0, 100.0], (30, 1)))
    rng = np.random.default_rng(7)
    grouping = LocalGrouping(rng.integers(-3, 6, X.shape[0]).astype(np.int32), 6)
    one = LocalEngine(X, np.tile([-100.0, 100.0], (30, 1)))
    one._chunks = lambda elements=None: iter([slice(0, X.shape[0])])
    left, right = np.arange(6) * 2, np.arange(6) * 2 + 1
    right[2] = left[2]  # a group that moves untested
    for normal in (rng.normal(size=30), rng.normal(size=(6, 30))):
        offset = rng.normal(0, 20, 6)
        got = engine.regroup_oblique(grouping, normal, offset, left, right, 12).group
        proj = X @ normal if normal.ndim == 1 else np.einsum("ij,ij->i", X, normal[
            np.maximum(grouping.group, 0)])
        want = one.regroup_oblique(grouping, normal, offset, left, right, 12).group
        assert np.array_equal(got, want)
        g = grouping.group
        tested = (g >= 0) & (g != 2)
        assert np.array_equal(got[tested] % 2, (proj[tested] > offset[g[tested]]).astype(int))
    centres = rng.uniform(-50, 50, (6, 30))
    got = engine.exact_centred_sums(grouping, centres)
    want = one.exact_centred_sums(grouping, centres)
    assert np.array_equal(got.limbs, want.limbs)
    g = grouping.group
    ref = np.array([(X[g == i] - centres[i]).sum(axis=0) for i in range(6)])
    assert np.allclose(got.to_float(), ref, rtol=0, atol=1e-2)  # grid steps below 1e-6
