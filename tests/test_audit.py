"""Privacy audits: each mechanism, as privclust uses it, on neighbouring data sets.

Privacy unit: add/remove one record. Every audit runs a mechanism many times on ``D0`` and on
``D1 = D0 + one record`` placed where it moves the output most, and bounds the privacy loss from
below with Clopper-Pearson intervals (``tests/_audit.py``). A correct mechanism must stay at or
below its claim; the same audit against a variant with half the noise must catch it, which shows
that the audit has the power to see a leak of that size. The data sets are chosen (with the exact
output distributions below) so that the true privacy loss of the correct mechanism is a large
share of its claim, and the pass audits assert that they find a sizeable part of it.
"""

from __future__ import annotations

import numpy as np
import pytest

from _audit import (
    assert_private,
    audit,
    categorical_events,
    clopper_pearson_lower,
    clopper_pearson_upper,
    combine,
    interval_events,
    threshold_events,
)
from privclust.cluster.dpm import DPM
from privclust.engine import LocalEngine
from privclust.privacy import (
    Budget,
    Mechanisms,
    PrivacyReport,
    RandomSource,
    count_offset,
    exponential_mechanism_probabilities,
    gaussian_sigma,
)
from privclust.privacy.mechanisms import (
    exponential_mechanism,
    private_quantile,
    two_sided_geometric,
)

# One-sided confidence of every audit's bound. A correct mechanism fails an audit with
# probability at most 1 - CONFIDENCE; the seeds are fixed, so the verdicts are reproducible.
CONFIDENCE = 0.999


def _mechanisms(rng) -> Mechanisms:
    """A ledger-bound Mechanisms drawing from the auditor's generator."""
    return Mechanisms(RandomSource(rng, "audit", False), PrivacyReport("audit", Budget(1e9, 0.5)))


# =========================================================================== the auditor itself
def test_clopper_pearson_bounds():
    n, a = 1000, 0.01
    assert clopper_pearson_lower(0, n, a) == 0.0 and clopper_pearson_upper(n, n, a) == 1.0
    assert clopper_pearson_upper(0, n, a) == pytest.approx(1 - a ** (1 / n))
    assert clopper_pearson_lower(n, n, a) == pytest.approx(a ** (1 / n))
    lo, hi = clopper_pearson_lower(300, n, a), clopper_pearson_upper(300, n, a)
    assert lo < 0.3 < hi and hi - lo < 0.08


def test_auditor_finds_nothing_between_identical_mechanisms():
    def same(rng, n):
        return rng.integers(0, 5, n)

    res = audit(same, same, categorical_events(range(5)), 100_000, seed=1)
    assert res.epsilon_lower < 0.01
    # and it reads the delta claim: with delta = 1 no event can show a loss
    assert audit(same, same, categorical_events(range(5)), 1000, delta=1.0).epsilon_lower == (
        -np.inf)


# =========================================================================== noisy counts
# D0 has COUNT records, D1 one more. The event {x <= COUNT} has probability 1/(1+e^-eps) on D0
# and e^-eps/(1+e^-eps) on D1: ratio exactly e^eps, the whole budget.
COUNT = 50
COUNT_TRIALS = 200_000
COUNT_EVENTS = combine(
    categorical_events(range(COUNT - 6, COUNT + 8)),
    threshold_events(np.arange(COUNT - 4, COUNT + 5)),
)


def _count_sampler(n_records: int, epsilon: float, via: str):
    def sample(rng, n):
        counts = np.full(n, n_records, dtype=np.int64)
        if via == "two_sided_geometric":
            return two_sided_geometric(rng, counts, epsilon, 1)
        return _mechanisms(rng).count(counts, epsilon, target="audit count")

    return sample


@pytest.mark.parametrize("via", ["two_sided_geometric", "Mechanisms.count"])
@pytest.mark.parametrize("epsilon", [1.0, 0.5])
def test_noisy_count_passes_audit(epsilon, via):
    res = assert_private(
        epsilon, 0.0,
        _count_sampler(COUNT, epsilon, via), _count_sampler(COUNT + 1, epsilon, via),
        COUNT_EVENTS, COUNT_TRIALS, seed=11, confidence=CONFIDENCE,
    )
    # the discrete Laplace is tight: the audit must find nearly all of epsilon
    assert res.epsilon_lower > 0.9 * epsilon, str(res)


