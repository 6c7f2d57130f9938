"""The command line's front door: the demo runs the default estimator (CoresetKMeans), a plot
of data of more than two features is projected on directions computed from the release alone,
and the help says which algorithms need ``--n-clusters``."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from privclust import CoresetKMeans, DPLloyd, cli, registry, viz
from privclust.io import load_model


@pytest.fixture(scope="module")
def mpl():
    matplotlib = pytest.importorskip("matplotlib")
    viz.require_matplotlib()
    return matplotlib


@pytest.fixture(scope="module")
def five_d():
    """5-D blobs and a CoresetKMeans given k fitted on them."""
    X, _ = make_blobs(4000, 5, centers=4, center_box=(-30, 30), cluster_std=2.0, random_state=3)
    return X, CoresetKMeans(4, epsilon=2.0, bounds=(-45, 45), random_state=0).fit(X)


# --------------------------------------------------------------------------- demo
def test_the_demo_runs_the_default_estimator_and_writes_its_files(tmp_path, capsys, mpl):
    rc = cli.main(["demo", "--out-dir", str(tmp_path), "--seed", "1", "--n-samples", "3000"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "CoresetKMeans(epsilon=1, delta=auto), not told k, found 6 cluster(s) (true: 6)" in out
    assert "Privacy report for CoresetKMeans" in out and "DPM" not in out
    model = load_model(tmp_path / "demo_model.json")
    assert type(model) is CoresetKMeans and model.n_clusters_ == 6
    assert (tmp_path / "demo_clusters.png").read_bytes()[:4] == b"\x89PNG"
    ari = float(re.search(r"adjusted Rand index: ([0-9.]+)", out).group(1))
    assert ari > 0.9


def test_the_demo_help_names_the_default_estimator(capsys):
    assert cli.main(["demo", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "CoresetKMeans" in text and "DPM" not in text


# --------------------------------------------------------------------------- the 5-D plot
def test_centre_directions_come_from_the_centres_alone():
    rng = np.random.default_rng(0)
    plane = np.linalg.qr(rng.normal(size=(5, 2)))[0]  # centres spread in a 2-D plane of 5-D
    centres = 7.0 + rng.normal(size=(6, 2)) * [9.0, 3.0] @ plane.T
    W, share = viz.centre_directions(centres, np.full(6, 100.0))
    np.testing.assert_allclose(W.T @ W, np.eye(2), atol=1e-12)
    np.testing.assert_allclose(plane @ (plane.T @ W), W, atol=1e-9)  # W lies in the plane
    assert share.sum() == pytest.approx(1.0) and share[0] > share[1] > 0.02
    assert (W[np.abs(W).argmax(axis=0), [0, 1]] > 0).all()  # signs fixed
    # the weights are the noisy sizes: a far centre of (noisy) size 0 does not choose the axes
    lone = np.vstack([centres, [500.0, 0, 0, 0, 0]])
    W0, _ = viz.centre_directions(lone, np.append(np.full(6, 100.0), -3.0))
    np.testing.assert_allclose(W0, W, atol=1e-9)
    assert abs(viz.centre_directions(lone)[0][0, 0]) > 0.99  # unweighted: it does
    # one or two centres: completed with the feature axes, still orthonormal
    for k in (1, 2):
        Wk, share_k = viz.centre_directions(centres[:k])
        np.testing.assert_allclose(Wk.T @ Wk, np.eye(2), atol=1e-12)
        assert share_k[1] == 0.0


def _centre_marker_offsets(ax, k):
    return [np.asarray(c.get_offsets()) for c in ax.collections
            if len(c.get_offsets()) == k and c.get_sizes().size > 1]


def test_the_plot_of_5d_data_projects_on_directions_of_the_release(mpl, five_d):
    import matplotlib.pyplot as plt

    X, model = five_d
    W, share = viz.centre_directions(model.cluster_centers_, model.cluster_sizes_)
    other = np.random.default_rng(9).uniform(-45, 45, (3000, 5))  # other raw data, same model
    axes = [registry.ENTRIES["coreset"].plot(model, data, [f"f{j}" for j in range(5)])
            for data in (X, other)]
    try:
        for ax in axes:
            assert ax.get_xlabel().startswith("direction 1 of the private centres (")
            assert ax.get_ylabel().startswith("direction 2 of the private centres (")
            title = ax.get_title()
            assert "raw data (5 features) projected on the 2 directions" in title
            assert any("raw data, not private" in t.get_text() for t in ax.texts)
        # the same centres, the same axes, whatever the raw data drawn under them
        assert axes[0].get_xlabel() == axes[1].get_xlabel()
        first, second = (_centre_marker_offsets(ax, model.n_clusters_)[0] for ax in axes)
        np.testing.assert_array_equal(first, second)
        np.testing.assert_allclose(first, model.cluster_centers_ @ W)
        # the points are the raw rows projected on those directions
        points = np.vstack([np.asarray(c.get_offsets()) for c in axes[1].collections
                            if len(c.get_offsets()) == len(other)])
        np.testing.assert_allclose(points, other @ W)
        assert f"{100 * share[0]:.0f}% of their spread" in axes[0].get_xlabel()
    finally:
        for ax in axes:
            plt.close(ax.figure)


def test_other_centres_give_other_directions(mpl, five_d):
    X, model = five_d
    W, _ = viz.centre_directions(model.cluster_centers_, model.cluster_sizes_)
    shifted = model.cluster_centers_ * [1, 1, 1, 1, 40]  # spread along the last feature
    W2, _ = viz.centre_directions(shifted, model.cluster_sizes_)
    assert abs(W2[4, 0]) > 0.99 and not np.allclose(np.abs(W2), np.abs(W), atol=0.1)


def test_two_features_are_drawn_as_they_are(mpl):
    import matplotlib.pyplot as plt

    X, _ = make_blobs(600, 2, centers=3, center_box=(-9, 9), random_state=0)
    model = DPLloyd(3, epsilon=2.0, bounds=(-15, 15), random_state=0).fit(X)
    ax = registry.ENTRIES["lloyd"].plot(model, X, ["lon", "lat"])
    try:
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("lon", "lat")
        assert "directions" not in ax.get_title()
    finally:
        plt.close(ax.figure)


def test_cluster_plot_of_5d_data_says_what_it_shows(mpl, five_d, tmp_path, capsys):
    data, plot = tmp_path / "five.npy", tmp_path / "five.png"
    np.save(data, five_d[0])
    rc = cli.main(["cluster", str(data), "--n-clusters", "4", "--epsilon", "2", "--bounds",
                   "-45", "45", "--seed", "0", "--plot", str(plot)])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0 and plot.read_bytes()[:4] == b"\x89PNG"
    assert ("it shows the raw data points, projected on the two directions that separate the "
            "released centres most: not a private release") in out


# --------------------------------------------------------------------------- --n-clusters help
def test_n_clusters_help_says_coreset_finds_k_itself(capsys):
    assert cli.main(["cluster", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    helptext = text.split("--n-clusters K ")[1].split("--n-components")[0]
    required = helptext.split("required by ")[1].split("(")[0]
    assert "coreset" not in required and "lloyd" in required and "morse" in required
    assert "optional for coreset, which finds k itself" in helptext
