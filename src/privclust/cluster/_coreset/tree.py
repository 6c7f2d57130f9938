"""The private tree of :class:`~privclust.cluster.coreset.CoresetKMeans` and its weighted
summary.

The tree is a randomly shifted grid over a public box (HST, Cohen-Addad et al. KDD 2022; the
cube partition of DPCube, Balcan et al. ICML 2017), in the original coordinates or, for wide
data, in a public random projection of them. Level by level every released cell is cut into its
``2^p`` half-width children, whose record counts are released with the linear-time pure-DP
sparse histogram; a level's budget grows with its depth (deep cells hold fewer records, so
their counts need more of it). The summary keeps the released leaves, each at its centre with
its noisy count and the spread of a record over its cell: a weighted coreset of released values
only, which every later step post-processes.
"""

from __future__ import annotations

import math

import numpy as np

from ..._geometry import project_rows
from ...privacy.rng import public_unit_directions
from ..dpcube import _Grid as _ShiftedGrid
from ..hst import _release_level as _release
from ..hst import hst_threshold, level_keys

__all__ = ["Grid", "Space", "depth_for_k", "grow", "leaf_capacity", "leaf_summary",
           "level_budgets"]

#: A released cell counts as data only when its noisy count reaches the level's threshold by
#: this many noise scales (``1 / eps_level``): empty cells released by noise carry no weight.
SIGNIFICANT_MARGIN = 3.0


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
            half = (bounds[:, 1] - bounds[:, 0]) / 2.0
            self.G = math.sqrt(d / p) * public_unit_directions(generator, (p, d))
            reach = np.abs(self.G) @ half * (1.0 + 1e-9) + 1e-12
            self.box = np.column_stack([-reach, reach])
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


class Grid(_ShiftedGrid):
    """DPCube's randomly shifted grid over ``box`` (the root cell, level 0, has side ``2W`` and
    holds the whole box; level ``l`` halves every side ``l`` times), with the spread of a
    record over its cell."""

    def spread2(self, level: int, cells: np.ndarray) -> np.ndarray:
        """Mean squared distance of a point uniform in each cell (its intersection with the
        box, :meth:`extent`) from the cell's centre: ``sum_j width_j^2 / 12``."""
        lo, hi = self.extent(level, cells)
        return ((hi - lo) ** 2).sum(axis=1) / 12.0


def level_budgets(epsilon: float, depth: int, growth: float) -> list[float]:
    """``epsilon`` split over ``depth`` levels in proportion to ``growth^level``; the last
    level takes the rounding, so the parts add up to ``epsilon`` exactly."""
    raw = np.power(float(growth), np.arange(1, depth + 1))
    parts = [float(v) for v in epsilon * raw / raw.sum()]
    parts[-1] = epsilon - math.fsum(parts[:-1])
    return parts


def significance_floor(eps_level: float, p: int) -> float:
    """The noisy count a released cell of a level at ``eps_level`` (``2^p`` children per
    parent) must reach to count as data: the level's threshold plus ``SIGNIFICANT_MARGIN``
    noise scales. Public values only."""
    return hst_threshold(eps_level, 1 << p) + SIGNIFICANT_MARGIN / eps_level


def leaf_capacity(n_hat: float, epsilon: float, depth: int, p: int) -> float:
    """The most leaves a tree of ``depth`` levels sharing ``epsilon`` equally can hold
    significant counts in: ``n_hat`` over the last level's :func:`significance_floor`.
    Public values only."""
    return n_hat / significance_floor(epsilon / depth, p)


def depth_for_k(k: int, n_hat: float, epsilon: float, p: int, depth: int,
                leaves_per_cluster: float, min_depth: int) -> int:
    """The deepest tree, at most ``depth`` levels and at least ``min_depth``, whose
    :func:`leaf_capacity` reaches ``leaves_per_cluster`` leaves per cluster: fewer levels,
    more budget each, lower floors. Public values only (``n_hat`` is released)."""
    for levels in range(depth, min_depth, -1):
        if leaf_capacity(n_hat, epsilon, levels, p) >= leaves_per_cluster * k:
            return levels
    return min(depth, min_depth)


