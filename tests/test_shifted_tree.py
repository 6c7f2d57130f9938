"""The randomly shifted grid tree that HSTKMeans, EMMC, DPCube and CoresetKMeans grow."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from privclust import CoresetKMeans, DPCube
from privclust.cluster._shifted_tree import RETRY_ITEM, ShiftedGrid, grow
from privclust.engine import LocalEngine
from privclust.engine.local import LocalGrouping
from privclust.privacy import Budget, Mechanisms, PrivacyPlan, PrivacyReport, resolve_random_state


def test_a_retried_level_keeps_the_geometry_of_its_own_level():
    """A level that released nothing is released again with the budget of the levels below;
    its cells are still cells of that level: each leaf is the centre of a level-1 cell's
    intersection with the box (not a point computed at the deepest planned level)."""
    X, _ = make_blobs(40, 2, centers=2, center_box=(-10, 10), random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = CoresetKMeans(2, epsilon=0.3, bounds=(-15, 15), random_state=0).fit(X)
    rep = m.privacy_report_
    assert any("retry" in r.item and r.epsilon > 0 for r in rep.releases)
    assert [r.item for r in rep.releases if r.item.startswith("cell counts, level")] == [
        "cell counts, level 1"]  # the retry released level 1 again
    assert m.coreset_.shape[0] >= 1 and (m.coreset_spread_ > 0).all()
    assert (np.abs(m.coreset_) < 15).all()  # inside the box, not on its corner


@pytest.mark.parametrize("make", [
    lambda: DPCube(4, epsilon=1.0, bounds=(-12, 12), random_state=2),
    lambda: CoresetKMeans(epsilon=1.0, bounds=(-12, 12), random_state=2),
], ids=["DPCube", "CoresetKMeans"])
def test_the_split_walk_gives_the_grid_walk_s_tree(make, monkeypatch):
    """Every tree estimator reads its levels through one CellWalk: the engine's split_cells
    (records keep their cell) and the per-level grid counts give the same releases."""
    X, _ = make_blobs(3000, 3, centers=4, center_box=(-8, 8), random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = make().fit(X)
        monkeypatch.setattr(ShiftedGrid, "root_holds_the_box", lambda self: False)
        slow = make().fit(X)
    assert str(fast.privacy_report_) == str(slow.privacy_report_)
    np.testing.assert_array_equal(fast.labels_, slow.labels_)


def test_levels_are_numbered_by_the_level_they_release():
    """The tree stops at level 2 (its retry releases level 2 again): the released levels are
    1 and 2, each with its cells' parents among the level above's."""
    X = np.random.default_rng(0).normal(0.0, 0.05, (200, 2))
    box = np.array([[-1.0, 1.0], [-1.0, 1.0]])
    grid = ShiftedGrid(box, np.array([0.3, 0.7]))
    levels = [f"cell counts, level {lv}" for lv in range(1, 7)]
    plan = PrivacyPlan("tree", 1.0, 0.0)
    for name in levels:
        plan.add(name, "geometric sparse histogram", "pure", 0.5 if name.endswith("1") else 0.1)
    plan.add(RETRY_ITEM, "geometric sparse histogram", "pure", 0.0)
    report = PrivacyReport("tree", Budget(1.0))
    mech = Mechanisms(resolve_random_state(0), report, plan)
    released = grow(LocalEngine(X, box), mech, grid, levels, RETRY_ITEM, lambda: None)
    assert [lv.level for lv in released] == list(range(1, len(released) + 1))
    for up, lv in zip(released, released[1:], strict=False):
        assert (lv.parent < up.cells.shape[0]).all()
        np.testing.assert_array_equal(lv.cells >> 1, up.cells[lv.parent])
    assert released[0].counts.sum() >= 150  # the records' cell was released


def test_no_estimator_imports_another_s_tree():
    """The tree lives in one module: no estimator module imports another estimator's module
    for it (the refinement rule of HSTKMeans and EMMC is a module of its own too)."""
    import ast
    from pathlib import Path

    import privclust.cluster as cluster

    estimators = {"hst", "dpcube", "coreset", "emmc", "hdbscan"}
    root = Path(cluster.__file__).parent
    for path in [*root.glob("*.py"), *root.glob("_coreset/*.py")]:
        if path.name == "__init__.py":
            continue  # the package lists its estimators
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                last = node.module.split(".")[-1]
                assert not (last in estimators and last != path.stem), (path.name, node.module)


@pytest.mark.parametrize("n_groups,b", [(3, 2), (40, 3), (5000, 10)])
def test_split_cells_counts_few_cells_without_sorting_the_records(n_groups, b, monkeypatch):
    """A level over few cells (at most 2 slots of (parent, bits) per record) is counted into a
    table, in linear time: no sort of the records' keys; the children, their parents, bits,
    counts, labels and first records equal np.unique's (a wider level still sorts)."""
    rng = np.random.default_rng(4)
    n = 4000
    X = rng.uniform(0.0, 1.0, (n, b))
    group = rng.integers(-1, n_groups, n).astype(np.int32)
    engine = LocalEngine(X, np.tile([0.0, 1.0], (b, 1)))
    origin, width = np.zeros(b), np.full(b, 0.125)
    inside = np.flatnonzero(group >= 0)
    bits = (np.floor(X[inside] / width).astype(np.int64) & 1) @ (1 << np.arange(b))
    keys = (group[inside].astype(np.int64) << b) | bits
    ukeys, first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True,
                                              return_counts=True)
    dense = (n_groups << b) <= 2 * inside.size
    if dense:
        monkeypatch.setattr(np, "argsort", lambda *a, **k: pytest.fail("sorted the records"))
    children, parent, cbits, ccounts = engine.split_cells(
        LocalGrouping(group, n_groups), origin, width, np.arange(b))
    np.testing.assert_array_equal(parent, ukeys >> b)
    np.testing.assert_array_equal(cbits, ukeys & ((1 << b) - 1))
    np.testing.assert_array_equal(ccounts, counts)
    np.testing.assert_array_equal(children.group[inside], inverse)
    assert (children.group[group < 0] == -1).all()
    np.testing.assert_array_equal(children.first, inside[first])
