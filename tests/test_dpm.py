"""DPM: ledger, instrumented noise, utility floors, estimator conventions."""

import math

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_blobs

import privclust.privacy.mechanisms as mech_mod
from privclust import DPM, Accountant, Budget, BudgetExceededError
from privclust.cluster.dpm import gap_percentile_constant
from privclust.metrics import accuracy_majority
from privclust.privacy import DELTA_CAP, count_offset, gaussian_sigma


def _uniform(n=20000, d=2, seed=0):
    return np.random.default_rng(seed).uniform(0, 1, size=(n, d))


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("depth", [2, 4, 6])
@pytest.mark.parametrize("count_shift", [False, True])
def test_ledger_composes_to_the_requested_budget(epsilon, depth, count_shift):
    # uniform data and a tiny min_cluster_size: every level is used, so the ledger is complete
    X = _uniform()
    m = DPM(epsilon=epsilon, delta=1e-6, bounds=(0, 1), max_depth=depth, min_cluster_size=1,
            random_state=1, count_shift=count_shift).fit(X)
    rep = m.privacy_report_
    assert max(m.split_tree_.depth) == depth
    total = rep.total()
    assert total.epsilon == pytest.approx(epsilon, rel=1e-12)
    assert total.delta == pytest.approx(1e-6, rel=1e-12)
    kinds = [r.mechanism for r in rep.releases]
    assert sum(r.target.startswith("record count") for r in rep.releases) == depth + 1
    assert kinds.count("two-sided geometric") == depth + 2  # and the ties per feature
    assert kinds.count("exponential") == depth
    assert rep.private and rep.within_plan()


def test_levels_the_tree_never_reached_go_to_the_leaf_averages(blobs_2d):
    X, _ = blobs_2d
    m = DPM(epsilon=1.0, delta=1e-6, bounds=(0, 100), max_depth=7, random_state=0).fit(X)
    rep = m.privacy_report_
    assert max(m.split_tree_.depth) < 7  # the tree stops early on these blobs
    total = rep.total()
    assert total.epsilon == pytest.approx(1.0, rel=1e-9)
    assert total.delta == pytest.approx(1e-6, rel=1e-9)
    avg = [r.epsilon for r in rep.releases if r.mechanism.startswith("gauss")]
    assert avg[0] > 0.42 + 0.1  # its own share plus the unreached levels'
    assert any("moved to 'leaf averages'" in n for n in rep.notes) and rep.unspent == []


