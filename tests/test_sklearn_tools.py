"""One budget across scikit-learn's tools: ``clone`` shares the accountant, so model selection
under one :class:`~privclust.Accountant` is recorded and refused past the budget, never free."""

from __future__ import annotations

import copy
import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.exceptions import FitFailedWarning
from sklearn.model_selection import GridSearchCV, cross_val_score

from privclust import Accountant, Budget, BudgetExceededError, DPGaussianMixture, DPLloyd


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(600, 2, centers=[[200, 200], [800, 900], [1400, 300]], cluster_std=40,
                      random_state=0)
    return np.clip(X, 0, 1700)


def test_clone_and_copies_share_the_accountant():
    acc = Accountant(Budget(1.0, 0.0))
    est = DPLloyd(3, epsilon=1.0, bounds=(0, 1700), accountant=acc)
    assert clone(est).accountant is acc
    assert copy.deepcopy(est).accountant is acc and copy.copy(acc) is acc


def test_grid_search_spends_from_one_budget_and_is_refused_past_it(blobs):
    acc = Accountant(Budget(3.0, 0.0))
    search = GridSearchCV(DPLloyd(3, epsilon=1.0, bounds=(0, 1700), accountant=acc,
                                  random_state=0),
                          {"n_clusters": [2, 3, 4]}, cv=3, error_score=np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitFailedWarning)
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(BudgetExceededError):  # the refit on all data is past the budget
            search.fit(blobs)
    # 9 fits were asked for; exactly 3 at epsilon 1 fit in epsilon 3, each recorded
    assert len(acc.reports) == 3 and len(acc.reservations) == 3
    assert acc.spent.epsilon == pytest.approx(3.0)
    assert acc.remaining.epsilon == pytest.approx(0.0, abs=1e-9)


def test_cross_val_score_is_recorded(blobs):
    acc = Accountant(Budget(3.0, 0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitFailedWarning)
        scores = cross_val_score(DPLloyd(3, epsilon=1.0, bounds=(0, 1700), accountant=acc,
                                         random_state=0), blobs, cv=5, error_score=np.nan)
    assert np.isfinite(scores).sum() == 3 and np.isnan(scores).sum() == 2
    assert len(acc.reports) == 3 and acc.spent.epsilon == pytest.approx(3.0)


def test_a_copy_in_another_process_refuses_to_spend():
    acc = Accountant(Budget(3.0, 0.0))
    copied = pickle.loads(pickle.dumps(acc))
    with pytest.raises(BudgetExceededError, match="n_jobs"):
        copied.reserve(Budget(0.5, 0.0), "fit")
    assert acc.spent == Budget(0.0, 0.0)


def test_accountant_reads_like_its_state():
    acc = Accountant(Budget(2.0, 1e-6))
    assert acc.spent == Budget(0.0, 0.0)
    acc.reserve(Budget(0.5, 0.0), "fit")
    eps, delta = acc.remaining
    assert (eps, delta) == (1.5, 1e-6) and acc.remaining.epsilon == 1.5
    text = repr(acc)
    assert "spent=Budget(epsilon=0.5" in text and "remaining=Remaining(epsilon=1.5" in text


def test_score_is_the_opposite_of_the_cost(blobs):
    est = DPLloyd(3, epsilon=5.0, bounds=(0, 1700), random_state=0).fit(blobs)
    d2 = ((blobs[:, None, :] - est.cluster_centers_[None]) ** 2).sum(-1).min(1)
    assert est.score(blobs) == pytest.approx(-d2.sum(), rel=1e-9)
    mix = DPGaussianMixture(3, epsilon=5.0, bounds=(0, 1700), random_state=0).fit(blobs)
    assert mix.score(blobs) == pytest.approx(mix.score_samples(blobs).mean())


def test_grid_search_scores_with_score(blobs):
    search = GridSearchCV(DPLloyd(3, epsilon=5.0, bounds=(0, 1700), random_state=0),
                          {"n_clusters": [1, 3]}, cv=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        search.fit(blobs)
    assert search.best_params_ == {"n_clusters": 3}
