"""Tests for privclust.metrics: hand-computed examples, sklearn agreement, conventions, errors."""

from __future__ import annotations

import ast
import inspect
import math

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_mutual_info_score, adjusted_rand_score, silhouette_score

from privclust import metrics
from privclust.metrics import (
    KMeansDistance,
    accuracy_hungarian,
    accuracy_majority,
    ami,
    ari,
    assign,
    cost_gap,
    evaluate,
    inertia,
    kmeans_distance,
    kmeans_reference,
    optimal_kmeans_cost,
    silhouette,
)


@pytest.fixture(scope="module")
def blobs():
    """Three well separated 2-d blobs, 60 points each, with their true classes."""
    rng = np.random.default_rng(42)
    means = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    X = np.concatenate([m + rng.normal(scale=0.5, size=(60, 2)) for m in means])
    y = np.repeat(np.arange(3), 60)
    return X, y, means


# --------------------------------------------------------------------------------------------
# module hygiene
# --------------------------------------------------------------------------------------------


def test_imports_only_numpy_scipy_sklearn():
    tree = ast.parse(inspect.getsource(metrics))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:  # relative: only the layer-neutral nearest-centre helper
                assert node.module == "_geometry", node.module
                continue
            roots.add(node.module.split(".")[0])
    allowed = {"numpy", "scipy", "sklearn", "__future__", "numbers", "collections", "dataclasses"}
    assert roots <= allowed, roots - allowed
    assert "privclust" not in roots


def test_every_public_function_cites_its_definition():
    for name in metrics.__all__:
        doc = inspect.getdoc(getattr(metrics, name))
        assert doc, name
        # names its paper: DPM (004) or SubClustering (002)
        assert "(004)" in doc or "(002)" in doc, name
        assert "Def." in doc or "eq. 1" in doc or "Not defined" in doc, name


# --------------------------------------------------------------------------------------------
# assign / inertia
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [1, 7, 64, None])
def test_assign_matches_brute_force(chunk_size):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 5)) * 3 + 100.0  # offset from the origin on purpose
    C = rng.normal(size=(9, 5)) * 3 + 100.0
    brute = np.argmin(np.linalg.norm(X[:, None, :] - C[None, :, :], axis=2), axis=1)
    got = assign(X, C, chunk_size=chunk_size)
    assert got.shape == (500,)
    assert got.dtype.kind == "i"
    np.testing.assert_array_equal(got, brute)


def test_assign_hand_example_and_ties():
    X = np.array([[0.0], [0.9], [1.1], [5.0], [1.0]])
    C = np.array([[0.0], [2.0]])
    # 1.0 is equidistant: tie goes to the lowest index.
    np.testing.assert_array_equal(assign(X, C, chunk_size=2), [0, 0, 1, 1, 0])


def test_inertia_squared_vs_unsquared_hand_computed():
    X = np.array([[0.0, 0.0], [3.0, 4.0], [10.0, 0.0], [10.0, 2.0]])
    C = np.array([[0.0, 0.0], [10.0, 1.0]])
    # distances to nearest centre: 0, 5, 1, 1
    assert inertia(X, C) == pytest.approx(0 + 25 + 1 + 1)
    assert inertia(X, C, squared=True) == pytest.approx(27.0)
    assert inertia(X, C, squared=False) == pytest.approx(0 + 5 + 1 + 1)


def test_inertia_equals_sklearn_inertia(blobs):
    X, _, _ = blobs
    km = KMeans(n_clusters=3, n_init=3, random_state=0).fit(X)
    assert inertia(X, km.cluster_centers_, chunk_size=13) == pytest.approx(km.inertia_, rel=1e-9)


def test_inertia_chunking_does_not_change_result():
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(301, 3))
    C = rng.uniform(size=(4, 3))
    a = inertia(X, C, chunk_size=1, squared=False)
    b = inertia(X, C, chunk_size=1000, squared=False)
    assert a == pytest.approx(b, rel=1e-12)


# --------------------------------------------------------------------------------------------
# silhouette
# --------------------------------------------------------------------------------------------


