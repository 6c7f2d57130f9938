"""DPCube: private k-means by random projection, private cube partition and private recovery.

Balcan, Dick, Liang, Mou, Zhang, "Differentially private clustering in high-dimensional
Euclidean spaces" (ICML 2017). The records are mapped by a public random (Johnson-Lindenstrauss)
projection to a few dimensions; a private partition of the projected space into cubes (noisy
counts of the cells of a randomly shifted grid, cells with a large noisy count subdivided again)
gives a private set of candidate centres; k centres are chosen on that candidate set; each
centre's cluster (the records whose projection is nearest it) is recovered in the original space
with a private noisy mean.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from sklearn.cluster import KMeans

from .._geometry import project_rows, projected_box
from .._progress import fit_progress
from ..engine import LocalEngine
from ..engine.base import NearestCentre
from ..engine.local import records_outside
from ..privacy import Mechanisms, resolve_random_state
from ..privacy.rng import public_unit_directions
from ._base import (
    PrivateClusterMixin,
    check_epsilon,
    check_fit_cost,
    check_n_clusters,
    check_positive_int,
)
from ._centres import (
    bounds_mid,
    finish_centre_fit,
    kmeans_cost,
    noisy_centroids,
    plan_centroid_items,
)
from ._shifted_tree import ShiftedGrid, Wording, grow, leaf_summary

__all__ = ["DPCube", "projected_dim", "public_projection"]

#: Largest projected dimension (a cube has ``2^p`` children; flat cell keys stay in 62 bits).
MAX_COMPONENTS = 20
#: Default projected dimension for wide data (``n_projected=None``): ``min(d, 10)``; data of at
#: most this many features is not projected (the paper keeps ``d <= 5`` unprojected).
DEFAULT_COMPONENTS = 10
#: Default share of epsilon for the recovery (noisy means in the original space).
RECOVER_SHARE = 0.4
#: Post-processing: restarts of the weighted k-means on the candidate summary.
_N_INIT = 3


def projected_dim(d: int, n_projected=None) -> int:
    """The projected dimension: ``n_projected`` (at most ``d`` and :data:`MAX_COMPONENTS`), or
    ``min(d, DEFAULT_COMPONENTS)``. Public: it reads no data (the paper's ``0.5 ln n`` needs the
    exact n)."""
    if n_projected is None:
        return min(d, DEFAULT_COMPONENTS)
    return min(d, int(n_projected))


def public_projection(generator: np.random.Generator, d: int, p: int) -> np.ndarray:
    """A (p, d) Johnson-Lindenstrauss map: ``sqrt(d / p)`` times ``p`` random unit directions
    (so ``E ||G x||^2 = ||x||^2``); the identity when ``p == d``. Public randomness."""
    if p >= d:
        return np.eye(d)
    return math.sqrt(d / p) * public_unit_directions(generator, (p, d))


class _Space:
    """The public geometry of the projected space: ``y = G (x - mid)`` of a clipped record lies
    in the box ``|y_j| <= sum_l |G_jl| half_l`` (exact: the image of the public bounds)."""

    def __init__(self, bounds: np.ndarray, G: np.ndarray):
        self.bounds = bounds
        self.G = G
        self.mid = (bounds[:, 0] + bounds[:, 1]) / 2.0
        self.box = projected_box(G, bounds)
        self.pinv = np.linalg.pinv(G)

    def project(self, X: np.ndarray, clipped: bool = False) -> np.ndarray:
        """``G (x - mid)`` of the clipped records (``clipped``: X is clipped already), each
        from that record and ``G`` alone (:func:`~privclust._geometry.project_rows`: blocks
        whose shape does not depend on the number of records, on one BLAS thread), so a
        record's cube does not depend on the other records."""
        Xc = X if clipped else np.clip(X, self.bounds[:, 0], self.bounds[:, 1])
        Y = project_rows(Xc, self.mid, self.G)
        return np.clip(Y, self.box[:, 0], self.box[:, 1], out=Y)

    def lift(self, Y: np.ndarray) -> np.ndarray:
        """The minimum-norm preimage of projected points, clipped to the bounds."""
        X = self.mid + Y @ self.pinv.T
        return np.clip(X, self.bounds[:, 0], self.bounds[:, 1])