@pytest.mark.parametrize("via", ["two_sided_geometric", "Mechanisms.count"])
@pytest.mark.parametrize("epsilon", [1.0, 0.5])
def test_noisy_count_with_half_the_noise_is_caught(epsilon, via):
    # run at 2 * epsilon (half the noise scale), claim epsilon
    res = audit(
        _count_sampler(COUNT, 2 * epsilon, via), _count_sampler(COUNT + 1, 2 * epsilon, via),
        COUNT_EVENTS, COUNT_TRIALS, seed=12, confidence=CONFIDENCE,
    )
    assert res.epsilon_lower > epsilon, str(res)
    with pytest.raises(AssertionError, match="privacy audit failed"):
        assert_private(
            epsilon, 0.0,
            _count_sampler(COUNT, 2 * epsilon, via), _count_sampler(COUNT + 1, 2 * epsilon, via),
            COUNT_EVENTS, COUNT_TRIALS, seed=12, confidence=CONFIDENCE,
        )


# =========================================================================== DPM split choice
# A 1-D node of EM_N records in [0, 1], EM_B split candidates (intervals of width 1/EM_B, scored
# from half-interval histograms exactly as DPM._grow builds them). D0: EM_A records at the
# bottom, EM_TOP at the top, the rest in one half-interval in the middle, so every candidate is
# in an *outer* centre-ness region (rank <= n q or >= n - n q), where one record moves the score
# by the largest amount t/(n q). D1 adds one record at the very bottom: every rank grows by one,
# lower candidates gain and upper ones lose (the score is not monotone). A small alpha keeps the
# emptiness term from diluting the centre-ness change inside the sensitivity bound.
EM_N, EM_B, EM_A, EM_TOP = 240, 4, 12, 11
EM_T, EM_Q, EM_ALPHA = 0.3, 1 / 12, 0.25
EM_EPS = 1.0
EM_LAMBDA = count_offset(1.0, 1e-3)  # the shifted count's offset at eps_cnt = 1, delta = 1e-3
EM_N_HAT = float(EM_N)  # a fixed released count
EM_SENS = (EM_T / EM_Q + EM_ALPHA) / (EM_N_HAT - EM_LAMBDA)  # Departures 2
EM_TRIALS = 400_000


def _split_scores(X: np.ndarray) -> np.ndarray:
    d = X.shape[1]
    lo, hi = np.zeros(d), np.ones(d)
    beta = (hi - lo) / EM_B
    engine = LocalEngine(X, np.c_[lo, hi])
    hist = engine.axis_histogram(engine.root(), lo, beta / 2.0, 2 * EM_B)
    return DPM._scores(hist, np.array([EM_N_HAT]), EM_T, EM_Q, EM_ALPHA).reshape(-1)


@pytest.fixture(scope="module")
def split_scores():
    half = 1.0 / (2 * EM_B)
    X0 = np.concatenate([
        np.full(EM_A, 0.5 * half),  # bottom half-interval
        np.full(EM_N - EM_A - EM_TOP, (EM_B + 0.5) * half),  # one middle half-interval
        np.full(EM_TOP, 1.0 - 0.5 * half),  # top half-interval
    ])[:, None]
    X1 = np.vstack([X0, [[0.0]]])  # one record added at the bottom
    f0, f1 = _split_scores(X0), _split_scores(X1)
    # the sensitivity bound holds on this pair, and the change is not monotone
    diff = f1 - f0
    assert np.abs(diff).max() <= EM_SENS
    assert diff.max() > 0 > diff.min()
    return f0, f1


def _em_sampler(scores: np.ndarray, monotone: bool, via: str = "exponential_mechanism"):
    def sample(rng, n):
        rows = np.broadcast_to(scores, (n, scores.size))
        if via == "Mechanisms.select":
            return _mechanisms(rng).select(rows, EM_SENS, EM_EPS, target="audit split")
        return exponential_mechanism(rng, rows, EM_SENS, EM_EPS, monotone=monotone)

    return sample


def _max_log_ratio(p0, p1) -> float:
    return float(np.max(np.abs(np.log(p0) - np.log(p1))))


@pytest.mark.parametrize("via", ["exponential_mechanism", "Mechanisms.select"])
def test_split_selection_passes_audit(split_scores, via):
    f0, f1 = split_scores
    exact = _max_log_ratio(
        exponential_mechanism_probabilities(f0, EM_SENS, EM_EPS),
        exponential_mechanism_probabilities(f1, EM_SENS, EM_EPS),
    )
    assert 0.7 < exact <= EM_EPS  # cross-check: the exact loss on this pair
    res = assert_private(
        EM_EPS, 0.0, _em_sampler(f0, False, via), _em_sampler(f1, False, via),
        categorical_events(range(EM_B)), EM_TRIALS, seed=21, confidence=CONFIDENCE,
    )
    assert res.epsilon_lower > 0.65 * EM_EPS, str(res)
    assert res.epsilon_lower <= exact


