"""How each estimator's fitted state is written to the ``"model"`` section of a model file.

A :class:`Codec` pairs a *dump* (fitted estimator -> JSON-able dict of what the fit released:
never per-record values, never data) with a *load* (sets the fitted attributes on an unfitted
estimator built from the stored parameters, validating the section: ``KeyError``,
``ValueError`` or ``TypeError`` on malformed input, reported as a ``ModelFormatError``).
Estimators know nothing of files; the registry (:mod:`privclust.registry`) names each one's
codec, and :data:`CENTRES` serves every centre model (the k-means family and their kin).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cluster import SplitTree
from ..cluster._base import MAX_ABS_BOUND, check_bounds
from ..cluster.dbscan import check_dimension
from . import _fields as _f
from ._json import jsonable

__all__ = ["CENTRES", "CORESET_CODEC", "DBSCAN_CODEC", "DPM_CODEC", "MIXTURE_CODEC", "MORSE_CODEC",
           "Codec", "check_inside"]


@dataclass(frozen=True)
class Codec:
    """A dump and a load function for one kind of fitted model."""

    dump: Callable[[Any], dict]
    load: Callable[[Any, dict], None]


def _bounds(m: dict, d: int, where: str = "") -> np.ndarray:
    """The (d, 2) bounds a fitted model stores, as one (lo, hi) row per feature."""
    raw = _f.array(m, "bounds", "float", (d, 2), names=("d", 2), where=where, finite=True)
    try:
        return check_bounds(raw, d, rows=True)
    except ValueError as exc:
        raise ValueError(f'"bounds" must hold one (lo, hi) row per feature with lo < hi: '
                         f"{_f.short(str(exc))}") from None


def check_inside(values, bounds, what: str) -> None:
    """Refuse ``values`` (rows of d numbers) that are not finite or lie outside ``bounds``
    ((d, 2); None: outside +-MAX_ABS_BOUND, the widest bounds a fit accepts). A fit releases
    its centres and means inside its bounds; the slack of 1e-9 of the width admits a value
    that an older release rounded one ulp past a bound, nothing an edit would need."""
    v = np.asarray(values, dtype=float)
    if not v.size:
        return
    if not np.isfinite(v).all():
        raise ValueError(f"{what} hold non-finite values (null, Infinity or values too large "
                         "for a float); the file was edited or is corrupt")
    if bounds is None:
        if (np.abs(v) > MAX_ABS_BOUND).any():
            raise ValueError(f"{what} lie outside +-{MAX_ABS_BOUND:g}, the widest bounds a fit "
                             "accepts; the file was edited or is corrupt")
        return
    b = np.asarray(bounds, dtype=float)
    slack = 1e-9 * (b[:, 1] - b[:, 0])
    if (v < b[:, 0] - slack).any() or (v > b[:, 1] + slack).any():
        raise ValueError(f"{what} lie outside the model's bounds; the file was edited or is "
                         "corrupt")


# ------------------------------------------------------------------------------- centre models
def _dpm_dump(model) -> dict:
    return {
        "cluster_centers": jsonable(np.asarray(model.cluster_centers_), "cluster_centers_"),
        "cluster_sizes": jsonable(np.asarray(model.cluster_sizes_), "cluster_sizes_"),
        "n_clusters": int(model.n_clusters_),
        "split_tree": jsonable(model.split_tree_.to_dict(), "split_tree_"),
        "interval_size": jsonable(np.asarray(model.interval_size_), "interval_size_"),
        "n_split_candidates": int(model.n_split_candidates_),
        "min_cluster_size": float(model.min_cluster_size_),
        "delta": float(model.delta_),
        "n_features_in": int(model.n_features_in_),
    }


def _load_centres(m: dict) -> tuple[int, np.ndarray, np.ndarray]:
    """``(d, centres (k, d), noisy sizes (k,))`` of a centre model's section, validated."""
    d = _f.whole(m, "n_features_in", lo=1)
    raw = _f.get(m, "cluster_centers")
    centres = _f.array(m, "cluster_centers", "float", (-1, d) if raw else (0, d),
                       names=("k", d))
    if not np.isfinite(centres).all():
        raise ValueError("cluster_centers holds non-finite values (null, Infinity or values "
                         "too large for a float)")
    k = centres.shape[0]
    sizes = _f.array(m, "cluster_sizes", "int", (-1,))
    if sizes.shape != (k,):
        raise ValueError(f"cluster_sizes has {sizes.size} entries for {k} centres")
    n_clusters = _f.whole(m, "n_clusters", lo=0)
    if n_clusters != k:
        raise ValueError(f"n_clusters is {n_clusters} but there are {k} centres")
    return d, centres, sizes


