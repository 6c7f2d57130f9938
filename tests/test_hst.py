"""HSTKMeans: the ledger against the noise actually drawn, per-level sensitivity, the plan,
always k centres, a utility floor and bad input.

The instrumented run reads the epsilon of every noise draw of every level's sparse histogram
(and of the refinement) and checks it against the ledger line it was recorded under, and checks
*what* level 1 released against a count computed here from the data. Planting half the noise
(the histogram drawn at twice its recorded epsilon) makes that check fail.
"""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_blobs

import privclust.cluster._refine as refine_rule
import privclust.cluster._shifted_tree as tree_mod
from _bad_input import BAD_BOUNDS_AND_DATA, BAD_EPSILON_AND_K, assert_clear_error
from _draws import DrawRecorder, true_spend
from privclust.cluster._shifted_tree import ShiftedGrid, hst_threshold, level_keys
from privclust.cluster.hst import HSTKMeans
from privclust.engine import LocalEngine
from privclust.metrics import accuracy_majority
from privclust.privacy import Accountant, Budget, BudgetExceededError

# =========================================================================== instrumentation


def level_one_counts(X, bounds, shift):
    """Exact level-1 cell counts, computed here: cell width = the bounds' width, origin =
    lo - shift (every record is in the root, so the whole level is counted)."""
    lo, hi = bounds[:, 0], bounds[:, 1]
    idx = np.floor((np.clip(X, lo, hi) - (lo - shift)) / (hi - lo)).astype(np.int64)
    _, counts = np.unique(idx, axis=0, return_counts=True)
    return np.sort(counts)


def check_fit(model, rec, epsilon, X, bounds):
    report = model.privacy_report_
    spent = true_spend(report, rec, X.shape[1])
    np.testing.assert_allclose(spent, [r.epsilon for r in report.releases], rtol=1e-9)
    assert math.isclose(sum(spent), epsilon, rel_tol=1e-9), (sum(spent), epsilon)
    keys, counts, n_cells = rec.histograms[0]
    assert n_cells == 2 ** X.shape[1]  # level 1: the 2^d children of the root
    np.testing.assert_array_equal(np.sort(counts), level_one_counts(X, bounds, model.shift_))
    for keys, counts, n_cells in rec.histograms:  # every level: distinct cells, counts of X
        assert np.unique(keys).size == keys.size and counts.sum() <= X.shape[0]
        assert (keys >= 0).all() and (keys < n_cells).all()


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(4000, 3, centers=5, center_box=(-8, 8), cluster_std=0.6, random_state=1)
    return np.clip(X, -10, 10), y


BOUNDS3 = np.tile([-10.0, 10.0], (3, 1))


@pytest.mark.parametrize("refine", [False, True])
def test_ledger_equals_the_noise_actually_drawn(blobs, refine, monkeypatch):
    X, _ = blobs
    rec = DrawRecorder(monkeypatch)
    model = HSTKMeans(5, epsilon=0.7, bounds=(-10, 10), refine=refine, random_state=2).fit(X)
    check_fit(model, rec, 0.7, X, BOUNDS3)
    assert len(model.tree_counts_) >= 2  # several levels were released and checked


def test_half_the_noise_is_caught(blobs, monkeypatch):
    X, _ = blobs
    rec = DrawRecorder(monkeypatch, histogram_factor=2.0)  # draws at 2 eps, records eps
    model = HSTKMeans(5, epsilon=0.7, bounds=(-10, 10), random_state=2).fit(X)
    with pytest.raises(AssertionError):
        check_fit(model, rec, 0.7, X, BOUNDS3)


def test_one_record_changes_each_level_by_at_most_one_in_one_cell():
    rng = np.random.default_rng(5)
    d = 3
    bounds = np.tile([0.0, 1.0], (d, 1))
    X = np.clip(rng.normal(0.5, 0.15, (3000, d)), 0, 1)
    shift = rng.uniform(0, 1, d)
    tree = ShiftedGrid(bounds, shift)
    for extra in ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], X[0], [0.51, 0.49, 0.5]):
        X1 = np.vstack([X, extra])
        survivors = np.zeros((1, d), dtype=np.int64)
        for level in range(1, 7):
            blk = tree.block(level)
            hists = []
            for data in (X, X1):
                cells, counts = LocalEngine(data, bounds).cell_counts(tree.origin,
                                                                       tree.width(level))
                keys, inside = level_keys(survivors, cells, blk)
                hists.append(dict(zip(keys.tolist(), counts[inside].tolist(), strict=True)))
            diff = {key: hists[1].get(key, 0) - hists[0].get(key, 0)
                    for key in hists[0].keys() | hists[1].keys()}
            changed = {key: v for key, v in diff.items() if v}
            assert len(changed) <= 1 and set(changed.values()) <= {1}, (level, changed)
            # the next universe: the non-empty cells of X (public here: fixed for both)
            cells, _ = LocalEngine(X, bounds).cell_counts(tree.origin, tree.width(level))
            keep = level_keys(survivors, cells, blk)[1]
            survivors = cells[keep]
    assert survivors.shape[0] > 50  # the universes were not trivially small


