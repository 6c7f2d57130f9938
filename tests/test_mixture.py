"""DPGaussianMixture (DPMoG-hard, 000 Alg. 2) and the private covariance pass (Sec. 5.1.2).

The ledger test records the noise actually drawn (``_draw_gaussian``) and checks it against the
ledger and against Departures item 21's sigma; the audit runs one iteration's release on
neighbouring data sets with a Clopper-Pearson auditor (and shows that the auditor catches
0.15 times the noise).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.base import clone

import privclust.privacy.mechanisms as mechanisms
from _audit import assert_private, audit, threshold_events
from privclust import io
from privclust.cluster.mixture import (
    DPGaussianMixture,
    _block,
    add_remove_r,
    paper_r,
    private_centre_covariances,
    repair_covariances,
    zcdp_rho,
    zcdp_sigma,
)
from privclust.engine import LocalEngine
from privclust.metrics import ari
from privclust.privacy import (
    Accountant,
    Budget,
    BudgetExceededError,
    Mechanisms,
    PrivacyReport,
    RandomSource,
    zcdp_rho_for,
    zcdp_to_approx_dp,
)


def _blobs(n_per=400, seed=0):
    rng = np.random.default_rng(seed)
    centres = np.array([[-0.5, -0.5], [-0.5, 0.5], [0.5, -0.5], [0.5, 0.5]])
    X = np.concatenate([c + 0.08 * rng.standard_normal((n_per, 2)) for c in centres])
    return np.clip(X, -1, 1), np.repeat(np.arange(4), n_per)


# =========================================================================== calibration
@pytest.mark.parametrize(
    ("eps", "delta", "d", "tau"), [(1.0, 1e-6, 3, 10), (10.0, 1e-5, 8, 5), (0.5, 1e-9, 1, 1)]
)
def test_sigma_is_notes_21_and_rho_converts_to_epsilon(eps, delta, d, tau):
    r = paper_r(d)
    assert r == 1 + 3 * d + 2 * d * d
    L = math.log(1 / delta)
    want = math.sqrt(r * tau / 2) * (math.sqrt(L + eps) + math.sqrt(L)) / eps
    sigma = zcdp_sigma(eps, delta, r, tau)
    assert math.isclose(sigma, want, rel_tol=1e-12)
    # tau releases of sensitivity sqrt(r) at this sigma are rho-zCDP ...
    rho = tau * r / (2 * sigma**2)
    assert math.isclose(rho, zcdp_rho(eps, delta), rel_tol=1e-12)
    # ... and Bun-Steinke's conversion gives back exactly eps (the ledger's is tighter)
    assert math.isclose(rho + 2 * math.sqrt(rho * L), eps, rel_tol=1e-12)
    assert zcdp_to_approx_dp(rho, delta) <= eps * (1 + 1e-9)
    assert add_remove_r(d) <= r


def test_add_remove_sensitivity_bound_is_attained_and_holds():
    """Every record of [-1, 1]^D changes one component's (count, sum, triu(x x^T)) row by a
    vector of squared norm <= 1 + D + D(D+1)/2 <= r (worst case: a corner)."""
    rng = np.random.default_rng(0)
    d = 4
    iu = np.triu_indices(d)
    worst = 0.0
    for x in np.vstack([rng.uniform(-1, 1, (2000, d)), np.ones((1, d))]):
        row = np.r_[1.0, x, np.outer(x, x)[iu]]
        worst = max(worst, float(row @ row))
    assert worst <= add_remove_r(d) + 1e-12
    assert math.isclose(worst, add_remove_r(d))


# =========================================================================== ledger
class GaussianRecorder:
    def __init__(self, monkeypatch):
        self.gaussian: list[float] = []
        self.geometric: list[float] = []
        g, geo = mechanisms._draw_gaussian, mechanisms._draw_two_sided_geometric

        def rec_g(rng, sigma, size):
            self.gaussian.append(float(np.max(sigma)))
            return g(rng, sigma, size)

        def rec_geo(rng, eps, size):
            self.geometric.append(float(eps))
            return geo(rng, eps, size)

        monkeypatch.setattr(mechanisms, "_draw_gaussian", rec_g)
        monkeypatch.setattr(mechanisms, "_draw_two_sided_geometric", rec_geo)


@pytest.mark.parametrize("delta", [1e-6, None])
@pytest.mark.parametrize("sensitivity", ["paper", "add_remove"])
def test_noise_drawn_matches_the_ledger_and_the_plan(monkeypatch, delta, sensitivity):
    X, _ = _blobs(200)
    rec = GaussianRecorder(monkeypatch)
    eps, T = 2.0, 4
    m = DPGaussianMixture(
        3,
        epsilon=eps,
        delta=delta,
        bounds=(-1, 1),
        n_iter=T,
        sensitivity=sensitivity,
        random_state=1,
    ).fit(X)
    rep = m.privacy_report_
    d = X.shape[1]
    r = paper_r(d) if sensitivity == "paper" else add_remove_r(d)
    gauss = [x for x in rep.releases if x.mechanism == "gaussian (zCDP)"]
    assert len(gauss) == len(rec.gaussian) == T
    eps_n = 0.0
    if delta is None:
        assert len(rec.geometric) == 1  # the noisy n behind delta = 1 / n_hat^1.5
        eps_n = rec.geometric[0]
        assert math.isclose(eps_n, 0.02 * eps)
        assert m.delta_ < 1 / (100 * math.sqrt(100))
    else:
        assert rec.geometric == []
    eps_z = eps - eps_n
    # rho inverts the ledger's own conversion: the ledger lands on eps, not below it
    want_sigma = math.sqrt(r * T / (2 * zcdp_rho_for(eps_z, m.delta_)))
    rho_drawn = 0.0
    for s, entry in zip(rec.gaussian, gauss, strict=True):
        assert math.isclose(s, want_sigma, rel_tol=1e-12)
        assert math.isclose(entry.scale, s, rel_tol=1e-12)
        assert math.isclose(entry.sensitivity, math.sqrt(r), rel_tol=1e-12)
        assert entry.n_released == 3  # one row per component: parallel composition
        rho_drawn += r / (2 * s * s)
        assert math.isclose(entry.rho, r / (2 * s * s), rel_tol=1e-12)
    # rho sums to the plan, and the report's total stays within (eps, delta)
    assert math.isclose(rho_drawn, zcdp_rho_for(eps_z, m.delta_), rel_tol=1e-9)
    assert rho_drawn > zcdp_rho(eps_z, m.delta_)  # the looser Alg. 2 l. 4 calibration
    assert rep.zcdp_delta == m.delta_
    total = rep.total()
    assert math.isclose(total.epsilon, eps, rel_tol=1e-9)
    assert math.isclose(total.delta, m.delta_)
    assert rep.within_plan()


def test_released_block_is_counts_sums_and_uncentred_moments(monkeypatch):
    """What each iteration releases, recomputed here from the data (Departures 19)."""
    X, _ = _blobs(100)
    seen = []
    orig = Mechanisms.gaussian_zcdp

    def spy(self, values, l2_sensitivity, rho, **kw):
        seen.append(np.array(values))
        return orig(self, values, l2_sensitivity, rho, **kw)

    monkeypatch.setattr(Mechanisms, "gaussian_zcdp", spy)
    m = DPGaussianMixture(2, epsilon=5, delta=1e-6, bounds=(-2, 2), n_iter=2, random_state=0).fit(X)
    U = X / 2.0  # the public map of (-2, 2) to [-1, 1]
    for block in seen:
        assert block.shape == (2, 1 + 2 + 3)
        assert block[:, 0].sum() == len(X)
        np.testing.assert_allclose(block[:, 1:3].sum(axis=0), U.sum(axis=0), atol=1e-9)
        xx = U.T @ U
        np.testing.assert_allclose(block[:, 3:].sum(axis=0), xx[np.triu_indices(2)], atol=1e-9)
    assert m.means_.shape == (2, 2)


# =========================================================================== audit
def _release_sampler(block, sigma_factor=1.0, eps=1.0, delta=1e-3, r=None):
    """One iteration's release (Mechanisms.gaussian_zcdp at the fit's sigma, T = 1), reduced to
    the optimal test statistic for a Gaussian: the projection on the neighbours' difference."""
    d = 2
    r = paper_r(d) if r is None else r
    rho = zcdp_rho(eps, delta) / sigma_factor**2  # sigma_factor < 1: too little noise

    def run(rng, n):
        rep = PrivacyReport("audit", Budget(eps, delta), zcdp_delta=delta)
        mech = Mechanisms(RandomSource(rng, "audit", False), rep)
        noisy = mech.gaussian_zcdp(
            np.broadcast_to(block, (n, block.size)), math.sqrt(r), rho, target="audit"
        )
        return noisy

    return run