def test_split_selection_without_factor_two_is_caught(split_scores):
    """Departures 1: exp(eps f / Delta) (monotone=True) on DPM's non-monotone score."""
    f0, f1 = split_scores
    exact = _max_log_ratio(
        exponential_mechanism_probabilities(f0, EM_SENS, EM_EPS, monotone=True),
        exponential_mechanism_probabilities(f1, EM_SENS, EM_EPS, monotone=True),
    )
    assert exact > 1.5 * EM_EPS
    res = audit(
        _em_sampler(f0, True), _em_sampler(f1, True),
        categorical_events(range(EM_B)), EM_TRIALS, seed=22, confidence=CONFIDENCE,
    )
    assert res.epsilon_lower > EM_EPS, str(res)


def _silhouette_pair():
    """Silhouette sums (the choice of k, model selection) of two fixed candidates on
    neighbours: the added record sits on a centre of candidate A (its term 1) and halfway
    between B's two centres (its term 0), the largest one-sided change. The other records sit
    halfway between A's centres (term 0 for A, 1/3 for B): B holds most of the probability,
    so A's gain shows almost whole in A's probability."""
    from privclust.cluster._coreset.select import silhouette_sum

    A = np.array([[0.0, 0.0], [10.0, 0.0]])
    B = np.array([[-1.0, 0.0], [1.0, 0.0]])
    X0 = np.array([[5.0, 0.0]] * 12)
    X1 = np.vstack([X0, [[0.0, 0.0]]])
    f0 = np.array([silhouette_sum(X0, A), silhouette_sum(X0, B)])
    f1 = np.array([silhouette_sum(X1, A), silhouette_sum(X1, B)])
    return f0, f1


def test_monotone_silhouette_selection_passes_audit():
    """``Mechanisms.select(monotone=True)`` (no factor 2) on the silhouette sums: every score
    moves up by at most 1 when a record is added, so the exact loss stays within epsilon, and
    the sampled outputs show no more; the same pair run at the general form's factor 2 would
    leave half the budget unused."""
    f0, f1 = _silhouette_pair()
    diff = f1 - f0
    assert (diff >= 0).all() and diff.max() <= 1.0 and diff.max() > 0.99 and diff.min() < 0.01
    exact = _max_log_ratio(
        exponential_mechanism_probabilities(f0, 1.0, EM_EPS, monotone=True),
        exponential_mechanism_probabilities(f1, 1.0, EM_EPS, monotone=True),
    )
    assert 0.9 * EM_EPS < exact <= EM_EPS

    def sampler(scores):
        def sample(rng, n):
            rows = np.broadcast_to(scores, (n, scores.size))
            return _mechanisms(rng).select(rows, 1.0, EM_EPS, target="audit silhouette",
                                           monotone=True)
        return sample

    res = assert_private(EM_EPS, 0.0, sampler(f0), sampler(f1), categorical_events(range(2)),
                         EM_TRIALS, seed=23, confidence=CONFIDENCE)
    assert res.epsilon_lower > 0.75 * EM_EPS, str(res)


# =========================================================================== private quantile
def _quantile_density(values, quantile, lo, hi, epsilon, sensitivity):
    """Exact output law of private_quantile, written independently: (edges, piece densities)."""
    z = np.sort(np.clip(np.asarray(values, dtype=float).ravel(), lo, hi))
    edges = np.concatenate(([lo], z, [hi]))
    widths = np.diff(edges)
    k = np.arange(z.size + 1, dtype=float)
    weight = np.exp(-epsilon * np.abs(k - quantile * z.size) / (2 * sensitivity))
    mass = weight * widths
    with np.errstate(divide="ignore", invalid="ignore"):
        dens = np.where(widths > 0, weight / mass.sum(), 0.0)
    return edges, dens


