"""HST k-means: k-means on a private, randomly shifted quadtree (hierarchically separated tree).

Cohen-Addad, Epasto, Mirrokni, Narayanan, Zhong, "Scalable differentially private clustering via
hierarchically separated trees" (KDD 2022). The data is embedded into a randomly shifted quadtree
over the public bounds; the noisy counts of the tree's cells, level by level, are the only
releases of the tree; the k centres are computed from the private tree alone (post-processing),
and one private Lloyd step may refine them.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.cluster import KMeans

from .._progress import fit_progress
from ..privacy import NOISY_N_SHARE, Mechanisms, resolve_random_state
from ..privacy.histogram import release_sparse_histogram
from ._base import (
    PrivateClusterMixin,
    check_epsilon,
    check_fit_cost,
    check_n_clusters,
    check_positive_int,
    nearest_centre,
)
from ._centres import (
    centroid_stats,
    finish_centre_fit,
    noisy_centroids,
    plan_centroid_items,
    su_budget_split,
)

__all__ = ["RETRY_ITEM", "CellWalk", "HSTKMeans", "QuadTree", "grow_tree", "hst_threshold",
           "level_keys"]

#: Default share of epsilon for the private Lloyd refinement (the rest builds the tree).
REFINE_SHARE = 0.3
#: Expected number of false-positive (empty) cells the sparse histogram of a level releases
#: per released parent cell; it sets the pruning threshold (:func:`hst_threshold`).
FALSE_POSITIVES_PER_PARENT = 0.25
#: At most this many dimensions are halved together at one level (a cell has at most
#: ``2^MAX_SPLIT_DIMS`` children, so flat cell keys fit in 62 bits); wider data halves its
#: dimensions in blocks, one block per level.
MAX_SPLIT_DIMS = 40
#: Post-processing: restarts of the weighted k-means on the private tree's summary.
_N_INIT = 3
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


def _default_depth(k: int, d: int) -> int:
    """Levels of the tree when ``max_depth=None``: ``clip(ceil(log2 k), 4, 8)`` full
    halvings (in blocks for wide data; see the class docstring for the measurement)."""
    full = int(np.clip(math.ceil(math.log2(max(k, 2))), 4, 8))
    return full * math.ceil(d / MAX_SPLIT_DIMS)


def check_refine(refine):
    """``refine``: True, False or "auto" (returned as True, False or "auto")."""
    if isinstance(refine, str) and refine == "auto":
        return "auto"
    if not isinstance(refine, bool | np.bool_):
        raise TypeError(f"refine must be True, False or 'auto', got {refine!r}")
    return bool(refine)


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


def _lookup_rows(table: np.ndarray, rows: np.ndarray) -> np.ndarray:
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
    rank = _lookup_rows(survivors, parents)
    inside = rank >= 0
    bits = ((cells[inside][:, blk] & 1) << np.arange(blk.size, dtype=np.int64)).sum(axis=1)
    return rank[inside] * (1 << blk.size) + bits, inside


def _release_level(mech, n_parents, b, keys, counts, epsilon, level, item):
    """One level's sparse histogram over the ``2^b`` children of ``n_parents`` released cells."""
    n_cells = n_parents * (1 << b)
    t = hst_threshold(epsilon, 1 << b)
    return release_sparse_histogram(
        mech, keys, counts, n_cells, epsilon, t,
        target=f"cell counts >= {t}, level {level} ({n_cells} cells: the children of "
               f"{n_parents} released cells)",
        note="each record lies in one cell of the level: sensitivity 1", item=item,
    )


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


def quantisation_error(tree: QuadTree, level: int) -> float:
    """Expected squared distance per record from a point spread evenly over a cell of
    ``level`` to the cell's centre: ``sum_j w_j^2 / 12`` (public geometry)."""
    w = np.minimum(tree.width(level), tree.bounds[:, 1] - tree.bounds[:, 0])
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

    def __init__(self, plan, tree, k, items, reserves, sizes_to):
        self.plan, self.tree, self.k = plan, tree, k
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
        noise = refinement_noise(self.tree.bounds, eps_sum, self.k, n_hat)
        quant = quantisation_error(self.tree, self.tree.depth)
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