def _neighbour_blocks():
    """Exact released blocks for a data set and the same set plus one record at a corner, both
    assigned with the same public mixture (what one iteration of the fit computes)."""
    X0, _ = _blobs(20)
    X1 = np.vstack([X0, [[1.0, 1.0]]])
    mu = np.array([[-0.5, 0.0], [0.5, 0.0]])
    chol = np.repeat(0.5 * np.eye(2)[None], 2, axis=0)
    logw = np.log([0.5, 0.5])
    b = []
    for X in (X0, X1):
        counts, sums, moments = LocalEngine(
            X, np.tile([-1.0, 1.0], (2, 1))
        ).gaussian_assignment_stats(mu, chol, logw)
        b.append(_block(counts, sums, moments).ravel())
    return b


def _projected(sampler, direction, origin):
    def run(rng, n):
        out = sampler(rng, n)
        return (out - origin) @ direction

    return run


def test_one_iteration_release_passes_the_audit():
    b0, b1 = _neighbour_blocks()
    diff = b1 - b0
    assert diff @ diff <= add_remove_r(2) + 1e-9
    u = diff / np.linalg.norm(diff)
    eps, delta = 1.0, 1e-3
    claim = zcdp_to_approx_dp(zcdp_rho(eps, delta), delta)
    s0 = _projected(_release_sampler(b0, eps=eps, delta=delta), u, b0)
    s1 = _projected(_release_sampler(b1, eps=eps, delta=delta), u, b0)
    sigma = zcdp_sigma(eps, delta, paper_r(2), 1)
    events = threshold_events(np.linspace(-3, 5, 17) * sigma)
    res = assert_private(claim, delta, s0, s1, events, 200_000, seed=3)
    assert res.epsilon_lower <= claim