def _max_density_log_ratio(v0, v1, quantile, lo, hi, epsilon, sensitivity) -> float:
    """sup over outputs v of |ln p0(v) / p1(v)| (pure DP needs this <= epsilon)."""
    e0, d0 = _quantile_density(v0, quantile, lo, hi, epsilon, sensitivity)
    e1, d1 = _quantile_density(v1, quantile, lo, hi, epsilon, sensitivity)
    pts = np.unique(np.concatenate([e0, e1]))
    mids = (pts[:-1] + pts[1:]) / 2
    p0 = d0[np.clip(np.searchsorted(e0, mids, side="right") - 1, 0, d0.size - 1)]
    p1 = d1[np.clip(np.searchsorted(e1, mids, side="right") - 1, 0, d1.size - 1)]
    return float(np.max(np.abs(np.log(p0) - np.log(p1))))


def _quantile_sampler(values, quantile, lo, hi, epsilon, sensitivity):
    values = np.asarray(values, dtype=float)

    def sample(rng, n):  # private_quantile releases one scalar per call (~0.1 ms)
        return np.fromiter(
            (private_quantile(rng, values, quantile, lo, hi, epsilon, sensitivity)
             for _ in range(n)),
            dtype=float, count=n,
        )

    return sample


def _quantile_audit(v0, v1, quantile, epsilon, sensitivity, n_trials, seed):
    events = interval_events(np.concatenate([[0.0, 1.0], v0, v1]))
    return audit(
        _quantile_sampler(v0, quantile, 0.0, 1.0, epsilon, sensitivity),
        _quantile_sampler(v1, quantile, 0.0, 1.0, epsilon, sensitivity),
        events, n_trials, seed=seed, confidence=CONFIDENCE,
    )


# Raw values, sensitivity 1. A low quantile (0.1 of 20 values): adding a record at lo raises
# every rank by one and the target by only 0.1, so the utility of outputs below the target rises
# by 0.9 and above it falls by 0.9. One value alone in [0, 0.4], the rest packed in [0.4, 0.6].
RAW_Q, RAW_EPS = 0.1, 1.0
RAW_V0 = np.concatenate([[0.4], 0.4 + np.linspace(0.0, 0.2, 20)[1:]])
RAW_V1 = np.append(RAW_V0, 0.0)
QUANTILE_TRIALS = 6_000  # pass audits
QUANTILE_TRIALS_FAIL = 8_000  # leaks: enough trials for a stable margin over the claim


def test_private_quantile_passes_audit():
    exact = _max_density_log_ratio(RAW_V0, RAW_V1, RAW_Q, 0.0, 1.0, RAW_EPS, 1.0)
    assert 0.75 * RAW_EPS < exact <= RAW_EPS + 1e-12  # cross-check: exact loss on this pair
    res = _quantile_audit(RAW_V0, RAW_V1, RAW_Q, RAW_EPS, 1.0, QUANTILE_TRIALS, seed=31)
    assert res.epsilon_lower <= RAW_EPS, str(res)
    assert res.epsilon_lower > 0.3 * RAW_EPS, str(res)


def test_private_quantile_with_half_the_sensitivity_is_caught():
    assert _max_density_log_ratio(RAW_V0, RAW_V1, RAW_Q, 0.0, 1.0, RAW_EPS, 0.5) > 1.5 * RAW_EPS
    res = _quantile_audit(RAW_V0, RAW_V1, RAW_Q, RAW_EPS, 0.5, QUANTILE_TRIALS_FAIL, seed=32)
    assert res.epsilon_lower > RAW_EPS, str(res)


# DPM's interval size: the 65th percentile of the pooled neighbour gaps (each over its public
# range), sensitivity (2 - 0.65) d. D0: 16 small gaps and 6 gaps spread over [0.6 G, G]; D1 adds a
# record in the middle of the largest gap G in every dimension, so the count of gaps below any
# v in (G/2, G] grows by 2 per dimension while the target rank grows by 0.65 per dimension: the
# utility moves by the full (2 - 0.65) d, up below the target rank and down above it.
GAP_EPS = 3.0
GAP_G = 0.1
GAP_GAPS = np.concatenate([np.full(16, 0.3 * GAP_G), np.linspace(0.6 * GAP_G, GAP_G, 6)])


def _gap_pair(d: int):
    cols0, new = [], []
    for j in range(d):
        g = np.roll(GAP_GAPS, -3 * j)  # another order of the same gaps in every dimension
        x = np.concatenate([[0.0], np.cumsum(g)]) + 0.05 * j
        i = int(np.argmax(g))
        cols0.append(x)
        new.append(x[i] + g[i] / 2)
    X0 = np.column_stack(cols0)
    X1 = np.vstack([X0, new])
    bounds = np.tile([0.0, 1.0], (d, 1))
    width = bounds[:, 1] - bounds[:, 0]
    v0 = (LocalEngine(X0, bounds).neighbour_gaps() / width).ravel()  # as DPM._interval_size
    v1 = (LocalEngine(X1, bounds).neighbour_gaps() / width).ravel()
    return v0, v1


