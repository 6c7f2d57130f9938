"""The planner's DPM model: what a DPM fit can separate, from public inputs only.

Expected clusters and levels follow the halting recursion of "Understanding the theoretical
guarantees of DPM" (001, Thm 2.3: a node halts when the exponential mechanism picks a split that
leaves a child below ``min_cluster_size``, else both children recurse), made concrete by one
assumption about the data: the node's ``m`` clusters are of equal size and spread evenly along
the axis the split is on. Its split candidates then fall in ``m + 1`` equally long stretches:
the two outer ones (rank 0 or ``n``: centre-ness 0, every child on one side empty, so the branch
halts) and ``m - 1`` between neighbouring clusters (rank ``j / m``, centre-ness of Def. 6).
Intervals cutting through a cluster lose ``alpha`` times the cluster's share of emptiness and are
ignored. Between two stretches the exponential mechanism's odds are
``exp(eps_level n_node (c_j - c_0) / (2 (t/q + alpha)))`` (factor 2, released-count sensitivity,
as :class:`~privclust.DPM` draws them). A split between clusters halts the branch only when a
child's noisy count (two-sided geometric, the level's count budget) falls below ``tau_e``.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from ..cluster.dpm import _GAP_PERCENTILE, gap_percentile_constant
from ..privacy import gaussian_sigma, rule_delta
from ._verdict import records

#: in a node of m clusters the split is one of at most this many cluster ranks (m up to 2^20)
_MAX_RANKS = 48
#: the outer stretches' weight (two of the m + 1 stretches of an evenly spread axis)
OUTER_STRETCHES = 2.0


def geometric_sd(epsilon: float) -> float:
    """Standard deviation of two-sided geometric noise at ``epsilon`` (sensitivity 1)."""
    a = math.exp(-epsilon)
    return math.sqrt(2.0 * a) / (1.0 - a)


def p_count_at_least(mean: float, tau: float, epsilon: float) -> float:
    """``P(mean + Z >= tau)`` for two-sided geometric ``Z`` at ``epsilon`` (integer mean)."""
    a = math.exp(-epsilon)
    k = math.ceil(tau - mean)  # needs Z >= k
    if k <= 0:
        return 1.0 - a ** (1 - k) / (1.0 + a)
    return a**k / (1.0 + a)


def centreness(r: float, t: float, q: float) -> float:
    """Def. 6's centre-ness of a split at rank fraction ``r`` (mirrors ``DPM._scores``)."""
    u = 0.5 - abs(r - 0.5)
    if r <= q or r >= 1 - q:
        return u * t / q
    return (t - 2 * q) / (1 - 2 * q) + u * (1 - t) / (0.5 - q)


def dpm_params(est):
    """``(eps, delta, depth, t, q, alpha, shares, dshares)`` by DPM's own parameter checks."""
    eps, delta, depth, t, q, alpha, shares, dshares, _ = est._check_params()
    return eps, delta, depth, t, q, alpha, shares, dshares


def dpm_plan_items(est, eps: float, delta, depth: int, shares, dshares):
    """DPM's plan, built by ``DPM._plan_items`` itself (the fit's line items, no data)."""
    from ..privacy import PrivacyPlan

    plan = PrivacyPlan("DPM", eps, delta)
    est._plan_items(plan, depth, shares, dshares, bool(est.adaptive_intervals) and depth > 1)
    return plan


def halting_model(n: float, k: int, depth: int, tau: float, eps_exp, eps_cnt, t, q, alpha):
    """``(expected leaves, expected nodes per level)`` of DPM on ``k`` equal, evenly spread
    clusters of ``n`` records in total (module docstring)."""
    sens = t / q + alpha
    size = n / k
    depth = int(depth)

    @cache
    def grow(m: int, level: int):
        nodes = np.zeros(depth + 1 - level)
        nodes[0] = 1.0
        if m <= 1 or level >= depth:
            return 1.0, nodes
        js = np.unique(np.round(np.linspace(1, m - 1, min(m - 1, _MAX_RANKS))).astype(int))
        stretch = (m - 1) / js.size  # stretches each sampled rank stands for
        a = eps_exp[level] * n * m / k / (2.0 * sens)
        c = np.array([centreness(j / m, t, q) for j in js])
        top = max(c.max(), 0.0)
        w = stretch * np.exp(a * (c - top))  # EM weights relative to the best (overflow-safe)
        total = w.sum() + OUTER_STRETCHES * math.exp(-a * top)
        leaves = 1.0 - w.sum() / total  # an outer stretch: the branch halts
        e_cnt = eps_cnt[level + 1]
        for j, wj in zip(js, w, strict=True):
            p = wj / total
            kept = (p_count_at_least(round(size * j), tau, e_cnt)
                    * p_count_at_least(round(size * (m - j)), tau, e_cnt))
            l1, n1 = grow(int(j), level + 1)
            l2, n2 = grow(int(m - j), level + 1)
            leaves += p * (kept * (l1 + l2) + (1.0 - kept))
            nodes[1:] += p * kept * (n1 + n2)
        return leaves, nodes

    leaves, nodes = grow(int(k), 0)
    grow.cache_clear()
    return float(leaves), nodes