def _check_tree(tree: SplitTree, d: int) -> None:
    """A split tree that ``predict`` can walk: features in range, finite thresholds, children
    that exist and lie deeper (no cycles)."""
    n = tree.n_nodes
    for i in range(n):
        f, left, right = int(tree.feature[i]), int(tree.left[i]), int(tree.right[i])
        if left < 0 and right < 0:
            if f != -1:
                raise ValueError(f"split_tree node {i} is a leaf (no children) but splits on "
                                 f"feature {f}; a leaf has feature -1")
            continue
        if not 0 <= f < d:
            raise ValueError(f"split_tree node {i} splits on feature {f}, but the model has {d}")
        if not np.isfinite(tree.threshold[i]):
            raise ValueError(f"split_tree node {i} has a non-finite threshold")
        for child in (left, right):
            if not (i < child < n) or int(tree.depth[child]) != int(tree.depth[i]) + 1:
                raise ValueError(f"split_tree node {i} has an invalid child {child}")


def _dpm_load(est, m: dict) -> None:
    d, centres, sizes = _load_centres(m)
    k = centres.shape[0]
    tree = _split_tree(m, d)
    _check_tree(tree, d)
    leaf_ids = sorted(tree.leaf_index[i] for i in tree.leaves())
    if (tree.n_nodes or k) and leaf_ids != list(range(k)):
        raise ValueError(f"split_tree has {len(leaf_ids)} leaves for {k} centres")
    interval = _f.array(m, "interval_size", "float", (-1,))
    if interval.shape != (d,):
        raise ValueError(f"interval_size has {interval.size} entries, expected {d}")
    est.cluster_centers_ = centres
    est.cluster_sizes_ = sizes
    est.n_clusters_ = k
    est.split_tree_ = tree
    est.interval_size_ = interval
    est.n_split_candidates_ = _f.whole(m, "n_split_candidates", lo=0)
    est.min_cluster_size_ = _f.number(m, "min_cluster_size", lo=0)
    est.delta_ = _f.number(m, "delta", lo=0)
    est.n_features_in_ = d


def _split_tree(m: dict, d: int) -> SplitTree:
    """The split tree, every list checked: one entry per node, numbers where numbers belong."""
    t = _f.section(m, "split_tree")
    where = "split_tree"
    n = _f.array(t, "feature", "int", (-1,), where=where).size
    for name in ("left", "right", "depth", "n_hat", "leaf_index"):
        _f.array(t, name, "int", (n,), names=("one per node",), where=where)
    _f.array(t, "threshold", "float", (n,), names=("one per node",), where=where)
    for name in ("box_lo", "box_hi"):
        _f.array(t, name, "float", (n, d), names=("one per node", d), where=where)
    reasons = _f.get(t, "halt_reason", where)
    if not (isinstance(reasons, list) and len(reasons) == n
            and all(isinstance(r, str) for r in reasons)):
        raise ValueError(f'"split_tree.halt_reason" must be a list of text, one per node, got '
                         f"{_f.short(reasons)}")
    return SplitTree.from_dict(t)






def _kmeans_dump(model) -> dict:
    # Only the final centres and their noisy sizes: that is what predict needs. The per-iteration
    # history stays on the fitted object; cost_history_ and the faithful variants' exact
    # convergent zones are computed without noise and are never written.
    return {
        "cluster_centers": jsonable(np.asarray(model.cluster_centers_), "cluster_centers_"),
        "cluster_sizes": jsonable(np.asarray(model.cluster_sizes_), "cluster_sizes_"),
        "n_clusters": int(model.n_clusters_),
        "n_iter": int(model.n_iter_),
        "n_features_in": int(model.n_features_in_),
    }