@pytest.mark.parametrize("d", [1, 2])
def test_gap_percentile_passes_audit(d):
    v0, v1 = _gap_pair(d)
    sens = (2.0 - 0.65) * d
    exact = _max_density_log_ratio(v0, v1, 0.65, 0.0, 1.0, GAP_EPS, sens)
    assert 0.55 * GAP_EPS < exact <= GAP_EPS + 1e-12  # cross-check: exact loss on this pair
    res = _quantile_audit(v0, v1, 0.65, GAP_EPS, sens, QUANTILE_TRIALS, seed=40 + d)
    assert res.epsilon_lower <= GAP_EPS, str(res)
    assert res.epsilon_lower > 0.4 * GAP_EPS, str(res)


@pytest.mark.parametrize("d", [1, 2])
def test_gap_percentile_with_half_the_sensitivity_is_caught(d):
    v0, v1 = _gap_pair(d)
    half = (2.0 - 0.65) * d / 2
    assert _max_density_log_ratio(v0, v1, 0.65, 0.0, 1.0, GAP_EPS, half) > 1.3 * GAP_EPS
    res = _quantile_audit(v0, v1, 0.65, GAP_EPS, half, QUANTILE_TRIALS_FAIL, seed=50 + d)
    assert res.epsilon_lower > GAP_EPS, str(res)


# =========================================================================== sensitivity claims
# Deterministic checks of the sensitivities the audits above rely on, over many random
# neighbouring pairs (the added record: uniform, a copy of a record, a corner, or the middle of
# the largest gap of every dimension).
def _added_records(X, rng):
    d = X.shape[1]
    s = np.sort(X, axis=0)
    g = np.diff(s, axis=0)
    i = np.argmax(g, axis=0)
    return [
        rng.uniform(0, 1, d),
        X[rng.integers(len(X))].copy(),
        rng.integers(0, 2, d).astype(float),
        s[i, np.arange(d)] + g[i, np.arange(d)] / 2,
    ]


def test_split_score_sensitivity_holds_on_random_neighbours():
    """|f(D1) - f(D0)| <= (t/q + alpha) / n_hat for every candidate, n_hat fixed (Departures 2,
    10b); the bound DPM uses, divided by n_hat - lambda < n_hat, is larger still."""
    rng = np.random.default_rng(71)
    worst = 0.0
    for _ in range(60):
        n, d, B = int(rng.integers(5, 80)), int(rng.integers(1, 4)), int(rng.integers(2, 12))
        q = float(rng.uniform(0.02, 0.45))
        t = float(rng.uniform(2 * q, 1.0))
        alpha = float(rng.choice([0.1, 1.0, 5.0]))
        n_hat = float(n + rng.integers(-3, 4))
        X0 = rng.uniform(0, 1, (n, d)) ** rng.uniform(0.3, 3)
        lo, hi = np.zeros(d), np.ones(d)
        for rec in _added_records(X0, rng):
            X1 = np.vstack([X0, rec])
            f = []
            for X in (X0, X1):
                engine = LocalEngine(X, np.c_[lo, hi])
                hist = engine.axis_histogram(engine.root(), lo, (hi - lo) / B / 2.0, 2 * B)
                f.append(DPM._scores(hist, np.array([n_hat]), t, q, alpha))
            ratio = np.abs(f[1] - f[0]).max() / ((t / q + alpha) / n_hat)
            worst = max(worst, ratio)
    assert worst <= 1 + 1e-9
    assert worst > 0.3  # the random pairs do move the scores


def _rank_utilities(values, quantile, points):
    z = np.sort(values)
    k = np.searchsorted(z, points, side="left")  # values strictly below each point
    return -np.abs(k - quantile * z.size)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_gap_percentile_sensitivity_holds_on_random_neighbours(d):
    """The utility -|k(v) - 0.65 m| of the pooled gaps moves by at most (2 - 0.65) d."""
    rng = np.random.default_rng(72 + d)
    worst = 0.0
    for _ in range(60):
        n = int(rng.integers(2, 40))
        X0 = rng.uniform(0, 1, (n, d)) ** rng.uniform(0.3, 3)
        bounds = np.tile([0.0, 1.0], (d, 1))
        v0 = LocalEngine(X0, bounds).neighbour_gaps().ravel()
        for rec in _added_records(X0, rng):
            v1 = LocalEngine(np.vstack([X0, rec]), bounds).neighbour_gaps().ravel()
            pts = np.unique(np.concatenate([[0.0, 1.0], v0, v1]))
            probe = np.concatenate([pts, (pts[:-1] + pts[1:]) / 2])
            du = _rank_utilities(v1, 0.65, probe) - _rank_utilities(v0, 0.65, probe)
            worst = max(worst, np.abs(du).max() / ((2 - 0.65) * d))
    assert worst <= 1 + 1e-9
    assert worst > 0.9  # the bound is attained (a record in the middle of the largest gaps)


