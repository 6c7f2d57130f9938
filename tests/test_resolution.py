"""DPM on rounded and integer data: the private recording step, its sensitivity and utility."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from _audit import assert_private, audit, categorical_events
from privclust import DPM
from privclust.cluster.dpm import _candidate_steps
from privclust.engine import LocalEngine
from privclust.metrics import ari
from privclust.privacy import Budget, Mechanisms, PrivacyReport, RandomSource

CONFIDENCE = 0.999


def _ties_and_misses(X, steps):
    eng = LocalEngine(X, np.tile([-10.0, 10.0], (X.shape[1], 1)))
    ties = (eng.neighbour_gaps() == 0).sum(axis=0)
    misses = np.stack([eng.lattice_misses(j, steps) for j in range(X.shape[1])])
    return ties, misses


@pytest.mark.parametrize("decimals", [0, 1])
def test_ties_and_lattice_misses_move_by_at_most_one_per_feature(decimals):
    """The sensitivity both releases rely on: one record more changes each feature's tie count
    and each step's off-lattice count by 0 or 1 (repeated values, new values, extremes and
    off-lattice values included)."""
    rng = np.random.default_rng(decimals)
    X = np.round(rng.normal(0, 2, size=(400, 2)), decimals)
    steps = _candidate_steps(20.0)
    t0, m0 = _ties_and_misses(X, steps)
    extra = [X[0], X[1] + 10.0 ** -decimals, [9.9, -9.9], [0.123456, 0.5], [-10.0, 10.0]]
    extra += [np.round(rng.normal(0, 2, 2), decimals) for _ in range(20)]
    for x in extra:
        t1, m1 = _ties_and_misses(np.vstack([X, x]), steps)
        assert np.all((t1 - t0 >= 0) & (t1 - t0 <= 1))
        assert np.all((m1 - m0 >= 0) & (m1 - m0 <= 1))


def _svt_sampler(values, threshold, eps, noise_factor=1.0):
    def sample(rng, n):
        mech = Mechanisms(RandomSource(rng, "audit", False), PrivacyReport("a", Budget(1e9)))
        if noise_factor != 1.0:  # a broken variant: less noise than the claim needs
            return np.array([mech.first_below(values, threshold, eps * noise_factor,
                                              target="t") for _ in range(n)])
        return np.array([mech.first_below(values, threshold, eps, target="t")
                         for _ in range(n)])
    return sample


def test_sparse_vector_audit_on_neighbouring_queries():
    """Neighbours move every query by one. AboveThreshold's epsilon is a loose bound on what
    its output events show (about eps / 4 per unit shift on one query: the query noise's tail),
    so the audit shows the claim holds and catches a variant with an eighth of the noise; the
    exact noise scales are checked draw by draw in tests/test_plan.py."""
    eps, threshold = 1.0, 0.0
    q0, q1 = np.array([0.0]), np.array([1.0])
    events = categorical_events([-1, 0])
    assert_private(eps, 0.0, _svt_sampler(q0, threshold, eps), _svt_sampler(q1, threshold, eps),
                   events, 30_000, seed=3, confidence=CONFIDENCE)
    broken = audit(_svt_sampler(q0, threshold, eps, 8.0), _svt_sampler(q1, threshold, eps, 8.0),
                   events, 30_000, seed=3, confidence=CONFIDENCE)
    assert broken.epsilon_lower > eps


def _four_blobs(r, n=20_000, std=1.0):
    X, y = make_blobs(n, 2, centers=4, cluster_std=std, center_box=(-8, 8), random_state=r)
    return np.clip(X, -10, 10), y


def _integer_blobs(r):
    """The integer example: make_blobs(5000, centers=4, std=3), rounded (once k = 17 at
    epsilon 1 and k = 74 at epsilon 10)."""
    X, y = make_blobs(5000, 2, centers=4, cluster_std=3, random_state=r)
    return np.clip(X, -30, 30), y


@pytest.mark.parametrize(("decimals", "data", "bounds", "epsilon"), [
    (1, lambda: _four_blobs(3), (-10, 10), 1.0),
    (0, lambda: _integer_blobs(3), (-30, 30), 10.0),
])
def test_rounded_data_clusters_like_full_precision(decimals, data, bounds, epsilon):
    """Once 36-56 clusters and ARI 0.14 at one decimal (the interval size collapsed)."""
    X, y = data()

    def fits(Z):
        return [DPM(epsilon=epsilon, delta=1e-6, bounds=bounds, random_state=s).fit(Z)
                for s in range(8)]

    full, rounded = fits(X), fits(np.round(X, decimals))
    assert all(m.n_clusters_ <= 10 for m in rounded), [m.n_clusters_ for m in rounded]
    a_full = np.mean([ari(y, m.labels_) for m in full])
    a_round = np.mean([ari(y, m.labels_) for m in rounded])
    assert a_round >= a_full - 0.1, (a_round, a_full)
    step = 10.0 ** -decimals
    found = np.array([m.resolution_ for m in rounded])
    assert np.mean(np.isclose(found, step)) >= 0.8, found
    assert all(np.all(m.interval_size_ >= m.resolution_) for m in rounded)


def test_continuous_data_spends_the_step_budget_on_the_interval_size():
    X, _ = _four_blobs(1, n=5000)
    m = DPM(epsilon=1, delta=1e-6, bounds=(-10, 10), random_state=0).fit(X)
    assert np.all(m.resolution_ == 0)
    rep = m.privacy_report_
    assert not any(r.mechanism.startswith("sparse vector") for r in rep.releases)
    assert any("no feature is rounded" in n for n in rep.notes)
    assert rep.total().epsilon == pytest.approx(1.0, rel=1e-9)


def test_a_public_resolution_costs_nothing():
    X, y = _four_blobs(2, n=5000)
    Xi = np.round(X)
    m = DPM(epsilon=1, delta=1e-6, bounds=(-10, 10), resolution=1.0, random_state=0).fit(Xi)
    assert np.all(m.resolution_ == 1.0) and np.all(m.interval_size_ >= 1.0)
    assert not any("ties" in r.target for r in m.privacy_report_.releases)
    assert m.privacy_report_.total().epsilon == pytest.approx(1.0, rel=1e-9)
    none = DPM(epsilon=1, delta=1e-6, bounds=(-10, 10), resolution=None, random_state=0).fit(X)
    assert np.all(none.resolution_ == 0)


@pytest.mark.parametrize("bad", [-1.0, "fine", [0.1, np.nan], [[0.1]]])
def test_bad_resolution_is_a_clear_error(bad):
    X, _ = _four_blobs(0, n=200)
    with pytest.raises(ValueError, match="resolution must be"):
        DPM(epsilon=1, delta=1e-6, bounds=(-10, 10), resolution=bad).fit(X)