def test_silhouette_matches_sklearn(blobs):
    X, y, _ = blobs
    assert silhouette(X, y) == pytest.approx(silhouette_score(X, y), rel=1e-12)


def test_silhouette_hand_computed():
    # 1-d: clusters {0, 1} and {4}. x=0: a=1, b=4 -> 3/4; x=1: a=1, b=3 -> 2/3; x=4: singleton 0.
    X = np.array([[0.0], [1.0], [4.0]])
    assert silhouette(X, [0, 0, 1]) == pytest.approx((0.75 + 2 / 3 + 0.0) / 3)


def test_silhouette_fewer_than_two_clusters_is_minus_one(blobs):
    X, _, _ = blobs
    assert silhouette(X, np.zeros(len(X), dtype=int)) == -1.0
    # only one cluster once noise is removed
    labels = np.full(len(X), -1)
    labels[:10] = 4
    assert silhouette(X, labels) == -1.0
    assert silhouette(X, np.full(len(X), -1)) == -1.0


def test_silhouette_excludes_noise(blobs):
    X, y, _ = blobs
    labels = y.copy()
    labels[::5] = -1
    keep = labels != -1
    assert silhouette(X, labels) == pytest.approx(silhouette_score(X[keep], labels[keep]))


def test_silhouette_all_singletons_is_zero():
    X = np.array([[0.0], [1.0], [3.0]])
    assert silhouette(X, [0, 1, 2]) == 0.0


def test_silhouette_samples_when_large(blobs):
    X, y, _ = blobs
    full = silhouette(X, y, sample_size=None)
    s1 = silhouette(X, y, sample_size=50, random_state=3)
    s2 = silhouette(X, y, sample_size=50, random_state=3)
    assert s1 == s2  # deterministic for a fixed seed
    assert s1 != full  # really a sample
    assert abs(s1 - full) < 0.1  # well separated blobs: a sample is close
    # reproduce the sample by hand
    rows = np.sort(np.random.default_rng(3).choice(len(X), size=50, replace=False))
    assert s1 == pytest.approx(silhouette_score(X[rows], y[rows]))


# --------------------------------------------------------------------------------------------
# accuracy
# --------------------------------------------------------------------------------------------


def test_accuracy_majority_vs_hungarian_toy():
    y = np.array([0, 0, 0, 1, 1, 1])
    labels = np.array([0, 0, 1, 1, 2, 2])
    # majority: cluster 0 -> class 0 (2 right), cluster 1 -> {0, 1} (1 right),
    # cluster 2 -> class 1 (2 right): 5/6. Hungarian: c0<->0, c2<->1, c1 unmatched: 4/6.
    assert accuracy_majority(y, labels) == pytest.approx(5 / 6)
    assert accuracy_hungarian(y, labels) == pytest.approx(4 / 6)


def test_accuracy_many_to_one_vs_one_to_one():
    y = np.array([0, 0, 0, 0, 1, 1])
    labels = np.array([5, 5, 5, 5, 5, 5])  # one cluster: majority class 0
    assert accuracy_majority(y, labels) == pytest.approx(4 / 6)
    assert accuracy_hungarian(y, labels) == pytest.approx(4 / 6)
    # permuted labels are a perfect clustering for both
    assert accuracy_majority([0, 0, 1, 1, 2], [2, 2, 0, 0, 1]) == 1.0
    assert accuracy_hungarian([0, 0, 1, 1, 2], [2, 2, 0, 0, 1]) == 1.0


def test_accuracy_string_classes():
    y = np.array(["a", "a", "b", "b"])
    assert accuracy_majority(y, [1, 1, 1, 0]) == pytest.approx(3 / 4)
    assert accuracy_hungarian(y, [1, 1, 1, 0]) == pytest.approx(3 / 4)


def test_accuracy_y_true_minus_one_is_excluded():
    y = np.array([0, 0, -1, 1, 1, -1])
    labels = np.array([0, 0, 1, 1, 1, 0])
    # the two unlabelled points vanish: 4 of 4 right
    assert accuracy_majority(y, labels) == 1.0
    assert accuracy_hungarian(y, labels) == 1.0


