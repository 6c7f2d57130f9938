"""Centre models: the data coloured by cluster with the private centres, and DPM's split tree."""

from __future__ import annotations

import numpy as np

from ..cluster._base import check_data
from ._common import pyplot, raw_data_note

_SEED = 0  # fixed subsampling seed: the same picture every time


# --------------------------------------------------------------------------------------------
# plot_clusters
# --------------------------------------------------------------------------------------------


def _check_fitted(model):
    if not hasattr(model, "cluster_centers_"):
        raise ValueError(f"the {type(model).__name__} is not fitted; fit it (or load one) first")


def _epsilon(model) -> float | None:
    report = getattr(model, "privacy_report_", None)
    if report is not None:
        return float(report.planned.epsilon)
    eps = getattr(model, "epsilon", None)
    return float(eps) if eps is not None else None


def _colours(k: int):
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if k <= 10 else "tab20" if k <= 20 else "turbo"]
    if k <= 20:
        return [cmap(i % cmap.N) for i in range(max(k, 1))]
    return [cmap(i / max(k - 1, 1)) for i in range(k)]


def _split_segments(tree, dims):
    """Line segments ((x0, y0), (x1, y1)) of every split of a 2-D tree, in plot coordinates."""
    a, b = dims
    segs = []
    for i in range(tree.n_nodes):
        f = tree.feature[i]
        if f < 0:
            continue
        s = float(tree.threshold[i])
        lo, hi = np.asarray(tree.box_lo[i], float), np.asarray(tree.box_hi[i], float)
        if f == a:
            segs.append(((s, lo[b]), (s, hi[b])))
        elif f == b:
            segs.append(((lo[a], s), (hi[a], s)))
    return segs


def plot_clusters(
    X,
    model,
    ax=None,
    dims=(0, 1),
    max_points: int = 20000,
    show_splits: bool = True,
    feature_names=None,
):
    """Scatter of X coloured by ``model.predict(X)`` with the private centres on top.

    Parameters
    ----------
    X : (n, d) data (at most ``max_points`` rows are drawn, a fixed-seed random subsample).
    model : a fitted privclust estimator (``cluster_centers_``, ``predict``).
    ax : matplotlib Axes to draw on (a new figure when None).
    dims : the two features on the axes (ignored for d == 1: a strip plot with jitter), or
        ``"centres"``: the two directions that separate the private centres most
        (:func:`centre_directions`, computed from the released centres and noisy sizes only),
        with the points and centres projected on them.
    show_splits : for a DPM on 1-D or 2-D data, draw the released split lines (for d > 2 a
        split on a third feature has no line in the projection, so none are drawn).
    feature_names : optional names of the d features, for the axis labels.

    Returns the Axes. The points are raw data: the figure is not a private release.
    """
    _check_fitted(model)
    X = check_data(X)
    n, d = X.shape
    centres = np.asarray(model.cluster_centers_, dtype=float)
    if centres.ndim != 2 or centres.shape[1] != d:
        raise ValueError(f"X has {d} feature(s); the model was fitted on {centres.shape[-1]}")
    if not (isinstance(max_points, int) and max_points > 0):
        raise ValueError(f"max_points must be a positive int, got {max_points!r}")
    names = list(feature_names) if feature_names is not None else [f"x{j}" for j in range(d)]
    if len(names) != d:
        raise ValueError(f"feature_names has {len(names)} names for {d} features")
    k = centres.shape[0]
    sizes = np.clip(np.asarray(getattr(model, "cluster_sizes_", np.ones(k)), dtype=float), 0,
                    None)
    view = _View(dims, d, names, centres, sizes)

    rng = np.random.default_rng(_SEED)
    Xs = X[np.sort(rng.choice(n, size=max_points, replace=False))] if n > max_points else X
    colours = _colours(k)
    if ax is None:
        _, ax = pyplot().subplots(figsize=(7, 6))
    xs, ys = view.coordinates(Xs)
    if ys is None:
        ys = rng.uniform(-1, 1, size=Xs.shape[0])
    _scatter_points(ax, xs, ys, np.asarray(model.predict(Xs)), colours)
    if show_splits and d <= 2 and view.W is None and hasattr(model, "split_tree_"):
        _draw_splits(ax, model.split_tree_, view.a, view.b)
    cx, cy = view.coordinates(centres)
    cy = np.zeros(k) if cy is None else cy
    if k:
        area = 60 + 440 * sizes / max(sizes.max(), 1.0)
        ax.scatter(cx, cy, s=area, c=colours[:k], marker="o", edgecolors="black",
                   linewidths=1.5, zorder=3, label="private centres (area ~ noisy size)")
        ax.scatter(cx, cy, s=18, c="black", marker="x", zorder=4)
    _zoom(ax, (xs, ys), (cx, cy))
    ax.set_xlabel(view.xlabel)
    ax.set_ylabel(view.ylabel)
    eps = _epsilon(model)
    title = f"{type(model).__name__}: {k} cluster{'s' if k != 1 else ''}"
    if eps is not None:
        title += f", epsilon = {eps:g}"
    ax.set_title(title + view.title_suffix)
    raw_data_note(ax, Xs.shape[0], n)
    ax.legend(loc="upper right", fontsize=8, framealpha=0.8, markerscale=0.6)
    return ax