def test_add_remove_calibration_passes_the_audit_on_the_worst_neighbours():
    """The default calibration (r = 1 + D + D(D+1)/2, proof in ``add_remove_r``): one release
    audited on D and D + {corner record}, whose blocks differ by exactly sqrt(r) in L2 (the
    worst case), and the same audit catches half the noise."""
    b0, b1 = _neighbour_blocks()
    diff = b1 - b0
    r = add_remove_r(2)
    assert math.isclose(diff @ diff, r)  # the corner attains the bound
    u = diff / np.linalg.norm(diff)
    eps, delta = 1.0, 1e-3
    claim = zcdp_to_approx_dp(zcdp_rho(eps, delta), delta)
    sigma = zcdp_sigma(eps, delta, r, 1)
    events = threshold_events(np.linspace(-3, 5, 17) * sigma)
    s0 = _projected(_release_sampler(b0, eps=eps, delta=delta, r=r), u, b0)
    s1 = _projected(_release_sampler(b1, eps=eps, delta=delta, r=r), u, b0)
    res = assert_private(claim, delta, s0, s1, events, 200_000, seed=5)
    assert res.epsilon_lower <= claim
    half0 = _projected(_release_sampler(b0, 0.5, eps, delta, r), u, b0)
    half1 = _projected(_release_sampler(b1, 0.5, eps, delta, r), u, b0)
    events = threshold_events(np.linspace(-3, 5, 17) * 0.5 * sigma)
    assert audit(half0, half1, events, 200_000, delta=delta, seed=5).epsilon_lower > claim


def test_default_sensitivity_is_add_remove():
    assert DPGaussianMixture().sensitivity == "add_remove"
    X, _ = _blobs(100)
    m = DPGaussianMixture(2, epsilon=1.0, delta=1e-6, bounds=(-1, 1), n_iter=2, random_state=0).fit(
        X
    )
    want = math.sqrt(add_remove_r(2) * 2 / (2 * zcdp_rho_for(1.0, 1e-6)))
    assert math.isclose(m.sigma_, want, rel_tol=1e-12)


