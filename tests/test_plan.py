"""One privacy plan per fit: line items, the delta rule, exact calibration, spent == planned.

Every estimator and composite is run under several budgets and checked three ways:

* the ledger's total equals the plan (to 1e-9), nothing is left unspent;
* under a shared accountant holding exactly that budget the fit runs, and one more fit is
  refused before any data is read;
* an instrumented run records every noise draw and checks its scale against the release it
  belongs to and that release's line item in the plan.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.datasets import make_blobs

import privclust.privacy.mechanisms as mech_mod
from privclust import (
    DPDBSCAN,
    DPM,
    EMMC,
    Accountant,
    Budget,
    BudgetExceededError,
    DPCube,
    DPGaussianMixture,
    DPLloyd,
    HSTKMeans,
    KMeansGuarantee,
    LSHSplits,
    MorseMerging,
    SubClustering,
)
from privclust.privacy import (
    DELTA_CAP,
    NOISY_N_SHARE,
    Mechanisms,
    PlanExceededError,
    PrivacyPlan,
    PrivacyReport,
    RandomSource,
    gaussian_sigma,
    rule_delta,
    zcdp_rho_for,
    zcdp_to_approx_dp,
)

B = (-15.0, 15.0)
pytestmark = pytest.mark.filterwarnings("ignore:n_clusters=2 but the base mixture has only 1")


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(3000, 2, centers=4, cluster_std=1.0, center_box=(-8, 8), random_state=3)
    return X, y


# --------------------------------------------------------------------------- the estimators
def _mixture(eps, delta, acc=None, seed=0):
    return DPGaussianMixture(n_components=4, epsilon=eps, delta=delta, bounds=B, n_iter=4,
                             random_state=seed, accountant=acc)


#: name -> (factory(eps, delta, accountant, seed), uses delta)
ESTIMATORS = {
    "DPM": (lambda e, d, a, s: DPM(epsilon=e, delta=d, bounds=B, random_state=s,
                                   accountant=a), True),
    "DPM count_shift": (lambda e, d, a, s: DPM(epsilon=e, delta=d, bounds=B, count_shift=True,
                                               random_state=s, accountant=a), True),
    "DPM adaptive": (lambda e, d, a, s: DPM(epsilon=e, delta=d, bounds=B, max_depth=4,
                                            adaptive_intervals=True, random_state=s,
                                            accountant=a), True),
    "DPDBSCAN dense": (lambda e, d, a, s: DPDBSCAN(epsilon=e, eps=1.0, min_samples=20,
                                                   bounds=B, random_state=s, accountant=a),
                       False),
    "DPDBSCAN sparse": (lambda e, d, a, s: DPDBSCAN(epsilon=e, eps=0.05, min_samples=20,
                                                    bounds=B, histogram="sparse",
                                                    random_state=s, accountant=a), False),
    "DPLloyd": (lambda e, d, a, s: DPLloyd(n_clusters=4, epsilon=e, bounds=B, random_state=s,
                                           accountant=a), False),
    "DPLloyd n_iter": (lambda e, d, a, s: DPLloyd(n_clusters=4, epsilon=e, bounds=B, n_iter=3,
                                                  random_state=s, accountant=a), False),
    "KMeansGuarantee": (lambda e, d, a, s: KMeansGuarantee(n_clusters=4, epsilon=e, bounds=B,
                                                           max_iter=3, random_state=s,
                                                           accountant=a), False),
    "SubClustering": (lambda e, d, a, s: SubClustering(n_clusters=4, epsilon=e, bounds=B,
                                                       max_iter=3, random_state=s,
                                                       accountant=a), False),
    "DPGaussianMixture": (lambda e, d, a, s: _mixture(e, d, a, s), True),
    "Morse(mixture)": (lambda e, d, a, s: MorseMerging(_mixture(e, None), 2, epsilon=e,
                                                       delta=d, random_state=s, accountant=a),
                       True),
    "Morse(DPM)": (lambda e, d, a, s: MorseMerging(DPM(epsilon=e, bounds=B), 2, epsilon=e,
                                                   delta=d, random_state=s, accountant=a),
                   True),
    "Morse(DPLloyd)": (lambda e, d, a, s: MorseMerging(DPLloyd(n_clusters=6, epsilon=e,
                                                               bounds=B), 2, epsilon=e, delta=d,
                                                       random_state=s, accountant=a), True),
    "Morse(KMeansGuarantee)": (lambda e, d, a, s: MorseMerging(
        KMeansGuarantee(n_clusters=6, epsilon=e, bounds=B, max_iter=3), 2, epsilon=e, delta=d,
        random_state=s, accountant=a), True),
    "HSTKMeans": (lambda e, d, a, s: HSTKMeans(4, epsilon=e, bounds=B, random_state=s,
                                               accountant=a), False),
    "LSHSplits": (lambda e, d, a, s: LSHSplits(4, epsilon=e, delta=d, bounds=B, max_depth=8,
                                               random_state=s, accountant=a), True),
    "EMMC": (lambda e, d, a, s: EMMC(4, epsilon=e, bounds=B, random_state=s, accountant=a),
             False),
    "DPCube": (lambda e, d, a, s: DPCube(4, epsilon=e, bounds=B, random_state=s, accountant=a),
               False),
    "Morse(LSHSplits)": (lambda e, d, a, s: MorseMerging(
        LSHSplits(6, epsilon=e, bounds=B, max_depth=8), 2, epsilon=e, delta=d, random_state=s,
        accountant=a), True),
    "Morse(DPCube)": (lambda e, d, a, s: MorseMerging(
        DPCube(6, epsilon=e, bounds=B), 2, epsilon=e, delta=d, random_state=s, accountant=a),
        True),
    "DPM private bounds": (lambda e, d, a, s: DPM(epsilon=e, delta=d, bounds="private",
                                                  random_state=s, accountant=a), True),
    "DPLloyd private bounds": (lambda e, d, a, s: DPLloyd(4, epsilon=e, bounds="private",
                                                          random_state=s, accountant=a), False),
}
DELTAS = [1e-6, None]


def _cases():
    for name, (_, uses_delta) in ESTIMATORS.items():
        for delta in DELTAS if uses_delta else [0.0]:
            yield pytest.param(name, delta, id=f"{name}-delta={delta}")


class _Untouchable:
    """Data that fails the test if anything reads it."""

    shape = (3000, 2)

    def __array__(self, *args, **kwargs):
        raise AssertionError("the data was read before the budget was checked")

    def to_numpy(self):
        return self.__array__()


@pytest.mark.parametrize(("name", "delta"), list(_cases()))
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
def test_spent_equals_planned(blobs, name, delta, epsilon):
    X, _ = blobs
    factory, uses_delta = ESTIMATORS[name]
    model = factory(epsilon, delta if uses_delta else None, None, 1).fit(X)
    rep = model.privacy_report_
    total = rep.total()
    assert rep.planned.epsilon == epsilon
    assert total.epsilon == pytest.approx(epsilon, rel=1e-9, abs=0)
    assert total.delta == pytest.approx(rep.planned.delta, rel=1e-9, abs=0)
    if uses_delta and delta is not None:
        assert rep.planned.delta == delta
    elif uses_delta:
        assert 0 < rep.planned.delta <= DELTA_CAP
        assert rep.delta_reserved == DELTA_CAP and "what the delta rule chose" in str(rep)
        # the headline is the cap, which holds on every pair of neighbours, not delta_hat
        assert rep.guarantee().delta == DELTA_CAP
        assert f"{DELTA_CAP:.3g})-differential privacy" in str(rep)
    else:
        assert rep.planned.delta == 0.0
    assert rep.unspent == []
    assert sum(i["epsilon"] for i in rep.plan) == pytest.approx(epsilon, rel=1e-9)
    assert "all of the plan" in str(rep)


@pytest.mark.parametrize(("name", "delta"), list(_cases()))
def test_a_shared_accountant_with_exactly_the_budget(blobs, name, delta):
    X, _ = blobs
    factory, uses_delta = ESTIMATORS[name]
    eps = 1.0
    reserve = (delta if delta is not None else DELTA_CAP) if uses_delta else 0.0
    acc = Accountant(Budget(eps, reserve))
    factory(eps, delta if uses_delta else None, acc, 2).fit(X)
    assert acc.remaining[0] == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(BudgetExceededError, match="No data was read"):
        factory(eps, delta if uses_delta else None, acc, 3).fit(_Untouchable())


# --------------------------------------------------------------------------- instrumentation
class _Draws:
    """Every noise draw, grouped by the ledger release it was made for."""

    def __init__(self, monkeypatch):
        self.pending: list[tuple[str, np.ndarray]] = []
        self.by_release: list[tuple[object, list]] = []
        m = mech_mod

        def wrap(kind, fn):
            def inner(rng, param, size):
                self.pending.append((kind, np.array(param, dtype=float).ravel()))
                return fn(rng, param, size)
            return inner

        real_quantile = m.private_quantile

        def quantile(rng, values, q, lo, hi, eps, sens, *args):
            self.pending.append(("quantile", np.array([eps, sens], dtype=float)))
            return real_quantile(rng, values, q, lo, hi, eps, sens, *args)

        real_record = Mechanisms.record
        draws = self

        def record(self_, release, item=None):
            out = real_record(self_, release, item)
            draws.by_release.append((release, draws.pending))
            draws.pending = []
            return out

        for name, kind in [("_draw_two_sided_geometric", "geometric"),
                           ("_draw_laplace", "laplace"), ("_draw_gaussian", "gaussian"),
                           ("_draw_gumbel", "gumbel")]:
            monkeypatch.setattr(m, name, wrap(kind, getattr(m, name)))
        monkeypatch.setattr(m, "private_quantile", quantile)
        monkeypatch.setattr(Mechanisms, "record", record)


def _check_draws(release, draws):
    """Each draw's scale is the one the release states (and its epsilon or rho implies)."""
    mech = release.mechanism
    eps = release.epsilon
    kinds = {k for k, _ in draws}
    shared = "of the same records" in release.note  # sequential: epsilon / rows per row
    per_row = eps / release.n_released if shared else eps
    if mech == "failure probability":
        assert draws == [] and release.delta > 0
    elif mech == "sparse vector (AboveThreshold)":
        (k1, t), (k2, q) = draws
        assert k1 == k2 == "laplace"
        assert t[0] == pytest.approx(2 / eps, rel=1e-12)
        np.testing.assert_allclose(q, 4 / eps, rtol=1e-12)
    elif mech == "two-sided geometric" or mech.startswith("geometric"):
        assert kinds <= {"geometric", "laplace"} and "geometric" in kinds
        for kind, p in draws:
            if kind == "geometric":  # epsilon per unit of sensitivity 1
                np.testing.assert_allclose(p, per_row, rtol=1e-12)
            else:  # the sparse histogram's tail: Exp(eps) drawn as |Laplace(1/eps)|
                np.testing.assert_allclose(p, 1 / eps, rtol=1e-12)
    elif mech == "laplace" or mech.startswith("laplace"):
        assert kinds == {"laplace"}
        for _, p in draws:
            np.testing.assert_allclose(p, release.sensitivity / eps, rtol=1e-12)
    elif mech == "exponential":
        (kind, p), = draws
        assert kind == "gumbel"
        # factor 1 only where the release says its scores are monotone (a sum of one
        # non-negative term per record: tests/test_audit.py checks that case)
        factor = 1 if "monotone scores" in release.note else 2
        assert p.max() == pytest.approx(factor * release.sensitivity / per_row, rel=1e-12)
    elif mech == "exponential (quantile)":
        assert [k for k, _ in draws] == ["quantile"] * release.n_released
        for _, (q_eps, q_sens) in draws:
            assert q_eps == pytest.approx(eps, rel=1e-12)
            assert q_sens == pytest.approx(release.sensitivity, rel=1e-12)
    elif mech == "exponential (grid quantile)":  # one Gumbel draw per public candidate
        (kind, p), = draws
        assert kind == "gumbel"
        assert p.max() == pytest.approx(2 * release.sensitivity / eps, rel=1e-12)
    elif mech == "gaussian (analytic)":
        (kind, p), = draws
        unit = gaussian_sigma(eps, release.delta, 1.0)
        assert p.max() == pytest.approx(unit * release.sensitivity, rel=1e-9)
    elif mech == "gaussian (zCDP)":
        (kind, p), = draws
        np.testing.assert_allclose(p, release.sensitivity / math.sqrt(2 * release.rho),
                                   rtol=1e-12)
    else:  # pragma: no cover
        pytest.fail(f"unexpected mechanism {mech}")


