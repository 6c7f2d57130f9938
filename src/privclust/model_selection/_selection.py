"""Private model selection: fit every candidate inside one privacy plan, then choose one with
the exponential mechanism over a score of sensitivity 1."""

from __future__ import annotations

import dataclasses

from sklearn.base import BaseEstimator, ClusterMixin

from ..cluster._base import (
    check_delta,
    check_epsilon,
    check_X,
    is_dask_input,
    is_private_bounds,
    raise_not_fitted,
)
from ..cluster.bounds import private_bounds
from ..privacy import (
    Accountant,
    Mechanisms,
    PrivacyPlan,
    PrivacyReport,
    resolve_random_state,
)
from ._candidates import (
    candidate_label,
    check_bounds_for,
    check_candidates,
    check_one_zcdp_block,
    check_shares,
    grid_candidates,
    takes_delta,
)
from ._score import silhouette_sum

__all__ = ["PrivateSelection", "select_n_clusters"]

#: The selection step's line item.
SELECTION_ITEM = "selection: simplified silhouette"


class PrivateSelection(ClusterMixin, BaseEstimator):
    """Choose among privclust estimators (different k, different algorithms) privately.

    Every candidate is cloned and fitted on X inside one privacy plan; then the **exponential
    mechanism** (McSherry & Talwar 2007, "Mechanism design via differential privacy") picks one,
    with probability proportional to ``exp(eps_select S_j / 2)``, where ``S_j`` is the sum over
    the records of the **simplified silhouette** (Hruschka, Campello, de Castro 2004) of
    candidate j's released centres: ``s(x) = (b - a) / max(a, b)`` with ``a``, ``b`` the
    distances of ``x`` (clipped to the candidate's public bounds) to its nearest and
    second-nearest centre. ``s`` rewards centres that are close to their records and far from
    each other; it peaks where the centres match the clusters.

    Privacy guarantee
    -----------------
    ``(epsilon, delta)``-DP under add/remove-one-record neighbours, by sequential composition
    of (1) every candidate's fit, each at its share of the budget, (2) with ``bounds="private"``
    candidates, one private estimate of the bounds (:func:`privclust.private_bounds`), and (3)
    the selection. The candidates' centres are releases; given them, ``S_j`` is a sum of one term
    in ``[0, 1]`` per record, each a function of that record and the centres alone, so adding or
    removing a record moves every ``S_j`` by at most 1 (terms are rounded down to a public
    fixed-point grid and added exactly, so this holds in floating point too; see
    :mod:`privclust.model_selection._score`). An added record adds its term, at least 0, to
    every ``S_j`` at once (monotone scores), so the exponential mechanism with sensitivity 1
    and no factor 2 (McSherry and Talwar 2007, Thm. 6) is ``eps_select``-DP however many
    candidates there are. It releases only the chosen index: no score is published.

    Budget. One :class:`~privclust.privacy.PrivacyPlan` holds the whole selection and is checked
    against ``accountant`` (booked once) **before any data is read**:

    * ``selection_share * epsilon`` for the selection (line item
      ``"selection: simplified silhouette"``);
    * if any candidate has ``bounds="private"``: ``0.1 epsilon`` for one private estimate of
      the bounds, given to every such candidate (line item ``"private bounds: ..."``);
    * the rest split equally between the candidates (sequential composition: every candidate
      reads every record), each fitted as a part of the plan (line items
      ``"candidate j (...): ..."``). A candidate's own ``epsilon``, ``delta``, ``accountant``
      and ``random_state`` are replaced by its part's.

    Delta: candidates with a ``delta`` parameter (DPM, LSHSplits, DPGaussianMixture) share
    ``delta`` equally; pure epsilon-DP candidates get none, and if every candidate is pure the
    selection is pure epsilon-DP (``delta`` is not used). ``delta=None`` is the delta rule,
    ``min(1e-5, 1 / n_hat^1.5)``, chosen once for the whole selection from the first released
    record count; the cap is reserved before any data is read.

    Why not split the data instead (each candidate fitted on a disjoint part with the whole fit
    budget, parallel composition)? For privclust's centre models the noise in a centre is about
    ``1 / (epsilon n)``, the same for ``epsilon / m`` on n records as for ``epsilon`` on
    ``n / m`` records. Measured over three data sets, four families and two epsilons
    (``benchmarks/select_k.py``, 24 cells), the data split's median ARI was higher in 10 cells
    and lower in 6, -0.007 on average: no consistent gain, and its chosen model is fitted on a
    part of the data only. The selection therefore splits the budget. (A sound data split needs
    a record's part to be a function of the record alone and of randomness drawn once, e.g. a
    keyed hash of the record, not of its position: then adding or removing a record changes
    one part only.)

    Parameters
    ----------
    candidates : list of at least two privclust centre models (unfitted; fitted ones are
        cloned and refitted). At most one candidate that keeps a zCDP block (a plan holds
        one): one DPGaussianMixture, or one CoresetKMeans unless ``delta=0`` (its sums are
        then pure Laplace releases); more are refused before any data is read.
    epsilon : the whole selection's budget (> 0).
    delta : see "Delta" (None: the delta rule when a candidate uses delta).
    selection_share : the selection's share of epsilon (default 0.05). The score sums grow
        with n, so a small share is enough on large data.
    random_state : None (secure) or an int / Generator, which then seeds every candidate (one
        stream: no two candidates draw the same noise) and the selection.
    accountant : a shared :class:`~privclust.Accountant`, charged once for the whole selection.

    Attributes
    ----------
    ``best_estimator_`` : the chosen fitted candidate. ``best_index_`` : its index in
    ``candidates``. ``candidates_`` : every fitted candidate (their models are releases too).
    ``candidate_budgets_`` : each candidate's planned :class:`~privclust.Budget`.
    ``selection_epsilon_`` : the selection's epsilon. ``cluster_centers_``, ``n_clusters_``,
    ``bounds_``, ``labels_`` : the chosen model's. ``privacy_report_`` : every release of every
    candidate, the bounds estimate and the selection, against the one plan.
    ``private_bounds_`` : (d, 2) the private bounds given to the candidates with
    ``bounds="private"`` (only when there are such candidates).

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from privclust import DPLloyd
    >>> from privclust.model_selection import PrivateSelection
    >>> X, _ = make_blobs(20000, 2, centers=4, random_state=0)
    >>> sel = PrivateSelection([DPLloyd(k, bounds=(-15, 15)) for k in (2, 4, 8)],
    ...                        epsilon=1.0, random_state=0).fit(X)
    >>> sel.best_estimator_.n_clusters, round(sel.privacy_report_.total().epsilon, 6)
    (4, 1.0)
    """

    def __init__(self, candidates=None, *, epsilon=1.0, delta=None, selection_share=0.05,
                 random_state=None, accountant=None):
        self.candidates = candidates
        self.epsilon = epsilon
        self.delta = delta
        self.selection_share = selection_share
        self.random_state = random_state
        self.accountant = accountant

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None):
        """Fit every candidate, then choose one privately. ``y`` is ignored."""
        candidates = check_candidates(self.candidates)
        eps = check_epsilon(self.epsilon)
        delta = check_delta(self.delta)
        private = any(is_private_bounds(getattr(c, "bounds", None)) for c in candidates)
        eps_b, eps_c, eps_s = check_shares(eps, self.selection_share, len(candidates), private)
        source = resolve_random_state(self.random_state)
        plan, bounds_part, parts = self._build_plan(candidates, eps, delta, eps_b, eps_c, eps_s)
        self._configure(candidates, parts, source)
        check_one_zcdp_block(candidates)  # before the plan is booked: no candidate fails late
        accountant = self._reserve(plan)  # checked and booked before any data is read
        try:
            X = check_X(self, X, reset=True)
            if is_dask_input(X):
                raise ValueError("PrivateSelection needs X in memory (an array or DataFrame): "
                                 "its score reads every record; fit on a NumPy array")
            check_bounds_for(candidates, X.shape[1])
        except (ValueError, TypeError):
            plan.refund_if_unspent()  # a user mistake caught before any release
            raise
        report = PrivacyReport("PrivateSelection", plan.reserved(), source.description)
        mech = Mechanisms(source, report, plan)
        if hasattr(self, "private_bounds_"):
            del self.private_bounds_  # from an earlier fit
        if private:
            self._estimate_bounds(X, candidates, bounds_part, eps_b, source, report)
        self._fit_candidates(X, candidates, parts, plan)
        self._select(X, candidates, mech, eps_s)
        self._finish(candidates, parts, plan, report, accountant)
        return self

    def _build_plan(self, candidates, eps, delta, eps_b, eps_c, eps_s):
        """The selection's plan: the bounds part, one part per candidate, the selection item."""
        users = [i for i, c in enumerate(candidates) if takes_delta(c)]
        plan_delta = delta if users else 0.0
        plan = PrivacyPlan("PrivateSelection", eps, plan_delta)
        bounds_part = None
        if eps_b:
            bounds_part = plan.part("private bounds", eps_b / eps, 0.0)
            bounds_part.add("feature bounds", "two-sided geometric histogram", "pure", eps_b)
        parts = []
        for i, c in enumerate(candidates):
            share = 1.0 / len(users) if i in users else 0.0
            parts.append(plan.part(f"candidate {i} ({candidate_label(c)})", eps_c / eps, share))
        plan.add(SELECTION_ITEM, "exponential", "pure", eps_s)
        if delta and not users:
            plan.notes.append(f"delta={delta:g} is not used: every candidate is pure "
                              "epsilon-DP, and so is the selection")
        return plan, bounds_part, parts

    def _configure(self, candidates, parts, source) -> None:
        """Give every candidate its part's budget and the selection's randomness, then run its
        parameter checks (before any data is read: no candidate fails after others spent)."""
        for i, (c, part) in enumerate(zip(candidates, parts, strict=True)):
            params = c.get_params(deep=False)
            new = {"epsilon": part.epsilon, "accountant": None,
                   "random_state": source.generator if self.random_state is not None else None}
            if "delta" in params:
                new["delta"] = part.delta
            c.set_params(**{k: v for k, v in new.items() if k in params})
            _check_candidate_params(i, c)

    def _reserve(self, plan) -> Accountant:
        accountant = self.accountant if self.accountant is not None else Accountant()
        if not isinstance(accountant, Accountant):
            raise TypeError("accountant must be a privclust.Accountant or None")
        plan.book(accountant, "PrivateSelection")
        return accountant

    def _estimate_bounds(self, X, candidates, part, eps_b, source, report) -> None:
        """One private estimate of the bounds for every candidate with ``bounds="private"``."""
        found = private_bounds(X, eps_b, plan=part, mech=Mechanisms(source, report, part))
        for r in report.releases:
            r.item = f"{part.prefix}: {r.item}"
        for c in candidates:
            if is_private_bounds(getattr(c, "bounds", None)):
                # the named form: a 2 x 2 array of rows would read two ways on 2 features
                c.set_params(bounds={"lower": found.bounds[:, 0], "upper": found.bounds[:, 1]})
        report.notes.append(
            f"bounds='private': one estimate (epsilon {eps_b:.4g}: {found.description}) was "
            "given to every candidate that asked for private bounds"
        )
        self.private_bounds_ = found.bounds

    @staticmethod
    def _fit_candidates(X, candidates, parts, plan) -> None:
        """Fit every candidate inside its part of the plan (it books nothing itself)."""
        for c, part in zip(candidates, parts, strict=True):
            c._plan_part = part
            try:
                c.fit(X)
            except (ValueError, TypeError):
                plan.refund_if_unspent()
                raise
            finally:
                del c._plan_part

    def _select(self, X, candidates, mech, eps_s) -> None:
        scores = [silhouette_sum(X, _centres(c), getattr(c, "bounds_", None))
                  for c in candidates]
        labels = ", ".join(f"{i}: {candidate_label(c)}" for i, c in enumerate(candidates))
        idx = int(mech.select(
            scores, 1.0, eps_s, item=SELECTION_ITEM,
            target=f"the candidate with the largest simplified silhouette sum ({labels})",
            note="score: sum over the records of (b - a) / max(a, b), a and b the distances to "
                 "the nearest and second-nearest released centre (Hruschka et al. 2004), each "
                 "term in [0, 1] on a fixed-point grid: sensitivity 1",
            monotone=True,  # an added record adds its term to every score
        ))
        self.best_index_ = idx
        self.best_estimator_ = candidates[idx]
        self.selection_epsilon_ = eps_s

    def _finish(self, candidates, parts, plan, report, accountant) -> None:
        """The combined report (bounds, every candidate, the selection), checked against the
        plan, and the chosen model's attributes."""
        selection = [r for r in report.releases if r.item == SELECTION_ITEM]
        releases = [r for r in report.releases if r.item != SELECTION_ITEM]
        for c, part in zip(candidates, parts, strict=True):
            own = c.privacy_report_
            releases += [dataclasses.replace(r, item=f"{part.prefix}: {r.item}")
                         for r in own.releases]
            if any(r.rho for r in own.releases):
                report.zcdp_delta = own.zcdp_delta
            shared = set(plan.notes) | {plan.delta_note}  # the whole plan's: stated once below
            report.notes += [f"{part.prefix}: {n}" for n in own.notes if n not in shared]
            report.notes.append(
                f"{part.prefix}: planned epsilon {own.planned.epsilon:.6g}, delta "
                f"{own.planned.delta:.3g}; spent epsilon {own.total().epsilon:.6g}")
        report.releases = releases + selection
        report.notes.append(
            f"selection: candidate {self.best_index_} ({candidate_label(self.best_estimator_)})"
            f" chosen by the exponential mechanism at epsilon {self.selection_epsilon_:.4g}")
        plan.items[SELECTION_ITEM] = plan.items.pop(SELECTION_ITEM)  # listed last
        report.planned = plan.planned()
        plan.write_into(report)
        report.notes += [n for n in plan.notes if n not in report.notes]
        plan.check_ledger(report)
        accountant.attach(report)
        self.privacy_report_ = report
        self.candidates_ = candidates
        self.candidate_budgets_ = [c.privacy_report_.planned for c in candidates]
        best = self.best_estimator_
        for name in ("cluster_centers_", "n_clusters_", "bounds_", "labels_"):
            if hasattr(best, name):
                setattr(self, name, getattr(best, name))
        self.n_features_in_ = best.n_features_in_ if hasattr(best, "n_features_in_") else \
            self.cluster_centers_.shape[1]

    # ------------------------------------------------------------------ the chosen model
    def _check_fitted(self):
        if not hasattr(self, "best_estimator_"):
            raise_not_fitted(self)

    def predict(self, X):
        """The chosen model's ``predict`` (post-processing of the private release)."""
        self._check_fitted()
        return self.best_estimator_.predict(X)

    def score(self, X, y=None) -> float:
        """The chosen model's ``score``. **Not private**: it reads ``X`` exactly (see the
        estimator's own ``score``); use it only on data you may look at."""
        self._check_fitted()
        return self.best_estimator_.score(X, y)


