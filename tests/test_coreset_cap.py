"""CoresetKMeans' coreset in 3 or more tree dimensions holds at most ``CORESET_CAP`` points: a
tree with more leaves splits only its heaviest cells (post-processing of the released counts),
so the coreset step's labelling of every record stops growing with the number of records."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from _replay import ReplayMismatch, check_neighbour, neighbours
from privclust import CoresetKMeans
from privclust.cluster._coreset import tree as tree_module

CAP = 40


def _blobs(n=20000, d=4, seed=0):
    return make_blobs(n, d, centers=5, cluster_std=0.8, center_box=(-8, 8), random_state=seed)


def _fit(X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CoresetKMeans(**({"epsilon": 4.0, "bounds": (-12, 12), "random_state": 0} | kw)
                             ).fit(X)


def _cut_note(model):
    return [n for n in model.privacy_report_.notes if n.startswith("coreset capped")]


@pytest.mark.parametrize("k", [None, 5])
def test_a_tree_with_more_leaves_than_the_cap_keeps_its_heaviest_cells(monkeypatch, k):
    X, y = _blobs()
    whole = _fit(X, n_clusters=k)
    assert whole.coreset_.shape[0] > CAP and not _cut_note(whole)
    monkeypatch.setattr(tree_module, "CORESET_CAP", CAP)
    capped = _fit(X, n_clusters=k)
    m = capped.coreset_.shape[0]
    assert CAP // 2 < m <= CAP
    assert len(_cut_note(capped)) == 1 and f"the tree's {whole.coreset_.shape[0]} leaves" in \
        _cut_note(capped)[0]
    # the cut keeps the released mass, now on coarser leaves (wider spreads)
    assert abs(capped.coreset_weights_.sum() - X.shape[0]) < 0.01 * X.shape[0]
    assert capped.coreset_spread_.max() > whole.coreset_spread_.max()
    # the same releases, fewer anchors: every clause of the plan spent, the clusters found
    total = capped.privacy_report_.total()
    assert total.epsilon == pytest.approx(4.0)
    assert capped.n_clusters_ == 5
    assert adjusted_rand_score(y, capped.labels_) > 0.95


def test_a_tree_within_the_cap_or_in_two_dimensions_is_unchanged(monkeypatch):
    X, _ = _blobs()
    X2, _ = _blobs(d=2)
    before = [_fit(X), _fit(X2)]
    monkeypatch.setattr(tree_module, "CORESET_CAP", before[0].coreset_.shape[0])
    assert before[1].coreset_.shape[0] > 2  # 2-D: no cap however small
    after = [_fit(X), _fit(X2.copy())]
    monkeypatch.setattr(tree_module, "CORESET_CAP", 2)
    after.append(_fit(X2))
    for a, b in zip(before + before[1:], after, strict=True):
        np.testing.assert_array_equal(a.coreset_, b.coreset_)
        np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
        assert a.privacy_report_.notes == b.privacy_report_.notes


def test_the_cut_decides_from_releases_only(monkeypatch):
    """Replay: the cut is read off the released counts, so a neighbour with every noisy
    output frozen gives the same coreset, centres and report."""
    monkeypatch.setattr(tree_module, "CORESET_CAP", 12)
    X, _ = make_blobs(1500, 3, centers=3, cluster_std=0.4, center_box=(-2, 2), random_state=4)
    X = np.clip(X, -3, 3)
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _cut_note(CoresetKMeans(epsilon=4.0, bounds=(-3, 3), random_state=5).fit(X))
        for label, Xn in neighbours(X, np.tile((-3.0, 3.0), (3, 1))).items():
            try:
                checked += check_neighbour(lambda: CoresetKMeans(
                    epsilon=4.0, bounds=(-3, 3), random_state=5), X, Xn)
            except ReplayMismatch as exc:
                raise ReplayMismatch(f"{label}: {exc}") from None
    assert checked > 0
