"""CoresetKMeans: finds k itself, takes k when given, spends its plan, decides from releases
only, round-trips through a model file and runs from the command line."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from _replay import ReplayMismatch, check_neighbour, neighbours
from privclust import Accountant, Budget, BudgetExceededError, CoresetKMeans, cli, io
from privclust.cluster import coreset as coreset_module
from privclust.cluster._coreset.select import (
    candidate_centres,
    candidate_ks,
    poisson_sample,
    silhouette_sum,
    silhouette_sums,
    ward_merge,
)
from privclust.cluster._coreset.tree import (
    Grid,
    depth_for_k,
    leaf_capacity,
    leaf_summary,
    significance_floor,
)
from privclust.privacy import DELTA_CAP

BOUNDS = (-30.0, 30.0)


@pytest.fixture(scope="module")
def blobs():
    """Six well separated blobs in 4-d."""
    X, y = make_blobs(12000, 4, centers=6, cluster_std=1.0, center_box=(-20, 20),
                      random_state=3)
    return np.clip(X, *BOUNDS), y


def _fit(X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # clipping: the data holder's diagnostic
        return CoresetKMeans(**({"epsilon": 0.5, "bounds": BOUNDS, "random_state": 0} | kw)
                             ).fit(X)


# ---------------------------------------------------------------------- utility
@pytest.mark.parametrize("seed", [0, 1])
def test_finds_the_true_k_with_private_bounds(blobs, seed):
    X, y = blobs
    model = _fit(X, bounds="private", random_state=seed)
    assert model.n_clusters_ == 6
    assert 6 in model.candidate_ks_ and model.candidate_ks_.min() == 2
    assert adjusted_rand_score(y, model.labels_) > 0.95
    assert model.privacy_report_.total().epsilon == pytest.approx(0.5, rel=1e-9)


def test_finds_the_true_k_on_wide_data():
    """More than 50 features: k is chosen in the projection, the clusters recovered."""
    X, y = make_blobs(8000, 60, centers=4, cluster_std=1.0, center_box=(-20, 20),
                      random_state=5)
    model = _fit(X, epsilon=1.0)
    assert model.projection_.shape == (10, 60)
    assert model.n_clusters_ == 4
    assert adjusted_rand_score(y, model.labels_) > 0.95


@pytest.mark.parametrize("seed", [0, 1])
def test_wide_lloyd_steps_move_the_centres_to_the_means(seed):
    """Wide data: Lloyd steps in the original space (balls about the recovered centres, a
    private radius each) follow the recovery, from the refinement's budget: the plan's total
    is unchanged, every step's sums share one zCDP block, and each step brings the centres
    closer to the clusters' means."""
    X, y = make_blobs(20000, 60, centers=8, cluster_std=1.0, center_box=(-20, 20),
                      random_state=seed)
    model = _fit(X, epsilon=1.0, random_state=seed)
    report = model.privacy_report_
    plan = {line["item"]: line for line in report.plan}
    assert {"ball radius, Lloyd step 1", "cluster sizes, recovery",
            "ball radius, Lloyd step 3"} <= set(plan)
    assert [n for n in plan if "sums" in n] == ["cluster sums, every step"]
    sums = [r for r in report.releases if r.target.startswith("cluster sums")]
    assert len(sums) == 4 and all(r.mechanism == "gaussian (zCDP)" for r in sums)
    assert report.total().epsilon == pytest.approx(1.0, rel=1e-9)
    means = np.array([X[y == j].mean(axis=0) for j in range(8)])

    def error(C):
        return np.median(np.min(((C[:, None] - means[None]) ** 2).sum(axis=2), axis=0))

    errors = [error(C) for C in model.centers_history_]
    assert len(errors) == 4 and errors[-1] < 0.1 * errors[0]
    assert all(b < a for a, b in zip(errors[:-1], errors[1:], strict=True))
    assert adjusted_rand_score(y, model.labels_) > 0.95


