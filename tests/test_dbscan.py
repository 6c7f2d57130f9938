"""DPDBSCAN: kappa, Gamma, the sandwich guarantee, the ledger, audits, estimator conventions."""

from __future__ import annotations

import itertools
import json
import math
import tracemalloc

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.cluster import DBSCAN

import privclust.cluster._span_lookup as S
import privclust.cluster.dbscan as D
import privclust.privacy.histogram as H
import privclust.privacy.mechanisms as mech_mod
from _audit import assert_private, audit, threshold_events
from privclust import io, viz
from privclust.cluster._span_lookup import NEEDS_POINTS, SpanLookup, border_cell_codes
from privclust.cluster.dbscan import DPDBSCAN, neighbour_offsets, neighbourhood_size, paper_kappa
from privclust.privacy import Accountant, Budget, BudgetExceededError
from privclust.privacy.histogram import gamma_geometric, gamma_laplace


def _blobs(
    n_per=400, seed=0, centres=((2.5, 2.5), (7.5, 7.5), (2.5, 7.5)), scale=0.35, background=100
):
    rng = np.random.default_rng(seed)
    parts = [np.asarray(c) + rng.normal(scale=scale, size=(n_per, 2)) for c in centres]
    parts.append(rng.uniform(0, 10, size=(background, 2)))
    y = np.concatenate([np.full(n_per, k) for k in range(len(centres))] + [np.full(background, -1)])
    return np.clip(np.concatenate(parts), 0, 10), y


# =========================================================================== kappa
def _brute_force_kappa(d, eta):
    """Cells [o, o+1)^d (units of w) whose closure comes closer than alpha = 4 sqrt(d)/eta to
    [0, 1)^d: the distance between two boxes from their nearest points (clip and measure)."""
    r = 4 * math.sqrt(d) / eta
    reach = int(math.ceil(r)) + 2
    n = 0
    for o in itertools.product(range(-reach, reach + 1), repeat=d):
        o = np.array(o, dtype=float)
        lo_b, hi_b = o, o + 1
        nearest_a = np.clip(lo_b, 0.0, 1.0)  # point of box A nearest to box B, per dimension
        nearest_a = np.where(hi_b < 0, 0.0, nearest_a)
        nearest_b = np.clip(nearest_a, lo_b, hi_b)
        dist2 = float(((nearest_a - nearest_b) ** 2).sum())
        # strict: points in half-open cells get arbitrarily close to, never reach, the distance
        if dist2 < r * r - 1e-9:
            n += 1
    return n


@pytest.mark.parametrize(("d", "expected"), [(1, 3), (2, 21), (3, 117), (4, 609)])
def test_kappa_is_exact_and_matches_brute_force(d, expected):
    assert neighbourhood_size(d, 4.0) == expected == _brute_force_kappa(d, 4.0)
    offs = neighbour_offsets(d, 4.0)
    assert (offs == -offs[::-1]).all()  # symmetric, lexicographically sorted
    assert np.unique(offs, axis=0).shape[0] == expected


@pytest.mark.parametrize("eta", [1.0, 2.0, 3.2])
def test_kappa_other_eta_matches_brute_force(eta):
    for d in (1, 2, 3):
        assert neighbourhood_size(d, eta) == _brute_force_kappa(d, eta)


def test_printed_kappa_formula_is_not_an_upper_bound():
    """Departures 12: Thm 7.1's (1 + 8 sqrt(d)/eta)^d is 14.7 in 2-D, below the exact 21."""
    assert [round(paper_kappa(d), 1) for d in (1, 2, 3, 4)] == [3.0, 14.7, 89.0, 625.0]
    assert paper_kappa(2) < neighbourhood_size(2) and paper_kappa(3) < neighbourhood_size(3)