def _interval_fraction_uniform(n: float) -> float:
    """Alg. 2's beta as a fraction of the range for data spread uniformly over the bounds
    (mirrors ``dpm._fraction_from_percentile`` with the percentile of uniform gaps)."""
    p_hat = -math.log(1.0 - _GAP_PERCENTILE) / max(n, 2.0)
    c = gap_percentile_constant(_GAP_PERCENTILE)
    return float(np.clip(p_hat * max(n, 2.0) / c / 2.0, 1.0 / 256, 0.5))


def plan_dpm(est, n: float, d: int, bounds: np.ndarray, expected_clusters) -> dict:
    """DPM's plan fields at ``n`` records."""
    eps, delta, depth, t, q, alpha, shares, dshares = dpm_params(est)
    plan = dpm_plan_items(est, eps, delta, depth, shares, dshares)
    delta_used = rule_delta(n) if delta is None else float(delta)
    eps_cnt = [plan.item(f"record count, level {i}").epsilon for i in range(depth + 1)]
    eps_exp = [plan.item(f"split choice, level {i}").epsilon for i in range(depth)]
    tau = est._min_cluster_size(n, depth)
    leaf_cap = int(min(2**depth, math.floor(n / tau))) if tau > 0 else 2**depth
    k = leaf_cap if expected_clusters is None else int(expected_clusters)
    sens = t / q + alpha
    leaves, nodes = halting_model(n, max(k, 1), depth, tau, eps_exp, eps_cnt, t, q, alpha)
    reached = [lv for lv in range(nodes.size) if nodes[lv] >= 0.5]
    width = bounds[:, 1] - bounds[:, 0]
    eps_avg = plan.item("leaf averages").epsilon
    delta_avg = delta_used * plan.item("leaf averages").delta_share
    sigma_avg = gaussian_sigma(eps_avg, delta_avg, float(np.linalg.norm(width) / 2.0))
    n_node = [n / 2.0**lv for lv in range(depth + 1)]
    c_top = centreness(0.5, t, q)
    return {
        "min_cluster_size": tau,
        "max_leaves": leaf_cap,
        "expected_clusters": leaves,
        "expected_levels": int(max(reached)) if reached else 0,
        "expected_nodes_per_level": [float(x) for x in nodes],
        "count_epsilon_per_level": eps_cnt,
        "count_noise_sd_per_level": [geometric_sd(e) for e in eps_cnt],
        "split_epsilon_per_level": eps_exp,
        "split_sensitivity_per_level": [sens / m for m in n_node[:depth]],
        "split_halt_probability_per_level": _halt_per_level(n, depth, tau, eps_exp, eps_cnt,
                                                            t, q, alpha),
        "centreness_margin": c_top,
        "alpha_cut_share": c_top / alpha,
        "delta_used": delta_used,
        "leaf_average_sigma": sigma_avg,
        # a leaf of n / (expected leaves) records: its centre's error per coordinate as a share
        # of the narrowest feature's range
        "relative_centre_error": float(sigma_avg / max(n / max(leaves, 1.0), 1.0)
                                       / float(width.min())),
        "interval_fraction_if_uniform": _interval_fraction_uniform(n),
    }


def _halt_per_level(n, depth, tau, eps_exp, eps_cnt, t, q, alpha) -> list[float]:
    """Probability that a node of ``n / 2^level`` records holding two equal clusters halts at
    its level (the outer stretches win the exponential mechanism, or a child's noisy count is
    below ``tau_e``)."""
    sens = t / q + alpha
    out = []
    for level in range(depth):
        m_n = n / 2.0**level
        a = eps_exp[level] * m_n / (2.0 * sens)
        c = centreness(0.5, t, q)
        p_mid = 1.0 / (1.0 + OUTER_STRETCHES * math.exp(-a * c))
        kept = p_count_at_least(round(m_n / 2), tau, eps_cnt[level + 1]) ** 2
        out.append(1.0 - p_mid * kept)
    return out


def describe_dpm(f: dict, n: float, expected_clusters) -> tuple[list[str], list[str]]:
    """``(can, cannot)``: what the fit can and cannot find, in words."""
    tau = f["min_cluster_size"]
    k_txt = (f"the {expected_clusters} clusters you expect" if expected_clusters
             else f"up to {f['max_leaves']} clusters")
    can = [
        f"separates clusters of at least tau_e = {records(tau)} (min_cluster_size_)",
        f"of {k_txt}, about {f['expected_clusters']:.1f} expected, over about "
        f"{f['expected_levels']} levels",
        f"counts per level are off by about {f['count_noise_sd_per_level'][0]:.0f} (root) to "
        f"{records(f['count_noise_sd_per_level'][-1])} (deepest level)",
        f"a leaf of m records has its centre off by about {f['leaf_average_sigma']:.3g} / m "
        "per coordinate (at most; less once budget of unreached levels moves to the averages)",
    ]
    halts = f["split_halt_probability_per_level"]
    worst = int(np.argmax(halts)) if halts else 0
    cannot = [
        f"no cluster below {records(tau)}, and at most {f['max_leaves']} leaves",
        f"a cut through a cluster holding under {100 * f['alpha_cut_share']:.0f}% of a node's "
        "records still outscores an empty outer interval (alpha constraint: raise alpha to "
        "avoid such cuts)",
    ]
    if halts and halts[worst] > 0.05:
        cannot.append(
            f"a node splitting two clusters halts with probability {halts[worst]:.2f} at level "
            f"{worst} (split epsilon {f['split_epsilon_per_level'][worst]:.3g}, sensitivity "
            f"{f['split_sensitivity_per_level'][worst]:.3g})")
    return can, cannot
