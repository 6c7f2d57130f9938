"""Private model selection: one plan checked before the data is read, the selection a release
of sensitivity 1 (record/replay on neighbours), the true k on separated blobs, clear errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from _replay import ReplayMismatch, model_file, neighbours, record, replay
from privclust import (
    DPDBSCAN,
    DPM,
    EMMC,
    Accountant,
    Budget,
    BudgetExceededError,
    CoresetKMeans,
    DPGaussianMixture,
    DPLloyd,
    HSTKMeans,
    LSHSplits,
)
from privclust.model_selection import (
    PrivateSelection,
    _score,
    _selection,
    select_n_clusters,
    silhouette_sum,
    simplified_silhouette,
)

BOUNDS = (-3.0, 3.0)
SEED = 5


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(600, 2, centers=[[-1.5, -1.5], [1.5, 1.5], [-1.5, 1.5], [1.5, -1.5]],
                      cluster_std=0.3, random_state=1)
    return np.clip(X, *BOUNDS)


def _lloyds(*ks, bounds=BOUNDS):
    return [DPLloyd(k, bounds=bounds) for k in ks]


class Untouchable:
    """Data that fails the test if anything reads it."""

    def __array__(self, *args, **kwargs):
        raise AssertionError("the data was read")

    def __len__(self):
        raise AssertionError("the data was read")


# ---------------------------------------------------------------------- the plan
def test_a_plan_over_budget_is_refused_before_the_data_is_read():
    acc = Accountant(Budget(0.5, 0.0))
    sel = PrivateSelection(_lloyds(2, 4, 8), epsilon=1.0, accountant=acc, random_state=0)
    with pytest.raises(BudgetExceededError, match="No data was read"):
        sel.fit(Untouchable())
    assert acc.spent == Budget(0.0, 0.0)
    assert not hasattr(sel, "best_estimator_")


def test_a_candidate_refusing_its_parameters_is_refused_before_the_data_is_read():
    acc = Accountant(Budget(2.0, 1e-5))
    sel = PrivateSelection([DPLloyd(4, bounds=BOUNDS), DPM(bounds=BOUNDS)], epsilon=1.0,
                           delta=0.0, accountant=acc)
    with pytest.raises(ValueError, match=r"candidates\[1\] \(DPM\).*delta > 0"):
        sel.fit(Untouchable())
    assert acc.spent == Budget(0.0, 0.0)


def test_the_whole_plan_is_booked_once_and_the_report_lists_every_candidate(blobs):
    acc = Accountant(Budget(1.0, 0.0))
    sel = PrivateSelection(_lloyds(2, 4, 8) + [HSTKMeans(4, bounds=BOUNDS)], epsilon=1.0,
                           selection_share=0.1, accountant=acc, random_state=0).fit(blobs)
    assert len(acc.reservations) == 1
    assert acc.spent.epsilon == pytest.approx(1.0) and acc.spent.delta == 0.0
    report = sel.privacy_report_
    assert report.total().epsilon == pytest.approx(1.0)
    assert report.planned == Budget(1.0, 0.0)
    items = [i["item"] for i in report.plan]
    for j, label in enumerate(["DPLloyd(n_clusters=2)", "DPLloyd(n_clusters=4)",
                               "DPLloyd(n_clusters=8)", "HSTKMeans(n_clusters=4)"]):
        mine = [i for i in report.plan if i["item"].startswith(f"candidate {j} ({label}): ")]
        assert mine and sum(i["epsilon"] for i in mine) == pytest.approx(0.9 / 4)
        assert sel.candidate_budgets_[j].epsilon == pytest.approx(0.9 / 4)
    assert items[-1] == "selection: simplified silhouette"
    assert report.plan[-1]["epsilon"] == pytest.approx(0.1)
    assert sum(i["epsilon"] for i in report.plan) == pytest.approx(1.0)
    chosen = [r for r in report.releases if r.item == "selection: simplified silhouette"]
    assert len(chosen) == 1 and chosen[0].mechanism == "exponential"
    assert chosen[0].sensitivity == 1.0 and chosen[0].epsilon == pytest.approx(0.1)
    assert report is acc.reports[0]


def test_delta_goes_to_the_candidates_that_use_it(blobs):
    acc = Accountant(Budget(1.0, 1e-6))
    sel = PrivateSelection([DPLloyd(4, bounds=BOUNDS), LSHSplits(4, bounds=BOUNDS)],
                           epsilon=1.0, delta=1e-6, accountant=acc, random_state=0).fit(blobs)
    assert acc.spent.epsilon == pytest.approx(1.0)
    assert acc.spent.delta == pytest.approx(1e-6)
    assert sel.candidate_budgets_[0].delta == 0.0
    assert sel.candidate_budgets_[1].delta == pytest.approx(1e-6)
    assert sel.privacy_report_.total().delta <= 1e-6 * (1 + 1e-9)


def test_pure_candidates_make_a_pure_selection_and_the_delta_rule_is_resolved_once(blobs):
    pure = PrivateSelection(_lloyds(2, 4), epsilon=1.0, random_state=0).fit(blobs)
    held = pure.privacy_report_.guarantee()
    assert held.epsilon == pytest.approx(1.0) and held.delta == 0.0
    acc = Accountant(Budget(1.0, 1e-5))
    sel = PrivateSelection([LSHSplits(4, bounds=BOUNDS), DPGaussianMixture(4, bounds=BOUNDS),
                            DPM(bounds=BOUNDS)], epsilon=1.0, accountant=acc,
                           random_state=0).fit(blobs)
    report = sel.privacy_report_
    assert report.delta_reserved == 1e-5  # the cap was reserved, the rule chose below it
    assert acc.spent.delta == 1e-5 and acc.spent.epsilon == pytest.approx(1.0)  # the cap
    assert report.total().epsilon == pytest.approx(1.0)
    assert sum("delta=None: delta = " in n for n in report.notes) == 1


def test_private_bounds_are_estimated_once_as_a_line_item_of_the_plan():
    X, _ = make_blobs(3000, 2, centers=3, cluster_std=0.5, random_state=2)
    sel = PrivateSelection([DPLloyd(3, bounds="private"), HSTKMeans(3, bounds="private")],
                           epsilon=1.0, random_state=0).fit(X)
    report = sel.privacy_report_
    assert report.plan[0]["item"] == "private bounds: feature bounds"
    assert report.plan[0]["epsilon"] == pytest.approx(0.1)
    assert report.total().epsilon == pytest.approx(1.0)
    np.testing.assert_array_equal(sel.candidates_[0].bounds_, sel.private_bounds_)
    np.testing.assert_array_equal(sel.candidates_[1].bounds_, sel.private_bounds_)


# ---------------------------------------------------------------------- the selection
def test_the_true_k_is_chosen_on_separated_blobs():
    X, _ = make_blobs(20000, 5, centers=8, cluster_std=0.5, center_box=(-8, 8),
                      random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chosen = [select_n_clusters(HSTKMeans(bounds=(-10, 10)), X, [2, 4, 8, 16, 32],
                                    epsilon=1.0, random_state=s).best_estimator_.n_clusters
                  for s in range(5)]
    assert chosen == [8] * 5


def test_the_chosen_model_is_delegated_to(blobs):
    sel = PrivateSelection([DPLloyd(2, bounds=BOUNDS), EMMC(4, bounds=BOUNDS)], epsilon=2.0,
                           random_state=1).fit(blobs)
    best = sel.best_estimator_
    assert best is sel.candidates_[sel.best_index_]
    np.testing.assert_array_equal(sel.predict(blobs), best.predict(blobs))
    np.testing.assert_array_equal(sel.labels_, best.labels_)
    np.testing.assert_array_equal(sel.cluster_centers_, best.cluster_centers_)
    assert sel.score(blobs) == best.score(blobs)
    assert sel.n_features_in_ == 2
    again = clone(sel)
    assert not hasattr(again, "best_estimator_")
    np.testing.assert_array_equal(again.fit_predict(blobs), sel.labels_)  # same seed
    assert sel.candidates[0].get_params()["epsilon"] == 1.0  # the user's objects untouched


def test_the_selection_is_a_release_of_sensitivity_one(blobs):
    """Record on D, replay on each neighbour with every release frozen: the exponential
    mechanism's scores move by at most 1 (the harness checks the linf distance against the
    declared sensitivity), and the choice and the chosen model are the same."""
    def make():
        return PrivateSelection([DPLloyd(2, bounds=BOUNDS), DPLloyd(4, bounds=BOUNDS),
                                 HSTKMeans(8, bounds=BOUNDS)], epsilon=1.0,
                                random_state=SEED)

    b = np.tile(BOUNDS, (2, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label, Xn in neighbours(blobs, b).items():
            model, session = record(make, blobs)
            assert session.calls[-1].name == "select"
            again = replay(make, session, Xn)
            assert again.best_index_ == model.best_index_, label
            assert model_file(again.best_estimator_) == model_file(model.best_estimator_)
            moved = np.abs(np.subtract(session.calls[-1].data["scores"], [
                silhouette_sum(Xn, c.cluster_centers_, c.bounds_) for c in again.candidates_]))
            assert moved.max() <= 1.0 and moved.max() > 0, label


def test_the_replay_catches_a_score_of_sensitivity_two(blobs, monkeypatch):
    monkeypatch.setattr(_selection, "silhouette_sum",
                        lambda X, C, b=None: 2.0 * silhouette_sum(X, C, b))

    def make():
        return PrivateSelection(_lloyds(2, 4), epsilon=1.0, random_state=SEED)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, session = record(make, blobs)
        with pytest.raises(ReplayMismatch, match="declared sensitivity"):
            replay(make, session, blobs[:-1])


def test_the_score_is_exact_per_record_and_in_the_unit_interval(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.uniform(-5, 5, size=(3001, 3))
    C = rng.uniform(-4, 4, size=(7, 3))
    s = simplified_silhouette(X, C)
    d = np.sqrt(((X[:, None, :] - C[None]) ** 2).sum(axis=2))
    two = np.sort(d, axis=1)[:, :2]
    np.testing.assert_allclose(s, (two[:, 1] - two[:, 0]) / two[:, 1], rtol=1e-12)
    assert (s >= 0).all() and (s <= 1).all()
    total = silhouette_sum(X, C)
    monkeypatch.setattr(_score, "_BLOCK_ELEMENTS", 7 * 13)  # other chunks: the same bits
    np.testing.assert_array_equal(simplified_silhouette(X, C), s)
    assert silhouette_sum(X, C) == total
    assert silhouette_sum(X[::-1], C) == total  # order-independent
    assert abs(silhouette_sum(X[:-1], C) - total) <= 1.0
    assert silhouette_sum(X, C[:1]) == 0.0  # one centre scores 0
    assert silhouette_sum(X, np.vstack([C[:1], C[:1]])) == 0.0  # coincident centres
    far = np.full((1, 3), 1e6)
    clipped = simplified_silhouette(far, C, np.tile([-5.0, 5.0], (3, 1)))
    np.testing.assert_array_equal(clipped, simplified_silhouette(np.full((1, 3), 5.0), C))


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize("candidates, kwargs, error, match", [
    ([KMeans(4), DPLloyd(4, bounds=BOUNDS)], {}, TypeError,
     r"candidates\[0\] is a KMeans, not a privclust"),
    ([], {}, ValueError, "candidates holds 0 estimator"),
    ([DPLloyd(4, bounds=BOUNDS)], {}, ValueError, "candidates holds 1 estimator"),
    (DPLloyd(4, bounds=BOUNDS), {}, TypeError, "candidates must be a list"),
    ([DPLloyd(4, bounds=np.tile(BOUNDS, (3, 1))), DPLloyd(4, bounds=np.tile(BOUNDS, (5, 1)))],
     {}, ValueError, r"bounds are for different numbers of features \(candidates\[0\]: 3"),
    (_lloyds(*range(2, 22)), {"epsilon": 1e-5}, ValueError,
     "epsilon=1e-05 split over 20 candidates"),
    (_lloyds(2, 4), {"selection_share": 1.5}, ValueError, "selection_share must be"),
    ([DPLloyd(1, bounds=BOUNDS), DPLloyd(4, bounds=BOUNDS)], {}, ValueError,
     r"candidates\[0\] \(DPLloyd\) has n_clusters=1"),
    ([DPGaussianMixture(2, bounds=BOUNDS), DPGaussianMixture(4, bounds=BOUNDS)], {},
     ValueError, "more than one DPGaussianMixture"),
    ([DPDBSCAN(1.0, eps=0.3, bounds=BOUNDS), DPLloyd(4, bounds=BOUNDS)], {}, ValueError,
     r"candidates\[0\] is a DPDBSCAN, which releases dense regions"),
])
def test_bad_candidates_get_one_clear_sentence(candidates, kwargs, error, match):
    acc = Accountant()
    with pytest.raises(error, match=match) as info:
        PrivateSelection(candidates, accountant=acc, **kwargs).fit(Untouchable())
    assert len(str(info.value)) < 300
    assert acc.spent == Budget(0.0, 0.0)


def test_candidates_that_each_keep_a_zcdp_block_are_refused_before_the_data_is_read(blobs):
    """CoresetKMeans keeps its sums in a zCDP block (with delta) and a plan holds one: two such
    candidates are refused from their parameters, before anything is booked or read (they
    once failed in the second candidate, after the first had spent); with delta=0 they are
    pure and the selection spends exactly its plan."""
    acc = Accountant(Budget(2.0, 1e-4))
    with pytest.raises(ValueError, match=r"candidates\[0\] \(CoresetKMeans\) and "
                                         r"candidates\[1\] \(CoresetKMeans\).*delta=0"):
        select_n_clusters(CoresetKMeans(bounds=BOUNDS), Untouchable(), [2, 4],
                          accountant=acc, random_state=0)
    with pytest.raises(ValueError, match="zCDP block.*keep one of them"):
        PrivateSelection([CoresetKMeans(2, bounds=BOUNDS), DPGaussianMixture(4, bounds=BOUNDS)],
                         accountant=acc).fit(Untouchable())
    assert acc.spent == Budget(0.0, 0.0) and acc.reservations == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sel = select_n_clusters(CoresetKMeans(bounds=BOUNDS), blobs, [2, 4], delta=0,
                                accountant=acc, random_state=0)
    assert acc.spent.epsilon == pytest.approx(1.0, rel=1e-9) and acc.spent.delta == 0.0
    assert sel.privacy_report_.total().epsilon == pytest.approx(1.0, rel=1e-9)
    one = PrivateSelection([CoresetKMeans(4, bounds=BOUNDS), DPLloyd(4, bounds=BOUNDS)],
                           accountant=acc, random_state=0).fit(blobs)  # one block: fits
    assert acc.spent.epsilon == pytest.approx(2.0, rel=1e-9)
    assert one.privacy_report_.zcdp_delta > 0


def test_bounds_of_the_wrong_width_name_the_candidate_and_refund(blobs):
    acc = Accountant(Budget(1.0, 0.0))
    sel = PrivateSelection([DPLloyd(4, bounds=np.tile(BOUNDS, (3, 1))),
                            DPLloyd(2, bounds=np.tile(BOUNDS, (3, 1)))], accountant=acc)
    with pytest.raises(ValueError, match=r"candidates\[0\] \(DPLloyd\): bounds has shape"):
        sel.fit(blobs)
    assert acc.spent == Budget(0.0, 0.0)


def test_select_n_clusters_refuses_an_estimator_without_a_size():
    with pytest.raises(ValueError, match="DPM has no n_clusters"):
        select_n_clusters(DPM(bounds=BOUNDS), Untouchable(), [2, 4])
    with pytest.raises(ValueError, match="n_clusters must hold ints"):
        select_n_clusters(DPLloyd(bounds=BOUNDS), Untouchable(), [2, 4.5])
