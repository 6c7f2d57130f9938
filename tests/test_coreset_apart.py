"""Clusters standing apart from the chosen centres get centres of their own (post-processing of
the refined coreset points: :func:`~privclust.cluster._coreset.apart.apart_centres`)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from privclust import CoresetKMeans
from privclust.cluster import coreset as coreset_module
from privclust.cluster._coreset.apart import apart_centres


def _points():
    """Refined points of two chosen clusters (about 0 and 30 on the first axis), each covered
    by a few points, and a group of two far points about 100 away."""
    big = np.array([[0.0, 0.0], [1.0, 0.5], [-0.5, 1.0], [30.0, 0.0], [31.0, -1.0]])
    far = np.array([[0.0, 100.0], [1.0, 101.0]])
    P = np.vstack([big, far])
    w = np.array([4000.0, 3000.0, 2500.0, 3000.0, 2000.0, 90.0, 80.0])
    return P, w, np.full(P.shape[0], 0.01)


def test_a_group_standing_apart_gets_a_centre_of_its_own():
    P, w, extra2 = _points()
    chosen = np.array([[0.2, 0.4], [30.4, -0.4]])
    out = apart_centres(P, w, extra2, chosen, floor=100.0, limit=5)
    assert out.shape == (3, 2)
    np.testing.assert_array_equal(out[:2], chosen)  # the chosen centres first, unchanged
    np.testing.assert_allclose(out[2], (90 * P[5] + 80 * P[6]) / 170)  # the group's mean


def test_a_group_below_the_floor_or_over_the_limit_gets_none():
    P, w, extra2 = _points()
    chosen = np.array([[0.2, 0.4], [30.4, -0.4]])
    assert apart_centres(P, w, extra2, chosen, floor=171.0, limit=5).shape == (2, 2)
    assert apart_centres(P, w, extra2, chosen, floor=100.0, limit=0).shape == (2, 2)


def test_pieces_of_a_chosen_cluster_are_not_apart():
    """Points a few units from their centre (a third of the way to the next centre or less)
    stay with it, however tight the centre's own points are."""
    P, w, extra2 = _points()
    P, w, extra2 = P[:5], w[:5], extra2[:5]
    P[2] = [-8.0, 3.0]  # 8.5 from its centre: far beyond its points' spread, not its spacing
    chosen = np.array([[0.2, 0.4], [30.4, -0.4]])
    assert apart_centres(P, w, extra2, chosen, floor=100.0, limit=5).shape == (2, 2)


def _unequal_mixture(seed):
    """Ten clusters in 5-d (std 4, means uniform in [-80, 80]) of 20,000 down to 150 records,
    their sizes falling geometrically."""
    rng = np.random.default_rng(seed)
    sizes = [20000, 11612, 6743, 3915, 2273, 1320, 766, 445, 258, 150]
    means = rng.uniform(-80, 80, size=(len(sizes), 5))
    X = np.vstack([rng.normal(m, 4.0, size=(n, 5)) for m, n in zip(means, sizes, strict=True)])
    return X, means