class QuadTree:
    """The public geometry of the shifted quadtree: origin, widths and split blocks per level."""

    def __init__(self, bounds: np.ndarray, shift: np.ndarray, depth: int):
        d = bounds.shape[0]
        self.bounds = bounds
        self.depth = depth
        width = bounds[:, 1] - bounds[:, 0]
        # the root cell (level 0) has width 2W and holds the whole box: [lo - s, lo - s + 2W)
        self.origin = bounds[:, 0] - shift
        self.root_width = 2.0 * width
        n_blocks = math.ceil(d / MAX_SPLIT_DIMS)
        size = math.ceil(d / n_blocks)
        self.blocks = [np.arange(j, min(j + size, d)) for j in range(0, d, size)]
        self.halvings = np.zeros((depth + 1, d), dtype=np.int64)
        for level in range(1, depth + 1):
            self.halvings[level] = self.halvings[level - 1]
            self.halvings[level, self.block(level)] += 1

    def block(self, level: int) -> np.ndarray:
        """The features halved at ``level`` (wide data halves its features in blocks)."""
        return self.blocks[(level - 1) % len(self.blocks)]

    def width(self, level: int) -> np.ndarray:
        """The cells' widths at ``level``."""
        # exact powers of two: floor((x - o) / w_l) >> 1 == floor((x - o) / w_{l-1})
        return self.root_width / np.exp2(self.halvings[level])

    def centres(self, level: int, cells: np.ndarray) -> np.ndarray:
        """Centre of every cell's intersection with the public box."""
        w = self.width(level)
        lo = np.maximum(self.origin + cells * w, self.bounds[:, 0])
        hi = np.minimum(self.origin + (cells + 1) * w, self.bounds[:, 1])
        return np.clip((lo + hi) / 2.0, self.bounds[:, 0], self.bounds[:, 1])


