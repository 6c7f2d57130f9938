"""DPHDBSCAN's plan: the tree's levels, their cell widths, thresholds and significance floors,
and the default ``min_cluster_size`` at ``n`` records (public inputs only)."""

from __future__ import annotations

import math

import numpy as np

from ..cluster._density_grid import (
    COARSE_SHARE,
    COUNT_SHARE,
    DENSE_SCALES,
    GRID_MAX_DIMS,
    finest_level,
    noise_sd,
)
from ..cluster._shifted_tree import MAX_SPLIT_DIMS, hst_threshold, significance_floor
from ..cluster.hdbscan import MAX_LEVELS, default_min_cluster_size, first_halvings
from ._verdict import _head, records


def plan_density(est, n: float, d: int, bounds: np.ndarray, expected_clusters) -> dict:
    """Mirrors ``DPHDBSCAN.fit`` before its first read of the data (the released record count
    taken as n)."""
    eps, mcs, depth = est._check_params()
    if d <= GRID_MAX_DIMS:
        return _plan_grid(eps, mcs, depth, n, d, bounds, expected_clusters)
    levels = depth or MAX_LEVELS * math.ceil(d / MAX_SPLIT_DIMS)
    first = first_halvings(d)
    eps_level = eps / levels
    b = min(d, MAX_SPLIT_DIMS)
    root = 2.0 * (bounds[:, 1] - bounds[:, 0])
    widths = [float(np.exp(np.mean(np.log(root))) / 2.0 ** (first + lv)) for lv in range(levels)]
    thresholds = [hst_threshold(eps_level, 1 << (b * (first if lv == 0 else 1)))
                  for lv in range(levels)]
    floor = significance_floor(eps_level, 1 << b)
    size = default_min_cluster_size(n, floor) if mcs is None else mcs
    found = None
    if expected_clusters is not None:
        found = float(expected_clusters) if n / expected_clusters >= size else 0.0
    return {
        "levels": int(levels),
        "first_halvings": int(first),
        "grid": False,
        "epsilon_per_level": float(eps_level),
        "cell_widths": widths,
        "thresholds": [int(t) for t in thresholds],
        "significance_floor": float(floor),
        "min_cluster_size": float(size),
        "expected_clusters": found,
    }


def _plan_grid(eps, mcs, depth, n, d, bounds, expected_clusters) -> dict:
    """The grid release (up to ``GRID_MAX_DIMS`` features): the finest level for ``n``
    records spread over the whole box (records in part of it get a finer grid), the levels
    above it sums of its counts."""
    eps_hist = eps * (1.0 - COUNT_SHARE - COARSE_SHARE)
    finest = finest_level(n, eps_hist, d)
    if depth is not None:
        finest = max(1, min(finest, depth))
    sd = noise_sd(eps_hist)
    widths = [float(np.exp(np.mean(np.log(bounds[:, 1] - bounds[:, 0]))) / 2.0**lv)
              for lv in range(1, finest + 1)]
    thresholds = [DENSE_SCALES * sd * math.sqrt(3.0**d * 2.0 ** ((finest - lv) * d))
                  for lv in range(1, finest + 1)]
    size = default_min_cluster_size(n, DENSE_SCALES * sd) if mcs is None else mcs
    found = None
    if expected_clusters is not None:
        found = float(expected_clusters) if n / expected_clusters >= size else 0.0
    return {
        "levels": int(finest),
        "first_halvings": 2,
        "grid": True,
        "epsilon_per_level": float(eps_hist),
        "cell_widths": widths,
        "thresholds": [float(t) for t in thresholds],
        "significance_floor": float(DENSE_SCALES * sd),
        "min_cluster_size": float(size),
        "expected_clusters": found,
    }


def describe_density(f: dict, n: float, expected_clusters) -> tuple[list[str], list[str]]:
    """``(can, cannot)`` in words."""
    w = f["cell_widths"]
    if f["grid"]:
        shape = (f"one released grid of {f['levels']} levels, cells {w[0]:.4g} to {w[-1]:.4g} "
                 f"wide (geometric mean over features), epsilon {f['epsilon_per_level']:.4g} "
                 "on the finest, the levels above sums of its counts")
    else:
        shape = (f"a tree of up to {f['levels']} levels, cells {w[0]:.4g} to {w[-1]:.4g} wide "
                 f"(geometric mean over features), epsilon {f['epsilon_per_level']:.4g} per "
                 "level")
    can = [
        shape,
        f"clusters of at least {records(f['min_cluster_size'])} whose cells hold above "
        f"{records(f['significance_floor'])} each at the finest level they are seen",
    ]
    if f["expected_clusters"] is not None:
        can.append(f"of {expected_clusters} clusters of about {records(n / expected_clusters)}"
                   f", about {f['expected_clusters']:.0f} are heavy enough to be kept")
    cannot = [
        f"clusters lighter than min_cluster_size ({records(f['min_cluster_size'])})",
        f"gaps narrower than the finest cells the budget resolves (at best {w[-1]:.4g})",
    ]
    return can, cannot


def verdict_density(f: dict, n: float, epsilon: float, expected_clusters) -> str:
    """Noise-dominated when the default cluster would hold most of the records."""
    head = _head(n, epsilon)
    share = f["min_cluster_size"] / max(n, 1.0)
    if share >= 0.5:
        return (f"{head} this fit is noise-dominated: a cluster needs "
                f"{records(f['min_cluster_size'])}, half the data; use more records or a "
                "larger epsilon")
    if share >= 0.1:
        return (f"{head} this fit is marginal: a cluster needs {records(f['min_cluster_size'])}"
                f" ({100 * share:.2g}% of the records); more records or epsilon resolve more")
    return (f"{head} this fit is usable: clusters of {records(f['min_cluster_size'])} "
            f"({100 * share:.2g}% of the records) and more can be kept")
