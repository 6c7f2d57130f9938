"""DPLloyd: the ledger against the noise actually drawn, audits of its releases, utility, input.

The instrumented ledger test is the one that would have caught diffprivlib's DP-Lloyd bug (its
budget-split helper returns (per-coordinate, count) and the caller unpacks (count,
per-coordinate): 1.52 epsilon spent at d = 20 while epsilon is recorded). It reads the noise
scale of every draw, checks *what* was released against its own computation from the data (so
the sensitivity is known independently of the code), and adds up the epsilon those scales imply.
``test_the_spend_check_catches_the_diffprivlib_swap`` plants exactly that bug and shows the
check fails.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.base import clone

import privclust.cluster._centres as centres
import privclust.privacy.mechanisms as mechanisms
from _audit import assert_private, audit, categorical_events, combine, threshold_events
from _bad_input import BAD_BOUNDS_AND_DATA, BAD_EPSILON_AND_K, assert_clear_error
from privclust.cluster.lloyd import (
    DPLloyd,
    noisy_centroids,
    sphere_packing_init,
    su_budget_split,
    su_iterations,
)
from privclust.engine import LocalEngine
from privclust.metrics import ari
from privclust.privacy import (
    NOISY_N_SHARE,
    Accountant,
    Budget,
    BudgetExceededError,
    Mechanisms,
    PlanExceededError,
    PrivacyReport,
    RandomSource,
)

RHO = 0.225
CONFIDENCE = 0.999


# =========================================================================== instrumentation
class DrawRecorder:
    """Records every noise draw (kind, parameter) and the values each release was made of."""

    def __init__(self, monkeypatch):
        self.draws: list[tuple[str, np.ndarray]] = []
        self.values: list[tuple[str, np.ndarray]] = []
        m = mechanisms
        geo, lap, gau, gum = (m._draw_two_sided_geometric, m._draw_laplace, m._draw_gaussian,
                              m._draw_gumbel)
        tsg, lpn = m.two_sided_geometric, m.laplace_noise

        def rec(kind, fn):
            def wrapped(rng, param, size):
                self.draws.append((kind, np.array(param, dtype=float)))
                return fn(rng, param, size)
            return wrapped

        def geometric_values(rng, values, epsilon, sensitivity=1):
            self.values.append(("count", np.array(values)))
            return tsg(rng, values, epsilon, sensitivity)

        def laplace_values(rng, values, epsilon, sensitivity=1.0):
            self.values.append(("laplace", np.array(values, dtype=float)))
            return lpn(rng, values, epsilon, sensitivity)

        monkeypatch.setattr(m, "_draw_two_sided_geometric", rec("geometric", geo))
        monkeypatch.setattr(m, "_draw_laplace", rec("laplace", lap))
        monkeypatch.setattr(m, "_draw_gaussian", rec("gaussian", gau))
        monkeypatch.setattr(m, "_draw_gumbel", rec("gumbel", gum))
        monkeypatch.setattr(m, "two_sided_geometric", geometric_values)
        monkeypatch.setattr(m, "laplace_noise", laplace_values)


def unit_sums(X, bounds, centres):
    """Exact counts and sums of (x - mid) / half per nearest centre, computed here (not by the
    library): every clipped record adds a vector in [-1, 1]^d, so the L1 sensitivity is d."""
    Xc = np.clip(X, bounds[:, 0], bounds[:, 1])
    mid, half = bounds.mean(axis=1), (bounds[:, 1] - bounds[:, 0]) / 2
    lab = np.argmin(((Xc[:, None, :] - centres[None]) ** 2).sum(axis=2), axis=1)
    k = centres.shape[0]
    counts = np.bincount(lab, minlength=k)
    u = (Xc - mid) / half
    assert np.abs(u).sum(axis=1).max() <= X.shape[1] + 1e-9
    sums = np.stack([u[lab == i].sum(axis=0) for i in range(k)])
    return counts, sums


def true_spend(report, rec: DrawRecorder, d: int) -> list[float]:
    """The epsilon each release really spent, from its noise scale and the independently known
    sensitivity of what it released (counts: 1; the unit sums: d). Checks draw <-> ledger."""
    assert len(rec.draws) == len(report.releases), "one draw per ledger release"
    spent = []
    for (kind, param), r in zip(rec.draws, report.releases, strict=True):
        if kind == "geometric":
            assert r.mechanism == "two-sided geometric"
            spent.append(float(param))  # the draw's epsilon per unit of sensitivity 1
        elif kind == "laplace":
            assert r.mechanism == "laplace"
            spent.append(d / float(np.max(param)))
        else:  # DPLloyd draws nothing else
            raise AssertionError(f"unexpected draw {kind}")
    return spent


def check_spend(model, rec, epsilon, d, X, bounds):
    report = model.privacy_report_
    spent = true_spend(report, rec, d)
    # every release spent what the ledger says ...
    np.testing.assert_allclose(spent, [r.epsilon for r in report.releases], rtol=1e-9)
    # ... and the fit spent exactly its epsilon
    assert math.isclose(sum(spent), epsilon, rel_tol=1e-9), (sum(spent), epsilon)
    assert math.isclose(report.total().epsilon, epsilon, rel_tol=1e-9)
    # what was released: exact counts and unit sums at the centres of each iteration
    counts_rel = [v for kind, v in rec.values if kind == "count"]
    sums_rel = [v for kind, v in rec.values if kind == "laplace"]
    T = model.n_iter_
    counts_rel = counts_rel[-T:]  # the first one is the record count (n_iter=None)
    for t in range(T):
        c, s = unit_sums(X, bounds, model.centers_history_[t])
        np.testing.assert_array_equal(counts_rel[t], c)
        np.testing.assert_allclose(sums_rel[t], s, atol=1e-8)
    return spent


@pytest.mark.parametrize("d", [1, 2, 20])
def test_ledger_equals_the_noise_actually_drawn(d, monkeypatch):
    rng = np.random.default_rng(d)
    bounds = np.column_stack([-1.0 - np.arange(d), 2.0 + 0.5 * np.arange(d)])  # unequal widths
    X = rng.uniform(bounds[:, 0] - 0.3, bounds[:, 1] + 0.3, size=(4000, d))
    eps = 0.8
    rec = DrawRecorder(monkeypatch)
    model = DPLloyd(n_clusters=4, epsilon=eps, bounds=bounds, random_state=1).fit(X)
    spent = check_spend(model, rec, eps, d, X, bounds)
    # the split follows Su et al.: count : sum = cbrt(4 d rho^2) : d in every iteration
    c = np.cbrt(4 * d * RHO**2)
    eps_t = (eps - NOISY_N_SHARE * eps) / model.n_iter_
    assert spent[0] == pytest.approx(NOISY_N_SHARE * eps)  # noisy n for the iteration rule
    np.testing.assert_allclose(spent[1::2], eps_t * c / (d + c), rtol=1e-9)
    np.testing.assert_allclose(spent[2::2], eps_t * d / (d + c), rtol=1e-9)
    assert len(spent) == 1 + 2 * model.n_iter_


def test_the_plan_refuses_the_diffprivlib_swap_before_any_draw(monkeypatch):
    """Plant diffprivlib's bug: counts get one coordinate's share, every coordinate the
    count's (1.52 epsilon in truth). The plan's line items no longer add up to epsilon, so the
    fit is refused before a single noise draw."""
    d, eps = 20, 1.0

    def swapped(epsilon, dims, rho=RHO):
        c = float(np.cbrt(4 * dims * rho**2))
        per_coordinate, count = epsilon / (dims + c), epsilon * c / (dims + c)
        return per_coordinate, dims * count  # (count, sum) unpacked in the wrong order

    monkeypatch.setattr(centres, "su_budget_split", swapped)
    rng = np.random.default_rng(0)
    bounds = np.tile([0.0, 1.0], (d, 1))
    X = rng.uniform(0, 1, size=(2000, d))
    rec = DrawRecorder(monkeypatch)
    with pytest.raises(PlanExceededError, match=r"1\.52"):
        DPLloyd(n_clusters=3, epsilon=eps, bounds=bounds, n_iter=2, random_state=0).fit(X)
    assert rec.draws == []


def test_the_spend_check_catches_a_swap_inside_the_plan(monkeypatch):
    """The instrumented check still catches a mis-split that keeps the plan's totals: the
    release swaps its two line items' epsilons (the sums' scale then implies far more)."""
    d, eps = 20, 1.0
    real = centres.su_budget_split
    calls = []

    def swapped_per_release(epsilon, dims, rho=RHO):
        calls.append(epsilon)
        count, total_sum = real(epsilon, dims, rho)
        return (count, total_sum) if len(calls) == 1 else (total_sum, count)

    monkeypatch.setattr(centres, "su_budget_split", swapped_per_release)
    rng = np.random.default_rng(0)
    bounds = np.tile([0.0, 1.0], (d, 1))
    X = rng.uniform(0, 1, size=(2000, d))
    rec = DrawRecorder(monkeypatch)
    # the release asks its count item for the sums' share: the plan refuses it
    with pytest.raises(PlanExceededError, match="exceeds the planned"):
        DPLloyd(n_clusters=3, epsilon=eps, bounds=bounds, n_iter=2, random_state=0).fit(X)
    assert len(rec.draws) == 1  # drawn, refused before the value was returned or recorded


def test_su_budget_split_and_iteration_rule():
    for d in (1, 2, 20):
        c = np.cbrt(4 * d * RHO**2)
        e_count, e_sum = su_budget_split(1.0, d)
        assert e_count + e_sum == pytest.approx(1.0)
        assert e_count / e_sum == pytest.approx(c / d)
    assert su_budget_split(1.0, 20)[0] < su_budget_split(1.0, 20)[1]  # order: (count, sum)
    assert su_iterations(1.0, 150, 3, 4) == 2  # small data: the floor
    assert su_iterations(100.0, 10**6, 3, 2) == 7  # plenty of budget: the cap
    assert su_iterations(100.0, 10**6, 3, 2, max_iter=4) == 4
    assert su_iterations(1.0, -5, 3, 4) == 2  # a negative noisy n is handled


def test_sphere_packing_init_is_inside_and_spread():
    gen = np.random.default_rng(0)
    bounds = np.array([[0.0, 10.0], [-5.0, 5.0]])
    c = sphere_packing_init(gen, bounds, 6)
    assert c.shape == (6, 2)
    assert (c >= bounds[:, 0]).all() and (c <= bounds[:, 1]).all()
    dist = np.sqrt(((c[:, None] - c[None]) ** 2).sum(axis=2))[np.triu_indices(6, 1)]
    assert dist.min() > 0.5
    assert sphere_packing_init(gen, np.array([[0.0, 1.0]]), 40).shape == (40, 1)


# =========================================================================== audits
# D0: 30 records in [0, 1]^2 near two centres; D1 adds one record at the corner (1, 1), which
# joins cluster 1 and moves its unit sum by (1, 1) (L1 = d = 2, the full sensitivity) and its
# count by 1. The release is audited as DPLloyd makes it: through noisy_centroids, one trial per
# row (rows are independent releases here).
AUDIT_BOUNDS = np.array([[0.0, 1.0], [0.0, 1.0]])
AUDIT_CENTRES = np.array([[0.25, 0.25], [0.75, 0.75]])
TRIALS = 200_000


@pytest.fixture(scope="module")
def cluster_pair():
    rng = np.random.default_rng(9)
    X0 = np.clip(np.concatenate([rng.normal(0.25, 0.05, (15, 2)),
                                 rng.normal(0.75, 0.05, (15, 2))]), 0, 1)
    X1 = np.vstack([X0, [1.0, 1.0]])
    out = []
    for X in (X0, X1):
        counts, sums, _ = LocalEngine(X, AUDIT_BOUNDS).nearest_centre_moments(
            AUDIT_CENTRES, about=AUDIT_BOUNDS.mean(axis=1))  # sums of x - mid, as fits ask
        out.append((counts[1], sums[1]))
    assert out[1][0] == out[0][0] + 1
    return out


def _release_sampler(count, total, epsilon, which, ref_unit_sum):
    """Run the release ``n`` times on one cluster's exact (count, sum); output the noisy count,
    or min_j of (noisy unit sum - D0's exact unit sum)."""
    def sample(rng, n):
        mech = Mechanisms(RandomSource(rng, "audit", False), PrivacyReport("a", Budget(1e9)))
        _, n_hat, s_hat = noisy_centroids(
            mech, np.full(n, count), np.broadcast_to(total, (n, 2)),
            np.zeros((n, 2)), AUDIT_BOUNDS, epsilon, label="audit")
        if which == "count":
            return n_hat
        return np.min(s_hat - ref_unit_sum, axis=1)
    return sample


def _samplers(cluster_pair, which, epsilon):
    (c0, s0), (c1, s1) = cluster_pair
    ref = s0 / 0.5  # D0's exact unit sum (sums about mid 0.5, half-width 0.5)
    events = (
        combine(categorical_events(range(c0 - 5, c0 + 7)),
                threshold_events(np.arange(c0 - 3, c0 + 4)))
        if which == "count"
        # min_j noise_j > t: for t >= 1 the likelihood ratio of D1 (its unit sum is shifted by
        # (1, 1)) to D0 is exactly e^eps_sum
        else threshold_events([0.0, 1.0, 2.0, 3.0, 4.0, 6.0])
    )
    return (_release_sampler(c0, s0, epsilon, which, ref),
            _release_sampler(c1, s1, epsilon, which, ref), events)


def _eps_for(which, target):
    """Total epsilon of noisy_centroids that gives ``target`` to the count or to the sums."""
    e_count, e_sum = su_budget_split(1.0, 2)
    return target / (e_count if which == "count" else e_sum)


@pytest.mark.parametrize("which", ["count", "sum"])
def test_dp_lloyd_release_passes_audit(cluster_pair, which):
    s0, s1, events = _samplers(cluster_pair, which, _eps_for(which, 1.0))
    res = assert_private(1.0, 0.0, s0, s1, events, TRIALS, seed=101, confidence=CONFIDENCE)
    assert res.epsilon_lower > 0.75, str(res)


@pytest.mark.parametrize("which", ["count", "sum"])
def test_dp_lloyd_release_with_half_the_noise_is_caught(cluster_pair, which):
    # twice the budget = half the noise scale, against the claim 1.0
    s0, s1, events = _samplers(cluster_pair, which, 2.0 * _eps_for(which, 1.0))
    res = audit(s0, s1, events, TRIALS, seed=102, confidence=CONFIDENCE)
    assert res.epsilon_lower > 1.0, str(res)


# =========================================================================== behaviour
def test_report_plan_and_reproducibility(blobs_2d):
    X, _ = blobs_2d
    a = DPLloyd(4, epsilon=0.5, bounds=(0, 100), random_state=3).fit(X)
    b = DPLloyd(4, epsilon=0.5, bounds=(0, 100), random_state=3).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    rep = a.privacy_report_
    assert rep.private and rep.total().epsilon == pytest.approx(0.5)
    assert rep.releases[0].target.startswith("record count")
    assert a.centers_history_.shape == (a.n_iter_ + 1, 4, 2)
    assert a.cost_history_.shape == (a.n_iter_ + 1,)
    np.testing.assert_array_equal(a.centers_history_[-1], a.cluster_centers_)
    np.testing.assert_array_equal(a.predict(X), a.labels_)
    fixed = DPLloyd(4, epsilon=0.5, bounds=(0, 100), n_iter=3, random_state=3).fit(X)
    assert fixed.n_iter_ == 3 and len(fixed.privacy_report_.releases) == 6
    assert clone(a).get_params() == a.get_params()


def test_utility_on_well_separated_blobs(blobs_2d):
    X, y = blobs_2d
    scores = [ari(y, DPLloyd(4, epsilon=1.0, bounds=(0, 100), random_state=s).fit(X).labels_)
              for s in range(5)]
    assert sum(s >= 0.95 for s in scores) >= 4, scores


def test_shared_accountant_is_checked_before_reading_data():
    acc = Accountant(Budget(1.0))
    X = np.random.default_rng(0).uniform(0, 1, (50, 2))
    DPLloyd(2, epsilon=0.6, bounds=(0, 1), accountant=acc, random_state=0).fit(X)
    with pytest.raises(BudgetExceededError):
        DPLloyd(2, epsilon=0.6, bounds=(0, 1), accountant=acc).fit("not even data")


def test_edge_cases_fit_without_crashing():
    rng = np.random.default_rng(0)
    with pytest.warns(UserWarning, match="more than the 1 records"):  # k > n: private, said
        one = DPLloyd(3, bounds=(0, 1), random_state=0).fit([[0.5, 0.5]])
    assert one.cluster_centers_.shape == (3, 2)
    d1 = DPLloyd(2, bounds=(0, 10), random_state=0).fit(rng.uniform(0, 10, (100, 1)))
    assert d1.labels_.shape == (100,)
    const = np.column_stack([rng.uniform(0, 1, 200), np.full(200, 0.3)])
    assert np.isfinite(DPLloyd(2, bounds=(0, 1), random_state=0).fit(const).cluster_centers_).all()
    with pytest.warns(UserWarning, match="clipped"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            out = DPLloyd(2, bounds=(0, 1), random_state=0).fit(rng.uniform(-3, 3, (100, 2)))
    assert (out.cluster_centers_ >= 0).all() and (out.cluster_centers_ <= 1).all()
    f32 = DPLloyd(2, bounds=(0, 1), random_state=0).fit(rng.uniform(0, 1, (100, 2)).astype("f4"))
    assert f32.cluster_centers_.dtype == np.float64
    init = DPLloyd(2, bounds=(0, 1), init=[[0.2, 0.2], [0.8, 0.8]], n_iter=1, random_state=0)
    assert init.fit(rng.uniform(0, 1, (100, 2))).centers_history_[0].tolist() == [[0.2, 0.2],
                                                                                   [0.8, 0.8]]


@pytest.mark.parametrize(
    "kwargs, X, match",
    [
        *BAD_EPSILON_AND_K,
        ({"n_clusters": True}, None, "n_clusters"),
        ({"max_iter": 0}, None, "max_iter"),
        ({"n_iter": 0}, None, "n_iter"),
        ({"init": "k-means++"}, None, "init"),
        ({"init": [[0.0, 0.0]]}, None, "init"),
        *BAD_BOUNDS_AND_DATA,
        ({}, [["a", "b"]], "numeric"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, X, match):
    assert_clear_error(DPLloyd, kwargs, X, match)


def test_predict_before_fit_and_wrong_width():
    with pytest.raises(RuntimeError, match="not fitted"):
        DPLloyd(2, bounds=(0, 1)).predict([[0.1, 0.2]])
    m = DPLloyd(2, bounds=(0, 1), random_state=0).fit(np.random.default_rng(0).uniform(0, 1,
                                                                                      (30, 2)))
    with pytest.raises(ValueError, match="features"):
        m.predict([[0.1, 0.2, 0.3]])


def test_sphere_packing_with_unequal_widths_that_round_badly():
    from privclust.cluster.lloyd import sphere_packing_init

    bounds = np.array([[0.1, 0.7], [-3.0, 1100.9], [0.3, 0.9]])
    centres = sphere_packing_init(np.random.default_rng(0), bounds, 5)
    assert centres.shape == (5, 3)
    assert (centres >= bounds[:, 0]).all() and (centres <= bounds[:, 1]).all()
