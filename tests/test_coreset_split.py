"""CoresetKMeans without k on a thin coreset (fewer refined points than ``THIN_POINTS``): the
first Lloyd step's budget moves to a split step before the choice of k, whose points give the
choice candidates with more clusters than the coreset has points."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from privclust import CoresetKMeans
from privclust.cluster._coreset.split import (
    SPLIT_OFFSET,
    SPLIT_SUPPORT_SCALES,
    THIN_POINTS,
    is_thin,
    pooled_centres,
    split_kmax,
    split_seeds,
)


def _grid_blobs():
    """20 clusters of 150 records on a jittered 5 x 4 grid, 7 apart, spread 1.4 per feature."""
    rng = np.random.default_rng(0)
    centres = np.array([(i, j) for i in range(5) for j in range(4)], float) * 7.0
    centres += rng.uniform(-1.0, 1.0, size=centres.shape)
    return make_blobs(3000, 2, centers=centres, cluster_std=1.4, random_state=0)


def _fit(X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CoresetKMeans(**({"epsilon": 0.5, "bounds": (-10, 40), "random_state": 0} | kw)
                             ).fit(X)


def test_split_seeds_are_two_per_axis_about_each_point():
    P = np.array([[0.0, 0.0], [10.0, 5.0]])
    seeds, parent = split_seeds(P, np.array([4.0, 8.0]))
    assert seeds.shape == (8, 2) and parent.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    offsets = seeds - P[parent]
    np.testing.assert_allclose(np.linalg.norm(offsets, axis=1),
                               SPLIT_OFFSET * np.array([4.0] * 4 + [8.0] * 4))
    np.testing.assert_allclose(offsets[:4].sum(axis=0), 0.0, atol=1e-12)


def test_thin_and_the_split_points_largest_k_come_from_released_counts():
    assert not is_thin(1) and is_thin(2) and is_thin(THIN_POINTS - 1)
    assert not is_thin(THIN_POINTS)
    floor = SPLIT_SUPPORT_SCALES / 0.1
    assert split_kmax(np.array([floor - 1, floor, floor + 5, -3.0]), 0.1) == 2


def test_pooled_centres_average_the_two_releases_by_inverse_variance():
    centres = np.array([[0.0, 0.0], [10.0, 0.0]])
    refined = (np.array([[1.0, 0.0], [10.0, 1.0]]), np.array([100, 100]), np.array([1.0, 1.0]))
    split = (np.array([[-1.0, 0.0], [-2.0, 0.0]]), np.array([50, 50]), np.array([4.0, 4.0]))
    out, sizes, var = pooled_centres(centres, refined, split)
    # centre 0: the refined point (variance 1) and the split points' mean -1.5 (variance
    # (50^2 4 + 50^2 4) / 100^2 = 2), weights 2/3 and 1/3
    np.testing.assert_allclose(out[0], [(2 * 1.0 + 1 * -1.5) / 3, 0.0])
    assert var[0] == pytest.approx(2.0 / 3.0)
    # centre 1: no split point nearest it (infinite variance): the refined point alone
    np.testing.assert_allclose(out[1], [10.0, 1.0])
    assert var[1] == pytest.approx(1.0)
    assert sizes.tolist() == [100, 100]


@pytest.mark.parametrize("delta", [None, 0.0], ids=["zcdp-sums", "laplace-sums"])
def test_a_thin_coreset_splits_before_the_choice_and_spends_the_plan(delta):
    X, _ = _grid_blobs()
    model = _fit(X, delta=delta)
    report = model.privacy_report_
    items = [r.item for r in report.releases]
    assert "cluster sizes, split step" in items
    assert "cluster sizes, Lloyd step 1" not in items and "ball radius, Lloyd step 1" not in items
    assert report.total().epsilon == pytest.approx(0.5, rel=1e-9)
    assert any(n.startswith("refinement: coreset step, split step") for n in report.notes)
    # the split points' candidates reach past the refined points' own
    assert model.candidate_ks_.max() > THIN_POINTS or model.candidate_ks_.size > 15


def test_without_k_a_thin_coreset_finds_clusters_finer_than_its_points():
    """20 clusters of 150 records at epsilon 0.5: 9 to 22 refined points. Before the split step
    (seeds 0-5): 3 to 22 clusters, mean ARI 0.603; with it 17 to 22, 0.685."""
    X, y = _grid_blobs()
    fits = [_fit(X, random_state=s) for s in range(6)]
    assert min(m.n_clusters_ for m in fits) >= 15
    assert np.mean([adjusted_rand_score(y, m.labels_) for m in fits]) >= 0.65


def test_given_k_and_coresets_that_are_not_thin_plan_the_split_at_zero():
    X, _ = make_blobs(20000, 2, centers=5, cluster_std=0.5, center_box=(-10, 10),
                      random_state=1)
    model = _fit(X, bounds=(-12, 12), epsilon=2.0)
    plan = {line["item"]: line["epsilon"] for line in model.privacy_report_.plan}
    assert plan["cluster sizes, split step"] == 0.0
    assert "cluster sizes, split step" not in [r.item for r in model.privacy_report_.releases]
    given = _fit(X, bounds=(-12, 12), n_clusters=5)
    assert "cluster sizes, split step" not in {
        line["item"] for line in given.privacy_report_.plan}


@pytest.mark.parametrize("delta", [None, 0.0], ids=["zcdp-sums", "laplace-sums"])
def test_the_split_steps_noise_is_drawn_at_the_scale_its_releases_state(monkeypatch, delta):
    """Every draw of a thin fit, the split step's sizes and sums included, at the scale its
    release states, each release on a line of the plan, and each line spent as planned."""
    from tests.test_plan import _check_draws, _Draws

    X, _ = _grid_blobs()
    draws = _Draws(monkeypatch)
    model = _fit(X, delta=delta)
    plan = {i["item"]: i for i in model.privacy_report_.plan}
    split = [(r, g) for r, g in draws.by_release if "split step" in r.target]
    assert len(split) == 2 and all(g for _, g in split)  # sizes and sums, each with draws
    spent: dict[str, float] = {}
    for release, group in draws.by_release:
        _check_draws(release, group)
        assert release.item in plan, release.target
        spent[release.item] = spent.get(release.item, 0.0) + (
            release.rho if plan[release.item]["kind"] == "zcdp" else release.epsilon)
    for item in ("cluster sizes, split step", "cluster sums, split step"):
        if item in spent:
            line = plan[item]
            want = line["rho"] if line["kind"] == "zcdp" else line["epsilon"]
            assert spent[item] == pytest.approx(want, rel=1e-9) and want > 0


def test_the_split_points_cap_lets_the_choice_reach_towards_many_small_clusters():
    """35 clusters of 150 records at epsilon 0.25 with private bounds: a thin coreset. The split
    points' cap on k at 1.25 noise scales finds 16.0 clusters on average over seeds 0-11 (the
    cap at 1.5 found 13.1, and this test fails there); the classes cannot all be found at this
    budget, but the choice no longer stops far below them."""
    X, _ = make_blobs(5250, 2, centers=35, cluster_std=2.0, center_box=(0, 100), random_state=0)
    found = [_fit(X, epsilon=0.25, bounds="private", random_state=s).n_clusters_
             for s in range(12)]
    assert np.mean(found) >= 15.0, found
