"""DPHDBSCAN: density clusters without a radius, read off one private shifted grid tree.

The randomly shifted grid tree that HSTKMeans, DPCube and CoresetKMeans grow releases, level by
level, the noisy record counts of ever finer cells: a private multi-resolution density estimate.
HDBSCAN's idea (Campello, Moulavi, Sander, PAKDD 2013; Campello et al., TKDD 2015) applies to it
directly: at every level the dense released cells form connected components, across levels the
components form a cluster tree, and the clusters kept are those of greatest stability (excess
of mass). Everything after the tree is post-processing of its released counts.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .._progress import fit_progress
from ..privacy import Mechanisms, resolve_random_state
from ._base import (
    PrivateClusterMixin,
    check_epsilon,
    check_fit_cost,
    check_positive_int,
    clip_to_fitted_bounds,
    is_dask_input,
    raise_not_fitted,
)
from ._density_grid import (
    COARSE_BITS,
    COARSE_SHARE,
    COUNT_SHARE,
    DENSE_SCALES,
    GRID_MAX_DIMS,
    finest_grid,
    grid_levels,
    noise_sd,
    occupied_share,
    release_grid,
    square_box,
)
from ._density_tree import (
    build_cluster_tree,
    dense_levels,
    labels_from_cells,
    labels_from_grid,
    refine_tree,
    spread_labels,
)
from ._shifted_tree import (
    MAX_SPLIT_DIMS,
    RETRY_ITEM,
    ShiftedGrid,
    grow,
    hst_threshold,
)

__all__ = ["DPHDBSCAN"]

#: Levels planned (per block of at most ``MAX_SPLIT_DIMS`` features) when ``max_depth=None``;
#: the tree stops where its released counts say it resolves little more (:class:`_StopRule`).
MAX_LEVELS = 6
#: The first level halves every dimension so that it has at most ``2^FIRST_BITS`` cells
#: (:func:`first_halvings`): the coarse top of the tree is skipped.
FIRST_BITS = 8
#: ``max_depth=None``: the tree stops at the first level whose cells at least ``STOP_MARGIN``
#: noise scales above the level's threshold hold less than ``STOP_SHARE`` of the first level's
#: records; that level is released again with the budget of the levels below.
STOP_SHARE = 0.5
STOP_MARGIN = 1.0
#: ``min_cluster_size=None``: ``MIN_FLOORS`` times the deepest level's significance floor, and
#: at least ``MIN_SHARE`` of the released record count.
MIN_FLOORS = 2.0
MIN_SHARE = 0.005
#: A released cell is dense when its noisy count plus its released neighbours' (the cells
#: touching it) reaches ``DENSE_FACTOR`` times the level's threshold.
DENSE_FACTOR = 3.0
#: The grid release: a dense cell outside the kept clusters takes the nearest kept cell's
#: cluster only when kept cells of its component lie at most this many levels below (the
#: border of a cluster); farther from the clusters, records are noise.
SPREAD_REACH = 1
#: ... and only when its centre lies at most this many of its own widths from the nearest kept
#: cell's centre (a cell touching the cluster); farther cells of the component the clusters
#: split from (the background between them) stay noise.
SPREAD_NEAR = 1.25
#: The grid release: when its levels never split into two clusters, the finest level's
#: cells are read again at up to this many higher thresholds (each ``2^(d/4)`` times the one
#: above: :func:`~privclust.cluster._density_grid.grid_levels`' ``extra``).
EXTRA_ENTRIES = 8
#: ``predict`` looks cells up in a table per level when the finest level's grid over the root
#: has at most this many cells (a record's cell at every level from its finest cell's index).
DENSE_LOOKUP_CELLS = 1 << 24
#: The grid release's line items (up to ``GRID_MAX_DIMS`` features).
COUNT_ITEM = "record count n"
COARSE_ITEM = "cell counts, coarse level"
GRID_ITEM = "cell counts, finest level"


def first_halvings(d: int) -> int:
    """How many times the first level halves every dimension: the coarse top of the tree,
    one component on any data, is skipped, and the first level has at most
    ``2^FIRST_BITS`` cells (public: ``d`` only)."""
    if d > MAX_SPLIT_DIMS:
        return 1
    return max(1, FIRST_BITS // d)


class _StopRule:
    """``max_depth=None``: stop the tree at the first level whose cells at least
    ``STOP_MARGIN`` noise scales above the threshold hold less than ``STOP_SHARE`` of the
    first level's records (released values only: the first level's mass is the released
    record count ``n_hat``)."""

    def __init__(self):
        self.n_hat = None

    def __call__(self, level, counts, epsilon, n_children):
        floor = hst_threshold(epsilon, n_children) + STOP_MARGIN / epsilon
        mass = float(counts[counts >= floor].sum())
        if self.n_hat is None:
            self.n_hat = float(counts.sum())
        if mass >= STOP_SHARE * self.n_hat:
            return None
        return (f"level {level}: its significant cells hold {mass:g} of the {self.n_hat:g} "
                "records of level 1; it is released again with the budget of the levels below "
                "and the tree stops there")


def default_min_cluster_size(n_hat: float, floor: float) -> float:
    """``min_cluster_size=None``: what the budget can resolve, ``MIN_FLOORS`` times the
    deepest level's significance floor (a component lighter than that is one noisy cell),
    and at least ``MIN_SHARE`` of the released record count."""
    return max(MIN_FLOORS * floor, MIN_SHARE * max(n_hat, 0.0))


class DPHDBSCAN(PrivateClusterMixin):
    """Density clusters without a radius: HDBSCAN's cluster tree on one private density grid.

    1. **The release.** Up to ``GRID_MAX_DIMS`` features (:mod:`privclust.cluster.
       _density_grid`): a noisy record count (``COUNT_SHARE`` of epsilon), the counts of a
       coarse grid of at most ``2^COARSE_BITS`` cells (``COARSE_SHARE``; they say what share
       of the box the records occupy), then the counts of **one** fine grid with the rest of
       the budget. The box is square over the bounds (every cell as wide in every feature:
       HDBSCAN's Euclidean distances), and the fine cells are as wide as the released count
       and occupied share say the budget resolves (about ``RECORDS_PER_CELL`` noise scales of
       records per occupied cell; the width is not rounded to a power of two of the box: the
       box grows to ``2^level`` such cells). Both grids are dense histograms: two-sided
       geometric noise on every cell, empty ones included. Every coarser level of the
       hierarchy (2, 4, 8, ... cells per feature) is the sum of the fine level's released
       counts (post-processing): the whole hierarchy for the price of one level. Above
       ``GRID_MAX_DIMS`` features, the shifted grid tree (:mod:`privclust.cluster.
       _shifted_tree`, shared with HSTKMeans, DPCube and CoresetKMeans) releases level by
       level with the linear-time sparse histogram, its first level halving every dimension
       ``first_halvings(d)`` times, stopped (``max_depth=None``) at the first level whose
       significant cells hold less than half the first level's records, that level then
       released again with the budget of the levels below.
    2. **The cluster tree** (post-processing): at every level the dense cells form connected
       components (cells adjacent in the grid, diagonal neighbours included); a component's
       cells have their parents in one component of the level above, so the components form a
       tree. A cell is dense when its noisy count plus its neighbours' reaches a threshold set
       by the noise alone (the grid: ``DENSE_SCALES`` standard deviations of that sum's noise;
       the tree: ``DENSE_FACTOR`` times the level's threshold) and its parent is dense. The
       grid, when its levels never split into two clusters: the finest level's cells again at
       up to ``EXTRA_ENTRIES`` higher thresholds (each a quarter level's step in ``lambda``);
       when they do, each kept cluster born at the finest level is read at those thresholds on
       its own (:meth:`_refine_finest`).
    3. **The clusters** (post-processing): condensed as HDBSCAN condenses its tree, with
       ``min_cluster_size`` in records (noisy mass): a cluster goes on down the levels while
       at most one child component is that heavy; where two or more are, each becomes a
       cluster. The clusters kept are those of greatest stability (excess of mass): the mass a
       cluster holds at each of its levels times the step in ``lambda = 1 / cell width`` to
       the next level; the cluster at the top (the whole data) is never kept. The grid: a
       split is taken only when its children's summed stability beats the parent's by more
       than ``SPLIT_MARGIN`` standard deviations of the noise on the difference (stability is
       a sum of released counts: its noise scale is public).
    4. **Labels** (post-processing): every dense cell takes its kept cluster, or, in a
       component the kept clusters split from, the nearest kept cell's (the grid: only where
       kept cells lie at most ``SPREAD_REACH`` levels below and the cell's centre at most
       ``SPREAD_NEAR`` of its widths from the nearest kept cell's, a cluster's border); a record
       takes the label of its cell at the finest level where it is dense and labelled; -1
       (noise) otherwise. ``predict`` does the same for new records.

    How it differs from HDBSCAN: the density levels are the grid's resolutions (cell widths
    halving level by level) rather than every mutual-reachability distance; a record's density
    is its cell's neighbourhood's noisy count rather than its ``min_samples``-th neighbour's
    distance; the masses are noisy counts; records of a cluster's border cells go to the
    nearest kept cluster rather than to noise; there is no ``min_samples`` (the noise
    threshold plays its part), and no radius.

    Privacy guarantee
    -----------------
    ``epsilon``-DP (pure) under add/remove-one-record neighbours; the releases compose
    sequentially (basic composition, adaptively: each depends on earlier releases only).
    **Grid** (up to ``GRID_MAX_DIMS`` features): the record count (sensitivity 1) and two
    dense histograms (each record lies in exactly one cell of a grid: sensitivity 1), two-sided
    geometric noise on every cell, ``epsilon = eps_count + eps_coarse + eps_fine``; the fine
    grid's resolution depends on the first two releases only; exact integers, so no Real-RAM
    caveat. **Tree** (more features): each level counts every record in exactly one cell, so
    each level's sparse histogram is ``eps_level``-DP and ``epsilon = sum of eps_level``; a
    level that releases no cell, or (``max_depth=None``) whose released counts say the tree
    resolves no further, is released once more with the budget of the levels below (a
    privacy filter: every path spends exactly ``epsilon``); the shift is public randomness;
    the sparse histogram is pure DP in the Real-RAM model (its tail sampling uses
    floating-point draws). Either way records are clipped to the public ``bounds``
    (``bounds="private"``: a private estimate first, with 10% of epsilon), and the coarser
    levels, the cluster tree, the clusters, the labels and ``predict`` read the released
    counts and public geometry only.

    Parameters
    ----------
    epsilon : float
        Privacy budget (> 0).
    bounds : tuple, array or "private"
        Public bounds, ``(lo, hi)`` for every feature or a ``(d, 2)`` array; or ``"private"``.
    min_cluster_size : float or None
        The fewest records (noisy mass) a cluster holds. None: what the budget can resolve
        (:func:`default_min_cluster_size`, from the released record count).
    max_depth : int or None
        The grid: the finest level's halvings of every feature at most (``2^max_depth``
        cells per feature). The tree: levels below its first halvings. None: the grid as fine
        as the budget resolves; the tree at most ``MAX_LEVELS`` levels, stopped where the
        released counts say it resolves no further (:class:`_StopRule`).
    random_state : None, int or Generator
        None (secure), int or Generator (reproducible, not secure).
    accountant : Accountant or None
        A shared :class:`~privclust.Accountant` (checked before any data is read).

    Attributes
    ----------
    ``labels_`` : ndarray (n,)
        Cluster of every training record, -1 for noise (post-processing of the private model
        applied to X, not a release).
    ``n_clusters_`` : int
        Clusters kept.
    ``cluster_persistence_`` : ndarray, one per kept cluster
        Each kept cluster's stability over the largest (in [0, 1]).
    ``cluster_stability_`` : ndarray, one per kept cluster
        Each kept cluster's excess of mass (records times ``1 / cell width`` of the root).
    ``min_cluster_size_`` : float
        The ``min_cluster_size`` used.
    ``n_hat_`` : int
        The released record count (the grid), or the records the first level's released
        counts hold (the tree).
    ``tree_cells_``, ``tree_counts_``, ``tree_labels_`` : lists of ndarray
        Per level, the dense released cells (integer indices), their noisy counts and their
        cluster (-1: in none).
    ``tree_levels_`` : ndarray
        The level of each entry of those lists.
    ``grid_origin_``, ``root_width_`` : ndarray (d,); ``first_halvings_`` : int
        The public grid: cell ``c`` of level ``l`` is ``origin + [c, c + 1) w_l``,
        ``w_l = root_width / 2^(first_halvings + l - 1)`` (the grid release: the bounds,
        unshifted, widened by ``PAD``, ``first_halvings`` 2).
    ``privacy_report_`` : PrivacyReport
        Every release, its mechanism and epsilon.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from privclust import DPHDBSCAN
    >>> X, _ = make_moons(20000, noise=0.06, random_state=0)
    >>> model = DPHDBSCAN(epsilon=1.0, bounds=(-1.5, 2.5), random_state=0).fit(X)
    >>> model.n_clusters_
    2
    """

    def __init__(self, *, epsilon=1.0, bounds=None, min_cluster_size=None, max_depth=None,
                 random_state=None, accountant=None):
        self.epsilon = epsilon
        self.bounds = bounds
        self.min_cluster_size = min_cluster_size
        self.max_depth = max_depth
        self.random_state = random_state
        self.accountant = accountant

    def _check_params(self):
        eps = check_epsilon(self.epsilon)
        mcs = self.min_cluster_size
        if mcs is not None and (isinstance(mcs, bool) or not isinstance(mcs, numbers.Real)
                                or not (1 <= mcs < math.inf)):
            raise ValueError(f"min_cluster_size must be a number >= 1 or None, got {mcs!r}")
        depth = None if self.max_depth is None else check_positive_int(
            self.max_depth, "max_depth", upper=30)
        return eps, None if mcs is None else float(mcs), depth

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None):
        """Cluster X privately. ``y`` is ignored (present for scikit-learn compatibility)."""
        eps, mcs, depth = self._check_params()
        plan, accountant = self._open_plan(eps, 0.0)  # checked before any data is read
        X = self._check_X(X, reset=True)
        d = X.shape[1]
        planned = depth or MAX_LEVELS * math.ceil(d / MAX_SPLIT_DIMS)
        # about 6e-8 s per record, feature and level (cell keys and labels)
        check_fit_cost(6e-8 * d * planned, f"DPHDBSCAN(max_depth={planned}) on {d} features",
                       "lower max_depth")
        bounds = self._fit_bounds(X)
        source = resolve_random_state(self.random_state)
        if d <= GRID_MAX_DIMS:
            grid, released, n_hat, notes, report = self._fit_grid(
                X, bounds, source, plan, accountant, depth)
            self._post_process_grid(grid, released, n_hat, mcs)
            notes += self._extra_note
            self.shift_ = np.zeros(d)
        else:
            grid, released, n_hat, notes, report = self._fit_tree(
                X, bounds, source, plan, accountant, planned)
            self._post_process(grid, released, n_hat, mcs)
            self.shift_ = grid.box[:, 0] - grid.origin
        report.notes += notes + [
            f"cluster tree: {self.n_clusters_} clusters kept by excess of mass, "
            f"min_cluster_size {self.min_cluster_size_:g} (post-processing)",
            "labels_ are the private model applied to X (post-processing, not a release)",
        ]
        self.n_features_in_ = d
        self.bounds_ = bounds
        self.n_hat_ = int(round(n_hat))
        self.privacy_report_ = report
        self._close_plan(plan, report, accountant)
        self.labels_ = self._labels_of(X)
        if self.n_clusters_ == 0:
            warnings.warn("DPHDBSCAN found no cluster: no two components of the private tree "
                          f"held min_cluster_size ({self.min_cluster_size_:g}) records each; "
                          "a larger epsilon or a smaller min_cluster_size resolves more",
                          UserWarning, stacklevel=2)
        return self

    def _fit_grid(self, X, bounds, source, plan, accountant, depth):
        """Up to ``GRID_MAX_DIMS`` features: a noisy record count, then one dense histogram of
        the finest grid it sets (:mod:`privclust.cluster._density_grid`); the coarser levels
        are sums of that release."""
        eps_n, eps_c = COUNT_SHARE * plan.epsilon, COARSE_SHARE * plan.epsilon
        plan.add(COUNT_ITEM, "two-sided geometric", "pure", eps_n)
        plan.add(COARSE_ITEM, "geometric dense histogram", "pure", eps_c)
        plan.add(GRID_ITEM, "geometric dense histogram", "pure", plan.epsilon - eps_n - eps_c)
        self._reserve_plan(plan, accountant, "DPHDBSCAN")
        engine = self._make_engine(X, bounds)
        report = self._start_report(plan.reserved(), source)
        mech = Mechanisms(source, report, plan)
        eps_hist = plan.item(GRID_ITEM).epsilon
        with fit_progress("DPHDBSCAN", 3) as step:
            n_hat = float(mech.count(
                [int(engine.count(engine.root())[0])], eps_n,
                target="record count n (sets the finest grid)",
                note="noisy n, never the exact n", item=COUNT_ITEM)[0])
            step()
            # public geometry: a square box over the bounds (widened by PAD), 2^level cells
            # per dimension at level l (first_halvings 2)
            box = square_box(bounds)
            grid = ShiftedGrid(box, np.zeros(X.shape[1]), 2)
            coarse = max(1, COARSE_BITS // X.shape[1])
            share = occupied_share(release_grid(engine, mech, grid.origin, grid.width(coarse),
                                                coarse, eps_c, COARSE_ITEM), eps_c)
            # the finest cells' width from the released count and share (not a power of two
            # of the box): the box grows to 2^level such cells
            level, fine_box = finest_grid(n_hat, eps_hist, box, share)
            if depth is not None and level > depth:
                level, fine_box = max(1, depth), box
            grid = ShiftedGrid(fine_box, np.zeros(X.shape[1]), 2)
            noisy = release_grid(engine, mech, grid.origin, grid.width(level), level, eps_hist,
                                 GRID_ITEM)
            step()
        released = grid_levels(noisy, level, eps_hist)
        self._grid_release = (noisy, level, eps_hist)
        self._grid_sd = noise_sd(eps_hist)
        notes = [f"grid: one dense histogram of the finest level {level} "
                 f"({1 << level} cells per feature); levels 1 to {level - 1} are sums of its "
                 f"released counts (post-processing); {len(released)} levels with dense cells"]
        return grid, released, n_hat, notes, report

    def _fit_tree(self, X, bounds, source, plan, accountant, planned):
        """Above ``GRID_MAX_DIMS`` features: the shifted grid tree, level by level."""
        d = X.shape[1]
        shift = source.generator.uniform(0.0, 1.0, size=d) * (bounds[:, 1] - bounds[:, 0])
        grid = ShiftedGrid(bounds, shift, first_halvings(d))  # public randomness
        levels = [f"cell counts, level {lv}" for lv in range(1, planned + 1)]
        for name in levels:
            plan.add(name, "geometric sparse histogram", "pure", plan.epsilon / planned)
        plan.add(RETRY_ITEM, "geometric sparse histogram", "pure", 0.0)
        self._reserve_plan(plan, accountant, "DPHDBSCAN")

        engine = self._make_engine(X, bounds)
        report = self._start_report(plan.reserved(), source)
        mech = Mechanisms(source, report, plan)
        with fit_progress("DPHDBSCAN", planned) as step:
            rule = _StopRule()
            released = grow(engine, mech, grid, levels, RETRY_ITEM, step,
                            stop=rule if self.max_depth is None else None)
        n_hat = rule.n_hat if rule.n_hat is not None else (
            float(released[0].counts.sum()) if released else 0.0)
        notes = [f"tree: shifted grid, {planned} levels planned, {len(released)} released"]
        return grid, released, n_hat, notes, report

    def _post_process(self, grid, released, n_hat, mcs):
        """The cluster tree, the clusters kept and the model's tables (released values and
        public geometry only)."""
        dense = dense_levels(released, DENSE_FACTOR)
        if mcs is None:
            mcs = default_min_cluster_size(n_hat, released[-1].floor if released else 1.0)
        self._reach = None
        self._near = None
        self._tables(grid, dense, mcs)

    def _post_process_grid(self, grid, dense, n_hat, mcs):
        """The grid release's cluster tree: its levels' dense cells are given
        (:func:`~privclust.cluster._density_grid.grid_levels`); the default
        ``min_cluster_size`` takes a finest cell's noise scale as its floor."""
        if mcs is None:
            mcs = default_min_cluster_size(n_hat, DENSE_SCALES * self._grid_sd)
        self._reach = SPREAD_REACH
        self._near = SPREAD_NEAR
        self._extra_note = []
        base = build_cluster_tree(dense, mcs, self._lambdas(grid, dense, 0.5)) if dense else None
        tree = None
        if dense and not base.selected.any():
            # no split up to the finest level's threshold: read the densities above it off
            # the same counts (higher thresholds on the finest cells)
            noisy, level, eps_hist = self._grid_release
            dense = grid_levels(noisy, level, eps_hist, extra=EXTRA_ENTRIES)
            self._extra_note = [f"no split up to the finest level's threshold: its cells read "
                                f"again at up to {EXTRA_ENTRIES} higher thresholds "
                                "(post-processing)"]
        elif dense:
            dense, tree = self._refine_finest(grid, dense, base, mcs)
        self._tables(grid, dense, mcs, power=0.5, tree=tree)

    def _refine_finest(self, grid, dense, base, mcs):
        """Kept clusters born at the finest level (the levels split them no further) are read
        again at up to ``EXTRA_ENTRIES`` higher thresholds on the finest cells, each replaced
        by what excess of mass keeps in its own subtree there
        (:func:`~privclust.cluster._density_tree.refine_tree`); the other kept clusters stay.
        Returns the entries and the tree (None: unchanged). Post-processing."""
        roots = np.flatnonzero(base.selected & (base.birth == dense[-1].level))
        if roots.size == 0:
            return dense, None
        noisy, level, eps_hist = self._grid_release
        finer = grid_levels(noisy, level, eps_hist, extra=EXTRA_ENTRIES)
        if len(finer) == len(dense):
            return dense, None
        tree = refine_tree(base, build_cluster_tree(finer, mcs, self._lambdas(grid, finer, 0.5)),
                           roots)
        split = int(tree.selected.sum()) - int(base.selected.sum())
        if split:
            self._extra_note = [f"clusters born at the finest level read again at up to "
                                f"{EXTRA_ENTRIES} higher thresholds on its cells: {split} more "
                                "kept (post-processing)"]
        return finer, tree

    def _tables(self, grid, dense, mcs, power: float = 1.0, tree=None):
        """The cluster tree of the dense levels (``tree``: given), the clusters kept and the
        model's tables (released values and public geometry only)."""
        if tree is None:
            tree = build_cluster_tree(dense, mcs, self._lambdas(grid, dense, power))
        kept = np.flatnonzero(tree.selected)
        self.cluster_stability_ = tree.stability[kept]
        top = self.cluster_stability_.max() if kept.size else 1.0
        self.cluster_persistence_ = self.cluster_stability_ / (top if top > 0 else 1.0)
        self.n_clusters_ = int(kept.size)
        self.min_cluster_size_ = float(mcs)
        raw = [tree.cell_labels(i) for i in range(len(dense))]
        # the border is spread into the grid levels' entries and from the first entry above
        # the finest threshold; the entries above that keep their clusters' cells
        m = next((i + 1 for i, lv in enumerate(dense) if lv.lam_shift > 0), len(dense))
        labels = spread_labels(
            dense[:m], raw[:m], [grid.centres(lv.grid_level, lv.cells) for lv in dense[:m]],
            reach=self._reach, near=None if self._near is None else
            [self._near * float(grid.width(lv.grid_level).max()) for lv in dense[:m]]) + raw[m:]
        # one table per grid level: its first entry's cells (a later entry's are among them:
        # ``parent`` is the position in the entry before), each cell labelled by the last
        # entry that labels it
        levels, cells, counts, labs = [], [], [], []
        pos = np.zeros(0, dtype=np.int64)
        for lv, lab in zip(dense, labels, strict=True):
            if levels and levels[-1] == lv.grid_level:
                pos = pos[lv.parent]
                labs[-1][pos[lab >= 0]] = lab[lab >= 0]
                continue
            pos = np.arange(lv.cells.shape[0])
            levels.append(lv.grid_level)
            cells.append(lv.cells)
            counts.append(lv.counts.astype(np.int64))
            labs.append(np.asarray(lab, dtype=np.int64).copy())
        self.tree_levels_ = np.asarray(levels, dtype=np.int64)
        self.tree_cells_, self.tree_counts_, self.tree_labels_ = cells, counts, labs
        self.grid_origin_ = grid.origin
        self.root_width_ = grid.root_width
        self.first_halvings_ = grid.first

    def _lambdas(self, grid, dense, power: float) -> np.ndarray:
        """The density level of every entry of ``dense``, and of the level below the last."""
        lam = [self._lambda(grid, lv.grid_level, power) * 2.0**(power * lv.lam_shift)
               for lv in dense]
        lam.append(self._lambda(grid, dense[-1].grid_level + 1, power) if dense else 1.0)
        if dense and dense[-1].lam_shift > 0:  # entries above the finest level's threshold
            lam[-1] = lam[-2] * 2.0 ** (power * 0.5)
        return np.asarray(lam)

    @staticmethod
    def _lambda(grid, level, power: float = 1.0) -> float:
        """The density level of ``level``: ``(1 / cell width)^power``, the geometric mean of
        its cell widths in units of the root's. The tree (a like count threshold at every
        level): ``power`` 1, HDBSCAN's ``1 / core distance``. The grid (a count threshold
        growing as the noise of the sums, ``2^(d/2)`` per coarser level): the density
        threshold grows by ``2^(d/2)`` per level, its ``1/d``-th power (a core distance's
        inverse) by ``sqrt 2``: ``power`` 1/2."""
        return float(2.0 ** (power * grid.halvings(level).mean()))

    # ------------------------------------------------------------------ the model
    def _check_fitted(self):
        if not hasattr(self, "tree_labels_"):
            raise_not_fitted(self)

    @property
    def score(self):
        """DPHDBSCAN publishes density clusters, not centres: there is no cost to score."""
        raise AttributeError("DPHDBSCAN has no score: it publishes density clusters, not "
                             "centres; give scikit-learn's tools a scoring= of your own")

    def predict(self, X):
        """Cluster of every record (-1: noise): the kept cluster of its cell at the finest
        level where that cell is dense and in one. Post-processing of the private model
        (records clipped to the fitted bounds, each labelled from itself and the model)."""
        self._check_fitted()
        arr = self._check_X(X, reset=False)
        if arr.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {arr.shape[1]} features; the model was fitted on "
                             f"{self.n_features_in_}")
        return self._labels_of(arr)

    def _labels_of(self, X) -> np.ndarray:
        """Every record's label from the model (:func:`_record_labels`), on an array, or on
        every chunk of dask input where the chunk lives (no record comes to the client; the
        labels come back as one NumPy array, or as a lazy dask array above
        :data:`privclust.engine.dask.LAZY_LABELS` records)."""
        grid = ShiftedGrid(self.bounds_, self.bounds_[:, 0] - self.grid_origin_,
                           self.first_halvings_)
        grid.root_width = np.asarray(self.root_width_, dtype=float)  # the grid's, maybe padded
        widths, cells, labels = [], [], []
        for level, c, lab in zip(self.tree_levels_, self.tree_cells_, self.tree_labels_,
                                 strict=True):
            keep = lab >= 0
            widths.append(grid.width(int(level)))
            cells.append(c[keep])
            labels.append(lab[keep])
        table = None
        if len(grid.blocks) == 1 and self.tree_levels_.size:
            # every dimension halved at every level: one finest cell index per record and a
            # table per level, when the finest level's grid over the root is small enough
            finest = int(self.tree_levels_[-1])
            side = 2 ** int(grid.halvings(finest)[0])
            if side ** self.bounds_.shape[0] <= DENSE_LOOKUP_CELLS:
                table = (side, [side >> (finest - int(lv)) for lv in self.tree_levels_])
        args = (np.asarray(self.bounds_, dtype=float), self.grid_origin_, widths, cells, labels,
                table)
        if is_dask_input(X):
            from ..engine.dask import record_labels

            return record_labels(X, _record_labels, *args)
        return _record_labels(X, *args)


def _record_labels(X, bounds, origin, widths, cells, labels, table=None) -> np.ndarray:
    """The labels of the rows of ``X`` (all records, or one chunk), each from that record and
    the model alone: the record as float64, clipped to the fitted ``bounds`` (as
    :func:`~privclust.cluster._base.clip_to_fitted_bounds` clips it), labelled by
    :func:`~privclust.cluster._density_tree.labels_from_grid` (``table``: the finest grid's
    side and each level's side, when every dimension halves at every level) or
    :func:`~privclust.cluster._density_tree.labels_from_cells`."""
    if table is not None:  # clipped chunk by chunk, as clip_to_fitted_bounds clips
        side, sides = table
        return labels_from_grid(np.asarray(X), origin, widths[-1], side, sides, cells, labels,
                                bounds=bounds)
    Xc = clip_to_fitted_bounds(_Fitted(bounds), np.asarray(X, dtype=float))
    return labels_from_cells(Xc, origin, widths, cells, labels)


class _Fitted:
    """The fitted bounds alone (what :func:`clip_to_fitted_bounds` reads of a model)."""

    def __init__(self, bounds):
        self.bounds_ = bounds
