"""Targeted audit of DPM's split choice with the sensitivity taken from the released count
(Departures item 10b; DPM docstring, "Score sensitivity from the released count").

Two parts: (1) the sensitivity claim itself, checked exhaustively on small data for every added
record position and every fixed released count n_hat (including n_hat far below the true count,
the case the paper's shift lambda guards against); (2) a black-box audit of exactly this step,
the released count followed by the exponential mechanism, on neighbouring data sets.
"""

import numpy as np
import pytest

from _audit import assert_private, audit, categorical_events, threshold_events
from privclust.cluster.dpm import DPM
from privclust.privacy.mechanisms import (
    exponential_mechanism,
    private_quantile,
    two_sided_geometric,
)

T, Q, ALPHA = 0.3, 1 / 12, 5.0
N_BINS = 10  # candidates per dimension on [0, 1] (beta = 0.1)


def _half_hist(x):
    b = np.clip(np.floor(x * 2 * N_BINS), 0, 2 * N_BINS - 1).astype(int)
    return np.bincount(b, minlength=2 * N_BINS)


def _scores(x, n_hat):
    n_hat = np.atleast_1d(np.asarray(n_hat, dtype=float))
    hist = np.broadcast_to(_half_hist(x), (n_hat.size, 1, 2 * N_BINS))
    return DPM._scores(hist, n_hat, T, Q, ALPHA).reshape(n_hat.size, -1)


@pytest.mark.parametrize("seed", range(4))
def test_score_sensitivity_bound_holds_for_every_added_record(seed):
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(0, 1, size=int(rng.integers(5, 60)))
    n_hats = np.arange(1, 3 * x0.size + 5, dtype=float)  # released counts below and above n
    base = _scores(x0, n_hats)
    worst = 0.0
    for x_new in np.linspace(0, 1, 401):
        diff = np.abs(_scores(np.r_[x0, x_new], n_hats) - base).max(axis=1)
        ratio = diff / ((T / Q + ALPHA) / n_hats)
        worst = max(worst, float(ratio.max()))
    assert worst <= 1.0 + 1e-12
    # the bound is not loose by a factor 2: half of it is violated somewhere
    assert worst > 0.5


def _sampler(x, eps_cnt, eps_exp, sens_factor=1.0):
    hist = _half_hist(x)

    def run(rng, n):
        n_hat = two_sided_geometric(rng, np.full(n, x.size), eps_cnt)
        out = np.full(n, -1)
        ok = n_hat > 0  # DPM halts a node whose released count is <= 0
        h = np.broadcast_to(hist, (int(ok.sum()), 1, 2 * N_BINS))
        scores = DPM._scores(h, n_hat[ok].astype(float), T, Q, ALPHA).reshape(int(ok.sum()), -1)
        sens = sens_factor * (T / Q + ALPHA) / n_hat[ok]
        out[ok] = exponential_mechanism(rng, scores, sens, eps_exp)
        # the released pair (count, choice), coarsened to a data-set independent code
        return np.clip(n_hat, 8, 28) * 100 + out + 1

    return run


_X0 = np.r_[np.full(6, 0.13), np.full(6, 0.52), np.full(6, 0.87)]
_EVENTS = categorical_events([c * 100 + k for c in range(8, 29) for k in range(2 * N_BINS + 1)])


@pytest.mark.parametrize("x_new", [0.0, 0.13, 0.55])
def test_released_count_then_split_choice_is_private(x_new):
    x1 = np.r_[_X0, x_new]
    res = assert_private(2.5, 0.0, _sampler(_X0, 0.5, 2.0), _sampler(x1, 0.5, 2.0), _EVENTS,
                         300_000, seed=11)
    assert res.epsilon_lower < 2.5


def test_the_audit_catches_a_too_small_sensitivity():
    x1 = np.r_[_X0, 0.13]
    res = audit(_sampler(_X0, 0.5, 2.0, 0.1), _sampler(x1, 0.5, 2.0, 0.1), _EVENTS, 300_000,
                seed=11)
    assert res.epsilon_lower > 2.5


# ------------------------------------------------------------------ interval size with ties
def _gap_quantile_sampler(x, eps):
    """DPM's interval-size query on 1-D integer-valued data: most gaps are 0 (the floor atom)."""
    gaps = np.diff(np.sort(x)) / 15.0

    def run(rng, n):
        return np.array([
            private_quantile(rng, gaps, 0.65, 1e-12, 1.0, eps, 1.35, log_scale=True,
                             floor_atom=1.0)
            for _ in range(n)
        ])

    return run


_INT_X0 = np.repeat(np.arange(0, 16, 3), [9, 1, 1, 1, 1, 9]).astype(float)
_GAP_EVENTS = threshold_events([1e-12, 1e-9, 1e-6, 1e-3, 0.05, 0.1, 0.2, 0.4])


@pytest.mark.parametrize("x_new", [0.0, 7.0, 15.0])
def test_gap_quantile_with_floor_atom_is_private(x_new):
    x1 = np.r_[_INT_X0, x_new]
    res = assert_private(1.0, 0.0, _gap_quantile_sampler(_INT_X0, 1.0),
                         _gap_quantile_sampler(x1, 1.0), _GAP_EVENTS, 6000, seed=5)
    assert res.epsilon_lower < 1.0


def test_floor_atom_returns_the_floor_when_the_quantile_is_a_tie():
    gaps = np.r_[np.zeros(900), np.full(100, 1 / 15)]
    rng = np.random.default_rng(0)
    out = [private_quantile(rng, gaps, 0.65, 1e-12, 1.0, 1.0, 1.35, log_scale=True,
                            floor_atom=1.0) for _ in range(200)]
    assert np.mean(np.array(out) == 1e-12) > 0.99
    without = [private_quantile(rng, gaps, 0.65, 1e-12, 1.0, 1.0, 1.35, log_scale=True)
               for _ in range(200)]
    assert np.mean(np.array(without) > 1e-9) > 0.3  # the atom is what pins the answer


def test_floor_atom_far_heavier_than_every_interval_does_not_overflow():
    gaps = np.r_[np.zeros(200_000), np.full(10, 0.5)]
    out = private_quantile(np.random.default_rng(0), gaps, 0.65, 1e-12, 1.0, 50.0, 1.35,
                           log_scale=True, floor_atom=1.0)
    assert out == 1e-12
