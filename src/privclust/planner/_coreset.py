"""The planner's model of :class:`~privclust.cluster.coreset.CoresetKMeans`: the smallest
cluster standing apart that a fit without k can find, from public inputs only.

It mirrors the part of ``CoresetKMeans.fit`` that sets the tree's level budgets (the plan's
items, the given-k cut and the equal re-split of thick 3-5-D trees, with the released record
count taken as ``n``) and the floors behind the report's note: a cluster's cells must reach
every level's significance floor, and its refined points the support floor of a centre of
its own (:func:`~privclust.cluster._coreset.combine.support_floor`). A fit whose tree stops
early releases its last level again with the budget of the levels below, so its own note can
be lower.
"""

from __future__ import annotations

from ..cluster import coreset as _ck
from ..cluster._coreset.combine import support_floor
from ..cluster._coreset.tree import equal_levels
from ..cluster._shifted_tree import significance_floor
from ..privacy import PrivacyPlan

__all__ = ["coreset_floors"]


def coreset_floors(est, n: float, d: int) -> dict:
    """``{"min_cluster_size", "tree_floor", "support_floor"}`` of ``est`` at ``n`` records of
    ``d`` features (public bounds: the planner's). Mirrors ``CoresetKMeans.fit``."""
    eps, delta, k, _, p_user, depth, n_lloyd, shares = est._check_params()
    p = min(d, _ck.DEFAULT_PROJECTED if p_user is None else p_user)
    wide = p < d and d > _ck.SELECT_MAX_FEATURES
    if n_lloyd is None:
        n_lloyd = _ck.WIDE_N_LLOYD if wide else 1 if k is None else _ck.GIVEN_K_N_LLOYD
    no_k = k is None and est.max_depth is None and not wide and p <= _ck.NO_K_MAX_DIMS
    plan = PrivacyPlan("CoresetKMeans", eps, 0.0 if delta == 0 else delta)
    levels, budgets, _, eps_steps = est._plan_items(
        plan, depth, shares, est._steps(n_lloyd, wide), delta == 0, p < d, wide,
        _ck.NO_K_GROWTH if no_k else _ck.LEVEL_GROWTH)
    if k is not None and est.max_depth is None and not wide:
        levels, budgets = est._given_k_levels(plan, levels, budgets, k, n, p)
    elif no_k and p > _ck.NO_K_GROWTH_MAX_DIMS:
        budgets = equal_levels(plan, levels, budgets, n, p, _ck.NO_K_EQUAL_LEAVES)
    tree = max((significance_floor(b, 1 << p) for b in budgets if b > 0), default=0.0)
    support = support_floor(eps_steps[0]) if eps_steps else 0.0
    return {"min_cluster_size": float(max(tree, support)), "tree_floor": float(tree),
            "support_floor": float(support)}
