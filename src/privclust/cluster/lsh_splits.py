"""LSH-Splits: a private coreset from a SimHash prefix tree, clustered by weighted k-means.

Chang, Ghazi, Kumar, Manurangsi, "Locally private k-means in one round" (ICML 2021), in the
central-DP form of Google's differential-privacy library (``learning/clustering``): records are
hashed by the signs of their projections on random directions (SimHash), a prefix tree over the
hash codes branches a node while its noisy count is large enough, and the leaves (a noisy count
and a noisy sum each) form a weighted private coreset that k-means++/Lloyd clusters as
post-processing.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.cluster import KMeans

from ..privacy import Mechanisms, public_unit_directions, resolve_random_state
from ..privacy.mechanisms import gaussian_sigma
from ._base import (
    PrivateClusterMixin,
    check_delta,
    check_epsilon,
    check_fit_cost,
    check_n_clusters,
    check_positive_int,
    nearest_centre,
)
from ._centres import finish_centre_fit

__all__ = ["LSHSplits"]

#: Google's rule for the smallest node: a leaf of this many records (times the per-coordinate
#: noise standard deviation of the leaf sums, in units of the half-widths) has a noisy average
#: whose noise is about a tenth of the box's radius.
LEAF_NOISE_FACTOR = 10.0
#: At most this many nodes branch on one level (the largest noisy counts): bounds the work when
#: noise alone keeps small nodes above the threshold (tiny data sets). Post-processing.
MAX_BRANCHING_NODES = 1 << 15
#: A kept node's noisy count is at least this many count-noise scales (``1 / epsilon`` of one
#: level): an empty node (a hyperplane that missed a tight cluster leaves one) then passes with
#: probability ``e^-6 / (1 + e^-eps) < 0.25%``. Without it, the many empty siblings of deep
#: levels became leaves at the centre and took a centre of their own (measured on Synth-10d).
COUNT_NOISE_FACTOR = 6.0


class LSHSplits(PrivateClusterMixin):
    """LSH-Splits (Chang, Ghazi, Kumar, Manurangsi 2021): k-means on a private SimHash coreset.

    Every level of a prefix tree splits the records of each branching node by the side of a
    random hyperplane through the (optionally private) centre of the data, one hash bit per
    level (SimHash, shared by all nodes of a level). A node branches while its noisy count
    reaches ``branch_factor`` times the smallest node size; children below that size are
    dropped. The leaves' noisy counts and noisy sums give a weighted coreset of noisy averages,
    and scikit-learn's weighted k-means++/Lloyd on the coreset gives the ``n_clusters`` centres
    (post-processing: it reads no record).

    Privacy guarantee
    -----------------
    ``(epsilon, delta)``-DP under add/remove-one-record neighbours (``delta=0``: pure
    ``epsilon``-DP), by basic composition of

    * ``count_share epsilon`` on the node counts, split equally over the ``max_depth + 1``
      levels: per level one two-sided geometric release of sensitivity 1 (the nodes of a level
      are disjoint; parallel composition). Budget of levels the tree never reaches moves to the
      leaf sums, which come after (the basic-composition privacy filter);
    * ``centre_share epsilon`` on one noisy sum of ``u = (x - mid) / half-width`` over all
      records (the centre of the hyperplanes is that sum over the root count);
    * the rest on the leaf sums of ``u`` (the leaves are disjoint): the analytic Gaussian
      mechanism with L2 sensitivity ``sqrt(d)``, or with ``delta=0`` the Laplace mechanism with
      L1 sensitivity ``d``. The two sums share delta in proportion to their epsilons.

    ``delta=None`` picks ``min(1e-5, 1/n_hat^1.5)`` from the released root count. Records are
    clipped to the public ``bounds`` (that is what bounds the sensitivities); the hyperplanes
    are public randomness. Chang et al. Sec. 4 (the tree over LSH prefixes) and Sec. 6 (its
    experiments, "LSH-Splits").

    Departures from the paper and from Google's code, and why
    ---------------------------------------------------------
    * Exactly ``n_clusters`` centres, always. Google's keeps ``min(k, coreset size)`` centres.
      Here, when the coreset has fewer than ``k`` distinct points (tiny or very noisy data),
      the coreset points are all centres and the missing ones are drawn uniformly in the public
      bounds (public randomness; their noisy size is 0).
    * Hyperplanes pass through a private centre (``centre_share``, as in the evaluation of the
      DPM paper, Liebenow et al., which centres privately with 10% of the budget) or, with
      ``centre_share=0``, through the middle of the bounds; Google's pass through the origin.
      Directions are drawn in coordinates scaled by the half-widths, so features of different
      ranges weigh alike.
    * Google's calibrates counts and the Gaussian sum jointly with a PLD accountant (20x the
      count multiplier); privclust composes its ledger by basic composition, so the counts get
      an explicit share (``count_share``) and discrete (two-sided geometric) noise.
    * Both children of every branching node are counted, empty or not; leaves at every depth
      enter the coreset, and when both children of a node are dropped the node is a leaf.
    * The smallest node is at least six count-noise scales, unless that leaves no room for a
      node per cluster (see ``min_leaf_size``). A tight
      cluster keeps branching down to ``max_depth`` while the hyperplanes miss it, and each such
      split leaves an empty sibling; with Google's threshold alone about 5% of them passed on
      noise and became a heavy pile of empty leaves at the centre that took a centre of its own
      (Synth-10d: ARI 0.984 on every seed, 1.0 with the floor).
    * Defaults were chosen by measuring ARI and fit time at epsilon = 1, delta = 1/(n sqrt n)
      on Synth-10d and Synth-100d (100,000 points, 64 blobs) and a 40-d MNIST embedding
      (60,000 points, 10 classes), 10 seeds each (``benchmarks/lsh_splits.py``):
      ``branch_factor=2`` (3 left one leaf holding two blobs on some Synth-100d seeds),
      ``count_share=0.2`` (0.1: ARI 0.96 on Synth-10d; 0.3: no gain), ``max_depth=20``
      (14: worse on both Synth sets), ``centre_share=0.1`` (0 lowered the embedding's mean ARI
      from 0.97 to 0.95, its worst seed to 0.87); ``n_init=3`` restarts cost nothing on a
      coreset of ~100 points.

    Parameters
    ----------
    n_clusters : int
        k, the number of centres returned (always exactly k).
    epsilon : float
        Privacy budget (> 0).
    delta : float or None
        ``None``: the delta rule from the root count. ``0``: pure DP (Laplace leaf sums).
    bounds : tuple or array
        Public bounds, ``(lo, hi)`` for every feature or a ``(d, 2)`` array. Required.
    max_depth : int
        Most levels below the root (one hash bit each). Google's: 20.
    count_share : float
        Share of epsilon for the node counts of all levels.
    centre_share : float
        Share of epsilon for the private centre of the hyperplanes; 0 uses the middle of the
        bounds (no release).
    min_leaf_size : float or None
        Smallest node kept (noisy count). ``None``: ``max(1, min(max(10 s, 6 / eps_level),
        n_hat / (2 k)))``: Google's rule (``s``: the leaf sums' per-coordinate noise standard
        deviation in scaled coordinates; ``n_hat``: the root count, room for a node per
        cluster) with a floor of six count-noise scales of one level, so that an empty node is
        kept with probability below 0.25%.
    branch_factor : float
        A node branches when its noisy count is at least this times ``min_leaf_size``
        (Google's: 3).
    n_init : int
        k-means++ restarts on the coreset (post-processing).
    random_state : None, int or Generator
        None: secure randomness; int or Generator: reproducible, not secure.
    accountant : Accountant or None
        A shared budget, checked before any data is read.

    Attributes
    ----------
    ``cluster_centers_`` : (k, d) private centres. ``cluster_sizes_`` : (k,) noisy sizes (the
    coreset weight nearest each centre). ``n_clusters_`` : k. ``labels_`` : nearest centre of
    every training row (post-processing of the private model applied to X, not a release).
    ``n_iter_`` : 0 (no iteration touches the data). ``coreset_`` : (m, d) the leaves' noisy
    averages; ``coreset_weights_`` : (m,) their noisy counts. ``centre_`` : (d,) the point the
    hyperplanes pass through. ``tree_depth_`` : levels the tree reached. ``min_leaf_size_``,
    ``branch_threshold_`` : the node thresholds used. ``delta_`` : the delta used.
    ``n_features_in_`` : d. ``privacy_report_`` : :class:`~privclust.PrivacyReport`.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from privclust import LSHSplits
    >>> X, _ = make_blobs(20000, 5, centers=4, center_box=(-10, 10), random_state=0)
    >>> model = LSHSplits(4, epsilon=1.0, bounds=(-15, 15), random_state=0).fit(X)
    >>> model.cluster_centers_.shape, model.labels_.shape
    ((4, 5), (20000,))
    >>> round(model.privacy_report_.total().epsilon, 6)
    1.0
    """

    releases_cluster_sizes = True

    def __init__(
        self,
        n_clusters=8,
        *,
        epsilon=1.0,
        delta=None,
        bounds=None,
        max_depth=20,
        count_share=0.2,
        centre_share=0.1,
        min_leaf_size=None,
        branch_factor=2.0,
        n_init=3,
        random_state=None,
        accountant=None,
    ):
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.max_depth = max_depth
        self.count_share = count_share
        self.centre_share = centre_share
        self.min_leaf_size = min_leaf_size
        self.branch_factor = branch_factor
        self.n_init = n_init
        self.random_state = random_state
        self.accountant = accountant

    # ------------------------------------------------------------------ parameters
    def _check_params(self):
        eps = check_epsilon(self.epsilon)
        delta = check_delta(self.delta)
        k = check_n_clusters(self.n_clusters)
        depth = self.max_depth
        if isinstance(depth, bool) or not isinstance(depth, numbers.Integral) or depth < 0:
            raise ValueError(f"max_depth must be an int >= 0, got {depth!r}")
        if depth > 64:
            raise ValueError(f"max_depth={depth} is too large (at most 64 hash bits)")
        shares = {}
        for name in ("count_share", "centre_share"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 <= v < 1:
                raise ValueError(f"{name} must be a number in [0, 1), got {v!r}")
            shares[name] = float(v)
        if not shares["count_share"] > 0:
            raise ValueError("count_share must be > 0: the tree needs noisy counts")
        if shares["count_share"] + shares["centre_share"] >= 1:
            raise ValueError(
                "count_share + centre_share must be < 1 (the rest goes to the leaf sums); got "
                f"{shares['count_share']} + {shares['centre_share']}"
            )
        if self.min_leaf_size is not None and not (
            isinstance(self.min_leaf_size, numbers.Real) and self.min_leaf_size >= 1
        ):
            raise ValueError(f"min_leaf_size must be a number >= 1 or None, got "
                             f"{self.min_leaf_size!r}")
        bf = self.branch_factor
        if isinstance(bf, bool) or not isinstance(bf, numbers.Real) or not bf >= 1:
            raise ValueError(f"branch_factor must be a number >= 1, got {bf!r}")
        n_init = check_positive_int(self.n_init, "n_init", upper=100)
        return eps, delta, k, int(depth), shares, float(bf), n_init

    def _plan_items(self, plan, depth, shares, pure) -> None:
        """The line items, from the parameters alone."""
        eps = plan.epsilon
        e_count = shares["count_share"] * eps / (depth + 1)
        for level in range(depth + 1):
            plan.add(f"node counts, level {level}", "two-sided geometric", "pure", e_count)
        e_centre = shares["centre_share"] * eps
        e_sums = eps - shares["count_share"] * eps - e_centre
        mech, kind = ("laplace", "pure") if pure else ("gaussian (analytic)", "approx")
        if e_centre > 0:
            plan.add("centre sum", mech, kind, e_centre,
                     0.0 if pure else e_centre / (e_centre + e_sums))
        plan.add("leaf sums", mech, kind, e_sums, 0.0 if pure else e_sums / (e_centre + e_sums))

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None):
        """Cluster X privately. ``y`` is ignored (present for scikit-learn compatibility)."""
        eps, delta, k, depth, shares, bf, n_init = self._check_params()
        plan, accountant = self._open_plan(eps, delta)  # checked before any data is read
        X = self._check_X(X, reset=True)
        n, d = X.shape
        check_n_clusters(k, n)
        bounds = self._fit_bounds(X)
        # measured: ~2e-9 s per record, feature and level (one projection and relabel each)
        check_fit_cost(2e-9 * (depth + 1) * max(d, 4), f"LSHSplits(max_depth={depth}) on "
                       f"{d} features", "lower max_depth")
        source = resolve_random_state(self.random_state)
        gen = source.generator
        directions = public_unit_directions(gen, (max(depth, 1), d))  # public hyperplanes
        pure = delta == 0
        self._plan_items(plan, depth, shares, pure)
        self._reserve_plan(plan, accountant, "LSHSplits")

        engine = self._make_engine(X, bounds)
        report = self._start_report(plan.reserved(), source)
        mech = Mechanisms(source, report, plan)
        mid = bounds.mean(axis=1)
        half = (bounds[:, 1] - bounds[:, 0]) / 2.0

        root = engine.root()
        n_hat0 = int(mech.count(engine.count(root), plan.item("node counts, level 0").epsilon,
                                target="node counts, level 0 (root: all records)",
                                item="node counts, level 0")[0])
        plan.resolve_delta(n_hat0, "the released root count (no extra release)")
        min_leaf = self._min_leaf(plan, d, k, n_hat0, pure)
        branch_at = bf * min_leaf
        centre_u = self._centre(engine, mech, plan, root, mid, half, n_hat0, pure)
        counts, grouping, reached = self._grow(engine, mech, plan, directions, centre_u, mid,
                                               half, n_hat0, min_leaf, branch_at, depth)
        unreached = [f"node counts, level {i}" for i in range(reached + 1, depth + 1)]
        if unreached:
            plan.move_unspent(unreached, "leaf sums",
                              "levels the tree never reached; the leaf sums follow them")
        points, weights = self._leaf_averages(engine, mech, plan, grouping, counts, mid, half,
                                              pure)
        centres, sizes = self._cluster_coreset(points, weights, bounds, k, n_init, gen)
        report.notes.append(
            f"tree: {reached} level(s), {points.shape[0]} leaves; smallest node "
            f"{min_leaf:g}, branching from {branch_at:g} (noisy counts)")

        self.coreset_, self.coreset_weights_ = points, weights
        self.centre_ = mid + half * centre_u
        self.tree_depth_ = reached
        self.min_leaf_size_, self.branch_threshold_ = min_leaf, branch_at
        self.delta_ = plan.require_delta()
        del engine, mech
        return finish_centre_fit(self, X, bounds, centres, sizes, [centres], [], report, plan,
                                 accountant)

    # ------------------------------------------------------------------ steps
    def _noise_std(self, plan, item: str, d: int, pure: bool) -> float:
        """Per-coordinate noise standard deviation of a sum of scaled records at ``item``."""
        it = plan.item(item)
        if pure:
            return float(np.sqrt(2.0) * d / it.epsilon)
        return gaussian_sigma(it.epsilon, it.delta, float(np.sqrt(d)))

    def _min_leaf(self, plan, d, k, n_hat0, pure) -> float:
        """Smallest node kept: the parameter, or Google's rule on released values only."""
        if self.min_leaf_size is not None:
            return float(self.min_leaf_size)
        low_noise = LEAF_NOISE_FACTOR * self._noise_std(plan, "leaf sums", d, pure)
        per_cluster = max(n_hat0, 0) // (2 * k)  # room for a node per cluster
        floor = COUNT_NOISE_FACTOR / plan.item("node counts, level 0").epsilon
        return float(max(1, min(max(int(low_noise), floor), per_cluster)))

    def _noisy_sums(self, mech, plan, sums_u, item, target, pure):
        """One release of disjoint sums of scaled records (rows: disjoint groups)."""
        it = plan.item(item)
        d = sums_u.shape[1]
        if pure:
            return mech.laplace(sums_u, float(d), it.epsilon, target=target, item=item,
                                note="L1 sensitivity d: a clipped record adds u in [-1, 1]^d")
        return mech.gaussian(sums_u, float(np.sqrt(d)), it.epsilon, it.delta, target=target,
                             item=item,
                             note="L2 sensitivity sqrt(d): a clipped record adds u in [-1, 1]^d")

    def _centre(self, engine, mech, plan, root, mid, half, n_hat0, pure) -> np.ndarray:
        """The hyperplanes' common point in scaled coordinates: the private mean (noisy sum
        over the released root count) or, without a centre share, the middle of the bounds."""
        if not plan.has_item("centre sum"):
            return np.zeros(mid.size)
        # centred inside the engine (exact, about mid), then one division by the public
        # half-width: a function of the exact total alone, whatever |mid| (never S - n mid)
        sums_u = engine.centred_sums(root, mid[None, :]) / half
        s = self._noisy_sums(mech, plan, sums_u, "centre sum",
                             "sum of (x - mid) / half-width over all records (centre)", pure)
        return np.clip(s[0] / max(n_hat0, 1), -1.0, 1.0)

    def _grow(self, engine, mech, plan, directions, centre_u, mid, half, n_hat0, min_leaf,
              branch_at, depth):
        """Grow the prefix tree level by level. Returns the leaves' noisy counts, a grouping
        whose group ``i`` is leaf ``i`` (records of dropped nodes are in none) and the last
        level counted."""
        normals = directions / half  # u . r <= c . r  <=>  x . (r / half) <= offset
        offsets = normals @ mid + directions @ centre_u
        prepare = getattr(engine, "prepare_oblique", None)
        if prepare is not None:  # every level's sides from one pass over the data
            prepare(normals, offsets)
        grouping = engine.root()
        weights: list[np.ndarray] = []
        n_done = 0
        count = np.array([n_hat0], dtype=np.int64)  # noisy counts of the frontier
        parent = None  # noisy counts of the parents of the frontier's pairs
        level = 0
        while True:
            left, right, new_weights, branch = _route(
                count, parent, n_done, min_leaf, branch_at if level < depth else np.inf)
            weights.append(new_weights)
            n_done += new_weights.size
            n_branch = int(branch.sum())
            d_idx = min(level, directions.shape[0] - 1)
            grouping = engine.regroup_oblique(
                grouping, normals[d_idx], np.full(left.size, offsets[d_idx]), left, right,
                n_done + 2 * n_branch)
            if n_branch == 0:
                return np.concatenate(weights), grouping, level
            level += 1
            item = f"node counts, level {level}"
            parent = count[branch]
            count = mech.count(engine.count(grouping)[n_done:], plan.item(item).epsilon,
                               target=f"node counts, level {level} ({2 * n_branch} children)",
                               item=item)

    def _leaf_averages(self, engine, mech, plan, grouping, counts, mid, half, pure):
        """The coreset: every leaf's noisy average (noisy sum over its noisy count, clipped to
        the bounds) weighted by its noisy count (at least 1)."""
        m = counts.size
        # as in _centre: exact centred totals, one division by a public number each
        sums_u = engine.centred_sums(grouping, np.broadcast_to(mid, (m, mid.size))) / half
        s = self._noisy_sums(mech, plan, sums_u, "leaf sums",
                             f"sums of (x - mid) / half-width of the {m} leaves", pure)
        weights = np.maximum(counts, 1).astype(float)
        mean_u = np.clip(s / weights[:, None], -1.0, 1.0)
        return mid + half * mean_u, weights

    @staticmethod
    def _cluster_coreset(points, weights, bounds, k, n_init, gen):
        """Weighted k-means++/Lloyd on the coreset (post-processing); exactly k centres.

        Duplicate coreset points are merged first (k-means cannot place two centres on one
        point). With fewer than k distinct points, every point is a centre and the rest are
        drawn uniformly in the bounds (public randomness, noisy size 0)."""
        uniq, inv = np.unique(points, axis=0, return_inverse=True)
        w = np.bincount(inv.ravel(), weights=weights, minlength=uniq.shape[0])
        d = bounds.shape[0]
        if uniq.shape[0] <= k:
            extra = gen.uniform(bounds[:, 0], bounds[:, 1], size=(k - uniq.shape[0], d))
            centres = np.vstack([uniq, extra])
        else:
            seed = int(gen.integers(2**31 - 1))
            km = KMeans(n_clusters=k, init="k-means++", n_init=n_init, random_state=seed)
            centres = km.fit(uniq, sample_weight=w).cluster_centers_
        centres = np.clip(centres, bounds[:, 0], bounds[:, 1])
        lab = nearest_centre(uniq, centres)
        sizes = np.rint(np.bincount(lab, weights=w, minlength=k)).astype(np.int64)
        return centres, sizes


def _route(count, parent, n_done, min_leaf, branch_at):
    """One level's decisions, from released counts only: the targets of :meth:`regroup_oblique`
    over ``n_done`` finished leaves followed by the frontier, the noisy counts of the leaves
    this level adds, and which frontier nodes branch.

    A frontier node is kept when its noisy count reaches ``min_leaf`` (the root always is);
    a kept node branches when it reaches ``branch_at`` (at most
    :data:`MAX_BRANCHING_NODES`, the largest), else it is a leaf. When neither child of a pair
    is kept, the pair is one leaf weighted by its parent's count (its records are not lost:
    Google's tree makes such a parent a leaf); a node kept alone drops its sibling."""
    m = count.size
    keep = np.ones(m, bool) if parent is None else count >= min_leaf
    branch = keep & (count >= branch_at)
    if branch.sum() > MAX_BRANCHING_NODES:
        rank = np.argsort(-np.where(branch, count, np.iinfo(np.int64).min), kind="stable")
        branch[rank[MAX_BRANCHING_NODES:]] = False
    leaf = keep & ~branch
    orphan = np.zeros(m, bool) if parent is None else np.repeat(
        ~keep.reshape(-1, 2).any(axis=1), 2)
    starts = leaf | (orphan & (np.arange(m) % 2 == 0))  # one leaf per orphan pair
    ids = n_done + np.cumsum(starts) - 1
    ids[orphan] = ids[orphan & (np.arange(m) % 2 == 0)].repeat(2)
    left = np.full(n_done + m, -1, dtype=np.int64)
    left[:n_done] = np.arange(n_done)
    left[n_done:][leaf | orphan] = ids[leaf | orphan]
    right = left.copy()
    base = n_done + int(starts.sum())
    left[n_done:][branch] = base + 2 * np.arange(int(branch.sum()))
    right[n_done:][branch] = left[n_done:][branch] + 1
    idx = np.flatnonzero(starts)
    new_weights = count[idx].astype(np.int64)
    if parent is not None:
        o = orphan[idx]
        new_weights[o] = parent[idx[o] // 2]
    return left, right, new_weights, branch