def grow(engine, mech, grid, items, budgets, retry, step):
    """Release the tree level by level (``items[l]`` spends ``budgets[l]``). A level that
    releases nothing is released once more with the budget of the levels below (``retry``, a
    privacy filter: every path spends the plan's total), then the tree stops. Returns, per
    level reached, ``(cells, noisy counts, parent positions, significance floor, level)``."""
    p = grid.box.shape[0]
    blk = np.arange(p)
    survivors = np.zeros((1, p), dtype=np.int64)  # the root: public, holds every record
    out = []
    level = 0
    while level < len(items):
        level += 1
        cells, counts = engine.cell_counts(grid.origin, grid.width(level))
        keys, inside = level_keys(survivors, cells, blk)
        args = (mech, survivors.shape[0], p, keys, counts[inside])
        eps = budgets[level - 1]
        rkeys, rvals = _release(*args, eps, level, items[level - 1])
        step()
        at = level  # the level released (a retry releases it again, then the tree stops)
        if rkeys.size == 0 and level < len(items):
            eps = mech.plan.move_unspent(items[level:], retry, f"the tree stopped at level "
                                         f"{level}: released again with the budget of the "
                                         "levels below")
            rkeys, rvals = _release(*args, eps, level, retry)
            level = len(items)
        if rkeys.size == 0:
            break
        parent = rkeys >> p
        children = 2 * survivors[parent] + ((rkeys[:, None] >> blk) & 1)
        floor = significance_floor(eps, p)
        out.append((children, np.asarray(rvals, dtype=np.int64), parent, floor, at))
        survivors = children
        if level < len(items) and survivors.shape[0] * (1 << p) >= 2**62:
            mech.plan.move_unspent(items[level:], retry, "flat cell keys would overflow")
            mech.plan.leave_unspent(retry, "the tree is too wide to grow further")
            return out
    return out


def leaf_summary(grid, released, keep_rest: bool = False):
    """The weighted coreset (post-processing of the released counts): the released cells
    without released children, at their centres, with their spread (:meth:`Grid.spread2`).
    Top-down, a cell's noisy count less those of its released children (records in children
    below the threshold) is shared among those children in proportion to their noisy counts,
    so the whole weight ends on leaves near the data. With ``keep_rest``, a cell whose rest
    reaches the children's significance floor keeps it as a leaf of its own instead: a
    cluster spread over children that each fall below the threshold stays in the coreset,
    rather than lending its weight to a sibling cluster's leaf. A cell counts only when its
    noisy count reaches its level's significance floor. Returns ``(points, weights,
    spread2)``."""
    pts, wts, spr = [], [], []
    extra = np.zeros(released[0][0].shape[0]) if released else None
    for i, (cells, counts, _, floor, level) in enumerate(released):
        total = np.where(counts >= floor, counts, 0.0) + extra
        w = total
        if i + 1 < len(released):
            _, child_counts, parent, child_floor, _ = released[i + 1]
            child = np.where(child_counts >= child_floor, child_counts, 0.0)
            below = np.bincount(parent, weights=child, minlength=cells.shape[0])
            rest = total - below
            own = (below > 0) & (rest >= child_floor) if keep_rest else np.zeros(below.shape, bool)
            share = np.where(own, 0.0, np.maximum(rest, 0.0)) / np.maximum(below, 1e-12)
            extra = child * share[parent]
            w = np.where(below > 0, np.where(own, rest, 0.0), total)
        keep = w > 0
        pts.append(grid.centres(level, cells[keep]))
        wts.append(w[keep])
        spr.append(grid.spread2(level, cells[keep]))
    p = grid.box.shape[0]
    if not pts:
        return np.zeros((0, p)), np.zeros(0), np.zeros(0)
    return np.concatenate(pts), np.concatenate(wts), np.concatenate(spr)
