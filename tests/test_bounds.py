"""Private bounds: the grid, the threshold, containment, the audit and the ledger."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from _audit import assert_private, audit, threshold_events
from privclust import Accountant, Budget, BudgetExceededError, private_bounds
from privclust.cluster.bounds import feature_bin_counts
from privclust.privacy.bounds import bound_threshold, bounds_from_noisy_counts, log_grid


def test_log_grid_is_symmetric_geometric_and_covers_the_scales():
    edges = log_grid((1e-3, 1e3), per_octave=4)
    assert np.all(np.diff(edges) > 0)
    np.testing.assert_allclose(edges, -edges[::-1])
    pos = edges[edges > 0]
    np.testing.assert_allclose(pos[1:] / pos[:-1], 2 ** 0.25)
    assert pos[0] <= 1e-3 and pos[-1] >= 1e3
    with pytest.raises(ValueError, match="scales"):
        log_grid((0, 1))
    with pytest.raises(ValueError, match="per_octave"):
        log_grid((1, 2), per_octave=0)


def test_threshold_bounds_the_chance_that_an_empty_bin_is_taken():
    for eps, bins, beta in [(0.01, 403, 1e-3), (1.0, 5, 0.5), (0.1, 50, 1e-6)]:
        t = bound_threshold(eps, bins, beta)
        a = math.exp(-eps)
        assert bins * a**t / (1 + a) <= beta  # the claim
        assert bins * a ** (t - 1) / (1 + a) > beta or t == 1  # and the smallest such T


def test_bin_counts_are_exact():
    edges = np.array([-1.0, 0.0, 1.0])
    X = np.array([[-5.0, 0.5], [-1.0, 0.0], [0.2, 3.0], [1.0, -0.1]])
    counts = feature_bin_counts(X, edges)
    np.testing.assert_array_equal(counts, [[1, 1, 1, 1], [0, 1, 2, 1]])


def test_bounds_keep_within_one_bin_of_the_data_with_the_stated_probability():
    """No empty bin is taken with probability >= 1 - beta per feature: the bounds never lie
    beyond the bins of the data's own extremes (over 300 runs, at most the binomial 1e-6
    quantile of failures)."""
    X = np.random.default_rng(0).uniform(3.0, 70.0, size=(400, 1))
    edges = log_grid((1e-6, 1e9), 4)
    lo_edge = edges[np.searchsorted(edges, X.min(), side="right") - 1]
    hi_edge = edges[np.searchsorted(edges, X.max(), side="right")]
    beta, runs = 0.05, 300
    loose = 0
    for seed in range(runs):
        b = private_bounds(X, epsilon=2.0, per_octave=4, beta=beta, random_state=seed).bounds[0]
        loose += bool(b[0] < lo_edge - 1e-12 or b[1] > hi_edge + 1e-12)
    assert loose <= binom.ppf(1 - 1e-6, runs, 2 * beta)  # two ends per feature


def test_bounds_adapt_to_data_far_smaller_than_any_plausible_range():
    X = np.random.default_rng(1).uniform(1e-3, 2e-3, size=(20000, 3))
    b = private_bounds(X, epsilon=0.1, per_octave=4, random_state=0).bounds
    assert (b[:, 0] >= 1e-3 / 2 ** 0.25 - 1e-12).all() and (b[:, 1] <= 2e-3 * 2 ** 0.25).all()
    assert (b[:, 0] <= 1.1e-3).all() and (b[:, 1] >= 1.9e-3).all()


def test_spent_equals_planned_and_the_budget_is_checked_before_the_data():
    X = np.random.default_rng(2).normal(size=(5000, 4))
    report = private_bounds(X, epsilon=0.3, random_state=0).privacy_report_
    assert report.total() == Budget(0.3, 0.0) and report.private
    acc = Accountant(Budget(0.2, 0.0))

    class Untouchable:
        def __array__(self, *a, **k):
            raise AssertionError("the data was read before the budget was checked")

    with pytest.raises(BudgetExceededError):
        private_bounds(Untouchable(), epsilon=0.3, accountant=acc)


def test_too_few_records_and_bad_parameters_get_clear_errors():
    with pytest.raises(ValueError, match="too few records"):
        private_bounds(np.ones((3, 2)), epsilon=0.01, random_state=0)
    with pytest.raises(ValueError, match="epsilon"):
        private_bounds(np.ones((30, 2)), epsilon=0)
    with pytest.raises(ValueError, match="NaN|finite"):
        private_bounds(np.array([[np.nan, 1.0]]), epsilon=1.0)


def test_margin_widens_by_whole_bins():
    edges = log_grid((1.0, 8.0), 1)  # [-8, -4, -2, -1, 1, 2, 4, 8]
    noisy = np.zeros((1, edges.size + 1), dtype=np.int64)
    noisy[0, 5] = 10  # the bin [1, 2)
    np.testing.assert_array_equal(bounds_from_noisy_counts(noisy, edges, 5).bounds, [[1, 2]])
    np.testing.assert_array_equal(bounds_from_noisy_counts(noisy, edges, 5, 1).bounds,
                                  [[-1, 4]])


def test_outer_bins_never_give_an_empty_range():
    edges = log_grid((1.0, 4.0), 1)  # [-4, -2, -1, 1, 2, 4]
    noisy = np.zeros((2, edges.size + 1), dtype=np.int64)
    noisy[0, -1] = 10  # everything beyond +4
    noisy[1, 0] = 10  # everything below -4
    b = bounds_from_noisy_counts(noisy, edges, 5).bounds
    assert (b[:, 1] > b[:, 0]).all()
    np.testing.assert_array_equal(b, [[2.0, 4.0], [-4.0, -2.0]])


# ----------------------------------------------------------------------------- the audit
_D0 = np.full((30, 1), 1.5)  # every record in the bin [1, 2)
_D1 = np.vstack([_D0, [[3.0]]])  # plus one record in the empty bin [2, 4) of the grid
# -4, -2, -1, 1, 2, 4 (scales (1, 4), one step per octave)
_EPS = 1.0


def _upper_bounds(data, epsilon):
    def sample(rng, n_trials):
        return np.array([
            private_bounds(data, epsilon=epsilon, scales=(1.0, 4.0), per_octave=1, beta=0.9,
                           random_state=rng).bounds[0, 1]
            for _ in range(n_trials)
        ])
    return sample


def test_bounds_release_passes_its_audit_and_the_audit_catches_half_the_noise():
    """Neighbouring data sets that differ by one record in an otherwise empty bin: the event
    "the upper bound takes that bin" has probability P(Z >= T) against P(Z >= T - 1)."""
    events = threshold_events([3.0])  # upper bound 2 (bin [1, 2)) or 4 (bin [2, 4) taken)
    res = assert_private(_EPS, 0.0, _upper_bounds(_D0, _EPS), _upper_bounds(_D1, _EPS),
                         events, n_trials=4000, seed=0)
    assert res.epsilon_lower > 0.3 * _EPS, str(res)  # the event has power (loss near e^eps)
    broken = audit(_upper_bounds(_D0, 2 * _EPS), _upper_bounds(_D1, 2 * _EPS), events,
                   n_trials=4000, seed=0)
    assert broken.epsilon_lower > _EPS, str(broken)


# ----------------------------------------------------------------------------- bounds="private"
from privclust import io, registry  # noqa: E402

_PRIVATE = [n for n in registry.ENTRIES if n != "morse"]


@pytest.mark.parametrize("name", _PRIVATE)
def test_every_estimator_takes_private_bounds_within_its_budget(name):
    """bounds="private" spends PRIVATE_BOUNDS_SHARE of epsilon on the bounds, first, and the
    whole fit still spends exactly epsilon; the released bounds are saved with the model."""
    from sklearn.datasets import make_blobs

    from privclust.cluster._base import PRIVATE_BOUNDS_SHARE

    X, _ = make_blobs(6000, 2, centers=[[-20, -20], [20, 20], [-20, 20]], random_state=0)
    entry = registry.ENTRIES[name]
    values = {dest: None for dest in registry.OPTIONS} | dict(entry.example)
    values |= {"radius": 3.0} if name == "dbscan" else {}
    model = entry.build(values, epsilon=1.0, delta=None, bounds="private", random_state=0)
    model.fit(X)
    report = model.privacy_report_
    assert math.isclose(report.total().epsilon, 1.0, rel_tol=1e-9)
    assert report.releases[0].target.startswith("records per bin of a log-scale grid")
    assert math.isclose(report.releases[0].epsilon, PRIVATE_BOUNDS_SHARE, rel_tol=1e-12)
    assert model.bounds_.shape == (2, 2) and (model.bounds_[:, 0] < 0).all()
    loaded = io.model_from_dict(io.model_to_dict(model))
    np.testing.assert_array_equal(loaded.bounds_, model.bounds_)
    np.testing.assert_array_equal(loaded.predict(X[:300]), model.predict(X[:300]))


def test_private_bounds_are_booked_with_the_fit_s_accountant():
    from privclust import DPLloyd

    X = np.random.default_rng(3).uniform(-5, 5, size=(4000, 2))
    acc = Accountant(Budget(1.0, 0.0))
    DPLloyd(3, epsilon=1.0, bounds="private", accountant=acc, random_state=0).fit(X)
    with pytest.raises(BudgetExceededError):
        DPLloyd(3, epsilon=0.05, bounds="private", accountant=acc).fit(X)


def test_private_bounds_inside_morse_merging_is_refused_clearly():
    from privclust import DPLloyd, MorseMerging

    X = np.random.default_rng(4).uniform(-5, 5, size=(2000, 2))
    with pytest.raises(ValueError, match="composite fit"):
        MorseMerging(DPLloyd(6, bounds="private"), 2, epsilon=1.0, random_state=0).fit(X)


def test_command_line_takes_private_bounds(tmp_path, capsys):
    from privclust import cli

    X = np.random.default_rng(5).normal(size=(5000, 2)) * 10
    np.save(tmp_path / "X.npy", X)
    out = tmp_path / "m.json"
    argv = ["cluster", str(tmp_path / "X.npy"), "--algorithm", "lloyd", "--n-clusters", "3",
            "--epsilon", "1", "--bounds", "private", "--seed", "1", "--out", str(out)]
    assert cli.main(argv) == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert "records per bin of a log-scale grid" in text and "privacy spent: epsilon=1 of 1" in text
    assert io.load_model(out).bounds_.shape == (2, 2)