@pytest.mark.parametrize("seed", [0, 3])
def test_lloyd_steps_on_narrow_data_use_balls_about_the_centres(seed):
    """Up to 50 features too, each Lloyd step restricts a cluster's records to a ball about
    its centre whose radius is a private quantile (its own line item), and each step brings
    the centres closer to the clusters' means (the previous centres' noise variance, carried
    from the refined coreset points, weighs them against the new ones)."""
    X, y = make_blobs(20000, 4, centers=6, cluster_std=1.0, center_box=(-20, 20),
                      random_state=seed)
    model = _fit(X, bounds=(-30, 30), random_state=seed, n_lloyd=2)
    plan = [line["item"] for line in model.privacy_report_.plan]
    assert {"ball radius, Lloyd step 1", "ball radius, Lloyd step 2"} <= set(plan)
    assert model.privacy_report_.total().epsilon == pytest.approx(0.5, rel=1e-9)
    means = np.array([X[y == j].mean(axis=0) for j in range(6)])
    errors = [np.median(np.min(((C[:, None] - means[None]) ** 2).sum(axis=2), axis=0))
              for C in model.centers_history_]
    assert len(errors) == 3 and errors[-1] < 0.3 * errors[0]
    assert all(b < a for a, b in zip(errors[:-1], errors[1:], strict=True))


def test_unsupported_clusters_are_dropped_down_to_k():
    """Clusters whose noisy size is below three noise scales are dropped (without k, and given
    k on wide data before the merge down to k), keeping at least the k largest."""
    from privclust.cluster._coreset.combine import COUNT_SHARE, SUPPORT_SCALES, supported

    eps = 0.5
    floor = SUPPORT_SCALES / (COUNT_SHARE * eps)  # 40 records
    sizes = np.array([500, 3, 80, -2, 41, 39, 600])
    np.testing.assert_array_equal(supported(sizes, eps), sizes >= floor)
    np.testing.assert_array_equal(supported(sizes, eps, at_least=4), sizes >= floor)
    five = supported(sizes, eps, at_least=5)  # only 4 supported: the 5 largest
    np.testing.assert_array_equal(np.flatnonzero(five), [0, 2, 4, 5, 6])
    assert supported(np.array([1, 5, 2]), eps).tolist() == [False, True, False]
    assert supported(np.array([1, 1]), eps, at_least=9).all()
    assert supported(np.zeros(0), eps, at_least=3).size == 0


def test_takes_n_clusters_when_given(blobs):
    X, _ = blobs
    model = _fit(X, n_clusters=4)
    assert model.n_clusters_ == 4 and model.cluster_centers_.shape == (4, 4)
    assert model.candidate_ks_.size == 0
    plan = [line["item"] for line in model.privacy_report_.plan]
    assert "choice of k" not in plan and "cluster sizes, Lloyd step 1" in plan
    with pytest.raises(ValueError, match="n_clusters must be an int >= 1"):
        _fit(X, n_clusters=0)


def test_candidates_and_score():
    assert candidate_ks(5) == [2, 3, 4, 5]
    ks = candidate_ks(100)
    assert ks[:15] == list(range(2, 17)) and ks[-1] == 100 and ks == sorted(set(ks))
    Y = np.array([[0.0], [1.0], [10.0]])
    # one record's term is at most 1: adding a record moves the score by at most 1
    base = silhouette_sum(Y, np.array([[0.0], [10.0]]))
    more = silhouette_sum(np.vstack([Y, [[5.0]]]), np.array([[0.0], [10.0]]))
    assert 0 <= more - base <= 1 and base == pytest.approx(2 + 8 / 9, abs=1e-4)


def test_the_choice_scores_a_poisson_sample_of_public_rate(blobs, monkeypatch):
    X, _ = blobs
    monkeypatch.setattr(coreset_module, "SCORE_SAMPLE", 36.0)  # about a fifth of the records
    seen = []

    def spy(Y, candidates, *anchors):
        seen.append(Y.shape[0])
        return silhouette_sums(Y, candidates, *anchors)

    monkeypatch.setattr("privclust.cluster._coreset.data.silhouette_sums", spy)
    model = _fit(X)
    line = next(r for r in model.privacy_report_.releases if r.target.startswith(
        "the number of clusters"))
    rate = 36.0 / (line.epsilon * model.n_hat_)  # public: the choice's epsilon, n_hat
    assert 0.1 < rate < 0.3
    assert len(seen) == 1 and abs(seen[0] - rate * X.shape[0]) < 4 * np.sqrt(rate * X.shape[0])
    assert f"Poisson sample of public rate {rate:.4g}" in line.note
    assert model.n_clusters_ == 6