@pytest.mark.parametrize("count_shift", [False, True])
def test_noise_drawn_matches_the_ledger(monkeypatch, blobs_2d, count_shift):
    """Instrumented run: every draw's scale implies exactly the ledger entry's epsilon/delta."""
    X, _ = blobs_2d
    draws = []
    real = {name: getattr(mech_mod, name) for name in
            ("_draw_two_sided_geometric", "_draw_gumbel", "_draw_gaussian", "private_quantile")}

    def geo(rng, eps_unit, size):
        draws.append(("geo", eps_unit, size))
        return real["_draw_two_sided_geometric"](rng, eps_unit, size)

    def gumbel(rng, scale, size):
        draws.append(("gumbel", np.array(scale, dtype=float).ravel(), size))
        return real["_draw_gumbel"](rng, scale, size)

    def gauss(rng, sigma, size):
        draws.append(("gauss", np.array(sigma, dtype=float).ravel(), size))
        return real["_draw_gaussian"](rng, sigma, size)

    def quant(rng, values, q, lo, hi, eps, sens, *args):
        draws.append(("quantile", (eps, sens), np.size(values)))
        return real["private_quantile"](rng, values, q, lo, hi, eps, sens, *args)

    monkeypatch.setattr(mech_mod, "_draw_two_sided_geometric", geo)
    monkeypatch.setattr(mech_mod, "_draw_gumbel", gumbel)
    monkeypatch.setattr(mech_mod, "_draw_gaussian", gauss)
    monkeypatch.setattr(mech_mod, "private_quantile", quant)
    t, q, alpha = 0.3, 1 / 12, 5.0
    m = DPM(epsilon=1.0, delta=1e-6, bounds=(0, 100), random_state=3, t=t, q=q,
            alpha=alpha, count_shift=count_shift).fit(X)
    rep = m.privacy_report_
    drawn = [r for r in rep.releases if r.mechanism != "failure probability"]
    assert len(draws) == len(drawn)
    tree = m.split_tree_
    level = 0
    for (kind, par, _size), rel in zip(draws, drawn, strict=True):
        if rel.mechanism == "two-sided geometric":
            per_row = rel.epsilon / rel.n_released if "same records" in rel.note else rel.epsilon
            assert kind == "geo" and par == pytest.approx(per_row, rel=1e-12)
        elif rel.mechanism == "exponential":
            assert kind == "gumbel"
            # scale per node = 2 * sensitivity / eps with sensitivity (t/q + alpha)/(n_hat - lam)
            count_rel = [r for r in rep.releases if r.target.endswith(f"level {level}")
                         or (level == 0 and "root" in r.target)][0]
            shift = [r for r in rep.releases if r.mechanism == "failure probability"
                     and r.target.endswith(f"level {level}")]
            lam = count_offset(count_rel.epsilon, shift[0].delta) if shift else 0.0
            nodes = [i for i in range(tree.n_nodes) if tree.depth[i] == level
                     and tree.halt_reason[i] not in ("n_hat - lambda <= 0", "no candidate in box",
                                                      "max_depth")]
            n_hat = np.array(sorted(tree.n_hat[i] for i in nodes), dtype=float)
            expect = np.sort(2 * (t / q + alpha) / (n_hat - lam) / rel.epsilon)
            np.testing.assert_allclose(np.sort(par), expect, rtol=1e-12)
            level += 1
        elif rel.mechanism == "gaussian (analytic)":
            assert kind == "gauss"
            leaves = tree.leaves()
            half = np.array([np.linalg.norm(tree.box_hi[i] - tree.box_lo[i]) / 2 for i in leaves])
            unit = gaussian_sigma(rel.epsilon, rel.delta, 1.0)
            np.testing.assert_allclose(np.sort(par), np.sort(unit * half), rtol=1e-12)
        elif rel.mechanism == "exponential (quantile)":
            assert kind == "quantile"
            assert par == (pytest.approx(rel.epsilon), pytest.approx((2 - 0.65) * X.shape[1]))
        else:  # pragma: no cover
            pytest.fail(f"unexpected release {rel.mechanism}")
    assert rep.total().epsilon == pytest.approx(1.0, rel=1e-9)
    assert rep.total().delta == pytest.approx(1e-6, rel=1e-9)


def test_gap_percentile_constant_matches_simulation():
    c = gap_percentile_constant(0.65)
    rng = np.random.default_rng(0)
    n, sigma = 200_000, 3.0
    gaps = np.diff(np.sort(rng.normal(0, sigma, size=n)))
    assert np.percentile(gaps, 65) == pytest.approx(c * sigma / n, rel=0.02)


def test_synth_10d_utility_floor():
    """Issue floor: 56-72 clusters and accuracy >= 0.95 (mean of 3 seeds) on Synth-10d."""
    X, y = make_blobs(100_000, 10, centers=64, center_box=(-100, 100), random_state=42)
    accs, ks = [], []
    for seed in range(3):
        m = DPM(epsilon=1.0, bounds=(-100, 100), random_state=seed).fit(X)
        accs.append(accuracy_majority(y, m.labels_))
        ks.append(m.n_clusters_)
    assert all(56 <= k <= 72 for k in ks), ks
    assert np.mean(accs) >= 0.95, accs


def test_separated_blobs_are_found(blobs_2d):
    X, y = blobs_2d
    accs = []
    for seed in range(3):
        m = DPM(epsilon=1.0, bounds=(0, 100), max_depth=3, random_state=seed).fit(X)
        accs.append(accuracy_majority(y, m.labels_))
        assert np.all(m.cluster_centers_ >= 0) and np.all(m.cluster_centers_ <= 100)
    assert np.mean(accs) >= 0.99


