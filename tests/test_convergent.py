"""KMeansGuarantee and SubClustering (002): Lemma 1, the ledger, audits, leaks, utility, input.

Lemma 1 is tested with ``S^(t-1)`` read as the centroid the records were assigned to at step t,
i.e. the previously *released* ``S_hat^(t-1)`` (``centers_history_[t-1]``); the Lloyd centroid
``S^(t)`` is recomputed here from X. That is the reading under which the invariant implies a
falling k-means cost, which is tested too.
"""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_wine

from _audit import assert_private, audit, categorical_events
from privclust.cluster.convergent import (
    KMeansGuarantee,
    SubClustering,
    _batched_lloyd,
    cost_reduction_scores,
    cost_reduction_sensitivity,
    uniform_in_balls,
)
from privclust.engine import LocalEngine
from privclust.metrics import ari, optimal_kmeans_cost
from privclust.privacy import (
    Budget,
    Mechanisms,
    PrivacyReport,
    RandomSource,
    exponential_mechanism_probabilities,
)
from test_lloyd import DrawRecorder, unit_sums

ESTIMATORS = [KMeansGuarantee, SubClustering]
CONFIDENCE = 0.999


@pytest.fixture(scope="module")
def wine():
    """Wine scaled to [0, 1] by its own min/max (test data only: these bounds are not public)."""
    X = load_wine().data
    lo, hi = X.min(axis=0), X.max(axis=0)
    return (X - lo) / (hi - lo)


def _lloyd_centroids(X, bounds, centres):
    counts, sums, _ = LocalEngine(X, bounds).nearest_centre_moments(centres)
    return counts, sums / np.maximum(counts, 1)[:, None]


# =========================================================================== Lemma 1
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_lemma1_invariant_holds_at_every_step_faithful(cls, wine):
    bounds = np.tile([0.0, 1.0], (wine.shape[1], 1))
    checked = 0
    for seed in range(3):
        m = cls(3, epsilon=1.0, bounds=(0, 1), variant="faithful", max_iter=8,
                random_state=seed).fit(wine)
        H = m.centers_history_
        zc, zr = m.convergent_zones_
        for t in range(1, H.shape[0]):
            counts, S = _lloyd_centroids(wine, bounds, H[t - 1])
            for i in np.flatnonzero(counts > 0):
                step = np.linalg.norm(S[i] - H[t - 1][i])
                np.testing.assert_allclose(zc[t - 1][i], S[i], atol=1e-12)  # zone = exact S
                assert zr[t - 1][i] == pytest.approx(step)
                if step == 0:  # converged exactly: the centroid stays
                    assert np.array_equal(H[t][i], H[t - 1][i])
                    continue
                assert np.linalg.norm(H[t][i] - S[i]) < step
                checked += 1
        # the invariant's consequence: the cost of the released centroids falls strictly
        costs = m.cost_history_[: H.shape[0]]
        assert (np.diff(costs) < 0).all(), costs
    assert checked >= 3 * 8 * 3 - 3


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_lemma1_invariant_private_holds_for_the_released_zone(cls, wine):
    """The private variant keeps the invariant w.r.t. its released (noisy) Lloyd centroid; no
    private algorithm can keep it w.r.t. the exact one with probability 1."""
    for seed in range(3):
        m = cls(3, epsilon=2.0, bounds=(0, 1), max_iter=6, random_state=seed).fit(wine)
        H = m.centers_history_
        zc, zr = m.convergent_zones_
        for t in range(1, H.shape[0]):
            np.testing.assert_allclose(zr[t - 1], np.linalg.norm(zc[t - 1] - H[t - 1], axis=1))
            moved = zr[t - 1] > 0
            dist = np.linalg.norm(H[t] - zc[t - 1], axis=1)
            assert (dist[moved] < zr[t - 1][moved]).all()
            assert np.array_equal(H[t][~moved], H[t - 1][~moved])