def test_accuracy_predicted_noise_counts_as_wrong():
    y = np.array([0, 0, 0, 1, 1, 1])
    labels = np.array([0, 0, -1, 1, 1, -1])
    assert accuracy_majority(y, labels) == pytest.approx(4 / 6)
    assert accuracy_hungarian(y, labels) == pytest.approx(4 / 6)
    assert accuracy_majority(y, np.full(6, -1)) == 0.0
    assert accuracy_hungarian(y, np.full(6, -1)) == 0.0


def test_accuracy_random_agrees_with_bruteforce():
    rng = np.random.default_rng(7)
    y = rng.integers(0, 4, size=400)
    labels = rng.integers(0, 6, size=400)
    table = np.zeros((6, 4), dtype=int)
    for c, t in zip(labels, y, strict=True):
        table[c, t] += 1
    assert accuracy_majority(y, labels) == pytest.approx(table.max(axis=1).sum() / 400)
    # Hungarian by exhaustive search over injective maps class -> cluster (4 of 6)
    from itertools import permutations

    best = max(sum(table[p[j], j] for j in range(4)) for p in permutations(range(6), 4))
    assert accuracy_hungarian(y, labels) == pytest.approx(best / 400)
    assert accuracy_hungarian(y, labels) <= accuracy_majority(y, labels)


def test_accuracy_all_unlabelled_raises():
    with pytest.raises(ValueError, match="no labelled points"):
        accuracy_majority([-1, -1], [0, 1])


# --------------------------------------------------------------------------------------------
# ARI / AMI
# --------------------------------------------------------------------------------------------


def test_ari_ami_match_sklearn_and_keep_noise_label():
    rng = np.random.default_rng(3)
    y = rng.integers(-1, 3, size=200)
    labels = rng.integers(-1, 4, size=200)
    assert ari(y, labels) == pytest.approx(adjusted_rand_score(y, labels))
    assert ami(y, labels) == pytest.approx(adjusted_mutual_info_score(y, labels))
    # -1 is a label of its own: a clustering that marks exactly the noise class as noise is perfect
    y2 = np.array([-1, -1, 0, 0, 1, 1])
    l2 = np.array([-1, -1, 7, 7, 3, 3])
    assert ari(y2, l2) == pytest.approx(1.0)
    assert ami(y2, l2) == pytest.approx(1.0)


# --------------------------------------------------------------------------------------------
# KMeans distance
# --------------------------------------------------------------------------------------------


def test_kmeans_distance_hand_computed():
    priv = np.array([[0.0, 0.0], [3.0, 4.0]])
    ref1 = np.array([[0.0, 0.0]])  # distances 0 and 5 -> 5
    ref2 = np.array([[0.0, 1.0], [3.0, 0.0]])  # (0,0): min(1, 3) = 1; (3,4): min(sqrt18, 4) = 4
    kd = kmeans_distance(priv, [ref1, ref2])
    assert isinstance(kd, KMeansDistance)
    assert kd.total == pytest.approx((5 + 5) / 2)
    assert kd.per_centre == pytest.approx(5 / 2)
    assert kd.normalised is None and kd.diameter is None
    assert kd.n_references == 2 and kd.n_centres == 2

    scalar = kmeans_distance(priv, [ref1, ref2], bounds=(0.0, 10.0))
    assert scalar.diameter == pytest.approx(10 * math.sqrt(2))
    assert scalar.normalised == pytest.approx(2.5 / (10 * math.sqrt(2)))

    per_dim = kmeans_distance(priv, [ref1, ref2], bounds=np.array([[0.0, 3.0], [-1.0, 3.0]]))
    assert per_dim.diameter == pytest.approx(5.0)
    assert per_dim.normalised == pytest.approx(0.5)

    direct = kmeans_distance(priv, [ref1, ref2], normalise_by=4.0)
    assert direct.normalised == pytest.approx(2.5 / 4)
    assert direct.as_dict()["total"] == pytest.approx(5.0)


