"""DP-Lloyd: Lloyd's k-means with a noisy count and a noisy sum per cluster and iteration.

Su, Cao, Li, Bertino, Jin, "Differentially private k-means clustering" (CODASPY 2016) and the
journal version "... and a hybrid approach to private optimization" (ACM TOPS 2017): the
baseline of DPM (Liebenow et al.) and of Morse merging (Byun et al.). The helpers here
(:func:`su_budget_split`,
:func:`su_iterations`, :func:`sphere_packing_init`, :func:`noisy_centroids`) are shared with
:mod:`privclust.cluster.convergent`.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from scipy.spatial import cKDTree

from .._progress import fit_progress
from ..privacy import NOISY_N_SHARE, Mechanisms, resolve_random_state
from ._base import (
    PrivateClusterMixin,
    check_bounds,
    check_epsilon,
    check_fit_cost,
    nearest_centre,
)

__all__ = [
    "DPLloyd",
    "noisy_centroids",
    "sphere_packing_init",
    "su_budget_split",
    "su_iterations",
]

SU_RHO = 0.225  # Su et al.'s coordinate constant rho (the value diffprivlib also uses)
SU_MAX_ITER = 7  # Su et al.: at most 7 iterations ...
SU_MIN_ITER = 2  # ... and at least 2


def su_budget_split(epsilon: float, d: int, rho: float = SU_RHO) -> tuple[float, float]:
    """``(eps_count, eps_sum)``: one iteration's budget split between counts and sums.

    Su et al. minimise the centroid's mean squared error over the split. With coordinates
    scaled to ``[-1, 1]`` every dimension's sum has sensitivity 1 and the count has sensitivity
    1; their optimum gives each of the ``d`` sum coordinates the budget ``1`` and the count the
    budget ``cbrt(4 d rho^2)``, normalised to the iteration's total:

    ``eps_count = eps * c / (d + c)``, ``eps_sum = eps * d / (d + c)``, ``c = cbrt(4 d rho^2)``.

    ``eps_sum`` is the budget of the whole ``d``-dimensional sum (released with one L1 Laplace
    mechanism of sensitivity ``d``, i.e. ``eps_sum / d`` per coordinate). The two returned values
    are named in this order on purpose: diffprivlib's helper returns ``(per-coordinate, count)``
    and its caller unpacks ``(count, per-coordinate)``, so its counts get the per-coordinate
    budget and *every* coordinate gets the count's: it spends ``(1 + d c) / (d + c)`` times its
    claim (1.52 at d = 20). ``tests/test_lloyd.py`` measures the noise actually drawn to rule
    that out here.
    """
    c = float(np.cbrt(4.0 * d * rho**2))
    return epsilon * c / (d + c), epsilon * d / (d + c)


def su_iterations(epsilon: float, n_hat: float, k: int, d: int, max_iter: int = SU_MAX_ITER,
                  rho: float = SU_RHO) -> int:
    """Su et al.'s number of iterations: ``clip(floor(eps / eps_m), 2, 7)`` (capped by max_iter).

    ``eps_m = sqrt(500 k^3 / n^2 * (d + cbrt(4 d rho^2))^3)`` is the smallest per-iteration
    budget whose centroid error stays below their MSE threshold (1/500); more iterations than
    ``eps / eps_m`` would push every iteration below it. ``n_hat`` must be a *released* count
    (the rule in diffprivlib uses the exact n, which makes the number of iterations, and so every
    noise scale, depend on the data without accounting).
    """
    n = max(float(n_hat), 1.0)
    c = float(np.cbrt(4.0 * d * rho**2))
    eps_m = math.sqrt(500.0 * k**3 / n**2 * (d + c) ** 3)
    t = int(max(min(epsilon / eps_m, SU_MAX_ITER), SU_MIN_ITER))
    return max(1, min(t, int(max_iter)))


def sphere_packing_init(generator: np.random.Generator, bounds: np.ndarray, k: int,
                        max_retries: int = 100) -> np.ndarray:
    """Su et al.'s data-independent initialisation ("sphere packing").

    Draw centres uniformly in the box shrunk by ``a`` on every side and keep a draw only if it
    is at least ``2a`` from every centre already placed (at most ``max_retries`` tries per
    centre); if the ``k`` centres do not fit, halve ``a`` and start again. ``a`` starts at half
    the narrowest side. Reads no data: the randomness is public (from the fit's generator).
    """
    lo, hi = bounds[:, 0], bounds[:, 1]
    width = hi - lo
    d = lo.size
    a = float(width.min()) / 2.0
    log_box = float(np.sum(np.log(width)))
    for _ in range(60):
        # k disjoint balls of radius a inside the box cannot hold more volume than the box:
        # skip a radius that cannot fit without trying it (the tries cost O(k^2))
        log_balls = math.log(k) + d / 2 * math.log(math.pi) - math.lgamma(d / 2 + 1) \
            + d * math.log(a)
        if log_balls > log_box:
            a /= 2.0
            continue
        centres = _pack(generator, lo, hi, a, k, max_retries)
        if centres is not None:
            return centres
        a /= 2.0
    return generator.uniform(lo, hi, size=(k, d))  # a -> 0: plain uniform draws


def _pack(generator, lo, hi, a, k, max_retries):
    """One packing attempt at radius ``a``: each centre is the first of up to ``max_retries``
    uniform draws at least ``2a`` from those placed (drawn a few at a time: most first draws
    fit). None if a centre finds no place. Distances go to a k-d tree of the centres placed so
    far (rebuilt every 256) plus the few placed since: O(k log k), not O(k^2)."""
    d = lo.size
    centres = np.empty((k, d))
    top = np.maximum(hi - a, lo + a)  # rounding can put lo + a above hi - a
    tree, built, min_d2 = None, 0, (2.0 * a) ** 2
    for placed in range(k):
        tried = 0
        while tried < max_retries:
            m = min(8 if tried == 0 else 32, max_retries - tried)
            cand = generator.uniform(lo + a, top, size=(m, d))
            tried += m
            ok = np.ones(m, dtype=bool)
            if tree is not None:
                ok &= tree.query(cand, k=1)[0] ** 2 >= min_d2
            recent = centres[built:placed]
            if recent.size:
                ok &= ((cand[:, None, :] - recent[None]) ** 2).sum(axis=2).min(axis=1) >= min_d2
            hit = np.flatnonzero(ok)
            if hit.size:
                centres[placed] = cand[hit[0]]
                break
        else:
            return None
        if placed + 1 - built >= 256:
            tree, built = cKDTree(centres[: placed + 1]), placed + 1
    return centres


def noisy_centroids(mech: Mechanisms, counts, sums, fallback, bounds, epsilon: float, *,
                    label: str, items: tuple[str, str] | None = None):
    """One DP-Lloyd release: noisy sizes and noisy sums of ``k`` disjoint clusters.

    The sums are taken of ``u = (x - mid) / half`` (``mid``, ``half``: centre and half-width of
    the public bounds), so every clipped record adds a vector in ``[-1, 1]^d``: L1 sensitivity
    ``d`` under add/remove, released with one Laplace mechanism at ``eps_sum``; the sizes get
    two-sided geometric noise at ``eps_count`` (:func:`su_budget_split` of ``epsilon``). The
    clusters are disjoint, so each release is one batch (parallel composition) and the pair
    costs ``epsilon``. ``items`` names the plan's line items for the sizes and the sums
    (see :func:`plan_centroid_items`).

    Post-processing: ``centre = mid + half * clip(sum_hat / n_hat, -1, 1)`` where the noisy size
    ``n_hat >= 1``, else ``fallback`` (the previous centre). Returns ``(centres, n_hat,
    unit_sum_hat)``; rows of ``counts``/``sums`` may also be independent trials (audits).
    """
    counts = np.asarray(counts, dtype=np.int64)
    sums = np.asarray(sums, dtype=float)
    d = sums.shape[1]
    lo, hi = bounds[:, 0], bounds[:, 1]
    mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0
    eps_count, eps_sum = su_budget_split(epsilon, d)
    unit = (sums - counts[:, None] * mid) / half
    count_item, sum_item = items if items is not None else (None, None)
    n_hat = mech.count(counts, eps_count, target=f"cluster sizes, {label}",
                       note="Su et al. split: count share cbrt(4 d rho^2) / (d + cbrt(...))",
                       item=count_item)
    s_hat = mech.laplace(
        unit, float(d), eps_sum, target=f"cluster sums of (x - mid) / half-width, {label}",
        note="L1 sensitivity d: a clipped record adds a vector in [-1, 1]^d", item=sum_item,
    )
    ok = n_hat >= 1
    mean = np.clip(s_hat / np.maximum(n_hat, 1)[:, None], -1.0, 1.0)
    centres = np.where(ok[:, None], mid + half * mean, np.asarray(fallback, dtype=float))
    return centres, n_hat, s_hat


def plan_centroid_items(plan, name: str, epsilon: float, d: int) -> tuple[str, str]:
    """Add the two line items of a series of :func:`noisy_centroids` releases worth
    ``epsilon`` in total (Su et al.'s split between sizes and sums); returns their names."""
    eps_count, eps_sum = su_budget_split(epsilon, d)
    names = (f"cluster sizes, {name}", f"cluster sums, {name}")
    plan.add(names[0], "two-sided geometric", "pure", eps_count)
    plan.add(names[1], "laplace", "pure", eps_sum)
    return names


def kmeans_cost(centres, counts, sums, sq_norms) -> float:
    """Exact k-means cost from :meth:`~privclust.engine.Engine.nearest_centre_moments`
    (a local diagnostic for the data holder, never released)."""
    c = np.asarray(centres, dtype=float)
    per = sq_norms - 2.0 * np.einsum("kd,kd->k", c, sums) + counts * (c**2).sum(axis=1)
    return float(np.maximum(per, 0.0).sum())


def _nearest_labels(X, centres) -> np.ndarray:
    """The same assignment as ``predict`` (one shared implementation)."""
    return nearest_centre(X, centres)


def final_cost_and_labels(X, bounds, centres):
    """Labels of X (nearest centre: post-processing of the model) and the exact k-means cost of
    the clipped records at ``centres`` (the data holder's diagnostic), from one assignment."""
    labels = _nearest_labels(X, centres)
    Xc = np.clip(X, bounds[:, 0], bounds[:, 1])
    return labels, float(((Xc - centres[labels]) ** 2).sum())


def check_n_clusters(k, n_samples: int | None = None, name: str = "n_clusters") -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"{name} must be an int >= 1, got {k!r}")
    if k > MAX_CLUSTERS:
        raise ValueError(f"{name}={k} is more than privclust supports ({MAX_CLUSTERS})")
    if n_samples is not None and k > n_samples:
        warnings.warn(
            f"{name}={k} is more than the {n_samples} records in X: at least {k - n_samples} "
            "of the released centres can hold no record and come from noise alone; ask for "
            "fewer (this check reads only the size of X, and nothing about it is released)",
            UserWarning,
            stacklevel=3,
        )
    return int(k)


#: The most clusters (or components) any k-means-family estimator accepts: the public
#: initialisation and every iteration are O(k) per record, and 10,000 centres take ~3 s to place.
MAX_CLUSTERS = 10_000


def check_positive_int(value, name: str, upper: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if upper is not None and value > upper:
        raise ValueError(f"{name}={value} is too large (at most {upper})")
    return int(value)


def public_init(init, generator, bounds, k: int) -> tuple[np.ndarray, str]:
    """Data-independent initial centres: 'sphere_packing', 'uniform' or a public (k, d) array."""
    d = bounds.shape[0]
    if isinstance(init, str):
        if init == "sphere_packing":
            return sphere_packing_init(generator, bounds, k), "sphere packing (Su et al.)"
        if init == "uniform":
            # data-independent randomness: uniform in the public bounds
            return generator.uniform(bounds[:, 0], bounds[:, 1], size=(k, d)), "uniform"
        raise ValueError(
            f"init must be 'sphere_packing', 'uniform' or a ({k}, {d}) array of public "
            f"centres; got {init!r}"
        )
    arr = np.asarray(init, dtype=float)
    if arr.shape != (k, d) or not np.isfinite(arr).all():
        raise ValueError(f"init array must be finite with shape ({k}, {d}), got {arr.shape}")
    return np.clip(arr, bounds[:, 0], bounds[:, 1]), "user-supplied public centres"


def finish_centre_fit(est, X, bounds, centres, sizes, history, costs, report, plan, accountant):
    """The end every k-means fit shares: set the released centres and noisy sizes, the
    iteration history and the exact local cost diagnostics (``costs`` gets the cost at the
    released centres), attach the report, and label X (post-processing of the release)."""
    labels, cost = final_cost_and_labels(X, bounds, centres)
    costs.append(cost)
    est.cluster_centers_ = centres
    est.cluster_sizes_ = np.asarray(sizes, dtype=np.int64)
    est.n_clusters_ = centres.shape[0]
    est.n_iter_ = len(history) - 1
    est.centers_history_ = np.stack(history)
    est.cost_history_ = np.asarray(costs)
    est.n_features_in_ = X.shape[1]
    est.privacy_report_ = report
    est._close_plan(plan, report, accountant)
    est.labels_ = labels
    return est

class DPLloyd(PrivateClusterMixin):
    """DP-Lloyd (Su, Cao, Li, Bertino, Jin 2016): k-means with noisy counts and noisy sums.

    Every iteration assigns the records to the current (public) centres and releases, per
    cluster, a noisy size and a noisy sum; the new centre is their ratio. The initial centres
    do not depend on the data.

    Privacy guarantee
    -----------------
    ``epsilon``-DP (pure) under add/remove-one-record neighbours, by basic composition of

    * with ``n_iter=None``: ``0.02 epsilon`` on a noisy record count (two-sided geometric), used
      only to choose the number of iterations ``T`` with Su et al.'s rule
      (:func:`su_iterations`);
    * per iteration, ``eps_t = (epsilon - that share) / T`` split by Su et al.'s analysis
      (:func:`su_budget_split`): noisy cluster sizes (two-sided geometric, sensitivity 1) at
      ``eps_t c / (d + c)`` and noisy sums of ``(x - mid) / half-width`` (one Laplace mechanism,
      L1 sensitivity ``d``) at ``eps_t d / (d + c)``, ``c = cbrt(4 d 0.225^2)``. The clusters
      partition the records (parallel composition).

    Records are clipped to the public ``bounds`` (that is what bounds the sensitivity). The ledger
    ``privacy_report_`` lists every release; its total equals ``epsilon``, and
    ``tests/test_lloyd.py`` checks the noise actually drawn against it for d = 1, 2, 20.

    Choices where the paper is silent or the reference implementation is not private
    ---------------------------------------------------------------------------------
    * Sums are centred on the middle of the bounds and scaled by the half-width (Su et al.
      normalise to ``[-r, r]^d``); diffprivlib uses the full width as sensitivity, twice the
      noise.
    * The number of iterations uses a *noisy* n (diffprivlib uses the exact n, an unaccounted
      data-dependent choice); pass ``n_iter`` to fix T and skip that release.
    * A cluster whose noisy size is below 1 keeps its previous centre; a noisy mean is clipped
      to the bounds (post-processing). Every cluster's size and sum is released every iteration,
      empty or not (diffprivlib skips empty clusters, which reveals which ones are empty).
    * ``init='sphere_packing'`` is Su et al.'s initialisation (:func:`sphere_packing_init`);
      ``'uniform'`` draws uniformly in the bounds; an array is taken as public centres.

    Parameters
    ----------
    n_clusters : k. epsilon : privacy budget (> 0).
    bounds : public bounds, ``(lo, hi)`` for every feature or a ``(d, 2)`` array. Required.
    max_iter : cap on T for the rule (Su et al.: 7).
    n_iter : None (Su et al.'s rule on a noisy n) or a fixed number of iterations (then
        ``max_iter`` is not used and no record count is released).
    init : 'sphere_packing' (default), 'uniform' or a public ``(k, d)`` array.
    random_state : None (secure), int or Generator (reproducible, not secure).
    accountant : a shared :class:`~privclust.Accountant` (checked before any data is read).

    Attributes
    ----------
    ``cluster_centers_`` : (k, d) private centres. ``cluster_sizes_`` : (k,) their last noisy sizes.
    ``labels_`` : nearest private centre of every training row (post-processing of the private model
    applied to X, not a release). ``n_iter_`` : T. ``centers_history_`` : (T + 1, k, d) the released
    centres after each iteration (the first row is the public initialisation).
    ``cost_history_`` : (T + 1,) exact k-means cost of X at each row of ``centers_history_`` (a
    local diagnostic for the data holder: computed from the data without noise, NOT private,
    never part of the release). ``privacy_report_`` : :class:`~privclust.PrivacyReport`.

    Examples
    --------
    >>> import numpy as np
    >>> from privclust import DPLloyd
    >>> X = np.random.default_rng(0).uniform(-1, 1, size=(5000, 2))
    >>> model = DPLloyd(4, epsilon=1.0, bounds=(-1, 1), random_state=0).fit(X)
    >>> model.cluster_centers_.shape, model.privacy_report_.private
    ((4, 2), True)
    """

    SU_RHO = SU_RHO

    def __init__(
        self,
        n_clusters=8,
        *,
        epsilon=1.0,
        bounds=None,
        max_iter=SU_MAX_ITER,
        n_iter=None,
        init="sphere_packing",
        random_state=None,
        accountant=None,
    ):
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.max_iter = max_iter
        self.n_iter = n_iter
        self.init = init
        self.random_state = random_state
        self.accountant = accountant

    def _check_params(self):
        eps = check_epsilon(self.epsilon)
        k = check_n_clusters(self.n_clusters)
        max_iter = check_positive_int(self.max_iter, "max_iter", upper=10_000)
        n_iter = None if self.n_iter is None else check_positive_int(self.n_iter, "n_iter",
                                                                      upper=10_000)
        return eps, k, max_iter, n_iter

    def fit(self, X, y=None):
        """Cluster X privately. ``y`` is ignored (present for scikit-learn compatibility)."""
        eps, k, max_iter, n_iter = self._check_params()
        plan, accountant = self._open_plan(eps, 0.0)  # checked before any data is read
        X = self._check_X(X, reset=True)
        check_n_clusters(k, X.shape[0])
        bounds = check_bounds(self.bounds, X.shape[1])
        d = X.shape[1]
        T_max = max_iter if n_iter is None else n_iter
        # measured: ~3.4e-10 s per record x cluster x feature x iteration (nearest centres)
        check_fit_cost(X.shape[0], 3.4e-10 * k * max(d, 2) * T_max,
                       f"DPLloyd(n_clusters={k}, {T_max} iterations) on {d} features",
                       "lower n_clusters or n_iter")
        source = resolve_random_state(self.random_state)
        centres, init_desc = public_init(self.init, source.generator, bounds, k)
        eps_n = NOISY_N_SHARE * plan.epsilon if n_iter is None else 0.0
        if n_iter is None:
            plan.add("record count (iteration rule)", "two-sided geometric", "pure", eps_n)
        items = plan_centroid_items(plan, "all iterations", plan.epsilon - eps_n, d)
        self._reserve_plan(plan, accountant, "DPLloyd")

        engine = self._make_engine(X, bounds)
        report = self._start_report(plan.reserved(), source)
        mech = Mechanisms(source, report, plan)

        if n_iter is None:
            n_hat = int(mech.count([engine.count(engine.root())[0]], eps_n,
                                   target="record count (chooses the number of iterations)",
                                   item="record count (iteration rule)")[0])
            T = su_iterations(plan.epsilon - eps_n, n_hat, k, d, max_iter)
            report.notes.append(f"n_iter=None: T = {T} from Su et al.'s rule on n_hat = {n_hat}")
        else:
            T = n_iter
        eps_t = (plan.epsilon - eps_n) / T
        report.notes.append(f"initialisation: {init_desc} (data-independent)")

        history = [centres]
        costs = []
        with fit_progress("DPLloyd", T) as step:
            for t in range(T):
                counts, sums, sq = engine.nearest_centre_moments(centres)
                costs.append(kmeans_cost(centres, counts, sums, sq))
                centres, n_hat_k, _ = noisy_centroids(mech, counts, sums, centres, bounds, eps_t,
                                                      label=f"iteration {t + 1}", items=items)
                history.append(centres)
                step()
        return finish_centre_fit(self, X, bounds, centres, n_hat_k, history, costs, report,
                                 plan, accountant)