def test_a_poisson_sample_keeps_each_records_draw():
    a = poisson_sample(1000, 0.3, np.random.default_rng(3))
    b = poisson_sample(1001, 0.3, np.random.default_rng(3))  # one record more, at the end
    np.testing.assert_array_equal(a, b[:1000])
    assert 250 < a.sum() < 350
    gen = np.random.default_rng(3)
    assert poisson_sample(50, 1.0, gen).all() and gen.random() == np.random.default_rng(
        3).random()  # every record: no draw


def test_candidate_centres_find_separated_groups():
    rng = np.random.default_rng(0)
    means = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0], [5.0, 20.0]])
    P = np.repeat(means, 8, axis=0) + rng.normal(scale=0.3, size=(40, 2))
    w = rng.uniform(5, 50, size=40)
    cands = candidate_centres(P, w, [2, 3, 5, 8, 40, 60], seed=1, n_init=3)
    assert [c.shape[0] for c in cands] == [2, 3, 5, 8, 40, 40]  # at most the points
    found = np.sort(np.round(cands[2]).astype(int), axis=0)
    np.testing.assert_array_equal(found, np.sort(means.astype(int), axis=0))
    again = candidate_centres(P, w, [2, 3, 5, 8, 40, 60], seed=1, n_init=3)
    assert all(np.array_equal(x, y) for x, y in zip(cands, again, strict=True))


# ---------------------------------------------------------------------- the plan
class _Untouchable:
    shape = (3000, 4)

    def __array__(self, *args, **kwargs):
        raise AssertionError("the data was read before the budget was checked")


@pytest.mark.parametrize("delta", [None, 1e-6, 0.0])
def test_spends_exactly_the_plan(blobs, delta):
    X, _ = blobs
    model = _fit(X, delta=delta, bounds="private")
    rep = model.privacy_report_
    assert rep.total().epsilon == pytest.approx(0.5, rel=1e-9)
    assert rep.total().delta == pytest.approx(rep.planned.delta, rel=1e-9, abs=0)
    assert rep.unspent == []
    if delta == 0.0:
        assert rep.planned.delta == 0 and model.delta_ == 0
        assert not any("gaussian" in r.mechanism for r in rep.releases)
    elif delta is None:
        assert 0 < rep.planned.delta <= DELTA_CAP


def test_the_plan_is_checked_before_the_data_is_read(blobs):
    X, _ = blobs
    acc = Accountant(Budget(1.0, DELTA_CAP))
    CoresetKMeans(epsilon=1.0, bounds=BOUNDS, random_state=0, accountant=acc).fit(X)
    assert acc.remaining[0] == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(BudgetExceededError, match="No data was read"):
        CoresetKMeans(epsilon=1.0, bounds=BOUNDS, accountant=acc).fit(_Untouchable())


# ---------------------------------------------------------------------- replay
def _check_all(make, X, bounds):
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label, Xn in neighbours(X, np.tile(bounds, (X.shape[1], 1))).items():
            try:
                checked += check_neighbour(make, X, Xn)
            except ReplayMismatch as exc:
                raise ReplayMismatch(f"{label}: {exc}") from None
    assert checked > 0


@pytest.mark.parametrize("case", ["public", "private", "pure", "k given", "projected",
                                  "wide", "k given, fewer levels", "sampled score",
                                  "wide, sampled score", "no k, default depth"])