def test_the_audit_catches_too_little_noise():
    b0, b1 = _neighbour_blocks()
    diff = b1 - b0
    u = diff / np.linalg.norm(diff)
    eps, delta = 1.0, 1e-3
    claim = zcdp_to_approx_dp(zcdp_rho(eps, delta), delta)
    s0 = _projected(_release_sampler(b0, 0.15, eps, delta), u, b0)
    s1 = _projected(_release_sampler(b1, 0.15, eps, delta), u, b0)
    sigma = 0.15 * zcdp_sigma(eps, delta, paper_r(2), 1)
    events = threshold_events(np.linspace(-3, 5, 17) * sigma)
    res = audit(s0, s1, events, 200_000, delta=delta, seed=3)
    assert res.epsilon_lower > claim


# =========================================================================== utility
def test_recovers_separated_blobs():
    X, y = _blobs(1500)
    m = DPGaussianMixture(4, epsilon=5.0, bounds=(-1, 1), random_state=0).fit(X)
    assert ari(y, m.labels_) > 0.9
    assert np.isfinite(m.covariances_).all()
    assert np.all(np.linalg.eigvalsh(m.covariances_) > 0)
    assert math.isclose(m.weights_.sum(), 1.0)
    np.testing.assert_allclose(m.predict_proba(X[:5]).sum(axis=1), 1.0)
    assert m.score_samples(X[:5]).shape == (5,)


def test_original_units_are_mapped_back():
    X, y = _blobs(1000)
    Xs = X * 50 + 100  # bounds (50, 150)
    a = DPGaussianMixture(4, epsilon=5, delta=1e-6, bounds=(-1, 1), random_state=2).fit(X)
    b = DPGaussianMixture(4, epsilon=5, delta=1e-6, bounds=(50, 150), random_state=2).fit(Xs)
    np.testing.assert_allclose(b.means_, a.means_ * 50 + 100, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(b.covariances_, a.covariances_ * 2500, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(a.labels_, b.labels_)


def test_private_centre_covariances_one_pass(monkeypatch):
    X, _ = _blobs(500)
    centres = np.array([[-0.5, -0.5], [-0.5, 0.5], [0.5, -0.5], [0.5, 0.5]])
    rep = PrivacyReport("cov", Budget(1.0, 1e-6), zcdp_delta=1e-6)
    mech = Mechanisms(RandomSource(np.random.default_rng(0), "t", False), rep)
    engine = LocalEngine(X, np.tile([-1.0, 1.0], (2, 1)))
    rho = zcdp_rho_for(1.0, 1e-6)
    w, mu, cov, n_hat, sigma = private_centre_covariances(engine, centres, mech, rho)
    assert len(rep.releases) == 1 and math.isclose(rep.releases[0].rho, rho)
    assert math.isclose(sigma, math.sqrt(add_remove_r(2) / (2 * rho)), rel_tol=1e-12)
    np.testing.assert_array_equal(mu, centres)
    assert np.all(np.linalg.eigvalsh(cov) > 0) and math.isclose(w.sum(), 1.0)
    assert rep.total().epsilon <= 1.0 + 1e-9


def test_noise_level_cells_of_the_covariance_pass_get_weight_zero():
    """A cell whose noisy count is below 2 sigma (its covariance is mostly noise) gets weight
    0, like an empty DPMoG-hard component; the others keep their noisy counts' shares."""
    X, _ = _blobs(500)
    centres = np.array([[-0.5, -0.5], [-0.5, 0.5], [0.5, -0.5], [0.5, 0.5], [0.99, -0.99]])
    rep = PrivacyReport("cov", Budget(1.0, 1e-6), zcdp_delta=1e-6)
    mech = Mechanisms(RandomSource(np.random.default_rng(0), "t", False), rep)
    engine = LocalEngine(X, np.tile([-1.0, 1.0], (2, 1)))
    w, _, _, n_hat, sigma = private_centre_covariances(engine, centres, mech,
                                                       zcdp_rho_for(1.0, 1e-6))
    low = n_hat < 2 * sigma
    assert low[4] and not low[:4].any()  # the far corner holds (almost) no records
    assert w[4] == 0.0
    np.testing.assert_allclose(w[:4], n_hat[:4] / n_hat[:4].sum())


# =========================================================================== bad input
def test_negative_noisy_count_leaves_a_dead_component(monkeypatch):
    """A component whose noisy count comes out negative: weight 0, flagged, no crash."""
    X, _ = _blobs(300)
    g = mechanisms._draw_gaussian

    def push_first_count_down(rng, sigma, size):
        out = g(rng, sigma, size)
        out[0, 0] -= 1e6
        return out

    monkeypatch.setattr(mechanisms, "_draw_gaussian", push_first_count_down)
    m = DPGaussianMixture(4, epsilon=5, delta=1e-6, bounds=(-1, 1), n_iter=3, random_state=0).fit(X)
    assert m.noisy_counts_[0] < 0
    assert not m.active_components_[0] and m.weights_[0] == 0
    assert np.isfinite(m.means_).all() and np.isfinite(m.covariances_).all()
    assert set(np.unique(m.predict(X))) <= {1, 2, 3}


def test_repair_covariances_makes_singular_and_indefinite_matrices_valid():
    bad = np.array([[[1.0, 1.0], [1.0, 1.0]], [[0.1, 0.5], [0.5, -0.2]], [[0.0, 0.0], [0.0, 0.0]]])
    fixed = repair_covariances(bad, 1e-3, 2.0)
    ev = np.linalg.eigvalsh(fixed)
    assert (ev >= 1e-3 - 1e-12).all() and (ev <= 2.0 + 1e-12).all()
    np.linalg.cholesky(fixed)
    with pytest.raises(ValueError, match="non-finite"):
        repair_covariances(np.full((1, 2, 2), np.nan), 1e-3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"n_components": 0}, "n_components"),
        ({"n_iter": 0}, "n_iter"),
        ({"sensitivity": "x"}, "sensitivity"),
        ({"delta": 0.0}, "delta"),
        ({"bounds": None}, "bounds"),
        ({"reg_covar": -1}, "reg_covar"),
    ],
)
def test_bad_parameters(kwargs, match):
    X, _ = _blobs(10)
    params = {"n_components": 2, "epsilon": 1.0, "bounds": (-1, 1), "random_state": 0} | kwargs
    with pytest.raises(ValueError, match=match):
        DPGaussianMixture(**params).fit(X)


