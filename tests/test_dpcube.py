"""DPCube: the ledger against the noise actually drawn, the sensitivity of every statistic it
releases, the plan, always k centres, utility and bad input.

The instrumented run reads the epsilon of every noise draw (every level's sparse histogram and
the recovery's sizes and sums) and checks it against the ledger line it was recorded under, and
checks *what* level 1 released against cube counts computed here from the projected data.
Planting half the noise (the histograms drawn at twice their recorded epsilon, or the recovery's
sums at half their recorded scale) makes that check fail.
"""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_blobs

import privclust.cluster.dpcube as dpcube
import privclust.privacy.mechanisms as mechanisms
from _bad_input import BAD_BOUNDS_AND_DATA, BAD_EPSILON_AND_K, assert_clear_error
from _draws import DrawRecorder, true_spend
from privclust.cluster._shifted_tree import ShiftedGrid, level_keys
from privclust.cluster.dpcube import DPCube
from privclust.engine import LocalEngine
from privclust.metrics import accuracy_majority
from privclust.privacy import Accountant, Budget, BudgetExceededError

# =========================================================================== instrumentation


def level_one_counts(X, bounds, G, shift):
    """Exact level-1 cube counts, computed here from the public projection: the projected box
    is the image of the bounds, a level-1 cube has the box's side, origin = box lo - shift."""
    lo, hi = bounds[:, 0], bounds[:, 1]
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    reach = np.abs(G) @ half * (1 + 1e-9) + 1e-12
    Y = np.clip((np.clip(X, lo, hi) - mid) @ G.T, -reach, reach)
    idx = np.floor((Y - (-reach - shift)) / (2 * reach)).astype(np.int64)
    _, counts = np.unique(idx, axis=0, return_counts=True)
    return np.sort(counts)


def check_fit(model, rec, epsilon, X, bounds):
    report = model.privacy_report_
    spent = true_spend(report, rec, X.shape[1])
    np.testing.assert_allclose(spent, [r.epsilon for r in report.releases], rtol=1e-9)
    assert math.isclose(sum(spent), epsilon, rel_tol=1e-9), (sum(spent), epsilon)
    keys, counts, n_cells = rec.histograms[0]
    p = model.projection_.shape[0]
    assert n_cells == 2**p  # level 1: the 2^p children of the root cube
    np.testing.assert_array_equal(
        np.sort(counts), level_one_counts(X, bounds, model.projection_, model.shifts_[0]))
    for keys, counts, n_cells in rec.histograms:  # every level: distinct cubes, counts of X
        assert np.unique(keys).size == keys.size and counts.sum() <= X.shape[0]
        assert (keys >= 0).all() and (keys < n_cells).all()


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(4000, 12, centers=5, center_box=(-8, 8), cluster_std=0.6, random_state=1)
    return np.clip(X, -10, 10), y


B12 = np.tile([-10.0, 10.0], (12, 1))


@pytest.mark.parametrize("params", [{}, {"n_shifts": 2, "n_lloyd": 1, "n_projected": 4}])
def test_ledger_equals_the_noise_actually_drawn(blobs, params, monkeypatch):
    X, _ = blobs
    rec = DrawRecorder(monkeypatch)
    model = DPCube(5, epsilon=0.7, bounds=(-10, 10), random_state=2, **params).fit(X)
    check_fit(model, rec, 0.7, X, B12)
    assert sum(r.mechanism.endswith("sparse hist") for r in model.privacy_report_.releases) >= 4


@pytest.mark.parametrize("planted", ["histograms", "sums", "sizes"])
def test_half_the_noise_is_caught(blobs, planted, monkeypatch):
    """Each planted bug draws the noise of twice the recorded epsilon for one kind of release
    (every level's histogram, the recovery's sums, or its sizes): the check fails."""
    X, _ = blobs
    rec = DrawRecorder(monkeypatch, histogram_factor=2.0 if planted == "histograms" else 1.0)
    name = {"sums": "laplace_noise", "sizes": "two_sided_geometric"}.get(planted)
    if name:
        honest = getattr(mechanisms, name)
        monkeypatch.setattr(mechanisms, name,
                            lambda rng, v, eps, sens=1: honest(rng, v, 2.0 * eps, sens))
    model = DPCube(5, epsilon=0.7, bounds=(-10, 10), random_state=2).fit(X)
    with pytest.raises(AssertionError):
        check_fit(model, rec, 0.7, X, B12)


