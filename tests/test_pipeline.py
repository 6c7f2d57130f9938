"""Private preprocessing and pipelines under one plan: the plan is checked before any data is
read, every step's releases land in one report, bounds are handed from step to step, a
non-private step that learns is named, and the releases depend on released values only."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from tests._replay import ReplayMismatch, check_neighbour, neighbours

from privclust import (
    Accountant,
    Budget,
    BudgetExceededError,
    DPGaussianMixture,
    DPLloyd,
    MorseMerging,
    PrivacyLeakWarning,
)
from privclust.pipeline import PrivatePipeline, make_private_pipeline
from privclust.preprocessing import PrivateClipper, PrivateScaler


@pytest.fixture(scope="module")
def table():
    """Four clusters on features of very different scales (0.01 to 1,000)."""
    X, y = make_blobs(20000, 3, centers=4, cluster_std=0.6, random_state=0)
    return X * np.array([0.01, 1.0, 1000.0]) + np.array([0.0, 50.0, -3000.0]), y


class _Untouchable:
    """Data that fails the test if anything reads it."""

    def __array__(self, *args, **kwargs):
        raise AssertionError("the data was read before the plan was checked")

    def __getattr__(self, name):
        raise AssertionError(f"the data was read before the plan was checked ({name})")


def _pipe(**kw):
    return make_private_pipeline(PrivateClipper(0.1), PrivateScaler(0.1),
                                 DPLloyd(4, epsilon=0.8), random_state=0, **kw)


def test_the_plan_is_checked_before_any_data_is_read():
    acc = Accountant(Budget(0.5, 0.0))
    with pytest.raises(BudgetExceededError, match="No data was read"):
        _pipe(accountant=acc).fit(_Untouchable())
    assert acc.spent == Budget(0.0, 0.0) and acc.reports == []


def test_one_booking_one_report_every_step(table):
    X, _ = table
    acc = Accountant(Budget(2.0, 0.0))
    pipe = _pipe(accountant=acc).fit(X)
    report = pipe.privacy_report_
    assert len(acc.reservations) == 1 and acc.spent.epsilon == pytest.approx(1.0)
    assert acc.reports == [report]
    assert report.total().epsilon == pytest.approx(1.0) and report.within_plan()
    items = {r.item.split(":")[0] for r in report.releases}
    assert items == {"privateclipper", "privatescaler", "dplloyd"}
    assert {i["item"].split(":")[0] for i in report.plan} == items


def test_bounds_are_handed_from_step_to_step(table):
    X, _ = table
    pipe = _pipe().fit(X)
    clipper, scaler, model = pipe.named_steps.values()
    np.testing.assert_array_equal(scaler.bounds_, clipper.output_bounds_)
    np.testing.assert_array_equal(model.bounds_, scaler.output_bounds_)
    assert scaler.bounds is None and model.bounds is None  # the parameters are left as given
    clone(pipe)  # and so the pipeline still clones


def test_records_clipped_and_scaled_like_the_fit(table):
    X, _ = table
    pipe = _pipe().fit(X)
    Z = pipe[:-1].transform(X)
    lo, hi = pipe[-1].bounds_[:, 0], pipe[-1].bounds_[:, 1]
    assert ((Z >= lo - 1e-9) & (Z <= hi + 1e-9)).all()
    assert np.allclose(Z.std(axis=0), 1.0, atol=0.1)  # standardised despite scales 0.01..1000
    assert np.mean(np.any(pipe[0].transform(X) != X, axis=1)) <= 0.02


def test_a_pipeline_without_bounds_finds_the_clusters(table):
    from sklearn.metrics import adjusted_rand_score

    X, y = table
    scores = [adjusted_rand_score(y, make_private_pipeline(
        PrivateClipper(0.1), PrivateScaler(0.1), DPGaussianMixture(4, epsilon=0.8),
        random_state=seed).fit(X).predict(X)) for seed in range(3)]
    assert np.median(scores) > 0.9, scores


def test_a_step_that_learns_without_privacy_is_named(table):
    X, _ = table
    pipe = PrivatePipeline([("raw_scaler", StandardScaler()),
                            ("model", DPLloyd(4, epsilon=1.0, bounds=(-5, 5), random_state=0))])
    with pytest.warns(PrivacyLeakWarning, match="'raw_scaler' \\(StandardScaler\\)"):
        pipe.fit(X)
    stateless = PrivatePipeline([("log", FunctionTransformer(np.arcsinh)),
                                 ("model", DPLloyd(4, epsilon=1.0, bounds=(-10, 10),
                                                   random_state=0))])
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        stateless.fit(X)


def test_clones_of_a_pipeline_spend_from_one_accountant(table):
    X, _ = table
    acc = Accountant(Budget(1.5, 0.0))
    pipe = _pipe(accountant=acc)
    clone(pipe).fit(X)
    with pytest.raises(BudgetExceededError):
        clone(pipe).fit(X)
    assert acc.spent.epsilon == pytest.approx(1.0)


@pytest.mark.parametrize("steps, match", [
    ([("a", PrivateScaler(0.1, bounds=(0, 1))), ("b", DPLloyd(2, epsilon=1.0),)], None),
    ([("m", MorseMerging(DPGaussianMixture(3, bounds=(0, 1)), 2))], "MorseMerging"),
    ([("s", StandardScaler())], "no private step"),
])
def test_mistakes_get_a_sentence(steps, match):
    X = np.random.default_rng(0).uniform(size=(200, 2))
    if match is None:  # DPLloyd takes the scaler's output bounds: it fits
        PrivatePipeline(steps).fit(X)
        return
    with pytest.raises(ValueError, match=match):
        PrivatePipeline(steps).fit(X)


def test_a_refused_step_before_any_release_spends_nothing():
    acc = Accountant(Budget(2.0, 0.0))
    pipe = make_private_pipeline(PrivateScaler(0.1), DPLloyd(2, epsilon=0.5), accountant=acc)
    with pytest.raises(ValueError, match="bounds are required"):
        pipe.fit(np.random.default_rng(0).uniform(size=(100, 2)))
    assert acc.spent == Budget(0.0, 0.0)


def test_the_scaler_noise_has_the_stated_scale():
    """The centre's error over seeds matches the Laplace scale of the sums (d / (0.4 eps)),
    within a 99% band: a wrong noise scale fails either way."""
    X = np.random.default_rng(1).uniform(0, 1, size=(2000, 2))
    eps, d, n = 0.5, 2, 2000
    errors = np.array([PrivateScaler(eps, bounds=(0, 1), random_state=s).fit(X).centre_[0]
                       - X[:, 0].mean() for s in range(300)])
    # centre error in u units ~ Laplace(d / (0.4 eps)) / n, half-width 0.5 -> x units
    expected_sd = 0.5 * np.sqrt(2) * d / (0.4 * eps) / n
    ratio = errors.std() / expected_sd
    assert 0.8 < ratio < 1.25, ratio


class _FinalModel:
    """A pipeline whose ``fit`` returns its final estimator, so the replay harness compares the
    estimator's model file (which holds the bounds and centres the earlier steps shaped)."""

    def __init__(self, pipe):
        self.pipe = pipe

    def fit(self, X):
        return self.pipe.fit(X)[-1]