def test_every_reachable_cell_is_in_the_neighbourhood():
    """Monte Carlo: cells hit by points within alpha of a point of cell 0 are all in NB."""
    rng = np.random.default_rng(0)
    for d in (2, 3):
        alpha = math.sqrt(d)  # eta = 4: w = 1
        p = rng.uniform(0, 1, size=(200_000, d))
        v = rng.normal(size=(200_000, d))
        v *= (alpha * rng.uniform(0, 1, size=(200_000, 1)) ** (1 / d)) / np.linalg.norm(
            v, axis=1, keepdims=True
        )
        hit = np.unique(np.floor(p + v).astype(int), axis=0)
        nb = {tuple(o) for o in neighbour_offsets(d).tolist()}
        assert {tuple(h) for h in hit.tolist()} <= nb


# =========================================================================== Gamma
def test_gamma_worked_example():
    """Sec. 7.1: eps = 1, beta = 1/3, kappa = 21, |X| = 1000: Gamma_Lap = 38.2."""
    assert gamma_laplace(1.0, 1 / 3, 21, 1000) == pytest.approx(38.2, abs=0.05)
    assert gamma_geometric(1.0, 1 / 3, 21, 1000) == 24  # exact tail of the noise we draw


@pytest.mark.parametrize(("core_radius", "kappa_core"), [("eps", 21), ("cell", 9)])
def test_fitted_gamma_is_computed_from_the_noise_drawn(core_radius, kappa_core):
    """Gamma is the bound for the core test's window (kappa_core terms), not for NB."""
    X, _ = _blobs()
    for noise, fn in (("geometric", gamma_geometric), ("laplace", gamma_laplace)):
        m = DPDBSCAN(
            epsilon=1.0,
            eps=0.5,
            min_samples=20,
            bounds=(0, 10),
            noise=noise,
            beta=0.1,
            core_radius=core_radius,
            random_state=0,
        ).fit(X)
        assert m.kappa_ == 21 and m.kappa_core_ == kappa_core and m.histogram_ == "dense"
        g = fn(1.0, 0.1, kappa_core, m.n_cells_)
        assert m.gamma_lower_ == m.gamma_upper_ == g
        assert m.tau_ == 2 * g and m.rho_ == 7.0
        assert m.min_samples_effective_ == 20 + 2 * g
        assert m.core_threshold_ == 20 + g
        assert m.core_radius_ == (0.5 if core_radius == "eps" else m.cell_width_)


def test_default_beta_follows_the_core_window():
    X, _ = _blobs()
    kw = dict(epsilon=1.0, eps=0.5, min_samples=20, bounds=(0, 10), random_state=0)
    cell = DPDBSCAN(**kw).fit(X)
    paper = DPDBSCAN(core_radius="eps", **kw).fit(X)
    assert cell.beta is None and cell.beta_ == D.DEFAULT_BETA_CELL == 0.5
    assert paper.beta_ == D.DEFAULT_BETA == 1e-6
    assert cell.gamma_upper_ == gamma_geometric(1.0, 0.5, 9, cell.n_cells_)
    assert paper.gamma_upper_ == gamma_geometric(1.0, 1e-6, 21, paper.n_cells_)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_core_window_is_the_touching_block_and_holds_every_w_ball(d):
    """core_radius="cell": the 3^d cells touching X, a subset of NB; B(p, w) of every p in X lies
    in them (Monte Carlo), which is what condition 1 at radius w needs."""
    offs = D.core_offsets(d, 4.0, "cell")
    assert offs.shape[0] == 3**d and np.abs(offs).max() == 1
    nb = {tuple(o) for o in neighbour_offsets(d, 4.0)}
    assert {tuple(o) for o in offs} <= nb
    np.testing.assert_array_equal(D.core_offsets(d, 4.0, "eps"), neighbour_offsets(d, 4.0))
    rng = np.random.default_rng(d)
    p = rng.uniform(0, 1, size=(100_000, d))  # w = 1
    v = rng.normal(size=(100_000, d))
    v *= (rng.uniform(0, 1, size=(100_000, 1)) ** (1 / d)) / np.linalg.norm(v, axis=1)[:, None]
    hit = np.unique(np.floor(p + 0.999999 * v).astype(int), axis=0)
    assert {tuple(o) for o in hit} <= {tuple(o) for o in offs}
    with pytest.raises(ValueError):
        D.core_offsets(d, 4.0, "alpha")