def test_threshold_bounds_the_false_positives():
    for eps, b in ((0.1, 10), (1.0, 2), (0.05, 40)):
        t = hst_threshold(eps, 2**b)
        p = math.exp(-eps * t) / (1 + math.exp(-eps))  # P(geometric noise >= t)
        assert 2**b * p <= tree_mod.FALSE_POSITIVES_PER_PARENT * (1 + 1e-9)
        assert 2**b * math.exp(-eps * (t - 1)) / (1 + math.exp(-eps)) \
            > tree_mod.FALSE_POSITIVES_PER_PARENT  # the smallest such integer


# =========================================================================== plan
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("refine", [False, True])
def test_spent_equals_planned(blobs, epsilon, refine):
    X, _ = blobs
    model = HSTKMeans(5, epsilon=epsilon, bounds=(-10, 10), refine=refine,
                      random_state=0).fit(X)
    rep = model.privacy_report_
    assert rep.private and rep.unspent == []
    assert rep.total().epsilon == pytest.approx(epsilon, rel=1e-9, abs=1e-9)
    assert rep.total().delta == 0.0


def test_a_tree_that_stops_early_spends_its_budget_on_a_retry():
    X = np.random.default_rng(0).uniform(0, 1, (20, 2))
    model = HSTKMeans(7, epsilon=1.0, bounds=(0, 1), max_depth=8, random_state=0).fit(X)
    rep = model.privacy_report_
    assert rep.total().epsilon == pytest.approx(1.0, rel=1e-9)
    assert any(r.item == tree_mod.RETRY_ITEM for r in rep.releases)
    assert len(rep.releases) < 8  # the levels below were not released one by one


def test_shared_accountant_is_checked_before_reading_data():
    acc = Accountant(Budget(1.0))
    X = np.random.default_rng(0).uniform(0, 1, (50, 2))
    HSTKMeans(2, epsilon=0.6, bounds=(0, 1), accountant=acc, random_state=0).fit(X)
    with pytest.raises(BudgetExceededError):
        HSTKMeans(2, epsilon=0.6, bounds=(0, 1), accountant=acc).fit("not even data")


# =========================================================================== k centres
def _check_centres(model, k, bounds):
    c = model.cluster_centers_
    assert c.shape == (k, bounds.shape[0]) and model.n_clusters_ == k
    assert np.isfinite(c).all()
    assert (c >= bounds[:, 0]).all() and (c <= bounds[:, 1]).all()
    assert model.cluster_sizes_.shape == (k,) and model.cluster_sizes_.dtype == np.int64


@pytest.mark.parametrize("refine", [False, True])
def test_always_k_centres_inside_the_bounds(refine):
    rng = np.random.default_rng(3)
    tiny = rng.uniform(-1, 1, (20, 3))
    b3 = np.tile([-1.0, 1.0], (3, 1))
    _check_centres(HSTKMeans(7, bounds=(-1, 1), refine=refine, random_state=0).fit(tiny), 7, b3)
    # k far above the number of private leaves (two tight blobs)
    two = np.vstack([rng.normal(-0.5, 0.01, (300, 2)), rng.normal(0.5, 0.01, (300, 2))])
    b2 = np.tile([-1.0, 1.0], (2, 1))
    m = HSTKMeans(60, bounds=(-1, 1), refine=refine, random_state=0).fit(two)
    assert sum(c.shape[0] for c in m.tree_cells_) < 60
    _check_centres(m, 60, b2)
    # points outside the bounds (clipped), one feature, float32
    wide = rng.uniform(-3, 3, (500, 1)).astype(np.float32)
    with pytest.warns(UserWarning, match="clipped"):
        m = HSTKMeans(3, bounds=(-1, 1), refine=refine, random_state=0).fit(wide)
    _check_centres(m, 3, np.array([[-1.0, 1.0]]))