@pytest.mark.filterwarnings("ignore:n_clusters=2 but the base mixture has only 1")
@pytest.mark.parametrize(("name", "delta"), list(_cases()))
def test_every_draw_matches_its_release_and_its_plan_line(blobs, monkeypatch, name, delta):
    X, _ = blobs
    factory, uses_delta = ESTIMATORS[name]
    draws = _Draws(monkeypatch)
    model = factory(1.0, delta if uses_delta else None, None, 4).fit(X)
    rep = model.privacy_report_
    assert draws.pending == []
    # Morse's report repeats the base's releases: the recorded ones are the same objects
    recorded = [r for r, _ in draws.by_release]
    assert all(any(r is x for x in recorded) for r in rep.releases)
    plan = {i["item"]: i for i in rep.plan}
    spent: dict[str, list[float]] = {}
    for release, group in draws.by_release:
        _check_draws(release, group)
        item = release.item if release.item in plan else (
            f"base: {release.item}" if f"base: {release.item}" in plan else None)
        assert item is not None, f"{release.target!r} names no line item of the plan"
        acc = spent.setdefault(item, [0.0, 0.0, 0.0])
        acc[0] += release.epsilon
        acc[1] += release.delta
        acc[2] += release.rho
    for item, (eps, dlt, rho) in spent.items():
        line = plan[item]
        if line["kind"] == "zcdp":
            assert rho == pytest.approx(line["rho"], rel=1e-9)
            assert zcdp_to_approx_dp(rho, line["delta"]) == pytest.approx(line["epsilon"],
                                                                           rel=1e-9)
        else:
            assert eps == pytest.approx(line["epsilon"], rel=1e-9, abs=1e-15)
            assert dlt == pytest.approx(line["delta"] or 0.0, rel=1e-9, abs=1e-300)
    # every line item with budget was drawn from
    assert {n for n, i in plan.items() if i["epsilon"] > 0 or i["delta"]} <= set(spent)


