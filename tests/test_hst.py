"""HSTKMeans: the ledger against the noise actually drawn, per-level sensitivity, the plan,
always k centres, a utility floor and bad input.

The instrumented run reads the epsilon of every noise draw of every level's sparse histogram
(and of the refinement) and checks it against the ledger line it was recorded under, and checks
*what* level 1 released against a count computed here from the data. Planting half the noise
(the histogram drawn at twice its recorded epsilon) makes that check fail.
"""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_blobs

import privclust.cluster.hst as hst
from _bad_input import BAD_BOUNDS_AND_DATA, BAD_EPSILON_AND_K, assert_clear_error
from _draws import DrawRecorder, true_spend
from privclust.cluster.hst import HSTKMeans, hst_threshold, level_keys
from privclust.engine import LocalEngine
from privclust.metrics import accuracy_majority
from privclust.privacy import Accountant, Budget, BudgetExceededError

# =========================================================================== instrumentation


def level_one_counts(X, bounds, shift):
    """Exact level-1 cell counts, computed here: cell width = the bounds' width, origin =
    lo - shift (every record is in the root, so the whole level is counted)."""
    lo, hi = bounds[:, 0], bounds[:, 1]
    idx = np.floor((np.clip(X, lo, hi) - (lo - shift)) / (hi - lo)).astype(np.int64)
    _, counts = np.unique(idx, axis=0, return_counts=True)
    return np.sort(counts)


def check_fit(model, rec, epsilon, X, bounds):
    report = model.privacy_report_
    spent = true_spend(report, rec, X.shape[1])
    np.testing.assert_allclose(spent, [r.epsilon for r in report.releases], rtol=1e-9)
    assert math.isclose(sum(spent), epsilon, rel_tol=1e-9), (sum(spent), epsilon)
    keys, counts, n_cells = rec.histograms[0]
    assert n_cells == 2 ** X.shape[1]  # level 1: the 2^d children of the root
    np.testing.assert_array_equal(np.sort(counts), level_one_counts(X, bounds, model.shift_))
    for keys, counts, n_cells in rec.histograms:  # every level: distinct cells, counts of X
        assert np.unique(keys).size == keys.size and counts.sum() <= X.shape[0]
        assert (keys >= 0).all() and (keys < n_cells).all()


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(4000, 3, centers=5, center_box=(-8, 8), cluster_std=0.6, random_state=1)
    return np.clip(X, -10, 10), y


BOUNDS3 = np.tile([-10.0, 10.0], (3, 1))


@pytest.mark.parametrize("refine", [False, True])
def test_ledger_equals_the_noise_actually_drawn(blobs, refine, monkeypatch):
    X, _ = blobs
    rec = DrawRecorder(monkeypatch)
    model = HSTKMeans(5, epsilon=0.7, bounds=(-10, 10), refine=refine, random_state=2).fit(X)
    check_fit(model, rec, 0.7, X, BOUNDS3)
    assert len(model.tree_counts_) >= 2  # several levels were released and checked


def test_half_the_noise_is_caught(blobs, monkeypatch):
    X, _ = blobs
    rec = DrawRecorder(monkeypatch, histogram_factor=2.0)  # draws at 2 eps, records eps
    model = HSTKMeans(5, epsilon=0.7, bounds=(-10, 10), random_state=2).fit(X)
    with pytest.raises(AssertionError):
        check_fit(model, rec, 0.7, X, BOUNDS3)