def _kmeans_load(est, m: dict) -> None:
    d, centres, sizes = _load_centres(m)
    n_iter = _f.whole(m, "n_iter", lo=0)
    est.cluster_centers_ = centres
    est.cluster_sizes_ = sizes
    est.n_clusters_ = centres.shape[0]
    est.n_iter_ = n_iter
    est.n_features_in_ = d


CENTRES = Codec(_kmeans_dump, _kmeans_load)
DPM_CODEC = Codec(_dpm_dump, _dpm_load)


# ------------------------------------------------------------------------------- CoresetKMeans
def _coreset_dump(model) -> dict:
    """The centres and their noisy sizes, the bounds the fit clipped to (a release with
    ``bounds="private"``), the released record count, the values of k the choice considered
    and the delta used. The coreset itself stays on the fitted object."""
    return _kmeans_dump(model) | {
        "bounds": np.asarray(model.bounds_, float).tolist(),
        "n_hat": int(model.n_hat_),
        "candidate_ks": [int(k) for k in model.candidate_ks_],
        "delta": float(model.delta_),
    }


def _coreset_load(est, m: dict) -> None:
    _kmeans_load(est, m)
    d, k = est.n_features_in_, est.n_clusters_
    est.bounds_ = _bounds(m, d)
    if k:
        check_inside(est.cluster_centers_, est.bounds_, "cluster_centers")
    est.n_hat_ = _f.whole(m, "n_hat", lo=0)
    ks = _f.array(m, "candidate_ks", "int", (-1,), names=("the values of k considered",))
    if ks.size and (ks.min() < 1 or (np.diff(ks) <= 0).any()):
        raise ValueError('"candidate_ks" must be increasing whole numbers of at least 1, the '
                         "values of k the choice considered (empty: k was given)")
    est.candidate_ks_ = ks
    est.delta_ = _f.number(m, "delta", lo=0)


CORESET_CODEC = Codec(_coreset_dump, _coreset_load)


# ------------------------------------------------------------------------------- DPDBSCAN
def _dbscan_dump(model) -> dict:
    """Grid, spans and guarantee; the parameters and the report are in the envelope."""
    return {
        "bounds": np.asarray(model.bounds_, float).tolist(),
        "grid": {
            "origin": [float(v) for v in model.grid_origin_],
            "cell_width": float(model.cell_width_),
            "shape": [int(v) for v in model.grid_shape_],
            "n_cells": int(model.n_cells_),
            "kappa": int(model.kappa_),
            "kappa_core": int(model.kappa_core_),
            "core_radius": float(model.core_radius_),
        },
        "histogram": model.histogram_,
        "n_hat": None if model.n_hat_ is None else int(model.n_hat_),
        "threshold": None if model.threshold_ is None else float(model.threshold_),
        "n_clusters": int(model.n_clusters_),
        "span_cells": np.asarray(model.span_cells_).tolist(),
        "span_labels": np.asarray(model.span_labels_).tolist(),
        "guarantee": jsonable(model.guarantee_, "guarantee_"),
    }