# --------------------------------------------------------------------------- the delta rule
def test_rule_delta_is_capped():
    assert rule_delta(10**6) == pytest.approx(1e-9)
    assert rule_delta(400) == DELTA_CAP  # 1.25e-4 uncapped
    assert rule_delta(2) == DELTA_CAP and rule_delta(0) == DELTA_CAP
    assert rule_delta(-7) == DELTA_CAP and rule_delta(float("nan")) == DELTA_CAP
    n = 2155  # the size from which 1 / n^1.5 is below the cap
    assert rule_delta(n) < DELTA_CAP <= rule_delta(n - 1)


@pytest.mark.filterwarnings("ignore:n_clusters=2 but the base mixture has only 1")
@pytest.mark.parametrize("n", [50, 120, 400, 500])
def test_delta_none_on_small_data_never_exceeds_the_cap(n):
    """Once 138 in 2,000 DPM fits on 400 records gave delta > 0.3 (a noisy root count <= 2)."""
    rng = np.random.default_rng(n)
    worst = 0.0
    for seed in range(150):
        X = rng.uniform(-1, 1, size=(n, 2))
        m = DPM(epsilon=1.0, bounds=(-1, 1), random_state=seed).fit(X)
        worst = max(worst, m.privacy_report_.total().delta)
        assert m.delta_ <= DELTA_CAP
    assert worst <= DELTA_CAP * (1 + 1e-12)
    for seed in range(10):
        X = rng.uniform(-1, 1, size=(n, 2))
        for model in (DPGaussianMixture(n_components=2, epsilon=1.0, bounds=(-1, 1), n_iter=2,
                                        random_state=seed),
                      MorseMerging(DPLloyd(n_clusters=3, epsilon=1.0, bounds=(-1, 1)), 2,
                                   random_state=seed)):
            assert model.fit(X).privacy_report_.total().delta <= DELTA_CAP * (1 + 1e-12)


