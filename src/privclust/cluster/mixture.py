"""DPMoG-hard: a differentially private Gaussian mixture by hard EM, and private covariances for
centre-only models.

Byun, Choi, Lee, "Improving the Utility of Differentially Private Clustering through Dynamical
Processing", Alg. 2 and Sec. 5.1.2, with the corrections of
the departures page (``docs/departures.md``) items 19-22.

Both releases here work on the data mapped to ``[-1, 1]^D`` through the **public** bounds
(``u = (x - mid) / half``, after clipping to the bounds), so every record contributes a count of 1,
a sum ``u`` with ``|u_i| <= 1`` and a second moment ``u u^T`` with entries in ``[-1, 1]``. What is
released per component is the uncentred triple (count, sum, upper triangle of ``sum u u^T``)
(Departures 19); means, weights and covariances are post-processing.
"""

from __future__ import annotations

import math
import numbers
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.special import logsumexp

from .._geometry import most_likely_labeller, rows_outside, single_threaded_blas
from .._parallel import N_THREADS
from .._progress import fit_progress
from ..engine import LocalEngine
from ..privacy import NOISY_N_SHARE, Mechanisms, resolve_random_state, zcdp_gaussian_sigma
from ._base import (
    PrivateClusterMixin,
    check_delta,
    check_epsilon,
    check_fit_cost,
    check_n_clusters,
    clip_to_fitted_bounds,
    is_dask_input,
)
from ._centres import public_init

__all__ = [
    "DPGaussianMixture",
    "mixture_log_terms",
    "private_centre_covariances",
    "repair_covariances",
    "zcdp_rho",
    "zcdp_sigma",
]

_LOG_2PI = math.log(2.0 * math.pi)
_PREDICT_ROWS = 1 << 13  # rows per chunk of predict (the unit of work of its threads)


# --------------------------------------------------------------------------- calibration
def paper_r(d: int) -> int:
    """``r = 1 + 3D + 2D^2``: squared L2 sensitivity of one component's (count, sum, upper
    triangle of sum x x^T) with the paper's per-coordinate sensitivities (1; 2; 1 on the diagonal
    and 2 off it) (Prop. 5.1, Departures 21)."""
    return 1 + 3 * d + 2 * d * d


def add_remove_r(d: int) -> int:
    """``1 + D + D(D + 1)/2``: the squared L2 sensitivity of one release under privclust's
    add/remove-one-record neighbours (Departures 20), the default calibration. Always
    ``<= paper_r(D)`` (about 2x less noise sd for D = 8..10).

    Proof. Let ``D' = D + {x}``. Every released block (one row ``(N_k, S_k, triu M_k)`` per
    component or cell) is computed with an assignment that depends only on public values (the
    previous *released* mixture in DPMoG-hard, the public centres in the covariance pass) and
    on the record itself, so ``x`` lands in exactly one row ``k`` and every other row is equal
    on ``D`` and ``D'``. Row ``k`` changes by ``v = (1, u, triu(u u^T))`` with ``u`` the record
    clipped to the public bounds and mapped to ``[-1, 1]^D``, so ``|u_i| <= 1`` and::

        |v|^2 = 1 + sum_i u_i^2 + sum_{i <= j} u_i^2 u_j^2 <= 1 + D + D (D + 1) / 2,

    with equality at a corner of the box. The Gaussian mechanism with standard deviation
    ``sigma`` on a query of L2 sensitivity ``sqrt(r)`` is ``r / (2 sigma^2)``-zCDP (Bun-Steinke
    2016, Prop. 1.6), adaptive releases add their rho, and the conversion of Remark 3.2 (or the
    ledger's tighter RDP one) gives ``(eps, delta)``. The paper's ``r = 1 + 3D + 2D^2`` is the
    bound for *replacement* neighbours (a record leaves row ``k`` and joins row ``k'``, or moves
    inside row ``k``: sums change by up to 2 per coordinate), which privclust's unit does not
    need (a replacement is a removal plus an addition: by the triangle inequality its L2
    change is at most ``2 sqrt(r)``, so the same noise is ``4 rho``-zCDP for replacement).
    ``tests/test_mixture.py`` audits one release at this calibration on a pair of neighbours
    that attains the bound."""
    return 1 + d + d * (d + 1) // 2


