"""CoresetKMeans without k when epsilon times the record count is small: the tree stops where its
cells fall below their floors and spends the levels below on that level (a privacy filter)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from privclust import CoresetKMeans
from privclust.cluster._coreset.tree import mass_stop
from privclust.cluster._shifted_tree import significance_floor


def _fit(X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CoresetKMeans(**({"epsilon": 0.5, "bounds": (-15, 15), "random_state": 0} | kw)
                             ).fit(X)


def test_mass_stop_compares_each_level_with_the_one_above():
    stop = mass_stop(1000, 0.7)
    floor = significance_floor(0.1, 4)
    # the root's 1000 records: level 1 holds 900 in significant cells -> grow on
    assert stop(1, np.array([900, 3]), 0.1, 4) is None
    # level 2: 600 of level 1's 900 (below 0.7) -> stop, with the released figures
    reason = stop(2, np.array([300, 300, int(floor) - 1]), 0.1, 4)
    assert reason is not None and "600 of the 900" in reason


def test_without_k_a_thin_tree_stops_where_its_cells_fall_below_their_floors():
    """15 blobs of about 330 records in 2-d at epsilon 0.5: the tree stops at the level whose
    cells fall below their floors and releases it again with the budget of the levels below.
    Before (every level grown): 9 to 10 clusters over seeds 0-2, mean ARI 0.64; now 11 to 12,
    0.76."""
    X, y = make_blobs(5000, 2, centers=15, cluster_std=0.6, center_box=(-10, 10),
                      random_state=3)
    fits = [_fit(X, random_state=s) for s in range(3)]
    assert min(m.n_clusters_ for m in fits) >= 11
    assert np.mean([adjusted_rand_score(y, m.labels_) for m in fits]) >= 0.7
    for m in fits:
        assert m.privacy_report_.total().epsilon == pytest.approx(0.5, rel=1e-9)
        assert any("the tree stopped at level" in note and "less than 0.7" in note
                   for note in m.privacy_report_.notes)


def test_given_k_and_wide_trees_grow_every_level():
    """The stop rule is for trees without k of at most 5 dimensions: a given-k fit on the
    same data releases the same as before (no stop), every level planned."""
    X, _ = make_blobs(5000, 2, centers=15, cluster_std=0.6, center_box=(-10, 10),
                      random_state=3)
    model = _fit(X, n_clusters=15, max_depth=7)
    items = [r.item for r in model.privacy_report_.releases]
    assert "cell counts, level 7" in items and "cell counts, retry of the last level" not in items