def test_delta_none_reserves_the_cap_before_reading_data():
    acc = Accountant(Budget(1.0, 5e-6))  # less delta than the rule may pick
    with pytest.raises(BudgetExceededError, match="No data was read"):
        DPM(epsilon=1.0, bounds=(-1, 1), accountant=acc).fit(_Untouchable())
    acc = Accountant(Budget(1.0, DELTA_CAP))
    rng = np.random.default_rng(0)
    m = DPM(epsilon=0.5, bounds=(-1, 1), accountant=acc, random_state=0).fit(
        rng.uniform(-1, 1, (50_000, 2)))
    # the rule chose below the cap, but the guarantee (a privacy filter) is the cap, so the
    # accountant keeps the cap booked: nothing of it is free again
    assert m.delta_ < DELTA_CAP
    assert acc.spent == Budget(0.5, DELTA_CAP) and acc.remaining[1] == 0.0
    assert m.privacy_report_.guarantee().delta == DELTA_CAP
    with pytest.raises(BudgetExceededError, match="No data was read"):
        DPM(epsilon=0.5, bounds=(-1, 1), accountant=acc).fit(_Untouchable())


def test_composite_fits_under_the_delta_rule_charge_the_cap(blobs):
    """Pipelines, selections and Morse merging book the whole plan once: under the delta rule
    the accountant is charged the cap, whatever delta the rule then chose."""
    from privclust.model_selection import PrivateSelection
    from privclust.pipeline import make_private_pipeline
    from privclust.preprocessing import PrivateScaler

    X, _ = blobs
    fits = [
        lambda acc: make_private_pipeline(PrivateScaler(0.1, bounds=B), _mixture(0.9, None),
                                          accountant=acc, random_state=0),
        lambda acc: PrivateSelection([DPLloyd(2, bounds=B), _mixture(0.5, None)], epsilon=1.0,
                                     accountant=acc, random_state=0),
        lambda acc: MorseMerging(DPM(bounds=B), 2, epsilon=1.0, accountant=acc,
                                 random_state=0),
    ]
    for make in fits:
        acc = Accountant(Budget(2.0, 2 * DELTA_CAP))
        report = make(acc).fit(X).privacy_report_
        assert report.total().delta < DELTA_CAP  # what the rule chose on this data set
        assert acc.spent.epsilon == pytest.approx(1.0, rel=1e-9)
        assert acc.spent.delta == DELTA_CAP, report.estimator


