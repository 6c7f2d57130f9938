"""EM-MC: k-means via the exponential mechanism and max cover.

Nguyen, Chaturvedi, Xu, "Differentially private k-means via exponential mechanism and max cover"
(AAAI 2021). A candidate set of centres is built by a greedy maximum coverage with balls on a
grid, each greedy choice drawn with the exponential mechanism; k centres are then chosen from the
candidates (here: weighted k-means on noisy candidate counts, post-processing), and an optional
private Lloyd step moves them to noisy means.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy import sparse
from scipy.spatial import cKDTree
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
from ._shifted_tree import RETRY_ITEM, CellWalk, ShiftedGrid, grow

__all__ = ["EMMC", "coverage_matrix", "greedy_cover_scores"]

#: Default budget shares: the private net (grid cells), the max-cover choices, the candidates'
#: counts; the refinement's share is taken first when ``refine=True``.
NET_SHARE = 0.5
COVER_SHARE = 0.3
WEIGHT_SHARE = 0.2
REFINE_SHARE = 0.3
#: Ball radius of a candidate, in cell widths of its level.
COVER_RADIUS = 1.5
_ITEM_COVER = "max cover choices"
_ITEM_WEIGHT = "candidate counts"


def _default_depth(k: int, d: int) -> int:
    """HST's rule: ``clip(ceil(log2 k), 4, 8)`` full halvings (in blocks of at most 40
    dimensions for wide data)."""
    full = int(np.clip(math.ceil(math.log2(max(k, 2))), 4, 8))
    return full * math.ceil(d / 40)


def coverage_matrix(candidates, cell_centres, radius: float):
    """Sparse incidence (m, c) of candidate balls over grid cells: entry ``(j, i)`` is 1 when
    the centre of cell ``i`` lies within ``radius`` of candidate ``j`` (a ball discretised on the
    grid). Public geometry only: which cells exist is never released, only scores built from
    it with their sensitivity stated (:func:`greedy_cover_scores`)."""
    m, c = candidates.shape[0], cell_centres.shape[0]
    if m == 0 or c == 0:
        return sparse.csr_matrix((m, c))
    pairs = cKDTree(candidates).sparse_distance_matrix(cKDTree(cell_centres), radius,
                                                       output_type="coo_matrix")
    # the pairs found (distance 0 included, stored as explicit entries) get weight 1
    inc = sparse.coo_matrix((np.ones(pairs.row.size), (pairs.row, pairs.col)),
                            shape=(m, c)).tocsr()
    return inc


def greedy_cover_scores(incidence, counts, covered) -> np.ndarray:
    """Max-cover score of every candidate: records in cells of its ball not yet covered.

    Sensitivity 1 under add/remove of one record: the record lies in one cell, so it changes
    the count of that cell by 1 (or adds a cell of count 1), and every candidate's score is a
    sum over distinct cells with 0/1 weights; ``covered`` depends only on the earlier (public)
    choices and the public geometry, never on the counts."""
    return np.asarray(incidence @ np.where(covered, 0, counts).astype(float)).ravel()


class EMMC(PrivateClusterMixin):
    """k-means via the exponential mechanism and max cover (Nguyen, Chaturvedi, Xu, AAAI 2021).

    1. **Net** (the paper's grid of candidate centres, Sec. 3): a randomly shifted grid per
       radius ``r_l = W / 2^l``. The paper's exponential mechanism ranges over *every* grid point;
       with ``10^15`` points (Synth-10d) and a per-choice budget of a few thousandths, the mass of
       the empty points swamps every ball (the authors' code did not finish in 24 h on such
       sets). Here the grid points are first screened privately: the cells' counts are released
       level by level with HST's pure-DP sparse histogram (a cell is released only when its
       noisy count passes a threshold; the grid's universe at a level is the children of the
       cells released above), and the released cells' centres are the candidate universe.
    2. **Max cover** (Sec. 3, the private greedy): on each of the ``n_scales`` deepest levels,
       ``n_candidates`` balls (radius ``cover_radius`` cell widths, centred on the released
       cells) are chosen greedily, each with the exponential mechanism on the number of records
       the ball covers that no earlier chosen ball of the level covers (computed from the exact
       counts of the level's cells: a record is in a ball when its cell's centre is).
    3. **k centres** (Sec. 4, post-processing of a noisy summary): the records nearest each
       candidate are counted with two-sided geometric noise, and weighted k-means++ and Lloyd on
       the candidates with these weights gives k centres (the paper's non-private clustering
       of the private candidates with noisy counts).
    4. **Refinement** (``refine="auto"`` by default; always with ``True``, never with
       ``False``): one private Lloyd step (noisy sizes and sums of the records nearest each
       centre; Su et al.'s split). ``"auto"`` is HSTKMeans' rule
       (:class:`~privclust.cluster._refine.RefineRule`): refine when the step's expected noise
       error is below the quantisation error of the net's deepest cells.

    Privacy guarantee
    -----------------
    ``epsilon``-DP (pure) under add/remove-one-record neighbours, by basic composition of: the
    net's levels (``net_share * epsilon`` split evenly over ``max_depth`` levels; every level's
    cells partition the records, sensitivity 1 per level; a level that releases nothing gets
    the budget of the levels below it once more, as in HST); the max-cover choices
    (``cover_share * epsilon`` split evenly over ``n_scales * n_candidates`` selections, each
    the exponential mechanism with factor 2 and sensitivity 1, :func:`greedy_cover_scores`); the
    candidate counts (``weight_share * epsilon``; the records nearest the candidates form a
    partition, sensitivity 1); the refinement (``refine_share * epsilon``, noisy sizes and
    sums of ``(x - mid) / half-width``, L1 sensitivity ``d``). The grid shift and the k-means
    seeds are public randomness; records are clipped to the public ``bounds``. The sparse
    histograms are pure DP in the Real-RAM model (their tail sampling uses floating-point
    draws).

    ``refine="auto"``: the plan, fixed before the data is read, holds a noisy record count
    (2% of epsilon, from the refinement's share), the refinement's sizes and its sums' budget
    as reserve items, one per net level, one for the max cover and one for the candidate
    counts (in proportion to ``shares``). The count is released first (sensitivity 1); from
    it and public values only the rule compares ``2 (d / eps_sum)^2 sum_j half_j^2 (k /
    n_hat)^2`` (the step's expected noise per record) with ``sum_j w_j^2 / 12`` (the deepest
    net cells' widths ``w``). Refine: the reserves move to the sums' item; otherwise each
    reserve moves to its item and the sizes' item to the candidate counts, before any of them
    is released. Post-processing of a released count, and exactly ``epsilon`` on either path
    (the plan's privacy filter).

    Departures from the paper
    -------------------------
    * Pure DP with basic composition; the paper states ``(epsilon, delta)`` with advanced
      composition over its ``O(k log n)`` choices per radius and a Gaussian final average.
    * No Johnson-Lindenstrauss projection: the grid is built in the original space (the engine
      answers cell counts, not projected ones); wide data halves its dimensions in blocks of
      at most 40 per level (HST's tree).
    * The exponential mechanism's universe per radius is the privately released cells, not
      every grid point (see step 1): exact in distribution for that universe, feasible at scale.
    * Balls are discretised on the level's grid (cell centres within the radius), and only the
      ``n_scales`` deepest radii are used (coarser radii give candidates far from every
      cluster's centre for the k-means objective).
    * The k centres come from weighted k-means on noisy counts (the paper also allows any
      non-private solver on the private candidates); the paper's private local search is not run.

    Choices by measurement (``benchmarks/emmc.py`` and three seeds on Synth-10d, k = 64, at
    epsilon 1 and 0.5; k-means cost per record): ``n_scales`` 1, 2, 3 gave 260-730, 43-330,
    42-49 at epsilon 1 and 1870-2100, 50-62, 50-61 at 0.5 (a coarser level's balls catch the
    clusters a deep level splits); ``n_candidates`` k instead of 2k (with 2 scales) raised it
    to 65-910; ``cover_radius`` 1.0 / 2.5 instead of 1.5 (one scale) to 1340-2260 / 45-320;
    shares 0.6 / 0.2 / 0.2 to 700-1470; the refinement to 420-950 (one scale; its noisy sums
    move the centres more than the grid's resolution does). Defaults: shares 0.5 / 0.3 / 0.2,
    ``n_candidates = 2k``, ``n_scales = 3``, ``cover_radius = 1.5``, ``refine="auto"``. With
    ``benchmarks/hst_emmc.py`` (epsilon 1, cost over ``KMeans(k, n_init=10)``'s, medians of
    seeds 0-9): never refining left ``uci_shuttle`` (k = 7) at 31-975 over seeds 0-9
    (DPLloyd: 2.7-4.5); ``"auto"`` refines there and stays within 1.5 times DPLloyd's cost on
    every seed, takes ``mnist_emb40`` and ``fashion_emb40`` (k = 10) from 3.42 and 4.18 to
    2.34 and 1.81 and ``cluto_t4_8k`` (k = 6) from 1.18 to 1.07, and does not refine
    Synth-10d (5.22 without refinement, 5.10 with the rule; 5.17 and 5.24 over 30 seeds; both
    lose a cluster on a few seeds in 70, at 23-46).

    Parameters
    ----------
    n_clusters : int
        k, the number of centres (always exactly k are released).
    epsilon : float
        Privacy budget (> 0).
    bounds : tuple or array
        Public bounds, ``(lo, hi)`` for every feature or a ``(d, 2)`` array. Required.
    max_depth : int or None
        Levels of the net (None: ``clip(ceil(log2 k), 4, 8)`` halvings of every dimension).
    n_candidates : int or None
        Max-cover choices per radius (None: ``2 k``).
    n_scales : int
        How many of the deepest released levels run a max cover (default 3).
    cover_radius : float
        Ball radius in cell widths of the level (default 1.5).
    refine : bool or "auto"
        Run the private Lloyd step: True, False, or "auto" (default: HSTKMeans' rule, above).
    shares : tuple of three floats or None
        Budget shares of the net, the max cover and the candidate counts (None: 0.5, 0.3,
        0.2); they split what the refinement leaves.
    refine_share : float
        Share of epsilon for the refinement, in (0, 1) (with "auto": the record count and the
        refinement's budget, which goes to the other releases when it does not run; 0 turns
        "auto" off).
    random_state : None, int or Generator
        None (secure), int or Generator (reproducible, not secure).
    accountant : Accountant or None
        A shared :class:`~privclust.Accountant` (checked before any data is read).

    Attributes
    ----------
    ``cluster_centers_`` : ndarray (k, d)
        The private centres, inside the bounds.
    ``cluster_sizes_`` : ndarray (k,)
        Noisy sizes (of the refinement; without it, the noisy candidate counts nearest each
        centre).
    ``n_clusters_`` : int
        k.
    ``labels_`` : ndarray (n,)
        Nearest private centre of every training row (post-processing of the private model
        applied to X, not a release).
    ``n_iter_`` : int
        Private Lloyd steps run (0 or 1).
    ``candidates_`` : ndarray (m, d)
        The candidate centres chosen by the max cover.
    ``candidate_counts_`` : ndarray (m,)
        Their noisy counts.
    ``centers_history_`` : ndarray
        The centres before and after the refinement.
    ``cost_history_`` : ndarray
        Exact k-means cost at each row of ``centers_history_`` (a local diagnostic, NOT
        private, never part of the release).
    ``n_features_in_`` : int
        Number of features.
    ``privacy_report_`` : PrivacyReport
        Every release, its mechanism and epsilon.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from privclust import EMMC
    >>> X, _ = make_blobs(5000, 2, centers=4, center_box=(-10, 10), random_state=0)
    >>> model = EMMC(4, epsilon=1.0, bounds=(-15, 15), random_state=0).fit(X)
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
        n_candidates=None,
        n_scales=3,
        cover_radius=COVER_RADIUS,
        refine="auto",
        shares=None,
        refine_share=REFINE_SHARE,
        random_state=None,
        accountant=None,
    ):
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.max_depth = max_depth
        self.n_candidates = n_candidates
        self.n_scales = n_scales
        self.cover_radius = cover_radius
        self.refine = refine
        self.shares = shares
        self.refine_share = refine_share
        self.random_state = random_state
        self.accountant = accountant

    # ------------------------------------------------------------------ parameters and plan
    def _check_params(self):
        eps = check_epsilon(self.epsilon)
        k = check_n_clusters(self.n_clusters)
        depth = None if self.max_depth is None else check_positive_int(
            self.max_depth, "max_depth", upper=64)
        m = 2 * k if self.n_candidates is None else check_positive_int(
            self.n_candidates, "n_candidates", upper=100_000)
        scales = check_positive_int(self.n_scales, "n_scales", upper=64)
        rad = self.cover_radius
        if isinstance(rad, bool) or not isinstance(rad, numbers.Real) or not (
                0 < rad < math.inf):
            raise ValueError(f"cover_radius must be a positive number, got {rad!r}")
        refine = check_refine(self.refine)
        shares = (NET_SHARE, COVER_SHARE, WEIGHT_SHARE) if self.shares is None else self.shares
        arr = np.asarray(shares, dtype=float) if not isinstance(shares, str) else np.zeros(0)
        if arr.shape != (3,) or not np.isfinite(arr).all() or (arr <= 0).any() or \
                abs(arr.sum() - 1.0) > 1e-9:
            raise ValueError("shares must be three positive numbers (net, max cover, candidate "
                             f"counts) summing to 1; got {shares!r}")
        rs = self.refine_share
        if refine == "auto" and isinstance(rs, numbers.Real) and not isinstance(rs, bool) \
                and rs == 0:
            refine = False  # "auto" with no share: nothing to decide
        if refine and (isinstance(rs, bool) or not isinstance(rs, numbers.Real)
                       or not 0 < rs < 1):
            raise ValueError(f"refine_share must be a number in (0, 1), got {rs!r}")
        share = float(rs) if refine else 0.0
        return eps, k, depth, m, scales, float(rad), refine, arr, share

    @staticmethod
    def _plan_items(plan, depth, shares, refine_share, d, auto=False):
        """Line items: one per net level (and HST's retry item), the max-cover choices, the
        candidate counts, the refinement's sizes and sums (with ``auto``, the sums' budget in
        reserves for the net's levels below the first, the max cover and the candidate
        counts, in proportion to their shares: :func:`~privclust.cluster._refine.plan_refinement`).
        """
        eps = plan.epsilon
        rest = eps * (1.0 - refine_share)
        eps_net, eps_cover, eps_weight = (rest * s for s in shares)
        eps_weight = rest - eps_net - eps_cover  # the three add up to rest exactly
        levels = [f"cell counts, level {lv}" for lv in range(1, depth + 1)]
        for name in levels:
            plan.add(name, "geometric sparse histogram", "pure", eps_net / depth)
        plan.add(RETRY_ITEM, "geometric sparse histogram", "pure", 0.0)
        plan.add(_ITEM_COVER, "exponential", "pure", eps_cover)
        plan.add(_ITEM_WEIGHT, "two-sided geometric", "pure", eps_weight)
        targets = [(lv, shares[0] / depth) for lv in levels] + [
            (_ITEM_COVER, shares[1]), (_ITEM_WEIGHT, shares[2])]
        items, reserves = plan_refinement(plan, eps - rest, d, targets, auto) \
            if refine_share else (None, [])
        return levels, items, reserves

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None):
        """Cluster X privately. ``y`` is ignored (present for scikit-learn compatibility)."""
        eps, k, depth, m, scales, rad, refine, shares, rshare = self._check_params()
        plan, accountant = self._open_plan(eps, 0.0)  # checked before any data is read
        X = self._check_X(X, reset=True)
        check_n_clusters(k, X.shape[0])
        n, d = X.shape
        bounds = self._fit_bounds(X)
        depth = _default_depth(k, d) if depth is None else depth
        # measured: ~4e-8 s per record, feature and level (cell keys), plus the assignments
        check_fit_cost(4e-8 * d * (depth + scales) + 3.4e-10 * (m * scales + 2 * k) * max(d, 2),
                       f"EMMC(n_clusters={k}, max_depth={depth}, n_candidates={m}) on {d} "
                       "features", "lower max_depth, n_candidates or n_clusters")
        source = resolve_random_state(self.random_state)
        gen = source.generator
        shift = gen.uniform(0.0, 1.0, size=d) * (bounds[:, 1] - bounds[:, 0])  # public
        tree = ShiftedGrid(bounds, shift)
        levels, items, reserves = self._plan_items(plan, depth, shares, rshare, d,
                                                   refine == "auto")
        self._reserve_plan(plan, accountant, "EMMC")
        rule = RefineRule(plan, tree, depth, k, items, reserves, _ITEM_WEIGHT) \
            if refine == "auto" else None

        engine = self._make_engine(X, bounds)
        report = self._start_report(plan.reserved(), source)
        mech = Mechanisms(source, report, plan)
        with fit_progress("EMMC", depth + 2 + int(bool(refine))) as step:
            walk = CellWalk(engine, tree, keep=scales + 1)  # the max cover reads the deepest
            if rule is not None:
                rule(engine, mech)  # decides from a released count, moves the budget
            cells = [lv.cells for lv in grow(engine, mech, tree, levels, RETRY_ITEM, step,
                                             walk=walk)]
            cand = self._max_cover(walk, mech, tree, cells, m, scales, rad,
                                   plan.item(_ITEM_COVER).epsilon, gen)
            step()
            weights = self._candidate_counts(engine, mech, cand,
                                             plan.item(_ITEM_WEIGHT).epsilon)
            step()
            centres = self._centres(cand, weights, bounds, k, gen)
            history, costs = [centres], []
            sizes = self._sizes(cand, weights, centres)
            if refine is True or (rule is not None and rule.chosen):
                n_c, sums, cost = centroid_stats(engine, centres, bounds)
                costs.append(cost)
                centres, sizes, _ = noisy_centroids(mech, n_c, sums, centres, bounds,
                                                    refine_epsilon(plan, items, rshare),
                                                    label="refinement", items=items)
                history.append(centres)
                step()
        report.notes += [
            f"net: shifted grid, {depth} levels planned, {len(cells)} released; max cover on "
            f"the {min(scales, max(len(cells), 1))} deepest, {m} choices each",
            f"{cand.shape[0]} candidates; k centres by weighted k-means on their noisy counts "
            "(post-processing)",
            *([rule.note] if rule is not None else []),
            "labels_ are the private centres applied to X (post-processing, not a release)",
        ]
        self.candidates_ = cand
        self.candidate_counts_ = weights
        self.shift_ = shift
        return finish_centre_fit(self, X, bounds, centres, sizes, history, costs, report,
                                 plan, accountant)

    # ------------------------------------------------------------------ max cover
    @staticmethod
    def _max_cover(walk, mech, tree, cells, m, scales, rad, eps_cover, gen):
        """The private greedy max cover on the deepest ``scales`` released levels (``scales *
        m`` exponential-mechanism choices in all, ``eps_cover`` split evenly). A level set
        short of levels (the net stopped early) gives its choices to the levels it has; with
        no released cell at all the universe is a public uniform sample of the box."""
        bounds = tree.box
        total = scales * m
        eps_pick = eps_cover / total
        used = list(range(len(cells)))[-scales:]
        if not used:  # nothing released: a public universe (uniform points), level-1 balls
            used = [None]
        per = [total // len(used) + (i < total % len(used)) for i in range(len(used))]
        chosen = []
        for idx, picks in zip(used, per, strict=True):
            level = 1 if idx is None else idx + 1
            if idx is None:
                universe = gen.uniform(bounds[:, 0], bounds[:, 1], size=(m, bounds.shape[0]))
            else:
                universe = tree.centres(level, cells[idx])
            width = tree.width(level)
            ex_cells, ex_counts = walk.cells(level)  # every non-empty cell of the level
            centres = tree.origin + (ex_cells + 0.5) * width
            radius = rad * float(np.sqrt(np.mean(width**2)))
            inc = coverage_matrix(universe, centres, radius)
            chosen.append(universe[EMMC._greedy(mech, inc, ex_counts, picks, eps_pick, level)])
        return np.unique(np.concatenate(chosen), axis=0)

    @staticmethod
    def _greedy(mech, inc, counts, picks, eps_pick, level):
        """``picks`` exponential-mechanism choices of the greedy max cover; a candidate
        already chosen is not offered again (public) until every one has been."""
        n_univ = inc.shape[0]
        covered = np.zeros(inc.shape[1], dtype=bool)
        taken = np.zeros(n_univ, dtype=bool)
        inc_csc = inc.tocsc()
        scores = greedy_cover_scores(inc, counts, covered)
        out = []
        for _ in range(picks):
            if taken.all():
                taken[:] = False
            offered = np.where(taken, -np.inf, scores)
            j = int(mech.select(offered, 1.0, eps_pick,
                                target=f"max cover choice, level {level}",
                                note="exponential mechanism, factor 2; score = records in "
                                "cells of the ball not covered by earlier choices: sensitivity 1",
                                item=_ITEM_COVER))
            out.append(j)
            taken[j] = True
            row = inc.indices[inc.indptr[j]:inc.indptr[j + 1]]
            new = row[~covered[row]]
            if new.size:
                covered[new] = True
                scores -= np.asarray(inc_csc[:, new] @ counts[new].astype(float)).ravel()
        return np.asarray(out, dtype=np.int64)

    # ------------------------------------------------------------------ k centres
    @staticmethod
    def _candidate_counts(engine, mech, cand, eps_weight):
        """Noisy number of records nearest each candidate (a partition: sensitivity 1)."""
        counts, _ = engine.nearest_centre_stats(cand)
        return mech.count(counts, eps_weight, target="records nearest each candidate",
                          note="the candidates' Voronoi cells partition the records",
                          item=_ITEM_WEIGHT)

    @staticmethod
    def _centres(cand, weights, bounds, k, gen):
        """k centres by weighted k-means on the candidates (post-processing); candidates with
        a noisy count below 1 weigh nothing; missing centres are public uniform draws."""
        d = bounds.shape[0]
        w = np.maximum(np.asarray(weights, dtype=float), 0.0)
        pts, w = cand[w > 0], w[w > 0]
        if pts.shape[0] <= k:
            extra = gen.uniform(bounds[:, 0], bounds[:, 1], size=(k - pts.shape[0], d))
            return np.clip(np.vstack([pts, extra]), bounds[:, 0], bounds[:, 1])
        seed = int(gen.integers(0, 2**31 - 1))  # public randomness for the post-processing
        km = KMeans(n_clusters=k, n_init=3, random_state=seed).fit(pts, sample_weight=w)
        return np.clip(km.cluster_centers_, bounds[:, 0], bounds[:, 1])

    @staticmethod
    def _sizes(cand, weights, centres):
        """Noisy candidate counts nearest every centre (post-processing)."""
        k = centres.shape[0]
        lab = nearest_centre(cand, centres)
        w = np.maximum(np.asarray(weights, dtype=float), 0.0)
        return np.rint(np.bincount(lab, weights=w, minlength=k)).astype(np.int64)
