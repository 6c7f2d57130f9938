"""EMMC: the ledger against the noise actually drawn (the exponential mechanism's included),
the max-cover scores' sensitivity, spent == planned, exactly k centres, utility, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from _draws import DrawRecorder, true_spend
from privclust.cluster.emmc import EMMC, coverage_matrix, greedy_cover_scores
from privclust.metrics import ari

# =========================================================================== instrumentation


def check_fit(model, rec, epsilon, d):
    report = model.privacy_report_
    spent = true_spend(report, rec, d)
    np.testing.assert_allclose(spent, [r.epsilon for r in report.releases], rtol=1e-9)
    assert math.isclose(sum(spent), epsilon, rel_tol=1e-9), (sum(spent), epsilon)
    return spent


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(4000, 3, centers=5, center_box=(-8, 8), cluster_std=0.6, random_state=1)
    return np.clip(X, -10, 10), y


@pytest.mark.parametrize("refine", [False, True])
def test_ledger_equals_the_noise_actually_drawn(blobs, refine, monkeypatch):
    X, _ = blobs
    rec = DrawRecorder(monkeypatch)
    model = EMMC(5, epsilon=0.7, bounds=(-10, 10), refine=refine, random_state=2).fit(X)
    check_fit(model, rec, 0.7, X.shape[1])
    kinds = [r.mechanism for r in model.privacy_report_.releases]
    assert kinds.count("exponential") == 3 * 10  # n_scales * n_candidates choices, all seen


@pytest.mark.parametrize("factor", [{"histogram_factor": 2.0}, {"em_factor": 2.0}])
def test_half_the_noise_is_caught(blobs, factor, monkeypatch):
    X, _ = blobs
    rec = DrawRecorder(monkeypatch, **factor)  # draws at 2 eps (half the noise), records eps
    model = EMMC(5, epsilon=0.7, bounds=(-10, 10), random_state=2).fit(X)
    with pytest.raises(AssertionError):
        check_fit(model, rec, 0.7, X.shape[1])


# =========================================================================== sensitivity
def _cover_scores(X, candidates, picked, origin, width, radius):
    """Max-cover scores computed from scratch for data X: cells of X, the balls of the
    candidates, cells covered by the earlier (public) picks."""
    cells, counts = np.unique(np.floor((X - origin) / width).astype(np.int64), axis=0,
                              return_counts=True)
    centres = origin + (cells + 0.5) * width
    inc = coverage_matrix(candidates, centres, radius)
    covered = np.zeros(centres.shape[0], dtype=bool)
    if picked.shape[0]:
        covered = np.asarray(coverage_matrix(picked, centres, radius).sum(axis=0)).ravel() > 0
    return greedy_cover_scores(inc, counts, covered)


def test_one_record_changes_every_cover_score_by_at_most_one():
    rng = np.random.default_rng(5)
    X = rng.normal(0.0, 1.0, size=(600, 2))
    origin, width = np.array([-4.1, -3.9]), np.array([0.5, 0.5])
    candidates = rng.uniform(-3, 3, size=(40, 2))
    worst = 0.0
    for trial in range(30):
        picked = candidates[rng.choice(40, size=trial % 5, replace=False)]
        base = _cover_scores(X, candidates, picked, origin, width, 0.9)
        y = rng.uniform(-4, 4, size=(1, 2)) if trial % 2 else X[trial:trial + 1]
        added = _cover_scores(np.vstack([X, y]), candidates, picked, origin, width, 0.9)
        removed = _cover_scores(np.delete(X, trial, axis=0), candidates, picked, origin,
                                width, 0.9)
        worst = max(worst, np.abs(added - base).max(), np.abs(removed - base).max())
    assert worst <= 1.0
    assert worst == 1.0  # the bound is reached (the test can see a change)


def test_overlapping_balls_share_a_record():
    # one record covered by several balls: each score moves by 1, not their sum by 1
    cand = np.array([[0.0, 0.0], [0.4, 0.0]])
    centres = np.array([[0.2, 0.0]])
    inc = coverage_matrix(cand, centres, 0.5)
    s0 = greedy_cover_scores(inc, np.array([3]), np.array([False]))
    s1 = greedy_cover_scores(inc, np.array([4]), np.array([False]))
    np.testing.assert_array_equal(s1 - s0, [1.0, 1.0])
    assert greedy_cover_scores(inc, np.array([4]), np.array([True])).tolist() == [0.0, 0.0]


# =========================================================================== budget, centres
@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_spent_equals_planned(blobs, eps):
    X, _ = blobs
    model = EMMC(5, epsilon=eps, bounds=(-10, 10), random_state=3).fit(X)
    assert abs(model.privacy_report_.total().epsilon - eps) <= 1e-9
    assert model.privacy_report_.private


@pytest.mark.parametrize("refine", [False, True])
def test_always_k_finite_centres_inside_bounds_on_tiny_data(refine):
    X = np.random.default_rng(0).uniform(-1, 1, size=(20, 2))
    for seed in range(3):
        model = EMMC(7, epsilon=1.0, bounds=(-1, 1), refine=refine, random_state=seed).fit(X)
        c = model.cluster_centers_
        assert c.shape == (7, 2) and np.isfinite(c).all()
        assert (c >= -1).all() and (c <= 1).all()
        assert model.cluster_sizes_.shape == (7,) and model.labels_.shape == (20,)
        assert abs(model.privacy_report_.total().epsilon - 1.0) <= 1e-9


def test_one_dimension_and_wide_bounds_per_feature():
    X = np.random.default_rng(1).uniform(0, 5, size=(300, 1))
    model = EMMC(3, epsilon=1.0, bounds=(0, 5), random_state=0).fit(X)
    assert model.cluster_centers_.shape == (3, 1)
    b = np.array([[-10.0, 10.0], [0.0, 1.0]])
    X2 = np.random.default_rng(2).uniform(b[:, 0], b[:, 1], size=(500, 2))
    c = EMMC(4, epsilon=1.0, bounds=b, random_state=0).fit(X2).cluster_centers_
    assert ((c >= b[:, 0]) & (c <= b[:, 1])).all()


def test_utility_floor_on_separated_blobs(blobs):
    X, y = blobs
    scores = [ari(y, EMMC(5, epsilon=1.0, bounds=(-10, 10), random_state=s).fit(X).labels_)
              for s in range(3)]
    assert np.median(scores) >= 0.9, scores


# =========================================================================== bad input
@pytest.mark.parametrize("kwargs, match", [
    ({"bounds": None}, "bounds"),
    ({"epsilon": 0}, "epsilon"),
    ({"n_candidates": 0}, "n_candidates"),
    ({"n_scales": 0}, "n_scales"),
    ({"cover_radius": -1.0}, "cover_radius"),
    ({"shares": (0.5, 0.5)}, "shares"),
    ({"refine": True, "refine_share": 1.5}, "refine_share"),
])
def test_bad_parameters_raise_clear_errors(blobs, kwargs, match):
    X, _ = blobs
    params = {"epsilon": 1.0, "bounds": (-10, 10), "random_state": 0, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        EMMC(5, **params).fit(X)


def test_bad_data_raises():
    with pytest.raises(ValueError):
        EMMC(2, bounds=(0, 1)).fit(np.array([[0.1, np.nan], [0.2, 0.3]]))
    with pytest.raises(ValueError):
        EMMC(2, bounds=(0, 1)).fit(np.zeros((0, 2)))
    with pytest.raises(TypeError):
        EMMC(2, bounds=(0, 1), refine="yes").fit(np.zeros((5, 2)))
    with pytest.raises(ValueError, match="n_clusters"):
        EMMC(0, bounds=(0, 1)).fit(np.zeros((5, 2)))


# =========================================================================== the cell walk
def test_the_split_walk_gives_the_grid_walk_s_candidates(blobs, monkeypatch):
    """The net and the max cover's cells from the NumPy engine's split_cells equal those
    from per-level cell counts (the path of engines without split_cells, e.g. Dask)."""
    from privclust.cluster._shifted_tree import ShiftedGrid

    X, _ = blobs
    fast = EMMC(5, epsilon=1.0, bounds=(-10, 10), max_depth=6, random_state=4).fit(X)
    monkeypatch.setattr(ShiftedGrid, "root_holds_the_box", lambda self: False)
    slow = EMMC(5, epsilon=1.0, bounds=(-10, 10), max_depth=6, random_state=4).fit(X)
    np.testing.assert_array_equal(fast.candidates_, slow.candidates_)
    np.testing.assert_array_equal(fast.candidate_counts_, slow.candidate_counts_)
    np.testing.assert_array_equal(fast.cluster_centers_, slow.cluster_centers_)
    assert str(fast.privacy_report_) == str(slow.privacy_report_)


# =========================================================================== refine="auto"
def _shuttle_like(n):
    """Three clusters; feature 1's public range (-5000, 5000) is 1000x its data's spread."""
    rng = np.random.default_rng(0)
    centres = np.array([[20.0, 0.0, 50.0], [60.0, 2.0, 30.0], [40.0, -2.0, 80.0]])
    X = centres[rng.integers(0, 3, n)] + rng.normal(0.0, [3.0, 2.5, 3.0], (n, 3))
    return X, np.array([[0.0, 100.0], [-5000.0, 5000.0], [0.0, 100.0]])


def test_the_default_refines_where_a_public_range_dwarfs_the_data():
    X, bounds = _shuttle_like(3000)
    Xc = np.clip(X, bounds[:, 0], bounds[:, 1])

    def cost(model):
        return ((Xc[:, None] - model.cluster_centers_[None]) ** 2).sum(axis=2).min(axis=1).sum()

    for seed in range(3):
        auto = EMMC(3, epsilon=1.0, bounds=bounds, random_state=seed).fit(X)
        off = EMMC(3, epsilon=1.0, bounds=bounds, refine=False, random_state=seed).fit(X)
        rep = auto.privacy_report_
        assert auto.n_iter_ == 1 and any("the private Lloyd step runs" in n for n in rep.notes)
        assert rep.unspent == [] and abs(rep.total().epsilon - 1.0) <= 1e-9
        assert cost(auto) < 0.2 * cost(off)


def test_without_refinement_the_budget_goes_to_the_net_and_the_cover(blobs):
    X, _ = blobs
    m = EMMC(40, epsilon=1.0, bounds=(-10, 10), random_state=0).fit(X[:1000])
    rep = m.privacy_report_
    assert m.n_iter_ == 0 and any("no refinement" in n for n in rep.notes)
    assert rep.unspent == [] and abs(rep.total().epsilon - 1.0) <= 1e-9
    by_item = {}
    for r in rep.releases:
        by_item[r.item] = by_item.get(r.item, 0.0) + r.epsilon
    # the shares of what is left after the count: net 0.5, cover 0.3, candidate counts 0.2
    # (plus the sizes' item)
    net = sum(e for i, e in by_item.items() if i.startswith("cell counts"))
    assert net == pytest.approx(0.5 * 0.98, rel=0.07)
    assert by_item["max cover choices"] == pytest.approx(0.3 * 0.98, rel=0.07)
    assert not any("refinement" in r.target for r in rep.releases)


def test_the_rule_decides_from_released_values_only():
    """The replay harness (tests/_replay.py) on the shuttle-like set, on both branches."""
    from _replay import ReplayMismatch, check_neighbour, neighbours

    X, bounds = _shuttle_like(1500)
    for k, refines in ((3, 1), (12, 0)):
        def make(k=k):
            return EMMC(k, epsilon=1.0, bounds=bounds, max_depth=4, random_state=5)

        assert make().fit(X).n_iter_ == refines
        for label, Xn in neighbours(X, bounds).items():
            try:
                assert check_neighbour(make, X, Xn) > 3
            except ReplayMismatch as exc:
                raise ReplayMismatch(f"{label}: {exc}") from None