# =========================================================================== sensitivity
def test_one_record_changes_each_level_by_at_most_one_in_one_cube():
    rng = np.random.default_rng(5)
    d, p = 6, 3
    bounds = np.tile([0.0, 1.0], (d, 1))
    X = np.clip(rng.normal(0.5, 0.15, (3000, d)), 0, 1)
    space = dpcube._Space(bounds, dpcube.public_projection(rng, d, p))
    grid = ShiftedGrid(space.box, rng.uniform(0, 1, p) * (space.box[:, 1] - space.box[:, 0]))
    blk = np.arange(p)
    for extra in (np.zeros(d), np.ones(d), X[0], np.full(d, 0.5), np.full(d, 7.0)):
        X1 = np.vstack([X, extra])
        survivors = np.zeros((1, p), dtype=np.int64)
        for level in range(1, 7):
            hists = []
            for data in (X, X1):
                eng = LocalEngine(space.project(data), space.box)
                cells, counts = eng.cell_counts(grid.origin, grid.width(level))
                keys, inside = level_keys(survivors, cells, blk)
                hists.append(dict(zip(keys.tolist(), counts[inside].tolist(), strict=True)))
            diff = {key: hists[1].get(key, 0) - hists[0].get(key, 0)
                    for key in hists[0].keys() | hists[1].keys()}
            changed = {key: v for key, v in diff.items() if v}
            assert len(changed) <= 1 and set(changed.values()) <= {1}, (level, changed)
            eng = LocalEngine(space.project(X), space.box)
            cells, _ = eng.cell_counts(grid.origin, grid.width(level))
            survivors = cells[level_keys(survivors, cells, blk)[1]]
    assert survivors.shape[0] > 50  # the universes were not trivially small


def test_one_record_changes_one_cluster_by_one_and_its_unit_sum_by_at_most_d():
    """The recovery's statistics, as the fit computes them (projected nearest centre on the
    engine of original and projected coordinates): one added record changes one cluster's size
    by 1 and its sum of (x - mid) / half by at most d in L1."""
    rng = np.random.default_rng(1)
    d, p, k = 7, 3, 5
    bounds = np.tile([-2.0, 3.0], (d, 1))
    mid, half = 0.5, 2.5
    space = dpcube._Space(bounds, dpcube.public_projection(rng, d, p))
    X = rng.uniform(-2, 3, (500, d))
    centres = rng.uniform(-1, 1, (k, p))
    query = np.hstack([np.zeros((k, d)), centres])

    def stats(data):
        both = LocalEngine(np.hstack([np.clip(data, -2, 3), space.project(data)]),
                           np.vstack([bounds, space.box]))
        n_c, sums = both.nearest_centre_stats(query)
        return n_c, (sums[:, :d] - n_c[:, None] * mid) / half

    n0, s0 = stats(X)
    for extra in (np.full(d, -2.0), np.full(d, 3.0), np.full(d, 40.0), X[3], rng.normal(0, 9, d)):
        n1, s1 = stats(np.vstack([X, extra]))
        assert np.abs(n1 - n0).sum() == 1
        assert np.abs(s1 - s0).sum(axis=1).max() <= d * (1 + 1e-9)
        assert (np.abs(s1 - s0).sum(axis=1) > 1e-12).sum() <= 1


# =========================================================================== plan
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("params", [{}, {"n_shifts": 2, "n_lloyd": 2}])
def test_spent_equals_planned(blobs, epsilon, params):
    X, _ = blobs
    model = DPCube(5, epsilon=epsilon, bounds=(-10, 10), random_state=0, **params).fit(X)
    rep = model.privacy_report_
    assert rep.private
    assert rep.total().epsilon == pytest.approx(epsilon, rel=1e-9, abs=1e-9)
    assert rep.total().epsilon == pytest.approx(rep.planned.epsilon, rel=1e-9)
    assert rep.total().delta == 0.0


def test_a_partition_that_stops_early_spends_its_budget_on_a_retry():
    X = np.random.default_rng(0).uniform(0, 1, (20, 2))
    model = DPCube(7, epsilon=1.0, bounds=(0, 1), max_depth=8, random_state=0).fit(X)
    rep = model.privacy_report_
    assert rep.total().epsilon == pytest.approx(1.0, rel=1e-9)
    assert any("retry" in (r.item or "") for r in rep.releases)
    assert len(rep.releases) < 8 + 2  # the levels below were not released one by one


def test_shared_accountant_is_checked_before_reading_data():
    acc = Accountant(Budget(1.0))
    X = np.random.default_rng(0).uniform(0, 1, (50, 2))
    DPCube(2, epsilon=0.6, bounds=(0, 1), accountant=acc, random_state=0).fit(X)
    with pytest.raises(BudgetExceededError):
        DPCube(2, epsilon=0.6, bounds=(0, 1), accountant=acc).fit("not even data")


