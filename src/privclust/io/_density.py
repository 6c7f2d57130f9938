"""The model section of :class:`~privclust.cluster.hdbscan.DPHDBSCAN`: the public shifted grid
and, per level of the private tree, the dense released cells, their noisy counts and their
cluster (what the fit released and its post-processing; never records)."""

from __future__ import annotations

import numpy as np

from . import _fields as _f
from .codecs import Codec, _bounds

__all__ = ["DENSITY_CODEC"]


def _dump(model) -> dict:
    return {
        "bounds": np.asarray(model.bounds_, float).tolist(),
        "grid": {
            "origin": [float(v) for v in model.grid_origin_],
            "first_halvings": int(model.first_halvings_),
            "root_width": [float(v) for v in model.root_width_],
        },
        "levels": [
            {"level": int(lv), "cells": np.asarray(c).tolist(),
             "counts": np.asarray(n).tolist(), "labels": np.asarray(lab).tolist()}
            for lv, c, n, lab in zip(model.tree_levels_, model.tree_cells_,
                                     model.tree_counts_, model.tree_labels_, strict=True)
        ],
        "n_clusters": int(model.n_clusters_),
        "cluster_stability": np.asarray(model.cluster_stability_, float).tolist(),
        "min_cluster_size": float(model.min_cluster_size_),
        "n_hat": int(model.n_hat_),
    }


def _load(est, m: dict) -> None:
    g = _f.section(m, "grid")
    origin = _f.array(g, "origin", "float", (-1,), where="grid", finite=True)
    d = origin.size
    if d < 1:
        raise ValueError('"grid.origin" must hold one number per feature')
    est.bounds_ = _bounds(m, d)
    est.grid_origin_ = origin
    est.root_width_ = 2.0 * (est.bounds_[:, 1] - est.bounds_[:, 0])
    if "root_width" in g:  # the grid release widens the bounds by a hair (files before: 2 W)
        est.root_width_ = _f.array(g, "root_width", "float", (d,), names=("d",), where="grid",
                                   finite=True)
        if not (est.root_width_ > 0).all():
            raise ValueError('"grid.root_width" must be positive')
    est.first_halvings_ = _f.whole(g, "first_halvings", lo=1, hi=62, where="grid")
    est.n_clusters_ = k = _f.whole(m, "n_clusters", lo=0)
    raw = _f.get(m, "levels")
    if not isinstance(raw, list):
        raise ValueError(f'"levels" must be a list of levels, got {_f.short(raw)}')
    levels, cells, counts, labels = [], [], [], []
    for i, lv in enumerate(raw):
        where = f"levels[{i}]"
        levels.append(_f.whole(lv, "level", lo=1, hi=62, where=where))
        c = _f.array(lv, "cells", "int", (-1, d), names=("one per cell", d), where=where)
        n = _f.array(lv, "counts", "int", (-1,), where=where)
        lab = _f.array(lv, "labels", "int", (-1,), where=where)
        if n.size != c.shape[0] or lab.size != c.shape[0] or (
                lab.size and not (-1 <= lab.min() and lab.max() < k)):
            raise ValueError(f'"{where}" must hold one count and one label (-1 to '
                             f"n_clusters - 1) per cell")
        cells.append(c.astype(np.int64))
        counts.append(n.astype(np.int64))
        labels.append(lab.astype(np.int64))
    if levels != sorted(set(levels)):
        raise ValueError('"levels" must be listed once each, coarsest first')
    est.tree_levels_ = np.asarray(levels, dtype=np.int64)
    est.tree_cells_, est.tree_counts_, est.tree_labels_ = cells, counts, labels
    est.cluster_stability_ = _f.array(m, "cluster_stability", "float", (k,), names=("k",),
                                      finite=True)
    top = est.cluster_stability_.max() if k else 1.0
    est.cluster_persistence_ = est.cluster_stability_ / (top if top > 0 else 1.0)
    est.min_cluster_size_ = _f.number(m, "min_cluster_size", positive=True)
    est.n_hat_ = _f.whole(m, "n_hat")
    est.n_features_in_ = d
    est.shift_ = est.bounds_[:, 0] - origin


DENSITY_CODEC = Codec(_dump, _load)
