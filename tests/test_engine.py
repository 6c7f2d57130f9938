import numpy as np
import pytest

from privclust.engine import LocalEngine

#: The exact-sum grid step of bounds (-1, 1) (``privclust.engine._exact``): sums add every
#: clipped value rounded to this grid, so they may differ from float sums of the raw values by
#: up to one step per record and coordinate (products: two steps).
STEP = 2.0**-30


def _grid_close(actual, expected, n, steps=1):
    np.testing.assert_allclose(actual, expected, rtol=0, atol=steps * n * STEP)


@pytest.fixture
def engine():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.5, 1.5, size=(5000, 3))  # some records outside the bounds
    return LocalEngine(X, np.array([[-1.0, 1.0]] * 3)), np.clip(X, -1, 1)


def test_clipping_is_counted_and_applied(engine):
    eng, Xc = engine
    assert eng.n_clipped_records > 0
    np.testing.assert_array_equal(eng.X, Xc)


def test_regroup_count_and_histogram_match_brute_force(engine):
    eng, X = engine
    root = eng.root()
    assert eng.count(root).tolist() == [len(X)]
    kids = eng.regroup(root, [1], [0.25], [0], [1], 2)
    left = X[:, 1] <= 0.25
    assert eng.count(kids).tolist() == [left.sum(), (~left).sum()]
    # split only the right child, drop the left one
    grand = eng.regroup(kids, [-1, 0], [0.0, -0.5], [-1, 0], [-1, 1], 2)
    sel_r = ~left
    expect = [(sel_r & (X[:, 0] <= -0.5)).sum(), (sel_r & (X[:, 0] > -0.5)).sum()]
    assert eng.count(grand).tolist() == expect
    lo, width, n_bins = np.full(3, -1.0), np.full(3, 0.3), 7
    hist = eng.axis_histogram(kids, lo, width, n_bins)
    assert hist.shape == (2, 3, n_bins)
    for g, mask in enumerate([left, ~left]):
        for j in range(3):
            b = np.clip(np.floor((X[mask, j] + 1.0) / 0.3), 0, n_bins - 1).astype(int)
            np.testing.assert_array_equal(hist[g, j], np.bincount(b, minlength=n_bins))


def test_parked_records_stay_out_of_every_query_until_assigned(engine):
    """A target <= -2 parks the records: counts, histograms and sums ignore them, splits and
    relabels (axis-aligned and oblique) keep them, and ``parked`` assigns them at last."""
    eng, X = engine
    left = X[:, 1] <= 0.25
    # the left side is parked under -2 - 7 (node 7), the right side splits on x0
    kids = eng.regroup(eng.root(), [1], [0.25], [-9], [0], 1)
    assert eng.count(kids).tolist() == [(~left).sum()]
    grand = eng.regroup(kids, [0], [0.0], [0], [-2], 1)  # x0 > 0 parked under node 0
    low = ~left & (X[:, 0] <= 0.0)
    assert eng.count(grand).tolist() == [low.sum()]
    hist = eng.axis_histogram(grand, np.full(3, -1.0), np.full(3, 0.5), 4)
    assert hist.sum() == 3 * low.sum()
    _grid_close(eng.centred_sums(grand, np.zeros((1, 3))), X[low].sum(axis=0)[None, :],
                low.sum())
    kept = eng.regroup_oblique(grand, np.ones(3), [0.0], [0], [0], 1)  # untested relabel
    np.testing.assert_array_equal(kept.group, grand.group)
    split = eng.regroup_oblique(grand, np.ones(3), [0.0], [0], [-1], 1)
    np.testing.assert_array_equal(split.group[left], -9)  # parked stay parked
    # the leaves at last: group 0 -> 2, parked node 0 -> 0, parked node 7 -> 1
    parked = np.full(8, -1)
    parked[0], parked[7] = 0, 1
    final = eng.regroup(grand, [-1], [0.0], [2], [2], 3, parked=parked)
    expect = np.where(left, 1, np.where(low, 2, 0))
    np.testing.assert_array_equal(final.group, expect)
    assert eng.count(final).tolist() == np.bincount(expect, minlength=3).tolist()