# =========================================================================== ledger
def _check_convergent_ledger(model, rec, epsilon, X, bounds):
    """Every draw matches its ledger entry at the sensitivity known independently, and the
    draws add up to epsilon."""
    rep = model.privacy_report_
    noisy = [r for r in rep.releases if r.private]
    assert len(rec.draws) == len(noisy)
    d = X.shape[1]
    spent = []
    for (kind, param), r in zip(rec.draws, noisy, strict=True):
        if kind == "geometric":
            spent.append(float(param))
        elif kind == "laplace":
            spent.append(d / float(np.max(param)))  # unit sums: L1 sensitivity d
        elif kind == "gumbel":
            # Gumbel-max scale = 2 * sensitivity / epsilon (factor 2, Departures 1); the sensitivity
            # function itself is checked by brute force in test_score_sensitivity_is_exact
            spent.append(2.0 * r.sensitivity / float(np.max(param)))
        else:
            raise AssertionError(kind)
        assert spent[-1] == pytest.approx(r.epsilon, rel=1e-9)
    assert math.isclose(sum(spent), epsilon, rel_tol=1e-9)
    assert rep.total().epsilon == pytest.approx(epsilon)
    # the Laplace releases are the exact unit sums at the centroids assigned to
    sums_rel = [v for kind, v in rec.values if kind == "laplace"]
    H = model.centers_history_
    # zone centre of iteration t + 1 (private variant) at H[t]; the final step at H[-1]
    at = [*range(len(sums_rel) - 1), H.shape[0] - 1]
    for t, released in zip(at, sums_rel, strict=True):
        _, s = unit_sums(X, bounds, H[t])
        np.testing.assert_allclose(released, s, atol=1e-8)
    return spent


@pytest.mark.parametrize("cls, variant", list(product(ESTIMATORS, ["private", "faithful"])))
def test_ledger_equals_the_noise_actually_drawn(cls, variant, wine, monkeypatch):
    bounds = np.tile([0.0, 1.0], (wine.shape[1], 1))
    rec = DrawRecorder(monkeypatch)
    eps = 1.3
    m = cls(3, epsilon=eps, bounds=(0, 1), max_iter=4, variant=variant,
            random_state=0).fit(wine)
    _check_convergent_ledger(m, rec, eps, wine, bounds)
    rep = m.privacy_report_
    kinds = [r.mechanism for r in rep.releases]
    if variant == "faithful":
        assert not rep.private and rep.to_dict()["private"] is False
        assert kinds[0] == "none (exact)"  # records as initial centroids
        assert kinds.count("none (exact)") == 1 + 4 * (2 if cls is SubClustering else 1)
        assert "NOT PRIVATE" in str(rep)
    else:
        assert rep.private and "none (exact)" not in kinds
        per_iter = 4 if cls is SubClustering else 3
        assert len(kinds) == 4 * per_iter + 2


def test_score_sensitivity_is_exact():
    """cost_reduction_sensitivity = max over candidates and box points of the score change,
    by brute force over the box corners (the change is linear in the record)."""
    rng = np.random.default_rng(0)
    bounds = np.array([[0.0, 1.0], [-2.0, 3.0], [1.0, 1.5]])
    corners = np.array(list(product(*bounds)))
    z = rng.uniform(bounds[:, 0], bounds[:, 1], size=(4, 3))
    cand = np.clip(uniform_in_balls(rng, z, np.full(4, 0.7), 9), bounds[:, 0], bounds[:, 1])
    valid = rng.uniform(size=(4, 9)) < 0.7
    valid[:, 0] = True
    sens = cost_reduction_sensitivity(z, cand, valid, bounds)
    for i in range(4):
        a = cand[i][valid[i]] - z[i]
        change = np.abs(np.einsum("md,cmd->cm", a, 2 * corners[:, None, :] - cand[i][valid[i]]
                                  - z[i]))
        assert sens[i] == pytest.approx(change.max(), rel=2e-6)
        assert sens[i] >= change.max()
        # and the score itself moves by exactly that when a corner record is added
        counts, sums = np.array([5.0]), rng.uniform(0, 1, (1, 3)) * 5
        q0 = cost_reduction_scores(counts, sums, z[i:i + 1], cand[i:i + 1][:, valid[i]])
        for y in corners:
            q1 = cost_reduction_scores(counts + 1, sums + y, z[i:i + 1],
                                       cand[i:i + 1][:, valid[i]])
            assert np.abs(q1 - q0).max() <= sens[i] + 1e-9


def test_candidates_lie_strictly_inside_their_balls():
    rng = np.random.default_rng(1)
    c = rng.uniform(-1, 1, (5, 7))
    r = np.array([0.0, 1e-3, 0.5, 2.0, 10.0])
    pts = uniform_in_balls(rng, c, r, 200)
    dist = np.linalg.norm(pts - c[:, None, :], axis=2)
    assert (dist[1:] < r[1:, None]).all() and (dist[0] == 0).all()


# =========================================================================== audits
# The exponential mechanism as the estimators run it: one cluster of D0 = 20 records near
# (0.56, 0.56) in [0, 1]^2, zone centre z = (0.5, 0.5), two public candidates z +- 0.1 (1, 1).
# D1 adds a record at the corner (1, 1): the score of z + 0.1 (1, 1) rises and that of
# z - 0.1 (1, 1) falls (the change has both signs, so the factor 2 is needed). D0's score gap
# leaves the second candidate about a tenth of the mass, where the ratio is largest.
EM_BOUNDS = np.array([[0.0, 1.0], [0.0, 1.0]])
EM_Z = np.array([[0.5, 0.5]])
EM_CAND = EM_Z[:, None, :] + 0.1 * np.array([[[1.0, 1.0], [-1.0, -1.0]]])
EM_TRIALS = 200_000


