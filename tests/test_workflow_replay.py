"""The replay harness over the workflow layer: pipelines, private selection, Morse merging.

Two classes of checks, each with a planted fault that it catches:

(c) **Every refusal is charged.** A refusal that follows a noisy value is a release: whether
    the fit goes on depends on that value, so the budget behind it is spent. Each refusal a
    composite can make after a release (too few records for the clipper's private bounds in a
    pipeline or for a selection's bounds, a candidate that stops after its release, Morse
    merging stopping after its base's release, a standalone clipper) is driven under a shared
    :class:`~privclust.Accountant`, which must then hold the composite's whole booking. The
    planted fault gives a refusal back to the accountant (a refund after a release), and the
    check catches it.
(d) **The workflow layer as a whole** decides from releases only and spends exactly its plan:
    ``PrivatePipeline(PrivateClipper, PrivateScaler, estimator)`` for every registry estimator,
    ``select_n_clusters`` over every registry estimator with a number of clusters (CoresetKMeans
    included), and Morse merging over every base (CoresetKMeans fitted first, the route its
    refusal names). Each is recorded on a data set and replayed on neighbours with every noisy
    output frozen (``tests/_replay.py``), then fitted under a shared accountant that must be
    charged exactly the plan's booking (with ``delta=None``, the delta rule's cap).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from _replay import ReplayMismatch, check_neighbour, neighbours
from privclust import (
    DPM,
    Accountant,
    Budget,
    CoresetKMeans,
    DPLloyd,
    MorseMerging,
    registry,
)
from privclust.model_selection import PrivateSelection, select_n_clusters
from privclust.model_selection._candidates import size_param
from privclust.pipeline import make_private_pipeline
from privclust.preprocessing import PrivateClipper, PrivateScaler
from privclust.privacy import DELTA_CAP, PrivacyPlan

SEED = 5
BOX = np.tile([-4.0, 4.0], (2, 1))
ENTRIES = registry.ENTRIES
#: the neighbours each workflow is replayed on (two of the harness's, to keep the run short)
NEIGHBOURS = ("remove the last record", "add an outlier far outside the bounds")


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(3000, 2, centers=[[-2, -2], [2, 2], [-2, 2], [2, -2]], cluster_std=0.4,
                      random_state=1)
    return X


@pytest.fixture(scope="module")
def few():
    """Too few records for private bounds at epsilon 0.1 on 2 features (about 1,160)."""
    return np.random.default_rng(0).normal(size=(300, 2))


# ---------------------------------------------------------------------- (c) refusals
def charged(fit, accountant: Accountant, booking: Budget, match: str) -> float:
    """``fit()`` refuses (``match``) and ``accountant`` keeps ``booking`` for it; returns the
    epsilon the refusal was charged."""
    before = accountant.spent
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=match):
            fit()
    spent = accountant.spent
    assert spent.epsilon - before.epsilon == pytest.approx(booking.epsilon, rel=1e-9), (
        f"the refusal was charged epsilon {spent.epsilon - before.epsilon:.6g}, the booking "
        f"was {booking.epsilon:.6g}")
    assert spent.delta - before.delta == pytest.approx(booking.delta, rel=1e-9, abs=1e-18)
    return spent.epsilon - before.epsilon


class _StopsAfterItsRelease(DPLloyd):
    """A candidate that refuses on its own released centres (after its noise was drawn)."""

    def fit(self, X, y=None):
        super().fit(X, y)
        raise ValueError("refused on the released centres")


def _refusals(few, blobs):
    """``(label, fit(accountant), booking, match)`` for every refusal after a release."""
    too_few = "too few records for private bounds"
    return [
        ("pipeline: the clipper's private bounds",
         lambda acc: make_private_pipeline(PrivateClipper(0.1), DPLloyd(2, epsilon=0.4),
                                           accountant=acc, random_state=SEED).fit(few),
         Budget(0.5, 0.0), too_few),
        ("pipeline: the clipper, then the scaler and a delta-rule estimator",
         lambda acc: make_private_pipeline(PrivateClipper(0.1), PrivateScaler(0.1),
                                           DPM(epsilon=0.8), accountant=acc,
                                           random_state=SEED).fit(few),
         Budget(1.0, DELTA_CAP), too_few),
        ("selection: the candidates' private bounds",
         lambda acc: PrivateSelection([DPLloyd(2, bounds="private"),
                                       DPLloyd(4, bounds="private")], epsilon=1.0,
                                      accountant=acc, random_state=SEED).fit(few),
         Budget(1.0, 0.0), too_few),
        ("selection: a candidate stopping after its release",
         lambda acc: PrivateSelection([DPLloyd(2, bounds=(-4, 4)),
                                       _StopsAfterItsRelease(4, bounds=(-4, 4))], epsilon=1.0,
                                      accountant=acc, random_state=SEED).fit(blobs),
         Budget(1.0, 0.0), "released centres"),
        ("a standalone clipper",
         lambda acc: PrivateClipper(0.1, accountant=acc, random_state=SEED).fit(few),
         Budget(0.1, 0.0), too_few),
        ("an estimator's private bounds",
         lambda acc: DPLloyd(2, epsilon=1.0, bounds="private", accountant=acc,
                             random_state=SEED).fit(few),
         Budget(0.1, 0.0), too_few),
    ]


@pytest.mark.parametrize("case", range(6))
def test_every_refusal_after_a_release_is_charged(case, few, blobs):
    label, fit, booking, match = _refusals(few, blobs)[case]
    accountant = Accountant(Budget(10.0, 1e-4))
    for _ in range(2):  # and charged again: refusals are not free, nor repeatable for free
        assert charged(lambda: fit(accountant), accountant, booking, match) > 0
    assert accountant.spent.epsilon == pytest.approx(2 * booking.epsilon, rel=1e-9)


def test_morse_stopping_after_its_base_released_is_charged(blobs, monkeypatch):
    """Morse merging pools a centre model's centres when there are more than
    ``max_components``; how many there are is the base's release (DPM finds its own k), so a
    refusal of the pooling (planted here: any pooling is predicted to be too slow) follows a
    release and the whole booking stays spent."""
    from privclust.cluster._morse import base as morse_base

    monkeypatch.setattr(morse_base, "_pooling_seconds", lambda k, d: 1e-3 if k < 2 else 1e3)
    accountant = Accountant(Budget(10.0, 1e-4))
    spent = charged(lambda: MorseMerging(DPM(bounds=(-4, 4), max_depth=4), 2, epsilon=1.0,
                                         delta=1e-6, max_components=2, accountant=accountant,
                                         random_state=SEED).fit(blobs),
                    accountant, Budget(1.0, 1e-6), "pooling the base model's")
    assert spent == pytest.approx(1.0, rel=1e-9)


def test_a_refusal_before_any_release_is_free(blobs):
    """The one legitimate refund: nothing was drawn (a NaN refused by the step's checks)."""
    bad = blobs.copy()
    bad[7, 1] = np.nan
    accountant = Accountant(Budget(10.0, 1e-4))
    for fit in (make_private_pipeline(PrivateScaler(0.2, bounds=(-4, 4)), DPM(epsilon=0.8),
                                      accountant=accountant),
                MorseMerging(DPM(bounds=(-4, 4)), 2, epsilon=1.0, delta=1e-6,
                             accountant=accountant)):
        with pytest.raises(ValueError, match="NaN"):
            fit.fit(bad)
    assert accountant.spent == Budget(0.0, 0.0)


def test_the_check_catches_a_planted_free_refusal(few, blobs, monkeypatch):
    """Planted: a composite gives its booking back whenever it stops (the refund after a
    release the rule forbids). Every charged-refusal check above then fails."""
    def refund_always(self):
        accountant, handle = self.reservation
        accountant.settle(handle, Budget(0.0, 0.0))

    monkeypatch.setattr(PrivacyPlan, "refund_if_unspent", refund_always)
    cases = _refusals(few, blobs)
    for _, fit, booking, match in (cases[0], cases[1], cases[3]):
        accountant = Accountant(Budget(10.0, 1e-4))
        with pytest.raises(AssertionError, match="the refusal was charged epsilon 0"):
            charged(lambda fit=fit, acc=accountant: fit(acc), accountant, booking, match)


# ---------------------------------------------------------------------- (d) the whole layer
class _Returns:
    """A workflow whose ``fit`` returns the fitted model the harness compares (a pipeline's
    final estimator, a selection's chosen model, a Morse model with its base fitted first)."""

    def __init__(self, fit):
        self._fit = fit

    def fit(self, X):
        return self._fit(X)


def _replay(make, X):
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # clipping warnings: the data holder's diagnostics
        for label, Xn in neighbours(X, BOX).items():
            if label not in NEIGHBOURS:
                continue
            try:
                checked += check_neighbour(make, X, Xn)
            except ReplayMismatch as exc:
                raise ReplayMismatch(f"{label}: {exc}") from None
    assert checked > 0
    return checked


def _spends_its_plan(fit, accountant: Accountant, booking: Budget):
    """Fitted under a shared accountant, the workflow is charged exactly ``booking`` and its
    ledger adds up to its plan (spent plus what it states as unspent)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = fit().privacy_report_
    assert accountant.spent.epsilon == pytest.approx(booking.epsilon, rel=1e-9)
    assert accountant.spent.delta == pytest.approx(booking.delta, rel=1e-9, abs=1e-18)
    unspent = sum(left for _, left, _ in report.unspent)
    assert report.total().epsilon + unspent == pytest.approx(booking.epsilon, rel=1e-7)
    assert report.total().delta <= booking.delta * (1 + 1e-9)
    return report


def _registry_model(name, **params):
    entry = ENTRIES[name]
    values = {dest: entry.example.get(dest) for dest in registry.OPTIONS}
    return entry.build(values, **params)


PIPELINE_FINALS = [n for n in ENTRIES if n != "morse"]


@pytest.mark.parametrize("name", PIPELINE_FINALS)
def test_a_pipeline_with_clipper_and_scaler_decides_from_releases_and_spends_its_plan(
        name, blobs):
    def pipe(accountant=None):
        final = _registry_model(name, epsilon=0.6, delta=None, bounds=None, random_state=SEED)
        return make_private_pipeline(PrivateClipper(0.2), PrivateScaler(0.2), final,
                                     accountant=accountant, random_state=SEED)

    assert _replay(lambda: _Returns(lambda X: pipe().fit(X)[-1]), blobs) > 0
    takes_delta = ENTRIES[name].takes_delta
    accountant = Accountant(Budget(1.0, DELTA_CAP))
    report = _spends_its_plan(lambda: pipe(accountant).fit(blobs), accountant,
                              Budget(1.0, DELTA_CAP if takes_delta else 0.0))
    assert report.total().epsilon <= 1.0 * (1 + 1e-9)


def test_morse_merging_is_refused_as_a_pipeline_step_before_anything_is_spent(blobs):
    accountant = Accountant(Budget(10.0, 1e-4))
    morse = _registry_model("morse")
    with pytest.raises(ValueError, match="MorseMerging cannot be a pipeline step"):
        make_private_pipeline(PrivateClipper(0.2), morse, accountant=accountant).fit(blobs)
    assert accountant.spent == Budget(0.0, 0.0)


SIZED = [n for n, e in ENTRIES.items()
         if n != "morse" and size_param(_registry_model(n)) is not None]


@pytest.mark.parametrize("name", SIZED)
def test_select_n_clusters_decides_from_releases_and_spends_its_plan(name, blobs):
    base = _registry_model(name, bounds=(-4, 4))
    if base.keeps_zcdp_block(0.0):  # no pure form: two such candidates are refused up front
        accountant = Accountant(Budget(10.0, 1e-4))
        with pytest.raises(ValueError, match="zCDP block"):
            select_n_clusters(base, blobs, [2, 4], accountant=accountant)
        assert accountant.spent == Budget(0.0, 0.0) and accountant.reservations == []
        return
    # CoresetKMeans keeps a zCDP block with delta: delta=0 is the route its refusal names
    delta = 0.0 if base.keeps_zcdp_block(None) else None

    def select(X, accountant=None):
        return select_n_clusters(base, X, [2, 4], epsilon=1.0, delta=delta,
                                 random_state=SEED, accountant=accountant)

    assert _replay(lambda: _Returns(lambda X: select(X).best_estimator_), blobs) > 0
    uses_delta = delta is None and "delta" in base.get_params(deep=False)
    accountant = Accountant(Budget(1.0, DELTA_CAP))
    report = _spends_its_plan(lambda: select(blobs, accountant), accountant,
                              Budget(1.0, DELTA_CAP if uses_delta else 0.0))
    assert report.total().epsilon <= 1.0 * (1 + 1e-9)


MORSE_BASES = [n for n, e in ENTRIES.items() if e.morse_base is not None]


@pytest.mark.parametrize("name", MORSE_BASES)
def test_morse_over_every_base_decides_from_releases_and_spends_its_plan(name, blobs):
    entry = ENTRIES[name]

    def morse(accountant=None):
        values = {dest: entry.example.get(dest) for dest in registry.OPTIONS}
        base = entry.build(values | {"n_clusters": None, "n_components": None}, epsilon=1.0,
                           bounds=(-4, 4))
        if entry.morse_base.size_param:
            base.set_params(**{entry.morse_base.size_param: 6})
        return MorseMerging(base, 2, epsilon=1.0, delta=1e-6, random_state=SEED,
                            accountant=accountant)

    assert _replay(lambda: _Returns(lambda X: morse().fit(X)), blobs) > 0
    accountant = Accountant(Budget(1.0, 1e-6))
    report = _spends_its_plan(lambda: morse(accountant).fit(blobs), accountant,
                              Budget(1.0, 1e-6))
    assert report.total().epsilon <= 1.0 * (1 + 1e-9)


def test_morse_over_a_fitted_coreset_base_decides_from_releases_and_spends_its_plan(blobs):
    """CoresetKMeans is fitted first (its own zCDP block, its own booking), then merged with
    the covariance pass's budget: the route its refusal as an unfitted base names."""
    def morse(X, accountant=None):
        base = CoresetKMeans(6, epsilon=0.7, delta=1e-6, bounds=(-4, 4), max_depth=5,
                             random_state=SEED, accountant=accountant).fit(X)
        return MorseMerging(base, 2, epsilon=0.3, delta=1e-6, random_state=SEED,
                            accountant=accountant).fit(X)

    assert _replay(lambda: _Returns(morse), blobs) > 0
    accountant = Accountant(Budget(1.0, 2e-6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = morse(blobs, accountant).privacy_report_
    # two fits, two bookings: the base's and the covariance pass's, exactly
    booked = [(b.epsilon, b.delta) for _, b in accountant.reservations]
    assert booked == [(pytest.approx(0.7, rel=1e-12), 1e-6), (pytest.approx(0.3, rel=1e-12),
                                                               1e-6)]
    assert report.planned.epsilon == pytest.approx(1.0, rel=1e-9)
    # the combined ledger composes the two zCDP blocks' rho together (zCDP composition), which
    # converts to less than the two conversions added: within the plan, never above it
    assert report.within_plan()
