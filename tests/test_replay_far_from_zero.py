"""Replay class (a): data far from zero.

Timestamps within one hour (bounds ``[1.7e9, 1.7e9 + 3600]`` for every feature), 200,000
records: every estimator whose releases include sums, and ``PrivateScaler``, recorded on the
data and replayed on its neighbours (``tests/_replay.py``), so each release's exact input may
move by at most its declared sensitivity. Arithmetic done in float64 *after* the exact engine
that centres rounded totals (``S - n mid``, ``Q - 2 mid S + n mid^2``) carries a rounding error
of about ``n mid^2 2**-53`` into the release, which does not cancel between neighbours; here it
is tens of times the sensitivity. The slack the harness allows for the last rounding of a
release's input is tightened to ``1e-12`` of its size (the default ``1e-9`` is meant for scores
and quantiles at any scale); every fit passes at that slack, and the planted fault at the end,
the scaler's sums centred after rounding, is caught. For sums of ``x`` alone, as DP-Lloyd
releases them, the float centring happens to be exact at this size (below ``2**22`` records on
bounds on the grid, ``fl(S)`` and ``n mid`` are exact floats): the last test takes 6 * 10^6
records, where it is not, and catches the same fault there.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager

import numpy as np
import pytest

from _replay import ReplayMismatch, check_neighbours, neighbours, record
from privclust import DPLloyd, MorseMerging, registry
from privclust.engine import LocalEngine
from privclust.engine.base import AssignmentStats
from privclust.preprocessing import PrivateScaler

LO, WIDTH = 1.7e9, 3600.0
N = 200_000
SEED = 5
#: Relative slack for the final rounding of a release's exact input (see the docstring).
TOLERANCE = 1e-12
#: Registry entries whose fits release no sums (counts only): checked below.
NO_SUMS = ("dbscan",)
ENTRIES = registry.ENTRIES


def _bounds(d: int) -> np.ndarray:
    return np.tile([LO, LO + WIDTH], (d, 1))


def _timestamps(n: int, d: int, seed: int = 0) -> np.ndarray:
    """Four bursts of events within the hour, to the millisecond."""
    rng = np.random.default_rng(seed)
    centres = LO + WIDTH * np.array([[0.2, 0.3], [0.7, 0.8], [0.3, 0.75], [0.8, 0.25]])[:, :d]
    X = centres[rng.integers(0, 4, n)] + rng.normal(0, 120, (n, d))
    return np.clip(X, LO, LO + WIDTH).round(3)


@pytest.fixture(scope="module")
def hour():
    return _timestamps(N, 2)


def _make(name, d=2):
    bounds = _bounds(d)
    if name == "scaler":
        return lambda: PrivateScaler(1.0, bounds=bounds, random_state=SEED)
    entry = ENTRIES[name]
    values = {dest: entry.example.get(dest) for dest in registry.OPTIONS}
    if name != "morse":
        return lambda: entry.build(values, epsilon=1.0, delta=None, bounds=bounds,
                                   random_state=SEED)
    base = ENTRIES[values["base"]]
    base_values = {dest: base.example.get(dest) for dest in registry.OPTIONS}

    def make():
        b = base.build(base_values | {"n_clusters": None, "n_components": None}, epsilon=1.0,
                       bounds=bounds)
        b.set_params(**{base.morse_base.size_param: values["n_components"]})
        return MorseMerging(b, values["n_clusters"], epsilon=1.0, random_state=SEED)

    return make


def _neighbours(X, name=None):
    named = neighbours(X, _bounds(X.shape[1]))
    if name == "coreset":  # the slowest fit (a few seconds each): the two extreme neighbours
        named = {k: named[k] for k in ("remove the last record",
                                       "add an outlier at the upper bound")}
    return named


def _check(make, X, named, plant=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # clipping: the data holder's diagnostic
        kwargs = {} if plant is None else {"plant": plant}
        return check_neighbours(make, X, named, tolerance=TOLERANCE, **kwargs)


SUMMING = [n for n in ENTRIES if n not in NO_SUMS] + ["scaler"]


@pytest.mark.parametrize("name", SUMMING)
def test_every_fit_that_sums_moves_its_releases_within_the_sensitivity_far_from_zero(
        name, hour):
    assert _check(_make(name), hour, _neighbours(hour, name)) > 0


def test_the_entries_left_out_release_no_sums():
    """An estimator added to the registry is checked above unless its fit releases no sums."""
    X = _timestamps(3000, 2)
    for name in NO_SUMS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = _make(name)().fit(X)
        targets = [r.target for r in model.privacy_report_.releases]
        assert targets and not any("sum" in t for t in targets), (name, targets)


# ---------------------------------------------------------------------- the planted fault
_ORIGINAL_STATS = LocalEngine.assignment_stats


def _centred_after_rounding(self, assignment, *, second_moments=False, squared_norms=False,
                            about=None):
    """The fault: the uncentred totals rounded to float64, then centred in float64."""
    st = _ORIGINAL_STATS(self, assignment, second_moments=second_moments,
                         squared_norms=squared_norms)
    if about is None:
        return st
    a, n = np.asarray(about, dtype=float), st.counts.astype(float)
    moments = None if st.moments is None else (
        st.moments - a[None, :, None] * st.sums[:, None, :]
        - st.sums[:, :, None] * a[None, None, :] + n[:, None, None] * np.outer(a, a))
    sq = None if st.sq_norms is None else st.sq_norms - 2.0 * st.sums @ a + n * (a @ a)
    return AssignmentStats(st.counts, st.sums - n[:, None] * a, moments, sq)


@contextmanager
def _plant_centring_after_rounding():
    LocalEngine.assignment_stats = _centred_after_rounding
    try:
        yield
    finally:
        LocalEngine.assignment_stats = _ORIGINAL_STATS


def test_the_harness_catches_sums_centred_after_rounding(hour):
    with pytest.raises(ReplayMismatch, match="squared rescaled records.*more than its "
                                             "declared sensitivity"):
        _check(_make("scaler"), hour, _neighbours(hour), plant=_plant_centring_after_rounding)


# ---------------------------------------------------------------------- the scaler at 10^6


def _movements(make, X, others) -> dict:
    """Per release target, the largest movement of its exact input over the neighbours, as a
    multiple of its declared sensitivity (L1, as the scaler's Laplace releases are)."""
    _, base = record(make, X)
    worst = {}
    for Xn in others:
        _, session = record(make, Xn)
        for a, b in zip(base.calls, session.calls, strict=True):
            if a.name == "laplace":
                moved = np.abs(np.asarray(a.data["values"]) - b.data["values"]).sum()
                target = a.public["target"]
                worst[target] = max(worst.get(target, 0.0),
                                    moved / a.public["l1_sensitivity"])
    return worst


def test_the_scalers_releases_move_within_their_sensitivity_on_a_million_timestamps():
    """The target: 10^6 timestamps within one hour (one feature). Centring the rounded sums
    of ``x`` and ``x^2`` in float64 moved the released sum of squares by about 166 times its
    sensitivity when one record was added; centred exactly in the engine, at most 1."""
    X = _timestamps(1_000_000, 1, seed=1).round()
    make = _make("scaler", d=1)
    rng = np.random.default_rng(2)
    others = [np.vstack([X, rng.uniform(LO, LO + WIDTH, (1, 1)).round()]) for _ in range(6)]
    others += [X[:-1], np.vstack([X, [[LO + WIDTH]]]), np.vstack([X, [[LO]]])]
    worst = _movements(make, X, others)
    assert len(worst) == 2 and max(worst.values()) <= 1.0 + 1e-12, worst
    with _plant_centring_after_rounding():  # the old arithmetic, for comparison: its
        planted = _movements(make, X, others)  # float64 result moves in steps of ~166
    assert max(planted.values()) > 10.0, planted
    named = {"add a record": others[0], "remove the last record": X[:-1],
             "add a record at the upper bound": others[-2]}
    assert _check(make, X, named) > 0


def test_dp_lloyds_sums_about_the_middle_move_within_the_sensitivity_beyond_2_22_records():
    """6 * 10^6 timestamps to the second in one cluster, bounds one hour and a second wide (the
    middle half a step off the grid): ``fl(S)`` and ``n mid`` are no longer exact, and the
    float centring ``(S - n mid) / half`` moved the sum by more than its sensitivity when the
    record at the upper bound was removed; the engine's exact centring does not."""
    bounds = np.array([[LO, LO + WIDTH + 1.0]])
    X = np.random.default_rng(0).integers(0, 3602, (6_000_000, 1)) + LO
    X[-1] = LO + WIDTH + 1.0

    def make():
        return DPLloyd(1, epsilon=1.0, n_iter=1, bounds=bounds, random_state=SEED)

    named = {"remove the last record (at the upper bound)": X[:-1]}
    assert _check(make, X, named) > 0
    with pytest.raises(ReplayMismatch, match="cluster sums of .* more than its declared "
                                             "sensitivity"):
        _check(make, X, named, plant=_plant_centring_after_rounding)