def test_decides_from_releases_only(case, monkeypatch):
    if "sampled" in case:  # the choice of k scores a Poisson sample of about 300 records
        monkeypatch.setattr(coreset_module, "SCORE_SAMPLE", 9.0)
    d = {"projected": 12, "wide": 52, "wide, sampled score": 52}.get(case, 2)
    X, _ = make_blobs(1500, d, centers=3, cluster_std=0.4, center_box=(-2, 2),
                      random_state=4)
    X = np.clip(X, -3, 3)
    kw = {"epsilon": 1.0, "bounds": (-3.0, 3.0), "random_state": 5, "max_depth": 4}
    kw |= {"private": {"bounds": "private"}, "pure": {"delta": 0.0},
           "k given": {"n_clusters": 3},
           "k given, fewer levels": {"n_clusters": 8, "max_depth": None},
           "no k, default depth": {"max_depth": None}}.get(case, {})
    _check_all(lambda: CoresetKMeans(**kw), X, (-3.0, 3.0))


# ---------------------------------------------------------------------- files and the CLI
def test_saves_and_loads(blobs, tmp_path):
    X, _ = blobs
    model = _fit(X, bounds="private")
    path = tmp_path / "m.json"
    io.save_model(model, path)
    loaded = io.load_model(path)
    assert isinstance(loaded, CoresetKMeans)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    np.testing.assert_array_equal(loaded.bounds_, model.bounds_)
    np.testing.assert_array_equal(loaded.candidate_ks_, model.candidate_ks_)
    assert loaded.n_hat_ == model.n_hat_
    doc = json.loads(path.read_text())
    doc["model"]["cluster_centers"][0][0] = 1e6  # outside the bounds: a tampered file
    path.write_text(json.dumps(doc))
    with pytest.raises(io.ModelFormatError, match="outside the model's bounds"):
        io.load_model(path)


