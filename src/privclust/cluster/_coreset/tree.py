"""The private tree of :class:`~privclust.cluster.coreset.CoresetKMeans` and its weighted
summary.

The tree is the house's randomly shifted grid tree (:mod:`privclust.cluster._shifted_tree`)
over a public box, in the original coordinates or, for wide data, in a public random projection
of them. Level by level every released cell is cut into its ``2^p`` half-width children, whose
record counts are released with the linear-time pure-DP sparse histogram; a level's budget
grows with its depth (deep cells hold fewer records, so
their counts need more of it). The summary keeps the released leaves, each at its centre with
its noisy count and the spread of a record over its cell: a weighted coreset of released values
only, which every later step post-processes.
"""

from __future__ import annotations

import math

import numpy as np

from ..._geometry import project_rows, projected_box
from ...privacy.rng import public_unit_directions
from .._shifted_tree import CellWalk, ShiftedGrid, Wording, leaf_summary, significance_floor
from .._shifted_tree import grow as _grow

__all__ = ["CAP_MIN_DIMS", "CORESET_CAP", "Grid", "Space", "capped_summary", "count_levels",
           "depth_for_k", "equal_levels", "grow", "leaf_capacity", "leaf_summary",
           "level_budgets", "mass_stop", "NO_K_EQUAL_LEAVES", "NO_K_STOP_SHARE"]


class Space:
    """The coordinates the tree is grown in: the clipped records themselves (``p = d``), or
    ``y = G (x - mid)`` for a public random ``p x d`` map ``G`` (``sqrt(d / p)`` times ``p``
    random unit directions, so ``E ||G x||^2 = ||x||^2``). ``box`` bounds every image of a
    clipped record exactly."""

    def __init__(self, bounds: np.ndarray, p: int, generator: np.random.Generator):
        d = bounds.shape[0]
        self.bounds = bounds
        self.projected = p < d
        self.mid = (bounds[:, 0] + bounds[:, 1]) / 2.0
        if self.projected:
            self.G = math.sqrt(d / p) * public_unit_directions(generator, (p, d))
            self.box = projected_box(self.G, bounds)
        else:
            self.G = None
            self.box = bounds

    def fit_box(self, radius: float) -> None:
        """Narrow the projected box to ``[-radius, radius]`` per coordinate where that is
        narrower (``radius``: a released bound on the records' distance from the middle of the
        bounds; a projected coordinate of a record at that distance is about ``radius /
        sqrt(p)``, so few records are clipped)."""
        if self.projected:
            reach = np.minimum(self.box[:, 1], float(radius))
            self.box = np.column_stack([-reach, reach])

    def project(self, X: np.ndarray) -> np.ndarray:
        """The images of the (clipped) records, inside ``box``: each from that record and the
        public map alone (:func:`~privclust._geometry.project_rows`), so a record's cell does
        not depend on the other records."""
        Xc = np.clip(X, self.bounds[:, 0], self.bounds[:, 1])
        if not self.projected:
            return Xc
        # per-record arithmetic: a record's image from that record and G alone
        Y = project_rows(Xc, self.mid, self.G)
        return np.clip(Y, self.box[:, 0], self.box[:, 1], out=Y)

    def recovery_balls(self, proj, radius):
        """The recovery's balls (post-processing of public and released values): about
        ``mid + G^+ z_j`` for the cluster's centre ``z_j`` in the projection (``G^+`` the
        pseudo-inverse of the public projection: the part of the cluster's offset from the
        middle that the projection shows), with radius ``sqrt(radius^2 - ||G^+ z_j||^2)``
        (at least ``radius / 10``): a record within ``radius`` of the middle whose image is
        near ``z_j`` lies within it. Returns ``(anchors (m, d), radii (m,))``."""
        lift = proj @ np.linalg.pinv(self.G).T
        reach2 = radius**2 - np.einsum("ij,ij->i", lift, lift)
        return self.mid + lift, np.sqrt(np.maximum(reach2, (0.1 * radius) ** 2))


#: The tree's grid (:class:`~privclust.cluster._shifted_tree.ShiftedGrid`).
Grid = ShiftedGrid


def level_budgets(epsilon: float, depth: int, growth: float) -> list[float]:
    """``epsilon`` split over ``depth`` levels in proportion to ``growth^level``; the last
    level takes the rounding, so the parts add up to ``epsilon`` exactly."""
    raw = np.power(float(growth), np.arange(1, depth + 1))
    parts = [float(v) for v in epsilon * raw / raw.sum()]
    parts[-1] = epsilon - math.fsum(parts[:-1])
    return parts