@pytest.fixture(scope="module")
def em_pair():
    rng = np.random.default_rng(3)
    X0 = np.clip(0.56 + rng.normal(0, 0.02, (20, 2)), 0, 1)
    X1 = np.vstack([X0, [1.0, 1.0]])
    valid = np.ones((1, 2), dtype=bool)
    sens = cost_reduction_sensitivity(EM_Z, EM_CAND, valid, EM_BOUNDS)
    scores = []
    for X in (X0, X1):
        counts, sums, _ = LocalEngine(X, EM_BOUNDS).nearest_centre_moments(EM_Z)
        scores.append(cost_reduction_scores(counts, sums, EM_Z, EM_CAND)[0])
    assert np.abs(scores[1] - scores[0]).max() <= sens[0]
    return scores[0], scores[1], float(sens[0])


def _em_sampler(scores, sens, eps):
    def sample(rng, n):
        mech = Mechanisms(RandomSource(rng, "audit", False), PrivacyReport("a", Budget(1e9)))
        return mech.select(np.broadcast_to(scores, (n, scores.size)), np.full(n, sens), eps,
                           target="audit centroid choice")
    return sample


def test_centroid_choice_passes_audit(em_pair):
    f0, f1, sens = em_pair
    p0 = exponential_mechanism_probabilities(f0, sens, 1.0)
    p1 = exponential_mechanism_probabilities(f1, sens, 1.0)
    exact = float(np.max(np.abs(np.log(p0) - np.log(p1))))
    assert 0.75 < exact <= 1.0  # the pair uses most of the budget
    res = assert_private(1.0, 0.0, _em_sampler(f0, sens, 1.0), _em_sampler(f1, sens, 1.0),
                         categorical_events([0, 1]), EM_TRIALS, seed=201,
                         confidence=CONFIDENCE)
    assert res.epsilon_lower > 0.6, str(res)


def test_centroid_choice_with_half_the_noise_is_caught(em_pair):
    f0, f1, sens = em_pair
    res = audit(_em_sampler(f0, sens, 2.0), _em_sampler(f1, sens, 2.0),
                categorical_events([0, 1]), EM_TRIALS, seed=202, confidence=CONFIDENCE)
    assert res.epsilon_lower > 1.0, str(res)


# Whole fit, for gross leaks only (DESIGN.md): the faithful variant publishes records (its
# initial centroids are records, Alg. 1 l. 1), so an outlier added in D1 shows up verbatim in
# the released centroids with probability >= k / n; under D0 never.
OUTLIER = np.array([0.97, 0.03])
LEAK_TRIALS = 200


def _leak_sampler(cls, X, variant):
    def sample(rng, n):
        hits = np.zeros(n, dtype=int)
        for i in range(n):
            m = cls(2, epsilon=1.0, bounds=(0, 1), max_iter=1, variant=variant,
                    n_candidates=4, random_state=rng).fit(X)
            hits[i] = int((np.abs(m.centers_history_ - OUTLIER).sum(axis=-1) == 0).any())
        return hits
    return sample


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_whole_fit_audit_catches_the_faithful_variant_releasing_records(cls):
    X0 = np.array([[0.2, 0.2], [0.25, 0.3], [0.3, 0.2], [0.8, 0.8]])
    X1 = np.vstack([X0, OUTLIER])
    res = audit(_leak_sampler(cls, X0, "faithful"), _leak_sampler(cls, X1, "faithful"),
                categorical_events([1]), LEAK_TRIALS, seed=301, confidence=CONFIDENCE)
    assert res.epsilon_lower > 1.0, str(res)
    assert_private(1.0, 0.0, _leak_sampler(cls, X0, "private"),
                   _leak_sampler(cls, X1, "private"), categorical_events([1]), LEAK_TRIALS,
                   seed=302, confidence=CONFIDENCE)


# =========================================================================== utility
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_private_variant_utility_on_well_separated_blobs(cls, blobs_2d):
    X, y = blobs_2d
    scores = [ari(y, cls(4, epsilon=1.0, bounds=(0, 100), random_state=s).fit(X).labels_)
              for s in range(4)]
    assert sum(s >= 0.95 for s in scores) >= 3, scores


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_faithful_variant_converges_to_a_lloyd_optimum_on_wine(cls, wine):
    """Before the Laplace step the faithful iterates reach Lloyd's cost (within 5%); at a large
    epsilon the released centres keep most of it."""
    opt = optimal_kmeans_cost(wine, 3)
    pre, final = [], []
    for s in range(5):
        m = cls(3, epsilon=50.0, bounds=(0, 1), variant="faithful", random_state=s).fit(wine)
        pre.append(m.cost_history_[-2] / opt - 1)
        final.append(m.cost_history_[-1] / opt - 1)
    assert np.median(pre) < 0.05, pre
    assert np.median(final) < 0.1, final