class HSTKMeans(PrivateClusterMixin):
    """k-means on a private randomly shifted quadtree (Cohen-Addad et al., KDD 2022).

    1. **Tree** (Sec. 3, "private HST"): a quadtree over the public bounds, shifted by a
       uniformly random public vector; at every level each cell is halved along every
       dimension. Level by level, the cells' record counts are released with the linear-time
       pure-DP sparse histogram (two-sided geometric noise; only cells whose noisy count reaches
       a threshold are kept, and the empty cells' false positives are sampled privately). The
       universe of a level is the set of children of the cells released at the level above, so
       the tree only grows below heavy cells and stays small (at most ``n`` non-empty cells per
       level plus the false positives).
    2. **Centres** (Sec. 4-5, post-processing): every released cell carries its noisy count
       minus those of its released children, at the centre of the cell (its deepest cells carry
       their whole count); a weighted k-means++ seeding and Lloyd iterations on these few
       thousand weighted points give k centres. The paper solves k-median on the tree itself
       (a greedy choice of heavy cells) and adapts it to k-means; here the k-means objective is
       optimised directly on the tree's summary (a different post-processing of the same
       private tree, not compared here against the paper's tree solution).
    3. **Refinement** (``refine="auto"`` by default; always with ``True``, never with
       ``False``): one private Lloyd step, a noisy size and a noisy sum of the records nearest
       every centre (Su et al.'s split between the two). The tree places a centre at most at
       the centre of a cell; where a feature's public range dwarfs its data (``uci_shuttle``:
       -4900..5100 for values within +-10 of 0), the deepest cells are still hundreds of units
       wide and only a noisy mean finds the data. ``"auto"`` refines when the step's expected
       noise error is below the tree's quantisation error (below).

    Privacy guarantee
    -----------------
    ``epsilon``-DP (pure) under add/remove-one-record neighbours. The levels partition the data
    separately (each record lies in exactly one cell of a level), so one record changes each
    level's histogram by at most 1 in one cell: every level's sparse histogram is
    ``eps_level``-DP, and the levels (and the refinement) compose sequentially (basic
    composition, adaptively: a level's universe depends only on earlier releases):
    ``epsilon = max_depth * eps_level + eps_refine``, ``eps_refine = refine_share * epsilon``
    (0 without refinement). When a level releases no cell, the budget of the levels below it
    moves to one more release of that level (the plan's ``retry`` item, a privacy filter:
    every path spends at most ``epsilon``), so the fit always spends exactly ``epsilon``. The
    random shift is public randomness; records are clipped to the public ``bounds``. The
    sparse histogram is pure DP in the Real-RAM model (its tail sampling uses floating-point
    exponential draws).

    ``refine="auto"`` (:class:`RefineRule`): the plan, fixed before the data is read, holds a
    noisy record count (``NOISY_N_SHARE`` = 2% of epsilon, taken from the refinement's share),
    the refinement's sizes and its sums' budget as one reserve item per tree level. The count
    is released first (two-sided geometric noise, sensitivity 1); the rule then compares, from
    that count ``n_hat`` and public values only, the refinement's expected noise error per
    record, ``2 (d / eps_sum)^2 sum_j half_j^2 (k / n_hat)^2`` (:func:`refinement_noise`:
    Laplace noise on the unit sums, k clusters of ``n_hat / k`` records, ``half`` the bounds'
    half-widths), with the tree's quantisation error at its deepest level, ``sum_j w_j^2 / 12``
    (:func:`quantisation_error`, ``w`` the public cell widths). Refine: the reserves move to
    the sums' item. Otherwise each reserve moves to its level and the sizes' item to the last
    level, before any level is released, so the tree spends all but the count. The decision
    is post-processing of a released count, so it costs nothing beyond the count; the budget
    moves are adaptive choices of privacy parameters that spend exactly ``epsilon`` on either
    path (the plan's privacy filter, as for the retry), and the levels' thresholds follow from
    their (public, moved) epsilons.

    Choices where the paper leaves room (measured with ``benchmarks/hst.py``, medians of 5
    seeds; Synth-10d = ``make_blobs(100000, 10, centers=64, center_box=(-100, 100))``, k = 64)
    -------------------------------------------------------------------------------------------
    * Budget: uniform over the levels (the paper's split). Budget of levels the tree does not
      reach (a level that releases no cell) re-releases that level once at their combined
      epsilon, so the fit always spends exactly ``epsilon``.
    * Refinement: ``"auto"``. Always refining (``refine_share=0.3``) kept the accuracy on
      Synth-10d (1.00) but raised the k-means cost per record from 42 to 161 at epsilon 1
      (106 to 554 at 0.5): with ~1,500 records per cluster its noisy sums move the centres
      more than the tree's cells do (the rule: noise ~150 against a quantisation error of 38
      per record, no refinement). Never refining left ``uci_shuttle`` (k = 7, its public
      bounds) at 32-970 times the cost of ``KMeans(7, n_init=10)`` over seeds 0-9, where
      DPLloyd gets 2.7-4.5 (the rule: noise ~1.7e4 against 2.6e6, refine). Measured with
      ``benchmarks/hst_emmc.py`` (epsilon 1, cost over KMeans' with 10 restarts, medians of
      seeds 0-9 unless stated): on shuttle "auto" stays within 1.5 times DPLloyd's cost on
      every seed 0-9 (219 without refinement); ``mnist_emb40`` and ``fashion_emb40``
      (k = 10) go from 2.34 and 2.24 to 1.64 and 1.18, ``cluto_t4_8k`` (k = 6) from 1.04 to
      1.02; Synth-10d (k = 64, no refinement) from 4.40 to 4.66 (4.37 to 4.58 over 30 seeds:
      the count's 2%). Spreading the unused reserve over levels 2 to 6 only gave 4.29 over
      30 seeds, but one seed at 15; the even spread had none.
    * Threshold: :func:`hst_threshold`, at most 0.25 false-positive children per released cell
      in expectation (``ln(2^d / 0.25) / eps_level``, integer): no record count needed.
    * Depth: ``max_depth=None`` takes ``clip(ceil(log2 k), 4, 8)`` halvings of every dimension
      (6 for k = 64). On Synth-10d at epsilon 1 the cost per record was 1609, 370, 92, 42, 42
      and 45 at depths 3 to 8: deeper levels only split the budget once their cells hold fewer
      records than the threshold (the tree prunes itself).
    * Data wider than 40 features halves its dimensions in blocks of at most 40, one block per
      level (a cell then has at most ``2^40`` children).

    Parameters
    ----------
    n_clusters : int
        k, the number of centres (always exactly k are released).
    epsilon : float
        Privacy budget (> 0).
    bounds : tuple or array
        Public bounds, ``(lo, hi)`` for every feature or a ``(d, 2)`` array. Required.
    max_depth : int or None
        Levels of the tree (None: the rule above).
    refine : bool or "auto"
        Run the private Lloyd step: True, False, or "auto" (default: when its expected noise
        error is below the tree's quantisation error; see above).
    refine_share : float
        Share of epsilon for the refinement (with "auto": the record count and the
        refinement's budget, which goes to the tree when it does not run), in [0, 1); 0
        turns "auto" off.
    random_state : None, int or Generator
        None (secure), int or Generator (reproducible, not secure).
    accountant : Accountant or None
        A shared :class:`~privclust.Accountant` (checked before any data is read).

    Attributes
    ----------
    ``cluster_centers_`` : ndarray (k, d)
        The private centres, inside the bounds.
    ``cluster_sizes_`` : ndarray (k,)
        Noisy sizes (of the refinement step; without it, the tree's noisy weight near each
        centre).
    ``n_clusters_`` : int
        k.
    ``labels_`` : ndarray (n,)
        Nearest private centre of every training row (post-processing of the private model
        applied to X, not a release).
    ``n_iter_`` : int
        Private Lloyd steps run (0 or 1; with "auto", the rule's choice, stated in the
        privacy report's notes).
    ``centers_history_`` : ndarray
        The centres from the tree, then after the refinement.
    ``cost_history_`` : ndarray
        Exact k-means cost at each row of ``centers_history_`` (a local diagnostic, NOT
        private, never part of the release).
    ``tree_cells_`` : list of ndarray
        Per level, the released cells' centres (clipped to the bounds).
    ``tree_counts_`` : list of ndarray
        Per level, their noisy counts.
    ``shift_`` : ndarray (d,)
        The public random shift of the quadtree.
    ``n_features_in_`` : int
        Number of features.
    ``privacy_report_`` : PrivacyReport
        Every release, its mechanism and epsilon.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from privclust.cluster.hst import HSTKMeans
    >>> X, _ = make_blobs(5000, 2, centers=4, center_box=(-10, 10), random_state=0)
    >>> model = HSTKMeans(4, epsilon=1.0, bounds=(-15, 15), random_state=0).fit(X)
    >>> model.cluster_centers_.shape, model.labels_.shape
    ((4, 2), (5000,))
    >>> round(model.privacy_report_.total().epsilon, 6)
    1.0
    """

    releases_cluster_sizes = True

    def __init__(
        self,
        n_clusters=8,
        *,
        epsilon=1.0,
        bounds=None,
        max_depth=None,
        refine="auto",
        refine_share=REFINE_SHARE,
        random_state=None,
        accountant=None,
    ):
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.max_depth = max_depth
        self.refine = refine
        self.refine_share = refine_share
        self.random_state = random_state
        self.accountant = accountant

    def _check_params(self):
        eps = check_epsilon(self.epsilon)
        k = check_n_clusters(self.n_clusters)
        depth = None if self.max_depth is None else check_positive_int(
            self.max_depth, "max_depth", upper=64)
        refine = check_refine(self.refine)
        share = self.refine_share
        if isinstance(share, bool) or not isinstance(share, numbers.Real) or not (
                0 <= share < 1):
            raise ValueError(f"refine_share must be a number in [0, 1), got {share!r}")
        if refine is True and share == 0:
            raise ValueError("refine=True needs refine_share > 0 (or pass refine=False)")
        if share == 0:
            refine = False  # "auto" with no share: nothing to decide
        if self.max_depth is not None and self.max_depth < 1:
            raise ValueError(f"max_depth must be an int >= 1, got {self.max_depth!r}")
        return eps, k, depth, refine, float(share) if refine else 0.0

    def _plan_items(self, plan, depth, share, d, auto=False):
        """The line items: one per level, then the refinement's sizes and sums (with
        ``auto``, the sums' budget in reserves: :func:`plan_refinement`)."""
        eps_refine = share * plan.epsilon
        eps_level = (plan.epsilon - eps_refine) / depth
        levels = [f"cell counts, level {lv}" for lv in range(1, depth + 1)]
        for name in levels:
            plan.add(name, "geometric sparse histogram", "pure", eps_level)
        plan.add(RETRY_ITEM, "geometric sparse histogram", "pure", 0.0)  # see grow_tree
        items, reserves = plan_refinement(plan, eps_refine, d, [(lv, 1) for lv in levels],
                                          auto) if share else (None, [])
        return levels, items, reserves

    def fit(self, X, y=None):
        """Cluster X privately. ``y`` is ignored (present for scikit-learn compatibility)."""
        eps, k, depth, refine, share = self._check_params()
        plan, accountant = self._open_plan(eps, 0.0)  # checked before any data is read
        X = self._check_X(X, reset=True)
        check_n_clusters(k, X.shape[0])
        d = X.shape[1]
        bounds = self._fit_bounds(X)
        depth = _default_depth(k, d) if depth is None else depth
        # measured: ~4e-8 s per record, feature and level (cell keys), plus the assignment
        check_fit_cost(4e-8 * d * depth + 3.4e-10 * k * max(d, 2) * 2,
                       f"HSTKMeans(n_clusters={k}, max_depth={depth}) on {d} features",
                       "lower max_depth or n_clusters")
        source = resolve_random_state(self.random_state)
        gen = source.generator
        shift = gen.uniform(0.0, 1.0, size=d) * (bounds[:, 1] - bounds[:, 0])  # public
        tree = QuadTree(bounds, shift, depth)
        levels, items, reserves = self._plan_items(plan, depth, share, d, refine == "auto")
        self._reserve_plan(plan, accountant, "HSTKMeans")
        rule = RefineRule(plan, tree, k, items, reserves, levels[-1]) \
            if refine == "auto" else None

        engine = self._make_engine(X, bounds)
        report = self._start_report(plan.reserved(), source)
        mech = Mechanisms(source, report, plan)
        with fit_progress("HSTKMeans", depth + int(bool(refine))) as step:
            if rule is not None:
                rule(engine, mech)  # decides from a released count, moves the budget
            cells, counts = grow_tree(engine, mech, tree, levels, step)
            reached = len(cells)
            points, weights = self._summary(tree, cells, counts)
            centres = self._centres_from_summary(points, weights, bounds, k, gen)
            history, costs = [centres], []
            sizes = self._summary_sizes(points, weights, centres)
            if refine is True or (rule is not None and rule.chosen):
                n_c, sums, cost = centroid_stats(engine, centres, bounds)
                costs.append(cost)
                centres, sizes, _ = noisy_centroids(mech, n_c, sums, centres, bounds,
                                                    refine_epsilon(plan, items, share),
                                                    label="refinement", items=items)
                history.append(centres)
                step()
        report.notes += [
            f"quadtree: {depth} levels planned, {reached} grown; random shift (public) "
            f"{np.round(shift, 6).tolist()[:4]}{'...' if d > 4 else ''}",
            f"{len(points)} weighted cells from the private tree; k centres by weighted "
            "k-means on them (post-processing)",
            *([rule.note] if rule is not None else []),
            "labels_ are the private centres applied to X (post-processing, not a release)",
        ]
        self.tree_cells_ = [tree.centres(lv + 1, c) for lv, c in enumerate(cells)]
        self.tree_counts_ = counts
        self.shift_ = shift
        return finish_centre_fit(self, X, bounds, centres, sizes, history, costs, report,
                                 plan, accountant)

    # ------------------------------------------------------------------ the private tree
    @staticmethod
    def _summary(tree, cells, counts):
        """Weighted points of the private tree: every released cell at its centre, weighted by
        its noisy count less its released children's (the deepest cells: their whole count)."""
        pts, wts = [], []
        for i, (c, n) in enumerate(zip(cells, counts, strict=True)):
            level = i + 1
            w = n.astype(float)
            if i + 1 < len(cells):
                child = cells[i + 1].copy()
                blk = tree.block(level + 1)
                child[:, blk] >>= 1
                pos = _lookup_rows(c, child)
                ok = pos >= 0
                w = w - np.bincount(pos[ok], weights=counts[i + 1][ok], minlength=c.shape[0])
            keep = w > 0
            pts.append(tree.centres(level, c[keep]))
            wts.append(w[keep])
        d = tree.bounds.shape[0]
        if not pts:
            return np.zeros((0, d)), np.zeros(0)
        return np.concatenate(pts), np.concatenate(wts)

    @staticmethod
    def _centres_from_summary(points, weights, bounds, k, gen):
        """k centres from the weighted summary (weighted k-means++ and Lloyd); centres the
        summary cannot supply (fewer than k weighted cells) are uniform public draws."""
        d = bounds.shape[0]
        m = points.shape[0]
        if m <= k:
            extra = gen.uniform(bounds[:, 0], bounds[:, 1], size=(k - m, d))
            return np.vstack([points, extra])
        seed = int(gen.integers(0, 2**31 - 1))  # public randomness for the post-processing
        km = KMeans(n_clusters=k, n_init=_N_INIT, random_state=seed)
        km.fit(points, sample_weight=weights)
        return np.clip(km.cluster_centers_, bounds[:, 0], bounds[:, 1])

    @staticmethod
    def _summary_sizes(points, weights, centres):
        """Noisy weight of the summary nearest every centre (post-processing)."""
        k = centres.shape[0]
        if points.shape[0] == 0:
            return np.zeros(k, dtype=np.int64)
        lab = nearest_centre(points, centres)
        return np.rint(np.bincount(lab, weights=weights, minlength=k)).astype(np.int64)


