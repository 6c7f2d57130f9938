"""LSHSplits: sensitivities, the ledger against the noise actually drawn, exactly k centres,
utility, bad input, and the engine's half-space regroup.

LSH-Splits releases only through existing mechanisms (two-sided geometric counts, analytic
Gaussian or Laplace sums), so what is audited is what the estimator claims about them: the
sensitivity of every released statistic (replayed on neighbouring data sets along the same public
tree) and the noise scale of every draw (instrumented, checked against the ledger). Each check
is shown to fail on a planted bug (half the noise).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_blobs

import privclust.privacy.mechanisms as mechanisms
from privclust.cluster.lsh_splits import LSHSplits, _route
from privclust.engine import LocalEngine
from privclust.metrics import ari
from privclust.privacy import gaussian_sigma


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(4000, 3, centers=[[-5, -5, 0], [5, 5, 0], [-5, 5, 3], [5, -5, -3]],
                      cluster_std=0.8, random_state=0)
    return np.clip(X, -9, 9), y


BOUNDS = np.array([[-9.0, 9.0], [-10.0, 8.0], [-6.0, 6.0]])  # unequal widths


# =========================================================================== instrumentation
class DrawRecorder:
    """Every noise draw (kind, scale parameter), in order; ``factor`` plants a bug: the draw
    is made at ``factor`` times its scale (the recorder sees what was really drawn)."""

    def __init__(self, monkeypatch, factor: float = 1.0):
        self.draws: list[tuple[str, float]] = []
        m = mechanisms
        geo, lap, gau = m._draw_two_sided_geometric, m._draw_laplace, m._draw_gaussian

        def geometric(rng, eps_per_unit, size):
            eps_per_unit = eps_per_unit / factor  # scale 1/eps: factor x the scale
            self.draws.append(("geometric", float(eps_per_unit)))
            return geo(rng, eps_per_unit, size)

        def laplace(rng, scale, size):
            self.draws.append(("laplace", float(np.max(scale)) * factor))
            return lap(rng, np.asarray(scale) * factor, size)

        def gaussian(rng, sigma, size):
            self.draws.append(("gaussian", float(np.max(sigma)) * factor))
            return gau(rng, np.asarray(sigma) * factor, size)

        monkeypatch.setattr(m, "_draw_two_sided_geometric", geometric)
        monkeypatch.setattr(m, "_draw_laplace", laplace)
        monkeypatch.setattr(m, "_draw_gaussian", gaussian)


def check_draws(report, rec: DrawRecorder, d: int) -> float:
    """The epsilon every draw really spends, from its scale and the sensitivity known
    independently of the code (counts: 1; sums of u in [-1, 1]^d: L2 sqrt(d), L1 d), against
    the ledger line it belongs to. Returns the total."""
    assert len(rec.draws) == len(report.releases), "one draw per ledger release"
    total = 0.0
    for (kind, param), r in zip(rec.draws, report.releases, strict=True):
        if kind == "geometric":
            assert r.mechanism == "two-sided geometric" and r.sensitivity == 1.0
            spent = param  # epsilon per unit of sensitivity 1
        elif kind == "laplace":
            assert r.mechanism == "laplace"
            spent = d / param
        else:
            assert r.mechanism == "gaussian (analytic)"
            # the draw is private at the ledger's (eps, delta) only if sigma is at least the
            # analytic Gaussian's sigma for L2 sensitivity sqrt(d)
            need = gaussian_sigma(r.epsilon, r.delta, math.sqrt(d))
            assert param >= need * (1 - 1e-9), (r.target, param, need)
            spent = r.epsilon
        assert math.isclose(spent, r.epsilon, rel_tol=1e-9), (r.target, spent, r.epsilon)
        total += spent
    return total


@pytest.mark.parametrize("delta", [1e-6, None, 0.0])
def test_every_draw_matches_the_ledger(blobs, delta, monkeypatch):
    X, _ = blobs
    rec = DrawRecorder(monkeypatch)
    model = LSHSplits(4, epsilon=0.8, delta=delta, bounds=BOUNDS, random_state=2).fit(X)
    total = check_draws(model.privacy_report_, rec, X.shape[1])
    assert math.isclose(total, 0.8, rel_tol=1e-9)
    kinds = [k for k, _ in rec.draws]
    assert kinds[0] == "geometric" and kinds[-1] == ("laplace" if delta == 0 else "gaussian")
    assert kinds.count("geometric") == model.tree_depth_ + 1  # one count release per level


@pytest.mark.parametrize("delta", [1e-6, 0.0])
def test_the_draw_check_catches_half_the_noise(blobs, delta, monkeypatch):
    X, _ = blobs
    rec = DrawRecorder(monkeypatch, factor=0.5)
    model = LSHSplits(4, epsilon=0.8, delta=delta, bounds=BOUNDS, random_state=2).fit(X)
    with pytest.raises(AssertionError):
        check_draws(model.privacy_report_, rec, X.shape[1])


# =========================================================================== sensitivity
class TreeRecorder:
    """Records the public routing of a fit (every regroup_oblique call) and the values of
    every release, so the same tree can be replayed on a neighbouring data set."""

    def __init__(self, monkeypatch):
        self.routes: list[tuple] = []
        self.released: list[np.ndarray] = []
        regroup = LocalEngine.regroup_oblique

        def spy(engine, grouping, normal, offset, left, right, n_groups):
            self.routes.append((np.array(normal), np.array(offset), np.array(left),
                                np.array(right), n_groups))
            return regroup(engine, grouping, normal, offset, left, right, n_groups)

        monkeypatch.setattr(LocalEngine, "regroup_oblique", spy)
        M = mechanisms.Mechanisms
        for name in ("count", "gaussian", "laplace"):
            orig = getattr(M, name)

            def wrapped(mech, values, *args, _orig=orig, **kwargs):
                self.released.append(np.array(values, dtype=float))
                return _orig(mech, values, *args, **kwargs)

            monkeypatch.setattr(M, name, wrapped)


def replay(X, bounds, routes, centred: bool):
    """Exact statistics of ``X`` along a recorded tree, in release order: root count, (centre
    sum), each level's children counts, leaf sums of u = (x - mid) / half."""
    eng = LocalEngine(X, bounds)
    mid, half = bounds.mean(axis=1), (bounds[:, 1] - bounds[:, 0]) / 2
    g = eng.root()
    out = [eng.count(g).astype(float)]
    if centred:
        out.append(eng.centred_sums(g, mid[None]) / half)
    n_done = 0
    for normal, offset, left, right, n_groups in list(routes):  # the replay adds to routes
        g = eng.regroup_oblique(g, normal, offset, left, right, n_groups)
        n_done = n_groups - 2 * int((left != right).sum())
        if n_groups > n_done:
            out.append(eng.count(g)[n_done:].astype(float))
    out.append(eng.centred_sums(g, np.broadcast_to(mid, (g.n_groups, mid.size))) / half)
    return out