# =========================================================================== input
@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize(
    "kwargs, X, match",
    [
        ({"variant": "exact"}, None, "variant"),
        ({"lap_share": 0.0}, None, "lap_share"),
        ({"lap_share": 1.0}, None, "lap_share"),
        ({"lap_share": True}, None, "lap_share"),
        ({"n_candidates": 0}, None, "n_candidates"),
        ({"max_iter": 0}, None, "max_iter"),
        ({"iteration_split": (1.0,)}, None, "iteration_split"),
        ({"n_clusters": 0}, None, "n_clusters"),
        ({"epsilon": 0.0}, None, "epsilon"),
        ({"bounds": None}, None, "bounds are required"),
        ({}, [[0.1, np.inf]], "NaN or infinite"),
        ({}, [0.1, 0.2], "2-D"),
        ({"variant": "faithful", "n_clusters": 5}, [[0.1, 0.2], [0.3, 0.4]], "records"),
    ],
)
@pytest.mark.filterwarnings("ignore:n_clusters=5 is more than")
def test_bad_input_is_a_clear_error(cls, kwargs, X, match):
    params = {"n_clusters": 2, "epsilon": 1.0, "bounds": (0, 1), "random_state": 0, **kwargs}
    X = np.random.default_rng(0).uniform(0, 1, (20, 2)) if X is None else X
    with pytest.raises((ValueError, TypeError), match=match):
        cls(**params).fit(X)


def test_subclustering_internal_k_is_checked():
    with pytest.raises(ValueError, match="internal_k"):
        SubClustering(2, bounds=(0, 1), internal_k=0).fit([[0.1, 0.2]])


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_edge_cases_and_api(cls):
    rng = np.random.default_rng(0)
    with pytest.warns(UserWarning, match="more than the 1 records"):
        one = cls(3, bounds=(0, 1), max_iter=2, random_state=0).fit([[0.5, 0.5]])
    assert one.cluster_centers_.shape == (3, 2) and one.labels_.shape == (1,)
    d1 = cls(2, bounds=(0, 10), max_iter=2, random_state=0).fit(rng.uniform(0, 10, (60, 1)))
    assert d1.cluster_centers_.shape == (2, 1)
    const = np.column_stack([rng.uniform(0, 1, 60), np.full(60, 0.3)])
    for variant in ("private", "faithful"):
        m = cls(2, bounds=(0, 1), max_iter=3, variant=variant, random_state=0).fit(const)
        assert np.isfinite(m.cluster_centers_).all()
        assert m.cost_history_.shape == (3 + 2,)
        assert m.convergent_zones_[0].shape == (3, 2, 2)
    est = cls(2, bounds=(0, 1), random_state=0)
    assert clone(est).get_params() == est.get_params()
    a = cls(2, bounds=(0, 1), max_iter=2, random_state=5).fit(const)
    b = cls(2, bounds=(0, 1), max_iter=2, random_state=5).fit(const)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.predict(const), a.labels_)


def test_batched_lloyd_is_a_lloyd_fixed_point_in_every_zone():
    """Alg. 2 l. 2 run for all zones at once: every zone ends at its own Lloyd fixed point
    (each record nearest to the mean of its sub-cluster, means of its own zone only), with
    min(internal_k, records) sub-clusters, and zones never mix."""
    gen = np.random.default_rng(3)
    sizes = [0, 1, 2, 40, 7, 0, 60]
    zone = np.repeat(np.arange(len(sizes)), sizes)
    points = gen.normal(size=(zone.size, 3)) + 10.0 * zone[:, None]
    K = 4
    labels, kk = _batched_lloyd(points, zone, len(sizes), K, gen)
    assert kk.tolist() == [min(K, s) for s in sizes]
    assert labels.shape == zone.shape and (labels >= 0).all() and (labels < kk[zone]).all()
    for i, s in enumerate(sizes):
        pts, lab = points[zone == i], labels[zone == i]
        if s == 0:
            continue
        used = np.unique(lab)
        means = np.stack([pts[lab == j].mean(axis=0) for j in used])
        nearest = used[np.argmin(((pts[:, None] - means[None]) ** 2).sum(axis=2), axis=1)]
        assert np.array_equal(nearest, lab), f"zone {i} is not at a Lloyd fixed point"
