"""Morse merging: the merge hierarchy as a dendrogram, and the density with its basins."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.cluster import hierarchy

from ..cluster._base import check_data
from ._common import padded_limits, pyplot, raw_data_note


def plot_dendrogram(model, ax=None, **kwargs):
    """Draw ``model.linkage_`` (leaves labelled by base component index); returns the axes."""
    model._check_fitted()
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    Z = model.linkage_
    if len(Z):
        with warnings.catch_warnings():  # all heights 0 (one basin): SciPy warns on the ylim
            warnings.filterwarnings("ignore", message=".*identical low and high ylims.*")
            hierarchy.dendrogram(Z, ax=ax, labels=[str(i) for i in model.leaves_], **kwargs)
        if not Z[:, 2].max() > 0:
            ax.set_ylim(0, 1)
        if model.n_clusters_ > 1 and model.n_clusters_ <= len(Z):
            cut = Z[len(Z) - model.n_clusters_ + 1, 2]
            below = Z[len(Z) - model.n_clusters_, 2]
            ax.axhline(
                0.5 * (cut + below),
                color="grey",
                ls="--",
                lw=1,
                label=f"{model.n_clusters_} clusters",
            )
            ax.legend(loc="upper right")
    ax.set_xlabel("component")
    ax.set_ylabel("f(TEV) - min f(SEV)   (f = -ln p)")
    ax.set_title("Morse merging: hierarchy of the TEV graph")
    return ax


def plot_morse_density(
    model, X=None, ax=None, grid: int = 150, levels: int = 15, max_points: int = 5000,
    feature_names=None,
):
    """2-D data only: contours of ``-ln p``, the merged clusters (regions shaded by the cluster
    of the most likely component, a fast approximation of the basins; X, if given, coloured by
    ``predict``: raw data, not a private release, as the figure notes), the centres and the
    TEVs; ``feature_names`` label the axes. Returns the axes."""
    model._check_fitted()
    if model.n_features_in_ != 2:
        raise ValueError(
            f"plot_morse_density needs 2-D data, the model has {model.n_features_in_} features"
        )
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 5))
    if model.bounds_ is not None:
        lo, hi = model.bounds_[:, 0], model.bounds_[:, 1]
    else:
        pts = np.vstack([model.means_, model.sevs_])
        span = np.ptp(pts, axis=0) + 1e-9
        lo, hi = pts.min(axis=0) - span / 2, pts.max(axis=0) + span / 2
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], grid), np.linspace(lo[1], hi[1], grid))
    G = np.column_stack([gx.ravel(), gy.ravel()])
    f = model._field.f(model._to_unit(G)).reshape(gx.shape)
    lab = model.component_labels_[
        model._field.components[np.argmax(model._field.log_terms(model._to_unit(G)), axis=1)]
    ].reshape(gx.shape)
    cmap = plt.get_cmap("tab10")
    ax.contourf(
        gx,
        gy,
        lab,
        levels=np.arange(model.n_clusters_ + 1) - 0.5,
        colors=[cmap(i % 10) for i in range(model.n_clusters_)],
        alpha=0.15,
    )
    ax.contour(
        gx,
        gy,
        f,
        levels=np.quantile(f, np.linspace(0.02, 0.6, levels)),
        colors="k",
        linewidths=0.5,
        alpha=0.6,
    )
    names = list(feature_names) if feature_names is not None else ["x0", "x1"]
    if len(names) != 2:
        raise ValueError(f"feature_names has {len(names)} names for 2 features")
    if X is not None:
        data = check_data(X)
        arr = data[:max_points]
        raw_data_note(ax, arr.shape[0], data.shape[0])
        ax.scatter(
            arr[:, 0],
            arr[:, 1],
            c=[cmap(i % 10) for i in model.predict(arr)],
            s=4,
            alpha=0.5,
            linewidths=0,
        )
    ax.scatter(model.means_[:, 0], model.means_[:, 1], c="k", s=40, marker="o", label="centres")
    if len(model.tevs_):
        ax.scatter(
            model.tevs_[:, 0],
            model.tevs_[:, 1],
            c="r",
            s=60,
            marker="x",
            label="transition points (TEVs)",
        )
    padded_limits(ax, lo, hi)  # centres on the bounds are drawn whole
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    ax.legend(loc="best", fontsize=8)
    ax.set_title(f"Morse merging: {model.n_clusters_} clusters")
    return ax
