"""EMMC: the ledger against the noise actually drawn (the exponential mechanism's included),
the max-cover scores' sensitivity, spent == planned, exactly k centres, utility, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.datasets import make_blobs

import privclust.privacy.histogram as histogram
import privclust.privacy.mechanisms as mechanisms
from privclust.cluster.emmc import EMMC, coverage_matrix, greedy_cover_scores
from privclust.metrics import ari


# =========================================================================== instrumentation
class DrawRecorder:
    """Records every noise draw (kind, parameter): geometric, Laplace, Gaussian, Gumbel (the
    exponential mechanism) and every sparse histogram. ``histogram_factor`` / ``em_factor``
    != 1 plant a bug: noise drawn at that multiple of the epsilon the ledger records."""

    def __init__(self, monkeypatch, histogram_factor: float = 1.0, em_factor: float = 1.0):
        self.draws: list[tuple[str, float]] = []
        m = mechanisms
        geo, lap, gau, gum = (m._draw_two_sided_geometric, m._draw_laplace, m._draw_gaussian,
                              m._draw_gumbel)
        sparse = histogram.sparse_histogram
        em = m.exponential_mechanism

        def rec(kind, fn):
            def wrapped(rng, param, size):
                self.draws.append((kind, float(np.max(param))))
                return fn(rng, param, size)
            return wrapped

        def sparse_rec(rng, keys, counts, n_cells, epsilon, threshold, noise="geometric", **kw):
            self.draws.append(("histogram", float(epsilon)))
            return sparse(rng, keys, counts, n_cells, epsilon * histogram_factor, threshold,
                          noise, **kw)

        def em_planted(rng, scores, sensitivity, epsilon, monotone=False):
            return em(rng, scores, sensitivity, epsilon * em_factor, monotone)

        monkeypatch.setattr(m, "_draw_two_sided_geometric", rec("geometric", geo))
        monkeypatch.setattr(m, "_draw_laplace", rec("laplace", lap))
        monkeypatch.setattr(m, "_draw_gaussian", rec("gaussian", gau))
        monkeypatch.setattr(m, "_draw_gumbel", rec("gumbel", gum))
        monkeypatch.setattr(m, "exponential_mechanism", em_planted)
        monkeypatch.setattr(histogram, "sparse_histogram", sparse_rec)


def true_spend(report, rec: DrawRecorder, d: int) -> list[float]:
    """The epsilon each release really spent, from its noise draws and the sensitivity known
    here independently: cell counts, candidate counts, sizes and max-cover scores 1 (the
    exponential mechanism's Gumbel scale is 2 * 1 / eps), unit sums d."""
    draws = list(rec.draws)
    spent = []
    for r in report.releases:
        kind, param = draws.pop(0)
        if r.mechanism.endswith("sparse hist"):
            assert kind == "histogram"
            geo_kind, geo_eps = draws.pop(0)
            assert geo_kind == "geometric"
            tail_kind, tail_scale = draws.pop(0)
            assert tail_kind == "laplace" and math.isclose(tail_scale, 1.0 / geo_eps,
                                                           rel_tol=1e-12)
            spent.append(geo_eps)
        elif r.mechanism == "exponential":
            assert kind == "gumbel"
            spent.append(2.0 * 1.0 / param)
        elif r.mechanism == "two-sided geometric":
            assert kind == "geometric"
            spent.append(param)
        elif r.mechanism == "laplace":
            assert kind == "laplace"
            spent.append(d / param)
        else:
            raise AssertionError(f"unexpected release {r.mechanism}")
    assert draws == [], f"draws without a ledger line: {draws}"
    return spent


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
