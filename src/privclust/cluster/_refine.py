"""``refine="auto"``: whether a private Lloyd step after a tree-based k-means pays for itself,
decided before the tree from a released record count (HSTKMeans and EMMC)."""

from __future__ import annotations

import numpy as np

from ..privacy import NOISY_N_SHARE
from ._centres import plan_centroid_items, su_budget_split

__all__ = ["COUNT_ITEM", "RefineRule", "check_refine", "plan_refinement", "quantisation_error",
           "refine_epsilon", "refinement_noise"]


def check_refine(refine):
    """``refine``: True, False or "auto" (returned as True, False or "auto")."""
    if isinstance(refine, str) and refine == "auto":
        return "auto"
    if not isinstance(refine, bool | np.bool_):
        raise TypeError(f"refine must be True, False or 'auto', got {refine!r}")
    return bool(refine)


def refinement_noise(bounds: np.ndarray, eps_sum: float, k: int, n_hat: float) -> float:
    """Expected squared error per record that one private Lloyd step's noise adds, for ``k``
    clusters of ``n_hat / k`` records: the sums of ``(x - mid) / half`` get Laplace noise of
    scale ``d / eps_sum`` per coordinate, so a centre moves by ``2 (d / eps_sum)^2
    sum_j half_j^2 / n_c^2`` in squared distance and its ``n_c`` records pay that each:
    ``2 (d / eps_sum)^2 sum_j half_j^2 k^2 / n_hat^2`` per record (balanced clusters: the
    least it can be). Public values and a released count only."""
    d = bounds.shape[0]
    half = (bounds[:, 1] - bounds[:, 0]) / 2.0
    return 2.0 * (d / eps_sum) ** 2 * float(np.sum(half**2)) * (k / max(n_hat, 1.0)) ** 2


def quantisation_error(tree, level: int) -> float:
    """Expected squared distance per record from a point spread evenly over a cell of
    ``level`` to the cell's centre: ``sum_j w_j^2 / 12`` (public geometry)."""
    w = np.minimum(tree.width(level), tree.box[:, 1] - tree.box[:, 0])
    return float(np.sum(w**2) / 12.0)


class RefineRule:
    """``refine="auto"``: run the private Lloyd step only when its expected noise error is
    below the tree's quantisation error, decided before the tree from a noisy record count.

    The plan holds the step's budget up front (:func:`plan_refinement`): a noisy record
    count (``NOISY_N_SHARE`` of epsilon, at most a quarter of the step's share, taken from
    it), the sizes' item and, for the sums, reserve items, one per later line item that
    could use the budget instead. The rule compares :func:`refinement_noise` (the released
    count ``n_hat``, k, the bounds, the sums' epsilon) with :func:`quantisation_error` at the
    deepest planned level. Refining: the reserves move to the sums' item. Not refining: each
    reserve moves to its line item and the sizes' item to ``sizes_to``, so the fit spends
    the whole budget without the step. Public values and a released count only:
    post-processing, and every path spends at most ``epsilon`` (the plan's privacy filter).
    """

    def __init__(self, plan, tree, depth, k, items, reserves, sizes_to):
        self.plan, self.tree, self.depth, self.k = plan, tree, depth, k
        self.items, self.reserves, self.sizes_to = items, reserves, sizes_to
        self.chosen, self.note = False, ""

    def __call__(self, engine, mech) -> None:
        """Release the record count, decide, move the budget."""
        plan = self.plan
        n_hat = float(mech.count(engine.count(engine.root()), plan.item(COUNT_ITEM).epsilon,
                                 target="record count (refine='auto')",
                                 note="decides whether the private Lloyd step runs",
                                 item=COUNT_ITEM)[0])
        eps_sum = sum(plan.item(r).epsilon for r, _ in self.reserves)
        noise = refinement_noise(self.tree.box, eps_sum, self.k, n_hat)
        quant = quantisation_error(self.tree, self.depth)
        self.chosen = noise < quant
        if self.chosen:
            plan.move_unspent([r for r, _ in self.reserves], self.items[1],
                              "refine='auto' refines")
        else:
            for reserve, target in self.reserves:
                plan.move_unspent([reserve], target, "refine='auto' does not refine")
            plan.move_unspent([self.items[0]], self.sizes_to, "refine='auto' does not refine")
        self.note = (f"refine='auto': expected refinement noise {noise:.4g} per record (n_hat "
                     f"{n_hat:g}) {'<' if self.chosen else '>='} the tree's quantisation "
                     f"error {quant:.4g}: " + ("the private Lloyd step runs" if self.chosen
                                               else "no refinement; its budget went to "
                                               "the other releases"))


#: The line item of ``refine="auto"``'s noisy record count (:class:`RefineRule`).
COUNT_ITEM = "record count, refine='auto'"


def plan_refinement(plan, eps_refine: float, d: int, targets, auto: bool):
    """The refinement's two line items (sizes, sums; Su et al.'s split). With ``auto``: first
    the noisy record count (:data:`COUNT_ITEM`), then the sizes' item and the sums' budget
    in reserve items, one per ``(line item, weight)`` of ``targets`` (its share of the sums'
    budget: ``weight / sum of weights``), for :class:`RefineRule`. Returns ``(items,
    reserves)``, ``reserves`` as ``(reserve, target)`` pairs."""
    if not auto:
        return plan_centroid_items(plan, "refinement", eps_refine, d), []
    eps_n = min(NOISY_N_SHARE * plan.epsilon, eps_refine / 4.0)
    plan.add(COUNT_ITEM, "two-sided geometric", "pure", eps_n)
    eps_count, eps_sum = su_budget_split(eps_refine - eps_n, d)
    items = ("cluster sizes, refinement", "cluster sums, refinement")
    plan.add(items[0], "two-sided geometric", "pure", eps_count)
    plan.add(items[1], "laplace", "pure", 0.0)  # the reserves move here if the rule refines
    total = float(sum(w for _, w in targets))
    reserves = []
    for target, weight in targets:
        reserves.append((f"refinement or {target}", target))
        plan.add(reserves[-1][0], "laplace, or as its target", "pure",
                 eps_sum * weight / total)
    return items, reserves


def refine_epsilon(plan, items, share: float) -> float:
    """The epsilon :func:`noisy_centroids` splits: ``share * epsilon`` as planned, or after
    ``refine="auto"`` (a record count first) what its two items hold."""
    if plan.has_item(COUNT_ITEM):
        return plan.item(items[0]).epsilon + plan.item(items[1]).epsilon
    return share * plan.epsilon