def test_wide_data_halves_its_dimensions_in_blocks():
    X, _ = make_blobs(3000, 45, centers=3, center_box=(-5, 5), random_state=0)
    m = HSTKMeans(3, bounds=(-10, 10), max_depth=4, random_state=0).fit(X)
    _check_centres(m, 3, np.tile([-10.0, 10.0], (45, 1)))
    assert m.privacy_report_.total().epsilon == pytest.approx(1.0)
    tree = ShiftedGrid(np.tile([-10.0, 10.0], (45, 1)), np.zeros(45))
    assert [b.size for b in tree.blocks] == [23, 22]


# =========================================================================== behaviour
def test_reproducible_predict_and_clone(blobs):
    X, _ = blobs
    a = HSTKMeans(5, bounds=(-10, 10), random_state=3).fit(X)
    b = HSTKMeans(5, bounds=(-10, 10), random_state=3).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.predict(X), a.labels_)
    assert a.n_features_in_ == 3 and a.n_iter_ == 1  # refine="auto" refines these blobs
    assert clone(a).get_params() == a.get_params()
    assert HSTKMeans(5, bounds=(-10, 10), refine=False, random_state=3).fit(X).n_iter_ == 0
    r = HSTKMeans(5, bounds=(-10, 10), refine=True, random_state=3).fit(X)
    assert r.n_iter_ == 1 and r.centers_history_.shape == (2, 5, 3)


def test_utility_synth_10d_target():
    """The issue's target: Synth-10d (100,000 x 10, 64 blobs), epsilon 1, k = 64."""
    X, y = make_blobs(100_000, 10, centers=64, center_box=(-100, 100), random_state=42)
    X = np.clip(X, -100, 100)
    for seed in (0, 1):
        m = HSTKMeans(64, epsilon=1.0, bounds=(-100, 100), random_state=seed).fit(X)
        assert accuracy_majority(y, m.labels_) >= 0.90


def test_utility_small_blobs_at_low_epsilon(blobs):
    X, y = blobs
    accs = [accuracy_majority(y, HSTKMeans(5, epsilon=0.5, bounds=(-10, 10),
                                           random_state=s).fit(X).labels_) for s in range(3)]
    assert min(accs) >= 0.9, accs


def test_docstring_example_runs():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(HSTKMeans, "HSTKMeans"):
        runner.run(test)
    assert runner.failures == 0 and runner.tries > 0


# =========================================================================== bad input
@pytest.mark.parametrize(
    "kwargs, X, match",
    [
        *BAD_EPSILON_AND_K,
        ({"n_clusters": "3"}, None, "n_clusters"),
        ({"max_depth": 0}, None, "max_depth"),
        ({"refine": "yes"}, None, "refine"),
        ({"refine": "Auto"}, None, "refine"),
        ({"refine": True, "refine_share": 1.0}, None, "refine_share"),
        *BAD_BOUNDS_AND_DATA,
    ],
)
def test_bad_input_is_a_clear_error(kwargs, X, match):
    assert_clear_error(HSTKMeans, kwargs, X, match)


# =========================================================================== the cell walk
def _tree_fits(make, X, monkeypatch):
    """The fit with the NumPy engine's split_cells, then with per-level cell counts (the path
    of engines without split_cells, e.g. Dask)."""
    fast = make().fit(X)
    monkeypatch.setattr(ShiftedGrid, "root_holds_the_box", lambda self: False)
    slow = make().fit(X)
    return fast, slow


@pytest.mark.parametrize("d, k, depth", [(2, 4, None), (3, 5, 8), (45, 3, 4)])
def test_the_split_walk_gives_the_grid_walk_s_tree(d, k, depth, monkeypatch):
    X, _ = make_blobs(3000, d, centers=k, center_box=(-8, 8), random_state=d)
    fast, slow = _tree_fits(lambda: HSTKMeans(k, bounds=(-10, 10), max_depth=depth,
                                              random_state=1), X.astype(np.float32),
                            monkeypatch)
    np.testing.assert_array_equal(fast.cluster_centers_, slow.cluster_centers_)
    for a, b in zip(fast.tree_counts_, slow.tree_counts_, strict=True):
        np.testing.assert_array_equal(a, b)
    assert str(fast.privacy_report_) == str(slow.privacy_report_)


