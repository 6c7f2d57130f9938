"""How each estimator's fitted state is written to the ``"model"`` section of a model file.

A :class:`Codec` pairs a *dump* (fitted estimator -> JSON-able dict of what the fit released:
never per-record values, never data) with a *load* (sets the fitted attributes on an unfitted
estimator built from the stored parameters, validating the section: ``KeyError``,
``ValueError`` or ``TypeError`` on malformed input, reported as a ``ModelFormatError``).
Estimators know nothing of files; the registry (:mod:`privclust.registry`) names each one's
codec, and :data:`CENTRES` serves every centre model (the k-means family and their kin).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cluster import SplitTree
from ..cluster._base import check_bounds
from ._json import jsonable

__all__ = ["CENTRES", "DBSCAN_CODEC", "DPM_CODEC", "MIXTURE_CODEC", "MORSE_CODEC", "Codec"]


@dataclass(frozen=True)
class Codec:
    """A dump and a load function for one kind of fitted model."""

    dump: Callable[[Any], dict]
    load: Callable[[Any, dict], None]


def _array(m: dict, key: str, dtype, shape) -> np.ndarray:
    """``m[key]`` as an array of ``shape`` (-1 allowed once), with a clear error if it is not."""
    try:
        return np.asarray(m[key], dtype=dtype).reshape(shape)
    except ValueError:
        raise ValueError(f"{key} has the wrong shape (expected {shape})") from None


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
    d = int(m["n_features_in"])
    if d < 1:
        raise ValueError(f"n_features_in must be >= 1, got {d}")
    centres = np.asarray(m["cluster_centers"], dtype=float)
    if centres.size == 0:
        centres = centres.reshape(0, d)
    if centres.ndim != 2 or centres.shape[1] != d:
        raise ValueError(f"cluster_centers has shape {centres.shape}, expected (k, {d})")
    if not np.isfinite(centres).all():
        raise ValueError("cluster_centers holds non-finite values")
    k = centres.shape[0]
    sizes = np.asarray(m["cluster_sizes"], dtype=np.int64).reshape(-1)
    if sizes.shape != (k,):
        raise ValueError(f"cluster_sizes has {sizes.size} entries for {k} centres")
    if int(m["n_clusters"]) != k:
        raise ValueError(f"n_clusters is {m['n_clusters']} but there are {k} centres")
    return d, centres, sizes


def _check_tree(tree: SplitTree, d: int) -> None:
    """A split tree that ``predict`` can walk: features in range, finite thresholds, children
    that exist and lie deeper (no cycles)."""
    n = tree.n_nodes
    for i in range(n):
        f, left, right = int(tree.feature[i]), int(tree.left[i]), int(tree.right[i])
        if left < 0 and right < 0:
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
    tree = SplitTree.from_dict(m["split_tree"])
    n_nodes = tree.n_nodes
    for name in (
        "threshold",
        "left",
        "right",
        "depth",
        "n_hat",
        "box_lo",
        "box_hi",
        "halt_reason",
        "leaf_index",
    ):
        if len(getattr(tree, name)) != n_nodes:
            raise ValueError(
                f"split_tree.{name} has {len(getattr(tree, name))} entries, expected {n_nodes}"
            )
    _check_tree(tree, d)
    leaf_ids = sorted(tree.leaf_index[i] for i in tree.leaves())
    if n_nodes and leaf_ids != list(range(k)):
        raise ValueError(f"split_tree has {len(leaf_ids)} leaves for {k} centres")
    interval = np.asarray(m["interval_size"], dtype=float).reshape(-1)
    if interval.shape != (d,):
        raise ValueError(f"interval_size has {interval.size} entries, expected {d}")
    est.cluster_centers_ = centres
    est.cluster_sizes_ = sizes
    est.n_clusters_ = k
    est.split_tree_ = tree
    est.interval_size_ = interval
    est.n_split_candidates_ = int(m["n_split_candidates"])
    est.min_cluster_size_ = float(m["min_cluster_size"])
    est.delta_ = float(m["delta"])
    est.n_features_in_ = d






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
    n_iter = int(m["n_iter"])
    if n_iter < 0:
        raise ValueError(f"n_iter must be >= 0, got {n_iter}")
    est.cluster_centers_ = centres
    est.cluster_sizes_ = sizes
    est.n_clusters_ = centres.shape[0]
    est.n_iter_ = n_iter
    est.n_features_in_ = d


CENTRES = Codec(_kmeans_dump, _kmeans_load)
DPM_CODEC = Codec(_dpm_dump, _dpm_load)


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
    g = m["grid"]
    shape = np.asarray(g["shape"], dtype=np.int64).reshape(-1)
    d = shape.size
    if d < 1 or (shape < 1).any():
        raise ValueError(f"grid shape {shape.tolist()} is not a grid")
    est.bounds_ = check_bounds(m["bounds"], d, rows=True)
    est.grid_origin_ = _array(g, "origin", float, (d,))
    est.cell_width_ = float(g["cell_width"])
    if not (np.isfinite(est.cell_width_) and est.cell_width_ > 0):
        raise ValueError(f"cell_width must be a positive number, got {g['cell_width']!r}")
    est.grid_shape_ = shape
    est.n_cells_ = int(g["n_cells"])
    est.kappa_ = int(g["kappa"])
    # files written before the core window was an option used NB at radius eps
    est.kappa_core_ = int(g.get("kappa_core", g["kappa"]))
    est.core_radius_ = float(g.get("core_radius", est.eps))
    est.histogram_ = str(m["histogram"])
    est.n_hat_ = m["n_hat"]
    est.threshold_ = m["threshold"]
    cells = _array(m, "span_cells", np.int64, (-1, d))
    if cells.size and ((cells < 0).any() or (cells >= shape).any()):
        raise ValueError("span_cells lie outside the grid")
    labels = _array(m, "span_labels", np.int64, (-1,))
    est.n_clusters_ = int(m["n_clusters"])
    if labels.size != cells.shape[0] or (labels.size and not (
            0 <= labels.min() and labels.max() < est.n_clusters_)):
        raise ValueError("span_labels do not match span_cells and n_clusters")
    est.span_cells_, est.span_labels_ = cells, labels
    est.n_features_in_ = d
    gu = dict(m["guarantee"])
    est.rho_, est.tau_, est.beta_ = gu["rho"], gu["tau"], gu["beta"]
    est.gamma_lower_, est.gamma_upper_ = gu["gamma_lower"], gu["gamma_upper"]
    est.min_samples_effective_ = gu["min_samples_effective"]
    est.guarantee_ = gu
    est._restore()


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
    d = int(m["n_features_in"])
    if d < 1:
        raise ValueError(f"n_features_in must be >= 1, got {d}")
    means = _array(m, "means", float, (-1, d))
    k = means.shape[0]
    weights = _array(m, "weights", float, (k,))
    covs = _array(m, "covariances", float, (k, d, d))
    if not (np.isfinite(means).all() and np.isfinite(covs).all() and (weights >= 0).all()):
        raise ValueError("the mixture holds non-finite values or negative weights")
    np.linalg.cholesky(covs)  # raises LinAlgError (a ValueError) if not positive definite
    return d, weights, means, covs


def _mixture_load(est, m: dict) -> None:
    d, weights, means, covs = _mixture(m)
    k = means.shape[0]
    est.weights_, est.means_, est.covariances_ = weights, means, covs
    est.cluster_centers_ = means
    est.noisy_counts_ = _array(m, "noisy_counts", float, (k,))
    est.active_components_ = _array(m, "active_components", bool, (k,))
    est.n_components_ = k
    est.sigma_ = float(m["sigma"])
    est.delta_ = float(m["delta"])
    est.bounds_ = check_bounds(m["bounds"], d, rows=True)
    est.n_iter_ = int(m["n_iter"])
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
    d = int(m["n_features_in"])
    est.weights_ = _array(m, "weights", float, (-1,))
    k0 = est.weights_.size
    est.means_ = _array(m, "means", float, (k0, d))
    est.covariances_ = _array(m, "covariances", float, (k0, d, d))
    est.bounds_ = None if m["bounds"] is None else check_bounds(m["bounds"], d, rows=True)
    est.n_features_in_ = d
    est.base_assignment_ = str(m.get("base_assignment", "likelihood"))
    if est.base_assignment_ not in ("likelihood", "nearest"):
        raise ValueError(
            f"base_assignment must be 'likelihood' or 'nearest', got {est.base_assignment_!r}"
        )
    est.n_clusters_ = int(m["n_clusters"])
    if est.n_clusters_ < 1:
        raise ValueError(f"n_clusters must be >= 1, got {est.n_clusters_}")
    est.component_labels_ = _array(m, "component_labels", np.int64, (k0,))
    if k0 and not (0 <= est.component_labels_.min() <= est.component_labels_.max()
                   < est.n_clusters_):
        raise ValueError(f"component_labels must lie in [0, {est.n_clusters_}) (one cluster "
                         "label per component)")
    if not (np.isfinite(est.means_).all() and np.isfinite(est.covariances_).all()
            and np.isfinite(est.weights_).all()):
        raise ValueError("weights, means and covariances must be finite numbers")
    if est.bounds_ is not None and k0 and (
            (est.means_ < est.bounds_[:, 0]).any() or (est.means_ > est.bounds_[:, 1]).any()):
        raise ValueError("means lie outside the model's bounds; the file was edited")
    est.sevs_ = _array(m, "sevs", float, (-1, d))
    est.sev_labels_ = _array(m, "sev_cluster", np.int64, (-1,))
    if est.sev_labels_.size != est.sevs_.shape[0]:
        raise ValueError("sev_cluster and sevs differ in length")
    est.tevs_ = _array(m, "tevs", float, (-1, d))
    est.tev_values_ = _array(m, "tev_values", float, (-1,))
    est.tev_edges_ = _array(m, "tev_edges", np.int64, (-1, 2))
    est.linkage_ = _array(m, "linkage", float, (-1, 4))
    est.leaves_ = _array(m, "leaves", np.int64, (-1,))
    est.n_fallback_merges_ = int(m["n_fallback_merges"])
    est._restore()


MORSE_CODEC = Codec(_morse_dump, _morse_load)
