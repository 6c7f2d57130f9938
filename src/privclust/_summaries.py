"""Plain-text summaries of fitted models, as ``privclust cluster`` prints them.

Each ``print_*`` function takes ``(model, X, names)``: the fitted model, the data it was fitted
on (only DPDBSCAN's summary applies the spans to it) and the feature names.
"""

from __future__ import annotations

import numpy as np


def _names(names, d: int) -> list[str]:
    return list(names) if names is not None else [f"x{j}" for j in range(d)]


#: printed when a noisy size or count below 0 is shown as 0
NEGATIVE_NOTE = ("noisy {what} below 0 after the noise are shown as 0 (post-processing); the "
                 "model file keeps the release as drawn")


def _non_negative(values, what: str) -> np.ndarray:
    """Noisy sizes or counts as shown: the release clipped at 0 (post-processing), with one
    line saying so when any was below 0."""
    v = np.asarray(values, dtype=float)
    if (v < 0).any():
        print(NEGATIVE_NOTE.format(what=what))
    return np.maximum(v, 0.0)


def format_table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]

    def fmt(row):
        cells = [
            str(c).rjust(w) if j in right else str(c).ljust(w)
            for j, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return [fmt(header)] + [fmt(r) for r in rows]


def print_centres(model, X=None, names=None, max_rows: int = 20, max_dims: int = 6) -> None:
    """Centres and noisy sizes of a centre model (DPM, the k-means family)."""
    k = int(model.n_clusters_)
    print(f"clusters found: {k}")
    if k:
        sizes = _non_negative(model.cluster_sizes_, "sizes")
        _centre_table(model, names, k, sizes, max_rows, max_dims)
    if hasattr(model, "n_iter_"):
        print(f"iterations: {model.n_iter_}")
    variant = getattr(model, "variant", None)
    if variant is not None:
        print(f"variant: {variant}" + ("" if variant == "private" else "  (NOT private)"))


def _centre_table(model, names, k, sizes, max_rows, max_dims) -> None:
    d = model.cluster_centers_.shape[1]
    if k <= max_rows and d <= max_dims:
        rows = [
            [str(i), str(int(sizes[i]))] + [f"{v:.4g}" for v in model.cluster_centers_[i]]
            for i in range(k)
        ]
        header = ["cluster", "noisy size"] + [str(n) for n in _names(names, d)]
        for line in format_table(header, rows, right=set(range(len(header)))):
            print("  " + line)
    else:
        shown = ", ".join(str(int(s)) for s in sizes[:max_rows])
        more = f", ... ({k - max_rows} more)" if k > max_rows else ""
        print(f"noisy sizes: {shown}{more}")
        print(f"centres: {k} x {d} (in the model file)")


def print_spans(model, X, names=None, max_rows: int = 20) -> None:
    """The spans of a DPDBSCAN fit, and how many input points fall in none."""
    k = int(model.n_clusters_)
    print(f"clusters (spans) found: {k}")
    shape = "x".join(str(int(v)) for v in model.grid_shape_)
    print(
        f"core cells: {model.span_cells_.shape[0]:,} of a {shape} grid of cells of width "
        f"{model.cell_width_:.4g} ({model.histogram_} histogram)"
    )
    if k:
        cells = np.bincount(model.span_labels_, minlength=k)
        shown = ", ".join(str(int(c)) for c in cells[:max_rows])
        more = f", ... ({k - max_rows} more)" if k > max_rows else ""
        print(f"core cells per span: {shown}{more}")
    print(f"guarantee: {model.guarantee_['statement']}")
    noise = int(np.count_nonzero(model.labels_ < 0))
    print(
        f"points in no span (label -1): {noise:,} of {X.shape[0]:,}  [the spans applied to "
        "the input; not part of the release]"
    )


def print_density(model, X, names=None, max_rows: int = 20) -> None:
    """The clusters of a DPHDBSCAN fit, their persistence, and how many input points fall in
    none."""
    k = int(model.n_clusters_)
    print(f"clusters found: {k} (min_cluster_size {model.min_cluster_size_:g} records)")
    levels = ", ".join(str(int(c.shape[0])) for c in model.tree_cells_)
    print(f"dense released cells per level: {levels or 'none'}")
    if k:
        shown = ", ".join(f"{v:.2f}" for v in model.cluster_persistence_[:max_rows])
        more = f", ... ({k - max_rows} more)" if k > max_rows else ""
        print(f"persistence per cluster: {shown}{more}")
    noise = int(np.count_nonzero(model.labels_ < 0))
    print(
        f"points in no cluster (label -1): {noise:,} of {X.shape[0]:,}  [the model applied to "
        "the input; not part of the release]"
    )


def print_mixture(model, X=None, names=None, max_rows: int = 20, max_dims: int = 6) -> None:
    """Weights, noisy counts and (when small) means of a DPGaussianMixture."""
    k = int(model.n_components_)
    active = int(np.count_nonzero(model.active_components_))
    print(f"components: {k} ({active} active: noisy count above the empty-component threshold)")
    weights = np.asarray(model.weights_, dtype=float)
    counts = _non_negative(model.noisy_counts_, "counts")
    d = model.means_.shape[1]
    if k <= max_rows and d <= max_dims:
        rows = [
            [str(i), f"{weights[i]:.3f}", f"{counts[i]:.0f}"]
            + [f"{v:.4g}" for v in model.means_[i]]
            for i in range(k)
        ]
        header = ["component", "weight", "noisy count"] + [str(n) for n in _names(names, d)]
        for line in format_table(header, rows, right=set(range(len(header)))):
            print("  " + line)
    else:
        shown = ", ".join(f"{w:.3f}" for w in weights[:max_rows])
        more = f", ... ({k - max_rows} more)" if k > max_rows else ""
        print(f"weights: {shown}{more}")
        print(f"means and covariances: {k} x {d} (in the model file)")


def print_morse(model, X=None, names=None, max_rows: int = 40) -> None:
    """The merge of a MorseMerging fit: clusters, component labels, transition points."""
    base = model.base_estimator_
    k0 = int(np.asarray(model.weights_).size)
    print(
        f"clusters: {model.n_clusters_} merged from {k0} components of the private "
        f"{type(base).__name__}"
    )
    labels = np.asarray(model.component_labels_)
    shown = " ".join(str(int(v)) for v in labels[:max_rows])
    more = f" ... ({k0 - max_rows} more)" if k0 > max_rows else ""
    # every component has a cluster: zero-weight ones take the basin their mean flows to
    print(f"cluster of each component: {shown}{more}")
    print(f"transition points (TEVs) found: {len(model.tevs_)}")
    if model.n_fallback_merges_:
        print(
            f"merges without a transition point (straight-segment barrier): "
            f"{model.n_fallback_merges_}"
        )
