"""DPM: differentially private clustering through separation (DP-Mondrian).

Liebenow, Schuett, Braun, Gehrke, Thaeter, Mohammadi, "DPM: Clustering Sensitive Data through
Separation", with the corrections listed on the documentation's departures page
(``docs/departures.md``), items 1-10.
"""

from __future__ import annotations

import math
import numbers
from functools import lru_cache

import numpy as np
from scipy import integrate, optimize

from .._geometry import block_rows
from .._parallel import N_THREADS, on_cores
from ..engine.local import LocalEngine
from ..privacy import Mechanisms, count_offset, public_offsets, resolve_random_state
from ._base import (
    PrivateClusterMixin,
    check_delta,
    check_epsilon,
    is_dask_input,
    nearest_centre,
)
from ._tree import SplitTree

__all__ = ["DPM", "gap_percentile_constant"]

PAPER_BUDGET_SPLIT = (0.04, 0.18, 0.18, 0.6)  # Sec. 6.1
# Default: more for split selection, less for averaging (Departures 10a; measured in the README's
# DPM section and benchmarks/dpm.py: 20/20 Synth-10d runs exact vs 14/20 with the paper's).
DEFAULT_BUDGET_SPLIT = (0.04, 0.18, 0.36, 0.42)
_GAP_PERCENTILE = 0.65  # Alg. 2 uses the 65th percentile of neighbour gaps
_MAX_BINS = 256  # at most this many split candidates per dimension
_GAP_FLOOR = 1e-12  # gaps (fractions of a range) are ranked in [1e-12, 1] on a log scale
# resolution='auto': shares of the interval-size budget for the ties and the recording step
_TIES_SHARE, _STEP_SHARE = 0.25, 0.375


@lru_cache(maxsize=16)
def gap_percentile_constant(p: float = _GAP_PERCENTILE) -> float:
    """The constant c with ``percentile_p(neighbour gaps of n draws of N(0, s^2)) ~ c s / n``.

    Alg. 2 builds its codebook by simulating N(0, sigma) samples for every candidate sigma (the
    authors' code spends 26 of its 29 s per fit there). The codebook is data-independent and
    linear in sigma: near a point z (in units of sigma) the gaps of n sorted draws are
    exponential with mean ``s / (n phi(z))``, so the p-quantile g of all gaps solves
    ``E_z[1 - exp(-c phi(z))] = p`` with ``c = g n / s``. We solve that once by quadrature.
    """
    phi = lambda z: math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)  # noqa: E731

    def mass_below(c: float) -> float:
        val, _ = integrate.quad(lambda z: phi(z) * -math.expm1(-c * phi(z)), -12, 12, limit=200)
        return val - p

    return float(optimize.brentq(mass_below, 1e-6, 1e4, xtol=1e-12))


def _fraction_from_percentile(p_hat: float, n_hat: float, sigmas) -> float:
    """Alg. 2 l. 9-10 in closed form: sigma from the gap percentile, beta = sigma / 2 (as a
    fraction of the range), kept within [1/_MAX_BINS, 1/2]."""
    c = gap_percentile_constant(_GAP_PERCENTILE)
    n_ref = max(float(n_hat), 2.0)
    if sigmas is None:
        sigma = p_hat * n_ref / c
    else:  # the candidate whose predicted percentile is closest
        sigma = float(sigmas[np.argmin(np.abs(sigmas * c / n_ref - p_hat))])
    return float(np.clip(sigma / 2.0, 1.0 / _MAX_BINS, 0.5))


def _candidate_steps(width: float) -> np.ndarray:
    """Public candidate recording steps ``{5, 2.5, 2, 1} x 10^e`` between ``width / 2`` and
    ``width * 1e-9``, largest first."""
    e = np.arange(-15, 16)
    steps = (np.array([5.0, 2.5, 2.0, 1.0])[None, :] * 10.0 ** e[:, None]).ravel()
    steps = steps[(steps <= width / 2) & (steps >= width * 1e-9)]
    return np.sort(steps)[::-1]


def _level_shares(total: float, n_levels: int) -> np.ndarray:
    """Sec. 3.3 / Alg. 1 l. 3-4: eps_i = total * sqrt(2)^i / sum_j sqrt(2)^j (a total,
    Departures 7)."""
    w = np.sqrt(2.0) ** np.arange(n_levels)
    return total * w / w.sum()