def test_relabel_and_centred_sums(engine):
    eng, X = engine
    kids = eng.regroup(eng.root(), [2], [0.0], [0], [1], 2)
    swapped = eng.regroup(kids, [-1, -1], [0, 0], [1, 0], [1, 0], 2)
    assert eng.count(swapped).tolist() == eng.count(kids)[::-1].tolist()
    centres = np.array([[0.1, 0.2, -0.5], [0.0, 0.0, 0.5]])
    sums = eng.centred_sums(kids, centres)
    mask = X[:, 2] <= 0.0
    _grid_close(sums[0], (X[mask] - centres[0]).sum(axis=0), mask.sum())
    _grid_close(sums[1], (X[~mask] - centres[1]).sum(axis=0), (~mask).sum())


def test_neighbour_gaps(engine):
    eng, X = engine
    gaps = eng.neighbour_gaps(dtype=np.float64)
    np.testing.assert_allclose(gaps, np.diff(np.sort(X, axis=0), axis=0))
    assert eng.neighbour_gaps().dtype == np.float32
    assert (gaps >= 0).all()


def test_float32_input_stays_float32():
    X = np.random.default_rng(1).uniform(0, 1, size=(100, 2)).astype(np.float32)
    eng = LocalEngine(X, np.array([[0.0, 1.0]] * 2))
    assert eng.X.dtype == np.float32
    assert eng.n_clipped_records == 0


def test_cell_counts_match_brute_force_and_handle_huge_grids():
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 10, size=(3000, 3))
    eng = LocalEngine(X, np.array([[0.0, 10.0]] * 3))
    width = np.array([1.0, 2.5, 0.7])
    cells, counts = eng.cell_counts(np.zeros(3), width)
    expect, expect_counts = np.unique(np.floor(X / width).astype(int), axis=0,
                                      return_counts=True)
    np.testing.assert_array_equal(cells, expect)
    np.testing.assert_array_equal(counts, expect_counts)
    # a grid of (10 / 1e-5)^3 = 10^18 cells: only occupied cells are materialised
    cells, counts = eng.cell_counts(np.zeros(3), np.full(3, 1e-5))
    assert counts.sum() == 3000 and cells.shape == (counts.size, 3)


def test_nearest_centre_stats(engine):
    eng, X = engine
    centres = np.array([[0.5, 0.5, 0.5], [-0.5, -0.5, -0.5], [0.5, -0.5, 0.0]])
    counts, sums, mom = eng.nearest_centre_stats(centres, second_moments=True)
    lab = np.argmin(((X[:, None, :] - centres) ** 2).sum(-1), axis=1)
    np.testing.assert_array_equal(counts, np.bincount(lab, minlength=3))
    for c in range(3):
        n_c = (lab == c).sum()
        _grid_close(sums[c], X[lab == c].sum(axis=0), n_c)
        _grid_close(mom[c], X[lab == c].T @ X[lab == c], n_c, steps=2)


def test_gaussian_assignment_stats_match_brute_force(engine):
    from scipy.stats import multivariate_normal

    eng, X = engine
    means = np.array([[0.5, 0.5, 0.0], [-0.5, -0.5, 0.0]])
    covs = np.array([np.eye(3) * 0.1, np.diag([0.5, 0.2, 0.3])])
    logw = np.log([0.3, 0.7])
    counts, sums, mom = eng.gaussian_assignment_stats(means, np.linalg.cholesky(covs), logw)
    ll = np.column_stack([multivariate_normal(means[c], covs[c]).logpdf(X) + logw[c]
                          for c in range(2)])
    lab = ll.argmax(axis=1)
    np.testing.assert_array_equal(counts, np.bincount(lab, minlength=2))
    for c in range(2):
        n_c = (lab == c).sum()
        _grid_close(sums[c], X[lab == c].sum(axis=0), n_c)
        _grid_close(mom[c], X[lab == c].T @ X[lab == c], n_c, steps=2)