def test_every_estimator_uses_the_one_delta_rule(blobs):
    X, _ = blobs
    m = DPM(epsilon=1.0, bounds=B, random_state=0).fit(X)
    assert m.delta_ == rule_delta(m.split_tree_.n_hat[0])
    g = _mixture(1.0, None).fit(X)
    count = [r for r in g.privacy_report_.releases if r.mechanism == "two-sided geometric"]
    assert len(count) == 1 and count[0].epsilon == pytest.approx(NOISY_N_SHARE)
    assert g.delta_ <= DELTA_CAP
    lloyd = DPLloyd(n_clusters=4, epsilon=1.0, bounds=B, random_state=0).fit(X)
    assert lloyd.privacy_report_.releases[0].epsilon == pytest.approx(NOISY_N_SHARE)
    assert DPDBSCAN().n_budget_share == NOISY_N_SHARE


# --------------------------------------------------------------------------- the regressions
def test_morse_over_dpm_spends_the_delta_it_was_given(blobs):
    X, _ = blobs
    m = MorseMerging(DPM(epsilon=1, delta=1e-6, bounds=B), 2, epsilon=1, delta=1e-6,
                     random_state=0).fit(X)
    rep = m.privacy_report_
    assert rep.planned == Budget(1.0, 1e-6)  # was delta = 2e-6
    assert rep.total().delta == pytest.approx(1e-6, rel=1e-9)
    assert rep.total().epsilon == pytest.approx(1.0, rel=1e-9)
    # the base's parameters say what it spent: its share of the one plan
    assert m.base_estimator_.epsilon == pytest.approx(0.85)
    assert m.base_estimator_.delta == pytest.approx(0.85e-6)


def test_morse_runs_inside_an_accountant_with_exactly_its_budget(blobs):
    X, _ = blobs
    acc = Accountant(Budget(1.0, 1e-6))  # once refused: "epsilon=0.15, delta=0 left"
    MorseMerging(DPM(epsilon=1, delta=1e-6, bounds=B), 2, epsilon=1, delta=1e-6,
                 random_state=0, accountant=acc).fit(X)
    assert acc.remaining[0] == pytest.approx(0.0, abs=1e-12)
    assert len(acc.reservations) == 1 and len(acc.reports) == 1


