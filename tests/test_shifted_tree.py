"""The randomly shifted grid tree that HSTKMeans, EMMC, DPCube and CoresetKMeans grow."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.datasets import make_blobs

from privclust import CoresetKMeans


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