def test_kmeans_distance_zero_for_identical_sets():
    C = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert kmeans_distance(C, [C[::-1], C]).total == 0.0


def test_kmeans_distance_bad_inputs():
    C = np.zeros((2, 2))
    with pytest.raises(ValueError, match="empty"):
        kmeans_distance(C, [])
    with pytest.raises(ValueError, match="dimension"):
        kmeans_distance(C, [np.zeros((3, 3))])
    with pytest.raises(ValueError, match="list"):
        kmeans_distance(C, np.zeros((3, 2)))
    with pytest.raises(ValueError, match="bounds"):
        kmeans_distance(C, [C], bounds=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="hi < lo"):
        kmeans_distance(C, [C], bounds=(1.0, 0.0))
    with pytest.raises(ValueError, match="at most one"):
        kmeans_distance(C, [C], bounds=(0.0, 1.0), normalise_by=2.0)
    with pytest.raises(ValueError, match="normalise_by"):
        kmeans_distance(C, [C], normalise_by=0.0)


def test_kmeans_reference(blobs):
    X, _, means = blobs
    refs = kmeans_reference(X, 3, n_runs=4, top=2, random_state=0, sample_size=100)
    assert len(refs) == 2
    for R in refs:
        assert R.shape == (3, 2)
        # every reference centre sits on a true blob mean
        assert kmeans_distance(R, [means]).per_centre < 0.3
    again = kmeans_reference(X, 3, n_runs=4, top=2, random_state=0, sample_size=100)
    np.testing.assert_array_equal(refs[0], again[0])


def test_kmeans_reference_orders_by_silhouette_and_searches_k(blobs):
    X, _, _ = blobs
    refs = kmeans_reference(X, [2, 3, 6], n_runs=2, top=6, sample_size=None)
    assert len(refs) == 6
    scores = [silhouette(X, assign(X, R), sample_size=None) for R in refs]
    assert scores == sorted(scores, reverse=True)
    assert refs[0].shape[0] == 3  # the true k wins on three separated blobs
    with pytest.raises(ValueError, match="top"):
        kmeans_reference(X, 3, n_runs=2, top=3)
    with pytest.raises(ValueError, match="n_clusters"):
        kmeans_reference(X, 0)
    with pytest.raises(ValueError, match="exceeds"):
        kmeans_reference(X[:2], 3)


# --------------------------------------------------------------------------------------------
# CostGap
# --------------------------------------------------------------------------------------------


def test_cost_gap_zero_at_optimum_positive_when_perturbed(blobs):
    X, _, _ = blobs
    cost, centres = optimal_kmeans_cost(X, 3, n_init=3, return_centers=True)
    assert cost == optimal_kmeans_cost(X, 3, n_init=3)
    assert cost == pytest.approx(KMeans(3, n_init=3, random_state=0).fit(X).inertia_, rel=1e-9)
    assert cost_gap(X, centres, cost) == 0.0
    perturbed = centres + np.array([0.5, -0.5])
    gap = cost_gap(X, perturbed, cost)
    assert gap > 0
    assert gap == pytest.approx(abs(inertia(X, perturbed) - cost) / cost)


def test_cost_gap_hand_computed_and_absolute_value():
    X = np.array([[0.0], [2.0]])
    # cost of centre 1: 1 + 1 = 2. With Cost_Lloyd = 4: |2 - 4| / 4 = 0.5 (absolute value).
    assert cost_gap(X, [[1.0]], 4.0) == pytest.approx(0.5)
    # centre 0: cost 4; Cost_Lloyd 2 -> 1.0
    assert cost_gap(X, [[0.0]], 2.0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="optimal_cost"):
        cost_gap(X, [[1.0]], 0.0)
    with pytest.raises(ValueError, match="optimal_cost"):
        cost_gap(X, [[1.0]], float("nan"))


# --------------------------------------------------------------------------------------------
# evaluate
# --------------------------------------------------------------------------------------------


