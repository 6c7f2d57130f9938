"""CoresetKMeans: k-means that finds k itself, from a private weighted coreset.

A private tree (a randomly shifted grid, in a public random projection for wide data) releases
noisy cell counts; its leaves form a weighted coreset; the number of clusters is chosen on the
coreset and the centres are refined on the data with noisy sizes and sums.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._progress import fit_progress
from ..privacy import Mechanisms, resolve_random_state
from ._base import (
    MAX_CLUSTERS,
    PrivateClusterMixin,
    check_delta,
    check_epsilon,
    check_fit_cost,
    check_n_clusters,
    check_positive_int,
)
from ._centres import finish_centre_fit
from ._coreset.apart import apart_centres
from ._coreset.combine import (
    SUPPORT_SCALES,
    candidate_noise2,
    extra_centres,
    inverse_variance,
    lost_clusters,
    pass_on_rho,
    smallest_cluster_note,
    support_floor,
    supported,
    tree_floors,
)
from ._coreset.data import nearest_labels, projected_engine, records_for_labels, sample_scores
from ._coreset.quantile import corrected_quantile, distance_quantile
from ._coreset.refine import COUNT_SHARE, Step, ball_step, centre_variance, point_radius, step_rhos
from ._coreset.select import (
    SAMPLE_CAP,
    candidate_centres,
    candidate_ks,
    choice_odds_note,
    fit_centres,
    score_rate,
    ward_merge,
)
from ._coreset.split import SPLIT_SIZES, plan_split, pooled_centres, split_candidates, split_step
from ._coreset.tree import (
    NO_K_EQUAL_LEAVES,
    NO_K_STOP_SHARE,
    Grid,
    Space,
    capped_summary,
    count_levels,
    depth_for_k,
    equal_levels,
    grow,
    level_budgets,
    mass_stop,
)

__all__ = ["CoresetKMeans"]


#: Default budget shares: the record count, the tree, the choice of k, the refinement (with
#: ``n_clusters`` given, the choice's share goes to the refinement).
SHARES = (0.02, 0.5, 0.03, 0.45)
#: Levels of the tree (``max_depth=None``).
DEFAULT_DEPTH = 7
#: A level's budget is proportional to ``LEVEL_GROWTH ** level``.
LEVEL_GROWTH = 1.0
#: Wide data is projected to this many dimensions (``n_projected=None``).
DEFAULT_PROJECTED = 10
#: Largest projected dimension (a cell has ``2^p`` children; flat cell keys stay in 62 bits).
MAX_PROJECTED = 20
#: The largest k the choice considers: at most this, and at most ``n_hat * eps / RECORDS_PER_EPS``
#: (a cluster of fewer records than ``RECORDS_PER_EPS / eps`` is lost in the refinement's noise).
MAX_CHOSEN_K = 256
RECORDS_PER_EPS = 20.0
#: Radius of a coreset point's ball in the coreset step, in root-mean-square distances of a
#: record of its cell from the cell's centre.
BALL_FACTOR = 2.0
#: Projected fits: share of epsilon (out of the tree's) for a private quantile of the records'
#: distances from the middle of the bounds; the refinement's balls about the middle have
#: ``RADIUS_MARGIN`` times that radius (at most the bounds' half-diagonal).
RADIUS_SHARE = 0.02
RADIUS_QUANTILE = 0.9
RADIUS_MARGIN = 1.5
#: Wide data (over ``SELECT_MAX_FEATURES`` features): the quantile and margin of that radius.
#: There the records' distances from the middle concentrate (in 100 dimensions they vary by a
#: few per cent), so a tighter ball loses few records, and the recovery's noise, which grows
#: with the ball's radius, sets how far the Lloyd steps have to go.
WIDE_RADIUS_QUANTILE = 0.95
WIDE_RADIUS_MARGIN = 1.1
#: Restarts of the weighted k-means on the coreset (post-processing).
N_INIT = 3
#: Without k (up to ``SELECT_MAX_FEATURES`` features): a refined coreset point is kept for the
#: choice when its noisy size reaches this many noise scales of the coreset step's count (given
#: k: ``SUPPORT_SCALES``, 3). On thin coresets a cluster's records are split among coreset
#: points that each fall below three scales, and the choice lost the cluster (sipu_s2 at
#: epsilon 0.5: ARI 0.62 with 3, 0.76 with 2, 0.86 with 1; six blobs in 4-d: 7 clusters on 1,
#: 2 and 4 of 18 fits with 3, 2 and 1).
CHOICE_SUPPORT_SCALES = 2.0
#: The choice of k scores the records of a Poisson sample of rate ``SCORE_SAMPLE / (eps_select
#: * n_hat)`` (public: a constant, the choice's epsilon and the released record count; every
#: record when that is 1 or more): about ``SCORE_SAMPLE / eps_select`` records, so the
#: exponential mechanism prefers a candidate whose records' mean silhouette is higher by 0.01
#: with odds of at least ``e^(0.01 * SCORE_SAMPLE)`` however many records there are. Scored in
#: at most ``NO_K_MAX_DIMS`` dimensions, at most about ``SAMPLE_CAP`` (16,000) records.
SCORE_SAMPLE = 400.0
#: Share of the refinement's budget for the step at the coreset's resolution (one cluster per
#: coreset point), before k is chosen; the rest goes to the ``n_lloyd`` steps at k.
OVER_SHARE = 0.5
#: Wide data (more than ``SELECT_MAX_FEATURES`` features): Lloyd steps with ``n_lloyd=None``
#: and the recovery's share of the refinement (the rest split evenly among the steps): each
#: step's ball shrinks with the centres' noise, so a few steps reach the clusters' own spread.
WIDE_N_LLOYD = 3
#: Wide data given k: the clusters chosen in the projection are this many times k (at most the
#: coreset's size); those the recovery's noisy sizes do not support are dropped (at least k
#: kept, the largest), and the closest of the rest are merged down to k (Ward's cost on the
#: noisy sizes: post-processing). The coreset's leaves split some clusters in two and
#: hold two clusters in one now and then; with exactly k clusters, k-means on the coreset
#: would have to merge two distinct clusters for every split one.
GIVEN_K_OVER = 1.3
#: Given k, data up to ``SELECT_MAX_FEATURES`` features (``max_depth=None``): when the released
#: record count and epsilon leave the tree fewer than ``GIVEN_K_LEAVES`` possible leaves per
#: cluster (:func:`~privclust.cluster._coreset.tree.leaf_capacity`), the tree stops at the
#: deepest level that has them (at least ``GIVEN_K_MIN_DEPTH``), and the levels not grown give
#: their budget to those that are; and ``n_lloyd=None`` means ``GIVEN_K_N_LLOYD`` steps (a thin
#: coreset starts some centres as copies of its heaviest points, which a second step separates).
GIVEN_K_LEAVES = 4.0
GIVEN_K_MIN_DEPTH = 4
GIVEN_K_N_LLOYD = 2
#: Without k, trees of at most ``NO_K_MAX_DIMS`` dimensions (``max_depth=None``): the tree
#: stops by :func:`~privclust.cluster._coreset.tree.mass_stop` and a refined point is kept for
#: the choice at ``NO_K_SUPPORT_SCALES`` noise scales of its count; level ``l``'s budget is
#: proportional to ``NO_K_GROWTH ** l`` (deep cells hold pieces of clusters), re-split equally
#: in more than ``NO_K_GROWTH_MAX_DIMS`` dimensions when the released record count leaves room
#: for many leaves (:func:`~privclust.cluster._coreset.tree.equal_levels`). Wider trees keep
#: equal budgets (a threshold grows with ``ln 2^p``). See the documentation.
NO_K_MAX_DIMS = 5
NO_K_GROWTH = 1.3
NO_K_GROWTH_MAX_DIMS = 2
NO_K_SUPPORT_SCALES = 1.0
WIDE_FIRST_SHARE = 0.4
#: Data with more features ("wide") chooses k among clusterings of the coreset in the
#: projection, scored there (the k-d tree's distances cost O(d) each, and each refined point's
#: noise grows with d), then recovers the chosen clusters; narrower data refines the coreset
#: first and scores the records in the original coordinates.
SELECT_MAX_FEATURES = 50
#: The Lloyd steps, in the original space. The centres' noise variances are public
#: (the mechanisms' scales, the released sizes and radii); a record goes to the centre that
#: minimises its squared distance less the centre's expected squared noise (the expected
#: squared distance from the cluster's mean), and centre ``j``'s ball has radius
#: ``BALL_MARGIN * sqrt(s^2 + noise_j^2)``, ``s`` a private ``BALL_QUANTILE`` quantile
#: of those corrected distances (``BALL_RADIUS_SHARE`` of the step's epsilon). Each step's
#: centres are averaged with the previous ones by their noise variances. A step whose noisy
#: sizes show that a ball lost its cluster (:func:`~privclust.cluster._coreset.combine.
#: lost_clusters`: the centre's noise was in the upper tail, beyond the ball) drops that
#: estimate, raises the centre's variance to at least the ball's ``radius^2 / d`` (the
#: cluster lies beyond it), and from then on that centre's balls are ``LOST_WIDEN`` times
#: wider per loss.
BALL_QUANTILE = 0.9
BALL_MARGIN = 1.15
BALL_RADIUS_SHARE = 0.1
LOST_WIDEN = 2.0
_ITEM_COUNT = "record count"
_ITEM_SELECT = "choice of k"
_ITEM_RADIUS = "data radius"
_ITEM_SUMS = "cluster sums, every step"
_RETRY = "cell counts, retry of the last level"


class CoresetKMeans(PrivateClusterMixin):
    """k-means that finds the number of clusters itself, from a private weighted coreset.

    1. **Bounds and a record count.** With ``bounds="private"`` 10% of epsilon estimates the
       bounds (:func:`privclust.private_bounds`); a noisy record count ``n_hat`` follows (it
       sets delta with ``delta=None`` and caps the k considered).
    2. **A private tree** (the randomly shifted quadtree of HST k-means, Cohen-Addad et al. KDD
       2022; for more than ``n_projected`` features, in a public random projection of the clipped
       records, as in DPCube, Balcan et al. ICML 2017): level by level the record counts of the
       children of every released cell, released with the linear-time pure-DP sparse histogram
       (equal budgets per level; without k on at most ``NO_K_MAX_DIMS`` dimensions stopping
       where a level's significant cells hold under ``NO_K_STOP_SHARE`` of the level above's,
       growing by ``NO_K_GROWTH`` per level, or equal in over ``NO_K_GROWTH_MAX_DIMS`` when the
       released record count leaves room for ``NO_K_EQUAL_LEAVES`` leaves). Projected, a
       private quantile of the distances from the middle of the bounds narrows the projected
       box and sets the balls' radius.
    3. **The coreset**: the released leaves at their centres, each with its noisy count (a
       cell's noisy count less its released children's is shared among them; for data over
       50 features a rest that reaches the children's significance floor stays on the cell,
       a leaf of its own) and the spread of a record over its cell. Its size comes from
       ``n_hat`` and epsilon through the tree's thresholds (a leaf holds at least about
       ``ln(2^p / 0.25) / eps_level`` records), not from k; in 3 or more tree dimensions at
       most ``CORESET_CAP`` (2,048) points, a tree with more leaves splitting only its heaviest
       cells (:func:`~privclust.cluster._coreset.tree.capped_summary`: post-processing).
    4. **One cluster per coreset point, refined** (up to 50 features): the records nearest
       each point, restricted to a ball about it, give a noisy size and a noisy sum
       (:mod:`privclust.cluster._coreset.refine`): the coreset moved onto the data's means.
    5. **The choice of k** (:mod:`privclust.cluster._coreset.select`): for every candidate k,
       weighted k-means on the refined points (post-processing; without k, the points whose noisy
       size reaches ``CHOICE_SUPPORT_SCALES`` noise scales of the step's count, or
       ``NO_K_SUPPORT_SCALES`` on trees of at most ``NO_K_MAX_DIMS`` dimensions: a cluster split
       among several coreset points keeps them) gives k centres; the exponential mechanism picks one
       candidate by the simplified silhouette (squared distances less each centre's public expected
       squared noise) summed over the records of a Poisson sample of public
       rate (about ``SCORE_SAMPLE / eps_select`` records, every record of smaller data; sensitivity
       1, however many candidates); then (trees of at most ``NO_K_MAX_DIMS`` dimensions) refined
       points standing apart from the chosen centres get centres of their own
       (:mod:`privclust.cluster._coreset.apart`). Wider data chooses among clusterings of the
       coreset in the projection, then recovers the chosen clusters' means in the original space
       (records by nearest projected centre; each cluster's ball about the middle of the bounds
       moved by the pseudo-inverse of the projection applied to its projected centre, the radius
       reduced to match). Clusters whose noisy size is below three noise scales are dropped there
       (an empty cluster's centre would sit among the records). Given ``n_clusters``, weighted
       k-means with that k replaces the choice (wide data: with ``GIVEN_K_OVER`` times k, the
       unsupported dropped and the rest merged down to k after the recovery; points the coreset
       lacks start as copies of its heaviest points). A thin coreset without k: a split step
       before the choice gives it candidates finer than the coreset (``_coreset.split``).
    6. **Lloyd steps** (``n_lloyd``; None: 1, 2 given k, and 3 for data over 50 features), in the
       original space: noisy sizes and sums of the records nearest every centre, each
       restricted to a ball about its centre whose radius is a private quantile of the
       records' distances from their centres (corrected for the centres' public noise
       variances); each step's centres are averaged with the previous ones by those
       variances (the first step's previous centres carry the noise of the refined coreset
       points they were made of). A ball whose noisy size shows it lost most of its cluster
       gives no estimate, and that centre's later balls are twice as wide.

    Privacy guarantee
    -----------------
    ``(epsilon, delta)``-DP under add/remove-one-record neighbours (``delta=0``: pure
    ``epsilon``-DP, with Laplace noise on the sums), by basic composition of the line items of one
    plan, checked before any data is read: the bounds (private ones only), the record count
    (two-sided geometric, sensitivity 1), the radius (projected data: the exponential mechanism over
    the gaps of the distances, each record's rank moving by at most 1; likewise before every Lloyd
    step, from the step's budget; above ``GRID_QUANTILE_RECORDS`` released records over a public
    grid of candidates, from exact counts, sensitivity 1), the tree's levels (each level's cells
    partition the records:
    sensitivity 1 per level; a level that releases nothing, or where the tree stops, is released
    once more with the budget of the levels below, a privacy filter, so every path spends the plan;
    given k, how many levels grow, and so each level's budget, is chosen from the released record
    count, the total unchanged: again a filter), the choice of k (exponential mechanism, sensitivity
    1: the candidates are public, computed from released values, and each record of the sample adds
    one term in ``[0, 1]``, a function of the record and public values, to every score, rounded down
    to a public grid and summed exactly; a record's place in the Poisson sample is one public
    uniform draw of its own, so adding or removing a record adds or removes at most its own term;
    the scores are monotone, so without the factor 2; no amplification by the sampling is claimed)
    and every refinement step, the split step of a thin coreset included (sizes: two-sided
    geometric, sensitivity 1; sums of ``(x - a) / r``
    over records within ``r`` of ``a``: every term in the unit ball, L2 sensitivity 1 for the
    Gaussian mechanism, L1 ``sqrt(d)`` for Laplace; the clusters are disjoint, so each step is one
    release of each). With ``delta > 0`` the sums of all the steps form one zCDP block (Bun and
    Steinke, TCC 2016, Prop. 1.6 and Lemma 2.3): step ``i`` adds Gaussian noise of scale ``1 /
    sqrt(2 rho_i)``, the ``rho_i`` (in proportion to the steps' epsilon) sum to the block's rho, and
    the ledger converts that rho once to the block's epsilon at the plan's delta; ``delta=None``
    takes ``min(1e-5, n_hat^-1.5)`` from the released count and reserves 1e-5. Everything else (the
    projection, the grid's shift and the k-means seeds: public randomness; the coreset, the
    candidates, the balls' anchors and radii, which clusters are kept, which balls lost theirs:
    post-processing of released values) reads no record. Records are clipped to the bounds. The
    sparse histograms are pure DP in the Real-RAM model (their tail sampling uses floating-point
    draws).

    Choices by measurement
    ----------------------
    The figures behind every default above (``benchmarks/default.py``) are on this estimator's
    page of the documentation (``docs/estimators/coreset.md``, "Choices by measurement").

    Parameters
    ----------
    n_clusters : int or None
        k, when known; None (default): chosen by the fit.
    epsilon : float
        Privacy budget (> 0).
    delta : float or None
        None: the delta rule from the released record count; 0: pure DP (Laplace sums).
    bounds : tuple, array or "private"
        Public bounds, ``(lo, hi)`` for every feature or a ``(d, 2)`` array, or ``"private"``
        (estimated with 10% of epsilon). Required.
    max_clusters : int or None
        The largest k the choice considers (None: ``min(256, n_hat * epsilon / 20)``, and at
        most the coreset's size).
    n_projected : int or None
        Data with more features is projected to this many dimensions for the tree (None:
        10; at most 20).
    max_depth : int or None
        Levels of the tree (None: 7; given ``n_clusters`` on data up to 50 features, fewer,
        down to 4, when the released record count and epsilon leave the tree room for fewer
        than 4 leaves per cluster; the levels not grown give their budget to the others;
        without k on at most 5 features, levels' budgets growing by 1.3 per level, or equal
        on 3 to 5 when the released record count leaves room for 256 leaves).
    n_lloyd : int or None
        Lloyd steps after the choice of k (None: 1; 2 given ``n_clusters``; 3 for data over 50
        features).
    shares : tuple of four floats or None
        Budget shares of the record count, the tree, the choice of k and the refinement
        (None: 0.02, 0.5, 0.03, 0.45); with ``n_clusters`` given, the choice's share goes to the
        refinement.
    random_state : None, int or Generator
        None (secure), int or Generator (reproducible, not secure).
    accountant : Accountant or None
        A shared :class:`~privclust.Accountant` (checked before any data is read).

    Attributes
    ----------
    ``cluster_centers_`` : ndarray (k, d)
        The private centres, inside the bounds.
    ``cluster_sizes_`` : ndarray (k,)
        Noisy sizes of the last refinement step (of the last step whose ball held the
        cluster, for a cluster the last ball lost).
    ``n_clusters_`` : int
        The number of centres released (chosen, or ``n_clusters``).
    ``labels_`` : ndarray (n,)
        Nearest private centre of every training row (post-processing of the private model
        applied to X, not a release).
    ``n_iter_`` : int
        Refinement steps after the centres were first placed.
    ``candidate_ks_`` : ndarray
        The values of k the choice considered (empty when k was given).
    ``coreset_``, ``coreset_weights_``, ``coreset_spread_`` : ndarray
        The coreset: points (in the tree's coordinates), noisy weights, spreads.
    ``n_hat_`` : int
        The released record count.
    ``projection_`` : ndarray (p, d) or None
        The public projection of the tree (None: not projected).
    ``delta_`` : float
        The delta used (0 for pure DP).
    ``bounds_`` : ndarray (d, 2)
        The bounds the records were clipped to.
    ``centers_history_``, ``cost_history_`` : ndarray
        Centres before and after every Lloyd step; exact costs (local diagnostics, NOT private,
        never part of the release).
    ``n_features_in_`` : int
        Number of features.
    ``privacy_report_`` : PrivacyReport
        Every release, its mechanism and epsilon.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from privclust import CoresetKMeans
    >>> X, _ = make_blobs(20000, 2, centers=5, cluster_std=0.5, center_box=(-10, 10),
    ...                   random_state=1)
    >>> model = CoresetKMeans(epsilon=0.5, bounds=(-12, 12), random_state=0).fit(X)
    >>> model.n_clusters_, model.labels_.shape
    (5, (20000,))
    >>> round(model.privacy_report_.total().epsilon, 6)
    0.5
    """

    releases_cluster_sizes = True

    @staticmethod
    def keeps_zcdp_block(delta) -> bool:
        """With ``delta`` > 0 or None the refinement's sums are one zCDP block; ``delta=0``:
        Laplace sums, pure epsilon-DP, no zCDP block."""
        return delta is None or delta > 0

    def __init__(
        self,
        n_clusters=None,
        *,
        epsilon=1.0,
        delta=None,
        bounds=None,
        max_clusters=None,
        n_projected=None,
        max_depth=None,
        n_lloyd=None,
        shares=None,
        random_state=None,
        accountant=None,
    ):
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.max_clusters = max_clusters
        self.n_projected = n_projected
        self.max_depth = max_depth
        self.n_lloyd = n_lloyd
        self.shares = shares
        self.random_state = random_state
        self.accountant = accountant

    # ------------------------------------------------------------------ parameters and plan
    def _check_params(self):
        eps = check_epsilon(self.epsilon)
        delta = check_delta(self.delta)
        k = None if self.n_clusters is None else check_n_clusters(self.n_clusters)
        k_cap = None if self.max_clusters is None else check_positive_int(
            self.max_clusters, "max_clusters", upper=MAX_CLUSTERS)
        if k_cap is not None and k_cap < 2:
            raise ValueError(f"max_clusters must be an int >= 2, got {self.max_clusters!r}")
        p = None if self.n_projected is None else check_positive_int(
            self.n_projected, "n_projected", upper=MAX_PROJECTED)
        depth = DEFAULT_DEPTH if self.max_depth is None else check_positive_int(
            self.max_depth, "max_depth", upper=30)
        n_lloyd = self.n_lloyd
        if n_lloyd is not None and (isinstance(n_lloyd, bool) or not isinstance(
                n_lloyd, numbers.Integral) or not 0 <= n_lloyd <= 10):
            raise ValueError(f"n_lloyd must be None or an int from 0 to 10, got {n_lloyd!r}")
        shares = SHARES if self.shares is None else self.shares
        arr = np.asarray(shares, dtype=float) if not isinstance(shares, str) else np.zeros(0)
        if arr.shape != (4,) or not np.isfinite(arr).all() or (arr <= 0).any() or \
                abs(arr.sum() - 1.0) > 1e-9:
            raise ValueError("shares must be four numbers (record count, tree, choice of k, "
                             "refinement), each positive, summing to 1; got "
                             f"{shares!r}")
        if k is not None:  # nothing to choose: the choice's share refines the centres
            arr = np.array([arr[0], arr[1], 0.0, arr[2] + arr[3]])
        return eps, delta, k, k_cap, p, depth, n_lloyd, arr

    @staticmethod
    def _steps(n_lloyd: int, wide: bool) -> list[str]:
        """Labels of the refinement's releases: the step at the coreset's resolution, then the
        Lloyd steps; wide data: the recovery of the clusters chosen in the projection first."""
        first = "recovery" if wide else "coreset step"
        return [first] + [f"Lloyd step {i + 1}" for i in range(n_lloyd)]

    @staticmethod
    def _plan_items(plan, depth, shares, steps, pure, projected, wide, growth):
        """Line items: the record count, one per tree level (and the retry), the sizes and
        sums of every refinement step (wide data: a Lloyd step's ball radius first). Returns
        ``(levels, budgets, step items, eps_steps)``."""
        eps = plan.epsilon
        eps_count = eps * shares[0]
        eps_select = eps * shares[2]
        eps_refine = eps * shares[3] if steps else 0.0
        eps_radius = eps * RADIUS_SHARE if projected else 0.0
        eps_tree = eps - eps_count - eps_select - eps_refine - eps_radius
        plan.add(_ITEM_COUNT, "two-sided geometric", "pure", eps_count)
        if projected:
            plan.add(_ITEM_RADIUS, "exponential (quantile)", "pure", eps_radius)
        if eps_select:
            plan.add(_ITEM_SELECT, "exponential", "pure", eps_select)
        budgets = level_budgets(eps_tree, depth, growth)
        levels = [f"cell counts, level {lv}" for lv in range(1, depth + 1)]
        for name, b in zip(levels, budgets, strict=True):
            plan.add(name, "geometric sparse histogram", "pure", b)
        plan.add(_RETRY, "geometric sparse histogram", "pure", 0.0)
        over = (WIDE_FIRST_SHARE if wide else OVER_SHARE) if len(steps) > 1 else 1.0
        eps_steps = [eps_refine * over] + [eps_refine * (1 - over) / max(len(steps) - 1, 1)] * (
            len(steps) - 1) if steps else []
        items = []
        for i, label in enumerate(steps):
            names = (f"cluster sizes, {label}",
                     f"cluster sums, {label}" if pure else _ITEM_SUMS)
            if i:  # a Lloyd step: its balls' radius first
                names += (f"ball radius, {label}",)
                plan.add(names[2], "exponential (quantile)", "pure",
                         BALL_RADIUS_SHARE * eps_steps[i])
                eps_steps[i] *= 1 - BALL_RADIUS_SHARE
            eps_step = eps_steps[i]
            plan.add(names[0], "two-sided geometric", "pure", COUNT_SHARE * eps_step)
            if pure:
                plan.add(names[1], "laplace", "pure", (1 - COUNT_SHARE) * eps_step)
            items.append(names)
        if steps and not pure:  # every step's sums: one zCDP block (module docstring)
            plan.add(_ITEM_SUMS, "gaussian (zCDP)", "zcdp",
                     (1 - COUNT_SHARE) * sum(eps_steps), delta_share=1.0)
        return levels, budgets, items, eps_steps

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None):
        """Cluster X privately. ``y`` is ignored (present for scikit-learn compatibility)."""
        eps, delta, k_user, k_cap, p_user, depth, n_lloyd, shares = self._check_params()
        pure_plan = delta == 0
        plan, accountant = self._open_plan(eps, 0.0 if pure_plan else delta)
        X = self._check_X(X, reset=True)
        if k_user is not None:
            check_n_clusters(k_user, X.shape[0])
        d = X.shape[1]
        p = min(d, DEFAULT_PROJECTED if p_user is None else p_user)
        wide = p < d and d > SELECT_MAX_FEATURES
        if n_lloyd is None:
            n_lloyd = WIDE_N_LLOYD if wide else 1 if k_user is None else GIVEN_K_N_LLOYD
        steps = self._steps(n_lloyd, wide)
        # measured: ~6e-8 s per record, projected dimension and level (cell keys), the
        # projection, and ~4e-10 s per record, centre and feature per refinement step
        check_fit_cost(6e-8 * p * depth + 2e-9 * d * p * (p < d)
                       + 4e-10 * (k_user or MAX_CHOSEN_K) * d * max(len(steps), 1),
                       f"CoresetKMeans(max_depth={depth}, n_projected={p}) on {d} features",
                       "lower max_depth, n_projected or n_clusters")
        bounds = self._fit_bounds(X)
        source = resolve_random_state(self.random_state)
        gen = source.generator
        space = Space(bounds, p, gen)  # public randomness
        shift = gen.uniform(0.0, 1.0, size=p)  # public: the grid's shift, in box widths
        no_k = k_user is None and self.max_depth is None and not wide and p <= NO_K_MAX_DIMS
        levels, budgets, items, eps_steps = self._plan_items(plan, depth, shares, steps, pure_plan,
            space.projected, wide, NO_K_GROWTH if no_k else LEVEL_GROWTH)
        plan_split(plan, pure_plan) if no_k and not space.projected and n_lloyd >= 1 else None
        self._reserve_plan(plan, accountant, "CoresetKMeans")

        engine = self._make_engine(X, bounds)
        report = self._start_report(plan.reserved(), source)
        mech = Mechanisms(source, report, plan)
        with fit_progress("CoresetKMeans", depth + 2 + len(steps)) as step:
            # unprojected, the tree's grid is public now: its levels counted with the records
            ahead = None if space.projected else count_levels(engine, Grid(
                space.box, shift * (space.box[:, 1] - space.box[:, 0])), depth)
            n_hat = self._record_count(engine, mech, plan, plan.epsilon * shares[0],
                                       None if ahead is None else ahead.n)
            if k_user is not None and self.max_depth is None and not wide:
                levels, budgets = self._given_k_levels(plan, levels, budgets, k_user, n_hat, p)
            elif no_k and p > NO_K_GROWTH_MAX_DIMS:  # thick trees of 3-5 dims: equal levels
                budgets = equal_levels(plan, levels, budgets, n_hat, p, NO_K_EQUAL_LEAVES)
            rho = self._data_radius(engine, mech, space, wide, n_hat) if space.projected else None
            space.fit_box(rho)  # projected only
            tree_engine = projected_engine(engine, space)
            grid = Grid(space.box, shift * (space.box[:, 1] - space.box[:, 0]))
            released = grow(tree_engine, mech, grid, levels, budgets, _RETRY, step,
                            stop=mass_stop(n_hat, NO_K_STOP_SHARE) if no_k else None,
                            ahead=ahead)
            points, weights, spread2, cut = capped_summary(grid, released, keep_rest=wide)
            report.notes += cut
            step()
            budgets_ = [Step(names, e, r) for names, e, r in zip(
                items, eps_steps, step_rhos(plan, eps_steps, pure_plan, _ITEM_SUMS), strict=True)]
            k, centres, ks, sizes, history = self._centres(
                engine, tree_engine, mech, space, grid, points, weights, spread2, budgets_,
                rho, (k_user, k_cap, n_hat, eps), gen, step)
        if plan.has_item(SPLIT_SIZES) and plan.item(SPLIT_SIZES).epsilon > 0:
            steps = [steps[0], "split step (thin coreset, before the choice of k)", *steps[2:]]
        report.notes += self._notes(space, depth, released, points, k, k_user, steps)
        # the smallest findable cluster, from the budgets spent (as plan() says, with or
        # without k): a centre of its own needs SUPPORT_SCALES (the recovery's floor)
        report.notes.append(smallest_cluster_note(tree_floors(
            released, budgets, space.box.shape[0]), support_floor(eps_steps[0])
            if eps_steps else 0.0))
        self.coreset_ = points
        self.coreset_weights_ = weights
        self.coreset_spread_ = spread2
        self.candidate_ks_ = np.asarray(ks, dtype=np.int64)
        self.n_hat_ = int(n_hat)
        self.projection_ = space.G
        self.delta_ = 0.0 if pure_plan else float(plan.delta)
        return finish_centre_fit(self, records_for_labels(engine, X), bounds, centres, sizes,
                                 history, [], report, plan, accountant)

    def _centres(self, engine, tree_engine, mech, space, grid, points, weights, spread2,
                 steps, rho, choice, gen, step):
        """From the coreset to the released centres. Up to ``SELECT_MAX_FEATURES`` features:
        one cluster per coreset point refined on the data (:meth:`_overcluster`), k chosen
        among merges of those (scored on the records), then the Lloyd steps. Wider data
        (projected): k chosen among clusterings of the coreset in the projection, the chosen
        clusters recovered in the original space, then the Lloyd steps. Returns ``(k, centres,
        candidate ks, noisy sizes, history)``."""
        d = space.bounds.shape[0]
        if space.projected and d > SELECT_MAX_FEATURES:
            k_user = choice[0]
            # given k, a few clusters more than k in the projection (as many as the coreset
            # holds, and never fewer than k), merged down to k at the end
            over = None if k_user is None else max(k_user, min(
                points.shape[0], int(np.ceil(GIVEN_K_OVER * k_user))))
            _, proj, ks = self._choose(tree_engine, grid.box, points, weights, over,
                                       *choice[1:], gen, mech)
            labels = nearest_labels(tree_engine, proj)
            anchors, radius = space.recovery_balls(proj, rho)
            first = steps[0]
            R, R_sizes = ball_step(engine, mech, labels, anchors, radius, first.epsilon,
                                   items=first.names, label="recovery", bounds=space.bounds,
                                   rho=first.rho)
            keep = supported(R_sizes, first.epsilon, at_least=choice[0] or 1)
            R, R_sizes = R[keep], R_sizes[keep]
            step()
            var = centre_variance(radius[keep], R_sizes, first.epsilon, first.rho, d)
            if k_user is not None and R.shape[0] > k_user:
                R, R_sizes, var = ward_merge(R, R_sizes, k_user, var)
            centres, sizes, history = self._lloyd(engine, mech, space, R, R_sizes, var,
                                                  steps[1:], step, choice[2])
            return centres.shape[0], centres, ks, sizes, history
        else:
            R, R_sizes, R_spread = self._overcluster(engine, tree_engine, mech, space, points,
                                                     spread2, steps[0], rho)
            if R.shape[0]:  # points the data does not support would draw a centre of their own
                keep = supported(R_sizes, steps[0].epsilon, scales=SUPPORT_SCALES if choice[0]
                                 is not None else self._choice_scales(space.box.shape[0]))
                R, R_sizes = R[keep], R_sizes[keep]
                R_spread = None if R_spread is None else R_spread[keep]
            # the refined points' noise (public), carried by the centres made of them
            first_radius = np.zeros(0) if not R.shape[0] else np.full(R.shape[0], rho) \
                if space.projected else point_radius(R_spread, space.bounds, BALL_FACTOR)
            R_var = centre_variance(first_radius, R_sizes, steps[0].epsilon, steps[0].rho, d)
            split = split_step(engine, mech, space, R, R_sizes, first_radius, steps[1])
            if split is not None:  # it took the first Lloyd step's budget
                steps = [steps[0], *steps[2:]]
                step()
            k, centres, ks = self._choose(engine, space.bounds, R, R_sizes, *choice, gen,
                                          mech, var=R_var, split=split)
            if choice[0] is None and k > 1 and space.box.shape[0] <= NO_K_MAX_DIMS:
                centres = apart_centres(R, R_sizes, d * R_var, centres,  # post-processing
                                        support_floor(steps[0].epsilon),
                                        self._k_max(choice, R.shape[0]) - k)
            if points.shape[0] == 0:  # no coreset step ran: its share of the sums' block
                steps = pass_on_rho(mech, steps, _ITEM_SUMS)
        step()
        centres, sizes, var = pooled_centres(centres, (R, R_sizes, R_var), split)
        # the centres' sizes are sums over the refined points nearest them, not a release about
        # these clusters: the first Lloyd step has nothing to compare its sizes with
        centres, sizes, history = self._lloyd(engine, mech, space, centres, sizes, var,
                                              steps[1:], step, choice[2], sizes_released=False)
        return centres.shape[0], centres, ks, sizes, history

    @staticmethod
    def _record_count(engine, mech, plan, epsilon, n=None) -> int:
        """The noisy number of records (sensitivity 1); with ``delta=None`` it fixes delta.
        ``n``: the exact count, when a pass already took it."""
        n = engine.count(engine.root()) if n is None else np.array([n], dtype=np.int64)
        n_hat = int(mech.count(np.asarray(n, dtype=np.int64), epsilon, target="record count",
                               note="one count of all records: sensitivity 1",
                               item=_ITEM_COUNT)[0])
        if plan.delta_rule:
            plan.resolve_delta(max(n_hat, 1), "the released record count")
        return max(n_hat, 0)

    @staticmethod
    def _given_k_levels(plan, levels, budgets, k, n_hat, p):
        """Given k: the tree's levels cut to :func:`depth_for_k` of the released record count,
        the levels not grown giving their budget to the others in equal parts (a privacy filter:
        budgets chosen from released values, the plan's total unchanged). Returns the levels
        and their budgets."""
        grown = depth_for_k(k, n_hat, math.fsum(budgets), p, len(levels), GIVEN_K_LEAVES,
                            GIVEN_K_MIN_DEPTH)
        if grown == len(levels):
            return levels, budgets
        plan.spread_unspent(levels[grown:], levels[:grown],
                            f"given k = {k}, {grown} levels: the deepest tree with room for "
                            f"{GIVEN_K_LEAVES:g} leaves per cluster (at least "
                            f"{GIVEN_K_MIN_DEPTH} levels), from the released record count")
        return levels[:grown], [plan.item(name).epsilon for name in levels[:grown]]

    @staticmethod
    def _choice_scales(p) -> float:
        return NO_K_SUPPORT_SCALES if p <= NO_K_MAX_DIMS else CHOICE_SUPPORT_SCALES

    @staticmethod
    def _data_radius(engine, mech, space, wide, n_hat) -> float:
        """Projected fits: ``RADIUS_MARGIN`` times a private ``RADIUS_QUANTILE`` quantile of
        the records' distances from the middle of the bounds (the exponential mechanism over
        the gaps, log scale, or on a public grid above ``GRID_QUANTILE_RECORDS`` released
        records; the rank of a distance moves by at most 1), at most the bounds'
        half-diagonal; wide data: ``WIDE_RADIUS_MARGIN`` and ``WIDE_RADIUS_QUANTILE``."""
        quantile, margin = (WIDE_RADIUS_QUANTILE, WIDE_RADIUS_MARGIN) if wide else (
            RADIUS_QUANTILE, RADIUS_MARGIN)
        bounds = space.bounds
        top = float(np.sqrt(np.sum(((bounds[:, 1] - bounds[:, 0]) / 2.0) ** 2)))
        q = distance_quantile(engine, mech, n_hat, space.mid, quantile, top * 1e-6, top,
                              mech.plan.item(_ITEM_RADIUS).epsilon, target=f"{quantile:g} "
                              "quantile of the distances from the middle of the bounds",
                              item=_ITEM_RADIUS)
        return min(top, margin * q)

    def _overcluster(self, engine, tree_engine, mech, space, points, spread2, first, rho):
        """One cluster per coreset point, refined on the data: the records nearest each point
        (in the tree's coordinates) and their noisy size and sum. Unprojected, each record is
        restricted to a ball about its point (``BALL_FACTOR`` times the root-mean-square
        distance of a point of the cell from its centre); projected, to the ball of radius
        ``rho`` about the middle of the bounds (a cell bounds only the projection). Returns
        ``(centres (m, d), noisy sizes (m,), spread (m,) or None)``."""
        bounds = space.bounds
        d = bounds.shape[0]
        m = points.shape[0]
        if m == 0:
            for name in first.names:
                if name != _ITEM_SUMS:  # the block's later steps may still spend it
                    mech.plan.leave_unspent(name, "the tree released no cell")
            return np.zeros((0, d)), np.zeros(0, dtype=np.int64), None
        if space.projected:
            labels = nearest_labels(tree_engine, points)
            R, sizes = ball_step(engine, mech, labels, np.tile(space.mid, (m, 1)),
                                 np.full(m, rho), first.epsilon, items=first.names,
                                 label="coreset step", bounds=bounds, rho=first.rho)
            return R, sizes, None
        anchors = np.clip(points, bounds[:, 0], bounds[:, 1])
        radius = point_radius(spread2, bounds, BALL_FACTOR)
        labels = nearest_labels(engine, anchors)
        R, sizes = ball_step(engine, mech, labels, anchors, radius, first.epsilon,
                             items=first.names, label="coreset step", bounds=bounds,
                             rho=first.rho)
        return R, sizes, spread2

    @staticmethod
    def _k_max(choice, m) -> int:
        """The largest k considered (public): ``choice`` is ``(k_user, k_cap, n_hat, eps)``."""
        _, k_cap, n_hat, eps = choice
        return min(MAX_CHOSEN_K, k_cap or MAX_CHOSEN_K, m, int(n_hat * eps / RECORDS_PER_EPS))

    @staticmethod
    def _choose(Z, box, P, sizes, k_user, k_cap, n_hat, eps, gen, mech, var=None, split=None):
        """k and its centres from the weighted points ``P`` (post-processing of released
        values). Given k: weighted k-means (centres the points cannot supply are uniform public
        draws in ``box``). Otherwise one candidate per k of
        :func:`~privclust.cluster._coreset.select.candidate_ks` and the exponential mechanism on
        the records' silhouette sums (``Z``: the engine of the records in the coordinates of
        ``P``; sensitivity 1). ``var``: the points' noise variances (public); each candidate
        centre's expected squared noise
        (:func:`~privclust.cluster._coreset.combine.candidate_noise2`) is taken off the
        records' squared distances to it. ``split``: see :func:`~privclust.cluster._coreset.
        split.split_candidates`. Returns ``(k, centres, ks)``."""
        w = np.maximum(np.asarray(sizes, dtype=float), 0.0)
        var = None if var is None else np.asarray(var, dtype=float)[w > 0]
        P, w = P[w > 0], w[w > 0]
        m = P.shape[0]
        if k_user is not None:
            centres = fit_centres(P, w, k_user, int(gen.integers(0, 2**31 - 1)), N_INIT)
            return k_user, np.vstack([centres, extra_centres(
                P, w, k_user - centres.shape[0], box, gen)]), []
        k_max = CoresetKMeans._k_max((k_user, k_cap, n_hat, eps), m)
        if k_max < 2:
            mech.plan.leave_unspent(_ITEM_SELECT, f"{m} coreset point(s): nothing to choose")
            centre = np.average(P, axis=0, weights=w)[None] if m else box.mean(axis=1)[None]
            return 1, centre, []
        ks = candidate_ks(k_max)
        cands = candidate_centres(P, w, ks, int(gen.integers(0, 2**31 - 1)), N_INIT)
        eps_select = mech.plan.item(_ITEM_SELECT).epsilon
        rate = score_rate(n_hat, eps_select, SCORE_SAMPLE, SAMPLE_CAP if box.shape[0] <=
                          NO_K_MAX_DIMS else np.inf)  # public values only
        noise2 = None if var is None else candidate_noise2(P, w, var, cands)
        cands, ks, noise2, anchors, fine = split_candidates(split, cands, ks, noise2, P, min(
            MAX_CHOSEN_K, k_cap or MAX_CHOSEN_K, int(n_hat * eps / RECORDS_PER_EPS)), gen, N_INIT)
        scores = sample_scores(Z, rate, gen, cands, anchors, noise2)
        i = int(mech.select(scores, 1.0, eps_select,
                            target=f"the number of clusters, one of {len(ks)} candidates",
                            note="score: the simplified silhouette of the records of a Poisson "
                            f"sample of public rate {rate:.4g} against each candidate's centres "
                            "(public, from the coreset" + " and the split step" * fine
                            + "; squared distances less the centres' public expected squared "
                            "noise): sensitivity 1",
                            item=_ITEM_SELECT, monotone=True))
        mech.report.notes += filter(None, [choice_odds_note(n_hat, rate, eps_select, len(ks))])
        return ks[i], cands[i], ks

    @staticmethod
    def _lloyd(engine, mech, space, centres, sizes, var, steps, step, n_hat,
               sizes_released=True):
        """The Lloyd steps at k, in the original space (``BALL_MARGIN``): records
        assigned by their distances corrected for the centres' noise, each restricted to a ball
        about its centre; a private quantile of the corrected distances sets the radii (one
        value per record: its rank moves by at most 1). The new centres are averaged with the
        previous ones, weighted by the inverse of their noise variances ``var`` (per
        coordinate): post-processing. A step's noisy sizes are compared with the previous
        step's (and with ``sizes`` when ``sizes_released``: a release about these same
        clusters) to find the balls that lost their clusters. Returns ``(centres, noisy
        sizes, history)``."""
        bounds = space.bounds
        k, d = centres.shape
        top = float(np.sqrt(np.sum(((bounds[:, 1] - bounds[:, 0]) / 2.0) ** 2)))
        centres = np.clip(centres, bounds[:, 0], bounds[:, 1])
        history = [centres]
        widen = np.ones(k)
        for i, budget in enumerate(steps):
            names = budget.names
            label = f"Lloyd step {i + 1}"
            # a low quantile of the noise's squared norm (chi-square, d degrees of freedom);
            # fallback centres: none
            noise2 = max(d - 3.0 * np.sqrt(2.0 * d), 0.0) * np.where(np.isinf(var), 0.0, var)
            labels, q = corrected_quantile(
                engine, mech, n_hat, centres, noise2, BALL_QUANTILE, top * 1e-6, top,
                mech.plan.item(names[2]).epsilon, item=names[2],
                target=f"{BALL_QUANTILE:g} quantile of the corrected distances, {label}")
            radius = np.minimum(top, widen * BALL_MARGIN * np.sqrt(q**2 + noise2))
            new, new_sizes = ball_step(engine, mech, labels, centres, radius, budget.epsilon,
                                       items=names[:2], label=label, bounds=bounds,
                                       rho=budget.rho, fallback=centres)
            new_var = centre_variance(radius, new_sizes, budget.epsilon, budget.rho, d)
            # a ball that lost most of its cluster: its estimate is dropped, the centre's
            # variance is at least the ball's (the cluster lies beyond it), later balls wider
            lost = lost_clusters(new_sizes, sizes, budget.epsilon) if i or sizes_released \
                else np.zeros(k, dtype=bool)
            new_var[lost] = np.inf
            w, var = inverse_variance(var, new_var)
            var = np.where(lost, np.maximum(var, radius**2 / d), var)
            widen = np.where(lost, LOST_WIDEN * widen, widen)
            sizes = np.where(lost, sizes, new_sizes)
            centres = np.clip(centres + w[:, None] * (new - centres), bounds[:, 0], bounds[:, 1])
            history.append(centres)
            step()
        return centres, sizes, history

    @staticmethod
    def _notes(space, depth, released, points, k, k_user, steps):
        d = space.bounds.shape[0]
        p = space.box.shape[0]
        how = "given (n_clusters)" if k_user is not None else \
            "chosen on the coreset by its weighted simplified silhouette (post-processing)"
        return [
            (f"tree: random projection {d} -> {p} dimensions (public), " if space.projected
             else "tree: ") + f"shifted grid, {depth} levels planned, {len(released)} grown",
            f"coreset: {points.shape[0]} weighted leaves; k = {k} {how}",
            f"refinement: {', '.join(steps) or 'none'}",
            "labels_ are the private centres applied to X (post-processing, not a release)",
        ]