@pytest.mark.parametrize("centre_share", [0.1, 0.0])
def test_one_record_moves_every_release_by_at_most_its_sensitivity(blobs, centre_share,
                                                                   monkeypatch):
    X, _ = blobs
    d = X.shape[1]
    rec = TreeRecorder(monkeypatch)
    LSHSplits(4, epsilon=2.0, bounds=BOUNDS, centre_share=centre_share,
              random_state=5).fit(X)
    routes = list(rec.routes)
    base = replay(X, BOUNDS, routes, centre_share > 0)
    # the replay reproduces what the fit released (so the neighbours below see the same tree)
    assert len(base) == len(rec.released)
    for mine, theirs in zip(base, rec.released, strict=True):
        np.testing.assert_allclose(mine.reshape(theirs.shape), theirs, atol=1e-8)
    assert len(base) >= 4, "the tree must branch for this test to mean anything"
    rng = np.random.default_rng(0)
    extra = np.vstack([BOUNDS[:, 1], BOUNDS[:, 0], [30.0, -30.0, 30.0],  # corners, clipped
                       rng.uniform(BOUNDS[:, 0], BOUNDS[:, 1], (5, d)), X[:3]])
    neighbours = [np.vstack([X, e[None]]) for e in extra] + [np.delete(X, i, 0) for i in
                                                              (0, 17, 2500)]
    worst_count = worst_l1 = worst_l2 = 0.0
    for Xn in neighbours:
        for a, b in zip(base, replay(Xn, BOUNDS, routes, centre_share > 0), strict=True):
            diff = np.atleast_2d(b - a)
            if diff.shape[1] == 1 or a.ndim == 1:  # counts
                worst_count = max(worst_count, float(np.abs(diff).sum()))
            else:  # sums of u: one row (group) moves, by a vector in [-1, 1]^d
                assert (np.abs(diff).sum(axis=1) > 0).sum() <= 1
                worst_l1 = max(worst_l1, float(np.abs(diff).sum()))
                worst_l2 = max(worst_l2, float(np.sqrt((diff**2).sum())))
    assert worst_count <= 1.0 and worst_l1 <= d + 1e-9 and worst_l2 <= math.sqrt(d) + 1e-9
    assert worst_count == 1.0  # the bound is reached
    if centre_share:  # every record is in the centre sum: a corner moves it by the full sqrt(d)
        assert worst_l2 > 0.9 * math.sqrt(d)