# =========================================================================== the sandwich
def _cell_corners_far(cells, origin, w, points):
    """Farthest distance from each point to each cell box: (n_cells, n_points)."""
    lo = origin + cells * w
    hi = lo + w
    far = np.maximum(
        np.abs(points[None, :, :] - lo[:, None, :]), np.abs(points[None, :, :] - hi[:, None, :])
    )
    return np.sqrt((far**2).sum(axis=2))


@pytest.mark.parametrize("core_radius", ["eps", "cell"])
@pytest.mark.parametrize("shift", [0, "tau"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sandwich_property(shift, seed, core_radius):
    """Def. 1.2 with MinPts' = min_samples + shift: every true (r, MinPts')-cluster lies in
    one span (r = alpha, or w for the touching window); every span lies in the span of one
    (rho alpha, MinPts' - tau)-cluster."""
    X, _ = _blobs(seed=seed)
    alpha, min_pts = 0.5, 30
    m = DPDBSCAN(
        epsilon=8.0,
        eps=alpha,
        min_samples=min_pts,
        bounds=(0, 10),
        beta=1e-6,
        min_samples_shift=shift,
        core_radius=core_radius,
        random_state=seed,
    ).fit(X)
    mp_eff = m.min_samples_effective_
    assert m.tau_ < mp_eff and m.n_clusters_ >= 3
    assert m.guarantee_["core_radius"] == m.core_radius_
    # 1. true clusters (core points) inside one span each
    db = DBSCAN(eps=m.core_radius_, min_samples=int(math.ceil(mp_eff))).fit(X)
    core = np.zeros(len(X), dtype=bool)
    core[db.core_sample_indices_] = True
    lab = m.predict(X)
    n_true = 0
    for k in set(db.labels_[core].tolist()):
        spans = np.unique(lab[core & (db.labels_ == k)])
        assert spans.size == 1 and spans[0] >= 0, (k, spans)
        n_true += 1
    assert n_true >= 3
    # 2. every span within the span of one (rho alpha, MinPts' - tau)-cluster: each of its
    # cells inside the ball of radius rho*alpha around one core point of that cluster
    rho_alpha = m.rho_ * alpha
    db2 = DBSCAN(eps=rho_alpha, min_samples=max(1, int(math.floor(mp_eff - m.tau_)))).fit(X)
    cores2 = db2.core_sample_indices_
    for cells in m.spans_:
        far = _cell_corners_far(cells, m.grid_origin_, m.cell_width_, X[cores2])
        ok = False
        for k in np.unique(db2.labels_[cores2]):
            in_k = db2.labels_[cores2] == k
            if (far[:, in_k] < rho_alpha).any(axis=1).all():
                ok = True
                break
        assert ok


def test_clusters_found_on_easy_data():
    X, y = _blobs(n_per=1500, background=300, scale=0.4)
    m = DPDBSCAN(epsilon=1.0, eps=0.5, min_samples=10, bounds=(0, 10), random_state=0).fit(X)
    assert m.n_clusters_ == 3
    from privclust.metrics import ari

    assert ari(y, m.labels_) > 0.85


# =========================================================================== model and predict
def test_predict_equals_labels_and_handles_new_points():
    X, _ = _blobs()
    m = DPDBSCAN(epsilon=1.0, eps=0.5, min_samples=10, bounds=(0, 10), random_state=3).fit(X)
    assert (m.predict(X) == m.labels_).all()
    assert (m.fit_predict(X) == m.labels_).all()
    assert m.labels_.min() >= -1 and m.labels_.max() == m.n_clusters_ - 1
    far = np.array([[-5.0, 2.5], [2.5, 11.0], [2.5, 2.5]])
    out = m.predict(far)
    assert out[0] == -1 and out[1] == -1 and out[2] >= 0  # outside the bounds: noise
    # predict is a cell lookup: points of one core cell share its label
    cell = m.span_cells_[0]
    pts = m.grid_origin_ + (cell + np.array([[0.1, 0.1], [0.9, 0.5], [0.5, 0.99]])) * m.cell_width_
    assert (m.predict(pts) == m.span_labels_[0]).all()
    # the binary-search path gives the same answer as the lookup table
    lut, S._LUT_CELLS = S._LUT_CELLS, 0
    try:
        assert (m.predict(X) == m.labels_).all()
    finally:
        S._LUT_CELLS = lut


def test_spans_partition_the_core_cells():
    X, _ = _blobs()
    m = DPDBSCAN(epsilon=1.0, eps=0.5, min_samples=10, bounds=(0, 10), random_state=4).fit(X)
    spans = m.spans_
    assert len(spans) == m.n_clusters_
    assert sum(len(s) for s in spans) == len(m.span_cells_)
    # no two core cells of different spans are merge neighbours (closer than alpha)
    offs = {tuple(o) for o in neighbour_offsets(2).tolist()}
    owner = {tuple(c): k for k, s in enumerate(spans) for c in s.tolist()}
    for c, k in owner.items():
        for o in offs:
            nb = (c[0] + o[0], c[1] + o[1])
            assert owner.get(nb, k) == k


def test_dense_and_sparse_paths_agree_without_noise(monkeypatch):
    """Post-processing on sorted keys (huge grids) equals the dense-array path."""
    monkeypatch.setattr(
        mech_mod, "_draw_two_sided_geometric", lambda rng, eps, size: np.zeros(size, dtype=np.int64)
    )
    X, _ = _blobs()
    kw = dict(
        epsilon=1.0, eps=0.5, min_samples=10, bounds=(0, 10), random_state=0, histogram="sparse"
    )
    a = DPDBSCAN(**kw).fit(X)
    monkeypatch.setattr(D, "DENSE_FREE_CELLS", 10)
    monkeypatch.setattr(D, "_SCRATCH_FACTOR", 0)
    b = DPDBSCAN(**kw).fit(X)
    assert a.n_clusters_ == b.n_clusters_
    assert (a.span_cells_ == b.span_cells_).all() and (a.span_labels_ == b.span_labels_).all()


def test_one_trillion_cells_in_sparse_mode_without_allocation():
    rng = np.random.default_rng(5)
    centres = np.array([[2e5, 3e5], [7e5, 1e5], [5e5, 9e5]])
    X = np.concatenate([c + rng.normal(scale=1.0, size=(700, 2)) for c in centres])
    tracemalloc.start()
    m = DPDBSCAN(
        epsilon=1.0, eps=math.sqrt(2), min_samples=20, bounds=(0, 1e6), random_state=0
    ).fit(X)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert m.n_cells_ == (10**6 + 1) ** 2 and m.histogram_ == "sparse"
    assert peak < 60e6
    assert m.n_clusters_ == 3
    assert len(m.privacy_report_.releases) == 2
    assert (m.predict(X) == m.labels_).all()


# =========================================================================== ledger
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
def test_ledger_composes_to_epsilon(epsilon, monkeypatch):
    X, _ = _blobs()
    dense = DPDBSCAN(epsilon=epsilon, eps=0.5, min_samples=10, bounds=(0, 10), random_state=0).fit(
        X
    )
    rel = dense.privacy_report_.releases
    assert [r.mechanism for r in rel] == ["geometric, dense hist"]
    assert rel[0].epsilon == epsilon and rel[0].n_released == dense.n_cells_
    assert dense.privacy_report_.total().epsilon == pytest.approx(epsilon)
    sparse = DPDBSCAN(
        epsilon=epsilon,
        eps=0.5,
        min_samples=10,
        bounds=(0, 10),
        random_state=0,
        histogram="sparse",
        n_budget_share=0.1,
    ).fit(X)
    rel = sparse.privacy_report_.releases
    assert [r.mechanism for r in rel] == ["two-sided geometric", "geometric, sparse hist"]
    assert rel[0].epsilon == pytest.approx(0.1 * epsilon)
    assert rel[1].epsilon == pytest.approx(0.9 * epsilon)
    assert sparse.privacy_report_.total().epsilon == pytest.approx(epsilon)
    assert sparse.privacy_report_.within_plan() and sparse.privacy_report_.private


def test_auto_switch_uses_the_noisy_n(monkeypatch):
    monkeypatch.setattr(D, "DENSE_FREE_CELLS", 50)  # the 21x21 grid below now needs n
    X, _ = _blobs()
    big = DPDBSCAN(
        epsilon=1.0, eps=math.sqrt(2) / 2, min_samples=10, bounds=(0, 10), random_state=0
    ).fit(X)
    assert big.n_hat_ is not None and big.histogram_ == "dense"  # n_hat > 441 / 2
    small = DPDBSCAN(
        epsilon=1.0, eps=math.sqrt(2) / 2, min_samples=10, bounds=(0, 10), random_state=0
    ).fit(X[:60])
    assert small.histogram_ == "sparse" and abs(small.n_hat_ - 60) < 200
    assert small.threshold_ == H.sparse_threshold(small.n_cells_, small.n_hat_, 0.95)
    assert len(big.privacy_report_.releases) == 2


def test_noise_drawn_matches_the_ledger(monkeypatch):
    """Instrumented run: every draw's scale and size match a ledger entry; nothing else."""
    draws = []
    real = {n: getattr(mech_mod, n) for n in ("_draw_two_sided_geometric", "_draw_laplace")}
    real_bin = mech_mod._draw_binomial

    def geo(rng, eps_unit, size):
        draws.append(("geo", eps_unit, size))
        return real["_draw_two_sided_geometric"](rng, eps_unit, size)

    def lap(rng, scale, size):
        draws.append(("lap", scale, size))
        return real["_draw_laplace"](rng, scale, size)

    def binomial(rng, n, p):
        draws.append(("bin", n, p))
        return real_bin(rng, n, p)

    monkeypatch.setattr(mech_mod, "_draw_two_sided_geometric", geo)
    monkeypatch.setattr(mech_mod, "_draw_laplace", lap)
    monkeypatch.setattr(mech_mod, "_draw_binomial", binomial)
    X, _ = _blobs()
    m = DPDBSCAN(epsilon=1.0, eps=0.5, min_samples=10, bounds=(0, 10), random_state=1).fit(X)
    (rel,) = m.privacy_report_.releases
    assert draws == [("geo", rel.epsilon, (m.n_cells_,))] and rel.epsilon == 1.0

    draws.clear()
    m = DPDBSCAN(
        epsilon=2.0, eps=0.5, min_samples=10, bounds=(0, 10), random_state=1, histogram="sparse"
    ).fit(X)
    n_rel, h_rel = m.privacy_report_.releases
    n_nonempty = np.unique(np.floor(X / m.cell_width_).astype(int), axis=0).shape[0]
    assert draws[0] == ("geo", n_rel.epsilon, (1,))
    assert draws[1] == ("geo", h_rel.epsilon, (n_nonempty,))
    assert draws[2][0] == "bin" and draws[2][1] == m.n_cells_ - n_nonempty
    assert draws[2][2] == pytest.approx(H.tail_probability(m.threshold_, h_rel.epsilon))
    assert draws[3][0] == "lap" and draws[3][1] == pytest.approx(1 / h_rel.epsilon)
    assert len(draws) == 4
    assert n_rel.epsilon + h_rel.epsilon == pytest.approx(2.0)
    assert h_rel.scale == pytest.approx(1 / h_rel.epsilon)


def test_budget_is_checked_before_the_data_is_read():
    acc = Accountant(Budget(0.5))
    bad = np.array([[np.nan, 1.0]])
    with pytest.raises(BudgetExceededError):
        DPDBSCAN(epsilon=1.0, eps=0.5, min_samples=5, bounds=(0, 10), accountant=acc).fit(bad)
    X, _ = _blobs()
    acc = Accountant(Budget(1.0))
    DPDBSCAN(
        epsilon=0.6, eps=0.5, min_samples=5, bounds=(0, 10), accountant=acc, random_state=0
    ).fit(X)
    with pytest.raises(BudgetExceededError):
        DPDBSCAN(
            epsilon=0.6, eps=0.5, min_samples=5, bounds=(0, 10), accountant=acc, random_state=0
        ).fit(X)


# =========================================================================== whole-fit audit
# Every record sits in one cell C0 of an 11 x 11 grid (w = 1), so each of the cells whose window
# holds C0 (21 for the NB window, 9 for the touching one) has a window count = the count. D0
# holds T - 1 records (T the core threshold), D1 one more: with exact counts D0 has no core cell
# and D1 has 21 (or 9). Output: the number of core cells.
_WINDOWS = {"eps": (21, D.DEFAULT_BETA), "cell": (9, D.DEFAULT_BETA_CELL)}


def _audit_fit(n_records, eps, core_radius):
    def sample(rng, n):
        X = np.full((n_records, 2), 5.5)
        out = np.empty(n)
        for i in range(n):
            m = DPDBSCAN(
                epsilon=eps,
                eps=math.sqrt(2),
                min_samples=10,
                bounds=(0, 10),
                core_radius=core_radius,
                random_state=rng,
            ).fit(X)
            out[i] = m.span_cells_.shape[0]
        return out

    return sample


def _border_count(core_radius):
    kappa, beta = _WINDOWS[core_radius]
    g = gamma_geometric(1.0, beta, kappa, 121)
    return 10 + g - 1  # T - 1


@pytest.mark.parametrize("core_radius", ["eps", "cell"])
def test_whole_fit_passes_audit_on_a_border_record(core_radius):
    n0 = _border_count(core_radius)
    # gross leaks only (DESIGN, Testing): the power to see one is shown by the next test
    assert_private(
        1.0,
        0.0,
        _audit_fit(n0, 1.0, core_radius),
        _audit_fit(n0 + 1, 1.0, core_radius),
        threshold_events([0.5, 4.5, 8.5, 10.5, 15.5, 20.5]),
        800,
        seed=9,
        confidence=0.999,
    )


@pytest.mark.parametrize("core_radius", ["eps", "cell"])
def test_whole_fit_audit_catches_exact_counts(monkeypatch, core_radius):
    monkeypatch.setattr(
        mech_mod, "_draw_two_sided_geometric", lambda rng, eps, size: np.zeros(size, dtype=np.int64)
    )
    n0 = _border_count(core_radius)
    res = audit(
        _audit_fit(n0, 1.0, core_radius),
        _audit_fit(n0 + 1, 1.0, core_radius),
        threshold_events([0.5, 8.5]),
        200,
        seed=10,
        confidence=0.999,
    )
    assert res.epsilon_lower > 3.0, str(res)


# =========================================================================== JSON, plot
def test_model_dict_round_trip_is_json_and_predicts_the_same():
    X, _ = _blobs()
    m = DPDBSCAN(epsilon=1.0, eps=0.5, min_samples=10, bounds=(0, 10), random_state=7).fit(X)
    text = json.dumps(io.model_to_dict(m))
    data = json.loads(text)
    assert "7" not in data["params"]["random_state"] and "accountant" not in data["params"]
    assert "params" not in data["model"] and "privacy_report" not in data["model"]  # stored once
    assert data["model"]["n_clusters"] == m.n_clusters_
    m2 = io.model_from_dict(data)
    assert (m2.predict(X) == m.labels_).all()
    assert m2.privacy_report_.total() == m.privacy_report_.total()
    assert m2.guarantee_["tau"] == m.tau_ and m2.get_params()["eps"] == 0.5
    with pytest.raises(ValueError):
        io.model_from_dict({"model": "DPM"})


def test_plot_spans_draws_cells_and_points():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X, _ = _blobs()
    m = DPDBSCAN(epsilon=1.0, eps=0.5, min_samples=10, bounds=(0, 10), random_state=7).fit(X)
    ax = viz.plot_spans(m, X=X)
    assert ax.images and ax.collections
    plt.close("all")
    m3 = DPDBSCAN(epsilon=1.0, eps=0.5, min_samples=10, bounds=(0, 10), random_state=0).fit(
        np.random.default_rng(0).uniform(0, 10, (50, 3))
    )
    with pytest.raises(ValueError):
        viz.plot_spans(m3)


# =========================================================================== conventions, bad input
def test_estimator_conventions():
    m = DPDBSCAN(epsilon=2.0, eps=0.3, min_samples=4, bounds=(0, 1))
    c = clone(m)
    assert c.get_params() == m.get_params()
    assert not hasattr(c, "labels_")
    with pytest.raises(RuntimeError):
        m.predict(np.zeros((2, 2)))


@pytest.mark.parametrize(
    ("kwargs", "X", "err"),
    [
        ({}, np.array([[np.nan, 1.0], [1.0, 2.0]]), ValueError),
        ({}, np.array([[np.inf, 1.0], [1.0, 2.0]]), ValueError),
        ({}, np.zeros((0, 2)), ValueError),
        ({}, np.zeros(5), ValueError),
        ({}, np.array([["a", "b"]]), ValueError),
        ({"bounds": None}, None, ValueError),
        ({"bounds": (5, 1)}, None, ValueError),
        ({"bounds": [(0, 1)] * 3}, None, ValueError),
        ({"epsilon": 0.0}, None, ValueError),
        ({"epsilon": -1.0}, None, ValueError),
        ({"eps": 0.0}, None, ValueError),
        ({"eps": -0.2}, None, ValueError),
        ({"eps": float("nan")}, None, ValueError),
        ({"min_samples": 0}, None, ValueError),
        ({"min_samples": 2.5}, None, ValueError),
        ({"eta": 0.0}, None, ValueError),
        ({"eta": 5.0}, None, ValueError),
        ({"beta": 0.0}, None, ValueError),
        ({"beta": 1.0}, None, ValueError),
        ({"core_radius": "alpha"}, None, ValueError),
        ({"core_radius": None}, None, ValueError),
        ({"histogram": "fast"}, None, ValueError),
        ({"noise": "gaussian"}, None, ValueError),
        ({"n_budget_share": 1.0}, None, ValueError),
        ({"min_samples_shift": -1}, None, ValueError),
        ({"min_samples_shift": "2tau"}, None, ValueError),
        ({"histogram": "dense", "eps": 1e-4}, None, ValueError),
        ({"eps": 1e-9, "bounds": (0, 1e9)}, None, ValueError),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, X, err):
    params = dict(epsilon=1.0, eps=0.5, min_samples=5, bounds=(0, 10), random_state=0)
    params.update(kwargs)
    if X is None:
        X = np.random.default_rng(0).uniform(0, 10, size=(30, 2))
    with pytest.raises(err):
        DPDBSCAN(**params).fit(X)


def test_one_point_outside_points_and_one_dimension():
    one = DPDBSCAN(epsilon=1.0, eps=0.5, min_samples=1, bounds=(0, 10), random_state=0)
    one.fit(np.array([[5.0, 5.0]]))
    assert one.labels_.shape == (1,)
    X, _ = _blobs()
    X = np.vstack([X, [[50.0, 50.0]]])
    with pytest.warns(UserWarning, match="clipped"):
        m = DPDBSCAN(epsilon=1.0, eps=0.5, min_samples=10, bounds=(0, 10), random_state=0).fit(X)
    assert m.labels_[-1] == -1
    x1 = np.concatenate(
        [np.random.default_rng(1).normal(2, 0.2, 500), np.random.default_rng(2).normal(8, 0.2, 500)]
    )[:, None]
    m1 = DPDBSCAN(epsilon=1.0, eps=0.2, min_samples=10, bounds=(0, 10), random_state=0).fit(x1)
    assert m1.kappa_ == 3 and m1.n_clusters_ == 2
    with pytest.raises(ValueError):
        m1.predict(np.zeros((3, 2)))


def test_border_points_join_the_nearest_span_within_eps():
    rng = np.random.default_rng(0)
    X = rng.normal(0.0, 0.05, size=(3000, 2))
    model = DPDBSCAN(epsilon=1.0, eps=0.2, min_samples=10, bounds=(-2, 2), random_state=0).fit(X)
    assert model.n_clusters_ == 1
    cells = model.span_cells_
    w, origin = model.cell_width_, model.grid_origin_
    edge = origin[0] + (cells[:, 0].max() + 1) * w  # right edge of the rightmost core cell
    row = cells[cells[:, 0] == cells[:, 0].max()][0]
    y_mid = origin[1] + (row[1] + 0.5) * w
    probes = np.array([[edge + 0.1, y_mid], [edge + 0.3, y_mid]])
    assert model.predict(probes).tolist() == [0, -1]  # within eps of a core cell / beyond it
    strict = DPDBSCAN(
        epsilon=1.0, eps=0.2, min_samples=10, bounds=(-2, 2), random_state=0, border=False
    ).fit(X)
    assert strict.predict(probes).tolist() == [-1, -1]
    np.testing.assert_array_equal(strict.span_cells_, model.span_cells_)


def test_border_points_agree_between_lookup_table_and_binary_search():
    """The lookup-table path skips points with no core cell in NB before the border pass; the
    binary-search path (few points next to the grid) does not: both label every point alike."""
    X, _ = _blobs(n_per=1500, background=2000)
    kw = dict(epsilon=1.0, eps=0.5, min_samples=10, bounds=(0, 10), random_state=0)
    m = DPDBSCAN(**kw).fit(X)
    strict = DPDBSCAN(border=False, **kw).fit(X)
    assert (m.labels_ >= 0).sum() > (strict.labels_ >= 0).sum()  # border points exist
    few = np.concatenate([m.predict(X[i : i + 7]) for i in range(0, len(X), 7)])
    np.testing.assert_array_equal(few, m.labels_)
    assert ((m.labels_ < 0) & (X[:, 0] > 0)).any()  # some points stay noise


def test_settled_border_cells_match_the_point_by_point_rule():
    """Two dense squares about 3 eps apart, with background points: cells between
    them see both spans in NB (no shortcut), cells beside one square are settled. The lookup
    path (settled cells first) and the binary-search path (point by point) agree everywhere."""
    rng = np.random.default_rng(5)
    left = rng.uniform([2.0, 2.0], [4.0, 8.0], size=(4000, 2))
    right = rng.uniform([5.6, 2.0], [7.6, 8.0], size=(4000, 2))
    background = rng.uniform(0.0, 10.0, size=(600, 2))
    X = np.concatenate([left, right, background])
    kw = dict(epsilon=1.0, eps=0.5, min_samples=30, bounds=(0, 10), random_state=1)
    m = DPDBSCAN(**kw).fit(X)
    assert m.n_clusters_ == 2
    offsets = D.neighbour_offsets(2, m.eta)
    keys, codes = border_cell_codes(m._core_keys, m.span_labels_, m.grid_shape_, offsets,
                                    m.cell_width_, m.eps)
    core = np.isin(keys, m._core_keys)
    assert (codes[~core] >= 0).any() and (codes[~core] == NEEDS_POINTS).any()
    np.testing.assert_array_equal(codes[core], m.span_labels_)  # core keys are sorted
    # every settled cell: the point-by-point rule gives its code at points spread over it
    lookup = SpanLookup(m)
    grid = np.stack(np.meshgrid(*[np.linspace(0.01, 0.99, 7)] * 2), -1).reshape(-1, 2)
    for key, code in zip(keys[~core], codes[~core], strict=True):
        if code < 0:
            continue
        cell = np.array(np.unravel_index(key, tuple(m.grid_shape_)))
        x = m.grid_origin_ + (cell + grid) * m.cell_width_
        got = lookup.nearest_core_span(x, np.tile(cell, (len(x), 1)))
        assert (got == code).all()
    few = np.concatenate([m.predict(X[i : i + 7]) for i in range(0, len(X), 7)])
    np.testing.assert_array_equal(few, m.labels_)
    assert (m.labels_[-600:] >= 0).any() and (m.labels_[-600:] < 0).any()