@pytest.mark.parametrize("d", [3, 45])
def test_split_cells_are_the_non_empty_cells_of_the_grid(d):
    """Level by level (blocks of features for wide data), the children of split_cells are
    the grid's non-empty cells with their counts, and every record is in its own cell."""
    rng = np.random.default_rng(d)
    bounds = np.column_stack([-rng.uniform(1, 5, d), rng.uniform(1, 5, d)])
    X = np.vstack([rng.normal(0.0, 0.7, (800, d)), bounds.T, bounds.T[::-1]])
    tree = ShiftedGrid(bounds, rng.uniform(0, 1, d) * (bounds[:, 1] - bounds[:, 0]))
    engine = LocalEngine(X, bounds)
    groups, n_parents = engine.root(), 1
    for level in range(1, 7):
        w = tree.width(level)
        groups, parent, bits, counts = engine.split_cells(groups, tree.origin, w,
                                                          tree.block(level))
        cells, want = engine.cell_counts(tree.origin, w)
        got = engine.group_cells(groups, tree.origin, w)
        order = np.lexsort(got.T[::-1])
        np.testing.assert_array_equal(got[order], cells)
        np.testing.assert_array_equal(counts[order], want)
        np.testing.assert_array_equal(np.floor((np.clip(X, *bounds.T) - tree.origin) / w),
                                      got[groups.group])
        assert (np.diff(parent) >= 0).all() and (parent < n_parents).all()
        assert (bits < 2 ** tree.block(level).size).all()
        n_parents = counts.size
    assert n_parents > 300  # the cells did split