def test_one_record_changes_each_level_by_at_most_one_in_one_cell():
    rng = np.random.default_rng(5)
    d = 3
    bounds = np.tile([0.0, 1.0], (d, 1))
    X = np.clip(rng.normal(0.5, 0.15, (3000, d)), 0, 1)
    shift = rng.uniform(0, 1, d)
    tree = hst.QuadTree(bounds, shift, 6)
    for extra in ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], X[0], [0.51, 0.49, 0.5]):
        X1 = np.vstack([X, extra])
        survivors = np.zeros((1, d), dtype=np.int64)
        for level in range(1, 7):
            blk = tree.block(level)
            hists = []
            for data in (X, X1):
                cells, counts = LocalEngine(data, bounds).cell_counts(tree.origin,
                                                                       tree.width(level))
                keys, inside = level_keys(survivors, cells, blk)
                hists.append(dict(zip(keys.tolist(), counts[inside].tolist(), strict=True)))
            diff = {key: hists[1].get(key, 0) - hists[0].get(key, 0)
                    for key in hists[0].keys() | hists[1].keys()}
            changed = {key: v for key, v in diff.items() if v}
            assert len(changed) <= 1 and set(changed.values()) <= {1}, (level, changed)
            # the next universe: the non-empty cells of X (public here: fixed for both)
            cells, _ = LocalEngine(X, bounds).cell_counts(tree.origin, tree.width(level))
            keep = level_keys(survivors, cells, blk)[1]
            survivors = cells[keep]
    assert survivors.shape[0] > 50  # the universes were not trivially small


def test_threshold_bounds_the_false_positives():
    for eps, b in ((0.1, 10), (1.0, 2), (0.05, 40)):
        t = hst_threshold(eps, 2**b)
        p = math.exp(-eps * t) / (1 + math.exp(-eps))  # P(geometric noise >= t)
        assert 2**b * p <= hst.FALSE_POSITIVES_PER_PARENT * (1 + 1e-9)
        assert 2**b * math.exp(-eps * (t - 1)) / (1 + math.exp(-eps)) \
            > hst.FALSE_POSITIVES_PER_PARENT  # the smallest such integer


# =========================================================================== plan
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("refine", [False, True])
def test_spent_equals_planned(blobs, epsilon, refine):
    X, _ = blobs
    model = HSTKMeans(5, epsilon=epsilon, bounds=(-10, 10), refine=refine,
                      random_state=0).fit(X)
    rep = model.privacy_report_
    assert rep.private and rep.unspent == []
    assert rep.total().epsilon == pytest.approx(epsilon, rel=1e-9, abs=1e-9)
    assert rep.total().delta == 0.0


def test_a_tree_that_stops_early_spends_its_budget_on_a_retry():
    X = np.random.default_rng(0).uniform(0, 1, (20, 2))
    model = HSTKMeans(7, epsilon=1.0, bounds=(0, 1), max_depth=8, random_state=0).fit(X)
    rep = model.privacy_report_
    assert rep.total().epsilon == pytest.approx(1.0, rel=1e-9)
    assert any(r.item == hst.RETRY_ITEM for r in rep.releases)
    assert len(rep.releases) < 8  # the levels below were not released one by one


def test_shared_accountant_is_checked_before_reading_data():
    acc = Accountant(Budget(1.0))
    X = np.random.default_rng(0).uniform(0, 1, (50, 2))
    HSTKMeans(2, epsilon=0.6, bounds=(0, 1), accountant=acc, random_state=0).fit(X)
    with pytest.raises(BudgetExceededError):
        HSTKMeans(2, epsilon=0.6, bounds=(0, 1), accountant=acc).fit("not even data")


# =========================================================================== k centres
def _check_centres(model, k, bounds):
    c = model.cluster_centers_
    assert c.shape == (k, bounds.shape[0]) and model.n_clusters_ == k
    assert np.isfinite(c).all()
    assert (c >= bounds[:, 0]).all() and (c <= bounds[:, 1]).all()
    assert model.cluster_sizes_.shape == (k,) and model.cluster_sizes_.dtype == np.int64


