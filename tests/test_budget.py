"""Budgets, the accountant, the ledger's composition and the zCDP conversion."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privclust.privacy import (
    Accountant,
    Budget,
    BudgetExceededError,
    PrivacyReport,
    Release,
    zcdp_to_approx_dp,
)


# =========================================================================== Budget
@pytest.mark.parametrize(("eps", "delta"), [(0.0, 0.0), (1, 0), (2.5, 1e-6), (np.float32(0.5),
                                            np.float64(0.1)), (np.int64(3), 0.999)])
def test_budget_accepts_numbers_and_stores_floats(eps, delta):
    b = Budget(eps, delta)
    assert type(b.epsilon) is float and type(b.delta) is float
    assert (b.epsilon, b.delta) == (float(eps), float(delta))


def test_budget_default_delta_is_zero():
    assert Budget(1.0).delta == 0.0


@pytest.mark.parametrize(("eps", "delta", "error"), [
    (-0.1, 0.0, ValueError),
    (math.nan, 0.0, ValueError),
    (-math.inf, 0.0, ValueError),
    (1.0, -1e-9, ValueError),
    (1.0, 1.0, ValueError),
    (1.0, 1.5, ValueError),
    (1.0, math.nan, ValueError),
    ("1.0", 0.0, TypeError),
    (None, 0.0, TypeError),
    (True, 0.0, TypeError),
    ([1.0], 0.0, TypeError),
])
def test_budget_validation(eps, delta, error):
    with pytest.raises(error):
        Budget(eps, delta)


def test_budget_is_frozen_and_adds():
    b = Budget(0.5, 1e-6) + Budget(0.25, 2e-6)
    assert b.epsilon == pytest.approx(0.75) and b.delta == pytest.approx(3e-6)
    with pytest.raises(AttributeError):
        b.epsilon = 2.0  # type: ignore[misc]


def test_budget_sum_caps_delta_below_one():
    b = Budget(1.0, 0.6) + Budget(1.0, 0.6)
    assert b.epsilon == 2.0 and 0.99 < b.delta < 1.0


def test_fits_in():
    cap = Budget(1.0, 1e-5)
    assert Budget(1.0, 1e-5).fits_in(cap)
    assert Budget(0.1 + 0.2 + 0.7, 1e-5).fits_in(cap)  # float slack
    assert Budget(0.0, 0.0).fits_in(Budget(0.0, 0.0))
    assert not Budget(1.001, 0.0).fits_in(cap)
    assert not Budget(0.5, 2e-5).fits_in(cap)
    assert not Budget(0.5, 1e-9).fits_in(Budget(1.0, 0.0))


# =========================================================================== Accountant
def test_unlimited_accountant():
    acc = Accountant()
    assert acc.remaining == (math.inf, 1.0) and acc.spent == Budget(0.0, 0.0)
    acc.check(Budget(1e6, 0.9))
    acc.reserve(Budget(1e6, 0.5), "big")
    assert acc.spent == Budget(1e6, 0.5)


def test_accountant_rejects_non_budget():
    for bad in ((1.0, 1e-5), 1.0, "eps=1"):
        with pytest.raises(TypeError, match="Budget"):
            Accountant(bad)


def test_accountant_check_raises_before_spending():
    acc = Accountant(Budget(1.0, 1e-5))
    with pytest.raises(BudgetExceededError, match="No data was read"):
        acc.check(Budget(1.5, 0.0), "DPM")
    with pytest.raises(BudgetExceededError, match="delta"):
        acc.check(Budget(0.1, 1e-4), "DPM")
    assert acc.spent == Budget(0.0, 0.0) and acc.remaining == (1.0, 1e-5)
    assert issubclass(BudgetExceededError, RuntimeError)


def test_accountant_reserve_accumulates():
    acc = Accountant(Budget(1.0, 1e-5))
    acc.reserve(Budget(0.3, 2e-6), "fit 1")
    acc.reserve(Budget(0.4, 3e-6), "fit 2")
    assert [label for label, _ in acc.reservations] == ["fit 1", "fit 2"]
    assert acc.spent.epsilon == pytest.approx(0.7) and acc.spent.delta == pytest.approx(5e-6)
    eps_left, delta_left = acc.remaining
    assert eps_left == pytest.approx(0.3) and delta_left == pytest.approx(5e-6)
    # a fit that no longer fits is refused and not recorded
    with pytest.raises(BudgetExceededError):
        acc.reserve(Budget(0.31, 0.0), "fit 3")
    assert len(acc.reservations) == 2
    # exactly the rest fits despite floating-point sums (0.3 + 0.4 + 0.3)
    acc.reserve(Budget(0.3, 5e-6), "fit 3")
    assert acc.spent.fits_in(acc.budget)
    with pytest.raises(BudgetExceededError):
        acc.check(Budget(1e-6, 0.0))


def test_accountant_attach_keeps_reports():
    acc = Accountant()
    rep = PrivacyReport("DPM", Budget(1.0, 1e-6))
    acc.attach(rep)
    assert acc.reports == [rep]


# =========================================================================== PrivacyReport
PLAN = Budget(1.0, 1e-5)


def _report(*releases, zcdp_delta=0.0):
    rep = PrivacyReport("test", PLAN, random_source="seed", zcdp_delta=zcdp_delta)
    for r in releases:
        rep.add(r)
    return rep


def test_report_total_composes_sequentially():
    rep = _report(
        Release("two-sided geometric", "counts", epsilon=0.1, delta=1e-7, n_released=64),
        Release("exponential", "splits", epsilon=0.25, n_released=32),
        Release("gaussian (analytic)", "sums", epsilon=0.4, delta=4e-6, n_released=128),
    )
    total = rep.total()
    # a batch on disjoint subsets costs one release's budget: n_released does not multiply
    assert total.epsilon == pytest.approx(0.75)
    assert total.delta == pytest.approx(4.1e-6)
    assert rep.within_plan()
    rep.add(Release("laplace", "extra", epsilon=0.3))
    assert rep.total().epsilon == pytest.approx(1.05) and not rep.within_plan()


def test_report_empty_total_is_zero():
    assert _report().total() == Budget(0.0, 0.0)


def test_report_converts_zcdp_once_at_the_end():
    rep = _report(
        Release("gaussian (zCDP)", "a", rho=0.02),
        Release("gaussian (zCDP)", "b", rho=0.03),
        Release("laplace", "c", epsilon=0.1),
        zcdp_delta=1e-6,
    )
    total = rep.total()
    assert total.epsilon == pytest.approx(0.1 + zcdp_to_approx_dp(0.05, 1e-6))
    assert total.delta == pytest.approx(1e-6)
    # zCDP composes in rho: cheaper than converting each release and adding
    assert total.epsilon < 0.1 + zcdp_to_approx_dp(0.02, 1e-6) + zcdp_to_approx_dp(0.03, 1e-6)


def test_report_zcdp_needs_its_delta():
    rep = _report(Release("gaussian (zCDP)", "a", rho=0.1))
    with pytest.raises(ValueError, match="zcdp_delta"):
        rep.total()


def test_report_flags_exact_releases_and_breaks_down():
    rep = _report(
        Release("exponential", "splits", epsilon=0.2),
        Release("exponential", "more splits", epsilon=0.3),
        Release("two-sided geometric", "counts", epsilon=0.1, delta=1e-6),
    )
    assert rep.private
    by = rep.by_mechanism()
    assert by["exponential"].epsilon == pytest.approx(0.5)
    assert by["two-sided geometric"] == Budget(0.1, 1e-6)
    rep.add(Release("none (exact)", "initial centroids", private=False))
    assert not rep.private
    d = rep.to_dict()
    assert d["private"] is False and d["privacy_unit"] == "add/remove one record"
    assert d["spent"]["epsilon"] == pytest.approx(0.6) and len(d["releases"]) == 4
    assert "NOT PRIVATE" in str(rep)


# =========================================================================== zCDP -> (eps, delta)
RHOS = [0.001, 0.01, 0.1, 0.5, 2.0, 10.0]
DELTAS = [1e-3, 1e-5, 1e-8, 1e-12]


@pytest.fixture(scope="module")
def dp_accounting():
    return pytest.importorskip("dp_accounting")


def _rdp_epsilon(dp_accounting, rho, delta, orders=None):
    """dp-accounting's RDP accountant for one Gaussian with noise multiplier 1/sqrt(2 rho)."""
    acc = dp_accounting.rdp.RdpAccountant(orders=orders)
    acc.compose(dp_accounting.GaussianDpEvent(1.0 / math.sqrt(2.0 * rho)))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("rho", RHOS)