def test_the_sensitivity_check_catches_a_record_counted_twice(blobs, monkeypatch):
    """Plant a bug: a record that reaches two leaves (as if a dropped node's records were also
    kept elsewhere). The replay sees its count move by 2 on one level."""
    X, _ = blobs
    rec = TreeRecorder(monkeypatch)
    LSHSplits(4, epsilon=2.0, bounds=BOUNDS, random_state=5).fit(X)
    routes = list(rec.routes)
    base = replay(X, BOUNDS, routes, True)
    doubled = replay(np.vstack([X, X[:1], X[:1]]), BOUNDS, routes, True)
    moves = [float(np.abs(b - a).sum()) for a, b in zip(base[:-1], doubled[:-1], strict=True)
             if a.ndim == 1]
    assert max(moves) > 1.0


# =========================================================================== the plan
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("delta", [1e-6, None, 0.0])
def test_spends_exactly_the_plan(blobs, epsilon, delta):
    X, _ = blobs
    model = LSHSplits(4, epsilon=epsilon, delta=delta, bounds=BOUNDS, random_state=1).fit(X)
    rep = model.privacy_report_
    assert math.isclose(rep.total().epsilon, epsilon, rel_tol=1e-9)
    assert math.isclose(rep.total().epsilon, rep.planned.epsilon, rel_tol=1e-9)
    assert math.isclose(rep.total().delta, rep.planned.delta, rel_tol=1e-9, abs_tol=1e-15)
    if delta is None:
        assert rep.total().delta == pytest.approx(model.delta_)
        assert 0 < model.delta_ <= 1e-5
    else:
        assert rep.total().delta == pytest.approx(delta)
    assert rep.private


# =========================================================================== exactly k
@pytest.mark.parametrize("delta", [None, 0.0])
def test_always_exactly_k_centres_even_on_tiny_data(delta):
    X = np.random.default_rng(3).uniform(-1, 1, (20, 4))
    for seed in range(5):
        m = LSHSplits(7, epsilon=1.0, delta=delta, bounds=(-1, 1), random_state=seed).fit(X)
        c = m.cluster_centers_
        assert c.shape == (7, 4) and m.n_clusters_ == 7 and np.isfinite(c).all()
        assert (c >= -1).all() and (c <= 1).all()
        assert m.cluster_sizes_.shape == (7,) and m.cluster_sizes_.dtype == np.int64
        assert m.labels_.shape == (20,) and m.labels_.max() < 7
        assert len(np.unique(c, axis=0)) == 7  # distinct centres


def test_more_clusters_than_records_warns_and_still_returns_k():
    with pytest.warns(UserWarning, match="more than the 3 records"):
        m = LSHSplits(5, bounds=(0, 1), random_state=0).fit([[0.1, 0.2], [0.5, 0.5],
                                                             [0.9, 0.1]])
    assert m.cluster_centers_.shape == (5, 2)


# =========================================================================== utility
def test_utility_floor_on_separated_blobs():
    X, y = make_blobs(20000, 10, centers=16, center_box=(-100, 100), random_state=0)
    scores = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few blob tails are clipped to the bounds
        for seed in range(5):
            m = LSHSplits(16, epsilon=1.0, bounds=(-100, 100), random_state=seed).fit(X)
            scores.append(ari(y, m.labels_))
    # measured (seeds 0-4): 0.94-1.0
    assert min(scores) >= 0.9 and np.median(scores) >= 0.93, scores


