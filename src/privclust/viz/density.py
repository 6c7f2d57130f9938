"""DPHDBSCAN: the released cells of the private tree, coloured by cluster."""

from __future__ import annotations

from ._common import axis_names, padded_limits, pyplot, scatter_raw


def plot_density_clusters(model, X=None, ax=None, *, cmap="tab10", max_points=100_000,
                          alpha=0.6, feature_names=None):
    """A fitted DPHDBSCAN's dense released cells, finest level drawn last, each coloured by its
    cluster (grey: in none), over an optional scatter of ``X`` (2-D models only; at most
    ``max_points`` points drawn, a fixed subsample: raw data, not a private release, as the
    figure notes); ``feature_names`` label the axes. Returns the axes."""
    model._check_fitted()
    if model.n_features_in_ != 2:
        raise ValueError("plot_density_clusters draws 2-D models only; this one has "
                         f"{model.n_features_in_} features")
    plt = pyplot()
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 7))
    names = axis_names(feature_names)
    if X is not None:
        scatter_raw(ax, X, max_points)
    colours = plt.get_cmap(cmap)
    o = model.grid_origin_
    for z, (level, cells, labels) in enumerate(zip(model.tree_levels_, model.tree_cells_,
                                                   model.tree_labels_, strict=True)):
        w = model.root_width_ / 2.0 ** (model.first_halvings_ + int(level) - 1)
        rects = [Rectangle(tuple(o + c * w), w[0], w[1]) for c in cells]
        face = [colours(int(k) % colours.N) if k >= 0 else (0.8, 0.8, 0.8, 1.0)
                for k in labels]
        ax.add_collection(PatchCollection(rects, facecolors=face, edgecolors="none",
                                          alpha=alpha, zorder=2 + z))
    b = model.bounds_
    padded_limits(ax, b[:, 0], b[:, 1], share=0.01)
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    ax.set_aspect("equal")
    ax.set_title(f"DPHDBSCAN: {model.n_clusters_} clusters, epsilon={model.epsilon}")
    return ax