def _root_holds_the_box(tree) -> bool:
    """Whether every record (clipped to the bounds; float32 storage may round a bound outward
    by half a float32 step) lies in the root cell: then the root's children are the level-1
    cells of every record. A public check on the bounds and the shift; it fails only for a
    shift within ~1e-7 of the width (the cell walk then asks for whole grids, as before)."""
    lo, hi = tree.bounds[:, 0], tree.bounds[:, 1]
    pad = 2.0**-20 * np.maximum(np.abs(lo), np.abs(hi)) + 1e-300
    low = np.floor(np.subtract(lo - pad, tree.origin) / tree.root_width)
    high = np.floor(np.subtract(hi + pad, tree.origin) / tree.root_width)
    return bool((low == 0).all() and (high == 0).all())


class CellWalk:
    """The exact non-empty cells of the tree's levels, one level at a time (the input of the
    levels' releases; never released themselves).

    With an engine that splits groups (:meth:`~privclust.engine.LocalEngine.split_cells`)
    every record keeps the index of its cell, and each level splits the cells of the level
    above along the level's block of features: one pass over the block and one sort of
    integer keys per level. Otherwise each level asks for the grid's cell counts
    (:meth:`~privclust.engine.Engine.cell_counts`) and finds every cell's parent among the
    cells of the level above. Both give the same cells and counts. ``keep``: how many of the
    latest levels :meth:`cells` can still answer for.
    """

    def __init__(self, engine, tree: QuadTree, keep: int = 0):
        self.engine, self.tree, self.keep = engine, tree, keep
        self.split = hasattr(engine, "split_cells") and _root_holds_the_box(tree)
        self.groups = engine.root() if self.split else None
        self.rows = np.zeros((1, tree.bounds.shape[0]), dtype=np.int64)  # the root
        self.recent: dict = {}

    def next(self, level: int):
        """``(parent, bits, counts)`` of every non-empty cell of ``level``: the index of its
        parent among the cells of the level above (-1: outside the root), its halves along
        the level's block (bit ``i`` for the block's ``i``-th feature) and its exact count."""
        tree = self.tree
        blk, width = tree.block(level), tree.width(level)
        if self.split:
            self.groups, parent, bits, counts = self.engine.split_cells(
                self.groups, tree.origin, width, blk)
            state = self.groups
        else:
            cells, counts = self.engine.cell_counts(tree.origin, width)
            up = cells.copy()
            up[:, blk] >>= 1
            parent = _lookup_rows(self.rows, up)
            bits = ((cells[:, blk] & 1) << np.arange(blk.size, dtype=np.int64)).sum(axis=1)
            self.rows = state = cells
        self.recent[level] = (state, counts)
        self.recent.pop(level - self.keep, None)
        return parent, bits, counts

    def cells(self, level: int):
        """``(cells, counts)``: the integer indices and exact counts of the non-empty cells of
        a level among the latest ``keep`` walked."""
        state, counts = self.recent[level]
        if isinstance(state, np.ndarray):
            return state, counts
        return self.engine.group_cells(state, self.tree.origin, self.tree.width(level)), counts