def test_reproducible_predict_and_params(blobs):
    X, _ = blobs
    a = LSHSplits(4, epsilon=3.0, bounds=BOUNDS, random_state=7).fit(X)
    b = LSHSplits(4, epsilon=3.0, bounds=BOUNDS, random_state=7).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.predict(X), a.labels_)
    assert a.n_iter_ == 0 and a.n_features_in_ == 3
    assert a.coreset_.shape[0] == a.coreset_weights_.shape[0] >= 4
    twin = clone(a).get_params()
    assert sorted(twin) == sorted(a.get_params()) and twin["epsilon"] == 3.0
    assert twin["bounds"] is BOUNDS or np.array_equal(twin["bounds"], BOUNDS)
    assert ari(blobs[1], a.labels_) > 0.95


# =========================================================================== bad input
@pytest.mark.parametrize(
    "kwargs, X, match",
    [
        ({"epsilon": 0}, None, "epsilon"),
        ({"epsilon": -1.0}, None, "epsilon"),
        ({"n_clusters": 0}, None, "n_clusters"),
        ({"n_clusters": 2.5}, None, "n_clusters"),
        ({"n_clusters": "3"}, None, "n_clusters"),
        ({"bounds": None}, None, "bounds are required"),
        ({"bounds": (1, 0)}, None, "lo < hi"),
        ({"delta": 1.5}, None, "delta"),
        ({"max_depth": -1}, None, "max_depth"),
        ({"count_share": 0}, None, "count_share"),
        ({"count_share": 0.6, "centre_share": 0.5}, None, "count_share"),
        ({"branch_factor": 0.5}, None, "branch_factor"),
        ({"min_leaf_size": 0}, None, "min_leaf_size"),
        ({}, [[0.1, np.nan]], "NaN"),
        ({}, [0.1, 0.2], "2-D"),
        ({}, np.zeros((0, 2)), "0 samples"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, X, match):
    params = {"n_clusters": 2, "epsilon": 1.0, "bounds": (0, 1), "random_state": 0, **kwargs}
    X = np.random.default_rng(0).uniform(0, 1, (50, 2)) if X is None else X
    with pytest.raises((ValueError, TypeError), match=match):
        LSHSplits(**params).fit(X)


def test_predict_before_fit_is_an_error():
    with pytest.raises(RuntimeError, match="not fitted"):
        LSHSplits(2, bounds=(0, 1)).predict([[0.1, 0.2]])


# =========================================================================== building blocks
def test_regroup_oblique_matches_a_direct_computation():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (3000, 5))
    eng = LocalEngine(X, np.tile([-1.0, 1.0], (5, 1)))
    g = eng.regroup(eng.root(), [0], [0.0], [0], [1], 2)  # two groups by the sign of x0
    normals = rng.normal(size=(2, 5))
    offsets = np.array([0.1, -0.2])
    out = eng.regroup_oblique(g, normals, offsets, [0, 2], [1, 2], 3)  # group 1: untested
    grp = (X[:, 0] > 0).astype(int)
    proj = np.einsum("ij,ij->i", X, normals[grp])
    want = np.where(grp == 1, 2, np.where(proj <= offsets[0], 0, 1))
    np.testing.assert_array_equal(out.group, want)
    shared = eng.regroup_oblique(g, normals[0], offsets, [0, -1], [1, -1], 2)  # drop group 1
    want = np.where(grp == 1, -1, np.where(X @ normals[0] <= 0.1, 0, 1))
    np.testing.assert_array_equal(shared.group, want)
    np.testing.assert_array_equal(eng.count(shared), np.bincount(want[want >= 0]))
    relabel = eng.regroup_oblique(shared, normals[0], [0.0, 0.0], [1, 0], [1, 0], 2)
    np.testing.assert_array_equal(relabel.group, np.where(want < 0, -1, 1 - want))


def test_route_keeps_a_pair_whose_children_were_both_dropped():
    # frontier: two pairs; pair 0 both children small (orphan -> one leaf with the parent's
    # count), pair 1 one big child (branches) and one small (dropped)
    count = np.array([3, 4, 50, 2])
    left, right, weights, branch = _route(count, np.array([9, 52]), n_done=2, min_leaf=5,
                                          branch_at=20)
    np.testing.assert_array_equal(weights, [9])
    np.testing.assert_array_equal(branch, [False, False, True, False])
    np.testing.assert_array_equal(left, [0, 1, 2, 2, 3, -1])
    np.testing.assert_array_equal(right, [0, 1, 2, 2, 4, -1])
