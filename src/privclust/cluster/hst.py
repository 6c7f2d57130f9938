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
from ..privacy import Mechanisms, resolve_random_state
from ._base import (
    PrivateClusterMixin,
    check_epsilon,
    check_fit_cost,
    check_n_clusters,
    check_positive_int,
    nearest_centre,
)
from ._centres import centroid_stats, finish_centre_fit, noisy_centroids
from ._refine import RefineRule, check_refine, plan_refinement, refine_epsilon
from ._shifted_tree import MAX_SPLIT_DIMS, RETRY_ITEM, ShiftedGrid, grow

__all__ = ["HSTKMeans"]

#: Default share of epsilon for the private Lloyd refinement (the rest builds the tree).
REFINE_SHARE = 0.3
#: Post-processing: restarts of the weighted k-means on the private tree's summary.
_N_INIT = 3


def _default_depth(k: int, d: int) -> int:
    """Levels of the tree when ``max_depth=None``: ``clip(ceil(log2 k), 4, 8)`` full
    halvings (in blocks for wide data; see the class docstring for the measurement)."""
    full = int(np.clip(math.ceil(math.log2(max(k, 2))), 4, 8))
    return full * math.ceil(d / MAX_SPLIT_DIMS)

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

    ``refine="auto"`` (:class:`~privclust.cluster._refine.RefineRule`): the plan, fixed before
    the data is read, holds a noisy record count (``NOISY_N_SHARE`` = 2% of epsilon, taken from
    the refinement's share), the refinement's sizes and its sums' budget as one reserve item per
    tree level. The count is released first (two-sided geometric noise, sensitivity 1); the rule
    then compares, from that count ``n_hat`` and public values only, the refinement's expected
    noise error per record, ``2 (d / eps_sum)^2 sum_j half_j^2 (k / n_hat)^2``
    (:func:`~privclust.cluster._refine.refinement_noise`: Laplace noise on the unit sums, k
    clusters of ``n_hat / k`` records, ``half`` the bounds' half-widths), with the tree's
    quantisation error at its deepest level, ``sum_j w_j^2 / 12``
    (:func:`~privclust.cluster._refine.quantisation_error`, ``w`` the public cell widths).
    Refine: the reserves move to the sums' item. Otherwise each reserve moves to its level and
    the sizes' item to the last level, before any level is released, so the tree spends all but
    the count. The decision is post-processing of a released count, so it costs nothing beyond
    the count; the budget moves are adaptive choices of privacy parameters that spend exactly
    ``epsilon`` on either path (the plan's privacy filter, as for the retry), and the levels'
    thresholds follow from their (public, moved) epsilons.

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
    * Threshold: :func:`~privclust.cluster._shifted_tree.hst_threshold`, at most 0.25
      false-positive children per released cell
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
        plan.add(RETRY_ITEM, "geometric sparse histogram", "pure", 0.0)  # see grow
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
        tree = ShiftedGrid(bounds, shift)
        levels, items, reserves = self._plan_items(plan, depth, share, d, refine == "auto")
        self._reserve_plan(plan, accountant, "HSTKMeans")
        rule = RefineRule(plan, tree, depth, k, items, reserves, levels[-1]) \
            if refine == "auto" else None

        engine = self._make_engine(X, bounds)
        report = self._start_report(plan.reserved(), source)
        mech = Mechanisms(source, report, plan)
        with fit_progress("HSTKMeans", depth + int(bool(refine))) as step:
            if rule is not None:
                rule(engine, mech)  # decides from a released count, moves the budget
            released = grow(engine, mech, tree, levels, RETRY_ITEM, step)
            reached = len(released)
            points, weights = self._summary(tree, released)
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
        self.tree_cells_ = [tree.centres(lv.level, lv.cells) for lv in released]
        self.tree_counts_ = [lv.counts for lv in released]
        self.shift_ = shift
        return finish_centre_fit(self, X, bounds, centres, sizes, history, costs, report,
                                 plan, accountant)

    # ------------------------------------------------------------------ the private tree
    @staticmethod
    def _summary(tree, released):
        """Weighted points of the private tree: every released cell at its centre, weighted by
        its noisy count less its released children's (the deepest cells: their whole count)."""
        pts, wts = [], []
        for i, lv in enumerate(released):
            w = lv.counts.astype(float)
            if i + 1 < len(released):
                nxt = released[i + 1]
                w = w - np.bincount(nxt.parent, weights=nxt.counts, minlength=w.size)
            keep = w > 0
            pts.append(tree.centres(lv.level, lv.cells[keep]))
            wts.append(w[keep])
        if not pts:
            return np.zeros((0, tree.d)), np.zeros(0)
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