def centre_directions(centres, sizes=None) -> tuple[np.ndarray, np.ndarray]:
    """The two directions that separate the centres most, from the centres alone.

    The top two principal directions of the ``(k, d)`` centres, each weighted by its size
    (negative noisy sizes count as 0; equal weights when ``sizes`` is None or sums to 0): the
    between-cluster scatter that linear discriminant analysis maximises, computed from the
    released centres and noisy sizes only, so a projection on them is post-processing of the
    release (no data point chooses them). With fewer than two directions of spread (one or two
    centres) the remaining ones are the feature axes that lie furthest from those found.

    Returns ``(W, share)``: ``W`` (d, 2) orthonormal columns, each signed so that its largest
    entry is positive, and ``share`` (2,) the share of the centres' weighted spread along each.
    """
    c = np.asarray(centres, dtype=float)
    if c.ndim != 2 or c.shape[1] < 2:
        raise ValueError(f"centre_directions needs (k, d) centres with d >= 2; got shape "
                         f"{c.shape}")
    k, d = c.shape
    w = np.ones(k) if sizes is None else np.clip(np.asarray(sizes, dtype=float), 0, None)
    if w.shape != (k,) or not np.isfinite(w).all() or w.sum() <= 0:
        w = np.ones(k)
    w = w / w.sum()
    z = (c - w @ c) * np.sqrt(w)[:, None] if k else np.zeros((0, d))
    found, spread = np.zeros((d, 0)), np.zeros(0)
    if k >= 2:
        _, sv, vt = np.linalg.svd(z, full_matrices=False)
        keep = sv[:2] > 1e-12 * max(sv[0], np.finfo(float).tiny)
        found, spread = vt[:2][keep].T, sv[:2][keep] ** 2
    while found.shape[1] < 2:  # complete with the feature axis furthest from what is found
        residual = np.eye(d) - found @ found.T
        j = int(np.argmax(np.linalg.norm(residual, axis=0)))
        axis = residual[:, j] / np.linalg.norm(residual[:, j])
        found, spread = np.column_stack([found, axis]), np.append(spread, 0.0)
    signs = np.sign(found[np.argmax(np.abs(found), axis=0), [0, 1]])
    total = float(np.sum(z * z)) if k else 0.0
    share = spread / total if total > 0 else np.zeros(2)
    return found * signs, share


class _View:
    """What the axes show: two features, a strip of one feature, or the projection on the
    centres' directions (``dims="centres"``)."""

    def __init__(self, dims, d: int, names, centres, sizes):
        self.W = None
        if isinstance(dims, str) and dims == "centres" and d >= 2:
            self.W, share = centre_directions(centres, sizes)
            self.a = self.b = None
            self.xlabel, self.ylabel = (f"direction {i + 1} of the private centres ("
                                        f"{100 * share[i]:.0f}% of their spread)"
                                        for i in range(2))
            self.title_suffix = (f"\nraw data ({d} features) projected on the 2 directions "
                                 "that separate the private centres most")
            return
        self.a, self.b = _axes_features(dims, d)
        self.xlabel = names[self.a]
        self.ylabel = names[self.b] if self.b is not None else "(jitter)"
        self.title_suffix = f"  (features {names[self.a]}, {names[self.b]} of {d})" if d > 2 \
            else ""

    def coordinates(self, rows):
        """x and y of ``rows`` (y None for a strip plot)."""
        if self.W is not None:
            p = np.asarray(rows, dtype=float) @ self.W
            return p[:, 0], p[:, 1]
        return rows[:, self.a], (rows[:, self.b] if self.b is not None else None)


def _axes_features(dims, d: int):
    """The features on the x and y axes (``(0, None)`` for 1-D data: a strip plot)."""
    if d < 2:
        return 0, None
    if isinstance(dims, str):
        raise ValueError(f"dims must be two feature indices, e.g. (0, 1), or 'centres'; got "
                         f"{dims!r}")
    try:
        a, b = (int(v) for v in dims)
    except (TypeError, ValueError):
        raise ValueError(f"dims must be two feature indices, e.g. (0, 1); got {dims!r}") from None
    if a == b or not (0 <= a < d and 0 <= b < d):
        raise ValueError(f"dims must be two different feature indices in 0..{d - 1}; got {dims!r}")
    return a, b