def test_zcdp_conversion_matches_dp_accounting(dp_accounting, rho, delta):
    ours = zcdp_to_approx_dp(rho, delta)
    # on a dense grid of orders the two optimise the same bound (CKS 2020, Prop. 12)
    dense = list(1.0 + np.geomspace(1e-3, 1e5, 2000))
    theirs = _rdp_epsilon(dp_accounting, rho, delta, dense)
    assert ours <= theirs * (1 + 1e-9) + 1e-9
    assert ours >= 0.99 * theirs
    # and never above dp-accounting with its default orders
    assert ours <= _rdp_epsilon(dp_accounting, rho, delta) * (1 + 1e-9) + 1e-9


@pytest.mark.parametrize("delta", DELTAS)
def test_zcdp_conversion_is_monotone_and_below_the_simple_bound(delta):
    eps = [zcdp_to_approx_dp(rho, delta) for rho in RHOS]
    assert all(a < b for a, b in zip(eps, eps[1:], strict=False))
    for rho, e in zip(RHOS, eps, strict=True):
        assert 0 < e <= rho + 2 * math.sqrt(rho * math.log(1 / delta))  # Bun & Steinke


def test_zcdp_conversion_edge_cases():
    assert zcdp_to_approx_dp(0.0, 1e-6) == 0.0
    with pytest.raises(ValueError, match="rho"):
        zcdp_to_approx_dp(-0.1, 1e-6)
    for delta in (0.0, 1.0, -1e-3):
        with pytest.raises(ValueError, match="delta"):
            zcdp_to_approx_dp(0.1, delta)


def test_report_columns_wrap_and_are_never_cut():
    """Once "(103 bi": a long target was cut at 43 characters, and a long mechanism ran into
    the next column."""
    from privclust.privacy import Release

    target = "records per bin of a log-scale grid (103 bins, 2 per octave), per feature"
    report = PrivacyReport("X", Budget(1.0, 0.0),
                           releases=[Release("sparse vector (AboveThreshold)", target,
                                             epsilon=1.0)])
    text = str(report)
    rows = text.splitlines()[text.splitlines().index(next(ln for ln in text.splitlines()
                                                          if "mechanism" in ln)) + 1:]
    words = " ".join(" ".join(r[26:72].split()) for r in rows[:2])
    assert target in words
    assert rows[0].startswith("  sparse vector") and "(AboveThreshold)" in rows[1]
    assert all(len(r) <= 100 for r in rows)
