"""DP-Lloyd: Lloyd's k-means with a noisy count and a noisy sum per cluster and iteration.

Su, Cao, Li, Bertino, Jin, "Differentially private k-means clustering" (CODASPY 2016) and the
journal version "... and a hybrid approach to private optimization" (ACM TOPS 2017): the
baseline of DPM (Liebenow et al.) and of Morse merging (Byun et al.). Its building blocks
(:func:`su_budget_split`, :func:`su_iterations`, :func:`sphere_packing_init`,
:func:`noisy_centroids`) live in :mod:`privclust.cluster._centres`, shared with
:mod:`privclust.cluster.convergent` and the mixture.
"""

from __future__ import annotations

from .._progress import fit_progress
from ..privacy import NOISY_N_SHARE, Mechanisms, resolve_random_state
from ._base import (
    PrivateClusterMixin,
    check_epsilon,
    check_fit_cost,
    check_n_clusters,
    check_positive_int,
)
from ._centres import (  # noqa: F401  (su_budget_split, sphere_packing_init: public here too)
    SU_MAX_ITER,
    SU_RHO,
    centroid_stats,
    finish_centre_fit,
    kmeans_cost,
    noisy_centroids,
    plan_centroid_items,
    public_init,
    sphere_packing_init,
    su_budget_split,
    su_iterations,
)

__all__ = [
    "DPLloyd",
    "noisy_centroids",
    "sphere_packing_init",
    "su_budget_split",
    "su_iterations",
]

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

    releases_cluster_sizes = True

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
        bounds = self._fit_bounds(X)
        d = X.shape[1]
        T_max = max_iter if n_iter is None else n_iter
        # measured: ~3.4e-10 s per record x cluster x feature x iteration (nearest centres)
        check_fit_cost(3.4e-10 * k * max(d, 2) * T_max,
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
                counts, sums, cost = centroid_stats(engine, centres, bounds)
                costs.append(cost)
                centres, n_hat_k, _ = noisy_centroids(mech, counts, sums, centres, bounds, eps_t,
                                                      label=f"iteration {t + 1}", items=items)
                history.append(centres)
                step()
        return finish_centre_fit(self, X, bounds, centres, n_hat_k, history, costs, report,
                                 plan, accountant)
