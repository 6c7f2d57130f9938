"""MorseMerging (000 Alg. 1, 3, 4): TEVs of analytic mixtures, the hierarchy, prediction by the
flow, post-processing (no data read after the base fit) and bad input."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.cluster import hierarchy
from scipy.optimize import brentq

import privclust.engine.local as local
from privclust import io, viz
from privclust.cluster.dpm import DPM
from privclust.cluster.lloyd import DPLloyd
from privclust.cluster.mixture import DPGaussianMixture
from privclust.cluster.morse import (
    MixtureField,
    MorseMerging,
    cut_linkage,
    find_tevs,
    merge_clusters,
    pool_centres,
)
from privclust.metrics import ari
from privclust.privacy import Accountant, Budget


class FittedMixture:
    """A fitted mixture 'estimator' (the duck type MorseMerging accepts)."""

    def __init__(self, weights, means, covariances, bounds=None):
        self.weights_ = np.asarray(weights, float)
        self.means_ = np.asarray(means, float)
        self.covariances_ = np.asarray(covariances, float)
        if bounds is not None:
            self.bounds_ = np.asarray(bounds, float)


def _two():
    # different, axis-aligned covariances, means on the x axis: the saddle is on the x axis
    mu = np.array([[-1.0, 0.0], [1.2, 0.0]])
    cov = np.array([np.diag([0.3, 0.5]), np.diag([0.45, 0.2])])
    return MixtureField([0.45, 0.55], mu, cov), mu


def _three():
    ang = np.pi / 2 + np.arange(3) * 2 * np.pi / 3
    mu = np.c_[np.cos(ang), np.sin(ang)] * 1.5
    return MixtureField(np.full(3, 1 / 3), mu, np.array([0.25 * np.eye(2)] * 3)), mu


def _rot(theta):
    return np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])


# =========================================================================== TEV finder
def test_two_component_saddle_index_and_basins():
    F, mu = _two()
    g = find_tevs(F, mu)
    assert len(g["tevs"]) == 1
    t = g["tevs"][0]
    # reference: on the x axis grad_y = 0 by symmetry; solve grad_x = 0 between the modes
    x_star = brentq(lambda x: F.grad(np.array([[x, 0.0]]))[0, 0], -0.6, 0.8, xtol=1e-14)
    assert np.abs(t - [x_star, 0.0]).max() < 1e-6
    ev = np.linalg.eigvalsh(F.hess(t)[0])
    assert (ev < 0).sum() == 1 and np.abs(ev).min() > 1e-6
    # the two basins: the SEVs of centre 0 and centre 1
    assert sorted(g["tev_edges"][0]) == sorted(g["sev_of_centre"])
    assert g["sev_of_centre"][0] != g["sev_of_centre"][1]
    for k in range(2):  # each SEV is the mode near its centre
        s = g["sevs"][g["sev_of_centre"][k]]
        assert np.linalg.norm(F.grad(s)) < 1e-8 and np.linalg.norm(s - mu[k]) < 0.1


@pytest.mark.parametrize("metric", ["mixture", "euclidean"])
def test_three_component_saddles(metric):
    F, mu = _three()
    F.metric = metric
    g = find_tevs(F, mu)
    # reference saddle between centres 1 and 2 (bottom edge) on x = 0, rotated for the others
    y_star = brentq(lambda y: F.grad(np.array([[0.0, y]]))[0, 1], -1.2, -0.3, xtol=1e-14)
    ref = {frozenset((1, 2)): np.array([0.0, y_star])}
    ref[frozenset((0, 2))] = _rot(2 * np.pi / 3) @ ref[frozenset((1, 2))]
    ref[frozenset((0, 1))] = _rot(-2 * np.pi / 3) @ ref[frozenset((1, 2))]
    assert len(g["tevs"]) == 3
    sev = g["sev_of_centre"]
    assert len(set(sev.tolist())) == 3
    for t, (a, b) in zip(g["tevs"], g["tev_edges"], strict=True):
        centres = frozenset(int(np.flatnonzero(sev == s)[0]) for s in (a, b))
        assert np.abs(t - ref[centres]).max() < 1e-6, (t, ref[centres])
        ev = np.linalg.eigvalsh(F.hess(t)[0])
        assert (ev < 0).sum() == 1


def test_non_adjacent_pair_gets_no_direct_edge():
    # three collinear components: 0 and 2 are not adjacent (their basins do not touch)
    mu = np.array([[-2.0, 0.0], [0.0, 0.0], [2.0, 0.0]])
    F = MixtureField(np.full(3, 1 / 3), mu, np.array([0.2 * np.eye(2)] * 3))
    g = find_tevs(F, mu)
    sev = g["sev_of_centre"]
    pairs = {frozenset(np.flatnonzero(np.isin(sev, e)).tolist()) for e in g["tev_edges"]}
    assert pairs == {frozenset((0, 1)), frozenset((1, 2))}


# =========================================================================== hierarchy
def _check_linkage(Z, n):
    assert Z.shape == (n - 1, 4)
    assert np.isfinite(Z).all() and (Z[:, 2] >= 0).all()
    assert (np.diff(Z[:, 2]) >= 0).all()
    assert hierarchy.is_valid_linkage(Z) and hierarchy.is_monotonic(Z)


def test_dendrogram_heights_monotone_on_a_mixture_with_negative_f():
    rng = np.random.default_rng(0)
    mu = rng.uniform(-0.6, 0.6, (8, 3))
    # tiny covariances: p >> 1, so f = -ln p is negative at the modes and TEVs
    F = MixtureField(rng.dirichlet(np.ones(8)), mu, np.array([0.004 * np.eye(3)] * 8))
    g = find_tevs(F, mu)
    assert (F.f(g["sevs"]) < 0).any()
    Z, _ = merge_clusters(
        g["sev_of_centre"], F.f(g["sevs"]), g["tev_edges"], g["tev_values"], g["line_barrier"]
    )
    _check_linkage(Z, 8)


def test_disconnected_tev_graph_and_shared_basins():
    # leaves 0, 1 share SEV 0; SEV 1 - 2 joined by a TEV; SEV 3 has no TEV at all
    sev_of_leaf = [0, 0, 1, 2, 3]
    lb = np.full((5, 5), 7.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Z, n_fb = merge_clusters(
            sev_of_leaf,
            np.array([-3.0, -2.0, -2.5, -1.0]),
            np.array([[1, 2]]),
            np.array([-0.5]),
            lb,
        )
    _check_linkage(Z, 5)
    assert n_fb == 2  # {0,1} and {2,3} and {4}: two merges by segment barriers
    assert Z[0, 2] == 0.0 and math.isclose(Z[1, 2], -0.5 + 3.0)
    np.testing.assert_array_equal(cut_linkage(Z, 5, 3), [0, 0, 1, 1, 2])


# =========================================================================== the estimator
def _moons(n=600, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, np.pi, n)
    a = np.c_[np.cos(t), np.sin(t)] * 0.5 + [-0.25, -0.1]
    b = np.c_[0.5 - np.cos(t) * 0.5, 0.15 - np.sin(t) * 0.5] + [-0.25, -0.1]
    X = np.vstack([a, b]) + 0.04 * rng.standard_normal((2 * n, 2))
    return np.clip(X, -1, 1), np.repeat([0, 1], n)


def test_merging_non_convex_clusters_beats_the_base():
    # enough data that the private mixture resolves the moons in most runs; over five seeds
    # the Morse step must win clearly on average and find both moons in at least three
    X, y = _moons(3000)
    base_ari, morse_ari = [], []
    for seed in range(5):
        base = DPGaussianMixture(
            10, epsilon=20.0, delta=1e-6, bounds=(-1, 1), random_state=seed
        ).fit(X)
        mm = MorseMerging(base, 2).fit(X)
        assert mm.n_clusters_ == 2 and set(np.unique(mm.labels_)) == {0, 1}
        _check_linkage(mm.linkage_, mm.leaves_.size)
        assert mm.dendrogram_["leaves"]
        assert mm.morse_time_ < 5.0
        base_ari.append(ari(y, base.labels_))
        morse_ari.append(ari(y, mm.labels_))
        # the paper's inductive prediction (Thm 5.3) agrees with the default on most points
        # wherever the moons were found
        if morse_ari[-1] > 0.95:
            flow = MorseMerging(base, 2, predict_method="flow").fit(None)
            assert ari(mm.labels_, flow.predict(X)) > 0.8
    assert np.mean(morse_ari) > np.mean(base_ari) + 0.3
    assert sum(a > 0.95 for a in morse_ari) >= 3


def test_default_predict_is_the_base_assignment_mapped_to_clusters():
    X, _ = _moons(300)
    base = DPGaussianMixture(6, epsilon=10.0, delta=1e-6, bounds=(-1, 1), random_state=1).fit(X)
    mm = MorseMerging(base, 2).fit(X)
    assert mm.base_assignment_ == "likelihood"
    np.testing.assert_array_equal(mm.labels_, mm.component_labels_[base.predict(X)])
    lloyd = DPLloyd(8, epsilon=2.0, bounds=(-1, 1), random_state=0).fit(X)
    mc = MorseMerging(lloyd, 2, epsilon=1.0, random_state=0).fit(X)
    assert mc.base_assignment_ == "nearest"
    np.testing.assert_array_equal(mc.labels_, mc.component_labels_[lloyd.predict(X)])


def test_runts_do_not_take_a_cluster():
    # leaves 0-2 heavy, leaf 3 light; Z merges 0-1, then 0-2, then the runt 3 last (highest
    # barrier): the plain cut at 2 clusters isolates the runt, the runt rule keeps the two
    # heavy groups apart and joins the runt to the group it meets first
    Z = np.array([[0, 1, 1.0, 2], [2, 4, 2.0, 3], [3, 5, 3.0, 4]], dtype=float)
    w = np.array([0.4, 0.3, 0.28, 0.02])
    np.testing.assert_array_equal(cut_linkage(Z, 4, 2), [0, 0, 0, 1])
    np.testing.assert_array_equal(cut_linkage(Z, 4, 2, w, 0.03), [0, 0, 1, 1])
    np.testing.assert_array_equal(cut_linkage(Z, 4, 2, w, 0.0), [0, 0, 0, 1])
    # not enough heavy clusters for the request: runts fill the places in the plain order
    np.testing.assert_array_equal(cut_linkage(Z, 4, 4, w, 0.03), [0, 1, 2, 3])
    np.testing.assert_array_equal(
        cut_linkage(Z, 4, 3, [0.9, 0.04, 0.04, 0.02], 0.05), cut_linkage(Z, 4, 3)
    )


def test_pool_centres_keeps_heavy_centres_and_maps_every_centre():
    rng = np.random.default_rng(0)
    heavy = np.array([[-0.5, -0.5], [0.5, 0.5], [0.5, -0.5]])
    light = heavy[rng.integers(0, 3, 27)] + 0.05 * rng.standard_normal((27, 2))
    centres = np.vstack([heavy, light])
    sizes = np.r_[[1000, 1000, 1000], np.full(27, 5)]
    pooled, owner = pool_centres(centres, sizes, 3)
    assert pooled.shape == (3, 2) and owner.shape == (30,)
    assert set(owner.tolist()) == {0, 1, 2}
    # every light centre joins the heavy centre it lies next to, which barely moves
    near = np.argmin(((light[:, None] - heavy[None]) ** 2).sum(axis=2), axis=1)
    np.testing.assert_array_equal(owner[3:], owner[:3][near])
    assert np.abs(pooled[owner[:3]] - heavy).max() < 0.01
    same, idx = pool_centres(centres, sizes, 30)
    np.testing.assert_array_equal(same, centres)
    np.testing.assert_array_equal(idx, np.arange(30))


def test_many_leaves_are_pooled_before_the_covariance_pass():
    X, _ = _moons(1000)
    dpm = DPM(epsilon=4.0, bounds=(-1, 1), random_state=0).fit(X)
    assert dpm.n_clusters_ > 3
    mm = MorseMerging(dpm, 2, epsilon=1.0, max_components=3, random_state=0).fit(X)
    assert mm.weights_.size == 3 and mm.means_.shape == (3, 2)
    assert mm.pooled_from_.shape == (dpm.n_clusters_,)
    assert set(mm.pooled_from_.tolist()) == {0, 1, 2}
    assert mm.privacy_report_.releases[-1].n_released == 3


def test_ward_orders_the_merges_inside_one_basin():
    # four leaves in one basin: two heavy pairs far apart and a light leaf near nothing; cut at
    # 2, Ward keeps the heavy pairs apart and never leaves the light leaf alone
    sev_of_leaf = [0, 0, 0, 0, 0]
    means = np.array([[-1.0, 0.0], [-0.9, 0.0], [1.0, 0.0], [0.9, 0.0], [0.0, 0.9]])
    w = np.array([0.3, 0.3, 0.2, 0.18, 0.02])
    lb = np.zeros((5, 5))
    lb[4, :] = lb[:, 4] = 5.0  # the straight-segment order would isolate leaf 4
    Z, _ = merge_clusters(
        sev_of_leaf,
        np.array([-1.0]),
        np.zeros((0, 2), int),
        np.zeros(0),
        lb,
        weights=w,
        means=means,
    )
    _check_linkage(Z, 5)
    lab = cut_linkage(Z, 5, 2)
    assert lab[0] == lab[1] and lab[2] == lab[3] and lab[0] != lab[2]
    Z_lb, _ = merge_clusters(sev_of_leaf, np.array([-1.0]), np.zeros((0, 2), int), np.zeros(0), lb)
    assert cut_linkage(Z_lb, 5, 2)[4] != cut_linkage(Z_lb, 5, 2)[0]


def test_no_data_is_read_after_the_base_fit(monkeypatch):
    X, _ = _moons(300)
    base = DPGaussianMixture(6, epsilon=10.0, delta=1e-6, bounds=(-1, 1), random_state=1).fit(X)

    def refuse(*a, **k):
        raise AssertionError("the Morse step read data")

    for name in ("gaussian_assignment_stats", "nearest_centre_stats", "count", "__init__"):
        monkeypatch.setattr(local.LocalEngine, name, refuse)
    mm = MorseMerging(base, 2).fit(None)  # no X at all
    assert mm.linkage_.shape == (mm.leaves_.size - 1, 4)
    mm.predict(X)  # prediction is the model applied to new points, no engine either
    rep = mm.privacy_report_
    assert [r.to_dict() for r in rep.releases] == [
        r.to_dict() for r in base.privacy_report_.releases
    ]
    assert rep.total() == base.privacy_report_.total()
    assert any("post-processing" in n and "Thm 5.4" in n for n in rep.notes)


def test_centre_model_reads_data_once_and_the_budget_adds_up(monkeypatch):
    X, y = _moons(400)
    calls = []
    orig = local.LocalEngine.nearest_centre_stats

    def spy(self, centres, second_moments=False):
        calls.append(second_moments)
        return orig(self, centres, second_moments)

    acc = Accountant(Budget(2.0, 1e-4))
    lloyd = DPLloyd(8, epsilon=1.0, bounds=(-1, 1), random_state=0).fit(X)
    monkeypatch.setattr(local.LocalEngine, "nearest_centre_stats", spy)
    mm = MorseMerging(lloyd, 2, epsilon=1.0, random_state=0, accountant=acc).fit(X)
    assert calls == [True]  # the covariance pass: one query
    rep = mm.privacy_report_
    cov = [r for r in rep.releases if r.rho > 0]
    assert len(cov) == 1 and cov[0].n_released == 8
    total = rep.total()
    assert total.epsilon <= 2.0 + 1e-9  # DPLloyd's 1.0 plus the pass's 1.0
    assert total.epsilon > 1.5
    assert rep.within_plan()
    # an unfitted centre base: one budget split between the base and the pass
    mm2 = MorseMerging(
        DPLloyd(8, bounds=(-1, 1), random_state=0),
        2,
        epsilon=2.0,
        covariance_share=0.25,
        random_state=0,
    ).fit(X)
    assert math.isclose(mm2.base_estimator_.epsilon, 1.5)
    assert mm2.privacy_report_.total().epsilon <= 2.0 + 1e-9


def test_one_centre_and_too_many_clusters():
    one = FittedMixture([1.0], [[0.1, 0.2]], [0.1 * np.eye(2)], bounds=[[-1, 1], [-1, 1]])
    with pytest.warns(UserWarning, match="live component"):
        mm = MorseMerging(one, 3).fit(None)
    assert mm.linkage_.shape == (0, 4) and mm.n_clusters_ == 1
    np.testing.assert_array_equal(mm.predict(np.zeros((4, 2))), 0)


def test_singular_covariance_is_refused_with_a_clear_message():
    bad = FittedMixture([0.5, 0.5], [[0, 0], [1, 1]], [np.eye(2), [[1.0, 1.0], [1.0, 1.0]]])
    with pytest.raises(ValueError, match="singular"):
        MorseMerging(bad, 2).fit(None)


def test_zero_weight_component_is_left_out_and_still_labelled():
    mix = FittedMixture(
        [0.5, 0.0, 0.5],
        [[-0.5, 0], [0.9, 0.9], [0.5, 0]],
        [0.02 * np.eye(2)] * 3,
        bounds=[[-1, 1], [-1, 1]],
    )
    mm = MorseMerging(mix, 2).fit(None)
    np.testing.assert_array_equal(mm.leaves_, [0, 2])
    assert mm.component_labels_[1] in (0, 1)
    assert mm.component_labels_[0] != mm.component_labels_[2]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_clusters": 0}, "n_clusters"),
        ({"metric": "x"}, "metric"),
        ({"predict_method": "x"}, "predict_method"),
        ({"perturbation": 0}, "perturbation"),
        ({"covariance_share": 1.0}, "covariance_share"),
        ({"min_weight": 1.0}, "min_weight"),
        ({"min_cluster_weight": -0.1}, "min_cluster_weight"),
        ({"merge_order": "x"}, "merge_order"),
        ({"max_components": 0}, "max_components"),
    ],
)
def test_bad_parameters(kwargs, match):
    mix = FittedMixture([1.0], [[0.0]], [[[1.0]]])
    with pytest.raises(ValueError, match=match):
        MorseMerging(mix, **({"n_clusters": 1} | kwargs)).fit(None)


def test_needs_data_or_budget_when_it_must():
    with pytest.raises(ValueError, match="base_estimator"):
        MorseMerging(None).fit(None)
    with pytest.raises(ValueError, match="not fitted"):
        MorseMerging(DPGaussianMixture(2, bounds=(-1, 1))).fit(None)
    X, _ = _moons(100)
    lloyd = DPLloyd(3, epsilon=1.0, bounds=(-1, 1), random_state=0).fit(X)
    with pytest.raises(ValueError, match="epsilon"):
        MorseMerging(lloyd, 2).fit(X)


def test_to_dict_round_trip_and_plots(tmp_path):
    X, _ = _moons(300)
    base = DPGaussianMixture(6, epsilon=10.0, delta=1e-6, bounds=(-1, 1), random_state=1).fit(X)
    mm = MorseMerging(base, 2).fit(X)
    m2 = io.model_from_dict(io.model_to_dict(mm))
    np.testing.assert_array_equal(m2.predict(X), mm.predict(X))
    np.testing.assert_array_equal(m2.linkage_, mm.linkage_)
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2)
    viz.plot_dendrogram(mm, ax=a1)
    viz.plot_morse_density(mm, X, ax=a2, grid=40)
    fig.savefig(tmp_path / "morse.png")
    plt.close(fig)
    assert (tmp_path / "morse.png").stat().st_size > 0


def test_random_state_seeds_the_whole_pipeline():
    """An unfitted base draws from MorseMerging's generator (its own seed is replaced in the
    clone), so the base and the covariance pass never replay one seed's noise; runs with the
    same random_state are identical and the user's base is untouched."""
    X, _ = _moons(400)
    base = DPLloyd(8, bounds=(-1, 1), random_state=0)

    def run(seed):
        return MorseMerging(base, 2, epsilon=2.0, random_state=seed).fit(X)

    a, b, c = run(3), run(3), run(4)
    np.testing.assert_array_equal(a.base_estimator_.cluster_centers_,
                                  b.base_estimator_.cluster_centers_)
    np.testing.assert_array_equal(a.covariances_, b.covariances_)
    assert not np.array_equal(a.base_estimator_.cluster_centers_,
                              c.base_estimator_.cluster_centers_)
    assert base.random_state == 0 and not hasattr(base, "cluster_centers_")