def _dbscan_load(est, m: dict) -> None:
    g = _f.section(m, "grid")
    shape = _f.array(g, "shape", "int", (-1,), where="grid")
    d = shape.size
    if d < 1 or (shape < 1).any():
        raise ValueError(f'"grid.shape" must list the cells per feature (each at least 1), '
                         f"got {_f.short(shape.tolist())}")
    check_dimension(d, est.eta)
    n_cells = math.prod(int(s) for s in shape)
    if n_cells >= 2**62 or _f.whole(g, "n_cells", lo=1, where="grid") != n_cells:
        raise ValueError(f'"grid.n_cells" must be the product of "grid.shape" ({n_cells:.4g}, '
                         "at most 2^62)")
    est.bounds_ = _bounds(m, d)
    est.grid_origin_ = _f.array(g, "origin", "float", (d,), names=("d",), where="grid",
                                finite=True)
    est.cell_width_ = _f.number(g, "cell_width", positive=True, where="grid")
    _check_grid(est.bounds_, est.grid_origin_, est.cell_width_, shape)
    est.grid_shape_ = shape
    est.n_cells_ = n_cells
    est.kappa_ = _f.whole(g, "kappa", lo=1, where="grid")
    # files written before the core window was an option used NB at radius eps
    est.kappa_core_ = _f.whole(g, "kappa_core", lo=1, where="grid") if "kappa_core" in g \
        else est.kappa_
    est.core_radius_ = (_f.number(g, "core_radius", positive=True, where="grid")
                        if "core_radius" in g else float(est.eps))
    est.histogram_ = _f.text(m, "histogram", ("dense", "sparse"))
    est.n_hat_ = None if _f.get(m, "n_hat") is None else _f.whole(m, "n_hat")
    est.threshold_ = _f.number(m, "threshold", nullable=True)
    cells = _f.array(m, "span_cells", "int", (-1, d), names=("one per core cell", d))
    if cells.size and ((cells < 0).any() or (cells >= shape).any()):
        raise ValueError('"span_cells" lie outside the grid: each must be a cell of "grid.shape" '
                         "(counted from 0)")
    labels = _f.array(m, "span_labels", "int", (-1,))
    est.n_clusters_ = _f.whole(m, "n_clusters", lo=0)
    if labels.size != cells.shape[0] or (labels.size and not (
            0 <= labels.min() and labels.max() < est.n_clusters_)):
        raise ValueError("span_labels do not match span_cells and n_clusters")
    est.span_cells_, est.span_labels_ = cells, labels
    est.n_features_in_ = d
    gu = _f.section(m, "guarantee")
    values = {k: _f.number(gu, k, where="guarantee") for k in (
        "rho", "tau", "beta", "gamma_lower", "gamma_upper", "min_samples_effective")}
    est.rho_, est.tau_, est.beta_ = values["rho"], values["tau"], values["beta"]
    est.gamma_lower_, est.gamma_upper_ = values["gamma_lower"], values["gamma_upper"]
    est.min_samples_effective_ = values["min_samples_effective"]
    if "statement" in gu:
        _f.text(gu, "statement", where="guarantee")
    est.guarantee_ = dict(gu)
    est._restore()


def _check_grid(bounds, origin, width: float, shape) -> None:
    """The grid the fit laid over its bounds: origin at the lower bounds, and as many cells of
    the stored width per feature as cover them (predict locates a point's cell from these)."""
    lo, hi = bounds[:, 0], bounds[:, 1]
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        cells = np.floor((hi - lo) / width) + 1
    if not np.array_equal(origin, lo) or not np.array_equal(cells, shape):
        raise ValueError('"grid" does not match the bounds: its origin must be the lower bounds '
                         "and its shape the cells of cell_width that cover them; the file was "
                         "edited or is corrupt")


DBSCAN_CODEC = Codec(_dbscan_dump, _dbscan_load)


# ------------------------------------------------------------------------------- mixtures
def _mixture_dump(model) -> dict:
    return {
        "weights": np.asarray(model.weights_, float).tolist(),
        "means": np.asarray(model.means_, float).tolist(),
        "covariances": np.asarray(model.covariances_, float).tolist(),
        "noisy_counts": np.asarray(model.noisy_counts_, float).tolist(),
        "active_components": np.asarray(model.active_components_, bool).tolist(),
        "sigma": float(model.sigma_),
        "delta": float(model.delta_),
        "bounds": np.asarray(model.bounds_, float).tolist(),
        "n_iter": int(model.n_iter_),
        "n_features_in": int(model.n_features_in_),
    }