def zcdp_rho(epsilon: float, delta: float) -> float:
    """The rho whose Bun-Steinke conversion ``rho + 2 sqrt(rho log(1/delta))`` equals epsilon:
    ``rho = (sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))^2`` (Remark 3.2 solved for rho)."""
    L = math.log(1.0 / delta)
    return (math.sqrt(L + epsilon) - math.sqrt(L)) ** 2


def zcdp_sigma(epsilon: float, delta: float, r: float, n_iter: int) -> float:
    """Alg. 2 l. 4 (Departures 21): ``sigma = sqrt(r tau / 2) (sqrt(log(1/delta) + eps) +
    sqrt(log(1/delta))) / eps``. Equal to ``sqrt(r tau / (2 rho))`` with :func:`zcdp_rho`: tau
    releases of L2 sensitivity ``sqrt(r)`` at this sigma are ``rho``-zCDP in total, hence
    ``(eps, delta)``-DP (Remarks 3.2, 3.4, 3.5)."""
    L = math.log(1.0 / delta)
    return math.sqrt(r * n_iter / 2.0) * (math.sqrt(L + epsilon) + math.sqrt(L)) / epsilon


# --------------------------------------------------------------------------- mixture maths
def _triu(d: int):
    return np.triu_indices(d)


def sym_from_triu(v: np.ndarray, d: int) -> np.ndarray:
    """(..., D(D+1)/2) upper-triangle vectors -> (..., D, D) symmetric matrices (``sym``)."""
    iu = _triu(d)
    out = np.zeros(v.shape[:-1] + (d, d))
    out[..., iu[0], iu[1]] = v
    out[..., iu[1], iu[0]] = v
    return out


def repair_covariances(cov, floor, ceiling=None):
    """Symmetrise and clip every eigenvalue to ``[floor, ceiling]`` (post-processing of a noisy
    covariance: a noisy matrix may be indefinite or singular). ``floor`` scalar or (k,)."""
    cov = np.asarray(cov, dtype=float)
    cov = 0.5 * (cov + np.swapaxes(cov, -1, -2))
    if not np.isfinite(cov).all():
        raise ValueError("covariances hold non-finite values")
    w, v = np.linalg.eigh(cov)
    floor = np.asarray(floor, dtype=float)
    if floor.ndim == 1:
        floor = floor[:, None]
    w = np.maximum(w, floor)
    if ceiling is not None:
        w = np.minimum(w, ceiling)
    return np.einsum("...ij,...j,...kj->...ik", v, w, v)


def mixture_log_terms(X, weights, means, covariances):
    """``log(pi_k N(x; mu_k, Sigma_k))`` for every row of X: (n, k). Zero weights give -inf."""
    X = np.asarray(X, dtype=float)
    means = np.asarray(means, dtype=float)
    chol = np.linalg.cholesky(np.asarray(covariances, dtype=float))
    k, d = means.shape
    with np.errstate(divide="ignore"):
        logw = np.log(np.asarray(weights, dtype=float))
    log_det = 2.0 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
    out = np.empty((X.shape[0], k))
    for c in range(k):
        z = np.linalg.solve(chol[c], (X - means[c]).T)
        out[:, c] = logw[c] - 0.5 * (log_det[c] + d * _LOG_2PI) - 0.5 * (z * z).sum(axis=0)
    return out


def _unit_map(bounds):
    lo, hi = bounds[:, 0], bounds[:, 1]
    return (lo + hi) / 2.0, (hi - lo) / 2.0


def _unit_engine(X, bounds) -> LocalEngine:
    """An engine on the records clipped to the public bounds and mapped to [-1, 1]^D (the map is
    public). Warns once about clipped records, like every estimator. Dask input gets the Dask
    engine (``privclust.engine.dask.unit_box_engine``)."""
    lo, hi = bounds[:, 0], bounds[:, 1]
    engine = None
    if is_dask_input(X):  # the same map, persisted on the cluster in one pass
        from ..engine.dask import unit_box_engine

        engine = unit_box_engine(X, bounds)
        outside = engine.n_clipped_records
    else:  # column reductions first: the (n, d) comparison only when some value is outside
        mask = rows_outside(X, lo, hi)
        outside = 0 if mask is None else int(np.count_nonzero(mask))
    if outside:
        warnings.warn(
            f"{outside} record(s) lie outside the bounds and were clipped to them "
            "(clipping is what bounds the sensitivity; widen the bounds if this is unexpected)",
            UserWarning,
            stacklevel=3,
        )
    if engine is not None:
        return engine
    mid, half = _unit_map(bounds)
    U = np.clip(X, lo, hi)  # float64 (the bounds are), then the same steps in place
    U -= mid
    U /= half
    d = X.shape[1]
    return LocalEngine(U, np.tile([-1.0, 1.0], (d, 1)))


