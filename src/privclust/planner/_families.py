"""The planner's models of DP-DBSCAN, the k-means family and the Gaussian mixture.

Every number comes from the estimator's own parameter checks, plan items and calibrations
(``_check_params``, ``_plan_items``, ``_calibrate``, :func:`~privclust.privacy.histogram.
neighbourhood_noise_bounds`...). Where a step lives only inside ``fit``, the function it mirrors
is named in a comment; ``tests/test_planner.py`` compares those numbers with fitted attributes.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from ..cluster._centres import su_budget_split, su_iterations
from ..cluster.convergent import _ConvergentKMeans
from ..cluster.coreset import CoresetKMeans
from ..cluster.dbscan import _auto_mode
from ..cluster.dpcube import DPCube
from ..cluster.emmc import EMMC
from ..cluster.hst import HSTKMeans
from ..cluster.lloyd import DPLloyd
from ..cluster.lsh_splits import LSHSplits
from ..privacy import PrivacyPlan
from ..privacy.histogram import sparse_threshold
from ..privacy.plan import NOISY_N_SHARE
from ._coreset import coreset_floors
from ._dpm import geometric_sd
from ._verdict import records

CENTRE_CLASSES = (DPLloyd, _ConvergentKMeans, HSTKMeans, EMMC, DPCube, LSHSplits, CoresetKMeans)


# --------------------------------------------------------------------------- DP-DBSCAN
def plan_dbscan(est, n: float, d: int, bounds: np.ndarray, expected_clusters) -> dict:
    """DPDBSCAN's grid, histogram, Gamma, tau and core threshold at ``n`` records (mirrors the
    part of ``DPDBSCAN.fit`` before its only read of the data, with the noisy n taken as n)."""
    eps, alpha, min_pts, eta, beta, share, shift = est._check_params()
    offsets, _, window, grid, mode, _, eps_hist = est._grid_setup(d, bounds, eps, alpha, eta,
                                                                  share)
    mode = _auto_mode(mode, n, grid.n_cells)  # the fit's switch, at n_hat = n
    threshold = sparse_threshold(grid.n_cells, n, eps_hist, est.noise) if mode == "sparse" \
        else None
    g_lo, g_hi, tau, min_eff, core_t = est._core_thresholds(
        eps_hist, beta, window.shape[0], grid.n_cells, threshold, min_pts, shift)
    kappa_core = int(window.shape[0])
    found = None
    if expected_clusters is not None:
        size = n / int(expected_clusters)
        found = float(expected_clusters) if size >= min_eff else (
            0.5 * float(expected_clusters) if size >= core_t else 0.0)
    return {
        "n_cells": int(grid.n_cells),
        "cell_width": float(grid.width),
        "grid_shape": [int(s) for s in grid.shape],
        "histogram": mode,
        "threshold": None if threshold is None else float(threshold),
        "kappa": int(offsets.shape[0]),
        "kappa_core": kappa_core,
        "count_noise_sd": geometric_sd(eps_hist) if est.noise == "geometric"
        else math.sqrt(2.0) / eps_hist,
        "gamma_lower": float(g_lo),
        "gamma_upper": float(g_hi),
        "tau": float(tau),
        "min_samples_effective": float(min_eff),
        "core_threshold": float(core_t),
        "min_dense_window": float(min_eff),
        "min_cell_density": float(min_eff) / kappa_core,
        "max_core_cells": int(math.floor(n * kappa_core / max(core_t, 1.0))),
        "expected_clusters": found,
    }


def describe_dbscan(f: dict, n: float, expected_clusters) -> tuple[list[str], list[str]]:
    """``(can, cannot)`` in words."""
    thr = "" if f["threshold"] is None else f", threshold {f['threshold']:g}"
    can = [
        f"grid of {f['n_cells']:.4g} cells of width {f['cell_width']:.4g} ({f['histogram']} "
        f"histogram{thr})",
        f"a region with at least MinPts' = {records(f['min_samples_effective'])} in a "
        f"{f['kappa_core']}-cell window (about {records(f['min_cell_density'])} per cell) "
        "is core (with probability 1 - beta)",
    ]
    if f["expected_clusters"] is not None:
        can.append(f"of {expected_clusters} clusters of about {records(n / expected_clusters)}"
                   f", about {f['expected_clusters']:.0f} can hold a core window")
    cannot = [
        f"no window with fewer than {records(f['core_threshold'])} is ever core "
        f"(Gamma = -{f['gamma_lower']:.1f} / +{f['gamma_upper']:.1f}, tau = {f['tau']:.1f})",
        f"at most {f['max_core_cells']} core cells at n = {n:.0f}",
    ]
    return can, cannot


# --------------------------------------------------------------------------- k-means family
def _centre_release(est, n: float, d: int):
    """``(k, epsilon of the last centre release or None, extra fields)``, from the
    estimator's own parameter checks."""
    if isinstance(est, DPLloyd):
        eps, k, max_iter, n_iter = est._check_params()
        eps_n = NOISY_N_SHARE * eps if n_iter is None else 0.0
        # mirrors DPLloyd.fit: T from Su et al.'s rule on the released count (here n)
        T = su_iterations(eps - eps_n, n, k, d, max_iter) if n_iter is None else n_iter
        return k, (eps - eps_n) / T, {"n_iter": int(T)}
    if isinstance(est, _ConvergentKMeans):
        eps, k, T, lap_share, _, _ = est._check_common()
        return k, lap_share * eps, {"n_iter": int(T)}
    if isinstance(est, HSTKMeans):
        eps, k, _, refine, share = est._check_params()
        return k, (share * eps if refine else None), {}
    if isinstance(est, EMMC):
        out = est._check_params()
        eps, k, refine, share = out[0], out[1], out[6], out[8]
        return k, (share * eps if refine else None), {}
    if isinstance(est, DPCube):
        eps, k, share, n_lloyd = est._check_params()
        return k, share * eps / (1 + n_lloyd), {"n_lloyd": int(n_lloyd)}
    raise TypeError(f"no centre model for {type(est).__name__}")