def _partition(engine, mech, grid, items, retry, eps_level, tag, step):
    """The private partition of one shifted grid (:func:`~privclust.cluster._shifted_tree.grow`):
    level by level the children of every released cube are counted and released with the
    sparse histogram (a cube is kept when its noisy count reaches the threshold). A level that
    releases nothing is released once more with the budget of the levels below (``retry``),
    then the partition stops. Returns the :class:`~privclust.cluster._shifted_tree.Level` of
    every level released."""
    wording = Wording("cube", tag + "level {level}", tag + "level {level}, again",
                      f"the {tag}partition stopped at level " + "{level}: released again with "
                      "the budget of the levels below")
    return grow(engine, mech, grid, items, retry, step, budgets=[eps_level] * len(items),
                wording=wording, leave_unneeded_retry=True)


def _summary(grid, released):
    """Weighted candidates of one partition (post-processing): the released cubes without
    released children (leaves) at their centres. Top-down, a cube's noisy count less those of
    its released children (records in children below the threshold) is shared among those
    children in proportion to their noisy counts, so the whole weight ends on leaves near the
    data, not at the centres of coarse cubes (:func:`~privclust.cluster._shifted_tree.
    leaf_summary`)."""
    points, weights, _ = leaf_summary(grid, released)
    return points, weights


def _choose_centres(points, weights, box, k, gen):
    """k projected centres from the weighted candidates (weighted k-means++ and Lloyd);
    centres the candidates cannot supply (fewer than k) are uniform public draws in the box."""
    m, p = points.shape
    if m <= k:
        extra = gen.uniform(box[:, 0], box[:, 1], size=(k - m, p))
        return np.vstack([points, extra])
    seed = int(gen.integers(0, 2**31 - 1))  # public randomness for the post-processing
    km = KMeans(n_clusters=k, n_init=_N_INIT, random_state=seed)
    km.fit(points, sample_weight=weights)
    return np.clip(km.cluster_centers_, box[:, 0], box[:, 1])


def _default_depth(k: int, p: int) -> int:
    """Levels of every partition when ``max_depth=None`` (see the class docstring)."""
    return int(np.clip(math.ceil(math.log2(max(k, 2))) + 1, 5, 8))