def leaf_capacity(n_hat: float, epsilon: float, depth: int, p: int) -> float:
    """The most leaves a tree of ``depth`` levels sharing ``epsilon`` equally can hold
    significant counts in: ``n_hat`` over the last level's significance floor
    (:func:`~privclust.cluster._shifted_tree.significance_floor`). Public values only."""
    return n_hat / significance_floor(epsilon / depth, 1 << p)


def depth_for_k(k: int, n_hat: float, epsilon: float, p: int, depth: int,
                leaves_per_cluster: float, min_depth: int) -> int:
    """The deepest tree, at most ``depth`` levels and at least ``min_depth``, whose
    :func:`leaf_capacity` reaches ``leaves_per_cluster`` leaves per cluster: fewer levels,
    more budget each, lower floors. Public values only (``n_hat`` is released)."""
    for levels in range(depth, min_depth, -1):
        if leaf_capacity(n_hat, epsilon, levels, p) >= leaves_per_cluster * k:
            return levels
    return min(depth, min_depth)


#: Without k (:class:`~privclust.cluster.coreset.CoresetKMeans`) on trees of more than
#: ``NO_K_GROWTH_MAX_DIMS`` and at most ``NO_K_MAX_DIMS`` dimensions whose released record count
#: leaves a tree of equal level budgets room for ``NO_K_EQUAL_LEAVES`` leaves or more
#: (:func:`leaf_capacity`): the levels' budgets, planned growing with depth, are re-split
#: equally (:func:`equal_levels`). A level's threshold grows with ``ln 2^p``, so growing budgets
#: raise the top levels' floors most in more dimensions (5 dimensions at epsilon 1: about 280
#: records, 112 equal), where a small cluster standing apart sits alone in a top-level cell; a
#: thinner tree keeps them growing (its deep levels' cells hold pieces of clusters: six blobs
#: of 2,000 records in 4-d at epsilon 0.5 lost one with equal budgets).
NO_K_EQUAL_LEAVES = 256


def equal_levels(plan, levels, budgets, n_hat: float, p: int, leaves: float):
    """When the released record count ``n_hat`` gives a tree of equal level budgets room for
    ``leaves`` leaves or more (:func:`leaf_capacity`), the levels' line items are re-split
    equally (a privacy filter: chosen from a released value before any level is released, the
    plan's total unchanged). Returns the levels' budgets."""
    eps_tree = math.fsum(budgets)
    if leaf_capacity(n_hat, eps_tree, len(levels), p) < leaves:
        return budgets
    parts = level_budgets(eps_tree, len(levels), 1.0)
    plan.resplit(levels, parts, f"equal level budgets: the released record count leaves room "
                 f"for at least {leaves:g} leaves, so the top levels keep a small cluster "
                 "standing apart")
    return parts


#: Without k, trees of at most ``NO_K_MAX_DIMS`` dimensions (:func:`mass_stop`): the tree stops
#: at the first level whose significant cells hold less than this share of the significant mass
#: of the level above, and that level is released again with the budget of the levels below.
#: Measured (``benchmarks/no_k_speed.py --sets`` of the small sets, three seeds, mean ARI without
#: k): sipu_a2 at epsilon 0.5 0.054 -> 0.350, sipu_s2 at 0.25 0.370 -> 0.650, fcps_engytime at
#: 0.5 0.621 -> 0.746; a share of 0.5 stopped too late (0.294, 0.558), 0.85 too early (sipu_a2
#: at epsilon 1 0.818 -> 0.554) and 0.95 lost most sets (k = 2).
NO_K_STOP_SHARE = 0.7

_WORDING = Wording(stopped="the tree stopped at level {level}: released again with the budget "
                           "of the levels below")


def grow(engine, mech, grid, items, budgets, retry, step, stop=None, ahead=None):
    """Release the tree level by level (``items[l]`` spends ``budgets[l]``; a level that
    releases nothing, or one ``stop`` names a reason for, is released once more with the
    budget of the levels below, ``retry``), by :func:`~privclust.cluster._shifted_tree.grow`;
    ``ahead``: the levels' cells and counts already counted (:func:`count_levels`).
    Returns its :class:`~privclust.cluster._shifted_tree.Level` per level reached."""
    walk = None if ahead is None else CellWalk(engine, grid, ahead=dict(enumerate(
        ahead.levels, start=1)))
    return _grow(engine, mech, grid, items, retry, step, budgets=budgets, wording=_WORDING,
                 stop=stop, walk=walk)