def _to_original(means_u, cov_u, bounds):
    mid, half = _unit_map(bounds)
    return mid + half * means_u, cov_u * half[:, None] * half[None, :]


def _block(counts, sums, moments):
    """One row per group: the count, the sums and the upper triangle of ``sum u u^T``, the
    engine's exact totals themselves. The records were mapped to ``[-1, 1]^D`` one by one
    (a public map) before the engine summed them, so the moments are already about the
    middle of the bounds: nothing is centred or combined in float64 before the noise (the
    covariance about a centre is formed from the noisy values, post-processing)."""
    d = sums.shape[1]
    iu = _triu(d)
    return np.concatenate(
        [np.asarray(counts, float)[:, None], sums, moments[:, iu[0], iu[1]]], axis=1
    )


def _unblock(noisy, d):
    n = noisy[:, 0]
    s = noisy[:, 1 : 1 + d]
    m = sym_from_triu(noisy[:, 1 + d :], d)
    return n, s, m


def _choose_r(sensitivity: str, d: int) -> int:
    if sensitivity == "paper":
        return paper_r(d)
    if sensitivity == "add_remove":
        return add_remove_r(d)
    raise ValueError(
        f"sensitivity must be 'paper' (Departures 21) or 'add_remove', got {sensitivity!r}"
    )


def _default_floor(reg_covar, sigma, n_hat, d, noise_floor=1.0):
    """Eigenvalue floor per component (unit-box units): ``reg_covar`` plus ``noise_floor`` times
    the typical size of the noise's eigenvalues in the covariance, ``sigma sqrt(D) / n_hat`` (a
    noisy symmetric D x D matrix with entries of sd sigma has eigenvalues within about
    ``+-2 sigma sqrt(D)``). Depends only on released values: post-processing."""
    return reg_covar + noise_floor * sigma * math.sqrt(d) / np.maximum(n_hat, 1.0)


def private_centre_covariances(
    engine: LocalEngine,
    centres_u: np.ndarray,
    mech: Mechanisms,
    rho: float,
    *,
    item: str | None = None,
    sensitivity: str = "add_remove",
    reg_covar: float = 1e-4,
    label: str = "covariance pass",
):
    """Sec. 5.1.2: one private pass turning public centres into a Gaussian mixture.

    Records (in ``[-1, 1]^D``) go to their nearest centre; per centre the count, the sum and the
    upper triangle of ``sum u u^T`` are released with one zCDP Gaussian mechanism (L2
    sensitivity ``sqrt(r)``, ``sigma = sqrt(r / (2 rho))``); the cells are disjoint, so the
    batch costs one ``rho`` (parallel composition). ``rho`` is the line item's
    (:func:`~privclust.privacy.zcdp_rho_for` of its epsilon and delta: the exact inverse of the
    ledger's conversion).

    Post-processing: weights from the noisy counts (negative -> 0, Departures 20); the means stay
    the
    public centres; the covariance is the noisy second moment about the centre,
    ``(M - S c^T - c S^T) / N + c c^T``, repaired by an eigenvalue floor. Returns
    ``(weights, means_u, covariances_u, noisy_counts, sigma)``.
    """
    centres_u = np.asarray(centres_u, dtype=float)
    k, d = centres_u.shape
    r = _choose_r(sensitivity, d)
    sigma = zcdp_gaussian_sigma(rho, math.sqrt(r))
    counts, sums, moments = engine.nearest_centre_stats(centres_u, second_moments=True)
    noisy = mech.gaussian_zcdp(
        _block(counts, sums, moments),
        math.sqrt(r),
        rho,
        target=f"counts, sums and sum u u^T per nearest centre ({label})",
        note=f"Sec. 5.1.2; r = {r} ({sensitivity}); records mapped to [-1, 1]^D by the "
        "public bounds; disjoint cells (parallel composition)",
        item=item,
    )
    n_hat, s_hat, m_hat = _unblock(noisy, d)
    n_pos = np.maximum(n_hat, 1.0)
    c = centres_u
    cov = (m_hat - s_hat[:, :, None] * c[:, None, :] - c[:, :, None] * s_hat[:, None, :]) / n_pos[
        :, None, None
    ] + c[:, :, None] * c[:, None, :]
    floor = _default_floor(reg_covar, sigma, n_hat, d)
    cov = repair_covariances(cov, floor, float(d))
    # a cell whose noisy count is below 2 sigma (DPGaussianMixture's ``min_count``) has a
    # covariance that is mostly noise: weight 0, as DPMoG-hard does with an empty component
    w = np.where(n_hat >= 2.0 * sigma, np.maximum(n_hat, 0.0), 0.0)
    if not w.sum() > 0:
        w = np.maximum(n_hat, 0.0)
    weights = w / w.sum() if w.sum() > 0 else np.full(k, 1.0 / k)
    return weights, c.copy(), cov, n_hat, sigma