def grow_tree(engine, mech, tree, levels, step, walk=None):
    """Release the tree level by level, each at its line item's epsilon (read when the level
    is released: budget may have moved to it). A level that releases no cell is released once
    more with the budget of every level below it (the ``retry`` item); then the tree stops.
    Returns the released cells (integer indices) and noisy counts per level. ``walk``: the
    :class:`CellWalk` to read the levels from (a new one by default)."""
    d = tree.bounds.shape[0]
    plan = mech.plan
    walk = CellWalk(engine, tree) if walk is None else walk
    survivors = np.zeros((1, d), dtype=np.int64)  # the root: public, holds every record
    rank = np.zeros(1, dtype=np.int64)  # per cell of the level above: its released rank
    out_cells, out_counts = [], []
    level = 0
    while level < len(levels):
        level += 1
        blk = tree.block(level)
        parent, bits, counts = walk.next(level)
        # a cell's key in the level's universe: rank(parent) * 2^b + its halves (level_keys)
        up = np.where(parent >= 0, rank[np.maximum(parent, 0)], -1)
        inside = up >= 0
        keys = np.where(inside, (up << blk.size) | bits, -1)
        rkeys, rvals = _release_level(mech, survivors.shape[0], blk.size, keys[inside],
                                      counts[inside], plan.item(levels[level - 1]).epsilon,
                                      level, levels[level - 1])
        step()
        if rkeys.size == 0 and level < len(levels):
            eps_retry = plan.move_unspent(levels[level:], RETRY_ITEM, "the tree stopped at "
                                          f"level {level}: its cells are released again "
                                          "with the budget of the levels below")
            rkeys, rvals = _release_level(mech, survivors.shape[0], blk.size, keys[inside],
                                          counts[inside], eps_retry, level, RETRY_ITEM)
            level = len(levels)
        if rkeys.size == 0:
            break
        children = survivors[rkeys >> blk.size].copy()
        child_bits = (rkeys[:, None] >> np.arange(blk.size, dtype=np.int64)) & 1
        children[:, blk] = 2 * children[:, blk] + child_bits
        out_cells.append(children)
        out_counts.append(np.asarray(rvals, dtype=np.int64))
        survivors = children
        at = np.minimum(np.searchsorted(rkeys, keys), rkeys.size - 1)
        rank = np.where(inside & (rkeys[at] == keys), at, -1)
        if level < len(levels) and \
                survivors.shape[0] * (1 << tree.block(level + 1).size) >= 2**62:
            plan.move_unspent(levels[level:], RETRY_ITEM, "flat cell keys would overflow")
            plan.leave_unspent(RETRY_ITEM, "the tree is too wide to grow further")
            break
    return out_cells, out_counts

# ------------------------------------------------------------------ post-processing