@pytest.mark.parametrize("refine", [False, True])
def test_always_k_centres_inside_the_bounds(refine):
    rng = np.random.default_rng(3)
    tiny = rng.uniform(-1, 1, (20, 3))
    b3 = np.tile([-1.0, 1.0], (3, 1))
    _check_centres(HSTKMeans(7, bounds=(-1, 1), refine=refine, random_state=0).fit(tiny), 7, b3)
    # k far above the number of private leaves (two tight blobs)
    two = np.vstack([rng.normal(-0.5, 0.01, (300, 2)), rng.normal(0.5, 0.01, (300, 2))])
    b2 = np.tile([-1.0, 1.0], (2, 1))
    m = HSTKMeans(60, bounds=(-1, 1), refine=refine, random_state=0).fit(two)
    assert sum(c.shape[0] for c in m.tree_cells_) < 60
    _check_centres(m, 60, b2)
    # points outside the bounds (clipped), one feature, float32
    wide = rng.uniform(-3, 3, (500, 1)).astype(np.float32)
    with pytest.warns(UserWarning, match="clipped"):
        m = HSTKMeans(3, bounds=(-1, 1), refine=refine, random_state=0).fit(wide)
    _check_centres(m, 3, np.array([[-1.0, 1.0]]))


def test_wide_data_halves_its_dimensions_in_blocks():
    X, _ = make_blobs(3000, 45, centers=3, center_box=(-5, 5), random_state=0)
    m = HSTKMeans(3, bounds=(-10, 10), max_depth=4, random_state=0).fit(X)
    _check_centres(m, 3, np.tile([-10.0, 10.0], (45, 1)))
    assert m.privacy_report_.total().epsilon == pytest.approx(1.0)
    tree = hst.QuadTree(np.tile([-10.0, 10.0], (45, 1)), np.zeros(45), 4)
    assert [b.size for b in tree.blocks] == [23, 22]


# =========================================================================== behaviour
def test_reproducible_predict_and_clone(blobs):
    X, _ = blobs
    a = HSTKMeans(5, bounds=(-10, 10), random_state=3).fit(X)
    b = HSTKMeans(5, bounds=(-10, 10), random_state=3).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.predict(X), a.labels_)
    assert a.n_features_in_ == 3 and a.n_iter_ == 0
    assert clone(a).get_params() == a.get_params()
    r = HSTKMeans(5, bounds=(-10, 10), refine=True, random_state=3).fit(X)
    assert r.n_iter_ == 1 and r.centers_history_.shape == (2, 5, 3)


def test_utility_synth_10d_target():
    """The issue's target: Synth-10d (100,000 x 10, 64 blobs), epsilon 1, k = 64."""
    X, y = make_blobs(100_000, 10, centers=64, center_box=(-100, 100), random_state=42)
    X = np.clip(X, -100, 100)
    for seed in (0, 1):
        m = HSTKMeans(64, epsilon=1.0, bounds=(-100, 100), random_state=seed).fit(X)
        assert accuracy_majority(y, m.labels_) >= 0.90


def test_utility_small_blobs_at_low_epsilon(blobs):
    X, y = blobs
    accs = [accuracy_majority(y, HSTKMeans(5, epsilon=0.5, bounds=(-10, 10),
                                           random_state=s).fit(X).labels_) for s in range(3)]
    assert min(accs) >= 0.9, accs


def test_docstring_example_runs():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(HSTKMeans, "HSTKMeans"):
        runner.run(test)
    assert runner.failures == 0 and runner.tries > 0


# =========================================================================== bad input
@pytest.mark.parametrize(
    "kwargs, X, match",
    [
        *BAD_EPSILON_AND_K,
        ({"n_clusters": "3"}, None, "n_clusters"),
        ({"max_depth": 0}, None, "max_depth"),
        ({"refine": "yes"}, None, "refine"),
        ({"refine": True, "refine_share": 1.0}, None, "refine_share"),
        *BAD_BOUNDS_AND_DATA,
    ],
)
def test_bad_input_is_a_clear_error(kwargs, X, match):
    assert_clear_error(HSTKMeans, kwargs, X, match)