def test_command_line_with_private_bounds(blobs, tmp_path, capsys):
    X, _ = blobs
    data, out = tmp_path / "X.npy", tmp_path / "m.json"
    np.save(data, X)
    assert cli.main(["cluster", str(data), "--algorithm", "coreset", "--epsilon", "1",
                     "--bounds", "private", "--seed", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "CoresetKMeans" in text or "coreset" in text.lower()
    model = io.load_model(out)
    assert model.n_clusters_ == 6
    assert cli.main(["predict", str(out), str(data), "--out", str(tmp_path / "l.npy")]) == 0
    assert np.unique(np.load(tmp_path / "l.npy")).size == 6


def test_ward_merge_joins_the_closest_centres_first():
    """Given k on wide data, the surplus clusters are merged down to k (post-processing): the
    pair of least Ward cost becomes its weighted mean, with the summed size."""
    C = np.array([[0.0, 0.0], [0.1, 0.0], [10.0, 0.0], [20.0, 0.0]])
    sizes = np.array([300, 100, 50, 50])
    merged, n, var = ward_merge(C, sizes, 3, np.array([1.0, 4.0, 2.0, 2.0]))
    assert merged.shape == (3, 2) and n.tolist() == [400, 50, 50]
    np.testing.assert_allclose(merged[0], [0.025, 0.0])
    np.testing.assert_allclose(var, [(300**2 * 1 + 100**2 * 4) / 400**2, 2.0, 2.0])
    merged, n, _ = ward_merge(C, sizes, 2)
    assert sorted(n.tolist()) == [100, 400]


def test_given_k_on_wide_data_recovers_every_cluster():
    """Wide data given k: more clusters than k chosen in the projection, merged down to k
    after the recovery: every cluster keeps a centre of its own."""
    X, y = make_blobs(20000, 60, centers=8, cluster_std=1.0, center_box=(-20, 20),
                      random_state=3)
    model = _fit(X, n_clusters=8, epsilon=1.0, random_state=1)
    assert model.n_clusters_ == 8 and model.cluster_centers_.shape == (8, 60)
    assert model.cluster_sizes_.shape == (8,)
    assert adjusted_rand_score(y, model.labels_) > 0.95


def test_given_k_beyond_the_coreset_copies_its_heaviest_points():
    """k larger than the coreset: the missing centres start near the heaviest points (a
    public offset), not anywhere in the box, so the Lloyd step splits a real cluster."""
    X, _ = make_blobs(6000, 2, centers=[[-5, -5], [5, 5]], cluster_std=0.5, random_state=0)
    model = _fit(X, n_clusters=12, epsilon=0.3, bounds=(-100, 100))
    assert model.coreset_.shape[0] < 12
    start = model.centers_history_[0]
    near = np.min(np.linalg.norm(start[:, None] - np.array([[-5, -5], [5, 5]]), axis=2), axis=1)
    assert near.max() < 10.0  # uniform draws in the box would land ~50 away


def test_given_k_beyond_the_coreset_on_wide_data_releases_k_centres():
    """Wide data, k larger than the projected coreset: still k centres (the missing ones start
    as copies of the heaviest points), never as many as the coreset happens to hold."""
    X, _ = make_blobs(3000, 60, centers=3, cluster_std=1.0, center_box=(-20, 20),
                      random_state=0)
    model = _fit(X, n_clusters=40, epsilon=0.5, random_state=0)
    assert model.coreset_.shape[0] < 40
    assert model.n_clusters_ == 40 and model.cluster_centers_.shape == (40, 60)
    assert model.cluster_sizes_.shape == (40,)


def test_lost_clusters_are_those_whose_ball_missed_most_of_them():
    """A Lloyd step lost a cluster when its noisy size, raised by three noise scales of the
    count, is still under half the previous one: a drop within the noise is not a loss."""
    from privclust.cluster._coreset.combine import COUNT_SHARE, SUPPORT_SCALES, lost_clusters

    eps = 0.5
    slack = SUPPORT_SCALES / (COUNT_SHARE * eps)  # 40 records
    previous = np.array([1000, 1000, 1000, 100, 0])
    sizes = np.array([900, 499 - slack, 501 - slack, 5, -3])
    assert lost_clusters(sizes, previous, eps).tolist() == [False, True, False, True, False]
    # at a small epsilon the same sizes are within the noise
    assert not lost_clusters(sizes, previous, 0.01).any()


def test_the_recovery_balls_hold_the_clusters_records():
    """Wide data: each recovery ball is about the middle plus the part of the cluster's offset
    that the projection shows (its pseudo-inverse), with the radius left over: the cluster's
    records lie inside it, and it is narrower than the ball about the middle."""
    from privclust.cluster._coreset.tree import Space

    rng = np.random.default_rng(0)
    d, p = 80, 10
    bounds = np.tile([-100.0, 100.0], (d, 1))
    space = Space(bounds, p, np.random.default_rng(1))
    means = rng.uniform(-60, 60, size=(3, d))
    X = np.concatenate([m + rng.normal(size=(500, d)) for m in means])
    label = np.repeat(np.arange(3), 500)
    radius = 1.1 * np.linalg.norm(X - space.mid, axis=1).max()
    proj = (means - space.mid) @ space.G.T  # the clusters' centres in the projection
    anchors, radii = space.recovery_balls(proj, radius)
    assert anchors.shape == (3, d) and radii.shape == (3,)
    assert (radii < radius).all()
    assert (np.linalg.norm(X - anchors[label], axis=1) <= radii[label]).all()
    # the anchors are nearer the means than the middle is
    assert (np.linalg.norm(anchors - means, axis=1)
            < np.linalg.norm(means - space.mid, axis=1)).all()


def test_a_lloyd_step_that_loses_a_cluster_looks_further_next(monkeypatch):
    """A centre further from its cluster than its ball reaches (its noise in the upper tail;
    the cluster is one of twelve, so the radius's quantile is set by the others):
    the step's noisy size shows the ball lost the cluster, the estimate is dropped and the
    next step's ball is twice as wide, which finds the cluster again."""
    import privclust.cluster.coreset as coreset_module

    X, y = make_blobs(24000, 60, centers=12, cluster_std=1.0, center_box=(-20, 20),
                      random_state=2)
    means = np.array([X[y == j].mean(axis=0) for j in range(12)])
    real_ball_step = coreset_module.ball_step

    def misplaced_recovery(*args, **kw):
        centres, sizes = real_ball_step(*args, **kw)
        if kw["label"] == "recovery":  # one centre 30 units off: outside its first ball
            j = int(np.argmin(np.linalg.norm(centres - means[0], axis=1)))
            centres = centres.copy()
            centres[j] += 30.0 / np.sqrt(60)
        return centres, sizes

    monkeypatch.setattr(coreset_module, "ball_step", misplaced_recovery)

    def error_of_cluster_0(model):
        return float(np.min(np.linalg.norm(model.cluster_centers_ - means[0], axis=1)))

    model = _fit(X, n_clusters=12, epsilon=4.0, random_state=0)
    assert error_of_cluster_0(model) < 3.0
    monkeypatch.setattr(coreset_module, "LOST_WIDEN", 1.0)  # the same ball again: stuck
    assert error_of_cluster_0(_fit(X, n_clusters=12, epsilon=4.0, random_state=0)) > 5.0


def test_a_cell_keeps_a_significant_rest_as_a_leaf_of_its_own():
    """A released cell of 3000 whose one released child holds 1000: by default the child
    takes the whole weight; with keep_rest the other 2000 (a cluster spread over children
    below the threshold) stay on the parent, a second coreset point, and a rest below the
    children's floor is still shared."""
    grid = Grid(np.array([[0.0, 8.0], [0.0, 8.0]]), np.zeros(2))
    level1 = (np.array([[0, 0]]), np.array([3000]), np.array([0]), 100.0, 1)
    level2 = (np.array([[0, 0]]), np.array([1000]), np.array([0]), 100.0, 2)
    points, weights, _ = leaf_summary(grid, [level1, level2])
    assert weights.tolist() == [3000.0] and points.shape == (1, 2)
    points, weights, _ = leaf_summary(grid, [level1, level2], keep_rest=True)
    assert sorted(weights.tolist()) == [1000.0, 2000.0]
    assert not np.allclose(points[0], points[1])  # the parent's centre and the child's
    level2_most = (np.array([[0, 0]]), np.array([2950]), np.array([0]), 100.0, 2)
    _, weights, _ = leaf_summary(grid, [level1, level2_most], keep_rest=True)
    assert weights.tolist() == [3000.0]


def test_depth_for_k_stops_where_the_leaves_suffice():
    """Fewer levels share the tree's epsilon among fewer counts, so each floor is lower and
    more leaves fit; the deepest tree with enough of them wins, never below the minimum."""
    caps = [leaf_capacity(20000, 0.25, depth, 10) for depth in range(7, 0, -1)]
    assert caps == sorted(caps)  # shallower: more possible leaves
    depth = depth_for_k(26, 20000, 0.25, 10, 7, 4.0, 4)
    assert leaf_capacity(20000, 0.25, depth, 10) >= 4.0 * 26
    assert leaf_capacity(20000, 0.25, depth + 1, 10) < 4.0 * 26
    assert depth_for_k(2, 20000, 0.25, 10, 7, 4.0, 4) == 7  # plenty of leaves: unchanged
    assert depth_for_k(26, 20000, 0.05, 10, 7, 4.0, 4) == 4  # never below the minimum


def test_given_k_a_thin_tree_grows_fewer_levels_with_their_budget():
    """Given k on data whose released count leaves too few leaves per cluster: the levels
    not grown give their epsilon to the others, the report says so, the total is the plan's;
    with max_depth set, or without k, every level is planned as asked."""
    X, _ = make_blobs(4000, 4, centers=12, cluster_std=0.3, center_box=(-2.5, 2.5),
                      random_state=0)
    model = _fit(X, n_clusters=12, epsilon=0.3, random_state=0)
    report = model.privacy_report_
    plan = {line["item"]: line for line in report.plan}
    moved = [f"cell counts, level {lv}" for lv in range(5, 8)]
    assert all(plan[name]["epsilon"] == 0.0 for name in moved)
    assert plan["cell counts, level 1"]["epsilon"] == pytest.approx(
        plan["cell counts, level 4"]["epsilon"])
    assert any("given k = 12, 4 levels" in note for note in report.notes)
    assert report.total().epsilon == pytest.approx(0.3, rel=1e-9)
    levels = [r.target for r in report.releases if r.target.startswith("cell counts")]
    assert len(levels) == 4 and ", level 4 " in levels[-1]
    lloyd = {r.target for r in report.releases if r.target.startswith("cluster sums")}
    assert lloyd == {"cluster sums, coreset step", "cluster sums, Lloyd step 1",
                     "cluster sums, Lloyd step 2"}
    for kw in ({"n_clusters": 12, "max_depth": 7}, {}):
        other = _fit(X, epsilon=0.3, random_state=0, **kw).privacy_report_
        assert not any("given k =" in note for note in other.notes)
        # planned (without k a level may stop the tree and take the budget of those below)
        assert {line["item"]: line for line in other.plan}["cell counts, level 7"][
            "epsilon"] > 0 or any("the tree stopped at level" in n for n in other.notes)


def test_without_k_a_narrow_tree_gives_its_deep_levels_more():
    """Without k on data of at most 5 tree dimensions the levels' budgets grow with depth
    (the total unchanged); given k, or on wider trees, they stay equal."""
    X, _ = make_blobs(3000, 2, centers=20, cluster_std=0.25, center_box=(-10, 10),
                      random_state=3)

    def levels(model):
        plan = {line["item"]: line["epsilon"] for line in model.privacy_report_.plan}
        return [plan[f"cell counts, level {lv}"] for lv in range(1, 8)]

    no_k = _fit(X, epsilon=1.0, bounds=(-12, 12), random_state=0)
    eps = levels(no_k)
    assert all(a < b for a, b in zip(eps, eps[1:], strict=False))
    assert eps[-1] / eps[0] == pytest.approx(coreset_module.NO_K_GROWTH ** 6)
    assert no_k.privacy_report_.total().epsilon == pytest.approx(1.0, rel=1e-9)
    # the smallest findable cluster, from the plan: the top level's floor (the largest)
    top = significance_floor(eps[0], 1 << 2)  # 2 dimensions: 4 children per cell
    note = next(n for n in no_k.privacy_report_.notes if n.startswith("smallest findable"))
    assert f"about {math.ceil(top)} records standing apart" in note
    given = levels(_fit(X, n_clusters=20, epsilon=1.0, bounds=(-12, 12), random_state=0,
                        max_depth=7))
    assert given[0] == pytest.approx(given[-1])
    X10, _ = make_blobs(3000, 10, centers=5, random_state=0)
    wider = levels(_fit(X10, epsilon=1.0, bounds=(-15, 15), random_state=0))
    assert wider[0] == pytest.approx(wider[1])


def test_without_k_a_thin_coreset_keeps_most_clusters():
    """20 tight clusters of 150 records in 2-d at epsilon 1 without k: most are found (equal
    level budgets and two support scales found 12 to 16 over these seeds; with the split step
    on thin coresets 13 to 17, seeds 0-9: mean 14.6 clusters, ARI 0.766, against 13.9 and
    0.732 without it)."""
    X, y = make_blobs(3000, 2, centers=20, cluster_std=0.25, center_box=(-10, 10),
                      random_state=3)
    found = [_fit(X, epsilon=1.0, bounds=(-12, 12), random_state=s).n_clusters_
             for s in range(3)]
    assert min(found) >= 13


def test_a_tree_without_cells_passes_its_rho_on():
    """One record: the tree releases no cell, so the coreset step does not run; its share of
    the sums' zCDP block goes to the Lloyd step and the ledger still adds up to the plan."""
    model = _fit(np.array([[0.27392337]]), epsilon=1.0, bounds=(-2.0, 2.0), delta=None)
    report = model.privacy_report_
    sums = [r for r in report.releases if r.target.startswith("cluster sums")]
    assert [r.target for r in sums] == ["cluster sums, Lloyd step 1"]
    plan = {line["item"]: line for line in report.plan}
    assert sums[0].rho == pytest.approx(plan["cluster sums, every step"]["rho"], rel=1e-12)
    assert report.total().epsilon <= 1.0  # the choice of k is left unspent: one centre
