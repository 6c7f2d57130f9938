"""The planner: it reads no data, its numbers match the fitted estimators', and its DPM
prediction matches measured fits on a small generated set."""

from __future__ import annotations

import json
import statistics
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs

import privclust.cluster._base as base_mod
import privclust.engine.local as local_mod
from privclust import (
    DPDBSCAN,
    DPM,
    DPGaussianMixture,
    DPLloyd,
    KMeansGuarantee,
    MorseMerging,
)
from privclust.planner import FitPlan, plan, plot_quality_curve, quality_curve
from privclust.registry import ENTRIES, OPTIONS

BOUNDS = (-3.0, 3.0)


def _fit(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X)


def _estimator(name):
    entry = ENTRIES[name]
    values = {dest: entry.example.get(dest) for dest in OPTIONS}
    if name == "morse":
        base = ENTRIES[values["base"]].build(values, epsilon=1.0, delta=None, bounds=BOUNDS)
        return MorseMerging(base, values["n_clusters"], epsilon=1.0)
    return entry.build(values, epsilon=1.0, delta=None, bounds=BOUNDS)


def test_plan_reads_no_data(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the planner touched the data path")

    for name in dir(local_mod.LocalEngine):
        if not name.startswith("__") and callable(getattr(local_mod.LocalEngine, name)):
            monkeypatch.setattr(local_mod.LocalEngine, name, refuse)
    monkeypatch.setattr(local_mod.LocalEngine, "__init__", refuse)
    monkeypatch.setattr(base_mod, "check_X", refuse)
    monkeypatch.setattr(base_mod, "check_data", refuse)
    with pytest.raises(AssertionError):  # the patches do bite a fit
        DPM(epsilon=1.0, bounds=BOUNDS).fit(np.zeros((10, 2)))
    for name in ENTRIES:
        fp = plan(_estimator(name), (2_000, 50_000), d=2, expected_clusters=4)
        assert isinstance(fp, FitPlan) and len(fp.ends) == 2, name
        assert fp.can[0] and fp.cannot[0], name
        json.dumps(fp.to_dict())


def test_dpm_plan_matches_fit():
    X, _ = make_blobs(8000, 3, centers=4, center_box=(-2, 2), cluster_std=0.2, random_state=1)
    est = DPM(epsilon=1.0, bounds=BOUNDS, max_depth=4, random_state=0)
    fp = plan(est, X.shape[0], expected_clusters=4, d=3)
    m = _fit(est, X)
    assert fp.min_cluster_size == pytest.approx(m.min_cluster_size_, rel=0.03)
    assert fp.delta_used == pytest.approx(m.delta_, rel=0.05)
    assert len(fp.split_epsilon_per_level) == 4
    assert fp.split_sensitivity_per_level[0] == pytest.approx((0.3 / (1 / 12) + 5.0) / 8000)
    assert np.sum(fp.count_epsilon_per_level) == pytest.approx(0.18)
    fixed = plan(DPM(epsilon=1.0, bounds=BOUNDS, min_cluster_size=123), 8000, d=3)
    assert fixed.min_cluster_size == 123.0


@pytest.mark.parametrize("eps", [1.0, 0.08])
def test_dpm_predicted_clusters_match_measured(eps):
    X, _ = make_blobs(20000, 4, centers=8, center_box=(-40, 40), cluster_std=1.0,
                      random_state=3)
    bounds = (-50, 50)
    fp = plan(DPM(epsilon=eps, bounds=bounds, max_depth=4), X.shape[0], d=4,
              expected_clusters=8)
    seen = [_fit(DPM(epsilon=eps, bounds=bounds, max_depth=4, random_state=s), X).n_clusters_
            for s in range(5)]
    observed = statistics.median(seen)
    assert abs(fp.expected_clusters - observed) <= 0.25 * observed, (fp.expected_clusters, seen)


def test_dpm_prediction_falls_with_epsilon_and_size():
    curve = quality_curve(DPM(bounds=(-100, 100)), 100_000, [0.05, 0.1, 0.5, 2.0], d=10,
                          expected_clusters=64)
    vals = [v[0] for v in curve["values"]]
    assert vals == sorted(vals) and vals[0] < 40 and vals[-1] > 63
    fp = plan(DPM(epsilon=0.25, bounds=(-100, 100)), (20_000, 100_000), d=10,
              expected_clusters=64)
    low, high = fp.expected_clusters
    assert low < high
    assert "at n = 20,000" in str(fp)


def test_dbscan_plan_matches_fit():
    X, _ = make_blobs(3000, centers=[[0, 0], [1.5, 1.5]], cluster_std=0.3, random_state=0)
    est = DPDBSCAN(epsilon=1.0, eps=0.3, min_samples=10, bounds=BOUNDS, random_state=0)
    fp = plan(est, X.shape[0], d=2, expected_clusters=2)
    m = _fit(est, X)
    assert fp.histogram == m.histogram_ == "dense"
    assert fp.n_cells == m.n_cells_ and fp.cell_width == pytest.approx(m.cell_width_)
    assert fp.kappa_core == m.kappa_core_
    for ours, theirs in [(fp.gamma_lower, m.gamma_lower_), (fp.gamma_upper, m.gamma_upper_),
                         (fp.tau, m.tau_), (fp.min_samples_effective, m.min_samples_effective_),
                         (fp.core_threshold, m.core_threshold_)]:
        assert ours == pytest.approx(theirs)
    assert len(m.span_cells_) <= fp.max_core_cells
    sparse = DPDBSCAN(epsilon=1.0, eps=0.3, min_samples=10, bounds=BOUNDS, histogram="sparse",
                      random_state=0)
    sp = plan(sparse, X.shape[0], d=2)
    ms = _fit(sparse, X)
    assert sp.histogram == "sparse" and abs(sp.threshold - ms.threshold_) <= 1


def test_kmeans_plan_matches_fit():
    X, _ = make_blobs(6000, 2, centers=3, center_box=(-2, 2), cluster_std=0.2, random_state=2)
    est = DPLloyd(epsilon=1.0, n_clusters=3, bounds=BOUNDS, random_state=0)
    fp = plan(est, X.shape[0], d=2)
    assert fp.n_iter == _fit(est, X).n_iter_
    # the noise is what the fit draws: the Laplace scale the report records, per coordinate
    fixed = DPLloyd(epsilon=1.0, n_clusters=3, n_iter=2, bounds=BOUNDS, random_state=0)
    fpf = plan(fixed, X.shape[0], d=2)
    rel = [r for r in _fit(fixed, X).privacy_report_.releases if "sums" in r.target]
    assert fpf.noise_per_coordinate == pytest.approx(np.sqrt(2) * rel[-1].scale * 3.0)
    kg = KMeansGuarantee(epsilon=1.0, n_clusters=3, max_iter=3, bounds=BOUNDS, random_state=0)
    assert plan(kg, 6000, d=2).n_iter == _fit(kg, X).n_iter_
    assert fp.centre_error == pytest.approx(fp.noise_per_coordinate / 2000)


def test_mixture_plan_matches_fit():
    X, _ = make_blobs(4000, 2, centers=3, center_box=(-2, 2), cluster_std=0.3, random_state=0)
    for delta in (1e-6, None):
        est = DPGaussianMixture(3, epsilon=1.0, delta=delta, n_iter=3, bounds=BOUNDS,
                                random_state=0)
        fp = plan(est, X.shape[0], d=2)
        m = _fit(est, X)
        assert fp.sigma == pytest.approx(m.sigma_, rel=1e-9 if delta else 0.02)
        assert fp.min_count == pytest.approx(2 * m.sigma_, rel=0.02)


def test_inputs_are_checked():
    with pytest.raises(ValueError, match="d .*required"):
        plan(DPM(bounds=(0, 1)), 1000)
    with pytest.raises(ValueError, match="public bounds"):
        plan(DPM(bounds="private"), 1000, d=2)
    with pytest.raises(ValueError, match="n range must be"):
        plan(DPM(bounds=(0, 1)), (5000, 100), d=2)
    with pytest.raises(TypeError, match="no model"):
        plan(object(), 1000, d=2)
    fp = plan(DPM(bounds=[(0, 1), (0, 2)]), 1000)
    assert fp.d == 2
    with pytest.raises(AttributeError):
        _ = fp.sigma


def test_plot_quality_curve():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    ax = plot_quality_curve(DPLloyd(n_clusters=4, bounds=BOUNDS), (1000, 10_000),
                            [0.1, 1.0], d=2, observed=([0.1, 1.0], [0.5, 0.05]))
    assert len(ax.lines) == 3
    matplotlib.pyplot.close("all")


def test_command_line_plan_and_estimator_method(capsys):
    from privclust import DPM, cli

    rc = cli.main(["plan", "--algorithm", "dpm", "--epsilon", "0.5", "--bounds", "-100", "100",
                   "--n", "20000", "--d", "10", "--expected-clusters", "8"])
    out = capsys.readouterr().out
    assert rc == 0 and "tau_e" in out and "8 clusters expected" in out
    rc = cli.main(["plan", "--algorithm", "lloyd", "--n-clusters", "4", "--epsilon", "1",
                   "--bounds", "-1", "1", "--n", "1000", "5000", "--d", "2", "--json"])
    assert rc == 0 and '"n"' in capsys.readouterr().out
    via_method = DPM(0.5, bounds=(-100, 100)).plan(20000, d=10, expected_clusters=8)
    assert "tau_e" in str(via_method)
    assert cli.main(["plan", "--epsilon", "1", "--bounds", "private", "--n", "100",
                     "--d", "2"]) == 2
    assert "needs public bounds" in capsys.readouterr().err