def _lsh_noise(est, n: float, d: int):
    """LSHSplits: ``(k, sd per coordinate in [-1, 1] units, extra)`` by its own plan items,
    ``_noise_std`` and ``_min_leaf`` (the released root count taken as n)."""
    eps, delta, k, depth, shares, _, _ = est._check_params()
    plan = PrivacyPlan("LSHSplits", eps, delta)
    pure = delta == 0
    est._plan_items(plan, depth, shares, pure)
    if plan.delta_rule:
        plan.resolve_delta(n, "the planner's n")
    sd = est._noise_std(plan, "leaf sums", d, pure)
    return k, sd, {"min_leaf_size": est._min_leaf(plan, d, k, n, pure),
                   "delta_used": plan.require_delta()}


def plan_centres(est, n: float, d: int, bounds: np.ndarray, expected_clusters) -> dict:
    """Noise per centre coordinate against the cluster size ``n / k``."""
    half = (bounds[:, 1] - bounds[:, 0]) / 2.0
    if isinstance(est, LSHSplits):
        k, sd_unit, extra = _lsh_noise(est, n, d)
        count_sd = None
    elif isinstance(est, CoresetKMeans):  # k is chosen privately; no closed-form noise model
        k = est.n_clusters or expected_clusters or 2
        sd_unit = count_sd = None
        extra = {"k_chosen_privately": est.n_clusters is None, **coreset_floors(est, n, d)}
    else:
        k, eps_rel, extra = _centre_release(est, n, d)
        sd_unit = count_sd = None
        if eps_rel is not None:  # mirrors _centres.noisy_centroids: Laplace, L1 sensitivity d
            eps_count, eps_sum = su_budget_split(eps_rel, d)
            sd_unit = math.sqrt(2.0) * d / eps_sum
            count_sd = geometric_sd(eps_count)
    size = n / k
    out = {"n_clusters": int(k), "cluster_size": size, "expected_clusters": float(k), **extra}
    if sd_unit is None:
        out.update(noise_per_coordinate=None, centre_error=None, relative_centre_error=None,
                   count_noise_sd=None)
        return out
    noise = sd_unit * half  # data units, per feature
    out.update(
        noise_per_coordinate=float(noise.max()),
        noise_per_feature=[float(v) for v in noise],
        count_noise_sd=count_sd,
        centre_error=float(noise.max() / size),
        relative_centre_error=float(sd_unit / 2.0 / size),  # off by this share of a range
        size_for_5pct_error=float(sd_unit / 0.1),
    )
    return out


