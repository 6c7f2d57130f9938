"""The coreset step's labels from public buckets: the nearest of many anchors, per record."""

from __future__ import annotations

import numpy as np
import pytest

from privclust._geometry import nearest_centres
from privclust.cluster._coreset import data
from privclust.cluster._coreset.data import anchor_buckets, nearest_anchors, nearest_labels
from privclust.engine import LocalEngine

BOUNDS = np.array([[-10.0, 10.0], [-5.0, 15.0]])


def _anchors(m, seed):
    rng = np.random.default_rng(seed)
    return np.vstack([rng.normal([-3, 4], 1.5, (m // 2, 2)), rng.uniform(-10, 10, (m - m // 2, 2))
                      + [0, 5]])


@pytest.mark.parametrize("m", [32, 300, 2000])
def test_bucket_labels_are_the_nearest_anchors(m):
    """Every record's label is its nearest anchor (the product's labels: no near tie here),
    records on the bucket edges, the bounds' corners and far from every anchor included."""
    rng = np.random.default_rng(m)
    A = _anchors(m, m)
    X = np.vstack([rng.normal([-3, 4], 2.0, (20000, 2)), rng.uniform(BOUNDS[:, 0], BOUNDS[:, 1],
                                                                    (20000, 2))])
    buckets = anchor_buckets(A, BOUNDS)
    edges = BOUNDS[:, 0] + buckets.width * rng.integers(0, buckets.G + 1, (5000, 2))
    X = np.clip(np.vstack([X, edges, BOUNDS.T, BOUNDS[::-1].T]), BOUNDS[:, 0], BOUNDS[:, 1])
    np.testing.assert_array_equal(nearest_anchors(X.astype(np.float32), buckets),
                                  nearest_centres(X.astype(np.float32), A))
    assert buckets.size.max() <= max(8, m / 4)  # far fewer candidates than anchors


def test_bucket_labels_break_ties_to_the_lower_index_and_read_each_record_alone():
    """Two copies of an anchor: the lower index. A record's label does not depend on the other
    records (the first 1,000 records' labels, alone and among 50,000)."""
    A = _anchors(200, 1)
    A = np.vstack([A, A[7]])
    buckets = anchor_buckets(A, BOUNDS)
    X = np.clip(np.random.default_rng(2).normal([-3, 4], 3.0, (50000, 2)), BOUNDS[:, 0],
                BOUNDS[:, 1])
    labels = nearest_anchors(X, buckets)
    assert (labels != A.shape[0] - 1).all() and (labels == 7).any()
    np.testing.assert_array_equal(nearest_anchors(X[:1000], buckets), labels[:1000])


def test_the_coreset_step_labels_many_anchors_from_buckets(monkeypatch):
    """nearest_labels of many anchors in 2 coordinates reads no (records x anchors) product;
    few anchors, or more coordinates, still use nearest_centres."""
    X = np.random.default_rng(3).uniform(-10, 10, (5000, 2)) + [0, 5]
    engine = LocalEngine(X, BOUNDS)
    want = nearest_centres(engine.X, _anchors(500, 4))
    monkeypatch.setattr(data, "nearest_centres", lambda *a, **k: pytest.fail("product"))
    np.testing.assert_array_equal(nearest_labels(engine, _anchors(500, 4)), want)
    assert anchor_buckets(_anchors(20, 5), BOUNDS) is None
    assert anchor_buckets(np.zeros((500, 3)), np.tile([-1.0, 1.0], (3, 1))) is None


def _spread(n, d, seed):
    """A mixture of 8 clusters in d coordinates."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-20, 20, (8, d))
    return centres[rng.integers(0, 8, n)] + rng.normal(0, 3, (n, d))


@pytest.mark.parametrize("d", [3, 5, 10, 20, 60])
def test_tree_labels_are_the_products_labels(d):
    """nearest_in_tree equals nearest_centres label for label, float32 and float64 records,
    with exact ties: copies of anchors (the lower index), records on anchors, records and
    anchors on a lattice (equal distances to several anchors)."""
    rng = np.random.default_rng(d)
    A = _spread(1500, d, d)
    A = np.vstack([A, A[:40], np.round(A[40:80]), np.round(A[80:120]) + 0.5])
    X = _spread(12000, d, d + 100)
    X[:500] = A[rng.integers(0, A.shape[0], 500)]
    X[500:1500] = np.round(X[500:1500] * 2) / 2
    tree = data.AnchorTree(A)
    for Y in (X, X.astype(np.float32)):
        labels = data.nearest_in_tree(Y, tree)
        np.testing.assert_array_equal(labels, nearest_centres(Y, A))
    assert not np.isin(labels, np.arange(A.shape[0] - 120, A.shape[0] - 80)).any()  # copies
    np.testing.assert_array_equal(data.nearest_in_tree(X[:700], tree), labels[:700])


def test_the_coreset_step_labels_many_anchors_from_a_tree(monkeypatch):
    """nearest_labels of many anchors in 3 to TREE_MAX_DIMS coordinates reads no (records x
    anchors) product (no near tie here); more coordinates or few anchors still do."""
    X = _spread(20000, 5, 1)
    A = _spread(data.TREE_MIN_ANCHORS + 10, 5, 2)
    engine = LocalEngine(X, np.tile([-40.0, 40.0], (5, 1)))
    want = nearest_centres(X, A)
    monkeypatch.setattr(data, "nearest_centres", lambda *a, **k: pytest.fail("product"))
    np.testing.assert_array_equal(nearest_labels(engine, A), want)
    assert data.anchor_tree(A[:data.TREE_MIN_ANCHORS - 1]) is None
    assert data.anchor_tree(_spread(2000, data.TREE_MAX_DIMS + 1, 3)) is None
    assert data.anchor_tree(_spread(2000, 2, 3)) is None