def test_the_pipeline_decides_from_releases_only():
    X, _ = make_blobs(3000, 2, centers=[[-1.5, -1.5], [1.5, 1.5]], cluster_std=0.3,
                      random_state=1)

    def make():
        return _FinalModel(make_private_pipeline(PrivateClipper(0.2), PrivateScaler(0.2),
                                                 DPLloyd(2, epsilon=0.6), random_state=3))

    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label, Xn in neighbours(X, np.tile([-4.0, 4.0], (2, 1))).items():
            try:
                checked += check_neighbour(make, X, Xn)
            except ReplayMismatch as exc:
                raise ReplayMismatch(f"{label}: {exc}") from None
    assert checked > 0


def test_a_clipper_refusal_inside_a_pipeline_is_charged():
    """The clipper's noisy record count is a release: a pipeline that refuses on it (too few
    records for private bounds) has spent its booking, every time."""
    acc = Accountant(Budget(100.0, 0.0))
    X = np.random.default_rng(0).normal(size=(1300, 3))  # private bounds need about 1,340
    refused = 0
    for seed in range(8):
        try:
            make_private_pipeline(PrivateClipper(0.1), DPLloyd(2, epsilon=0.4),
                                  accountant=acc, random_state=seed).fit(X)
        except ValueError as exc:
            assert "too few records for private bounds" in str(exc)
            refused += 1
    assert 0 < refused < 8
    assert acc.spent.epsilon == pytest.approx(8 * 0.5)
    assert len(acc.reservations) == 8