def _scatter_points(ax, xs, ys, labels, colours) -> None:
    """The points coloured by cluster; noise (label -1) in light grey."""
    point_size = 4 if xs.shape[0] > 5000 else 10
    noise = labels < 0
    if noise.any():
        ax.scatter(xs[noise], ys[noise], s=point_size, c="lightgrey", linewidths=0,
                   label="noise", rasterized=True)
    pc = np.asarray(colours, dtype=float)[labels[~noise] % len(colours)]
    ax.scatter(xs[~noise], ys[~noise], s=point_size, c=pc, linewidths=0, alpha=0.6,
               rasterized=True)


def _draw_splits(ax, tree, a, b) -> None:
    """DPM's released split lines (1-D: vertical lines; 2-D: segments within the boxes)."""
    from matplotlib.collections import LineCollection

    if b is None:  # 1-D strip plot: every split is a vertical line
        segs = [((float(tree.threshold[i]), -1.05), (float(tree.threshold[i]), 1.05))
                for i in range(tree.n_nodes) if tree.feature[i] >= 0]
    else:
        segs = _split_segments(tree, (a, b))
    if segs:
        ax.add_collection(LineCollection(segs, colors="0.25", linewidths=1.0,
                                         linestyles="--", zorder=2, label="private splits"))


def _zoom(ax, points, centres) -> None:
    """Zoom on the data and centres (the public bounds can be much wider): 5% of the range
    around the points, and 10% around the centres, whose markers are large (a centre on the
    edge of the range is drawn whole)."""
    for lim, p, c in ((ax.set_xlim, points[0], centres[0]), (ax.set_ylim, points[1], centres[1])):
        both = np.concatenate([p, c])
        lo, hi = float(both.min()), float(both.max())
        width = hi - lo if hi > lo else 1.0
        low, high = lo - 0.05 * width, hi + 0.05 * width
        if c.size:
            low = min(low, float(c.min()) - 0.1 * width)
            high = max(high, float(c.max()) + 0.1 * width)
        lim(low, high)


# --------------------------------------------------------------------------------------------
# plot_split_tree
# --------------------------------------------------------------------------------------------


def plot_split_tree(model, ax=None, feature_names=None):
    """DPM's split tree: internal nodes show ``feature <= threshold``, leaves their cluster
    index; every node shows its noisy count. Returns the Axes."""
    _check_fitted(model)
    tree = getattr(model, "split_tree_", None)
    if tree is None:
        raise ValueError(f"{type(model).__name__} has no split tree (only DPM models do)")
    plt = pyplot()
    if ax is None:
        n_leaves = max(len(tree.leaves()), 1)
        fig, ax = plt.subplots(figsize=(max(6, 1.1 * n_leaves), 1.5 + 1.1 * max(tree.depth)))
    d = int(getattr(model, "n_features_in_", 0)) or len(tree.box_lo[0])
    names = list(feature_names) if feature_names is not None else [f"x{j}" for j in range(d)]

    # In-order layout: leaves at consecutive x, parents centred over their children.
    pos: dict[int, tuple[float, float]] = {}
    next_x = [0.0]

    def place(i: int) -> float:
        if tree.is_leaf(i):
            x = next_x[0]
            next_x[0] += 1.0
        else:
            x = (place(tree.left[i]) + place(tree.right[i])) / 2.0
        pos[i] = (x, -float(tree.depth[i]))
        return x

    if tree.n_nodes:
        place(0)
    for i in range(tree.n_nodes):
        if not tree.is_leaf(i):
            for c in (tree.left[i], tree.right[i]):
                (x0, y0), (x1, y1) = pos[i], pos[c]
                ax.plot([x0, x1], [y0, y1], color="0.5", lw=1, zorder=1)
    colours = _colours(int(getattr(model, "n_clusters_", 0)) or 1)
    for i, (x, y) in pos.items():
        if tree.is_leaf(i):
            c = colours[tree.leaf_index[i] % len(colours)] if tree.leaf_index[i] >= 0 else "w"
            text = f"#{tree.leaf_index[i]}\nn~{tree.n_hat[i]}"
        else:
            c = "white"
            text = f"{names[tree.feature[i]]} <= {tree.threshold[i]:.3g}\nn~{tree.n_hat[i]}"
        ax.text(x, y, text, ha="center", va="center", fontsize=7, zorder=2,
                bbox={"boxstyle": "round", "fc": c, "ec": "0.3", "alpha": 0.9})
    ax.set_xlim(-0.7, max(next_x[0] - 0.3, 0.7))
    ax.set_ylim(-max(tree.depth, default=0) - 0.6, 0.6)
    ax.axis("off")
    ax.set_title("DPM split tree (left: x <= threshold; n~ = noisy count)")
    return ax
