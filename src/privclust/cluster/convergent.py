"""k-means with a convergence guarantee: KMeans Guarantee (Lu & Shen 2020) and SubClustering.

Joshi & Thakkar, "k-Means SubClustering: A Differentially Private Algorithm with Improved
Clustering Quality", Sec. 4, Alg. 1-2, and its baseline, Lu & Shen,
"Differentially Private k-Means Clustering with Convergence Guarantee" (IEEE TDSC 2020) as 002
Sec. 4.1 describes it; with the departures page (``docs/departures.md``) items 17-18.

The shared skeleton (both estimators, both variants)
----------------------------------------------------
With ``S_hat^(t-1)`` the centroids released at iteration ``t - 1`` (public):

1. assign every record to its nearest ``S_hat_i^(t-1)``: clusters ``C_i^(t)``; their Lloyd
   centroid is ``S_i^(t)`` (exact, never released);
2. the *convergent zone* (002 Def. 3, Alg. 1 l. 7): the ball centred at the zone centre ``z_i``
   with radius ``r_i = ||z_i - S_hat_i^(t-1)||`` (Lemma 1's ``S^(t-1)`` is read as the centroid
   the records were assigned to, ``S_hat^(t-1)``: that is what makes the k-means cost fall,
   Departures 18). ``z_i = S_i^(t)`` in the faithful variant; in the private variant ``z_i`` is a
   *noisy* Lloyd centroid (:func:`~privclust.cluster._centres.noisy_centroids`);
3. a *sampling zone* inside it (KMeans Guarantee: a ball placed by the orientation controller;
   SubClustering: a sub-cluster of the zone, Alg. 2);
4. ``S_hat_i^(t)``: one candidate of the sampling zone picked by the exponential mechanism.

After ``max_iter`` iterations the records are assigned to ``S_hat^(T)`` once more and the exact
Lloyd centroids of that assignment are released with Laplace noise (Departures 18: the noise goes on
the exact Lloyd centroid), as a noisy sum and a noisy count so that the sensitivity does not
depend on the data (002 does not say how the Laplace scale is calibrated).

The exponential mechanism's score (002 omits q, Departures 18)
---------------------------------------------------------
``q(x) = J(C_i, z_i) - J(C_i, x) = 2 <sum_i, x - z_i> - |C_i| (||x||^2 - ||z_i||^2)``, the drop
in the cluster's k-means cost ``J(C, c) = sum_{y in C} ||y - c||^2`` when its centre moves from
the zone centre to the candidate: Lemma 1's own quantity (the cost falls exactly for candidates
inside the convergent zone). It needs only the cluster's count and sum. Adding or removing one
record ``y`` (clipped to the bounds) changes ``q(x)`` by ``(x - z)·(2y - x - z)``, so the
sensitivity of row ``i`` is ``max_x max_{y in box} |(x - z_i)·(2y - x - z_i)|`` over its
candidates, computed exactly (:func:`cost_reduction_sensitivity`; it is linear in the zone's
size rather than the box's squared diameter, because the candidate-independent term
``J(C, z)`` cancels in the mechanism's distribution). The change has both signs, so the factor 2
of Departures 1 applies. Clusters are disjoint: one selection per cluster is one batch
(parallel composition).

Privacy of the two variants
---------------------------
``variant='private'`` (default) is ``epsilon``-DP (pure) under add/remove-one-record neighbours:
every data-dependent step is a noisy release in ``privacy_report_`` (noisy Lloyd centroids for
the zones, noisy sub-cluster sizes, the exponential mechanism over candidates drawn from the
zones' *public* geometry, the final noisy centroids) and everything else is post-processing or
public randomness. The initial centres do not depend on the data (sphere packing, Su et al.).

``variant='faithful'`` follows 002 as printed and is **NOT differentially private** (Departures 17):
the zones are built from the exact Lloyd centroids and published (Alg. 1 l. 10), SubClustering
chooses its sub-cluster with exact sizes and samples *records* as centroids, and the initial
centroids are records (Alg. 1 l. 1). ``privacy_report_`` lists those steps as releases with
``private=False`` and ``privacy_report_.private`` is False.

Lemma 1's invariant ``||S_hat^(t) - z|| < ||z - S_hat^(t-1)||`` holds at every step and for every
cluster by construction (every candidate lies strictly inside the convergent zone); with the
exact ``z = S^(t)`` in the faithful variant, with the released noisy ``z`` in the private one.
A private algorithm cannot keep it w.r.t. the exact ``S^(t)`` with probability 1 (its output
would then have a support that depends on the data).

002's CostGap gains over KMeans Guarantee do not reproduce (``benchmarks/kmeans.py``; the
figures are on the documentation's k-means page). The reason is structural: the release is the
exact Lloyd centroid of the partition the iterations end in, plus Laplace noise (Departures 18),
so two runs that end in the same partition release from the same distribution whatever their
iterations did.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._geometry import group_column_sums
from .._progress import fit_progress
from ..privacy import Mechanisms, public_unit_directions, resolve_random_state
from ._base import (
    PrivateClusterMixin,
    check_epsilon,
    check_fit_cost,
    check_n_clusters,
    check_positive_int,
)
from ._centres import (
    bounds_mid,
    centroid_stats,
    finish_centre_fit,
    noisy_centroids,
    plan_centroid_items,
    sphere_packing_init,
)

__all__ = [
    "KMeansGuarantee",
    "SubClustering",
    "cost_reduction_scores",
    "cost_reduction_sensitivity",
    "uniform_in_balls",
]

_VARIANTS = ("private", "faithful")
_FLOAT_PAD = 1e-6


# --------------------------------------------------------------------------- public randomness
def uniform_in_balls(generator: np.random.Generator, centres, radii, m: int) -> np.ndarray:
    """``m`` points uniform in each *open* ball (``centres`` (k, d), ``radii`` (k,)): (k, m, d).

    Public randomness: the balls are public when this is called."""
    centres = np.asarray(centres, dtype=float)
    radii = np.asarray(radii, dtype=float)
    k, d = centres.shape
    dirs = public_unit_directions(generator, (k, m, d))
    rad = radii[:, None] * generator.random((k, m)) ** (1.0 / d)  # random() < 1: open ball
    return centres[:, None, :] + rad[..., None] * dirs


# --------------------------------------------------------------------------- score
def cost_reduction_scores(counts, sums, zone_centres, candidates) -> np.ndarray:
    """``q(x) = J(C, z) - J(C, x)`` for every candidate: (k, m). See the module docstring.

    ``sums``, ``zone_centres`` and ``candidates`` in coordinates about one public origin (the
    score does not depend on it): the fits pass the sums of ``x - mid`` that the engine centres
    exactly and the points minus ``mid``, so the terms' rounding is of the size of ``n`` times
    the bounds' half-width, not ``n |mid|`` (which the sensitivity's 1e-6 pad would not cover
    far from zero)."""
    counts = np.asarray(counts, dtype=float)
    sums = np.asarray(sums, dtype=float)
    z = np.asarray(zone_centres, dtype=float)
    x = np.asarray(candidates, dtype=float)
    lin = 2.0 * np.einsum("kd,kmd->km", sums, x - z[:, None, :])
    quad = (x**2).sum(axis=-1) - (z**2).sum(axis=-1)[:, None]
    return lin - counts[:, None] * quad


def cost_reduction_sensitivity(zone_centres, candidates, valid, bounds) -> np.ndarray:
    """Per row, ``max_x max_{y in box} |(x - z)·(2y - x - z)|`` over the valid candidates (k,).

    The change of :func:`cost_reduction_scores` when one record ``y`` in the public box joins or
    leaves the row's cluster. Linear in ``y``, so the extremes are at box corners, found per
    coordinate. Rows whose candidates all equal ``z`` get a tiny positive value (their score is
    identically 0 on every data set, so any scale is private). Padded by a relative 1e-6 for
    floating-point rounding.
    """
    z = np.asarray(zone_centres, dtype=float)[:, None, :]
    x = np.asarray(candidates, dtype=float)
    lo, hi = bounds[:, 0], bounds[:, 1]
    a = x - z
    ab = (a * (x + z)).sum(axis=-1)
    top = 2.0 * np.maximum(a * lo, a * hi).sum(axis=-1) - ab
    bottom = 2.0 * np.minimum(a * lo, a * hi).sum(axis=-1) - ab
    per = np.where(valid, np.maximum(np.abs(top), np.abs(bottom)), 0.0)
    floor = 1e-12 * float(((hi - lo) ** 2).sum())
    # padded by 1e-6 (relative) for the rounding of the scores, which are differences of
    # floating-point sums (DESIGN.md: a sensitivity argument over floats must allow for it)
    return np.maximum(per.max(axis=1) * (1.0 + _FLOAT_PAD), floor)


def _batched_lloyd(points, zone, n_zones: int, k: int, generator, n_iter: int = 20):
    """Plain Lloyd run separately on every zone's records, all zones at once (faithful
    SubClustering, Alg. 2 l. 2): sub-cluster index of every record (n,) and the number of
    sub-clusters of every zone, ``min(k, records in the zone)`` (n_zones,).

    ``points`` (n, d) holds the records of all zones grouped by zone, ``zone`` (n,) their zone
    (non-decreasing). Each zone starts from distinct records drawn uniformly (as Alg. 1 l. 1
    does for the clusters); an empty sub-cluster keeps its centre. A zone whose labels stop
    changing is at a fixed point, so iterating all zones until none changes gives each zone the
    result of its own Lloyd run.
    """
    n, d = points.shape
    if np.any(np.diff(zone) < 0):
        raise ValueError("records must be grouped by zone")
    order = np.lexsort((generator.random(n), zone))  # records of each zone, in random order
    first = np.searchsorted(zone[order], np.arange(n_zones))
    size = np.bincount(zone, minlength=n_zones)
    kk = np.minimum(k, size)
    rank = np.arange(n) - first[zone[order]]  # position of each record in its zone's order
    seed = rank < kk[zone[order]]
    centres = np.zeros((n_zones, k, d))
    centres[zone[order][seed], rank[seed]] = points[order][seed]
    usable = np.arange(k)[None, :] < kk[:, None]  # (n_zones, k)
    edges = np.concatenate([[0], np.cumsum(size)])
    labels = np.full(n, -1)
    score = np.empty((n, k))
    for _ in range(n_iter):
        # |c|^2 - 2 x.c per zone on its contiguous slice (|x|^2 does not change the argmin):
        # a loop over zones, vectorised over records, with no (n, k, d) temporary
        c_sq = np.where(usable, (centres**2).sum(axis=2), np.inf)
        minus_2c = np.ascontiguousarray(-2.0 * centres.transpose(0, 2, 1))  # (n_zones, d, k)
        for i in np.flatnonzero(size):
            lo, hi = edges[i], edges[i + 1]
            np.matmul(points[lo:hi], minus_2c[i], out=score[lo:hi])
            score[lo:hi] += c_sq[i]
        new = np.argmin(score, axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        key = zone * k + labels
        counts = np.bincount(key, minlength=n_zones * k).reshape(n_zones, k)
        sums = group_column_sums(key, points, n_zones * k).reshape(n_zones, k, d)
        filled = counts > 0
        centres[filled] = sums[filled] / counts[filled][:, None]
    return labels, kk


def _strictly_inside(cand, valid, z, r, prev):
    """Keep only candidates strictly inside the convergent zone, as measured in floating point
    (a record on the boundary, e.g. the previous centroid itself in the faithful variant, or a
    uniform draw rounded onto the sphere, would break Lemma 1's strict inequality). A row left
    without a candidate gets the zone's midpoint ``(z + prev) / 2``, a public point at distance
    ``r / 2``. Rows with ``r = 0`` (converged, or an empty cluster) keep ``z``."""
    inside = np.linalg.norm(cand - z[:, None, :], axis=2) < r[:, None]
    valid = valid & (inside | (r == 0)[:, None])
    empty = ~valid.any(axis=1)
    if empty.any():
        cand = cand.copy()
        cand[empty, 0] = (z[empty] + prev[empty]) / 2.0
        valid[empty, 0] = True
    return cand, valid


def _check_shares(value, n: int, name: str, what: str) -> np.ndarray:
    shares = np.asarray(value, dtype=float)
    if shares.shape != (n,) or (shares <= 0).any() or abs(shares.sum() - 1) > 1e-9:
        raise ValueError(
            f"{name} must be {n} positive shares {what} summing to 1; got {value!r}"
        )
    return shares


# --------------------------------------------------------------------------- shared estimator
class _ConvergentKMeans(PrivateClusterMixin):
    """The loop shared by KMeansGuarantee and SubClustering (see the module docstring)."""

    releases_cluster_sizes = True

    _SPLIT_NAMES = ""
    _PART_NAMES: tuple = ()
    DEFAULT_ITERATION_SPLIT: tuple = ()

    # subclasses: the sampling zone's candidates, (k, m, d) and a validity mask (k, m)
    def _candidates(self, ctx, prev, z, r, t):  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_common(self):
        eps = check_epsilon(self.epsilon)
        k = check_n_clusters(self.n_clusters)
        max_iter = check_positive_int(self.max_iter, "max_iter", upper=10_000)
        if self.variant not in _VARIANTS:
            raise ValueError(
                f"variant must be 'private' (differentially private, the default) or "
                f"'faithful' (002 as printed, NOT private); got {self.variant!r}"
            )
        lap = self.lap_share
        if isinstance(lap, bool) or not isinstance(lap, numbers.Real) or not 0 < lap < 1:
            raise ValueError(f"lap_share must be a number in (0, 1), got {lap!r}")
        m = check_positive_int(self.n_candidates, "n_candidates", upper=100_000)
        split = self.DEFAULT_ITERATION_SPLIT if self.iteration_split is None else (
            self.iteration_split)
        shares = _check_shares(split, len(self.DEFAULT_ITERATION_SPLIT), "iteration_split",
                               self._SPLIT_NAMES)
        return eps, k, max_iter, float(lap), m, shares

    def _extra_params(self):
        return {}

    def fit(self, X, y=None):
        """Cluster X. ``y`` is ignored (present for scikit-learn compatibility)."""
        eps, k, T, lap_share, m, shares = self._check_common()
        extra = self._extra_params()
        name = type(self).__name__
        plan, accountant = self._open_plan(eps, 0.0)  # checked before any data is read
        X = self._check_X(X, reset=True)
        check_n_clusters(k, X.shape[0])
        self._check_cost(X.shape[1], k, T, m, extra)
        bounds = self._fit_bounds(X)
        faithful = self.variant == "faithful"
        if faithful and X.shape[0] < k:  # the faithful variant is not private: n may be read
            raise ValueError(
                f"variant='faithful' draws its {k} initial centroids from the records, but "
                f"X has only {X.shape[0]}"
            )
        source = resolve_random_state(self.random_state)
        d = X.shape[1]
        eps_zone, eps_parts, zone_items, lap_items = self._plan_items(
            plan, lap_share, T, shares, d, faithful)
        self._reserve_plan(plan, accountant, name)

        engine = self._make_engine(X, bounds)
        report = self._start_report(plan.reserved(), source)
        mech = Mechanisms(source, report, plan)
        ctx = {"engine": engine, "mech": mech, "gen": source.generator, "bounds": bounds,
               "m": m, "faithful": faithful, "eps": eps_parts, **extra}
        prev = self._initial_centroids(ctx, k, d)

        history, zone_c, zone_r, costs = [prev], [], [], []
        with fit_progress(name, T) as step:
            for t in range(1, T + 1):
                prev, z, r, cost = self._iteration(ctx, prev, t, eps_zone, zone_items)
                history.append(prev)
                zone_c.append(z)
                zone_r.append(r)
                costs.append(cost)
                step()

        counts, sums, cost = centroid_stats(engine, prev, bounds)
        costs.append(cost)
        centres, n_hat, _ = noisy_centroids(mech, counts, sums, prev, bounds,
                                            lap_share * plan.epsilon,
                                            label="converged Lloyd centroids (Laplace step)",
                                            items=lap_items)
        self.convergent_zones_ = (np.stack(zone_c), np.stack(zone_r))
        return finish_centre_fit(self, X, bounds, centres, n_hat, history, costs, report,
                                 plan, accountant)

    def _check_cost(self, d, k, T, m, extra) -> None:
        # measured per record: ~7e-10 s x cluster x feature x iteration (nearest centres), and
        # ~4e-9 s x cluster x sub-cluster x feature x iteration for SubClustering's sub-cells
        # and ~2.5e-7 s per cluster x candidate x feature x iteration to score candidates
        subs = extra.get("internal_k", 0)
        dims = max(d, 2)
        check_fit_cost((7e-10 + 4e-9 * subs) * k * dims * T,
                       f"{type(self).__name__}(n_clusters={k}, max_iter={T}, n_candidates={m}"
                       + (f", internal_k={subs})" if "internal_k" in extra else ")"),
                       "lower n_clusters, " + ("internal_k, " if "internal_k" in extra else "")
                       + "n_candidates or max_iter",
                       fixed_seconds=2.5e-7 * k * m * dims * T)

    def _plan_items(self, plan, lap_share, T, shares, d, faithful):
        """The plan's line items: per iteration the zone centres (private variant), the
        sub-cluster sizes (SubClustering) and the centroid choice; the final Laplace step."""
        eps = plan.epsilon
        eps_lap = lap_share * eps
        eps_it = (eps - eps_lap) / T
        if faithful:
            # the exact steps take no budget: the whole iteration budget is epsilon^exp
            eps_zone, eps_parts = 0.0, {"em": eps_it}
        else:
            eps_zone = shares[0] * eps_it
            eps_parts = dict(zip(self._PART_NAMES, shares[1:] * eps_it, strict=True))
        zone_items = None
        if not faithful:
            zone_items = plan_centroid_items(plan, "convergent-zone centres", eps_zone * T, d)
        if "sub" in eps_parts:
            plan.add("sub-cluster sizes", "two-sided geometric", "pure", eps_parts["sub"] * T)
        plan.add("centroid choice", "exponential", "pure", eps_parts["em"] * T)
        lap_items = plan_centroid_items(plan, "final Laplace step", eps_lap, d)
        return eps_zone, eps_parts, zone_items, lap_items

    def _initial_centroids(self, ctx, k, d):
        """Alg. 1 l. 1: records drawn from X (faithful, NOT private) or the public sphere
        packing (private); notes the variant in the report."""
        mech, gen = ctx["mech"], ctx["gen"]
        report = mech.report
        if not ctx["faithful"]:
            report.notes.append(
                "variant='private': Lemma 1's invariant holds w.r.t. the released noisy Lloyd "
                "centroids (convergent_zones_), not w.r.t. the exact ones"
            )
            report.notes.append("initialisation: sphere packing (Su et al.), data-independent")
            return sphere_packing_init(gen, ctx["bounds"], k)
        report.notes.append(
            "variant='faithful': 002 as printed, NOT differentially private (Departures 17): "
            "records as initial centroids, zones from exact Lloyd centroids, published"
            + (", sub-clusters chosen by exact sizes, records as centroids"
               if type(self).__name__ == "SubClustering" else "")
        )
        every = ctx["engine"].zone_records(np.zeros((1, d)), np.zeros((1, d)),
                                           np.array([np.inf]))
        records = every[0]
        prev = records[gen.choice(records.shape[0], size=k, replace=False)].copy()
        mech.publish_exact("initial centroids", "Alg. 1 l. 1: k records drawn uniformly "
                           "from X (Departures 17)")
        return prev

    def _iteration(self, ctx, prev, t, eps_zone, zone_items):
        """One iteration: the convergent zone around each centre (noisy or exact Lloyd
        centroid), candidates in it, and the exponential mechanism's choice among them.
        Returns ``(new centres, zone centres, zone radii, exact cost at prev)``."""
        engine, mech, bounds, faithful = ctx["engine"], ctx["mech"], ctx["bounds"], ctx["faithful"]
        k = prev.shape[0]
        mid = bounds_mid(bounds)
        counts, sums, cost = centroid_stats(engine, prev, bounds)  # sums of x - mid
        if faithful:
            z = np.where(counts[:, None] > 0, mid + sums / np.maximum(counts, 1)[:, None], prev)
            mech.publish_exact(
                f"convergent zones (exact Lloyd centroids, radii), iteration {t}",
                "Alg. 1 l. 7 and l. 10: built from and published as exact data "
                "(Departures 17)",
            )
        else:
            z, _, _ = noisy_centroids(mech, counts, sums, prev, bounds, eps_zone,
                                      label=f"convergent-zone centres, iteration {t}",
                                      items=zone_items)
        r = np.linalg.norm(z - prev, axis=1)
        cand, valid = self._candidates(ctx, prev, z, r, t)
        cand = np.clip(cand, bounds[:, 0], bounds[:, 1])  # keeps ||x - z|| (z in the box)
        cand, valid = _strictly_inside(cand, valid, z, r, prev)
        # the scores in coordinates about mid, those of the sums (the score is the same
        # function of any origin; about mid its float terms are of size n half, not n |mid|)
        scores = cost_reduction_scores(counts, sums, z - mid, cand - mid)
        scores[~valid] = -np.inf
        sens = cost_reduction_sensitivity(z, cand, valid, bounds)
        choice = mech.select(
            scores, sens, ctx["eps"]["em"], target=f"centroid choice, iteration {t}",
            note="exponential mechanism, factor 2; q = J(C, z) - J(C, x); sensitivity "
            "max |(x - z).(2y - x - z)| over candidates x and y in the bounds"
            + (" (as printed: the zone itself is exact)" if faithful else ""),
            item="centroid choice",
        )
        return cand[np.arange(k), choice], z, r, cost


_COMMON_DOC = """
    Parameters
    ----------
    n_clusters : k. epsilon : total privacy budget (> 0).
    bounds : public bounds, ``(lo, hi)`` for every feature or a ``(d, 2)`` array. Required.
    max_iter : number of iterations T (always all run: the budget is planned for T).
    variant : 'private' (default, epsilon-DP) or 'faithful' (002 as printed, NOT private).
    lap_share : share of epsilon for the final Laplace step (002's epsilon^lap); the rest is
        split evenly over the T iterations (epsilon^exp per iteration, basic composition).
        Default 0.7: of 0.3, 0.5 and 0.7 it gave the lowest CostGap for the private variants
        on Wine and Breast Cancer (T = 2-10, epsilon = 0.3-3); the final step is what decides
        the output's quality (benchmarks/kmeans.py).
    n_candidates : candidates per zone for the exponential mechanism (drawn uniformly in the
        sampling zone's public geometry).
    iteration_split : shares of one iteration's budget in the private variant, see above.
    random_state : None (secure), int or Generator (reproducible, not secure).
    accountant : a shared :class:`~privclust.Accountant` (checked before any data is read).

    Attributes
    ----------
    ``cluster_centers_`` : (k, d) centres (the final noisy Lloyd centroids). ``cluster_sizes_`` :
    their noisy sizes. ``labels_`` : nearest centre of every training row (post-processing of the
    model applied to X, not a release). ``n_iter_`` : T. ``centers_history_`` : (T + 1, k, d) the
    centroids
    ``S_hat^(t)`` of every iteration (row 0: the initialisation). ``convergent_zones_`` :
    ``(centres (T, k, d), radii (T, k))`` of the zones (noisy in the private variant; exact, and
    marked NOT private, in the faithful one). ``cost_history_`` : (T + 2,) exact k-means cost of X
    at every row of ``centers_history_`` and at ``cluster_centers_`` (a local diagnostic
    computed without noise: NOT private, never part of the release).
    ``privacy_report_`` : :class:`~privclust.PrivacyReport`.
"""


class KMeansGuarantee(_ConvergentKMeans):
    """KMeans Guarantee (Lu & Shen 2020) as 002 Sec. 4.1 describes it.

    Each iteration draws an *orientation controller* ``u`` (002 Def. 4; 002 Sec. 6.1: an angle
    in ``[-pi/2, pi/2]``): a direction uniform on the unit hemisphere facing the previous
    centroid ``S_hat^(t-1)`` from the zone centre ``z`` (public randomness). The *sampling zone*
    is the open ball centred at ``z + (r/2) u`` with radius ``r/2``, inside the convergent zone;
    ``n_candidates`` points are drawn uniformly in it and the exponential mechanism picks the
    new centroid among them (the continuous mechanism over the zone, on a sample).

    Privacy: see the module docstring. ``variant='private'`` is epsilon-DP: each iteration
    spends ``iteration_split = (zone, em)`` (default ``(0.5, 0.5)``) of its budget on the noisy
    Lloyd centroid that centres the zone and on the selection. ``variant='faithful'`` centres
    the zones on the exact Lloyd centroids and starts from k records: NOT private.

    Choices where 002 is silent. Lu & Shen's full text was not available to us (only its
    abstract: the framework "controls the orientation of the movement of the centroids ... by
    injecting DP noise in a selected area" and converges "in at most twice the iterations of
    Lloyd's algorithm" in expectation), so each of these is ours: the hemisphere faces the
    previous centroid (the new one lands between the old one and the Lloyd centroid, which is
    the "twice the iterations" behaviour); the sampling zone is the ball of radius r/2 that
    touches z; the score q and its sensitivity (module docstring); a fixed T with
    epsilon^exp split evenly over it (basic composition; 002 runs "iterationForLloyd"
    iterations); the final Laplace step as a noisy sum over a noisy count.

    Examples
    --------
    >>> import numpy as np
    >>> from privclust import KMeansGuarantee
    >>> X = np.random.default_rng(0).uniform(-1, 1, size=(5000, 2))
    >>> model = KMeansGuarantee(4, epsilon=1.0, bounds=(-1, 1), max_iter=3,
    ...                         random_state=0).fit(X)
    >>> model.cluster_centers_.shape, len(model.predict(X[:5]))
    ((4, 2), 5)
    """

    _SPLIT_NAMES = "(zone, em)"
    _PART_NAMES = ("em",)
    DEFAULT_ITERATION_SPLIT = (0.5, 0.5)

    def __init__(
        self,
        n_clusters=8,
        *,
        epsilon=1.0,
        bounds=None,
        max_iter=10,
        variant="private",
        lap_share=0.7,
        n_candidates=32,
        iteration_split=None,
        random_state=None,
        accountant=None,
    ):
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.max_iter = max_iter
        self.variant = variant
        self.lap_share = lap_share
        self.n_candidates = n_candidates
        self.iteration_split = iteration_split
        self.random_state = random_state
        self.accountant = accountant

    def _candidates(self, ctx, prev, z, r, t):
        gen, m = ctx["gen"], ctx["m"]
        k, d = z.shape
        # orientation controller: public randomness, uniform on the hemisphere facing prev
        u = public_unit_directions(gen, (k, d))
        u[(u * (prev - z)).sum(axis=1) < 0] *= -1.0
        cand = uniform_in_balls(gen, z + (r / 2.0)[:, None] * u, r / 2.0, m)
        return cand, np.ones(cand.shape[:2], dtype=bool)


class SubClustering(_ConvergentKMeans):
    """k-means SubClustering (002 Alg. 1-2): the sampling zone is a sub-cluster of the zone.

    ``variant='faithful'`` (002 as printed, NOT private): the records of ``C_i`` strictly inside
    the convergent zone are clustered by Lloyd into ``internal_k`` sub-clusters (Alg. 2 l. 2,
    initialised with records), one sub-cluster is drawn with probability proportional to its
    exact size (l. 3-4) and the exponential mechanism picks one of its *records* as the new
    centroid (Alg. 1 l. 9). If the zone holds no record the new centroid is the midpoint of
    ``S_hat^(t-1)`` and ``S^(t)`` (002 is silent; the midpoint keeps Lemma 1's invariant).

    ``variant='private'`` (default, epsilon-DP): ``internal_k`` sub-centres are drawn uniformly
    in the (public, noisy) convergent zone; the records of each zone are counted per sub-centre
    cell and the counts released with two-sided geometric noise (zones and cells are disjoint:
    one batch); a sub-cluster is drawn with probability proportional to its noisy size (clipped
    at 0; uniform if all are 0) as post-processing; candidates are drawn uniformly in the chosen
    cell of the zone (plus its sub-centre) and the exponential mechanism picks one. Each
    iteration spends ``iteration_split = (zone, sub-cluster sizes, em)`` (default
    ``(0.5, 0.2, 0.3)``) of its budget. The sub-clustering is the data-independent partition
    of the zone by its sub-centres rather than Lloyd on the records (Lloyd on the records would
    need further noisy releases per Lloyd step).

    ``internal_k`` (default 4): sub-clusters per convergent zone; 002 Sec. 6 varies it over 2-5
    and finds 4 best on Wine and Breast Cancer (5 on Digits).

    Examples
    --------
    >>> import numpy as np
    >>> from privclust import SubClustering
    >>> X = np.random.default_rng(0).uniform(-1, 1, size=(5000, 2))
    >>> model = SubClustering(4, epsilon=1.0, bounds=(-1, 1), max_iter=3,
    ...                       random_state=0).fit(X)
    >>> model.cluster_centers_.shape, model.variant
    ((4, 2), 'private')
    """

    _SPLIT_NAMES = "(zone, sub-cluster sizes, em)"
    _PART_NAMES = ("sub", "em")
    DEFAULT_ITERATION_SPLIT = (0.5, 0.2, 0.3)

    def __init__(
        self,
        n_clusters=8,
        *,
        epsilon=1.0,
        bounds=None,
        max_iter=10,
        internal_k=4,
        variant="private",
        lap_share=0.7,
        n_candidates=32,
        iteration_split=None,
        random_state=None,
        accountant=None,
    ):
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.max_iter = max_iter
        self.internal_k = internal_k
        self.variant = variant
        self.lap_share = lap_share
        self.n_candidates = n_candidates
        self.iteration_split = iteration_split
        self.random_state = random_state
        self.accountant = accountant

    def _extra_params(self):
        return {"internal_k": check_positive_int(self.internal_k, "internal_k", upper=1000)}

    def _candidates(self, ctx, prev, z, r, t):
        if ctx["faithful"]:
            return self._faithful_candidates(ctx, prev, z, r, t)
        engine, mech, gen, m = ctx["engine"], ctx["mech"], ctx["gen"], ctx["m"]
        K = ctx["internal_k"]
        k, d = z.shape
        sub = uniform_in_balls(gen, z, r, K)  # public: the zones are released
        exact = engine.zone_cell_counts(prev, z, r, sub)
        noisy = mech.count(
            exact.ravel(), ctx["eps"]["sub"],
            target=f"sub-cluster sizes in the convergent zones, iteration {t}",
            note="records of C_i strictly inside zone i, per nearest sub-centre; disjoint cells",
            item="sub-cluster sizes",
        ).reshape(k, K)
        # post-processing of the released sizes: draw a sub-cluster proportionally to them
        w = np.maximum(noisy, 0).astype(float)
        w[w.sum(axis=1) == 0] = 1.0
        cdf = np.cumsum(w / w.sum(axis=1, keepdims=True), axis=1)
        pick = np.minimum((gen.random((k, 1)) > cdf).sum(axis=1), K - 1)
        pool = uniform_in_balls(gen, z, r, 2 * m * K)
        d2 = ((pool[:, :, None, :] - sub[:, None, :, :]) ** 2).sum(axis=-1)
        valid = np.argmin(d2, axis=2) == pick[:, None]
        cand = np.concatenate([pool, sub[np.arange(k), pick][:, None, :]], axis=1)
        valid = np.concatenate([valid, np.ones((k, 1), dtype=bool)], axis=1)
        return cand, valid

    def _faithful_candidates(self, ctx, prev, z, r, t):
        engine, mech, gen = ctx["engine"], ctx["mech"], ctx["gen"]
        K = ctx["internal_k"]
        k, d = z.shape
        zones = engine.zone_records(prev, z, r)
        size = np.array([pts.shape[0] for pts in zones])
        points = np.concatenate(zones) if size.sum() else np.zeros((0, d))
        zone = np.repeat(np.arange(k), size)
        labels, kk = _batched_lloyd(points, zone, k, K, gen)
        # a sub-cluster drawn with probability proportional to its exact size (Alg. 2 l. 3-4)
        sizes = np.bincount(zone * K + labels, minlength=k * K).reshape(k, K).astype(float)
        cdf = np.cumsum(sizes, axis=1)
        u = gen.random(k) * cdf[:, -1]
        pick = np.minimum((u[:, None] >= cdf).sum(axis=1), np.maximum(kk - 1, 0))
        mech.publish_exact(
            f"sub-clusters of the convergent zones and their choice, iteration {t}",
            "Alg. 2: Lloyd on the zone's records, sub-cluster drawn by exact size; the "
            "exponential mechanism then samples a record (Departures 17)",
        )
        # candidates: the records of the chosen sub-cluster, padded per zone
        member = labels == pick[zone]
        per = np.bincount(zone[member], minlength=k)
        width = max(1, int(per.max(initial=0)))
        cand = np.repeat(((z + prev) / 2.0)[:, None, :], width, axis=1)  # empty zone: midpoint
        valid = np.zeros((k, width), dtype=bool)
        valid[size == 0, 0] = True  # 002 is silent; the midpoint keeps Lemma 1's invariant
        zi = zone[member]
        slot = np.arange(zi.shape[0]) - np.searchsorted(zi, zi)  # records are grouped by zone
        cand[zi, slot] = points[member]
        valid[zi, slot] = True
        return cand, valid


KMeansGuarantee.__doc__ += _COMMON_DOC
SubClustering.__doc__ += _COMMON_DOC