# --------------------------------------------------------------------------- estimator
class DPGaussianMixture(PrivateClusterMixin):
    """DPMoG-hard (000, Alg. 2): a Gaussian mixture fitted by hard EM with Gaussian noise.

    Every iteration assigns each record to its most likely component under the current (public,
    released) mixture, then releases per component the noisy count, the noisy sum and the noisy
    upper triangle of ``sum u u^T`` (records mapped to ``[-1, 1]^D`` by the public bounds). The
    next mixture is computed from these alone: weights from the noisy counts, means ``S / N``,
    covariances ``M / N - mu mu^T`` repaired by an eigenvalue floor.

    Privacy guarantee
    -----------------
    ``(epsilon, delta)``-DP under add/remove-one-record neighbours:

    * with ``delta=None``: ``0.02 epsilon`` on a noisy record count (two-sided geometric) from
      which privclust's delta rule sets ``delta = min(1e-5, 1 / n_hat^1.5)`` (the paper never
      states delta, Departures 21);
    * the rest, ``eps_z``, by zCDP: ``n_iter`` releases of the (K, 1 + D + D(D+1)/2) block with
      L2 sensitivity ``sqrt(r)`` per row (one record changes one component's row: the
      components partition the records, parallel composition), each ``rho / n_iter``-zCDP with
      ``sigma = sqrt(r n_iter / (2 rho))`` and ``r = 1 + D + D(D+1)/2``
      (``sensitivity='add_remove'``, the default; proof in :func:`add_remove_r`). ``rho`` is
      the largest whose conversion at ``delta`` by the ledger's own (tight, RDP) rule gives
      ``eps_z`` (:func:`~privclust.privacy.zcdp_rho_for`), so the ledger spends exactly
      ``eps_z``. Alg. 2 l. 4's sigma (:func:`zcdp_sigma`) inverts the looser conversion
      ``rho + 2 sqrt(rho log(1/delta))`` of Remark 3.2, which left about 16% of epsilon
      unspent at epsilon = 1, delta = 1e-6, and more noise on every release.

    ``sensitivity='paper'`` uses the paper's ``r = 1 + 3D + 2D^2`` (Prop. 5.1, a bound for
    replacement neighbours, which privclust's add/remove unit does not need): the same
    guarantee with about 2x more noise (sd) for D = 8..10.

    Choices where the paper is silent or not private as printed
    -----------------------------------------------------------
    * Uncentred second moments are released (Departures 19): the paper's ``sum (x - mu)(x - mu)^T``
      around a noisy mean has no bounded sensitivity as printed.
    * Weights are ``max(N_k, 0) / sum_j max(N_j, 0)`` from the noisy counts, never the true N
      (Departures 20).
    * Covariance repair (post-processing): eigenvalues clipped to
      ``[reg_covar + noise_floor sigma sqrt(D) / N_k, D]`` in unit-box units (``sigma sqrt(D) /
      N_k`` is the scale of the noise's eigenvalues in the covariance; D is the largest variance
      possible in ``[-1, 1]^D``). ``noise_floor = 1`` was chosen from a small sweep
      (0.25-2) on uci_htru2 / uci_magic: smaller floors leave spiky, noise-shaped components,
      larger ones blur every component into one mode.
    * Initialisation is data-independent (Departures 23): ``init`` as in DPLloyd (sphere packing by
      default) in ``[-1, 1]^D``, isotropic covariances ``init_scale^2 I``, equal weights.
    * Empty components: a component whose noisy count is below ``min_count`` (default
      ``2 sigma``, where its mean and covariance are mostly noise) is re-seeded before the next
      iteration by splitting the heaviest component along its main axis (post-processing of
      released values); after the last iteration it keeps weight ``max(N_k, 0) / ...`` and its
      previous mean/covariance, and ``active_components_`` marks it False.

    Labels of the training points (``labels_``) are the private model applied to X
    (post-processing); the private artefact is the mixture.

    Parameters
    ----------
    n_components : K. epsilon, delta : the budget (delta=None: the delta rule,
        ``min(1e-5, 1 / n_hat^1.5)``).
    bounds : public bounds (required). n_iter : tau (paper: 10).
    init : 'sphere_packing', 'uniform' or a public (K, D) array (original units).
    init_scale : initial standard deviation in unit-box units.
    reg_covar : absolute eigenvalue floor (unit-box units, i.e. fractions of the half-range
        squared). noise_floor : multiple of ``sigma sqrt(D) / N_k`` added to the floor.
    min_count : noisy count below which a component counts as empty (None: 2 sigma).
    sensitivity : 'add_remove' (default, see :func:`add_remove_r`) or 'paper' (Departures 21).
    random_state, accountant : as everywhere in privclust.

    Attributes
    ----------
    ``weights_`` (K,), ``means_`` (K, D), ``covariances_`` (K, D, D): the mixture in original units.
    ``cluster_centers_`` : ``means_``. ``noisy_counts_`` : (K,) the last noisy counts.
    ``active_components_`` : (K,) bool, noisy count >= min_count in the last iteration.
    ``sigma_`` : the noise standard deviation. ``delta_`` : the delta used. ``bounds_`` : the
    public bounds.
    ``labels_`` : most likely component of every training row (post-processing).
    ``privacy_report_`` : the ledger.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from privclust import DPGaussianMixture
    >>> X, _ = make_blobs(5000, centers=[[0, 0]], cluster_std=0.2, random_state=0)
    >>> gmm = DPGaussianMixture(3, epsilon=1.0, delta=1e-6, bounds=(-1, 1),
    ...                         random_state=0).fit(X)
    >>> gmm.means_.shape, gmm.covariances_.shape, round(float(gmm.weights_.sum()), 6)
    ((3, 2), (3, 2, 2), 1.0)
    """

    @staticmethod
    def keeps_zcdp_block(delta) -> bool:
        """Every iteration's statistics are one zCDP block, whatever delta."""
        return True

    def __init__(
        self,
        n_components=8,
        *,
        epsilon=1.0,
        delta=None,
        bounds=None,
        n_iter=10,
        init="sphere_packing",
        init_scale=0.5,
        reg_covar=1e-4,
        noise_floor=1.0,
        min_count=None,
        sensitivity="add_remove",
        random_state=None,
        accountant=None,
    ):
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.n_iter = n_iter
        self.init = init
        self.init_scale = init_scale
        self.reg_covar = reg_covar
        self.noise_floor = noise_floor
        self.min_count = min_count
        self.sensitivity = sensitivity
        self.random_state = random_state
        self.accountant = accountant

    # ------------------------------------------------------------------ checks
    def _check_params(self):
        eps = check_epsilon(self.epsilon)
        delta = check_delta(self.delta, required=True)
        k = self.n_components
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"n_components must be an int >= 1, got {k!r}")
        t = self.n_iter
        if isinstance(t, bool) or not isinstance(t, numbers.Integral) or not 1 <= t <= 1000:
            raise ValueError(f"n_iter must be an int in [1, 1000], got {t!r}")
        nf = self.noise_floor
        if not isinstance(nf, numbers.Real) or not nf >= 0 or not math.isfinite(nf):
            raise ValueError(f"noise_floor must be a number >= 0, got {nf!r}")
        for name in ("init_scale", "reg_covar"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Real) or not v > 0 or not math.isfinite(v):
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        if self.min_count is not None and not (
            isinstance(self.min_count, numbers.Real) and math.isfinite(self.min_count)
        ):
            raise ValueError(f"min_count must be a number or None, got {self.min_count!r}")
        if self.sensitivity not in ("paper", "add_remove"):
            raise ValueError(
                f"sensitivity must be 'paper' or 'add_remove', got {self.sensitivity!r}"
            )
        return eps, delta, int(k), int(t)

    # ------------------------------------------------------------------ fit
    @property
    def n_clusters_(self) -> int:
        """The number of components under the name every privclust estimator shares."""
        return self.n_components_

    def fit(self, X, y=None):
        """Fit the mixture privately. ``y`` is ignored (scikit-learn compatibility)."""
        eps, delta, k, T = self._check_params()
        plan, accountant = self._open_plan(eps, delta)  # checked before any data is read
        X = self._check_X(X, reset=True)
        check_n_clusters(k, X.shape[0], "n_components")
        d = X.shape[1]
        # ~1e-9 s per record x component x feature^2 x iteration: measured with one solve per
        # component; the blocked assignment measures 0.8e-10 to 6e-10 (2 cores, 2 to 100
        # features). Kept as an upper bound, so the same parameters are refused as before.
        check_fit_cost(1e-9 * k * max(d, 4) ** 2 * T,
                       f"DPGaussianMixture(n_components={k}, n_iter={T}) on {d} features",
                       "lower n_components, n_iter or the number of features")
        bounds = self._fit_bounds(X)
        source = resolve_random_state(self.random_state)
        mid, half = _unit_map(bounds)
        unit = np.tile([-1.0, 1.0], (d, 1))
        init = self.init
        if not isinstance(init, str):  # a public (K, D) array in original units
            init = (np.asarray(init, dtype=float) - mid) / half
        mu, init_desc = public_init(init, source.generator, unit, k)
        eps_n = self._plan_items(plan)
        need_n = eps_n > 0
        self._reserve_plan(plan, accountant, "DPGaussianMixture")

        engine = _unit_engine(X, bounds)
        report = self._start_report(plan.reserved(), source)
        mech = Mechanisms(source, report, plan)

        if need_n:
            n_hat = int(
                mech.count([engine.count(engine.root())[0]], eps_n,
                           target="record count (chooses delta)",
                           item="record count (delta rule)")[0]
            )
            plan.resolve_delta(n_hat, f"a noisy count ({NOISY_N_SHARE:g} of epsilon)")
        delta, sigma, rho_iter, r = self._calibrate(plan, report, d, T)
        report.notes.append(f"initialisation: {init_desc} (data-independent)")
        mu, cov, logw, n_hat_k, active = self._hard_em(engine, mech, mu, sigma, rho_iter, r, T)
        weights = np.exp(logw) if active.any() else np.full(k, 1.0 / k)
        means, covs = _to_original(mu, cov, bounds)

        self.weights_ = weights
        self.means_ = means
        self.covariances_ = covs
        self.cluster_centers_ = means
        self.noisy_counts_ = n_hat_k
        self.active_components_ = active
        self.n_components_ = k
        self.sigma_ = sigma
        self.delta_ = delta
        self.bounds_ = bounds
        self.n_iter_ = T
        self.n_features_in_ = d
        self.privacy_report_ = report
        self._close_plan(plan, report, accountant)
        del engine
        self.labels_ = self.predict(X)
        return self

    @staticmethod
    def _plan_items(plan) -> float:
        """The plan's line items: a record count when the delta rule needs one (its epsilon
        is returned; 0 without), and the zCDP block of all iterations (also the planner's)."""
        eps_n = NOISY_N_SHARE * plan.epsilon if plan.delta is None else 0.0
        if eps_n:
            plan.add("record count (delta rule)", "two-sided geometric", "pure", eps_n)
        plan.add("component statistics, all iterations", "gaussian (zCDP)", "zcdp",
                 plan.epsilon - eps_n, 1.0)
        return eps_n

    def _min_count(self, sigma: float) -> float:
        """Noisy count below which a component is noise: ``min_count``, else 2 sigma."""
        return 2.0 * sigma if self.min_count is None else float(self.min_count)

    def _calibrate(self, plan, report, d: int, T: int):
        """``(delta, sigma, rho per iteration, r)`` of the zCDP block, once delta is known."""
        block = plan.item("component statistics, all iterations")
        eps_z, delta = block.epsilon, plan.require_delta()
        report.zcdp_delta = block.delta
        r = _choose_r(self.sensitivity, d)
        # rho is the exact inverse of the ledger's conversion at the block's delta, so the
        # ledger lands on eps_z (Alg. 2 l. 4's formula inverts a looser bound)
        rho_total = block.rho
        rho_iter = rho_total / T
        sigma = zcdp_gaussian_sigma(rho_iter, math.sqrt(r))
        report.notes.append(
            f"zCDP part: eps_z = {eps_z:.6g} at delta = {block.delta:.3g}, rho = "
            f"{rho_total:.6g} over {T} iterations, sigma = {sigma:.6g} (r = {r}, "
            f"{self.sensitivity})"
        )
        return delta, sigma, rho_iter, r

    def _hard_em(self, engine, mech, mu, sigma, rho_iter, r, T):
        """Alg. 2's iterations: one private release of every component's count, sum and
        uncentred second moment per iteration, then the M-step (post-processing). Returns
        ``(means, covariances, log weights, noisy counts, active)`` in unit-box units."""
        k, d = mu.shape
        min_count = self._min_count(sigma)
        cov = np.repeat((float(self.init_scale) ** 2 * np.eye(d))[None], k, axis=0)
        logw = np.full(k, -math.log(k))
        n_hat_k = np.zeros(k)
        active = np.ones(k, dtype=bool)
        n_reseeded = 0
        with fit_progress("DPGaussianMixture", T) as step:
            for t in range(T):
                counts, sums, moments = engine.gaussian_assignment_stats(
                    mu, np.linalg.cholesky(cov), logw)
                noisy = mech.gaussian_zcdp(
                    _block(counts, sums, moments),
                    math.sqrt(r),
                    rho_iter,
                    target=f"counts, sums and sum u u^T per component, iteration {t + 1}",
                    note="hard EM, disjoint components (parallel composition); uncentred "
                    "moments (Departures 19)",
                    item="component statistics, all iterations",
                )
                n_hat_k, s_hat, m_hat = _unblock(noisy, d)
                active = n_hat_k >= max(min_count, 1.0)
                mu, cov, w = self._m_step(n_hat_k, s_hat, m_hat, active, mu, cov, logw, sigma)
                if t < T - 1 and (~active).any() and active.any():
                    mu, cov, w, n_new = _reseed(mu, cov, w, active)
                    n_reseeded += n_new
                with np.errstate(divide="ignore"):
                    logw = np.log(w / w.sum())
                step()
        if n_reseeded:
            mech.report.notes.append(
                f"{n_reseeded} empty component(s) re-seeded by splitting the heaviest one "
                "(post-processing)"
            )
        return mu, cov, logw, n_hat_k, active

    def _m_step(self, n_hat_k, s_hat, m_hat, active, mu, cov, logw, sigma):
        """Means, repaired covariances and weights from the noisy statistics; inactive
        components keep their previous values (post-processing)."""
        d = mu.shape[1]
        npos = np.maximum(n_hat_k, 1.0)
        new_mu = np.clip(s_hat / npos[:, None], -1.0, 1.0)
        new_cov = m_hat / npos[:, None, None] - new_mu[:, :, None] * new_mu[:, None, :]
        floor = _default_floor(self.reg_covar, sigma, n_hat_k, d, float(self.noise_floor))
        new_cov = repair_covariances(new_cov, floor, float(d))
        mu = np.where(active[:, None], new_mu, mu)
        cov = np.where(active[:, None, None], new_cov, cov)
        w = np.where(active, np.maximum(n_hat_k, 0.0), 0.0)
        if not active.any():  # nothing usable: keep the previous mixture
            w = np.exp(logw)
        return mu, cov, w

    # ------------------------------------------------------------------ predict
    def predict_log_terms(self, X):
        """``log(pi_k N(x; mu_k, Sigma_k))`` per row and component (post-processing)."""
        return self._log_terms(X, clip=False)

    def _log_terms(self, X, clip: bool):
        self._check_fitted()
        arr = self._check_X(X, reset=False)
        if arr.shape[1] != self.means_.shape[1]:
            raise ValueError(
                f"X has {arr.shape[1]} features; the model was fitted on {self.means_.shape[1]}"
            )
        if clip:  # assignments treat a point as the fit treated a record: clipped
            arr = clip_to_fitted_bounds(self, arr)
        return mixture_log_terms(arr, self.weights_, self.means_, self.covariances_)

    def predict(self, X):
        """Most likely component of every row (the hard-EM assignment, on the row clipped to
        the model's bounds as in the fit; post-processing).

        Computed as the fit assigns records (:func:`~privclust._geometry.most_likely_labeller`:
        whitened distances in blocks, float64): the argmax of :meth:`predict_log_terms` up to
        rounding, ties to the lower index."""
        self._check_fitted()
        arr = self._check_X(X, reset=False)
        if arr.shape[1] != self.means_.shape[1]:
            raise ValueError(
                f"X has {arr.shape[1]} features; the model was fitted on {self.means_.shape[1]}"
            )
        arr = np.asarray(clip_to_fitted_bounds(self, arr))
        if arr.dtype not in (np.float32, np.float64):
            arr = arr.astype(np.float64)
        with np.errstate(divide="ignore"):
            logw = np.log(np.asarray(self.weights_, dtype=float))
        labeller = most_likely_labeller(
            self.means_, np.linalg.cholesky(np.asarray(self.covariances_, dtype=float)), logw)
        return _labels_in_chunks(arr, labeller, len(logw))

    def predict_proba(self, X):
        """Posterior probability of every component per row (clipped as in ``predict``;
        post-processing)."""
        lt = self._log_terms(X, clip=True)
        return np.exp(lt - logsumexp(lt, axis=1, keepdims=True))

    def score_samples(self, X):
        """``log p(x)`` under the private mixture."""
        return logsumexp(self.predict_log_terms(X), axis=1)

    def score(self, X, y=None) -> float:
        """Mean ``log p(x)`` of ``X`` under the private mixture (scikit-learn's
        ``GaussianMixture.score``). **Not private**: it reads ``X`` exactly (see
        :meth:`PrivateClusterMixin.score`)."""
        return float(np.mean(self.score_samples(X)))


