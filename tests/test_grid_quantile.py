"""The grid quantile: a private quantile over public candidates read through exact counts only
(:func:`privclust.privacy.mechanisms.grid_quantile`), its privacy audit, and its use by
CoresetKMeans above ``GRID_QUANTILE_RECORDS`` released records: the same release on the NumPy
and Dask engines, no value per record brought to the client, releases below it unchanged."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from _audit import assert_private, audit, categorical_events
from privclust import CoresetKMeans
from privclust.cluster._coreset import data as coreset_data
from privclust.cluster._coreset import quantile as coreset_quantile
from privclust.privacy import (
    Budget,
    Mechanisms,
    PrivacyReport,
    RandomSource,
    exponential_mechanism_probabilities,
)
from privclust.privacy.mechanisms import grid_quantile, quantile_grid

CONFIDENCE = 0.999


def _mechanisms(rng) -> Mechanisms:
    return Mechanisms(RandomSource(rng, "audit", False), PrivacyReport("audit", Budget(1e9, 0.5)))


def _law(hist, quantile, epsilon):
    """The exact output law over the candidates, written independently of the mechanism."""
    below = np.cumsum(hist)
    return exponential_mechanism_probabilities(-np.abs(below - quantile * below[-1]), 1.0,
                                               epsilon)


# ------------------------------------------------------------------------------ the mechanism
def test_the_grid_is_public_and_spans_the_range():
    g = quantile_grid(1e-6, 3.0, 4096, log_scale=True)
    assert g[0] == 1e-6 and g[-1] == 3.0 and np.all(np.diff(g) > 0)
    np.testing.assert_allclose(g[1:] / g[:-1], (3e6) ** (1 / 4095), rtol=1e-9)
    np.testing.assert_allclose(quantile_grid(-1.0, 1.0, 5), [-1, -0.5, 0, 0.5, 1])
    with pytest.raises(ValueError, match="lo > 0"):
        quantile_grid(0.0, 1.0, 8, log_scale=True)
    with pytest.raises(ValueError, match="lo < hi"):
        quantile_grid(1.0, 1.0, 8)


def test_counts_per_cell_match_the_ranks():
    """``cumsum(grid_counts)[j]`` is the number of values at most ``grid[j]`` (values above
    the grid counted in the last cell, as if clipped to it)."""
    rng = np.random.default_rng(0)
    grid = quantile_grid(0.01, 10.0, 64, log_scale=True)
    v = np.concatenate([rng.lognormal(0.0, 1.5, 5000), grid[:10], [0.0, 50.0]])
    counts = coreset_data.grid_counts(v, grid)
    below = np.cumsum(counts)
    np.testing.assert_array_equal(below[:-1], (v[None, :] <= grid[:-1, None]).sum(axis=1))
    assert below[-1] == v.size


def test_draws_follow_the_exponential_mechanism():
    hist = np.array([5, 0, 12, 30, 8, 1, 0, 4])
    grid = np.linspace(0.0, 1.0, 8)
    rng = np.random.default_rng(4)
    draws = np.array([grid_quantile(rng, hist, grid, 0.5, 0.7) for _ in range(20000)])
    freq = np.array([(draws == g).mean() for g in grid])
    np.testing.assert_allclose(freq, _law(hist, 0.5, 0.7), atol=0.012)


def test_the_release_is_recorded():
    mech = _mechanisms(np.random.default_rng(0))
    grid = quantile_grid(0.1, 10.0, 16, log_scale=True)
    out = mech.grid_quantile(np.arange(16), grid, 0.9, 0.25, target="radius")
    assert out in grid
    (rel,) = mech.report.releases
    assert rel.mechanism == "exponential (grid quantile)"
    assert (rel.epsilon, rel.sensitivity, rel.scale) == (0.25, 1.0, 8.0)
    assert "16 public candidates" in rel.note
    with pytest.raises(ValueError, match="differ"):
        mech.grid_quantile(np.arange(15), grid, 0.9, 0.25, target="radius")


# ---------------------------------------------------------------------------------- the audit
# A low quantile (0.1): a record added at the bottom of the range raises every count by one and
# the target by only 0.1, so the utility of candidates below the target rises by 0.9 and of
# those above it falls by 0.9 (found by a search over small histograms: the largest loss).
AUDIT_Q, AUDIT_EPS = 0.1, 1.0
AUDIT_GRID = np.linspace(0.0, 1.0, 8)
AUDIT_H0 = np.array([0, 0, 0, 3, 2, 3, 1, 0])
AUDIT_H1 = AUDIT_H0 + np.eye(8, dtype=np.int64)[0]  # one record at 0.0
AUDIT_TRIALS = 6_000


def _sampler(hist, epsilon):
    def sample(rng, n):
        mech = _mechanisms(rng)
        return np.fromiter((mech.grid_quantile(hist, AUDIT_GRID, AUDIT_Q, epsilon,
                                               target="audit") for _ in range(n)),
                           dtype=float, count=n)

    return sample


def _exact_loss(epsilon):
    return float(np.max(np.abs(np.log(_law(AUDIT_H0, AUDIT_Q, epsilon))
                               - np.log(_law(AUDIT_H1, AUDIT_Q, epsilon)))))


def test_grid_quantile_passes_audit():
    # the neighbours' counts are the counts of real values (a record added at the grid's foot)
    values = np.array([0.4, 0.42, 0.4, 0.5, 0.56, 0.65, 0.7, 0.71, 0.8])
    np.testing.assert_array_equal(coreset_data.grid_counts(values, AUDIT_GRID), AUDIT_H0)
    np.testing.assert_array_equal(coreset_data.grid_counts(np.append(values, 0.0), AUDIT_GRID),
                                  AUDIT_H1)
    exact = _exact_loss(AUDIT_EPS)
    assert 0.7 * AUDIT_EPS < exact <= AUDIT_EPS  # cross-check: the exact loss on this pair
    res = assert_private(AUDIT_EPS, 0.0, _sampler(AUDIT_H0, AUDIT_EPS),
                         _sampler(AUDIT_H1, AUDIT_EPS), categorical_events(AUDIT_GRID),
                         AUDIT_TRIALS, seed=61, confidence=CONFIDENCE)
    assert res.epsilon_lower > 0.35 * AUDIT_EPS, str(res)
    assert res.epsilon_lower <= exact


def test_grid_quantile_with_half_the_noise_is_caught():
    """The same mechanism at twice the claimed epsilon (half the noise) fails the audit."""
    assert _exact_loss(2 * AUDIT_EPS) > 1.4 * AUDIT_EPS
    res = audit(_sampler(AUDIT_H0, 2 * AUDIT_EPS), _sampler(AUDIT_H1, 2 * AUDIT_EPS),
                categorical_events(AUDIT_GRID), 8_000, seed=62, confidence=CONFIDENCE)
    assert res.epsilon_lower > AUDIT_EPS, str(res)


# ---------------------------------------------------------------------------- CoresetKMeans
def _mixture(n, d, k, seed):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-6, 6, size=(k, d))
    X = centres[rng.integers(0, k, n)] + rng.normal(scale=0.6, size=(n, d))
    X[:3] = 9.5
    return X


FITS = {  # given k (Lloyd steps), and projected without k (the data radius too)
    "2d-k": (lambda: _mixture(3000, 2, 4, 1),
             lambda: CoresetKMeans(4, epsilon=1.0, bounds=(-9, 9), random_state=3)),
    "12d-no-k": (lambda: _mixture(3000, 12, 3, 2),
                 lambda: CoresetKMeans(epsilon=2.0, bounds=(-9, 9), random_state=5)),
}


def _mechanisms_of(model):
    return [r.mechanism for r in model.privacy_report_.releases]


def test_the_threshold_is_on_the_released_count():
    assert coreset_quantile.GRID_QUANTILE_RECORDS == 1 << 24
    assert not coreset_quantile.uses_grid(1 << 24)
    assert coreset_quantile.uses_grid((1 << 24) + 1)


@pytest.mark.parametrize("case", list(FITS))
def test_below_the_threshold_the_quantiles_sort_the_distances(case):
    data, est = FITS[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = est().fit(data())
    kinds = _mechanisms_of(m)
    assert "exponential (quantile)" in kinds and "exponential (grid quantile)" not in kinds


@pytest.mark.parametrize("case", list(FITS))
def test_above_the_threshold_both_engines_agree(case, dask_client, monkeypatch):
    da = pytest.importorskip("dask.array")
    from test_dask_coreset import _same_fit

    monkeypatch.setattr(coreset_quantile, "GRID_QUANTILE_RECORDS", 1000)
    data, est = FITS[case]
    X = data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = est().fit(X)
        kinds = _mechanisms_of(a)
        assert "exponential (grid quantile)" in kinds
        assert "exponential (quantile)" not in kinds
        for chunks in ((7, 1493, 1500), (5, 0, 2995)):
            _same_fit(a, est().fit(da.from_array(X, chunks=(chunks, X.shape[1]))))


def _fit_without_values_on_the_client(monkeypatch):
    da = pytest.importorskip("dask.array")
    from privclust.engine.dask import DaskData

    def gathered(*args, **kwargs):
        raise AssertionError("values per record were gathered on the client")

    X = _mixture(3000, 12, 3, 2)
    Xd = da.from_array(X, chunks=((1000, 0, 2000), 12))
    monkeypatch.setattr(coreset_data, "_concat", gathered)
    monkeypatch.setattr(DaskData, "__getitem__", gathered)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        monkeypatch.setattr(DaskData, "__array__", gathered)
        return CoresetKMeans(3, epsilon=2.0, bounds=(-9, 9), random_state=5).fit(Xd)


def test_above_the_threshold_no_value_per_record_comes_to_the_client(dask_client, monkeypatch):
    """Distances are counted per chunk into the public grid: the client gets the counts (below
    the threshold, the sort of the distances gathers one value per record: caught here)."""
    with pytest.raises(AssertionError, match="gathered on the client"):
        _fit_without_values_on_the_client(monkeypatch)
    monkeypatch.setattr(coreset_quantile, "GRID_QUANTILE_RECORDS", 1000)
    model = _fit_without_values_on_the_client(monkeypatch)
    assert "exponential (grid quantile)" in _mechanisms_of(model)


def test_above_the_threshold_the_fit_replays_on_a_neighbour(monkeypatch):
    """The replay harness: every exact input moves by at most its sensitivity (the grid's
    counts by 1 in L1) and the model follows from the releases alone."""
    from _replay import check_neighbour

    monkeypatch.setattr(coreset_quantile, "GRID_QUANTILE_RECORDS", 1000)
    X = _mixture(3000, 2, 4, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert check_neighbour(FITS["2d-k"][1], X, np.vstack([X, X[:1] * 0.5])) > 0