def select_n_clusters(estimator, X, n_clusters, *, epsilon=1.0, delta=None,
                      selection_share=0.05, random_state=None, accountant=None):
    """Choose the number of clusters privately: :class:`PrivateSelection` over clones of
    ``estimator`` with ``n_clusters`` (or ``n_components``) set to each value, fitted on X.

    Returns the fitted :class:`PrivateSelection` (``best_estimator_`` is the chosen model).

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from privclust import HSTKMeans
    >>> from privclust.model_selection import select_n_clusters
    >>> X, _ = make_blobs(20000, 2, centers=4, random_state=0)
    >>> sel = select_n_clusters(HSTKMeans(bounds=(-15, 15)), X, [2, 4, 8], random_state=1)
    >>> sel.best_estimator_.n_clusters
    4
    """
    return PrivateSelection(
        grid_candidates(estimator, n_clusters), epsilon=epsilon, delta=delta,
        selection_share=selection_share, random_state=random_state, accountant=accountant,
    ).fit(X)


def _check_candidate_params(i: int, est) -> None:
    """The candidate's own parameter checks (no data), its message prefixed with its index."""
    checks = [getattr(est, n, None) for n in ("_check_params", "_check_common", "_extra_params")]
    try:
        for check in checks:
            if check is not None:
                check()
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"candidates[{i}] ({type(est).__name__}): {exc}") from None


def _centres(est):
    centres = getattr(est, "cluster_centers_", None)
    if centres is None:
        centres = getattr(est, "means_", None)
    if centres is None:
        raise ValueError(f"{type(est).__name__} released no centres to score")
    return centres