def _labels_in_chunks(arr, labeller, k: int) -> np.ndarray:
    """``labeller`` on chunks of rows of ``arr``, on all cores when the pass is long (``k (d +
    1)^2`` multiply-adds a row; the same rule as the fit's assignment pass), BLAS on one
    thread (small products)."""
    n, d = arr.shape
    out = np.empty(n, dtype=np.int64)
    step = _PREDICT_ROWS
    starts = range(0, n, step)

    def fill(start):
        out[start : start + step] = labeller(arr[start : start + step])

    with single_threaded_blas():
        if N_THREADS > 1 and len(starts) > 1 and n * k * (d + 1) ** 2 >= 1 << 26:
            with ThreadPoolExecutor(N_THREADS) as pool:
                for _ in pool.map(fill, starts):
                    pass
        else:
            for start in starts:
                fill(start)
    return out


def _reseed(mu, cov, w, active):
    """Re-seed inactive components by splitting the heaviest active one along its main axis:
    ``mu +- sqrt(lambda_1) v_1 / 2``, the same covariance, half the weight each. Uses released
    values only (post-processing)."""
    mu, cov, w = mu.copy(), cov.copy(), w.copy()
    n_new = 0
    for j in np.flatnonzero(~active):
        cand = np.flatnonzero(active & (w > 0))
        if cand.size == 0:
            break
        i = int(cand[np.argmax(w[cand])])
        lam, vec = np.linalg.eigh(cov[i])
        step = 0.5 * math.sqrt(max(lam[-1], 0.0)) * vec[:, -1]
        mu[j] = np.clip(mu[i] + step, -1.0, 1.0)
        mu[i] = np.clip(mu[i] - step, -1.0, 1.0)
        cov[j] = cov[i]
        w[i] = w[j] = w[i] / 2.0
        active = active.copy()
        active[j] = True
        n_new += 1
    return mu, cov, w, n_new