def _fit(X, seed, k=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CoresetKMeans(k, epsilon=1.0, bounds=(-100, 100), random_state=seed).fit(X)


def test_without_k_small_clusters_standing_apart_keep_a_centre():
    """The choice of k leaves small clusters out (the silhouette prefers fewer centres); the
    released mass standing apart gives them centres back. Two mixtures, seeds 0-2: clusters
    with a centre within 12 of their mean, 9.0 on average (before: 7.3; 9, 8, 9, 6, 6, 6)."""
    found = []
    for data in (2, 3):
        X, means = _unequal_mixture(data)
        for seed in range(3):
            C = _fit(X, seed).cluster_centers_
            nearest = np.sqrt(((means[:, None, :] - C[None]) ** 2).sum(axis=2)).min(axis=1)
            found.append(int((nearest < 12).sum()))
    assert np.mean(found) >= 8.5, found


def test_a_thick_tree_in_five_dimensions_has_equal_levels():
    """Without k in 3-5 tree dimensions, when the released record count leaves room for 256
    leaves, the levels' budgets are re-split equally (the plan's total unchanged, the report
    says so), and the note on the smallest findable cluster gives the support floor of a
    centre of its own."""
    X, _ = _unequal_mixture(2)
    report = _fit(X, 0).privacy_report_
    plan = {line["item"]: line["epsilon"] for line in report.plan}
    assert plan["cell counts, level 1"] == pytest.approx(plan["cell counts, level 2"])
    assert any("re-split: equal level budgets" in n for n in report.notes)
    assert any("support floor of a centre of its own" in n for n in report.notes)
    assert report.total().epsilon == pytest.approx(1.0, rel=1e-9)
    thin = _fit(X[:3000], 0).privacy_report_  # room for fewer leaves: budgets keep growing
    plan = {line["item"]: line["epsilon"] for line in thin.plan}
    assert plan["cell counts, level 1"] < plan["cell counts, level 2"]


def test_given_k_adds_no_centre():
    X, _ = _unequal_mixture(2)
    assert _fit(X, 1, k=10).n_clusters_ == 10
    assert coreset_module.NO_K_GROWTH_MAX_DIMS == 2


def test_the_planner_states_the_smallest_findable_cluster_the_fit_notes():
    """From public inputs alone (the released record count taken as n) the planner gives the
    note's figure: every level's significance floor and the support floor of a centre of its
    own (here the top levels' floors, the re-split tree's)."""
    from privclust.planner import plan

    X, _ = _unequal_mixture(2)
    model = _fit(X, 0)
    note = next(n for n in model.privacy_report_.notes if n.startswith("smallest findable"))
    fp = plan(CoresetKMeans(epsilon=1.0, bounds=(-100, 100)), model.n_hat_, d=5)
    assert f"about {math.ceil(fp.min_cluster_size)} records standing apart" in note
    assert any("a cluster standing apart of fewer than" in line for line in fp.cannot[0])


def test_a_fit_given_k_notes_its_smallest_findable_cluster_as_the_planner_does():
    """Given k too, the report says from public values how small a cluster standing apart the
    budget lets the tree keep, the planner's figure for the same estimator."""
    from privclust.planner import plan

    X, _ = _unequal_mixture(2)
    model = CoresetKMeans(10, epsilon=0.5, bounds=(-100, 100), random_state=0).fit(X)
    note = next(n for n in model.privacy_report_.notes if n.startswith("smallest findable"))
    fp = plan(CoresetKMeans(10, epsilon=0.5, bounds=(-100, 100)), model.n_hat_, d=5)
    assert f"about {math.ceil(fp.min_cluster_size)} records standing apart" in note
    assert fp.min_cluster_size > 150  # here the 150-record cluster is below it


@pytest.mark.parametrize("path", ["split step", "equal re-split"])
@pytest.mark.parametrize("delta", [None, 0.0], ids=["zcdp", "pure"])
def test_the_new_no_k_paths_spend_exactly_a_shared_accountants_budget(path, delta):
    """The thin coreset's split step and the thick 3-5-D tree's equal re-split move budget
    between the plan's lines: a shared Accountant of exactly the budget ends at zero, the
    report spends what it planned, and the next fit is refused before reading data."""
    from tests.test_coreset_split import _grid_blobs
    from tests.test_plan import _Untouchable

    from privclust.privacy import DELTA_CAP, Accountant, Budget, BudgetExceededError

    X, eps, bounds = (_grid_blobs()[0], 0.5, (-10, 40)) if path == "split step" else (
        _unequal_mixture(0)[0], 1.0, (-100, 100))
    acc = Accountant(Budget(eps, DELTA_CAP if delta is None else 0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CoresetKMeans(epsilon=eps, delta=delta, bounds=bounds, random_state=1,
                              accountant=acc).fit(X)
    rep = model.privacy_report_
    ran = any("split step" in r.target for r in rep.releases) if path == "split step" else \
        any("re-split" in n for n in rep.notes)
    assert ran
    assert acc.remaining[0] == pytest.approx(0.0, abs=1e-9)
    assert rep.total().epsilon == pytest.approx(eps, rel=1e-9) and rep.unspent == []
    with pytest.raises(BudgetExceededError, match="No data was read"):
        CoresetKMeans(epsilon=eps, delta=delta, bounds=bounds, accountant=acc).fit(
            _Untouchable())