def test_split_cells_without_room_for_flat_keys_sorts_pairs():
    """Group ids times 2^b past 62 bits: the (parent, bits) pairs are sorted instead of
    packed into one key; the children are the same."""
    from privclust.engine.local import LocalGrouping

    rng = np.random.default_rng(1)
    d = 30
    X = rng.uniform(-1, 1, (400, d))
    engine = LocalEngine(X, np.tile([-1.0, 1.0], (d, 1)))
    group = rng.integers(-1, 7, 400).astype(np.int32)
    dims = np.arange(d)
    args = (np.full(d, -1.0), np.full(d, 0.5), dims)
    packed = engine.split_cells(LocalGrouping(group, 7), *args)
    paired = engine.split_cells(LocalGrouping(group, 2**40), *args)  # 2^40 * 2^30 > 2^62
    for a, b in zip(packed[1:], paired[1:], strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(packed[0].group, paired[0].group)
    np.testing.assert_array_equal(packed[0].first, paired[0].first)
    assert (packed[0].group[group < 0] == -1).all() and packed[2].max() < 2**d


def test_a_shift_at_the_edge_of_the_root_walks_the_grid():
    bounds = np.tile([0.0, 1.0], (2, 1))
    assert ShiftedGrid(bounds, np.array([0.5, 0.2])).root_holds_the_box()
    # a record at the upper bound may round onto the root's far edge: the public check sends
    # the walk to the per-level grids, which leave such a record out of the root as before
    edge = ShiftedGrid(bounds, np.array([1.0 - 1e-15, 0.2]))
    assert not edge.root_holds_the_box()
    X = np.array([[1.0, 0.5]] * 50 + [[0.2, 0.5]] * 50)
    walk = tree_mod.CellWalk(LocalEngine(X, bounds), edge)
    assert not walk.split
    keys, counts = walk.next(1)  # the root's children: a record off the root is in none
    assert counts.sum() in (50, 100) and ((keys >= 0) & (keys < 4)).all()
    assert (walk.keys >= 0).sum() == keys.size


# =========================================================================== refine="auto"
def shuttle_like(n=3000, seed=0):
    """Three clusters; feature 1's public range (-5000, 5000) is 1000x its data's spread
    (about 10, as in uci_shuttle), the others' ranges are (0, 100)."""
    rng = np.random.default_rng(seed)
    centres = np.array([[20.0, 0.0, 50.0], [60.0, 2.0, 30.0], [40.0, -2.0, 80.0]])
    y = rng.integers(0, 3, n)
    X = centres[y] + rng.normal(0.0, [3.0, 2.5, 3.0], (n, 3))
    return X, y, np.array([[0.0, 100.0], [-5000.0, 5000.0], [0.0, 100.0]])


def _cost(X, bounds, centres):
    Xc = np.clip(X, bounds[:, 0], bounds[:, 1])
    return float(((Xc[:, None, :] - centres[None]) ** 2).sum(axis=2).min(axis=1).sum())


def test_the_default_refines_where_a_public_range_dwarfs_the_data():
    """The uci_shuttle failure: cells 1250 wide along feature 1 put the tree's centres far
    from the data; the rule sees it from the public geometry and a noisy count, refines,
    and spends the whole budget."""
    X, _, bounds = shuttle_like()
    ratios = []
    for seed in range(3):
        auto = HSTKMeans(3, epsilon=1.0, bounds=bounds, random_state=seed).fit(X)
        off = HSTKMeans(3, epsilon=1.0, bounds=bounds, refine=False, random_state=seed).fit(X)
        rep = auto.privacy_report_
        assert auto.n_iter_ == 1 and any("the private Lloyd step runs" in n for n in rep.notes)
        assert rep.unspent == [] and rep.total().epsilon == pytest.approx(1.0, rel=1e-9)
        assert [r.target for r in rep.releases][0] == "record count (refine='auto')"
        ratios.append(_cost(X, bounds, auto.cluster_centers_) /
                      _cost(X, bounds, off.cluster_centers_))
    assert max(ratios) < 0.2, ratios


def test_the_default_gives_the_budget_to_the_tree_where_cells_resolve_the_clusters():
    X, _ = make_blobs(2000, 2, centers=40, center_box=(-90, 90), cluster_std=1.0,
                      random_state=0)
    m = HSTKMeans(40, epsilon=1.0, bounds=(-100, 100), random_state=0).fit(X)
    rep = m.privacy_report_
    assert m.n_iter_ == 0 and any("no refinement" in n for n in rep.notes)
    assert rep.unspent == [] and rep.total().epsilon == pytest.approx(1.0, rel=1e-9)
    levels = [r.epsilon for r in rep.releases if r.target.startswith("cell counts")]
    assert sum(levels) == pytest.approx(1.0 - 0.02, rel=1e-9)  # all but the record count
    assert not any("refinement" in r.target for r in rep.releases)


def test_the_rule_compares_the_expected_errors():
    tree = ShiftedGrid(np.tile([-1.0, 1.0], (4, 1)), np.zeros(4))
    assert refine_rule.quantisation_error(tree, 3) == pytest.approx(4 * (4.0 / 8) ** 2 / 12)
    # 2 (d / eps_sum)^2 sum half^2 (k / n)^2
    assert refine_rule.refinement_noise(tree.box, 0.5, 2, 100.0) == pytest.approx(
        2 * 8.0**2 * 4 * 0.02**2)
    assert refine_rule.refinement_noise(tree.box, 0.5, 2, -3.0) == refine_rule.refinement_noise(
        tree.box, 0.5, 2, 1.0)


def test_the_rule_decides_from_released_values_only():
    """The replay harness (tests/_replay.py) on the shuttle-like set: every neighbour makes
    the same decision from the same released count, the same releases, the same model."""
    from _replay import ReplayMismatch, check_neighbour, neighbours

    X, _, bounds = shuttle_like(1500)
    for make in (lambda: HSTKMeans(3, epsilon=1.0, bounds=bounds, random_state=5),
                 lambda: HSTKMeans(12, epsilon=1.0, bounds=bounds, random_state=5)):
        refines = make().fit(X).n_iter_
        for label, Xn in neighbours(X, bounds).items():
            try:
                assert check_neighbour(make, X, Xn) > 3
            except ReplayMismatch as exc:
                raise ReplayMismatch(f"{label}: {exc}") from None
        assert refines == (make().n_clusters == 3)  # both branches of the rule were replayed


def test_the_harness_catches_the_rule_on_the_exact_count(monkeypatch):
    from _replay import ReplayMismatch, check_neighbour

    X, _, bounds = shuttle_like(1500)
    original = refine_rule.refinement_noise

    def planted(bounds_, eps_sum, k, n_hat):  # the fault: the exact n instead of n_hat
        return original(bounds_, eps_sum, k, float(planted.n))

    monkeypatch.setattr(refine_rule, "refinement_noise", planted)
    fit = HSTKMeans.fit

    def fit_and_see_n(self, X_, y=None):
        planted.n = np.asarray(X_).shape[0]
        return fit(self, X_, y)

    monkeypatch.setattr(HSTKMeans, "fit", fit_and_see_n)
    with pytest.raises(ReplayMismatch):
        check_neighbour(lambda: HSTKMeans(3, bounds=bounds, random_state=5), X, X[:-1])


def test_auto_with_no_refine_share_is_off(blobs):
    from privclust import EMMC

    X, _ = blobs
    for est in (HSTKMeans, EMMC):
        m = est(5, bounds=(-10, 10), refine_share=0, random_state=0).fit(X)
        off = est(5, bounds=(-10, 10), refine=False, random_state=0).fit(X)
        assert m.n_iter_ == 0 and m.privacy_report_.unspent == []
        np.testing.assert_array_equal(m.cluster_centers_, off.cluster_centers_)