def count_levels(engine, grid, depth: int):
    """The exact record count and the cells and counts of the tree's ``depth`` levels, in one
    pass over the records (:func:`~privclust.engine._level_cells.level_cells`: the finest
    level's cells counted densely, every coarser level read off them; the same cells and
    counts as a pass per level), or None (a grid too fine to count densely, or a tree that
    does not start at the root). Chosen from public values only (the grid and the bounds)."""
    if grid.first != 1 or depth < 1:
        return None
    from ...engine._level_cells import level_cells

    return level_cells(engine, grid.origin, np.stack([grid.width(lv) for lv in
                                                      range(1, depth + 1)]))


def mass_stop(n_hat: float, share: float):
    """A ``stop`` rule for :func:`grow` (decided from released values only: a privacy filter):
    the tree stops at the first level whose significant cells (noisy counts at least the
    level's :func:`~privclust.cluster._shifted_tree.significance_floor`) hold less than
    ``share`` of the noisy mass of the significant cells of the level above (the root:
    ``n_hat``, the released record count). There the level's cells are smaller than its floor
    allows: released again with the budget of the levels below, its floor drops to theirs,
    and the records that fell below it stay in the coreset at that level, not on the coarser
    cells above."""
    above = [max(float(n_hat), 0.0)]

    def stop(level, counts, epsilon, children):
        counts = np.asarray(counts, dtype=float)
        mass = float(counts[counts >= significance_floor(epsilon, children)].sum())
        before, above[0] = above[0], mass
        if mass < share * before:
            return (f"the tree stopped at level {level}: its significant cells hold {mass:.0f} "
                    f"of the {before:.0f} of the level above (less than {share:g}); released "
                    "again with the budget of the levels below")
        return None

    return stop


#: In at least ``CAP_MIN_DIMS`` tree dimensions the coreset holds at most ``CORESET_CAP`` points
#: (:func:`capped_summary`). There every record is labelled by its nearest coreset point at a
#: cost that grows with their number (in 2 dimensions public buckets make it a few candidates
#: whatever their number), and a level of a fixed tree releases more cells the more records
#: there are (10-D: 1,429 leaves at 10^6 records, 12,296 at 10^7), so without a cap the cost
#: per record grew with n. Fits whose tree has at most ``CORESET_CAP`` leaves are unchanged.
CORESET_CAP = 2048
CAP_MIN_DIMS = 3


def _pruned(released, cut):
    """The released tree with only the cells whose noisy count is at least ``cut`` split into
    their released children (post-processing): the other cells' descendants dropped, the
    parents' positions renumbered."""
    out, kept, expand = [], None, None
    for lv in released:
        if kept is None:
            keep, parent = np.ones(lv.counts.shape[0], dtype=bool), lv.parent
        else:
            keep = expand[lv.parent]
            parent = (np.cumsum(kept) - 1)[lv.parent[keep]]
        if not keep.any():
            break
        out.append(lv._replace(cells=lv.cells[keep], counts=lv.counts[keep], parent=parent))
        kept, expand = keep, keep & (lv.counts >= cut)
    return out


def capped_summary(grid, released, keep_rest: bool = False, cap: int | None = None):
    """:func:`leaf_summary` of the released tree, in at least ``CAP_MIN_DIMS`` dimensions with
    at most ``cap`` (None: ``CORESET_CAP``) leaves (post-processing of released counts: no
    record is read). When the whole tree has more, a cell is split into its released children
    only when its noisy count reaches a cut, the least noisy count of a split cell (or none)
    that leaves at most ``cap`` leaves: the heaviest cells keep their finest leaves, the others
    become leaves whole, their noisy counts kept. Returns ``(points, weights, spread2,
    notes)``, ``notes`` a list of the report's line on the cut (empty when the whole tree is
    kept)."""
    cap = CORESET_CAP if cap is None else cap
    points, weights, spread2 = leaf_summary(grid, released, keep_rest)
    if grid.d < CAP_MIN_DIMS or points.shape[0] <= cap or len(released) < 2:
        return points, weights, spread2, []
    splits = np.unique(np.concatenate([lv.counts for lv in released[:-1]]))
    lo, hi = 0, splits.size  # hi: no cell split (the first level's cells only)
    while lo < hi:  # the least cut with at most ``cap`` leaves (fewer leaves as it rises)
        mid = (lo + hi) // 2
        if leaf_summary(grid, _pruned(released, splits[mid]), keep_rest)[0].shape[0] <= cap:
            hi = mid
        else:
            lo = mid + 1
    cut = splits[lo] if lo < splits.size else np.inf
    tree = _pruned(released, cut)
    note = (f"coreset capped at {cap} points ({grid.d} dimensions): the tree's "
            f"{points.shape[0]} leaves cut to those of the cells split only at a noisy count "
            f"of at least {float(cut):g} ({len(tree)} levels)")
    return (*leaf_summary(grid, tree, keep_rest), [note])
