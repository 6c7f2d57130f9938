"""DP-DBSCAN: the released spans as cells on the grid."""

from __future__ import annotations

import numpy as np

from ._common import axis_names, padded_limits, pyplot, scatter_raw


def plot_spans(model, X=None, ax=None, *, cmap="tab20", max_points=100_000, alpha=0.55,
               feature_names=None):
    """A fitted DPDBSCAN's spans as filled cells (one colour per cluster) over an optional
    scatter of ``X`` (2-D models only; at most ``max_points`` points drawn, a fixed
    subsample: raw data, not a private release, as the figure notes); ``feature_names`` label
    the axes. Returns the axes."""

    model._check_fitted()
    if model.span_cells_.shape[1] != 2:
        raise ValueError(
            f"plot_spans draws 2-D models only; this one has {model.span_cells_.shape[1]} features"
        )
    plt = pyplot()
    from matplotlib.colors import ListedColormap

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 7))
    w = model.cell_width_
    o = model.grid_origin_
    names = axis_names(feature_names)
    if X is not None:
        scatter_raw(ax, X, max_points)
    cells = model.span_cells_
    if cells.shape[0]:
        lo = cells.min(axis=0)
        hi = cells.max(axis=0) + 1
        size = int(np.prod(hi - lo))
        colours = plt.get_cmap(cmap)
        palette = ListedColormap([colours(k % colours.N) for k in range(model.n_clusters_)])
        if size <= (1 << 24):  # an image of the cells' bounding box
            img = np.full(tuple(hi - lo), np.nan)
            img[cells[:, 0] - lo[0], cells[:, 1] - lo[1]] = model.span_labels_
            extent = (o[0] + lo[0] * w, o[0] + hi[0] * w, o[1] + lo[1] * w, o[1] + hi[1] * w)
            ax.imshow(
                np.ma.masked_invalid(img.T),
                origin="lower",
                extent=extent,
                cmap=palette,
                vmin=-0.5,
                vmax=model.n_clusters_ - 0.5,
                interpolation="nearest",
                alpha=alpha,
                zorder=2,
                aspect="auto",
            )
        else:  # too spread out for an image: one marker per cell
            centre = o + (cells + 0.5) * w
            ax.scatter(
                centre[:, 0],
                centre[:, 1],
                c=model.span_labels_,
                cmap=palette,
                marker="s",
                s=4,
                alpha=alpha,
                zorder=2,
            )
    b = model.bounds_
    padded_limits(ax, b[:, 0], b[:, 1], share=0.01)
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    ax.set_aspect("equal")
    ax.set_title(f"DP-DBSCAN spans: {model.n_clusters_} clusters, epsilon={model.epsilon}")
    return ax