class DPCube(PrivateClusterMixin):
    """Private k-means in high dimension by projection and private cube partition
    (Balcan, Dick, Liang, Mou and Zhang, ICML 2017).

    1. **Projection** (Sec. 3): every clipped record ``x`` is mapped to ``y = G (x - mid)``,
       ``G`` a public random ``p x d`` Johnson-Lindenstrauss map (``sqrt(d / p)`` times ``p``
       random unit directions; the identity when ``p = d``). The projected records lie in a
       public box, the image of the bounds.
    2. **Candidates by private partition** (Sec. 3.1, Alg. 2): a grid over the projected box,
       shifted by a uniformly random public vector; level by level every released cube is cut
       into its ``2^p`` half-side children, whose record counts are released with the
       linear-time pure-DP sparse histogram (two-sided geometric noise; a child is kept, and cut
       again, only when its noisy count reaches a threshold). The centres of the released cubes
       are the candidate centres; ``n_shifts`` partitions with independent shifts pool their
       candidates.
    3. **Choice of k centres** (Sec. 3.2): on the candidates, each weighted by its noisy count
       less those of its released children (post-processing of step 2).
    4. **Recovery** (Sec. 3.3): the records whose projection is nearest each chosen centre form
       its cluster; a noisy size and a noisy sum of the clipped records of every cluster, in the
       original space, give the centre (Su et al.'s split between the two). ``n_lloyd`` further
       private Lloyd steps in the original space may follow (the authors' code runs 3).

    Privacy guarantee
    -----------------
    ``epsilon``-DP (pure) under add/remove-one-record neighbours. The projection and the shifts
    are public randomness, independent of the data; records are clipped to the public
    ``bounds``, and the projected records are read only through grid-cell counts of a public map
    of the clipped records. Each level of a partition counts every record in exactly one cube,
    so one record changes one count by 1: each level's sparse histogram is ``eps_level``-DP.
    The recovery's clusters are disjoint (one record changes one cluster's size by 1 and its
    sum of ``(x - mid) / half`` by at most ``d`` in L1). Everything composes sequentially
    (basic composition, adaptively): ``epsilon = n_shifts * max_depth * eps_level +
    (1 + n_lloyd) * eps_step`` with ``(1 + n_lloyd) * eps_step = recover_share * epsilon``.
    A partition whose level releases no cube releases that level once more with the budget of
    the levels below (a privacy filter), so the fit spends exactly ``epsilon``. The sparse
    histogram is pure DP in the Real-RAM model (its tail sampling uses floating-point draws).

    Departures from the paper
    -------------------------
    * Choice of the k centres: the paper runs a private local search (the exponential
      mechanism over swaps of candidates, scored by the k-means cost of the records, sensitivity
      ``Lambda^2`` for a projected domain of diameter ``Lambda``, ``eps / (T + 1)`` per step).
      On Synth-10d (k = 64) moving a centre onto an unserved cluster of ~1,500 records gains
      ~4e6 in cost, against ``Lambda^2 ~ 3e5`` and ~6e4 possible swaps: the mechanism needs
      ``eps_step >~ 2 ln(6e4) Lambda^2 / 4e6 ~ 1.6`` per step, and at least k steps, so at any
      budget near 1 it chooses swaps at random (and scoring k x m swaps on the records costs
      O(n k m) per step). Here the k centres are chosen by weighted k-means++ and Lloyd
      iterations on the candidates weighted by their noisy counts: post-processing of the
      partition, which spends nothing, so the whole budget goes to the partition and the
      recovery. The centres are not restricted to the candidate set.
    * Threshold of the partition: the paper keeps a cube whose noisy count exceeds
      ``2 ln(n) / eps_level`` (the exact n); here
      :func:`~privclust.cluster._shifted_tree.hst_threshold`
      (at most 0.25 false-positive children per released cube in expectation), which needs no
      record count.
    * Candidate weights (post-processing): only leaves (released cubes without released
      children) carry weight; a cube's noisy count less its children's is shared among them;
      a cube counts as released here only when its noisy count reaches the threshold by
      ``3 / eps_level`` (false positives far from the data otherwise drew centres: on 30-d
      blobs projected to 10 dimensions, k = 6, accuracy rose from 0.67 to 1.00 (median of 3)).
    * Projected dimension: the paper takes ``p = 0.5 ln n`` (the exact n, not private) and no
      projection for ``d <= 5``; here ``p = min(d, 10)`` (``n_projected``), public. Measured
      on Synth-10d at epsilon 1 (median of 3 seeds): accuracy 0.98 (cost per record 552) at
      p = 5, 1.00 (88) at p = 10.
    * Budget (measured with ``benchmarks/dpcube.py``, medians of 5 seeds; Synth-10d =
      ``make_blobs(100000, 10, centers=64, center_box=(-100, 100))``, k = 64):
      ``recover_share=0.4`` of epsilon for the recovery, the rest uniform over the
      ``n_shifts * max_depth`` partition levels: accuracy 1.00 at epsilon 1 and 0.5 (cost per
      record 88 and 332). ``recover_share=0.6`` halves the cost (43 and 166) but lost a
      cluster on one seed of 3 at 0.5. ``n_shifts=1`` (the authors' code pools 3 partitions;
      2 gave 0.98 at epsilon 1); ``n_lloyd=0`` (1 step raised the cost from 88 to ~300);
      ``max_depth=None`` takes ``clip(ceil(log2 k) + 1, 5, 8)`` levels (7 for k = 64).

    Parameters
    ----------
    n_clusters : int
        k, the number of centres (always exactly k are released).
    epsilon : float
        Privacy budget (> 0).
    bounds : tuple or array
        Public bounds, ``(lo, hi)`` for every feature or a ``(d, 2)`` array. Required.
    n_projected : int or None
        Projected dimension p (None: ``min(d, 10)``; at most 20).
    max_depth : int or None
        Levels of every partition (None: the rule above).
    n_shifts : int
        Independently shifted partitions whose candidates are pooled (default 1).
    recover_share : float
        Share of epsilon for the recovery and the Lloyd steps, in (0, 1).
    n_lloyd : int
        Private Lloyd steps in the original space after the recovery (default 0).
    random_state : None, int or Generator
        None (secure), int or Generator (reproducible, not secure).
    accountant : Accountant or None
        A shared :class:`~privclust.Accountant` (checked before any data is read).

    Attributes
    ----------
    ``cluster_centers_`` : ndarray (k, d)
        The private centres, inside the bounds.
    ``cluster_sizes_`` : ndarray (k,)
        Noisy sizes of the last recovery step.
    ``n_clusters_`` : int
        k.
    ``labels_`` : ndarray (n,)
        Nearest private centre of every training row (post-processing of the private model
        applied to X, not a release).
    ``n_iter_`` : int
        Private Lloyd steps run after the recovery.
    ``centers_history_`` : ndarray
        The centres after the recovery, then after every Lloyd step.
    ``cost_history_`` : ndarray
        Exact k-means cost at each row of ``centers_history_`` (a local diagnostic, NOT
        private, never part of the release).
    ``projection_`` : ndarray (p, d)
        The public projection ``G``.
    ``candidates_`` : ndarray (m, p)
        The private candidate centres (projected space).
    ``candidate_weights_`` : ndarray (m,)
        Their noisy weights.
    ``projected_centers_`` : ndarray (k, p)
        The k centres chosen in the projected space.
    ``shifts_`` : ndarray (n_shifts, p)
        The public random shifts of the partitions.
    ``n_features_in_`` : int
        Number of features.
    ``privacy_report_`` : PrivacyReport
        Every release, its mechanism and epsilon.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from privclust import DPCube
    >>> X, _ = make_blobs(5000, 2, centers=4, center_box=(-10, 10), random_state=0)
    >>> model = DPCube(4, epsilon=1.0, bounds=(-15, 15), random_state=0).fit(X)
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
        n_projected=None,
        max_depth=None,
        n_shifts=1,
        recover_share=RECOVER_SHARE,
        n_lloyd=0,
        random_state=None,
        accountant=None,
    ):
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.n_projected = n_projected
        self.max_depth = max_depth
        self.n_shifts = n_shifts
        self.recover_share = recover_share
        self.n_lloyd = n_lloyd
        self.random_state = random_state
        self.accountant = accountant

    def _check_params(self):
        eps = check_epsilon(self.epsilon)
        k = check_n_clusters(self.n_clusters)
        if self.n_projected is not None:
            check_positive_int(self.n_projected, "n_projected", upper=MAX_COMPONENTS)
        if self.max_depth is not None:
            check_positive_int(self.max_depth, "max_depth", upper=30)
        check_positive_int(self.n_shifts, "n_shifts", upper=16)
        share = self.recover_share
        if isinstance(share, bool) or not isinstance(share, numbers.Real) or not (
                0 < share < 1):
            raise ValueError(f"recover_share must be a number in (0, 1), got {share!r}")
        n_lloyd = self.n_lloyd
        if isinstance(n_lloyd, bool) or not isinstance(n_lloyd, numbers.Integral) or not (
                0 <= n_lloyd <= 20):
            raise ValueError(f"n_lloyd must be an int in [0, 20], got {n_lloyd!r}")
        return eps, k, float(share), int(n_lloyd)

    def _plan_items(self, plan, depth, share, n_lloyd, d):
        """The line items: one per level of every partition (and its retry), then one pair
        (sizes, sums) per recovery step."""
        eps_rec = share * plan.epsilon
        eps_level = (plan.epsilon - eps_rec) / (self.n_shifts * depth)
        parts = []
        for s in range(self.n_shifts):
            tag = f"partition {s + 1}, " if self.n_shifts > 1 else ""
            levels = [f"cube counts, {tag}level {lv}" for lv in range(1, depth + 1)]
            for name in levels:
                plan.add(name, "geometric sparse histogram", "pure", eps_level)
            retry = f"cube counts, {tag}retry of the last level"
            plan.add(retry, "geometric sparse histogram", "pure", 0.0)
            parts.append((tag, levels, retry))
        eps_step = eps_rec / (1 + n_lloyd)
        steps = [plan_centroid_items(plan, "recovery" if i == 0 else f"Lloyd step {i}",
                                     eps_step, d) for i in range(1 + n_lloyd)]
        return parts, eps_level, steps, eps_step

    def fit(self, X, y=None):
        """Cluster X privately. ``y`` is ignored (present for scikit-learn compatibility)."""
        eps, k, share, n_lloyd = self._check_params()
        plan, accountant = self._open_plan(eps, 0.0)  # checked before any data is read
        X = self._check_X(X, reset=True)
        check_n_clusters(k, X.shape[0])
        n, d = X.shape
        bounds = self._fit_bounds(X)
        p = projected_dim(d, self.n_projected)
        depth = _default_depth(k, p) if self.max_depth is None else int(self.max_depth)
        # measured: ~6e-8 s per record, projected dimension and level (cube keys), the
        # projection, and ~4e-10 s per record, centre and dimension per assignment
        check_fit_cost(6e-8 * p * depth * self.n_shifts + 2e-9 * d * p
                       + 4e-10 * k * (d + p) * (1 + n_lloyd),
                       f"DPCube(n_clusters={k}, max_depth={depth}, n_shifts={self.n_shifts}) "
                       f"on {d} features", "lower max_depth, n_shifts, n_lloyd or n_clusters")
        source = resolve_random_state(self.random_state)
        gen = source.generator
        space = _Space(bounds, public_projection(gen, d, p))  # public randomness
        box_w = space.box[:, 1] - space.box[:, 0]
        grids = [ShiftedGrid(space.box, gen.uniform(0.0, 1.0, size=p) * box_w)
                 for _ in range(self.n_shifts)]
        parts, eps_level, steps, eps_step = self._plan_items(plan, depth, share, n_lloyd, d)
        self._reserve_plan(plan, accountant, "DPCube")

        self._warn_clipped(X, bounds)  # the data holder's diagnostic, never in the report
        Xc = np.clip(X, bounds[:, 0], bounds[:, 1])
        Y = space.project(Xc, clipped=True)
        cube_engine = LocalEngine(Y, space.box)
        # original and projected coordinates side by side: one engine answers the recovery
        both = LocalEngine(np.hstack([Xc, Y]), np.vstack([bounds, space.box]))
        del Xc
        report = self._start_report(plan.reserved(), source)
        mech = Mechanisms(source, report, plan)
        with fit_progress("DPCube", self.n_shifts * depth + 1 + n_lloyd) as step:
            points, weights = [], []
            for grid, (tag, levels, retry) in zip(grids, parts, strict=True):
                released = _partition(cube_engine, mech, grid, levels, retry, eps_level, tag,
                                      step)
                pts, wts = _summary(grid, released)
                points.append(pts)
                weights.append(wts / self.n_shifts)
            points, weights = np.concatenate(points), np.concatenate(weights)
            proj_centres = _choose_centres(points, weights, space.box, k, gen)
            centres, sizes, history, costs = self._recover(both, mech, space, proj_centres,
                                                           steps, eps_step, step,
                                                           float((Y**2).sum()))
        report.notes += [
            f"projection: {d} -> {p} dimensions (public random JL map); {self.n_shifts} "
            f"shifted partition(s) of {depth} levels planned",
            f"{points.shape[0]} weighted candidate cubes; k centres by weighted k-means on "
            "them (post-processing)",
            "labels_ are the private centres applied to X (post-processing, not a release)",
        ]
        self.projection_ = space.G
        self.candidates_ = points
        self.candidate_weights_ = weights
        self.projected_centers_ = proj_centres
        self.shifts_ = np.array([g.box[:, 0] - g.origin for g in grids])
        return finish_centre_fit(self, X, bounds, centres, sizes, history, costs, report,
                                 plan, accountant)

    @staticmethod
    def _warn_clipped(X, bounds) -> None:
        """Warn the data holder (a local diagnostic, never released) about clipped records."""
        out = records_outside(X, bounds[:, 0], bounds[:, 1])
        if out:
            warnings.warn(
                f"{out} record(s) lie outside the bounds and were clipped to them "
                "(clipping is what bounds the sensitivity; widen the bounds if this is "
                "unexpected)", UserWarning, stacklevel=3)

    @staticmethod
    def _recover(engine, mech, space, proj_centres, steps, eps_step, step, y_sq):
        """The recovery (clusters by nearest projected centre, noisy means in the original
        space), then the Lloyd steps (clusters by nearest original centre)."""
        d = space.bounds.shape[0]
        k, p = proj_centres.shape
        # nearest in the projected coordinates: the original part is the same for every centre
        query = np.hstack([np.zeros((k, d)), proj_centres])
        fallback = space.lift(proj_centres)
        history, costs = [], []
        # sums about the middle of the engine's bounds (the original bounds' middle, then 0:
        # the projected box is symmetric), centred exactly by the engine
        about = bounds_mid(engine.bounds)
        for i, items in enumerate(steps):
            n_c, sums = engine.nearest_centre_stats(query, about=about)
            label = "recovery" if i == 0 else f"Lloyd step {i}"
            if i:  # exact cost at the previous centres (local diagnostic, never released)
                sq = engine.assignment_stats(NearestCentre(query), squared_norms=True,
                                             about=about).sq_norms
                costs.append(kmeans_cost(query - about, n_c, sums, sq) - y_sq)
            centres, sizes, _ = noisy_centroids(mech, n_c, sums[:, :d], fallback, space.bounds,
                                                eps_step, label=label, items=items)
            history.append(centres)
            fallback = centres
            # nearest in the original coordinates: the projected part is the same for all
            query = np.hstack([centres, np.zeros((k, p))])
            step()
        return centres, sizes, history, costs