def test_labels_are_the_model_applied_to_X(blobs_2d):
    X, _ = blobs_2d
    m = DPM(epsilon=1.0, bounds=(0, 100), random_state=0).fit(X)
    np.testing.assert_array_equal(m.labels_, m.predict(X))
    np.testing.assert_array_equal(m.fit_predict(X), m.labels_)
    assert m.cluster_centers_.shape == (m.n_clusters_, 2)
    assert m.cluster_sizes_.shape == (m.n_clusters_,)
    leaves = m.split_tree_.apply(X)
    assert leaves.min() >= 0 and leaves.max() < m.n_clusters_


def test_random_state_reproducible_and_secure_default(blobs_2d):
    X, _ = blobs_2d
    a = DPM(epsilon=1.0, bounds=(0, 100), random_state=5).fit(X)
    b = DPM(epsilon=1.0, bounds=(0, 100), random_state=5).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    assert "not secure" in a.privacy_report_.random_source
    c = DPM(epsilon=1.0, bounds=(0, 100)).fit(X)
    assert c.privacy_report_.random_source.startswith("secure")


def test_delta_none_uses_the_noisy_count(blobs_2d):
    X, _ = blobs_2d
    m = DPM(epsilon=1.0, bounds=(0, 100), random_state=0).fit(X)
    n_hat = m.split_tree_.n_hat[0]
    assert m.delta_ == pytest.approx(1 / (n_hat * math.sqrt(n_hat)))
    assert m.privacy_report_.planned.delta == pytest.approx(m.delta_)
    assert m.privacy_report_.total().delta <= m.delta_ * (1 + 1e-12)


def test_get_params_and_clone():
    m = DPM(epsilon=0.5, bounds=(0, 1), max_depth=3)
    c = clone(m)
    assert c.get_params() == m.get_params()
    assert not hasattr(c, "cluster_centers_")


def test_shared_accountant_refuses_before_reading_data(blobs_2d):
    X, _ = blobs_2d
    acc = Accountant(Budget(1.5, 1e-5))
    DPM(epsilon=1.0, delta=1e-6, bounds=(0, 100), accountant=acc, random_state=0).fit(X)
    assert acc.remaining[0] == pytest.approx(0.5)

    class Untouchable:
        def __array__(self, *a, **k):
            raise AssertionError("data was read")

    with pytest.raises(BudgetExceededError, match="No data was read"):
        DPM(epsilon=1.0, delta=1e-6, bounds=(0, 100), accountant=acc).fit(Untouchable())
    DPM(epsilon=0.5, delta=1e-6, bounds=(0, 100), accountant=acc, random_state=0).fit(X)
    assert acc.remaining[0] == pytest.approx(0.0, abs=1e-12)
    assert len(acc.reports) == 2


def test_paper_budget_split_is_available(blobs_2d):
    X, _ = blobs_2d
    m = DPM(epsilon=1.0, bounds=(0, 100), budget_split=DPM.PAPER_BUDGET_SPLIT,
            random_state=0).fit(X)
    rep = m.privacy_report_
    eps_avg = [r.epsilon for r in rep.releases if r.mechanism.startswith("gauss")]
    splits = sum(r.epsilon for r in rep.releases if r.mechanism == "exponential")
    counts = sum(r.epsilon for r in rep.releases if r.target.startswith("record count"))
    # 0.6 of epsilon, plus the shares of the levels the tree never reached
    assert len(eps_avg) == 1 and eps_avg[0] >= 0.6
    assert eps_avg[0] == pytest.approx(0.6 + (0.18 - splits) + (0.18 - counts))