@pytest.mark.parametrize("quantile", [0.0, 0.1, 0.5, 0.65, 1.0])
def test_raw_quantile_sensitivity_is_one(quantile):
    rng = np.random.default_rng(75)
    for _ in range(100):
        v0 = rng.uniform(0, 1, int(rng.integers(0, 30)))
        v1 = np.append(v0, rng.choice([0.0, 1.0, rng.uniform(), *v0[:1]]))
        pts = np.unique(np.concatenate([[0.0, 1.0], v1]))
        probe = np.concatenate([pts, (pts[:-1] + pts[1:]) / 2])
        du = _rank_utilities(v1, quantile, probe) - _rank_utilities(v0, quantile, probe)
        assert np.abs(du).max() <= 1 + 1e-12


# =========================================================================== DP-AVG
# A leaf box [0, 1] x [0, 2]: DPM releases the sum of (x - box centre) with the analytic Gaussian
# mechanism at L2 sensitivity = the box's half-diagonal. D1 adds a record at a corner, which moves
# the sum by exactly the half-diagonal. The likelihood ratio is monotone in the projection of the
# output on that direction, so thresholds on the projection are the most powerful events.
AVG_EPS, AVG_DELTA = 1.0, 1e-5
AVG_TRIALS = 2_000_000
AVG_BATCH = 500_000


@pytest.fixture(scope="module")
def leaf_sums():
    box = np.array([[0.0, 1.0], [0.0, 2.0]])
    mid = box.mean(axis=1)
    half_diag = float(np.linalg.norm(box[:, 1] - box[:, 0]) / 2)
    X0 = np.random.default_rng(5).uniform(box[:, 0], box[:, 1], size=(30, 2))
    X1 = np.vstack([X0, box[:, 1]])  # corner (1, 2)
    sums = []
    for X in (X0, X1):
        engine = LocalEngine(X, box)
        sums.append(engine.centred_sums(engine.root(), mid[None, :])[0])
    shift = sums[1] - sums[0]
    assert np.isclose(np.linalg.norm(shift), half_diag)
    return sums[0], sums[1], half_diag, shift / np.linalg.norm(shift)


def _avg_sampler(s, s_ref, direction, sensitivity):
    def sample(rng, n):
        noisy = _mechanisms(rng).gaussian(
            np.broadcast_to(s, (n, s.size)), sensitivity, AVG_EPS, AVG_DELTA,
            target="audit leaf sum",
        )
        return (noisy - s_ref) @ direction  # post-processing: projection on the shift

    return sample


def _avg_events(half_diag):
    sigma = gaussian_sigma(AVG_EPS, AVG_DELTA, half_diag)
    return threshold_events(sigma * np.array([-3.0, -2.0, -1.0, 0.0, 1.0, 1.5, 2.0, 2.5, 3.0,
                                              3.5, 4.0, 4.5]))


def test_private_average_passes_audit(leaf_sums):
    s0, s1, half_diag, u = leaf_sums
    res = assert_private(
        AVG_EPS, AVG_DELTA, _avg_sampler(s0, s0, u, half_diag), _avg_sampler(s1, s0, u, half_diag),
        _avg_events(half_diag), AVG_TRIALS, seed=61, confidence=CONFIDENCE, batch=AVG_BATCH,
    )
    assert res.epsilon_lower > 0.6 * AVG_EPS, str(res)


def test_private_average_with_half_the_noise_is_caught(leaf_sums):
    s0, s1, half_diag, u = leaf_sums
    res = audit(
        _avg_sampler(s0, s0, u, half_diag / 2), _avg_sampler(s1, s0, u, half_diag / 2),
        _avg_events(half_diag), AVG_TRIALS, delta=AVG_DELTA, seed=62, confidence=CONFIDENCE,
        batch=AVG_BATCH,
    )
    assert res.epsilon_lower > AVG_EPS, str(res)