def test_morse_delta_is_the_total_and_is_checked(blobs):
    X, _ = blobs
    m = MorseMerging(_mixture(1.0, 1e-6), 2, delta=1e-9, random_state=0).fit(X)
    assert m.privacy_report_.total().delta == pytest.approx(1e-9, rel=1e-9)  # was 1e-6
    assert m.base_estimator_.delta == 1e-9
    acc = Accountant(Budget(1.0, 1e-10))  # MorseMerging's check once left delta out
    with pytest.raises(BudgetExceededError, match="No data was read"):
        MorseMerging(_mixture(1.0, 1e-6), 2, delta=1e-9, accountant=acc).fit(_Untouchable())


def test_mixture_spends_all_of_epsilon(blobs):
    X, _ = blobs
    m = DPGaussianMixture(n_components=4, epsilon=1, delta=1e-6, bounds=B,
                          random_state=0).fit(X)
    assert m.privacy_report_.total().epsilon == pytest.approx(1.0, rel=1e-9)  # was 0.837


def test_dpm_spends_all_of_epsilon_on_five_blobs():
    X, _ = make_blobs(20_000, 2, centers=5, random_state=0)
    m = DPM(epsilon=1, delta=1e-6, bounds=(-15, 15), random_state=0).fit(X)
    assert max(m.split_tree_.depth) < m.max_depth  # a shallow tree
    assert m.privacy_report_.total().epsilon == pytest.approx(1.0, rel=1e-9)  # was 0.517


def test_dbscan_takes_epsilon_first_and_everything_else_by_keyword():
    assert DPDBSCAN(0.5).epsilon == 0.5
    with pytest.raises(TypeError):
        DPDBSCAN(0.5, 0.3)  # scikit-learn's DBSCAN(0.5) would be the radius
    for cls, first in [(DPM, "epsilon"), (DPLloyd, "n_clusters"),
                       (KMeansGuarantee, "n_clusters"), (SubClustering, "n_clusters"),
                       (DPGaussianMixture, "n_components")]:
        assert getattr(cls(3), first) == 3
        with pytest.raises(TypeError):
            cls(3, 1.0)


# --------------------------------------------------------------------------- the plan itself
def test_zcdp_calibration_inverts_the_ledger():
    for eps in (0.1, 0.98, 1.0, 5.0):
        for delta in (1e-9, 1e-6, 1e-5):
            rho = zcdp_rho_for(eps, delta)
            assert zcdp_to_approx_dp(rho, delta) == pytest.approx(eps, rel=1e-9)
            assert zcdp_to_approx_dp(rho, delta) <= eps
            L = math.log(1 / delta)
            assert rho > (math.sqrt(L + eps) - math.sqrt(L)) ** 2  # tighter than Bun-Steinke


def _mech(plan):
    rep = PrivacyReport("t", plan.reserved())
    return Mechanisms(RandomSource(np.random.default_rng(0), "t", False), rep, plan), rep


def test_mechanisms_spend_only_from_named_line_items():
    plan = PrivacyPlan("t", 1.0, 0.0)
    plan.add("counts", "two-sided geometric", "pure", 0.4)
    plan.add("sums", "laplace", "pure", 0.6)
    plan.validate()
    mech, rep = _mech(plan)
    mech.count([5, 6], 0.2, target="a", item="counts")
    mech.count([5, 6], 0.2, target="b", item="counts")
    with pytest.raises(PlanExceededError, match="exceeds the planned"):
        mech.count([5], 0.01, target="c", item="counts")
    with pytest.raises(ValueError, match="names no line item"):
        mech.laplace([1.0], 1.0, 0.1, target="d")
    with pytest.raises(PlanExceededError, match="no line item 'sum'"):
        mech.laplace([1.0], 1.0, 0.1, target="d", item="sum")
    assert len(rep.releases) == 2  # the refused releases were not recorded
    assert plan.unspent() == [("sums", pytest.approx(0.6), "not used by this fit")]


def test_plan_validation_and_moving_unspent_budget():
    plan = PrivacyPlan("t", 1.0, 1e-6)
    plan.add("level 1", "exponential", "pure", 0.3)
    plan.add("level 2", "exponential", "pure", 0.3)
    with pytest.raises(PlanExceededError, match="epsilon 0.6"):
        plan.validate()
    plan.add("averages", "gaussian (analytic)", "approx", 0.4, 1.0)
    plan.validate()
    plan.charge("level 1", 0.3)
    moved = plan.move_unspent(["level 1", "level 2"], "averages", "not reached")
    assert moved == pytest.approx(0.3)  # level 1 was spent: only level 2 moves
    assert plan.item("averages").epsilon == pytest.approx(0.7)
    total = plan.total()
    assert total.epsilon == pytest.approx(1.0) and total.delta == pytest.approx(1e-6)
    assert plan.unspent() == [("averages", pytest.approx(0.7), "not used by this fit")]