def _mixture(m: dict) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """``(d, weights, means, covariances)`` of a mixture section, validated."""
    d = _f.whole(m, "n_features_in", lo=1)
    means = _f.array(m, "means", "float", (-1, d), names=("k", d), finite=True)
    k = means.shape[0]
    weights = _f.array(m, "weights", "float", (k,), names=("k",), finite=True)
    covs = _f.array(m, "covariances", "float", (k, d, d), names=("k", d, d), finite=True)
    if (weights < 0).any():
        raise ValueError('"weights" must be numbers >= 0')
    _check_covariances(covs)
    return d, weights, means, covs


def _check_covariances(covs: np.ndarray) -> None:
    """Symmetric positive definite matrices, as every released covariance is."""
    scale = float(np.abs(covs).max(initial=0.0))
    with np.errstate(over="ignore", invalid="ignore"):  # a tampered 1e308 is refused below
        symmetric = np.allclose(covs, np.swapaxes(covs, -1, -2), rtol=1e-6, atol=1e-9 * scale)
    if not symmetric:
        raise ValueError('"covariances" must be symmetric matrices')
    try:
        np.linalg.cholesky(covs)
    except np.linalg.LinAlgError:
        raise ValueError('"covariances" must be positive definite matrices (each a valid '
                         "covariance)") from None


def _mixture_load(est, m: dict) -> None:
    d, weights, means, covs = _mixture(m)
    k = means.shape[0]
    est.weights_, est.means_, est.covariances_ = weights, means, covs
    est.cluster_centers_ = means
    est.noisy_counts_ = _f.array(m, "noisy_counts", "float", (k,), names=("k",))
    est.active_components_ = _f.array(m, "active_components", "bool", (k,), names=("k",))
    est.n_components_ = k
    est.sigma_ = _f.number(m, "sigma", lo=0)
    est.delta_ = _f.number(m, "delta", lo=0)
    est.bounds_ = _bounds(m, d)
    est.n_iter_ = _f.whole(m, "n_iter", lo=0)
    est.n_features_in_ = d


MIXTURE_CODEC = Codec(_mixture_dump, _mixture_load)


# ------------------------------------------------------------------------------- Morse merging
def _morse_dump(model) -> dict:
    """The merged mixture and its Morse structure. The base estimator is named, not stored
    (its releases are in the privacy report)."""
    return {
        "base_estimator": type(model.base_estimator_).__name__,
        "weights": np.asarray(model.weights_, float).tolist(),
        "means": np.asarray(model.means_, float).tolist(),
        "covariances": np.asarray(model.covariances_, float).tolist(),
        "bounds": None if model.bounds_ is None else np.asarray(model.bounds_).tolist(),
        "n_clusters": int(model.n_clusters_),
        "component_labels": np.asarray(model.component_labels_).tolist(),
        "sevs": np.asarray(model.sevs_).tolist(),
        "sev_cluster": np.asarray(model.sev_labels_).tolist(),
        "tevs": np.asarray(model.tevs_).tolist(),
        "tev_values": np.asarray(model.tev_values_).tolist(),
        "tev_edges": np.asarray(model.tev_edges_).tolist(),
        "linkage": np.asarray(model.linkage_).tolist(),
        "leaves": np.asarray(model.leaves_).tolist(),
        "n_fallback_merges": int(model.n_fallback_merges_),
        "n_features_in": int(model.n_features_in_),
        "base_assignment": model.base_assignment_,
    }