class DPM(PrivateClusterMixin):
    """DPM (DP-Mondrian): recursive private splits through sparse regions (004, Alg. 1-2).

    DPM projects the data onto every axis, scores split candidates (the centres of intervals of
    width ``beta``) by *centre-ness* (rank close to the median, Def. 6) plus ``alpha`` times
    *emptiness* (few points in the interval, Def. 5), picks one split per node with the
    exponential mechanism and recurses while both children keep at least ``tau_e`` records
    (noisy). Each leaf's centre is a private average (DP-AVG). The number of clusters is found,
    not given.

    Privacy guarantee
    -----------------
    ``(epsilon, delta)``-DP under add/remove-one-record neighbours, by basic composition of

    * ``eps_int``: the private 65th percentile of neighbour gaps (interval size, Alg. 2);
    * ``eps_cnt``: noisy counts at levels ``0..max_depth`` (two-sided geometric, sensitivity 1;
      per-level shares of Sec. 3.3 read as a *total*, Departures 7); with ``count_shift=True``
      each carries ``delta_cnt / (max_depth + 1)`` for the shifted count (Departures 8);
    * ``eps_exp``: one exponential-mechanism split per node at levels ``0..max_depth-1`` with the
      factor 2 (Departures 1) and sensitivity ``(t/q + alpha) / (n_hat - lambda)`` (Departures 2),
      ``lambda = 0`` unless ``count_shift=True`` (see below);
    * ``eps_avg, delta_avg``: per leaf, the analytic Gaussian mechanism on the sum of
      ``x - box centre`` with L2 sensitivity the leaf box's half-diagonal.

    Nodes of one level (and leaves) are disjoint, so each level composes in parallel. The plan
    has one line item per release type and level; the ledger ``privacy_report_`` lists every
    release and its total equals ``(epsilon, delta)``. Levels the tree never reaches give their
    share to the leaf averages, which follow them (adaptive composition: on every path the
    spend adds up to at most the plan, the basic-composition privacy filter of Rogers et al.
    2016), so a shallow tree buys more accurate centres instead of leaving budget unspent.

    Choices where the paper is ambiguous or not private as printed
    ---------------------------------------------------------------
    * Split index (Alg. 1 l. 23-24, Departures 6): ``d* = i* // n_splits``,
      ``s* = a_d* + (i* mod n_splits + 0.5) beta_d*``.
    * Candidates are restricted to those strictly inside the node's box. The box is public (it
      is made of released splits), so this costs no privacy; candidates outside it would split
      off an empty child and halt the branch.
    * Halting: a branch halts when either child's noisy count is below ``tau_e`` (l. 17), when
      ``n_hat - lambda <= 0`` (Departures 3), or when no candidate fits its box.
    * Interval size (Alg. 2, Departures 4-5): the paper averages gaps across dimensions by rank,
      whose sensitivity is not 2 for d > 1. privclust pools the gaps of all dimensions, each
      divided by its dimension's public range. Adding one record turns one gap into two (or adds
      one) in each dimension, so the number of pooled gaps below any value moves by 0..2 per
      dimension while the target rank ``0.65 m`` moves by ``0.65 d``: sensitivity
      ``(2 - 0.65) d``. The codebook is closed-form (:func:`gap_percentile_constant`), so
      ``sigma = p_hat n_hat / c`` as a *fraction of each range* and ``beta = sigma / 2``. The
      quantile ranks the raw gaps but weighs outputs on a log scale (gaps span orders of
      magnitude; see :func:`~privclust.privacy.private_quantile`) with a point mass at the
      floor ``1e-12`` for tied values (zero gaps of integer-valued features: without it the
      estimate jumped between the finest and the coarsest grid on UCI Letter);
      ``sigmas`` (fractions of the range) restricts sigma to candidates as in Alg. 2 l. 9.
    * Score sensitivity from the *released* count (Departures 10b; ``count_shift=False``, default).
      Proof: the scores of Defs. 5-7 use the released ``n_hat`` of the node, which is public once
      released; the EM at that node runs after it, so by adaptive composition it suffices that
      for every fixed value ``n_hat > 0`` the score moves by at most ``D`` between neighbours.
      Adding one record moves ``|s|`` (records in the interval) and the rank ``r`` by at most 1;
      the emptiness ``1 - |s| / n_hat`` moves by at most ``1 / n_hat``; the centre-ness is, for
      fixed ``n_hat``, a continuous piecewise-linear function of ``r`` whose steepest piece has
      slope ``t / (q n_hat)`` (the inner slope ``2(1-t) / ((1-2q) n_hat)`` is smaller exactly when
      ``t >= 2q``); so ``D = (t/q + alpha) / n_hat``. No shift ``lambda`` and no ``delta`` are
      needed; a node with ``n_hat <= 0`` halts. tests/test_dpm_audit.py audits exactly this step
      (the released count followed by the split choice) on neighbouring data sets. With the
      shift, about a third of the splits' budget is lost to ``lambda``: on Synth-10d at
      epsilon = 0.5, 10/10 runs were exact without it vs 1/10 with it. ``count_shift=True`` is the
      paper's design (with Departures 8's ``lambda``); ``delta_split`` applies only then, otherwise
      all of ``delta`` goes to the leaf averages.
    * ``delta=None`` applies privclust's delta rule to the released root count (no extra
      release): ``min(1e-5, 1 / (n_hat sqrt(n_hat)))``, the papers' default capped so that small
      or noisy counts cannot give a delta that protects nobody. The cap is reserved on the
      accountant before the data is read; the report records the value chosen.

    Parameters
    ----------
    epsilon, delta : privacy budget (``delta > 0`` is required; None: the delta rule,
        ``min(1e-5, n_hat^-1.5)``).
    bounds : public bounds, ``(lo, hi)`` for every feature or a ``(d, 2)`` array. Required.
    max_depth : maximum recursion depth ``tau_r`` (at most ``2^tau_r`` clusters).
    min_cluster_size : ``tau_e``; None uses ``n_hat / 2^max_depth`` (Sec. 6.1).
    t, q : centre-ness parameters (``t >= 2q > 0``, ``q < 1/2``).
    alpha : emptiness weight.
    sigmas : None (continuous) or candidate sigmas as fractions of each feature's range.
    adaptive_intervals : re-estimate the interval size privately for every node, relative to
        the node's box (001, Sec. 5 / Conclusion). ``eps_int`` is then spread over levels
        ``0..max_depth-1`` with the per-level weights of Sec. 3.3 (each level one parallel batch
        over its disjoint nodes). Off by default: see benchmarks/dpm.py for the measurement.
    budget_split : ``(eps_int, eps_cnt, eps_exp, eps_avg)`` shares of epsilon. Default
        ``(0.04, 0.18, 0.36, 0.42)``; the paper's ``(0.04, 0.18, 0.18, 0.6)`` is
        ``DPM.PAPER_BUDGET_SPLIT`` (it loses a cluster in about a third of Synth-10d runs once
        the factor 2 and the corrected sensitivity are in, Departures 10a).
    delta_split : ``(delta_cnt, delta_avg)`` shares of delta (used with ``count_shift=True``).
    count_shift : use the paper's shifted count ``n_hat - lambda`` in the score sensitivity
        (eq. 1, Lemma 3-5, with Departures 8's corrected lambda). Default False: the released count
        (Departures 10b, proof above).
    resolution : the step the data are recorded at. ``'auto'`` (default) finds it privately
        (noisy tie counts, then the sparse vector technique over ``{5, 2.5, 2, 1} x 10^e``, from
        the interval-size share) so that rounded measurements do not collapse the interval
        size; a number (or one per feature) states a known step for free; ``None`` treats the
        data as continuous. Use ``None`` for ordinal codes whose levels are themselves the
        clusters' scale (UCI Letter's 16 levels: more, finer clusters).
    random_state : None (secure), int or Generator (reproducible, not secure).
    accountant : a shared :class:`~privclust.Accountant`; the fit raises
        :class:`~privclust.BudgetExceededError` before reading data if it does not fit.

    Attributes
    ----------
    ``cluster_centers_`` : (k, d) private centres. ``cluster_sizes_`` : (k,) noisy sizes.
    ``n_clusters_`` : k. ``labels_`` : nearest private centre of every training row
    (post-processing of the private model applied to X, not a release). ``split_tree_`` :
    :class:`SplitTree`.
    ``interval_size_`` : (d,) beta per feature. ``min_cluster_size_`` : tau_e used.
    ``delta_`` : delta used. ``privacy_report_`` : :class:`~privclust.PrivacyReport`.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from privclust import DPM
    >>> X, _ = make_blobs(5000, centers=[[0, 0], [3, 3]], random_state=0)
    >>> model = DPM(epsilon=1.0, bounds=(-4, 7), random_state=0).fit(X)
    >>> model.cluster_centers_.shape[1], model.predict(X[:4]).shape
    (2, (4,))
    >>> round(model.privacy_report_.total().epsilon, 6)
    1.0
    """

    releases_cluster_sizes = True

    PAPER_BUDGET_SPLIT = PAPER_BUDGET_SPLIT

    def __init__(
        self,
        epsilon=1.0,
        *,
        delta=None,
        bounds=None,
        max_depth=7,
        min_cluster_size=None,
        t=0.3,
        q=1 / 12,
        alpha=5.0,
        sigmas=None,
        count_shift=False,
        adaptive_intervals=False,
        budget_split=DEFAULT_BUDGET_SPLIT,
        delta_split=(0.2, 0.8),
        resolution="auto",
        random_state=None,
        accountant=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.max_depth = max_depth
        self.min_cluster_size = min_cluster_size
        self.t = t
        self.q = q
        self.alpha = alpha
        self.sigmas = sigmas
        self.count_shift = count_shift
        self.adaptive_intervals = adaptive_intervals
        self.budget_split = budget_split
        self.delta_split = delta_split
        self.resolution = resolution
        self.random_state = random_state
        self.accountant = accountant

    # ------------------------------------------------------------------ parameter checks
    def _check_params(self):
        eps = check_epsilon(self.epsilon)
        delta = check_delta(self.delta, required=True)
        depth = self.max_depth
        if isinstance(depth, bool) or not isinstance(depth, numbers.Integral) or depth < 0:
            raise ValueError(f"max_depth must be an int >= 0, got {depth!r}")
        if depth > 20:
            raise ValueError(f"max_depth={depth} allows 2^{depth} clusters; use at most 20")
        t, q, alpha = float(self.t), float(self.q), float(self.alpha)
        if not (q > 0 and t >= 2 * q and q < 0.5 and t <= 1):
            raise ValueError(
                f"centre-ness needs valid t, q (t >= 2q > 0, q < 1/2, t <= 1); got t={t}, q={q}"
            )
        if not alpha > 0:
            raise ValueError(f"alpha must be > 0, got {alpha}")
        shares = np.asarray(self.budget_split, dtype=float)
        if shares.shape != (4,) or (shares <= 0).any() or abs(shares.sum() - 1) > 1e-9:
            raise ValueError(
                "budget_split must be 4 positive shares (eps_int, eps_cnt, eps_exp, eps_avg) "
                f"summing to 1; got {self.budget_split!r}"
            )
        dshares = np.asarray(self.delta_split, dtype=float)
        if dshares.shape != (2,) or (dshares <= 0).any() or abs(dshares.sum() - 1) > 1e-9:
            raise ValueError(
                "delta_split must be 2 positive shares (delta_cnt, delta_avg) summing to 1; "
                f"got {self.delta_split!r}"
            )
        if self.min_cluster_size is not None and not (
            isinstance(self.min_cluster_size, numbers.Real) and self.min_cluster_size > 0
        ):
            raise ValueError(f"min_cluster_size must be > 0 or None, got {self.min_cluster_size!r}")
        sigmas = None
        if self.sigmas is not None:
            sigmas = np.asarray(self.sigmas, dtype=float).ravel()
            if sigmas.size == 0 or (sigmas <= 0).any() or not np.isfinite(sigmas).all():
                raise ValueError(
                    "sigmas must be positive fractions of each feature's range, e.g. "
                    f"(0.02, 0.05, 0.1), or None; got {self.sigmas!r}"
                )
        if not (isinstance(self.resolution, str) and self.resolution == "auto"):
            if self.resolution is not None:
                res = np.asarray(self.resolution, dtype=float) if not isinstance(
                    self.resolution, str) else np.array([np.nan])
                if res.ndim > 1 or (res < 0).any() or not np.isfinite(res).all():
                    raise ValueError(
                        "resolution must be 'auto' (estimated privately), None (continuous "
                        "data) or the public precision of the data, a number >= 0 or one per "
                        f"feature (e.g. 1 for integers, 0.1 for one decimal); got "
                        f"{self.resolution!r}"
                    )
        return eps, delta, int(depth), t, q, alpha, shares, dshares, sigmas

    # ------------------------------------------------------------------ fit
    def _plan_items(self, plan, depth, shares, dshares, adaptive) -> None:
        """DPM's line items, from the parameters alone (``budget_split`` read as totals over
        levels, Sec. 3.3 weights per level)."""
        eps = plan.epsilon
        eps_int, eps_cnt, eps_exp, eps_avg = eps * shares
        if self.resolution == "auto":  # a private recording step per feature, from eps_int
            plan.add("feature ties", "two-sided geometric", "pure", _TIES_SHARE * eps_int)
            plan.add("feature resolution", "sparse vector", "pure", _STEP_SHARE * eps_int)
            eps_int *= 1 - _TIES_SHARE - _STEP_SHARE
        if adaptive:
            for level, e in enumerate(_level_shares(eps_int, depth)):
                plan.add(f"interval size, level {level}", "exponential (quantile)", "pure", e)
        else:
            plan.add("interval size", "exponential (quantile)", "pure", eps_int)
        for level, e in enumerate(_level_shares(eps_cnt, depth + 1)):
            plan.add(f"record count, level {level}", "two-sided geometric", "pure", e)
            if self.count_shift:
                plan.add(f"count shift, level {level}", "failure probability", "approx", 0.0,
                         dshares[0] / (depth + 1))
        for level, e in enumerate(_level_shares(eps_exp, depth) if depth else []):
            plan.add(f"split choice, level {level}", "exponential", "pure", e)
        if depth == 0:  # no split to choose: the root's average gets that share too
            eps_avg += eps_exp
        plan.add("leaf averages", "gaussian (analytic)", "approx", eps_avg,
                 dshares[1] if self.count_shift else 1.0)

    def fit(self, X, y=None):
        """Cluster X privately. ``y`` is ignored (present for scikit-learn compatibility)."""
        eps, delta, depth, t, q, alpha, shares, dshares, sigmas = self._check_params()
        # The plan depends on the parameters only: checked before any data is read.
        plan, accountant = self._open_plan(eps, delta)
        X = self._check_X(X, reset=True)
        bounds = self._fit_bounds(X)
        source = resolve_random_state(self.random_state)
        adaptive = bool(self.adaptive_intervals) and depth > 1
        self._plan_items(plan, depth, shares, dshares, adaptive)
        self._reserve_plan(plan, accountant, "DPM")

        engine = self._make_engine(X, bounds)
        report = self._start_report(plan.reserved(), source)
        mech = Mechanisms(source, report, plan)
        d = X.shape[1]
        lo, hi = bounds[:, 0], bounds[:, 1]
        width = hi - lo

        eps_cnt_lvl = [plan.item(f"record count, level {i}").epsilon for i in range(depth + 1)]
        eps_exp_lvl = [plan.item(f"split choice, level {i}").epsilon for i in range(depth)]

        # Level-0 count (Alg. 1 l. 6); with delta=None it also fixes delta (the delta rule).
        n_hat0 = int(mech.count([engine.count(engine.root())[0]], eps_cnt_lvl[0],
                                target="record count, level 0 (root)",
                                item="record count, level 0")[0])
        plan.resolve_delta(n_hat0, "the released root count (no extra release)")
        if self.count_shift:  # the paper's shifted count (eq. 1, Departures 8)
            delta_cnt_lvl = plan.item("count shift, level 0").delta
            lambdas = np.array([count_offset(e, delta_cnt_lvl) for e in eps_cnt_lvl])
            mech.account("shifted count fails its bound, level 0", item="count shift, level 0",
                         delta=delta_cnt_lvl, note="P(noise >= lambda): shifted count overshoots")
        else:  # sensitivity from the released count (Departures 10b): no delta for the counts
            delta_cnt_lvl = 0.0
            lambdas = np.zeros(depth + 1)
        tau_e = self._min_cluster_size(n_hat0, depth)

        eps_int_lvl = (np.array([plan.item(f"interval size, level {i}").epsilon
                                 for i in range(depth)]) if adaptive else None)
        resolution, gaps = self._resolution(engine, mech, width, n_hat0, adaptive)
        beta = self._interval_size(engine, mech, n_hat0, sigmas, width, adaptive, resolution,
                                   gaps)
        del gaps
        n_splits = int(np.ceil(np.max(width / beta) - 1e-9))
        tree, grouping, active = self._grow(
            engine, mech, beta, n_splits, lo, hi, n_hat0, depth, tau_e, lambdas, eps_cnt_lvl,
            eps_exp_lvl, delta_cnt_lvl, t, q, alpha, eps_int_lvl, sigmas)
        self._move_unreached_levels(plan, depth, adaptive)
        avg = plan.item("leaf averages")
        centres, sizes = self._leaf_averages(engine, mech, tree, (grouping, active),
                                             avg.epsilon, avg.delta, depth)
        self._close_plan(plan, report, accountant)

        self.cluster_centers_ = centres
        self.cluster_sizes_ = sizes
        self.n_clusters_ = int(centres.shape[0])
        self.split_tree_ = tree
        self.interval_size_ = beta
        self.resolution_ = resolution
        self.n_split_candidates_ = n_splits
        self.min_cluster_size_ = tau_e
        self.delta_ = plan.require_delta()
        self.n_features_in_ = d
        self.privacy_report_ = report
        del engine, mech  # release the clipped copy before labelling
        # Post-processing: the private model applied to the training data.
        self.labels_ = _nearest_labels(X, centres)
        return self

    @staticmethod
    def _move_unreached_levels(plan, depth, adaptive) -> None:
        """Levels the tree never reached go to the leaf averages.

        Sound by adaptive composition: the first level with no split is a function of released
        values (noisy counts and splits), the leaf averages run after it, and on every path the
        epsilons and deltas spent add up to at most the plan's total (the basic-composition
        privacy filter, Rogers et al. 2016). The levels' own shares (Sec. 3.3) are unchanged
        for the levels the tree did reach."""
        names = [f"split choice, level {i}" for i in range(depth)]
        names += [f"record count, level {i}" for i in range(1, depth + 1)]
        names += [f"count shift, level {i}" for i in range(1, depth + 1)]
        if adaptive:
            names += [f"interval size, level {i}" for i in range(1, depth)]
        names = [n for n in names if plan.has_item(n)]
        unused = [n for n in names if not plan.item(n).spent_epsilon
                  and not plan.item(n).spent_delta]
        if unused:
            plan.move_unspent(unused, "leaf averages",
                              "levels the tree never reached; the leaf averages follow them")

    def _min_cluster_size(self, n_hat0, depth: int) -> float:
        """``tau_e``: ``min_cluster_size``, else ``n_hat / 2^max_depth`` (Sec. 6.1) from the
        released root count (also the planner's, with n for n_hat)."""
        if self.min_cluster_size is not None:
            return float(self.min_cluster_size)
        return max(n_hat0, 0) / 2.0**depth

    # ------------------------------------------------------------------ Alg. 2
    def _resolution(self, engine, mech, width, n_hat0, adaptive):
        """The step the data are recorded at, per feature (data units; 0: continuous).

        ``resolution='auto'`` finds it privately in two releases:

        1. ties: per feature, the number of zero neighbour gaps (equal values) with two-sided
           geometric noise (sensitivity 1 per feature: a new record adds at most one tie; the
           features share the records, so sequential composition). A feature whose noisy ties
           reach half the released record count is *rounded*;
        2. step: the sparse vector technique scans the public candidate steps
           ``{5, 2.5, 2, 1} x 10^e`` from the largest down and stops at the first whose lattice
           (the multiples of the step) misses noisily at most a quarter of the rounded
           features' values, summed over those features (sensitivity: their number, as one
           record can miss in each). The next coarser candidate misses about half of them, so
           the scan stops at the recording step. The features share one step, the finest
           common one: features recorded at different steps (ages in years, incomes in
           thousands) get the finest, which keeps the coarser ones as they were before this
           estimate existed. Without a rounded feature, this item's budget goes to the
           interval size, which follows it.

        A number or one per feature is taken as public knowledge (no release); None means
        continuous data (0)."""
        d = engine.n_features
        if self.resolution is None:
            return np.zeros(d), None
        if not isinstance(self.resolution, str):
            return np.broadcast_to(np.asarray(self.resolution, dtype=float), (d,)).copy(), None
        gaps = engine.neighbour_gaps()
        # per feature: a mask of one column at a time, not of all the gaps
        ties = np.array([np.count_nonzero(gaps[:, j] == 0) for j in range(d)], dtype=np.int64)
        noisy_ties = mech.count(
            ties, mech.plan.item("feature ties").epsilon, same_records=True,
            target="equal neighbour values per feature (ties)", item="feature ties",
            note="decides which features are rounded",
        )
        rounded = np.flatnonzero(noisy_ties >= 0.5 * max(n_hat0, 1))
        res = np.zeros(d)
        interval_item = "interval size, level 0" if adaptive else "interval size"
        if rounded.size == 0:
            mech.plan.move_unspent(["feature resolution"], interval_item,
                                   "no feature is rounded; the interval size follows")
            return res, gaps  # undithered gaps: the interval size can use them as they are
        steps = _candidate_steps(float(width[rounded].max()))
        misses = sum(engine.lattice_misses(int(j), steps) for j in rounded)
        k = mech.first_below(
            misses, 0.25 * max(n_hat0, 1) * rounded.size,
            mech.plan.item("feature resolution").epsilon, sensitivity=float(rounded.size),
            target=f"recording step of the {rounded.size} rounded feature(s)",
            item="feature resolution",
            note="largest step {5, 2.5, 2, 1} x 10^e whose lattice holds 3/4 of the values",
        )
        if k >= 0:
            res[rounded] = np.minimum(steps[k], width[rounded] / 2)
        # kept for the dithered pass where the engine can redo only the dithered columns
        return res, (gaps if not (res > 0).any() or isinstance(engine, LocalEngine) else None)

    def _interval_size(self, engine, mech, n_hat0, sigmas, width, adaptive=False,
                       resolution=None, gaps=None):
        """Alg. 2's interval size, on values dithered by their resolution, never below it.

        Rounded values tie: most neighbour gaps are 0 and the 65th percentile collapses to the
        floor, which made DPM split between the rounding steps (36-56 clusters on 4 rounded
        blobs). Every value therefore moves by a public uniform offset of one resolution step
        (undoing the rounding in distribution) before the gaps are taken, and the interval
        size is at least half a step (the dithered estimate is what keeps rounded clusters
        whole; the floor only stops a collapse below the recording grid, and half a step keeps
        candidates between neighbouring recorded values, where integer-valued features such as
        UCI Letter's separate best)."""
        d = engine.n_features
        item = "interval size, level 0" if adaptive else "interval size"
        eps_int = mech.plan.item(item).epsilon
        res = np.zeros(d) if resolution is None else resolution
        dither = (res, public_offsets(mech.rng)) if (res > 0).any() else None
        if dither is not None and gaps is not None:  # the NumPy engine (see _resolution)
            gaps = engine.neighbour_gaps(dither=dither, undithered=gaps)
        elif dither is not None or gaps is None:
            gaps = engine.neighbour_gaps(dither=dither)
        gaps = gaps.T  # (d, n-1) float32, C-contiguous, ours to modify
        gaps /= width.astype(gaps.dtype)[:, None]  # fractions of each public range
        p_hat = mech.quantile(
            gaps, _GAP_PERCENTILE, _GAP_FLOOR, 1.0, eps_int,
            overwrite_input=True, floor_atom=1.0,
            sensitivity=(2.0 - _GAP_PERCENTILE) * d,
            target="65th percentile of neighbour gaps (interval size)",
            note="gaps of all features pooled, each over its public range; Alg. 2, Departures 5",
            log_scale=True, item=item,
        )
        return np.maximum(_fraction_from_percentile(p_hat, n_hat0, sigmas) * width, res / 2)

    def _node_interval_sizes(self, engine, mech, grouping, rows, n_hat, box_w, eps, sigmas,
                             level):
        """Adaptive variant: a private interval size per node, relative to its box (001)."""
        d = engine.n_features
        gaps, gid = engine.group_neighbour_gaps(grouping)
        starts = np.searchsorted(gid, rows, side="left")
        stops = np.searchsorted(gid, rows, side="right")
        per_node = [gaps[a:b] / box_w[r] for a, b, r in zip(starts, stops, rows, strict=True)]
        p_hat = mech.quantiles(
            [v.ravel() for v in per_node], _GAP_PERCENTILE, _GAP_FLOOR, 1.0, eps,
            sensitivity=(2.0 - _GAP_PERCENTILE) * d,
            target="65th percentile of neighbour gaps per node (adaptive interval size)",
            note="one quantile per node; nodes are disjoint; 001 Conclusion",
            log_scale=True, floor_atom=1.0, item=f"interval size, level {level}",
        )
        frac = np.array([
            _fraction_from_percentile(p, n, sigmas) for p, n in zip(p_hat, n_hat, strict=True)
        ])
        return frac[:, None] * box_w[rows]

    # ------------------------------------------------------------------ Alg. 1
    def _grow(self, engine, mech, beta, n_splits, lo, hi, n_hat0, depth, tau_e, lambdas,
              eps_cnt_lvl, eps_exp_lvl, delta_cnt_lvl, t, q, alpha, eps_int_lvl=None,
              sigmas=None):
        """Alg. 1's tree: ``(tree, grouping, active)``. The grouping holds the last level's
        active nodes as groups and every halted node's records parked under ``-2 - node``."""
        tree = SplitTree()
        tree.add(0, n_hat0, lo, hi)
        active = [0]
        grouping, hist = engine.root(), None
        for level in range(depth + 1):
            if not active:
                break
            if level == depth:
                for node in active:
                    tree.halt_reason[node] = "max_depth"
                break
            n_hat = np.array([tree.n_hat[i] for i in active], dtype=float)
            box_lo = np.array([tree.box_lo[i] for i in active])
            box_hi = np.array([tree.box_hi[i] for i in active])
            denom = n_hat - lambdas[level]
            adaptive = eps_int_lvl is not None and level > 0
            node_beta, n_bins, origin = self._level_grid(
                engine, mech, grouping, beta, n_splits, lo, n_hat, denom, box_lo, box_hi,
                (eps_int_lvl[level] if adaptive else None), sigmas, level)
            j = np.arange(n_bins) + 0.5
            cand = origin[:, :, None] + j[None, None, :] * node_beta[:, :, None]  # (g, d, B)
            valid = (cand > box_lo[:, :, None]) & (cand < box_hi[:, :, None])
            can_split = (denom > 0) & valid.reshape(len(active), -1).any(axis=1)
            for k, node in enumerate(active):
                if not can_split[k]:
                    tree.halt_reason[node] = (
                        "n_hat - lambda <= 0" if denom[k] <= 0 else "no candidate in box"
                    )
            rows = np.flatnonzero(can_split)
            if rows.size == 0:
                break
            if adaptive:
                hist = engine.axis_histogram(grouping, origin, node_beta / 2.0, 2 * n_bins)
            elif hist is None:
                hist = engine.axis_histogram(grouping, lo, beta / 2.0, 2 * n_bins)
            scores = self._scores(hist[rows], n_hat[rows], t, q, alpha)
            scores[~valid[rows]] = -np.inf
            sens = (t / q + alpha) / denom[rows]
            choice = mech.select(
                scores.reshape(rows.size, -1), sens, eps_exp_lvl[level],
                target=f"split choice, level {level}",
                note="exponential mechanism, factor 2; sensitivity (t/q+alpha)/(n_hat-lambda)"
                + (" with lambda = 0 (released count, Departures 10b)"
                   if not lambdas[level] else ""),
                item=f"split choice, level {level}",
            )
            feat = choice // n_bins
            thr = cand[rows, feat, choice % n_bins]  # a + (i mod numSplits + 0.5) beta (Dep. 6)

            children = engine.regroup(grouping, *_split_table(active, rows, feat, thr),
                                      2 * rows.size)
            # the next level's histograms come with the counts (one request): the same groups
            # less the children dropped below (post-processing of exact aggregates)
            counts, hist = (_children_histograms(engine, children, hist[rows], lo, beta / 2.0,
                                                 2 * n_bins)
                            if not adaptive and level + 1 < depth else
                            (engine.count(children), None))
            child_hat = mech.count(
                counts, eps_cnt_lvl[level + 1],
                target=f"record count, level {level + 1}", item=f"record count, level {level + 1}",
            )
            if delta_cnt_lvl:
                mech.account(f"shifted count fails its bound, level {level + 1}",
                             item=f"count shift, level {level + 1}", delta=delta_cnt_lvl,
                             note="P(noise >= lambda): shifted count overshoots")
            keep = (child_hat[0::2] >= tau_e) & (child_hat[1::2] >= tau_e)
            next_active, relabel = _add_children(tree, active, rows, keep, feat, thr, child_hat,
                                                 level)
            active = next_active
            m = relabel.size  # halted nodes' records stay parked under their node
            grouping = engine.regroup(children, np.full(m, -1), np.zeros(m), relabel, relabel,
                                      len(active))
            if active and hist is not None:
                hist = _relabel_rows(hist, relabel, len(active))
        return tree, grouping, active

    def _level_grid(self, engine, mech, grouping, beta, n_splits, lo, n_hat, denom, box_lo,
                    box_hi, eps_int=None, sigmas=None, level=0):
        """``(beta per node, bins, grid origin per node)`` of one level's split candidates:
        one grid over the public bounds (Alg. 1), or with ``eps_int`` (adaptive intervals) a
        private interval size per node on its own box."""
        g = len(n_hat)
        node_beta = np.repeat(beta[None, :], g, axis=0)
        if eps_int is None:
            return node_beta, n_splits, np.repeat(lo[None, :], g, axis=0)
        rows0 = np.flatnonzero(denom > 0)
        if rows0.size:
            node_beta[rows0] = self._node_interval_sizes(
                engine, mech, grouping, rows0, n_hat[rows0], box_hi - box_lo, eps_int, sigmas,
                level)
        n_bins = int(np.ceil(np.max((box_hi - box_lo) / node_beta) - 1e-9))
        return node_beta, n_bins, box_lo

    @staticmethod
    def _scores(hist, n_hat, t, q, alpha):
        """Def. 7 score ``c + alpha e`` of every candidate, from half-interval histograms.

        ``hist`` is (g, d, 2B): candidate j's interval is half-bins 2j and 2j+1, and its rank
        (records below s_j) is the cumulative count through half-bin 2j.
        """
        n = n_hat[:, None, None]
        inside = hist[:, :, 0::2] + hist[:, :, 1::2]
        rank = np.cumsum(hist, axis=2)[:, :, 0::2]
        emptiness = 1.0 - inside / n  # Def. 5
        u = n / 2.0 - np.abs(rank - n / 2.0)
        outer = (rank <= n * q) | (rank >= n - n * q)
        centreness = np.where(  # Def. 6
            outer,
            u * t / (n * q),
            (t - 2 * q) / (1 - 2 * q) + u * (1 - t) / (n / 2.0 - n * q),
        )
        return centreness + alpha * emptiness

    # ------------------------------------------------------------------ DP-AVG (Alg. 1 l. 10)
    def _leaf_averages(self, engine, mech, tree, grown, eps_avg, delta_avg, depth):
        leaves = tree.leaves()
        for k, node in enumerate(leaves):
            tree.leaf_index[node] = k
        frontier = _leaf_order(tree, depth)
        # every record to its leaf in one pass: the grown grouping's active nodes and parked
        # records (the leaves in the order of a level-by-level walk of the tree)
        grouping, active = grown
        position = np.full(len(tree.n_hat), -1)
        position[frontier] = np.arange(len(frontier))
        to_leaf = position[np.asarray(active, dtype=np.int64)] if active else np.zeros(0, int)
        m = to_leaf.size
        grouping = engine.regroup(grouping, np.full(m, -1), np.zeros(m), to_leaf, to_leaf,
                                  len(frontier), parked=position)
        order = np.array([tree.leaf_index[i] for i in frontier])
        box_lo = np.array([tree.box_lo[i] for i in frontier])
        box_hi = np.array([tree.box_hi[i] for i in frontier])
        n_hat = np.array([tree.n_hat[i] for i in frontier], dtype=float)
        mid = (box_lo + box_hi) / 2.0
        half_diag = np.linalg.norm(box_hi - box_lo, axis=1) / 2.0
        sums = engine.centred_sums(grouping, mid)  # centred exactly in the engine
        noisy = mech.gaussian(
            sums, half_diag, eps_avg, delta_avg,
            target="sum of (x - box centre) per leaf",
            note="DP-AVG; L2 sensitivity = leaf box half-diagonal; leaves are disjoint",
            item="leaf averages",
        )
        centres = np.clip(mid + noisy / np.maximum(n_hat, 1.0)[:, None], box_lo, box_hi)
        out = np.empty_like(centres)
        out[order] = centres
        sizes = np.empty(len(order), dtype=np.int64)
        sizes[order] = n_hat.astype(np.int64)
        return out, sizes


def _leaf_order(tree: SplitTree, depth: int) -> list:
    """The leaves in the order of a level-by-level walk (a leaf keeps its place among the
    children of the level it halted at): the order of the leaf-average releases."""
    frontier = [0]
    for _ in range(depth + 1):
        if all(tree.is_leaf(i) for i in frontier):
            break
        nxt: list[int] = []
        for node in frontier:
            nxt += [node] if tree.is_leaf(node) else [tree.left[node], tree.right[node]]
        frontier = nxt
    return frontier


def _nearest_labels(X, centres) -> np.ndarray:
    """``nearest_centre(X, centres)``, half the rows on each core (a row's label does not
    depend on how the rows are split; the split is at a block boundary of
    :func:`~privclust._geometry.nearest_centres`, so no block is padded twice)."""
    rows = block_rows(centres.shape[0], centres.shape[1])
    n_blocks = 0 if is_dask_input(X) or not centres.shape[0] else -(-X.shape[0] // rows)
    if n_blocks < 2 * N_THREADS:
        return nearest_centre(X, centres)
    labels = np.empty(X.shape[0], dtype=np.int64)
    per = -(-n_blocks // N_THREADS) * rows

    def fill(start):
        labels[start : start + per] = nearest_centre(X[start : start + per], centres)

    on_cores(fill, range(0, X.shape[0], per), min_chunks=2, one_blas_thread=True)
    return labels


def _split_table(active, rows, feat, thr):
    """``regroup``'s tables for one level: the nodes ``rows`` split on ``feat`` at ``thr``
    into children ``2r`` (x <= threshold) and ``2r + 1``; the other active nodes halt, their
    records parked under ``-2 - node``."""
    g = len(active)
    feature, threshold = np.full(g, -1), np.zeros(g)
    left = -2 - np.asarray(active, dtype=np.int64)
    right = left.copy()
    feature[rows], threshold[rows] = feat, thr
    left[rows] = 2 * np.arange(rows.size)
    right[rows] = 2 * np.arange(rows.size) + 1
    return feature, threshold, left, right


def _children_histograms(engine, children, parent_hist, lo, width, n_bins):
    """``engine.count_and_histogram(children, lo, width, n_bins)`` from half the records: the
    left children (groups ``2r``) are histogrammed and each right child's histogram is its
    parent's (``parent_hist[r]``, on the same bins) less its left sibling's, and every count is
    the sum of one feature's bins (each record lies in exactly one bin per feature). Exact
    integer arithmetic: the same counts and histograms as the direct request."""
    m = parent_hist.shape[0]
    lefts = np.full(2 * m, -1)
    lefts[0::2] = np.arange(m)
    left_only = engine.regroup(children, np.full(2 * m, -1), np.zeros(2 * m), lefts, lefts, m)
    left = engine.axis_histogram(left_only, lo, width, n_bins)
    hist = np.empty((2 * m, *left.shape[1:]), dtype=left.dtype)
    hist[0::2] = left
    np.subtract(parent_hist, left, out=hist[1::2], casting="unsafe")
    return hist[:, 0, :].sum(axis=1, dtype=np.int64), hist


def _relabel_rows(per_group: np.ndarray, relabel: np.ndarray, n_groups: int) -> np.ndarray:
    """Rows of a per-group aggregate after ``regroup``'s relabelling (-1: dropped)."""
    kept = relabel >= 0
    out = np.empty((n_groups, *per_group.shape[1:]), dtype=per_group.dtype)
    out[relabel[kept]] = per_group[kept]
    return out


def _add_children(tree: SplitTree, active, rows, keep, feat, thr, child_hat, level: int):
    """Record the kept splits of one level in ``tree``. Returns the next level's active nodes
    and the map from the engine's child groups to them (a split not kept parks both children's
    records under ``-2 - node``, the node that halts)."""
    next_active = []
    relabel = np.full(2 * rows.size, -1)
    for r, k in enumerate(rows):
        node = active[k]
        if not keep[r]:
            tree.halt_reason[node] = "child below min_cluster_size"
            relabel[2 * r] = relabel[2 * r + 1] = -2 - node
            continue
        f, s_ = int(feat[r]), float(thr[r])
        lhi = tree.box_hi[node].copy()
        lhi[f] = s_
        rlo = tree.box_lo[node].copy()
        rlo[f] = s_
        li = tree.add(level + 1, child_hat[2 * r], tree.box_lo[node], lhi)
        ri = tree.add(level + 1, child_hat[2 * r + 1], rlo, tree.box_hi[node])
        tree.feature[node], tree.threshold[node] = f, s_
        tree.left[node], tree.right[node] = li, ri
        relabel[2 * r], relabel[2 * r + 1] = len(next_active), len(next_active) + 1
        next_active += [li, ri]
    return next_active, relabel
