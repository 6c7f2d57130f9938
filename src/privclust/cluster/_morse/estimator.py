"""Morse-theory dynamical processing: merge the components of a private mixture along the
transition equilibrium vectors (TEVs) of ``f = -ln p``.

Byun, Choi, Lee, "Improving the Utility of Differentially Private Clustering through Dynamical
Processing" : Alg. 1 (the pipeline), Alg. 3 (TEVGraph), Alg. 4
(MergeCluster), Thm 5.3 (inductive prediction) and Thm 5.4 (post-processing), with the choices of
the departures page, item 23.

Everything here except :meth:`MorseMerging.fit`'s optional covariance pass (Sec. 5.1.2, for
centre-only base models) works on the released mixture alone: no data is read.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, clone
from threadpoolctl import threadpool_limits

from ...privacy import (
    NOISY_N_SHARE,
    Accountant,
    Budget,
    Mechanisms,
    PrivacyPlan,
    PrivacyReport,
    Release,
    ZcdpBlockTakenError,
    resolve_random_state,
    zcdp_to_approx_dp,
)
from .._base import (
    check_data,
    check_delta,
    check_epsilon,
    check_X,
    clip_to_fitted_bounds,
    feature_names,
    nearest_centre,
    raise_not_fitted,
)
from ..mixture import (
    _unit_engine,
    _unit_map,
    private_centre_covariances,
)
from .base import (
    _base_bounds,
    _centre_count,
    _centre_param,
    _check_pooling_cost,
    _is_fitted,
    _is_mixture,
    _positive_delta,
    _releases_sizes,
    _zcdp_base_message,
    pool_centres,
)
from .equilibria import (
    find_tevs,
)
from .field import (
    MixtureField,
    flow_to_rest,
)
from .hierarchy import _dendrogram, cut_linkage, merge_clusters


class MorseMerging(ClusterMixin, BaseEstimator):
    """Dynamical processing (000, Alg. 1): merge a private mixture's components along the TEVs
    of ``f = -ln p`` into ``n_clusters`` clusters of any shape.

    ``base_estimator`` is a privclust estimator, fitted or not: a **mixture**
    (:class:`~privclust.cluster.mixture.DPGaussianMixture`, or anything with ``weights_``,
    ``means_``, ``covariances_``), or a **centre model** (``cluster_centers_``: DPLloyd, DPM,
    KMeansGuarantee, ...), which is turned into a mixture by one private covariance pass
    (Sec. 5.1.2, :func:`~privclust.cluster.mixture.private_centre_covariances`) with its own
    budget share. Then TEVGraph (Alg. 3, :func:`find_tevs`) and MergeCluster (Alg. 4,
    :func:`merge_clusters`) build the whole hierarchy (``linkage_``).

    Privacy guarantee
    -----------------
    The Morse step (the TEV graph, the merging, the hierarchy and ``predict``) reads no data: it
    is a function of the released mixture only, so it costs nothing beyond the releases listed
    in ``privacy_report_`` (post-processing, Thm 5.4 / Remark 3.6). The total is

    * a mixture base: the base's releases;
    * a centre base: the base's releases plus the covariance pass, ``rho``-zCDP at
      ``(eps_cov, delta_cov)`` with ``rho`` the exact inverse of the ledger's conversion and
      the add/remove sensitivity (:func:`~privclust.cluster.mixture.add_remove_r`): counts,
      sums and ``sum u u^T`` per nearest-centre cell (disjoint cells: parallel composition),
      records mapped to ``[-1, 1]^D`` by the public bounds.

    Budget: one plan for the whole pipeline. ``epsilon`` and ``delta`` are the pipeline's
    **totals** (``None``: the unfitted base's own values are the totals; ``delta=None`` on both:
    the delta rule, ``min(1e-5, 1 / n_hat^1.5)``, chosen once for the whole pipeline from the
    first released count, with the cap reserved before any data is read). If the base is **not
    fitted**, ``fit(X)`` fits a clone of it inside the plan: a mixture base gets the whole
    budget; a centre base gets ``(1 - covariance_share)`` of epsilon and the covariance pass
    ``covariance_share``; delta is split the same way when the base uses delta (DPM) and goes
    wholly to the pass when the base is pure epsilon-DP (DPLloyd, the k-means family). The
    base's own epsilon, delta and accountant are replaced by its part's, and MorseMerging's
    ``accountant`` holds the whole total, so the fit runs inside an accountant that has exactly
    that budget. If the base is **fitted**, a mixture needs no data (``fit()`` or ``fit(None)``);
    a centre model needs X and ``epsilon`` (the covariance pass's budget, spent on top of what
    the base spent).

    Choices where the paper is silent (Departures 23)
    --------------------------------------------
    * Coordinates: the field is built in the unit box ``[-1, 1]^D`` of the base's public bounds
      (the paper's data are rescaled to it), so ``perturbation`` (0.05, Sec. 6.2) and the
      tolerances are in those units.
    * ``R(x)`` (``metric``): the posterior-weighted precision by default (see
      :class:`MixtureField`), or ``"euclidean"`` (R = I in the unit box).
    * "Integrate (7) from m^t" (Alg. 3 l. 7, 12) relaxes the point on the hyperplane normal to
      the string for flow time ``string_time`` (see :func:`_relax_on_hyperplanes`). The default,
      0.25, was chosen by measurement (documentation, Morse page).
    * The root solve (l. 13) is a batched Newton with a line search on ``|grad f|^2`` (it stays
      near its start), polished by ``scipy.optimize.root``. If the TEV graph is disconnected,
      the string search is run once more between the SEVs of different components (a string
      between two centres can miss a curved valley).
    * Vertices: each centre is flowed to its SEV; centres sharing an SEV merge at height 0.
      The density has no barrier between them, so their order (which matters only when fewer
      basins than ``n_clusters`` exist) is Ward's criterion on the components' weights and
      means (:func:`merge_clusters`); points reaching a basin whose centres ended in different
      clusters are labelled by their most likely component.
    * Heights: ``f(TEV) - min f(SEV)`` (non-negative, Alg. 4's single linkage,
      ``merge_order='barrier'``, the default); ``merge_order='persistence'`` replays the same
      TEVs by the persistence of the younger mode (the elder rule of 0-dimensional persistence,
      as in ToMATo, Chazal et al. 2013). Neither order won on every set
      measured, so the paper's order stays the default. A disconnected TEV graph is completed by
      straight-segment barriers (``n_fallback_merges_`` counts them; a warning is issued when
      they are needed to reach ``n_clusters``).
    * Runts (``min_cluster_weight``, default 0.03): single linkage leaves a light isolated mode
      (a noisy, broad component far from the data) for last, so it takes one of the
      ``n_clusters`` places; with K = 2 all the rest is then one cluster (ARI ~0 on uci_magic
      and uci_htru2 in such runs). The cut (:func:`cut_linkage`) therefore counts only clusters
      holding at least this share of the mixture's weight while enough of them exist, and joins
      each lighter one to the cluster it meets first in the hierarchy. ``linkage_`` is
      unchanged. 0.03 was chosen by measurement.
    * Noise-level components: a component whose noisy count is below 2 sigma has a covariance
      that is mostly noise; DPMoG-hard already gives it weight 0 (``min_count``) and so does the
      covariance pass (:func:`~privclust.cluster.mixture.private_centre_covariances`). Such
      components, and any below ``min_weight`` (default 0: the rule above scales with the
      noise, hence with epsilon), are left out of the density; they are not leaves of
      ``linkage_`` and take the cluster of the basin their mean flows to.
    * Many centres (``max_components``, default 20, the largest K0 of Table 2): a centre model
      with more centres (DPM: 60-80 leaves on uci_shuttle, uci_magic) is pooled before the
      covariance pass by :func:`pool_centres` (Ward on the public centres weighted by the
      released noisy sizes; post-processing), which bounds the Morse step's time (about
      ``K0^3`` field evaluations: 45-60 s at K0 ~ 80 against ~1 s at 20). ``pooled_from_`` maps
      every base centre to its pooled component. The pooling grows like ``K0^2 d``; a base
      whose centres would take it over about 10 s (thousands of centres in tens of
      dimensions) is refused, before it spends where its count is known up front.
    * Prediction (``predict_method='base'``, the default): the base model's own assignment (the
      most likely component for a mixture, the nearest centre for a centre model), then that
      component's cluster, so that Morse merging is exactly a merge of the base's partition.
      The paper's inductive rule (Thm 5.3, ``'flow'``: the basin the flow (7) reaches) follows
      the gradient of the *noisy* density, whose covariances are mostly noise floor at eps <= 2
      (covariance pass) and blur the basins; it scored below ``'base'`` in most measured
      cells. On well-estimated mixtures the two agree (tests).

    Parameters
    ----------
    base_estimator : the private model (see above). n_clusters : K, the number of clusters.
    epsilon, delta : the pipeline's totals, see "Budget".
    covariance_share : the covariance pass's share of epsilon when the base is fitted here
        (default 0.15: with the add/remove calibration about the noise sd that 0.3 gave with
        the paper's ``r`` for D = 8-10, and 15% more budget for the base; measured better than
        0.3).
    n_points : m, points on a string (paper: 20). n_iter : tau_2, string iterations (paper: 5).
    perturbation : epsilon of Alg. 3 l. 18 (paper: 0.05). string_time : see above.
    metric : 'mixture' or 'euclidean'. predict_method : 'base' (default, see above: 'likelihood'
        for a mixture base, 'nearest' for a centre model), 'flow' (Thm 5.3: follow (7) to a
        basin, vectorised over points), 'nearest' (the nearest centre, Euclidean in the
        original units, then its component's cluster) or 'likelihood' (the most likely
        component, then its cluster).
    covariance_sensitivity : 'add_remove' (default; proof in
        :func:`~privclust.cluster.mixture.add_remove_r`) or 'paper' (Departures 21) for the pass.
    reg_covar : eigenvalue floor of the covariance pass (unit-box units).
    min_weight : components below this share of the weight are left out of the density
        (default 0: only the noise-level rule above).
    min_cluster_weight : the runt threshold of the cut (see above; 0 gives Alg. 4's plain cut).
    merge_order : 'barrier' (Alg. 4, default) or 'persistence' (see above).
    max_components : centre models with more centres are pooled to this many (see above).
    random_state, accountant : as everywhere in privclust. A ``random_state`` that is not None
        seeds the whole pipeline: an unfitted base is fitted with the same generator (its own
        ``random_state`` is replaced in the clone), and the covariance pass goes on from where
        the base stopped, so no noise is ever drawn twice from one seed.

    Attributes
    ----------
    ``base_estimator_`` : the fitted base. ``weights_``, ``means_``, ``covariances_`` : the mixture
    (original units). ``component_labels_`` : (K0,) cluster of each base component. ``n_clusters_``
    : clusters made. ``sevs_``, ``tevs_`` : equilibria (original units). ``sev_labels_`` : cluster
    of each SEV.
    ``tev_values_`` : f at the TEVs (unit-box density). ``tev_edges_`` : (t, 2) SEV indices.
    ``sev_of_component_`` : (K0,) SEV of each live component (-1: zero weight).
    ``leaves_`` : base component index of every linkage leaf.
    ``linkage_`` : SciPy linkage matrix over the leaves. ``dendrogram_`` :
    ``scipy.cluster.hierarchy. dendrogram(linkage_, no_plot=True)``. ``n_fallback_merges_`` :
    merges not backed by a TEV.
    ``morse_time_`` : seconds of the Morse step. ``base_assignment_`` : 'likelihood' or 'nearest',
    the base's own rule (``predict_method='base'``). ``pooled_from_`` : (centre models) pooled
    component of every base centre. ``labels_`` : ``predict(X)`` when fit got X
    (post-processing). ``privacy_report_`` : the base's releases plus the covariance pass.

    Examples
    --------
    >>> import numpy as np
    >>> from privclust import DPGaussianMixture, MorseMerging
    >>> from sklearn.datasets import make_moons
    >>> X, _ = make_moons(4000, noise=0.05, random_state=0)
    >>> base = DPGaussianMixture(8, bounds=(-1.5, 2.5))
    >>> model = MorseMerging(base, 2, epsilon=2.0, delta=1e-6, random_state=0).fit(X)
    >>> model.n_clusters_, round(model.privacy_report_.total().epsilon, 6)
    (2, 2.0)
    """

    def __init__(
        self,
        base_estimator=None,
        n_clusters=2,
        *,
        epsilon=None,
        delta=None,
        covariance_share=0.15,
        n_points=20,
        n_iter=5,
        perturbation=0.05,
        string_time=0.25,
        metric="mixture",
        predict_method="base",
        covariance_sensitivity="add_remove",
        reg_covar=1e-4,
        min_weight=0.0,
        min_cluster_weight=0.03,
        merge_order="barrier",
        max_components=20,
        random_state=None,
        accountant=None,
    ):
        self.base_estimator = base_estimator
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.delta = delta
        self.covariance_share = covariance_share
        self.n_points = n_points
        self.n_iter = n_iter
        self.perturbation = perturbation
        self.string_time = string_time
        self.metric = metric
        self.predict_method = predict_method
        self.covariance_sensitivity = covariance_sensitivity
        self.reg_covar = reg_covar
        self.min_weight = min_weight
        self.min_cluster_weight = min_cluster_weight
        self.merge_order = merge_order
        self.max_components = max_components
        self.random_state = random_state
        self.accountant = accountant

    # ------------------------------------------------------------------ checks
    def _check_params(self):
        k = self.n_clusters
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"n_clusters must be an int >= 1, got {k!r}")
        for name in ("n_points", "n_iter", "max_components"):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, numbers.Integral)
                or v < (0 if name == "n_iter" else 1)
            ):
                raise ValueError(
                    f"{name} must be a non-negative int (n_points, max_components >= 1), got {v!r}"
                )
        for name in ("perturbation", "reg_covar"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Real) or not v > 0 or not math.isfinite(v):
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        for name in ("min_weight", "min_cluster_weight"):
            mw = getattr(self, name)
            if isinstance(mw, bool) or not isinstance(mw, numbers.Real) or not 0 <= mw < 1:
                raise ValueError(f"{name} must be in [0, 1), got {mw!r}")
        st = self.string_time
        if not isinstance(st, numbers.Real) or not st >= 0 or not math.isfinite(st):
            raise ValueError(f"string_time must be a number >= 0, got {st!r}")
        share = self.covariance_share
        if not isinstance(share, numbers.Real) or not 0 < share < 1:
            raise ValueError(f"covariance_share must be in (0, 1), got {share!r}")
        if self.metric not in ("mixture", "euclidean"):
            raise ValueError(f"metric must be 'mixture' or 'euclidean', got {self.metric!r}")
        if self.merge_order not in ("barrier", "persistence"):
            raise ValueError(
                f"merge_order must be 'barrier' or 'persistence', got {self.merge_order!r}"
            )
        if self.predict_method not in ("base", "flow", "nearest", "likelihood"):
            raise ValueError(
                "predict_method must be 'base', 'flow', 'nearest' or 'likelihood', got "
                f"{self.predict_method!r}"
            )
        if self.epsilon is not None:
            check_epsilon(self.epsilon)
        check_delta(self.delta)
        if self.base_estimator is None:
            raise ValueError(
                "MorseMerging needs a base_estimator: a privclust mixture (DPGaussianMixture) or "
                "centre model (DPLloyd, DPM, ...), fitted or not"
            )
        return int(k)

    # ------------------------------------------------------------------ fit
    def fit(self, X=None, y=None):
        """Fit the base if needed (and the covariance pass for a centre model), then the Morse
        step, which reads no data. ``X`` may be None for a fitted mixture base."""
        k = self._check_params()
        names = None if X is None else feature_names(X)
        base = self.base_estimator
        fitted = _is_fitted(base)
        mixture = _is_mixture(base)
        self._check_morse_cost(base, fitted, mixture, X)
        if not fitted or not mixture:
            if X is None:
                raise ValueError(
                    "X is needed: the base model is not fitted"
                    if not fitted
                    else "X is needed for the private covariance pass of a centre model "
                    "(Sec. 5.1.2)"
                )
        source = resolve_random_state(self.random_state)
        plan = accountant = None
        seeded_base = False
        if not fitted or not mixture:
            plan, accountant, base_part, cov_part = self._open_pipeline_plan(base, fitted,
                                                                             mixture)
        if not fitted:
            base = clone(base)
            params = base.get_params(deep=False)
            if self.random_state is not None and "random_state" in params:
                # one stream for the whole pipeline: the base draws first, the covariance pass
                # goes on from where it stopped (two equal seeds would replay the same noise)
                base.set_params(random_state=source.generator)
                seeded_base = True
            try:
                self._fit_base_in_plan(base, base_part, X)
            except (ValueError, TypeError):
                plan.refund_if_unspent()  # a user mistake caught before any release
                raise
        self.base_estimator_ = base

        base_report = getattr(base, "privacy_report_", None)
        cov_report = None
        if mixture:
            weights = np.asarray(base.weights_, dtype=float)
            means = np.asarray(base.means_, dtype=float)
            covs = np.asarray(base.covariances_, dtype=float)
            d = means.shape[1]
            bounds = _base_bounds(base, d)
        else:
            means = np.asarray(base.cluster_centers_, dtype=float)
            d = means.shape[1]
            bounds = _base_bounds(base, d)
            if bounds is None:
                raise ValueError("the covariance pass needs the base model's public bounds")
            X = check_data(X)
            means = self._pool(base, means, bounds)
            weights, means, covs, cov_report = self._covariance_pass(
                X, base, means, bounds, cov_part, source, clipping_said=not fitted
            )
        self.privacy_report_ = self._combined_report(
            base, None if seeded_base else base_report, cov_report, source, base_report
        )
        if plan is not None:
            self._close_pipeline_plan(plan, fitted, accountant)
        if bounds is not None:  # post-processing: a base's centre can round an ulp outside
            means = np.clip(means, bounds[:, 0], bounds[:, 1])
        self.weights_, self.means_, self.covariances_ = weights, means, covs
        self.base_assignment_ = "likelihood" if mixture else "nearest"
        self.bounds_ = bounds
        self.n_features_in_ = d
        self._morse(k)
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        if X is not None:
            self.labels_ = self.predict(X)
        return self

    def _pool(self, base, means, bounds):
        """A centre model's centres pooled to ``max_components`` (:func:`pool_centres`, in the
        unit cube of ``bounds``); sets ``pooled_from_``."""
        if means.shape[0] > int(self.max_components):  # the count was not known up front
            _check_pooling_cost(means.shape[0], means.shape[1], _centre_param(base))
        shift, half = _unit_map(bounds)
        pooled, self.pooled_from_ = pool_centres(
            (means - shift) / half, getattr(base, "cluster_sizes_", None),
            int(self.max_components),
        )
        return shift + half * pooled

    def _check_morse_cost(self, base, fitted, mixture, X=None) -> None:
        """Refuse up front (before the base spends anything) a Morse step that would run for
        long: it costs about (K0 / 20)^3 s for K0 components (measured: <= 1 s at K0 = 20,
        d <= 16), so more than 43 components is refused with the predicted time. So is the
        pooling of a centre model's many centres where their number is known up front
        (:func:`~.base._pooling_seconds`; otherwise it is checked once the base has them)."""
        if not mixture:
            n_centres, d = _centre_count(base, fitted, X)
            if n_centres is not None and n_centres > int(self.max_components):
                _check_pooling_cost(n_centres, d, _centre_param(base))
        if mixture:
            k0 = (len(base.weights_) if fitted
                  else int(base.get_params(deep=False).get("n_components", 0) or 0))
        else:
            k0 = int(self.max_components)
            if fitted:
                k0 = min(k0, len(base.cluster_centers_))
        predicted = (k0 / 20.0) ** 3
        if predicted > 10.0:
            raise ValueError(
                f"the Morse step over {k0} components would take about {predicted:,.0f} s (its "
                "cost grows like the cube of the number of components); use at most 43 "
                "(n_components of a mixture base, or max_components for a centre model)"
            )

    # ------------------------------------------------------------------ the pipeline's plan
    def _pipeline_budget(self, base, fitted):
        """The pipeline's total ``(epsilon, delta)``: MorseMerging's own when given, else the
        (unfitted) base's. delta None means the delta rule for the whole pipeline."""
        if fitted:  # only the covariance pass spends here, on top of the base's own release
            if self.epsilon is None:
                raise ValueError(
                    "the base centre model is already fitted: pass epsilon=... for the private "
                    "covariance pass (Sec. 5.1.2), or an unfitted base to split one budget"
                )
            return check_epsilon(self.epsilon), _positive_delta(check_delta(self.delta), "delta")
        params = base.get_params(deep=False)
        total = self.epsilon if self.epsilon is not None else params.get("epsilon")
        if total is None:
            raise ValueError("the base has no epsilon; pass MorseMerging(epsilon=...)")
        delta = self.delta if self.delta is not None else params.get("delta")
        who = "delta" if self.delta is not None else f"the base {type(base).__name__}'s delta"
        return check_epsilon(total), _positive_delta(check_delta(delta), who)

    def _open_pipeline_plan(self, base, fitted, mixture):
        """One plan for the whole pipeline, checked against the accountant before any data is
        read: the base's part and the covariance pass's part split the user's budget."""
        eps, delta = self._pipeline_budget(base, fitted)
        name = f"MorseMerging({type(base).__name__})"
        plan = PrivacyPlan(name, eps, delta)
        accountant = self.accountant if self.accountant is not None else Accountant()
        if not isinstance(accountant, Accountant):
            raise TypeError("accountant must be a privclust.Accountant or None")
        if not fitted and not mixture:
            base_delta = None if plan.delta is None else plan.delta * (1.0 - self.covariance_share)
            if getattr(base, "keeps_zcdp_block", lambda _: False)(base_delta):
                raise ValueError(_zcdp_base_message(base))  # before any data is read
        accountant.check(plan.reserved(), name)  # before any data is read
        base_part = cov_part = None
        if fitted:
            cov_part = plan.part("covariance pass", 1.0, 1.0)
        elif mixture:
            base_part = plan.part("base", 1.0, 1.0)
        else:
            share = float(self.covariance_share)
            base_delta = (1.0 - share) if "delta" in base.get_params(deep=False) else 0.0
            base_part = plan.part("base", 1.0 - share, base_delta)
            cov_part = plan.part("covariance pass", share, 1.0 - base_delta)
        if cov_part is not None:
            eps_n = 0.0
            if plan.delta is None and not _releases_sizes(base):
                eps_n = NOISY_N_SHARE * cov_part.epsilon
                cov_part.add("record count (delta rule)", "two-sided geometric", "pure", eps_n)
            cov_part.add("covariance statistics", "gaussian (zCDP)", "zcdp",
                         cov_part.epsilon - eps_n, 1.0)
            cov_part.validate()
        plan.book(accountant, name)
        return plan, accountant, base_part, cov_part

    @staticmethod
    def _fit_base_in_plan(base, part, X) -> None:
        """Fit the base inside its part of the pipeline's plan (its own epsilon, delta and
        accountant are replaced by the part's, so the parameters say what it spent)."""
        params = base.get_params(deep=False)
        new = {"epsilon": part.epsilon}
        if "delta" in params:
            new["delta"] = part.delta
        if "accountant" in params:
            new["accountant"] = None
        base.set_params(**new)
        base._plan_part = part
        try:
            base.fit(X)
        except ZcdpBlockTakenError:  # an estimator whose keeps_zcdp_block said otherwise
            raise ValueError(_zcdp_base_message(base)) from None
        finally:
            del base._plan_part

    def _close_pipeline_plan(self, plan, fitted, accountant) -> None:
        report = self.privacy_report_
        if fitted:  # the base spent before: the plan covers the covariance pass only
            own = PrivacyReport("pass", plan.planned(), zcdp_delta=report.zcdp_delta,
                                releases=[r for r in report.releases
                                          if r.item.startswith("covariance pass")])
            plan.check_ledger(own)
            report.planned = self.base_estimator_.privacy_report_.planned + plan.planned()
        else:
            plan.check_ledger(report)
            report.planned = plan.planned()
        plan.write_into(report)
        accountant.attach(report)

    def _covariance_pass(self, X, base, centres, bounds, part, source, clipping_said=False):
        with warnings.catch_warnings():
            if clipping_said:  # the base, fitted here on the same X, warned of it already
                warnings.filterwarnings("ignore", message=".*clipped to them")
            engine = _unit_engine(X, bounds)
        report = PrivacyReport(
            estimator="MorseMerging covariance pass",
            planned=part.reserved(),
            random_source=source.description,
        )
        mech = Mechanisms(source, report, part.parent)
        if part.delta is None:  # the delta rule, from the base's sizes or a noisy count
            sizes = getattr(base, "cluster_sizes_", None)
            if _releases_sizes(base) and sizes is not None and np.size(sizes):
                n_hat = float(np.maximum(np.asarray(sizes, float), 0).sum())
                how = "the sum of the base's released noisy cluster sizes (no extra release)"
            else:
                item = part._name("record count (delta rule)")
                n_hat = float(mech.count(
                    [engine.count(engine.root())[0]], part.parent.item(item).epsilon,
                    target="record count (chooses delta)", item=item)[0])
                how = f"a noisy count ({NOISY_N_SHARE:g} of the pass's epsilon)"
            part.resolve_delta(n_hat, how)
        block = part.item("covariance statistics")
        mid, half = _unit_map(bounds)
        centres_u = (centres - mid) / half
        w, mu_u, cov_u, n_hat_k, sigma = private_centre_covariances(
            engine,
            centres_u,
            mech,
            block.rho,
            item=block.name,
            sensitivity=self.covariance_sensitivity,
            reg_covar=float(self.reg_covar),
        )
        report.notes.append(
            f"covariance pass: epsilon {block.epsilon:.4g} at delta {block.delta:.3g} "
            f"(rho = {block.rho:.4g}), sigma = {sigma:.6g}"
        )
        self.covariance_sigma_ = sigma
        self.covariance_counts_ = n_hat_k
        covs = cov_u * half[:, None] * half[None, :]
        return w, centres.copy(), covs, report

    def _combined_report(self, base, source_report, cov_report, source, base_report):
        """The base's and the covariance pass's releases in one report. Its randomness is the
        base's (``source_report``) when the base drew from its own source, else ours."""
        parts = [r for r in (base_report, cov_report) if r is not None]
        planned = Budget(0.0, 0.0)
        for r in parts:
            planned = planned + r.planned
        report = PrivacyReport(
            estimator=f"MorseMerging({type(base).__name__})",
            planned=planned,
            random_source=source_report.random_source if source_report else source.description,
        )
        zdeltas = {r.zcdp_delta for r in parts if any(x.rho > 0 for x in r.releases)}
        for r in parts:
            convert = len(zdeltas) > 1 and r is cov_report
            if convert:  # two zCDP parts with different deltas: convert this one alone
                rho = sum(x.rho for x in r.releases)
                report.add(
                    Release(
                        "gaussian (zCDP, converted)",
                        "covariance pass",
                        epsilon=zcdp_to_approx_dp(rho, r.zcdp_delta),
                        delta=r.zcdp_delta,
                        note=f"rho = {rho:.6g} converted at delta = {r.zcdp_delta:.3g}",
                        item="covariance pass: covariance statistics",
                    )
                )
            else:
                for x in r.releases:
                    report.add(x)
                if any(x.rho > 0 for x in r.releases):
                    report.zcdp_delta = r.zcdp_delta
            report.notes += [f"{r.estimator}: {n}" for n in r.notes]
        if base_report is None:
            report.notes.append(
                "the base model has no privacy report; only the covariance pass is listed"
            )
        report.notes.append(
            "Morse merging (TEV graph, MergeCluster, hierarchy, predict) reads no data: "
            "post-processing of the released mixture, no privacy cost beyond the releases above "
            "(000 Thm 5.4)"
        )
        return report

    # ------------------------------------------------------------------ the Morse step
    def _to_unit(self, X):
        if self.bounds_ is None:
            return np.asarray(X, dtype=float)
        mid, half = _unit_map(self.bounds_)
        return (np.asarray(X, dtype=float) - mid) / half

    def _from_unit(self, U):
        if self.bounds_ is None:
            return np.asarray(U, dtype=float)
        mid, half = _unit_map(self.bounds_)
        return mid + half * np.asarray(U, dtype=float)

    def _density_weights(self):
        """The weights of the density the Morse step uses: components below ``min_weight`` of
        the total are left out (post-processing; see the class docstring)."""
        w = np.maximum(np.asarray(self.weights_, dtype=float), 0.0)
        if not w.sum() > 0:
            raise ValueError(f"{self._base_words()} has no component with a positive weight")
        w = w / w.sum()
        keep = w >= float(self.min_weight)
        if not keep.any():
            keep = w == w.max()
        return np.where(keep, w, 0.0)

    def _unit_field(self):
        w = self._density_weights()
        if self.bounds_ is None:
            return MixtureField(w, self.means_, self.covariances_, self.metric)
        _, half = _unit_map(self.bounds_)
        covs = self.covariances_ / (half[:, None] * half[None, :])
        return MixtureField(w, self._to_unit(self.means_), covs, self.metric)

    def _morse(self, k):
        # tiny batched linear algebra: one BLAS thread is faster than many (and than contention)
        with threadpool_limits(limits=1, user_api="blas"):
            return self._morse_step(k)

    def _morse_step(self, k):
        t0 = time.perf_counter()
        field = self._unit_field()
        self._field = field
        live = field.components
        centres_u = self._to_unit(self.means_)[live]
        graph = find_tevs(field, centres_u, n_points=self.n_points, n_iter=self.n_iter,
                          perturbation=self.perturbation, string_time=self.string_time)
        sevs = graph["sevs"]
        sev_values = field.f(sevs)
        Z, n_fallback = merge_clusters(
            graph["sev_of_centre"],
            sev_values,
            graph["tev_edges"],
            graph["tev_values"],
            graph["line_barrier"],
            weights=field.weights,
            means=centres_u,
            merge_order=self.merge_order,
        )
        n_leaves = live.size
        n_clusters = min(k, n_leaves)
        if k > n_leaves:
            warnings.warn(self._too_few_components(k, n_leaves), UserWarning, stacklevel=3)
        leaf_labels = cut_linkage(Z, n_leaves, n_clusters, field.weights,
                                  float(self.min_cluster_weight))
        used = Z[: max(n_leaves - n_clusters, 0)]
        n_tev_merges = n_leaves - n_fallback - 1
        if n_leaves - n_clusters > n_tev_merges:
            warnings.warn(
                "the TEV graph is disconnected: some merges to reach n_clusters follow "
                "straight-segment barriers instead of TEVs",
                UserWarning,
                stacklevel=3,
            )
        sev_cluster = _sev_clusters(sevs, graph["sev_of_centre"], leaf_labels)
        K0 = np.asarray(self.weights_).size
        comp_labels = np.full(K0, -1, dtype=np.int64)
        comp_labels[live] = leaf_labels
        sev_of_component = np.full(K0, -1, dtype=np.int64)
        sev_of_component[live] = graph["sev_of_centre"]
        self.sev_labels_ = sev_cluster
        self._sevs_u = sevs
        self.component_labels_ = comp_labels  # _flow_labels reads it
        dead = np.flatnonzero(comp_labels < 0)
        if dead.size:  # zero-weight components: the cluster of the basin their mean flows to
            comp_labels[dead] = self._flow_labels(self._to_unit(self.means_)[dead])

        self.component_labels_ = comp_labels
        self.sev_of_component_ = sev_of_component
        self.leaves_ = live
        self.n_clusters_ = int(n_clusters)
        self.sevs_ = self._from_unit(sevs)
        self.tevs_ = self._from_unit(graph["tevs"])
        self.tev_values_ = np.asarray(graph["tev_values"], dtype=float)
        self.tev_edges_ = np.asarray(graph["tev_edges"], dtype=np.int64)
        self.index1_points_ = self._from_unit(graph["index1"])
        self.linkage_ = Z
        self.merge_heights_ = Z[:, 2].copy()
        self.n_fallback_merges_ = int(n_fallback)
        self.n_merges_used_ = int(len(used))
        self.dendrogram_ = _dendrogram(Z, n_leaves)
        self.morse_time_ = time.perf_counter() - t0
        return self

    def _base_words(self) -> str:
        """The base as messages name it: "the base mixture" (a mixture, or a loaded model), or
        "the base DPM's centres" (a centre model, made a mixture by the covariance pass)."""
        base = getattr(self, "base_estimator_", None)
        if base is None or getattr(self, "base_assignment_", "likelihood") == "likelihood":
            return "the base mixture"
        return f"the base {type(base).__name__}'s centres"

    def _too_few_components(self, k: int, n_leaves: int) -> str:
        clusters = f"{n_leaves} cluster" + ("" if n_leaves == 1 else "s")
        if self._base_words() == "the base mixture":
            return (f"n_clusters={k} but the base mixture has only {n_leaves} live component(s); "
                    f"keeping {clusters}")
        return (f"n_clusters={k} but {self._base_words()} give only {n_leaves} live "
                f"component(s) (centres with a positive weight after the covariance pass); "
                f"keeping {clusters}")

    # ------------------------------------------------------------------ predict
    def _check_fitted(self):
        if not hasattr(self, "component_labels_"):
            raise_not_fitted(self, "fit")

    def _flow_labels(self, U, chunk=8192):
        field = self._field
        out = np.empty(U.shape[0], dtype=np.int64)
        with threadpool_limits(limits=1, user_api="blas"):
            for start in range(0, U.shape[0], chunk):
                part = U[start : start + chunk]
                ends, _ = flow_to_rest(field, part)
                dist = ((ends[:, None, :] - self._sevs_u[None]) ** 2).sum(axis=2)
                lab = self.sev_labels_[np.argmin(dist, axis=1)]
                mixed = lab == -2
                if mixed.any():
                    lt = field.log_terms(part[mixed])
                    lab[mixed] = self.component_labels_[field.components[np.argmax(lt, axis=1)]]
                out[start : start + chunk] = lab
        return out

    def predict(self, X):
        """Cluster of every row: the basin its flow reaches (``predict_method='flow'``, Thm 5.3),
        or the faster component shortcuts (see the class docstring). Post-processing."""
        self._check_fitted()
        arr = check_X(self, X, reset=False)
        if arr.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {arr.shape[1]} features; the model was fitted on {self.n_features_in_}"
            )
        arr = clip_to_fitted_bounds(self, arr)  # as the fit treated a record
        how = self.predict_method
        if how == "base":
            how = getattr(self, "base_assignment_", "likelihood")
        if how == "nearest":
            return self.component_labels_[nearest_centre(arr, self.means_)]
        if how == "likelihood":
            lt = self._field.log_terms(self._to_unit(arr))
            return self.component_labels_[self._field.components[np.argmax(lt, axis=1)]]
        if not hasattr(self, "_field"):
            self._field = self._unit_field()
        return self._flow_labels(self._to_unit(arr))

    def fit_predict(self, X, y=None):
        return self.fit(X).labels_

    def _restore(self):
        """Rebuild what predict derives from the released attributes (after loading a model:
        ``privclust.io`` sets those and calls this); returns self."""
        self.merge_heights_ = self.linkage_[:, 2].copy()
        self.dendrogram_ = _dendrogram(self.linkage_, self.leaves_.size)
        self.base_estimator_ = None
        self._field = self._unit_field()
        self._sevs_u = self._to_unit(self.sevs_)
        return self


def _sev_clusters(sevs, sev_of_centre, leaf_labels) -> np.ndarray:
    """The cluster of each SEV: that of the centres flowing to it (-2: centres of one basin
    ended in different clusters, with fewer basins than n_clusters; its points are labelled
    by their most likely component); an SEV no centre reaches takes its nearest labelled one."""
    sev_cluster = np.full(len(sevs), -1, dtype=np.int64)
    for leaf, s in enumerate(sev_of_centre):
        sev_cluster[s] = leaf_labels[leaf] if sev_cluster[s] in (-1, leaf_labels[leaf]) else -2
    orphan = np.flatnonzero(sev_cluster == -1)
    if orphan.size:
        known = np.flatnonzero(sev_cluster != -1)
        for o in orphan:
            j = known[np.argmin(np.linalg.norm(sevs[known] - sevs[o], axis=1))]
            sev_cluster[o] = sev_cluster[j]
    return sev_cluster