def _morse_load(est, m: dict) -> None:
    d = _f.whole(m, "n_features_in", lo=1)
    est.weights_ = _f.array(m, "weights", "float", (-1,), finite=True)
    k0 = est.weights_.size
    est.means_ = _f.array(m, "means", "float", (k0, d), names=("k0", d), finite=True)
    est.covariances_ = _f.array(m, "covariances", "float", (k0, d, d), names=("k0", d, d),
                                finite=True)
    if (est.weights_ < 0).any() or not (est.weights_ > 0).any():
        raise ValueError('"weights" must be numbers >= 0, at least one of them > 0')
    live = est.weights_ > 0
    cov = est.covariances_[live]
    _check_covariances(0.5 * cov + 0.5 * np.swapaxes(cov, 1, 2))
    est.bounds_ = None if _f.get(m, "bounds") is None else _bounds(m, d)
    est.n_features_in_ = d
    est.base_assignment_ = (_f.text(m, "base_assignment", ("likelihood", "nearest"))
                            if "base_assignment" in m else "likelihood")
    est.n_clusters_ = _f.whole(m, "n_clusters")
    if est.n_clusters_ < 1:
        raise ValueError(f"n_clusters must be >= 1, got {est.n_clusters_}")
    est.component_labels_ = _f.array(m, "component_labels", "int", (k0,), names=("k0",))
    if k0 and not (0 <= est.component_labels_.min() <= est.component_labels_.max()
                   < est.n_clusters_):
        raise ValueError(f"component_labels must lie in [0, {est.n_clusters_}) (one cluster "
                         "label per component)")
    check_inside(est.means_, est.bounds_, "means")
    _morse_structure(est, m, d, k0)
    est._restore()


def _morse_structure(est, m: dict, d: int, k0: int) -> None:
    """The equilibria, the TEV graph and the merge hierarchy, checked against each other."""
    est.sevs_ = _f.array(m, "sevs", "float", (-1, d), names=(None, d), finite=True)
    n_sevs = est.sevs_.shape[0]
    est.sev_labels_ = _f.array(m, "sev_cluster", "int", (-1,))
    if est.sev_labels_.size != n_sevs:
        raise ValueError("sev_cluster and sevs differ in length")
    if n_sevs and not (-2 <= est.sev_labels_.min() and est.sev_labels_.max() < est.n_clusters_):
        raise ValueError(f'"sev_cluster" must hold cluster labels in [0, {est.n_clusters_}) '
                         "(or -2: a basin shared by clusters)")
    est.tevs_ = _f.array(m, "tevs", "float", (-1, d), names=(None, d))
    est.tev_values_ = _f.array(m, "tev_values", "float", (-1,))
    est.tev_edges_ = _f.array(m, "tev_edges", "int", (-1, 2))
    if est.tev_edges_.size and not (0 <= est.tev_edges_.min() and est.tev_edges_.max() < n_sevs):
        raise ValueError(f'"tev_edges" must be pairs of SEV indices in [0, {n_sevs}) (one row '
                         'of "sevs" each, counted from 0)')
    est.leaves_ = _f.array(m, "leaves", "int", (-1,))
    n_leaves = est.leaves_.size
    if n_leaves and (est.leaves_.min() < 0 or est.leaves_.max() >= k0
                     or np.unique(est.leaves_).size != n_leaves):
        raise ValueError(f'"leaves" must be distinct component indices in [0, {k0}) (counted '
                         "from 0)")
    est.linkage_ = _f.array(m, "linkage", "float", (-1, 4), names=("number of leaves - 1", 4),
                            finite=True)
    _check_linkage(est.linkage_, n_leaves)
    est.n_fallback_merges_ = _f.whole(m, "n_fallback_merges", lo=0)


def _check_linkage(Z: np.ndarray, n_leaves: int) -> None:
    """A merge table over ``n_leaves`` leaves: row i merges two of the leaves (0..n-1) or
    earlier merges (n + j, j < i), each once, at a height >= 0, with its number of leaves."""
    from scipy.cluster.hierarchy import is_valid_linkage

    rows = max(n_leaves - 1, 0)
    ids = Z[:, :2]
    ok = Z.shape[0] == rows and (ids == np.round(ids)).all() and (Z[:, 2] >= 0).all()
    if ok and rows:
        ok = bool((ids.max(axis=1) < n_leaves + np.arange(rows)).all()
                  and is_valid_linkage(Z, warning=False, throw=False))
    if not ok:
        raise ValueError(
            f'"linkage" must be a merge table of {rows} rows [a, b, height, size] for '
            f"{n_leaves} leaves: a and b a leaf (0 to {max(n_leaves - 1, 0)}) or an earlier "
            "merge, each used once, height >= 0; the file was edited"
        )


MORSE_CODEC = Codec(_morse_dump, _morse_load)