def describe_centres(f: dict, n: float, expected_clusters) -> tuple[list[str], list[str]]:
    """``(can, cannot)`` in words."""
    k = f["n_clusters"]
    if "k_chosen_privately" in f:
        chosen = ("k chosen privately from a coreset (exponential mechanism over the records' "
                  "simplified silhouette)" if f["k_chosen_privately"] else f"{k} centres")
        return ([f"{chosen}, centres from a private coreset refined by noisy means"],
                ["no closed-form noise per coordinate for this estimator: measured accuracy "
                 "is on its documentation page",
                 f"a cluster standing apart of fewer than about {f['min_cluster_size']:.0f} "
                 f"records (the tree's significance floors up to {f['tree_floor']:.0f}, the "
                 f"support floor of a centre of its own {f['support_floor']:.0f})"])
    if f["noise_per_coordinate"] is None:
        return ([f"{k} centres from noisy cell counts (no noisy-mean refinement)"],
                ["no noise per coordinate to state: accuracy is the deepest cell's width"])
    s = f["noise_per_coordinate"]
    can = [
        f"a cluster of m records has its released centre off by about {s:.4g} / m per "
        f"coordinate; at m = n/k = {f['cluster_size']:.0f}: {f['centre_error']:.4g} "
        f"({100 * f['relative_centre_error']:.2g}% of a feature's range)",
    ]
    cannot = [f"clusters of fewer than {records(f['size_for_5pct_error'])} get centres "
              "off by more than 5% of a feature's range (per coordinate, typical)"]
    return can, cannot


# --------------------------------------------------------------------------- mixture
def plan_mixture(est, n: float, d: int, bounds: np.ndarray, expected_clusters) -> dict:
    """DPGaussianMixture's sigma per iteration (its own ``_calibrate``) and ``min_count``."""
    eps, delta, k, T = est._check_params()
    plan = PrivacyPlan("DPGaussianMixture", eps, delta)
    if est._plan_items(plan):
        plan.resolve_delta(n, "the planner's n")
    delta_used, sigma, _, r = est._calibrate(plan, SimpleNamespace(notes=[], zcdp_delta=None),
                                            d, T)
    min_count = est._min_count(sigma)
    half = (bounds[:, 1] - bounds[:, 0]) / 2.0
    size = n / k
    return {
        "n_components": int(k), "n_iter": int(T), "sigma": float(sigma), "delta_used": delta_used,
        "min_count": float(min_count), "cluster_size": size, "expected_clusters": float(k),
        "noise_per_coordinate": float(sigma * half.max()),
        "centre_error": float(sigma * half.max() / size),
        "relative_centre_error": float(sigma / 2.0 / size),
        "sensitivity_terms": int(r),
    }


def describe_mixture(f: dict, n: float, expected_clusters) -> tuple[list[str], list[str]]:
    """``(can, cannot)`` in words."""
    can = [
        f"sigma = {f['sigma']:.4g} per released statistic and iteration ({f['n_iter']} "
        "iterations, data mapped to [-1, 1])",
        f"a component of m records has its mean off by about {f['noise_per_coordinate']:.4g}"
        f" / m per coordinate; at m = n/K = {f['cluster_size']:.0f}: {f['centre_error']:.4g}",
    ]
    cannot = [f"a component whose noisy count is below min_count = {f['min_count']:.1f} "
              "counts as empty (re-seeded)"]
    return can, cannot