# =========================================================================== k centres
def _check_centres(model, k, bounds):
    c = model.cluster_centers_
    assert c.shape == (k, bounds.shape[0]) and model.n_clusters_ == k
    assert np.isfinite(c).all()
    assert (c >= bounds[:, 0]).all() and (c <= bounds[:, 1]).all()
    assert model.cluster_sizes_.shape == (k,) and model.cluster_sizes_.dtype == np.int64


@pytest.mark.parametrize("n_lloyd", [0, 1])
def test_always_k_centres_inside_the_bounds(n_lloyd):
    rng = np.random.default_rng(3)
    tiny = rng.uniform(-1, 1, (20, 3))
    b3 = np.tile([-1.0, 1.0], (3, 1))
    _check_centres(DPCube(7, bounds=(-1, 1), n_lloyd=n_lloyd, random_state=0).fit(tiny), 7, b3)
    # k far above the number of candidates (two tight blobs), wide data projected
    two = np.vstack([rng.normal(-0.5, 0.01, (300, 15)), rng.normal(0.5, 0.01, (300, 15))])
    m = DPCube(60, bounds=(-1, 1), n_lloyd=n_lloyd, random_state=0).fit(two)
    assert m.candidates_.shape[0] < 60 and m.projection_.shape == (10, 15)
    _check_centres(m, 60, np.tile([-1.0, 1.0], (15, 1)))
    # points outside the bounds (clipped), one feature, float32
    wide = rng.uniform(-3, 3, (500, 1)).astype(np.float32)
    with pytest.warns(UserWarning, match="clipped"):
        m = DPCube(3, bounds=(-1, 1), n_lloyd=n_lloyd, random_state=0).fit(wide)
    _check_centres(m, 3, np.array([[-1.0, 1.0]]))


# =========================================================================== behaviour
def test_reproducible_predict_and_clone(blobs):
    X, _ = blobs
    a = DPCube(5, bounds=(-10, 10), random_state=3).fit(X)
    b = DPCube(5, bounds=(-10, 10), random_state=3).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.predict(X), a.labels_)
    assert a.n_features_in_ == 12 and a.n_iter_ == 0
    assert clone(a).get_params() == a.get_params()
    r = DPCube(5, bounds=(-10, 10), n_lloyd=2, random_state=3).fit(X)
    assert r.n_iter_ == 2 and r.centers_history_.shape == (3, 5, 12)
    assert r.cost_history_.shape == (3,) and np.isfinite(r.cost_history_).all()


def test_utility_synth_10d_target():
    """The target: Synth-10d (100,000 x 10, 64 blobs), epsilon 1, k = 64 (its fit time, 1 s,
    is measured by ``benchmarks/dpcube.py``, not here)."""
    X, y = make_blobs(100_000, 10, centers=64, center_box=(-100, 100), random_state=42)
    X = np.clip(X, -100, 100)
    for seed in (0, 1):
        m = DPCube(64, epsilon=1.0, bounds=(-100, 100), random_state=seed).fit(X)
        assert accuracy_majority(y, m.labels_) >= 0.90


def test_utility_projected_blobs():
    X, y = make_blobs(8000, 30, centers=6, center_box=(-8, 8), random_state=4)
    accs = [accuracy_majority(y, DPCube(6, epsilon=1.0, bounds=(-12, 12), random_state=s)
                              .fit(np.clip(X, -12, 12)).labels_) for s in range(3)]
    assert np.median(accs) >= 0.9 and min(accs) >= 0.8, accs


def test_docstring_example_runs():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(DPCube, "DPCube"):
        runner.run(test)
    assert runner.failures == 0 and runner.tries > 0


# =========================================================================== bad input
@pytest.mark.parametrize(
    "kwargs, X, match",
    [
        *BAD_EPSILON_AND_K,
        ({"n_clusters": "3"}, None, "n_clusters"),
        ({"max_depth": 0}, None, "max_depth"),
        ({"n_projected": 0}, None, "n_projected"),
        ({"n_projected": 21}, None, "n_projected"),
        ({"n_shifts": 0}, None, "n_shifts"),
        ({"recover_share": 1.0}, None, "recover_share"),
        ({"n_lloyd": -1}, None, "n_lloyd"),
        *BAD_BOUNDS_AND_DATA,
    ],
)
def test_bad_input_is_a_clear_error(kwargs, X, match):
    assert_clear_error(DPCube, kwargs, X, match)