def test_evaluate_all_keys(blobs):
    X, y, means = blobs
    centres = np.vstack([means, [[100.0, 100.0]]])  # one far-away, empty centre
    cost = optimal_kmeans_cost(X, 3, n_init=2)
    out = evaluate(X, centres, y_true=y, bounds=(-2.0, 12.0), reference=[means], optimal_cost=cost)
    expected = {
        "n_clusters",
        "n_nonempty_clusters",
        "inertia_sq",
        "inertia_unsq",
        "silhouette",
        "accuracy_majority",
        "accuracy_hungarian",
        "ari",
        "ami",
        "kmeans_distance_total",
        "kmeans_distance_per_centre",
        "kmeans_distance_normalised",
        "cost_gap",
    }
    assert set(out) == expected
    assert out["n_clusters"] == 4 and out["n_nonempty_clusters"] == 3
    assert out["accuracy_majority"] == 1.0 and out["accuracy_hungarian"] == 1.0
    assert out["ari"] == pytest.approx(1.0)
    assert out["inertia_sq"] == pytest.approx(inertia(X, centres))
    assert out["inertia_unsq"] == pytest.approx(inertia(X, centres, squared=False))
    assert out["silhouette"] == pytest.approx(silhouette(X, y))
    far = math.dist([100.0, 100.0], [10.0, 0.0])  # nearest true mean to the far centre
    assert out["kmeans_distance_total"] == pytest.approx(far)
    assert out["kmeans_distance_per_centre"] == pytest.approx(far / 4)
    assert out["kmeans_distance_normalised"] == pytest.approx(far / 4 / (14 * math.sqrt(2)))
    assert out["cost_gap"] == pytest.approx(cost_gap(X, centres, cost))


def test_evaluate_minimal(blobs):
    X, _, means = blobs
    out = evaluate(X, means[:1])
    assert set(out) == {
        "n_clusters",
        "n_nonempty_clusters",
        "inertia_sq",
        "inertia_unsq",
        "silhouette",
    }
    assert out["silhouette"] == -1.0  # one cluster: Def. 11 convention


# --------------------------------------------------------------------------------------------
# input validation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("X", "C", "match"),
    [
        (np.zeros((0, 2)), np.zeros((1, 2)), "X is empty"),
        (np.zeros((3, 2)), np.zeros((0, 2)), "centers is empty"),
        (np.zeros(3), np.zeros((1, 2)), "2-d"),
        (np.zeros((3, 2)), np.zeros((1, 3)), "dimension"),
        (np.array([[0.0, np.nan]]), np.zeros((1, 2)), "NaN"),
        (np.zeros((3, 2)), np.array([[np.inf, 0.0]]), "NaN or infinite"),
        ([["a", "b"]], np.zeros((1, 2)), "numeric"),
    ],
)
def test_bad_points_raise_value_error(X, C, match):
    for fn in (assign, inertia, evaluate):
        with pytest.raises(ValueError, match=match):
            fn(X, C)


def test_bad_labels_raise_value_error():
    X = np.zeros((4, 2))
    with pytest.raises(ValueError, match="same length"):
        silhouette(X, [0, 1, 0])
    with pytest.raises(ValueError, match="same length"):
        accuracy_majority([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="same length"):
        ari([0, 1], [0])
    with pytest.raises(ValueError, match="1-d"):
        accuracy_hungarian(np.zeros((2, 2), dtype=int), [0, 1])
    with pytest.raises(ValueError, match="NaN"):
        ami([0.0, np.nan], [0, 1])
    with pytest.raises(ValueError, match="integer"):
        accuracy_majority([0, 1], [0.5, 1.0])
    with pytest.raises(ValueError, match="empty"):
        accuracy_majority([], [])
    with pytest.raises(ValueError, match="same length"):
        evaluate(X, np.zeros((1, 2)), y_true=[0, 1])
    with pytest.raises(ValueError, match="chunk_size"):
        assign(X, np.zeros((1, 2)), chunk_size=0)
    with pytest.raises(ValueError, match="sample_size"):
        silhouette(X, [0, 0, 1, 1], sample_size=-5)
    # integer-valued floats (labels read from a CSV file) are accepted
    assert accuracy_majority([0.0, 1.0], [1.0, 0.0]) == 1.0
