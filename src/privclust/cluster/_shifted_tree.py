"""The randomly shifted grid tree: one private multi-resolution histogram of the records.

HSTKMeans and EMMC grow it over the public bounds (the quadtree of Cohen-Addad et al.,
KDD 2022), DPCube and CoresetKMeans over a public random projection of them (the cube partition
of Balcan et al., ICML 2017), DPHDBSCAN reads its cluster tree off it. The grid over a public box
is shifted by a uniformly random public vector; its root cell (level 0) has side twice the box's
and holds the whole box; level by level every released cell is cut into its half-width
children (wide boxes halve their dimensions in blocks, one block per level), whose record
counts are released with the linear-time pure-DP sparse histogram. The universe of a level is
the children of the cells released at the level above, so the tree grows only below heavy
cells.

Privacy: each record lies in exactly one cell of a level, so one record changes one count of a
level by 1: each level's sparse histogram is ``eps_level``-DP, and the levels compose
sequentially (adaptively: a level's universe depends on earlier releases only). A level that
releases no cell is released once more with the budget of the levels below it (the retry item,
a privacy filter: every path spends the plan's total), then the tree stops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..privacy.histogram import release_sparse_histogram

__all__ = ["FALSE_POSITIVES_PER_PARENT", "MAX_SPLIT_DIMS", "RETRY_ITEM", "SIGNIFICANT_MARGIN",
           "CellWalk", "Level", "ShiftedGrid", "Wording", "grow", "hst_threshold",
           "leaf_summary", "level_keys", "lookup_rows", "release_level", "significance_floor"]

#: Expected number of false-positive (empty) cells the sparse histogram of a level releases
#: per released parent cell; it sets the pruning threshold (:func:`hst_threshold`).
FALSE_POSITIVES_PER_PARENT = 0.25
#: At most this many dimensions are halved together at one level (a cell has at most
#: ``2^MAX_SPLIT_DIMS`` children, so flat cell keys fit in 62 bits); wider boxes halve their
#: dimensions in blocks, one block per level.
MAX_SPLIT_DIMS = 40
#: A released cell counts as data only when its noisy count reaches the level's threshold by
#: this many noise scales (``1 / eps_level``): empty cells released by noise carry no weight.
SIGNIFICANT_MARGIN = 3.0
#: The line item that takes the budget of the levels a tree does not reach.
RETRY_ITEM = "cell counts, retry of the last level"


def hst_threshold(epsilon: float, n_children: int,
                  false_positives: float = FALSE_POSITIVES_PER_PARENT) -> int:
    """The integer pruning threshold of one level: the smallest ``t`` with
    ``n_children * e^(-eps t) / (1 + e^-eps) <= fp``.

    With two-sided geometric noise at ``epsilon`` an empty cell passes a threshold ``t`` with
    probability ``e^(-eps t) / (1 + e^-eps)``, so every released parent (``n_children`` possible
    children) lets through at most ``fp`` empty children in expectation, whatever the data: the
    tree stays O(number of heavy cells) and no record count is needed to set it.
    """
    q = math.exp(-epsilon)
    t = math.log(max(float(n_children), 1.0) / (false_positives * (1.0 + q))) / epsilon
    return max(1, math.ceil(t - 1e-12))


def significance_floor(epsilon: float, n_children: int) -> float:
    """The noisy count a released cell of a level at ``epsilon`` (``n_children`` children per
    parent) must reach to count as data: the level's threshold plus ``SIGNIFICANT_MARGIN``
    noise scales. Public values only."""
    return hst_threshold(epsilon, n_children) + SIGNIFICANT_MARGIN / epsilon


# --------------------------------------------------------------------------- cell keys
def _row_hash(rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash of every integer row (splitmix64 steps, one per column). Equality of
    rows is checked after the look-up, so a collision can only drop records, never mix cells."""
    h = np.full(rows.shape[0], 0x9E3779B97F4A7C15, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(rows.shape[1]):
            h ^= rows[:, j].astype(np.uint64)
            h += np.uint64(0x9E3779B97F4A7C15)
            h ^= h >> np.uint64(30)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(27)
            h *= np.uint64(0x94D049BB133111EB)
            h ^= h >> np.uint64(31)
    return h


def lookup_rows(table: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Position of every row of ``rows`` in ``table`` (distinct rows), -1 where absent."""
    if table.shape[0] == 0 or rows.shape[0] == 0:
        return np.full(rows.shape[0], -1, dtype=np.int64)
    th = _row_hash(table)
    order = np.argsort(th, kind="stable")
    sorted_h = th[order]
    rh = _row_hash(rows)
    pos = np.minimum(np.searchsorted(sorted_h, rh), sorted_h.size - 1)
    idx = order[pos]
    found = (sorted_h[pos] == rh) & (table[idx] == rows).all(axis=1)
    return np.where(found, idx, -1).astype(np.int64)


def level_keys(survivors: np.ndarray, cells: np.ndarray, blk: np.ndarray):
    """Flat keys, in the universe of one level, of the non-empty ``cells`` (from
    :meth:`~privclust.engine.Engine.cell_counts`): the universe is the ``2^b`` children
    (``b = blk.size``, the dimensions halved at this level) of every released cell of the level
    above (``survivors``, rows of integer cell indices); the key of a child is
    ``rank(parent) * 2^b + its half along each halved dimension``. Returns ``(keys, inside)``:
    ``inside`` marks the cells whose parent was released (the others are not in the universe
    and are not counted). A record lies in one cell, so it changes one key's count by 1."""
    parents = cells.copy()
    parents[:, blk] >>= 1
    rank = lookup_rows(survivors, parents)
    inside = rank >= 0
    bits = ((cells[inside][:, blk] & 1) << np.arange(blk.size, dtype=np.int64)).sum(axis=1)
    return rank[inside] * (1 << blk.size) + bits, inside


# --------------------------------------------------------------------------- the grid
class ShiftedGrid:
    """The public geometry of the tree over ``box`` ((d, 2)), shifted by ``shift`` ((d,)):
    the root cell (level 0) is ``[lo - shift, lo - shift + 2W)`` (``W`` the box's widths) and
    holds the whole box; level ``l`` halves the widths of the dimensions of its block
    (:meth:`block`; every dimension when ``d <= MAX_SPLIT_DIMS``), level 1 ``first`` times
    (a tree that starts below the coarsest levels). Cell ``c`` of level ``l`` is
    ``[origin + c w_l, origin + (c + 1) w_l)``."""

    def __init__(self, box: np.ndarray, shift: np.ndarray, first: int = 1):
        d = box.shape[0]
        self.box = box
        self.first = int(first)
        self.origin = box[:, 0] - shift
        self.root_width = 2.0 * (box[:, 1] - box[:, 0])
        n_blocks = math.ceil(d / MAX_SPLIT_DIMS)
        size = math.ceil(d / n_blocks)
        self.blocks = [np.arange(j, min(j + size, d)) for j in range(0, d, size)]
        if self.first > 1 and len(self.blocks) > 1:
            raise ValueError("a grid whose first level halves more than once needs at most "
                             f"{MAX_SPLIT_DIMS} dimensions")

    @property
    def d(self) -> int:
        return int(self.box.shape[0])

    def block(self, level: int) -> np.ndarray:
        """The dimensions halved at ``level`` (wide boxes halve theirs in blocks)."""
        return self.blocks[(level - 1) % len(self.blocks)]

    def steps(self, level: int) -> int:
        """How many times the dimensions of :meth:`block` are halved from ``level - 1`` to
        ``level``: ``first`` at level 1 (a coarse top skipped), 1 below."""
        return self.first if level == 1 else 1

    def halvings(self, level: int) -> np.ndarray:
        """How many times each dimension has been halved at ``level``."""
        if self.first > 1 and level >= 1:
            return np.full(self.d, int(level) + self.first - 1, dtype=np.int64)
        h = np.zeros(self.d, dtype=np.int64)
        full, rest = divmod(int(level), len(self.blocks))
        h += full
        for blk in self.blocks[:rest]:
            h[blk] += 1
        return h

    def width(self, level: int) -> np.ndarray:
        """The cells' widths at ``level``."""
        # exact powers of two: floor((x - o) / w_l) >> 1 == floor((x - o) / w_{l-1})
        return self.root_width / np.exp2(self.halvings(level))

    def extent(self, level: int, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corners of every cell's intersection with the box (public values
        only). A cell beside the box (the root's children reach past it; a noisy count can
        release one) meets it in a face: both corners are clamped into the box, so the
        intersection is never inverted and its centre never lies outside the box."""
        w = self.width(level)
        lo = np.clip(self.origin + cells * w, self.box[:, 0], self.box[:, 1])
        hi = np.clip(self.origin + (cells + 1) * w, self.box[:, 0], self.box[:, 1])
        return lo, hi

    def centres(self, level: int, cells: np.ndarray) -> np.ndarray:
        """Centre of every cell's intersection with the box (inside the box)."""
        lo, hi = self.extent(level, cells)
        return (lo + hi) / 2.0

    def spread2(self, level: int, cells: np.ndarray) -> np.ndarray:
        """Mean squared distance of a point uniform in each cell (its intersection with the
        box, :meth:`extent`) from the cell's centre: ``sum_j width_j^2 / 12``."""
        lo, hi = self.extent(level, cells)
        return ((hi - lo) ** 2).sum(axis=1) / 12.0

    def root_holds_the_box(self) -> bool:
        """Whether every record (clipped to the box; float32 storage may round a bound
        outward by half a float32 step) lies in the root cell: then the root's children are
        the level-1 cells of every record. A public check on the box and the shift; it fails
        only for a shift within ~1e-7 of the width."""
        lo, hi = self.box[:, 0], self.box[:, 1]
        pad = 2.0**-20 * np.maximum(np.abs(lo), np.abs(hi)) + 1e-300
        low = np.floor(np.subtract(lo - pad, self.origin) / self.root_width)
        high = np.floor(np.subtract(hi + pad, self.origin) / self.root_width)
        return bool((low == 0).all() and (high == 0).all())


# --------------------------------------------------------------------------- the exact cells
class CellWalk:
    """The exact non-empty cells of the tree's levels, one level at a time (the input of the
    levels' releases; never released themselves).

    With an engine that splits groups (:meth:`~privclust.engine.LocalEngine.split_cells`)
    every record keeps the index of its cell, and each level splits the cells of the level
    above along the level's block of dimensions: one pass over the block and one sort of
    integer keys per level. On an engine that keys cells where the records live
    (:meth:`~privclust.engine.dask.DaskEngine.split_keys`) every record keeps its cell's key
    instead and the level's cells stay there, in parts, read part by part by the release (a
    deep level in many dimensions holds about a cell per record). Otherwise each level asks
    for the grid's cell counts (:meth:`~privclust.engine.Engine.cell_counts`) and finds every
    cell's parent among the cells of the level above. All give the same cells and counts.
    ``keep``: how many of the latest levels :meth:`cells` can still answer for (then every
    cell of a level is kept, released below or not). ``ahead``: ``{level: (cells, counts)}``,
    levels already counted (:func:`~privclust.engine._level_cells.level_cells`: every level
    in one pass), read instead of the engine's.
    """

    def __init__(self, engine, grid: ShiftedGrid, keep: int = 0, ahead=None):
        self.engine, self.grid, self.keep = engine, grid, keep
        self.ahead = dict(ahead or {})
        self.split = not self.ahead and hasattr(engine, "split_cells") and \
            grid.root_holds_the_box() and grid.first == 1
        self.by_key = self.split and keep == 0 and hasattr(engine, "split_keys")
        self.groups = (engine.root_keys() if self.by_key else engine.root()) \
            if self.split else None
        self.rows = np.zeros((1, grid.d), dtype=np.int64)  # the root
        self.rank = np.zeros(1, dtype=np.int64)  # per cell of the level above: released rank
        self.released_keys = np.zeros(1, dtype=np.int64)  # the root, released (public)
        self.keys = None
        self.recent: dict = {}

    def next(self, level: int):
        """``(keys, counts)`` of the non-empty children of the cells released at the level
        above (:meth:`released`): each child's key in the level's universe, ``rank(parent) *
        2^b + bits`` (its parent's rank among the released cells, its halves along the
        level's block: bits ``i h`` to ``i h + h - 1`` for the block's ``i``-th dimension,
        ``h`` = :meth:`ShiftedGrid.steps`, ``b`` the block's size times ``h``) and its exact
        count; or ``(cells, None)``, a source of them in parts
        (:mod:`privclust.privacy._cell_parts`), read by the level's release."""
        grid = self.grid
        blk, width, h = grid.block(level), grid.width(level), grid.steps(level)
        if self.by_key:
            self.groups, cells = self.engine.split_keys(
                self.groups, self.released_keys, grid.origin, width, blk)
            return cells, None
        if self.split:
            released = self.rank >= 0 if self.keep == 0 and level > 1 else None
            self.groups, parent, bits, counts = self.engine.split_cells(
                self.groups, grid.origin, width, blk, released)
            state = self.groups
        else:
            cells, counts = self.ahead.pop(level) if level in self.ahead else \
                self.engine.cell_counts(grid.origin, width)
            up = cells.copy()
            up[:, blk] >>= h
            parent = lookup_rows(self.rows, up)
            low = cells[:, blk] & ((1 << h) - 1)
            bits = (low << (h * np.arange(blk.size, dtype=np.int64))).sum(axis=1)
            self.rows = state = cells
        self.recent[level] = (state, counts)
        self.recent.pop(level - self.keep, None)
        up = np.where(parent >= 0, self.rank[np.maximum(parent, 0)], -1)
        inside = up >= 0
        self.keys = np.where(inside, (up << (blk.size * h)) | bits, -1)
        return self.keys[inside], counts[inside]

    def released(self, keys: np.ndarray):
        """The level just walked released ``keys`` (sorted): the next level splits only them."""
        self.released_keys = keys
        if self.keys is not None:
            pos = np.minimum(np.searchsorted(keys, self.keys), max(keys.size - 1, 0))
            self.rank = np.where((self.keys >= 0) & (keys[pos] == self.keys), pos, -1) \
                if keys.size else np.full(self.keys.shape, -1, dtype=np.int64)

    def cells(self, level: int):
        """``(cells, counts)``: the integer indices and exact counts of the non-empty cells of
        a level among the latest ``keep`` walked."""
        state, counts = self.recent[level]
        if isinstance(state, np.ndarray):
            return state, counts
        return self.engine.group_cells(state, self.grid.origin, self.grid.width(level)), counts


# --------------------------------------------------------------------------- the releases
@dataclass(frozen=True)
class Wording:
    """How a tree's releases read in the privacy report: the ``noun`` of a cell, the ``where``
    of a level's release and of its retry (``{level}`` filled in), and the reason the budget
    moved to the retry."""

    noun: str = "cell"
    where: str = "level {level}"
    again: str = "level {level}"
    stopped: str = ("the tree stopped at level {level}: its cells are released again with the "
                    "budget of the levels below")


def release_level(mech, n_parents, b, keys, counts, epsilon, where, item, noun="cell"):
    """One level's sparse histogram over the ``2^b`` children of ``n_parents`` released cells
    (threshold :func:`hst_threshold`). Returns the released keys (sorted) and noisy counts."""
    n_cells = n_parents * (1 << b)
    t = hst_threshold(epsilon, 1 << b)
    return release_sparse_histogram(
        mech, keys, counts, n_cells, epsilon, t,
        target=f"{noun} counts >= {t}, {where} ({n_cells} {noun}s: the children of "
               f"{n_parents} released {noun}s)",
        note=f"each record lies in one {noun} of the level: sensitivity 1", item=item,
    )


class Level(NamedTuple):
    """One released level: the cells (integer indices, (m, d)), their noisy counts, the
    position of each cell's parent among the released cells of the level above, the
    :func:`significance_floor` of the release (its epsilon and number of children), the
    level and the release's epsilon."""

    cells: np.ndarray
    counts: np.ndarray
    parent: np.ndarray
    floor: float
    level: int
    epsilon: float = 0.0


def grow(engine, mech, grid, items, retry, step, *, budgets=None, wording=Wording(),
         walk=None, leave_unneeded_retry=False, stop=None) -> list[Level]:
    """Release the tree level by level, ``items[l]`` at its line item's epsilon (read when the
    level is released: budget may have moved to it). A level that releases no cell is released
    once more with the budget of every level below it (the ``retry`` item); then the tree
    stops. ``budgets``: the epsilon of every level, when the caller holds them (they are its
    line items'). ``walk``: the :class:`CellWalk` to read the levels from (a new one by default).
    ``leave_unneeded_retry``: a tree that releases nothing at its first level, with no level
    below to retry with, states the unused retry item in the report. ``stop(level, noisy
    counts, epsilon, children per cell)``: called on every level released with levels below
    it; when it returns a reason (decided from the release alone), that level is released
    again with the budget of the levels below, as a level without cells is, and the tree
    stops there. Returns the
    :class:`Level` of every level released (a level released twice: its second release)."""
    plan = mech.plan
    walk = CellWalk(engine, grid) if walk is None else walk
    survivors = np.zeros((1, grid.d), dtype=np.int64)  # the root: public, holds every record
    out: list[Level] = []
    level = 0
    while level < len(items):
        level += 1
        at, blk, h = level, grid.block(level), grid.steps(level)
        b = blk.size * h  # bits of a child's place in its parent
        # every child of a released cell, keyed in the level's universe (level_keys)
        keys, counts = walk.next(level)
        args = (mech, survivors.shape[0], b, keys, counts)
        eps = plan.item(items[level - 1]).epsilon if budgets is None else budgets[level - 1]
        rkeys, rvals = release_level(*args, eps, wording.where.format(level=level),
                                     items[level - 1], wording.noun)
        step()
        reason = None
        if level < len(items):
            if rkeys.size == 0:
                reason = wording.stopped.format(level=level)
            elif stop is not None:
                reason = stop(level, rvals, eps, 1 << b)
        if reason:
            eps = plan.move_unspent(items[level:], retry, reason)
            rkeys, rvals = release_level(*args, eps, wording.again.format(level=level), retry,
                                         wording.noun)
            level = len(items)
        if rkeys.size == 0:
            break
        children = survivors[rkeys >> b].copy()
        child_bits = (rkeys[:, None] >> (h * np.arange(blk.size, dtype=np.int64))) & (
            (1 << h) - 1)
        children[:, blk] = (children[:, blk] << h) + child_bits
        out.append(Level(children, np.asarray(rvals, dtype=np.int64), rkeys >> b,
                         significance_floor(eps, 1 << b), at, eps))
        survivors = children
        walk.released(rkeys)
        if level < len(items) and \
                survivors.shape[0] * (1 << grid.block(level + 1).size) >= 2**62:  # steps 1
            plan.move_unspent(items[level:], retry, "flat cell keys would overflow")
            plan.leave_unspent(retry, "the tree is too wide to grow further")
            break
    if leave_unneeded_retry and not out and not plan.item(retry).spent_epsilon:
        plan.leave_unspent(retry, "not needed")
    return out


# --------------------------------------------------------------------------- post-processing
def leaf_summary(grid, released, keep_rest: bool = False):
    """The weighted leaves of the tree (post-processing of the released counts): the released
    cells without released children, at their centres, with their spread
    (:meth:`ShiftedGrid.spread2`). Top-down, a cell's noisy count less those of its released
    children (records in children below the threshold) is shared among those children in
    proportion to their noisy counts, so the whole weight ends on leaves near the data. With
    ``keep_rest``, a cell whose rest reaches the children's significance floor keeps it as a
    leaf of its own instead: a cluster spread over children that each fall below the threshold
    stays in the summary, rather than lending its weight to a sibling cluster's leaf. A cell
    counts only when its noisy count reaches its release's ``floor``. Returns
    ``(points, weights, spread2)``."""
    pts, wts, spr = [], [], []
    extra = np.zeros(released[0][0].shape[0]) if released else None
    for i, (cells, counts, _, floor, level) in enumerate(lv[:5] for lv in released):
        total = np.where(counts >= floor, counts, 0.0) + extra
        w = total
        if i + 1 < len(released):
            _, child_counts, parent, child_floor, _ = released[i + 1][:5]
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
    if not pts:
        return np.zeros((0, grid.d)), np.zeros(0), np.zeros(0)
    return np.concatenate(pts), np.concatenate(wts), np.concatenate(spr)
