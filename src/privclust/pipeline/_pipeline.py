"""``PrivatePipeline``: scikit-learn's ``Pipeline`` with one privacy plan for all its steps.

A private step is any privclust estimator or private transformer (a
:class:`~privclust.cluster._base.PrivateFitMixin`). Before any data is read, the pipeline sums
its private steps' budgets into one :class:`~privclust.privacy.PrivacyPlan`, checks and books
it with one :class:`~privclust.Accountant`, and gives every step its part of the plan
(:meth:`PrivacyPlan.part`, the mechanism :class:`~privclust.MorseMerging` uses for its base):
each step adds its own line items there, so the pipeline's report lists every step's releases
under one guarantee (sequential composition). Each private transformer hands the next step the
public bounds of its output (``output_bounds_``); a step whose ``bounds`` is None takes them.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import replace

from sklearn.pipeline import Pipeline

from ..cluster._base import PrivateFitMixin, check_delta, check_epsilon
from ..cluster.morse import MorseMerging
from ..privacy import (
    Accountant,
    PrivacyLeakWarning,
    PrivacyPlan,
    PrivacyReport,
)

__all__ = ["PrivatePipeline", "make_private_pipeline"]


class PrivatePipeline(Pipeline):
    """A ``Pipeline`` whose private steps share one plan and one accountant.

    Parameters
    ----------
    steps : list of (name, step)
        As for ``sklearn.pipeline.Pipeline``; the last is usually a privclust estimator, the
        others privclust transformers (:mod:`privclust.preprocessing`).
    accountant : Accountant or None
        The budget the whole pipeline is charged to, before any data is read. None: the
        accountant the private steps were given (they must agree), else an unlimited one.
    memory, verbose, transform_input
        As for ``Pipeline`` (caching is refused: a cached step would not be charged again).

    Privacy guarantee
    -----------------
    The sum of the private steps' epsilons (and the final step's delta), by sequential
    composition; stated in ``privacy_report_``. A step that is not private and learns from the
    data (scikit-learn's ``StandardScaler``, say) is fitted as usual but breaks the guarantee
    for what it learns: the pipeline warns (:class:`~privclust.PrivacyLeakWarning`) and names
    it. Stateless steps (``FunctionTransformer``, ``Normalizer``) read each record alone and
    are fine.

    Every release of every step is charged to the pipeline's plan when it is drawn. A step that
    refuses after a release (a clipper whose noisy record count is too low for private bounds)
    leaves the whole booking spent: a refusal that follows a noisy value is a release. The
    booking is given back only when the pipeline stopped before any noisy value was drawn.
    With ``delta=None`` the accountant is charged the delta rule's cap, the guarantee.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from privclust import DPLloyd
    >>> from privclust.pipeline import make_private_pipeline
    >>> from privclust.preprocessing import PrivateClipper, PrivateScaler
    >>> X, _ = make_blobs(20000, 3, centers=4, random_state=0)
    >>> pipe = make_private_pipeline(PrivateClipper(0.1), PrivateScaler(0.1),
    ...                              DPLloyd(4, epsilon=0.8), random_state=0).fit(X)
    >>> round(pipe.privacy_report_.total().epsilon, 6)
    1.0
    """

    def __init__(self, steps, *, accountant=None, memory=None, verbose=False,
                 transform_input=None):
        super().__init__(steps, memory=memory, verbose=verbose, transform_input=transform_input)
        self.accountant = accountant

    def fit(self, X, y=None, **params):
        """Fit every step in order under the pipeline's one plan. ``y`` and ``params`` go to
        the steps as in ``Pipeline`` (privclust steps ignore ``y``)."""
        self._validate_steps()
        if self.memory is not None:
            raise ValueError("PrivatePipeline does not cache steps (memory=None): a cached "
                             "private step would be reused without being charged again")
        for name, step in self.steps:
            if isinstance(step, MorseMerging):
                raise ValueError(f"step {name!r}: MorseMerging cannot be a pipeline step; fit it "
                                 "on the pipeline's output, or give it a fitted base")
        private = [(i, name, step) for i, (name, step) in enumerate(self.steps)
                   if isinstance(step, PrivateFitMixin)]
        if not private:
            raise ValueError("this PrivatePipeline has no private step; add a privclust "
                             "estimator or transformer (privclust.preprocessing)")
        plan, accountant, parts = self._open_plan(private)
        try:
            self._fit_steps(X, y, parts, params)
        except BaseException:
            plan.refund_if_unspent()
            raise
        self.privacy_report_ = self._close_plan(plan, accountant, private)
        return self

    def fit_predict(self, X, y=None, **params):
        return self.fit(X, y, **params).predict(X)

    # ------------------------------------------------------------------ the plan
    def _open_plan(self, private):
        """One plan for every private step, checked and booked before any data is read."""
        budgets, delta = [], 0.0
        for i, name, step in private:
            step_params = step.get_params(deep=False)
            budgets.append(check_epsilon(step_params.get("epsilon")))
            if i == len(self.steps) - 1 and "delta" in step_params:
                delta = check_delta(step_params["delta"])
            elif step_params.get("delta") not in (None, 0, 0.0):
                raise ValueError(f"step {name!r} takes delta; only the last step of a "
                                 "PrivatePipeline may spend delta")
        label = "PrivatePipeline(" + ", ".join(type(s).__name__ for _, _, s in private) + ")"
        plan = PrivacyPlan(label, sum(budgets), delta)
        accountant = self._shared_accountant(private)
        plan.book(accountant, label)  # before any data is read
        last = len(self.steps) - 1
        parts = {i: plan.part(f"{name}", eps / plan.epsilon, 1.0 if i == last else 0.0)
                 for (i, name, _), eps in zip(private, budgets, strict=True)}
        return plan, accountant, parts

    def _shared_accountant(self, private) -> Accountant:
        given = {id(a): a for a in (getattr(s, "accountant", None) for _, _, s in private)
                 if a is not None}
        if self.accountant is not None:
            if not isinstance(self.accountant, Accountant):
                raise TypeError("accountant must be a privclust.Accountant or None")
            given.pop(id(self.accountant), None)
            if given:
                raise ValueError("the pipeline and its steps were given different accountants; "
                                 "give one, to the pipeline (accountant=...)")
            return self.accountant
        if len(given) > 1:
            raise ValueError("the pipeline's steps were given different accountants; give one, "
                             "to the pipeline (accountant=...)")
        return next(iter(given.values()), None) or Accountant()

    def _close_plan(self, plan, accountant, private) -> PrivacyReport:
        reports = [s.privacy_report_ for _, _, s in private]
        report = PrivacyReport(
            estimator=plan.estimator, planned=plan.planned(),
            random_source=reports[-1].random_source,
            zcdp_delta=max(r.zcdp_delta for r in reports),
            releases=[replace(r, item=f"{name}: {r.item}")
                      for (_, name, _), rep in zip(private, reports, strict=True)
                      for r in rep.releases],
            notes=[f"{name}: {note}" for (_, name, _), rep in zip(private, reports, strict=True)
                   for note in rep.notes],
        )
        plan.write_into(report)
        plan.check_ledger(report)
        accountant.attach(report)
        return report

    # ------------------------------------------------------------------ the steps
    def _fit_steps(self, X, y, parts, params) -> None:
        routed = self._check_method_params(method="fit", props=params)
        Xt, bounds = X, None
        last = len(self.steps) - 1
        for i, (name, step) in enumerate(self.steps):
            if step is None or (isinstance(step, str) and step == "passthrough"):
                continue
            step_params = routed[name]["fit"] if name in routed else {}
            if isinstance(step, PrivateFitMixin):
                with _in_part(step, parts[i]), _given_bounds(step, bounds):
                    step.fit(Xt, y, **step_params)
                bounds = getattr(step, "output_bounds_", None)
            else:
                _warn_if_it_learns(name, step)
                step.fit(Xt, y, **step_params)
                bounds = None
            if i != last:
                Xt = step.transform(Xt)


def make_private_pipeline(*steps, accountant=None, random_state=None) -> PrivatePipeline:
    """A :class:`PrivatePipeline` from steps, named as ``sklearn.pipeline.make_pipeline`` names
    them. ``random_state``, when given, is set on every private step that has one (each step
    then draws from its own stream of that seed)."""
    from sklearn.pipeline import make_pipeline

    named = make_pipeline(*steps).steps
    if random_state is not None:
        for _, step in named:
            if isinstance(step, PrivateFitMixin) and "random_state" in step.get_params(False):
                step.set_params(random_state=random_state)
    return PrivatePipeline(named, accountant=accountant)


@contextlib.contextmanager
def _in_part(step, part):
    step._plan_part = part
    try:
        yield
    finally:
        del step._plan_part


@contextlib.contextmanager
def _given_bounds(step, bounds):
    """A step whose ``bounds`` is None takes the previous step's output bounds for this fit."""
    params = step.get_params(deep=False)
    if "bounds" not in params or params["bounds"] is not None or bounds is None:
        yield
        return
    # by name: a (2, 2) array of rows would read two ways
    step.set_params(bounds={"lower": bounds[:, 0], "upper": bounds[:, 1]})
    try:
        yield
    finally:
        step.set_params(bounds=None)


def _warn_if_it_learns(name: str, step) -> None:
    tags = getattr(step, "__sklearn_tags__", None)
    if tags is not None and not tags().requires_fit:
        return  # stateless: reads each record alone
    warnings.warn(
        f"step {name!r} ({type(step).__name__}) learns from the data without privacy: what it "
        "learns reaches the released model outside the guarantee; use a privclust.preprocessing "
        "step instead",
        PrivacyLeakWarning,
        stacklevel=4,
    )
