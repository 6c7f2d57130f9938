"""Figures and command-line help texts of the documentation, generated at build time.

``conf.py`` calls :func:`write_cli_help` and :func:`make_all`; each ``fig_*`` function draws the
figure of one estimator page from small generated 2-D data with fixed seeds and writes a PNG into
``docs/_generated/``. Run ``python docs/_figures.py`` to make them without Sphinx.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Ellipse  # noqa: E402
from sklearn.datasets import make_blobs, make_moons  # noqa: E402

from privclust import (  # noqa: E402
    DPDBSCAN,
    DPHDBSCAN,
    DPM,
    DPGaussianMixture,
    DPLloyd,
    KMeansGuarantee,
    MorseMerging,
    SubClustering,
)
from privclust.viz import (  # noqa: E402
    plot_clusters,
    plot_dendrogram,
    plot_density_clusters,
    plot_morse_density,
    plot_spans,
    plot_split_tree,
)

OUT = Path(__file__).resolve().parent / "_generated"

#: Public bounds of the blob data below (chosen, never derived from the data).
BLOB_BOUNDS = (-12.0, 12.0)
#: Public bounds of the two-moons data.
MOON_BOUNDS = (-1.5, 2.5)
DPI = 110


def blobs(n: int = 4000, centers=((-6, -5), (5, -4), (0, 5), (7, 6)), std=1.0, seed: int = 0):
    """Gaussian blobs in the square ``BLOB_BOUNDS``."""
    return make_blobs(n, n_features=2, centers=np.asarray(centers, dtype=float),
                      cluster_std=std, random_state=seed)


def _save(fig, out: Path, name: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def fig_dpm(out: Path = OUT) -> Path:
    """DPM on four blobs: the clusters with the released split lines, and the split tree."""
    X, _ = blobs(20_000)
    model = DPM(epsilon=1.0, bounds=BLOB_BOUNDS, random_state=0).fit(X)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    plot_clusters(X, model, ax=axes[0])
    axes[0].set_title(f"DPM, epsilon = 1: {model.n_clusters_} clusters found")
    plot_split_tree(model, ax=axes[1])
    return _save(fig, out, "dpm.png")


def fig_dbscan(out: Path = OUT) -> Path:
    """DP-DBSCAN on two moons: the released spans (grid cells) over the data."""
    X, _ = make_moons(4000, noise=0.06, random_state=0)
    model = DPDBSCAN(1.0, eps=0.1, min_samples=20, bounds=MOON_BOUNDS, random_state=0).fit(X)
    fig, ax = plt.subplots(figsize=(6.5, 5))
    plot_spans(model, X=X, ax=ax)
    ax.set_title(f"DPDBSCAN, epsilon = 1, eps = 0.1: {model.n_clusters_} spans")
    return _save(fig, out, "dbscan.png")


def fig_hdbscan(out: Path = OUT) -> Path:
    """DPHDBSCAN on two moons: the dense released cells of every level, by cluster."""
    X, _ = make_moons(10_000, noise=0.06, random_state=0)
    model = DPHDBSCAN(epsilon=1.0, bounds=MOON_BOUNDS, random_state=0).fit(X)
    fig, ax = plt.subplots(figsize=(6.5, 5))
    plot_density_clusters(model, X=X, ax=ax)
    ax.set_title(f"DPHDBSCAN, epsilon = 1, no radius: {model.n_clusters_} clusters")
    return _save(fig, out, "hdbscan.png")


def fig_kmeans(out: Path = OUT) -> Path:
    """The k-means family on four blobs, k = 4, epsilon = 1."""
    X, _ = blobs()
    models = [
        DPLloyd(4, epsilon=1.0, bounds=BLOB_BOUNDS, random_state=0),
        KMeansGuarantee(4, epsilon=1.0, bounds=BLOB_BOUNDS, random_state=0),
        SubClustering(4, epsilon=1.0, bounds=BLOB_BOUNDS, random_state=0),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.4))
    for ax, model in zip(axes, models, strict=True):
        plot_clusters(X, model.fit(X), ax=ax)
        ax.set_title(f"{type(model).__name__}, epsilon = 1")
    return _save(fig, out, "kmeans.png")


def _ellipse(ax, mean, cov, color) -> None:
    vals, vecs = np.linalg.eigh(cov)
    angle = np.degrees(np.arctan2(vecs[1, -1], vecs[0, -1]))
    w, h = 2 * 2 * np.sqrt(np.maximum(vals[::-1], 0))  # 2 standard deviations
    ax.add_patch(Ellipse(mean, w, h, angle=angle, fill=False, color=color, lw=1.5))


def fig_mixture(out: Path = OUT) -> Path:
    """DPMoG-hard on three blobs of different spread: components as 2-sd ellipses."""
    X, _ = blobs(centers=((-6, -5), (5, -4), (0, 5)), std=(1.0, 1.8, 1.2))
    model = DPGaussianMixture(3, epsilon=1.0, bounds=BLOB_BOUNDS, random_state=0).fit(X)
    fig, ax = plt.subplots(figsize=(6.5, 5))
    plot_clusters(X, model, ax=ax)
    for mean, cov in zip(model.means_, model.covariances_, strict=True):
        _ellipse(ax, mean, cov, "black")
    ax.set_title("DPGaussianMixture, epsilon = 1 (2-sd ellipses)")
    return _save(fig, out, "mixture.png")


def fig_morse(out: Path = OUT) -> Path:
    """Morse merging of an 8-component private mixture into 3 clusters."""
    X, _ = blobs(centers=((-6, -5), (5, -4), (0, 5)), std=(1.0, 1.5, 1.2))
    base = DPGaussianMixture(8, bounds=BLOB_BOUNDS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = MorseMerging(base, n_clusters=3, epsilon=2.0, random_state=0).fit(X)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    plot_morse_density(model, X=X, ax=axes[0])
    axes[0].set_title("MorseMerging: -ln p, centres, TEVs, 3 clusters")
    plot_dendrogram(model, ax=axes[1])
    return _save(fig, out, "morse.png")


def _centre_figure(out: Path, cls_name: str, filename: str) -> Path:
    """A centre model (k = 4, epsilon = 1) on 20,000 points from four blobs, with its centres."""
    import privclust

    X, _ = blobs(20_000)
    model = getattr(privclust, cls_name)(4, epsilon=1.0, bounds=BLOB_BOUNDS, random_state=0)
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    plot_clusters(X, model.fit(X), ax=ax)
    ax.set_title(f"{cls_name}, epsilon = 1")
    return _save(fig, out, filename)


def fig_hst(out: Path = OUT) -> Path:
    """HSTKMeans on four blobs, k = 4, epsilon = 1."""
    return _centre_figure(out, "HSTKMeans", "hst.png")


def fig_lsh(out: Path = OUT) -> Path:
    """LSHSplits on four blobs, k = 4, epsilon = 1."""
    return _centre_figure(out, "LSHSplits", "lsh.png")


def fig_emmc(out: Path = OUT) -> Path:
    """EMMC on four blobs, k = 4, epsilon = 1."""
    return _centre_figure(out, "EMMC", "emmc.png")


def fig_dpcube(out: Path = OUT) -> Path:
    """DPCube on four blobs, k = 4, epsilon = 1."""
    return _centre_figure(out, "DPCube", "dpcube.png")


def fig_planner(out: Path = OUT) -> Path:
    """The planner's predicted number of DPM clusters against epsilon, and what DPM found
    (20,000 points from 16 blobs in 10 dimensions, 3 seeds per epsilon)."""
    from privclust import planner

    X, _ = make_blobs(20_000, 10, centers=16, center_box=(-100, 100), random_state=42)
    epsilons = [0.1, 0.25, 0.5, 1.0, 2.0]
    est = DPM(epsilon=1.0, bounds=(-100, 100))
    curve = planner.quality_curve(est, 20_000, epsilons, d=10, expected_clusters=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few records outside the box: clipped, as documented
        observed = [np.median([DPM(epsilon=e, bounds=(-100, 100), random_state=s).fit(X)
                               .n_clusters_ for s in range(3)]) for e in epsilons]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(epsilons, [v[0] for v in curve["values"]], "o-", label="predicted (planner)")
    ax.plot(epsilons, observed, "s--", label="found by DPM (median of 3 seeds)")
    ax.axhline(16, color="0.6", lw=0.8, ls=":", label="clusters in the data")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("clusters")
    ax.legend(fontsize=8)
    ax.set_title("DPM: predicted before the fit, against found")
    return _save(fig, out, "planner.png")


FIGURES = (fig_dpm, fig_dbscan, fig_hdbscan, fig_kmeans, fig_mixture, fig_morse, fig_hst,
           fig_lsh, fig_emmc, fig_dpcube, fig_planner)


def make_all(out: Path = OUT) -> list[Path]:
    """Draw every figure (a few seconds in all)."""
    return [f(out) for f in FIGURES]


@contextlib.contextmanager
def _columns(n: int):
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(n)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


#: Sub-commands whose ``--help`` text the command-line page includes.
CLI_COMMANDS = ("cluster", "predict", "demo")


def write_cli_help(out: Path = OUT, width: int = 88) -> list[Path]:
    """``privclust --help`` and ``privclust COMMAND --help``, from the real parser."""
    from privclust.cli import build_parser

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with _columns(width):
        parser = build_parser()
        texts = {"privclust": parser.format_help()}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name in CLI_COMMANDS:
                    texts[f"privclust-{name}"] = action.choices[name].format_help()
    for name, text in texts.items():
        path = out / f"{name}-help.txt"
        path.write_text(text)
        written.append(path)
    return written


if __name__ == "__main__":
    import time

    write_cli_help()
    for f in FIGURES:
        t0 = time.perf_counter()
        print(f(), f"{time.perf_counter() - t0:.2f} s")