def test_bad_data_and_edge_shapes():
    m = DPGaussianMixture(2, epsilon=1, bounds=(-1, 1), random_state=0)
    with pytest.raises(ValueError, match="NaN"):
        m.fit(np.array([[0.0, np.nan], [0.1, 0.2]]))
    with pytest.raises(ValueError, match="2-D"):
        m.fit(np.zeros(5))
    with pytest.warns(UserWarning, match="more than the 1 records"):
        one = DPGaussianMixture(3, epsilon=1, delta=1e-6, bounds=(-1, 1), random_state=0).fit(
            np.array([[0.2]])
        )  # one point, d = 1: noise only, but valid
    assert one.means_.shape == (3, 1) and np.isfinite(one.covariances_).all()
    with pytest.warns(UserWarning, match="clipped"):
        DPGaussianMixture(2, epsilon=1, delta=1e-6, bounds=(0, 1), random_state=0).fit(
            np.array([[5.0, 0.5], [0.2, 0.3]])
        )


def test_budget_checked_before_reading_and_clone():
    acc = Accountant(Budget(1.0, 1e-5))
    m = DPGaussianMixture(2, epsilon=2.0, delta=1e-6, bounds=(-1, 1), accountant=acc)
    with pytest.raises(BudgetExceededError):
        m.fit("not even data")  # the plan fails before X is looked at
    c = clone(DPGaussianMixture(5, epsilon=3.0, bounds=(0, 1)))
    assert c.get_params()["n_components"] == 5


def test_to_dict_round_trip():
    X, _ = _blobs(200)
    m = DPGaussianMixture(3, epsilon=3, delta=1e-6, bounds=(-1, 1), random_state=0).fit(X)
    d = io.model_to_dict(m)
    m2 = io.model_from_dict(d)
    np.testing.assert_array_equal(m2.predict(X), m.predict(X))
    with pytest.raises(ValueError):
        io.model_from_dict(d | {"model": d["model"] | {"weights": [1.0]}})


def test_n_clusters_is_the_number_of_components_once_fitted():
    m = DPGaussianMixture(3, epsilon=5, delta=1e-6, bounds=(-2, 2), n_iter=2, random_state=0)
    assert not hasattr(m, "n_clusters_")  # not fitted: no attribute, as scikit-learn expects
    X = np.random.default_rng(0).uniform(-1, 1, size=(300, 2))
    m.fit(X)
    assert m.n_clusters_ == m.n_components_ == 3