def test_sigma_candidates_restrict_the_interval_size(blobs_2d):
    X, _ = blobs_2d
    m = DPM(epsilon=1.0, bounds=(0, 100), sigmas=[0.1], random_state=0).fit(X)
    np.testing.assert_allclose(m.interval_size_, [5.0, 5.0])  # beta = sigma / 2 of the range


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "X, match",
    [
        (np.array([[0.0, np.nan], [1.0, 2.0]]), "NaN or infinite"),
        (np.array([[0.0, np.inf], [1.0, 2.0]]), "NaN or infinite"),
        (np.zeros((0, 2)), "empty"),
        (np.array([1.0, 2.0, 3.0]), "2-D"),
        (np.array([["a", "b"], ["c", "d"]]), "numeric"),
    ],
)
def test_bad_data_gives_clear_errors(X, match):
    with pytest.raises(ValueError, match=match):
        DPM(epsilon=1.0, bounds=(0, 1)).fit(X)


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        ({"epsilon": 0}, ValueError, "epsilon"),
        ({"epsilon": -1}, ValueError, "epsilon"),
        ({"epsilon": "1"}, TypeError, "epsilon"),
        ({"delta": 1.0}, ValueError, "delta"),
        ({"delta": 0.0}, ValueError, "delta > 0"),
        ({"bounds": None}, ValueError, "bounds are required"),
        ({"bounds": (1, 0)}, ValueError, "lo < hi"),
        ({"bounds": [[0, 1]] * 3}, ValueError, "shape"),
        ({"max_depth": -1}, ValueError, "max_depth"),
        ({"t": 0.1, "q": 0.1}, ValueError, "t >= 2q"),
        ({"budget_split": (0.5, 0.5)}, ValueError, "budget_split"),
        ({"sigmas": [-1]}, ValueError, "sigmas"),
        ({"random_state": "x"}, TypeError, "random_state"),
    ],
)
def test_bad_parameters_give_clear_errors(kwargs, err, match):
    params = {"epsilon": 1.0, "bounds": (0, 1)} | kwargs
    with pytest.raises(err, match=match):
        DPM(**params).fit(_uniform(200))


def test_one_point_constant_column_and_one_dimension():
    one = DPM(epsilon=1.0, delta=1e-6, bounds=(0, 1), random_state=0).fit(np.array([[0.5, 0.5]]))
    assert one.n_clusters_ >= 1 and np.isfinite(one.cluster_centers_).all()
    const = np.column_stack([_uniform(2000, 1)[:, 0], np.full(2000, 0.3)])
    m = DPM(epsilon=1.0, bounds=(0, 1), random_state=0).fit(const)
    assert np.isfinite(m.cluster_centers_).all()
    rng = np.random.default_rng(0)
    x1 = np.concatenate([rng.normal(20, 1, 3000), rng.normal(80, 1, 3000)])[:, None]
    m1 = DPM(epsilon=1.0, bounds=(0, 100), max_depth=2, random_state=0).fit(x1)
    assert m1.n_clusters_ >= 2
    assert np.abs(np.sort(m1.cluster_centers_[:, 0])[[0, -1]] - [20, 80]).max() < 5


def test_values_outside_bounds_are_clipped_with_a_warning():
    X = _uniform(500) * 3 - 1  # in [-1, 2]
    with pytest.warns(UserWarning, match="clipped"):
        m = DPM(epsilon=1.0, delta=1e-6, bounds=(0, 1), random_state=0).fit(X)
    assert (m.cluster_centers_ >= 0).all() and (m.cluster_centers_ <= 1).all()


def test_predict_errors():
    with pytest.raises(RuntimeError, match="not fitted"):
        DPM(bounds=(0, 1)).predict(np.zeros((2, 2)))
    m = DPM(epsilon=1.0, delta=1e-6, bounds=(0, 1), random_state=0).fit(_uniform(500))
    with pytest.raises(ValueError, match="features"):
        m.predict(np.zeros((2, 3)))


def test_delta_none_on_small_data_is_capped():
    """1/n_hat^1.5 would be 1.9e-4 on 300 records: the delta rule caps it at DELTA_CAP."""
    X = _uniform(300)
    m = DPM(epsilon=1.0, bounds=(0, 1), random_state=0).fit(X)
    assert m.delta_ == DELTA_CAP == 1e-5
    assert m.privacy_report_.total().delta == pytest.approx(1e-5, rel=1e-12)
    assert any("the cap" in n for n in m.privacy_report_.notes)