def test_spreading_unspent_budget_over_several_items():
    """Levels not grown give their epsilon to the levels that are, in equal parts; the
    total stays the plan's, and a target that has spent refuses it."""
    plan = PrivacyPlan("t", 1.0, 0.0)
    for lv in range(1, 5):
        plan.add(f"level {lv}", "geometric", "pure", 0.25)
    moved = plan.spread_unspent(["level 3", "level 4"], ["level 1", "level 2"], "shallower")
    assert moved == pytest.approx(0.5)
    assert [plan.item(f"level {lv}").epsilon for lv in range(1, 5)] == pytest.approx(
        [0.5, 0.5, 0.0, 0.0])
    assert plan.total().epsilon == pytest.approx(1.0)
    assert "moved to 'level 1', 'level 2': shallower" in plan.item("level 3").unspent_reason
    plan.charge("level 1", 0.5)
    plan.add("level 5", "geometric", "pure", 0.0)
    with pytest.raises(PlanExceededError, match="already spent"):
        plan.spread_unspent(["level 5"], ["level 1", "level 2"], "again")


def test_resplitting_items_keeps_their_total():
    """Items that have not spent are re-split in place (their total kept); a changed total,
    or an item that has spent, is refused."""
    plan = PrivacyPlan("t", 1.0, 0.0)
    for lv, eps in enumerate([0.1, 0.2, 0.3, 0.4], start=1):
        plan.add(f"level {lv}", "geometric", "pure", eps)
    names = [f"level {lv}" for lv in range(1, 5)]
    plan.resplit(names, [0.25] * 4, "equal")
    assert [plan.item(n).epsilon for n in names] == pytest.approx([0.25] * 4)
    assert plan.total().epsilon == pytest.approx(1.0) and "re-split: equal" in plan.notes[-1]
    with pytest.raises(PlanExceededError, match="keep the items' total"):
        plan.resplit(names, [0.3] * 4, "more")
    plan.charge("level 1", 0.25)
    with pytest.raises(PlanExceededError, match="not spent"):
        plan.resplit(names, [0.25] * 4, "again")


def test_delta_rule_resolves_once_for_a_composite_plan():
    plan = PrivacyPlan("pipe", 1.0, None)
    assert plan.reserved() == Budget(1.0, DELTA_CAP)
    base = plan.part("base", 0.85, 0.85)
    cov = plan.part("covariance pass", 0.15, 0.15)
    base.add("averages", "gaussian (analytic)", "approx", 0.85, 1.0)
    cov.add("covariance statistics", "gaussian (zCDP)", "zcdp", 0.15, 1.0)
    plan.validate()
    with pytest.raises(PlanExceededError, match="needs delta"):
        base.require_delta()
    assert base.resolve_delta(10**6, "test") == pytest.approx(0.85e-9)
    assert cov.resolve_delta(10, "test") == pytest.approx(0.15e-9)  # already fixed
    assert plan.total().delta == pytest.approx(1e-9)
    assert "n_hat = 1e+06" in plan.delta_note


def test_a_mistake_caught_inside_a_composite_fit_spends_nothing(blobs):
    """The pipeline books its budget before the base reads X; when the base refuses X (NaN),
    nothing was released and the booking is given back."""
    X, _ = blobs
    bad = X.copy()
    bad[3, 0] = np.nan
    acc = Accountant(Budget(1.0, 1e-6))
    with pytest.raises(ValueError, match="NaN"):
        MorseMerging(DPM(bounds=B), 2, epsilon=1.0, delta=1e-6, accountant=acc).fit(bad)
    assert acc.remaining == (1.0, 1e-6)
    MorseMerging(DPM(bounds=B), 2, epsilon=1.0, delta=1e-6, accountant=acc,
                 random_state=0).fit(X)
    assert acc.remaining[0] == pytest.approx(0.0, abs=1e-12)
