"""Plots (privclust.viz): tests that need matplotlib skip without it."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from privclust import DPM, viz

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def mpl():
    matplotlib = pytest.importorskip("matplotlib")
    viz.require_matplotlib()
    return matplotlib


@pytest.fixture(scope="module")
def fitted2d():
    X, _ = make_blobs(20000, 2, centers=[[-20, -20], [20, 20], [-20, 20], [20, -20]],
                      cluster_std=2.0, random_state=0)
    return X, DPM(epsilon=1.0, bounds=(-40, 40), random_state=1).fit(X)


@pytest.fixture(scope="module")
def fitted3d():
    X, _ = make_blobs(20000, 3, centers=4, center_box=(-30, 30), random_state=2)
    return X, DPM(epsilon=1.0, bounds=(-40, 40), random_state=2).fit(X)


def _line_collections(ax):
    from matplotlib.collections import LineCollection

    return [c for c in ax.collections if isinstance(c, LineCollection)]


def test_plot_clusters_2d(mpl, fitted2d, tmp_path):
    import matplotlib.pyplot as plt

    X, model = fitted2d
    ax = viz.plot_clusters(X, model)
    try:
        k = model.n_clusters_
        assert f"{k} clusters" in ax.get_title() and "epsilon = 1" in ax.get_title()
        # one split line per internal node of the tree
        internal = sum(1 for f in model.split_tree_.feature if f >= 0)
        lines = _line_collections(ax)
        assert len(lines) == 1 and len(lines[0].get_segments()) == internal
        # the centre markers: k points, sized by noisy size (largest cluster, largest marker)
        centres = [c for c in ax.collections if len(c.get_offsets()) == k and c.get_sizes().size]
        assert centres
        sizes = centres[0].get_sizes()
        assert np.argmax(sizes) == np.argmax(model.cluster_sizes_)
        out = viz.save_figure(ax.figure, tmp_path / "c.png")
        assert out.read_bytes()[:8] == PNG_MAGIC
    finally:
        plt.close(ax.figure)


def test_plot_clusters_no_splits_and_subsample(mpl, fitted2d):
    import matplotlib.pyplot as plt

    X, model = fitted2d
    fig, ax = plt.subplots()
    try:
        out = viz.plot_clusters(X, model, ax=ax, max_points=500, show_splits=False)
        assert out is ax
        assert not _line_collections(ax)
        n_drawn = sum(len(c.get_offsets()) for c in ax.collections) - 2 * model.n_clusters_
        assert n_drawn == 500
        assert any("500 of 20,000 points" in t.get_text() for t in ax.texts)
    finally:
        plt.close(fig)


def test_plot_clusters_high_dim(mpl, fitted3d):
    import matplotlib.pyplot as plt

    X, model = fitted3d
    ax = viz.plot_clusters(X, model, dims=(2, 0), feature_names=["a", "b", "c"])
    try:
        assert not _line_collections(ax)  # no splits drawn for d > 2
        assert ax.get_xlabel() == "c" and ax.get_ylabel() == "a"
        assert f"{model.n_clusters_} cluster" in ax.get_title() and "of 3" in ax.get_title()
    finally:
        plt.close(ax.figure)


def test_plot_clusters_bad_input(mpl, fitted2d, fitted3d):
    X, model = fitted2d
    with pytest.raises(ValueError, match="dims"):
        viz.plot_clusters(X, model, dims=(0, 0))
    with pytest.raises(ValueError, match="dims"):
        viz.plot_clusters(X, model, dims=(0, 5))
    with pytest.raises(ValueError, match="3 feature"):
        viz.plot_clusters(fitted3d[0], model)
    with pytest.raises(ValueError, match="not fitted"):
        viz.plot_clusters(X, DPM(epsilon=1.0, bounds=(0, 1)))
    with pytest.raises(ValueError, match="NaN"):
        bad = X[:10].copy()
        bad[0, 0] = np.nan
        viz.plot_clusters(bad, model)


def test_plot_one_feature(mpl):
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(-10, 2, 10000), rng.normal(10, 2, 10000)])[:, None]
    model = DPM(epsilon=1.0, bounds=(-20, 20), random_state=0).fit(X)
    ax = viz.plot_clusters(X, model)
    try:
        assert ax.get_ylabel() == "(jitter)"
        internal = sum(1 for f in model.split_tree_.feature if f >= 0)
        segs = _line_collections(ax)[0].get_segments() if internal else []
        assert len(segs) == internal
    finally:
        plt.close(ax.figure)


def test_plot_split_tree(mpl, fitted2d, tmp_path):
    import matplotlib.pyplot as plt

    _, model = fitted2d
    ax = viz.plot_split_tree(model)
    try:
        assert len(ax.texts) == model.split_tree_.n_nodes
        assert sum("#" in t.get_text() for t in ax.texts) == model.n_clusters_
        viz.save_figure(ax.figure, tmp_path / "t.svg", close=True)
        assert (tmp_path / "t.svg").read_text().lstrip().startswith("<?xml")
    finally:
        plt.close(ax.figure)


def test_save_figure_checks_path(mpl, fitted2d, tmp_path):
    import matplotlib.pyplot as plt

    fig = plt.figure()
    try:
        with pytest.raises(ValueError, match="unknown image type '.gif'"):
            viz.save_figure(fig, tmp_path / "x.gif")
        with pytest.raises(FileNotFoundError, match="does not exist"):
            viz.save_figure(fig, tmp_path / "missing" / "x.png")
    finally:
        plt.close(fig)


def test_clear_error_without_matplotlib(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r'pip install "privclust\[plot\]"'):
        viz.require_matplotlib()
    X = np.zeros((3, 2))
    model = DPM(epsilon=1.0, delta=1e-6, bounds=(0, 1), random_state=0).fit(X)
    with pytest.raises(ImportError, match="matplotlib"):
        viz.plot_clusters(X, model)
