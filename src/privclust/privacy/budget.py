r"""Budgets, the ledger of releases, and composition.

Privacy unit everywhere in privclust: **add or remove one record** (unbounded neighbours).

A fit works in three steps:

1. it *plans* its spends from its parameters alone and asks the :class:`Accountant` to
   :meth:`~Accountant.check` the plan; :class:`BudgetExceededError` is raised before any data is
   read if the plan does not fit the remaining budget;
2. it :meth:`~Accountant.reserve`\\ s the plan and makes its releases; every release is written to
   the fit's :class:`PrivacyReport` (mechanism, what was released, sensitivity, cost, noise scale);
3. the report composes its entries and proves the total equals (or stays below) the plan.

Composition rules used by :meth:`PrivacyReport.total`:

* an entry is a *batch* of releases on **disjoint** subsets (e.g. one noisy count per node of a
  recursion level): parallel composition, the batch costs one release's (epsilon, delta);
* entries compose sequentially (basic composition: epsilons and deltas add);
* zCDP entries (``rho``) add up in rho and are converted to (epsilon, delta) at the end with the
  report's ``zcdp_delta`` (Canonne, Kamath, Steinke 2020, Prop. 12; the same conversion
  dp-accounting's RDP accountant applies).
"""

from __future__ import annotations

import math
import textwrap
import threading
from dataclasses import asdict, dataclass, field
from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize_scalar

__all__ = [
    "Accountant",
    "Budget",
    "BudgetExceededError",
    "PrivacyLeakWarning",
    "PrivacyReport",
    "Release",
    "Remaining",
    "compose",
    "zcdp_to_approx_dp",
]

# Relative slack when comparing floating-point budget sums.
_TOL = 1e-9


class BudgetExceededError(RuntimeError):
    """A fit's planned spend exceeds the remaining budget (raised before data is read)."""


class PrivacyLeakWarning(UserWarning):
    """Something data-dependent is being used without privacy (only after an explicit opt-in)."""


@dataclass(frozen=True)
class Budget:
    """An (epsilon, delta) pair (a cost or a cap). Estimators require epsilon > 0 themselves."""

    epsilon: float
    delta: float = 0.0

    def __post_init__(self):
        eps, delta = self.epsilon, self.delta
        if not isinstance(eps, (int, float, np.floating, np.integer)) or isinstance(eps, bool):
            raise TypeError(f"epsilon must be a number, got {type(eps).__name__}")
        if math.isnan(eps) or not (eps >= 0):
            raise ValueError(f"epsilon must be >= 0, got {eps}")
        if not (0 <= delta < 1) or math.isnan(delta):
            raise ValueError(f"delta must be in [0, 1), got {delta}")
        object.__setattr__(self, "epsilon", float(eps))
        object.__setattr__(self, "delta", float(delta))

    def __add__(self, other: Budget) -> Budget:
        # deltas that add up to 1 or more are vacuous; keep the value representable
        return Budget(self.epsilon + other.epsilon,
                      min(self.delta + other.delta, float(np.nextafter(1.0, 0.0))))

    def fits_in(self, other: Budget) -> bool:
        """Whether this budget is within ``other`` (up to rounding)."""
        return (
            self.epsilon <= other.epsilon * (1 + _TOL)
            and self.delta <= other.delta * (1 + _TOL) + 1e-300
        )


@dataclass
class Release:
    """One ledger entry: a batch of ``n_released`` noisy values on disjoint subsets.

    ``epsilon``/``delta`` (or ``rho`` for zCDP) is the cost of the whole batch. ``scale`` is the
    noise scale actually drawn (the largest one when rows differ), ``sensitivity`` the bound the
    scale was calibrated to. ``private=False`` marks a step a paper publishes without noise (it
    makes the whole fit non-private; the report says so).
    """

    mechanism: str
    target: str
    epsilon: float = 0.0
    delta: float = 0.0
    rho: float = 0.0
    sensitivity: float | None = None
    scale: float | None = None
    n_released: int = 1
    private: bool = True
    note: str = ""
    #: the plan's line item this release was drawn from
    item: str = ""

    def to_dict(self) -> dict:
        """Plain JSON types."""
        return asdict(self)


def _rdp_to_dp_epsilon(rho: float, delta: float) -> float:
    """epsilon of a rho-zCDP mechanism at delta, optimising over Renyi orders alpha > 1."""

    def eps_at(alpha: float) -> float:
        # CKS 2020, Prop. 12: eps = rdp(alpha) + (log(1/delta) + (alpha-1) log(1-1/alpha)
        #                              - log(alpha)) / (alpha - 1)
        return (
            alpha * rho
            + (math.log(1 / delta) + (alpha - 1) * math.log1p(-1 / alpha) - math.log(alpha))
            / (alpha - 1)
        )

    # The optimum sits near 1 + sqrt(log(1/delta) / rho); search a bracket around it in log space.
    guess = 1 + math.sqrt(math.log(1 / delta) / max(rho, 1e-300))
    res = minimize_scalar(
        lambda t: eps_at(1 + math.exp(t)),
        bounds=(math.log(1e-6), math.log(max(guess * 100, 10.0))),
        method="bounded",
        options={"xatol": 1e-10},
    )
    simple = rho + 2 * math.sqrt(rho * math.log(1 / delta))  # Bun & Steinke 2016, Prop. 1.3
    return float(min(res.fun, simple))


def zcdp_to_approx_dp(rho: float, delta: float) -> float:
    """The epsilon such that rho-zCDP implies (epsilon, delta)-DP (tight RDP conversion)."""
    if rho < 0:
        raise ValueError(f"rho must be >= 0, got {rho}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1) to convert zCDP, got {delta}")
    if rho == 0:
        return 0.0
    return _rdp_to_dp_epsilon(rho, delta)


def compose(entries, rho: float = 0.0, zcdp_delta: float = 0.0) -> Budget:
    """Basic composition of ``(epsilon, delta, rho)`` entries, the zCDP part (the sum of rho)
    converted once at ``zcdp_delta`` with the tight RDP bound. The ledger
    (:meth:`PrivacyReport.total`) and the plan (:meth:`~privclust.privacy.PrivacyPlan.total`)
    both compose with this function, so a plan and its ledger cannot disagree on arithmetic."""
    eps = delta = 0.0
    for e, d, r in entries:
        eps += e
        delta += d
        rho += r
    if rho > 0:
        if zcdp_delta <= 0:
            raise ValueError("zCDP releases need the report's zcdp_delta to convert")
        eps += zcdp_to_approx_dp(rho, zcdp_delta)
        delta += zcdp_delta
    return Budget(eps, min(delta, float(np.nextafter(1.0, 0.0))))


@dataclass
class PrivacyReport:
    """The ledger of one fit: every release, the plan and how the total composes."""

    estimator: str
    planned: Budget
    random_source: str = ""
    zcdp_delta: float = 0.0
    releases: list[Release] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: ``(line item, epsilon left, why)`` for planned budget a fit did not spend
    unspent: list[tuple[str, float, str]] = field(default_factory=list)
    #: the fit's plan: one dict per line item (name, kind, mechanism, epsilon, delta)
    plan: list[dict] = field(default_factory=list)
    #: with ``delta=None``: the delta reserved before the data was read (the rule's cap)
    delta_reserved: float = 0.0

    def add(self, release: Release) -> Release:
        """Record one release; returns it."""
        self.releases.append(release)
        return release

    @property
    def private(self) -> bool:
        """False when any step was published without noise (a faithful, non-private variant)."""
        return all(r.private for r in self.releases)

    def total(self) -> Budget:
        """Sequential composition of the entries (each entry is parallel over disjoint subsets)."""
        return compose(((r.epsilon, r.delta, r.rho) for r in self.releases), 0.0,
                       self.zcdp_delta)

    def guarantee(self) -> Budget:
        """The guarantee that holds on every pair of neighbouring data sets.

        With the delta rule (``delta=None``) that is the reserved cap, not the delta the rule
        then chose from a released count: that choice is a per-data-set figure, and what makes
        the rule sound (a privacy filter over the adaptively chosen delta, Rogers et al. 2016)
        proves the cap. Otherwise it is the composed spend."""
        total = self.total()
        if self.delta_reserved:
            return Budget(total.epsilon, max(total.delta, self.delta_reserved))
        return total

    def within_plan(self) -> bool:
        """Whether the releases compose to at most the planned budget."""
        return self.total().fits_in(self.planned)

    def by_mechanism(self) -> dict[str, Budget]:
        """The composed spend of each mechanism."""
        out: dict[str, list[float]] = {}
        for r in self.releases:
            acc = out.setdefault(r.mechanism, [0.0, 0.0])
            acc[0] += r.epsilon
            acc[1] += r.delta
        return {k: Budget(v[0], v[1]) for k, v in out.items()}

    def to_dict(self) -> dict:
        """Plain JSON types."""
        total, held = self.total(), self.guarantee()
        return {
            "estimator": self.estimator,
            "privacy_unit": "add/remove one record",
            "planned": {"epsilon": self.planned.epsilon, "delta": self.planned.delta},
            "spent": {"epsilon": total.epsilon, "delta": total.delta},
            "guarantee": {"epsilon": held.epsilon, "delta": held.delta},
            "private": self.private,
            "random_source": self.random_source,
            "zcdp_delta": self.zcdp_delta,
            "notes": list(self.notes),
            "unspent": [{"item": n, "epsilon": e, "reason": w} for n, e, w in self.unspent],
            "plan": [dict(i) for i in self.plan],
            "delta_reserved": self.delta_reserved,
            "releases": [r.to_dict() for r in self.releases],
        }

    def summary(self) -> list[str]:
        """The guarantee, the plan and the spend in plain words (the head of ``str(report)``)."""
        total = self.total()
        plan = self.planned
        lines = []
        if not self.private:
            lines.append("  NOT PRIVATE: some steps publish exact data (marked below); the "
                         "epsilon and delta cover only the noisy releases")
        else:
            held = self.guarantee()
            lines.append(
                f"  guarantee: ({_fmt_eps(held.epsilon)}, {_fmt_delta(held.delta)})-"
                "differential privacy: adding or removing any one record changes the "
                f"probability of any output by at most a factor e^{_fmt_eps(held.epsilon)}"
                + (f", except with probability {held.delta:.3g}" if held.delta else "")
            )
        if self.delta_reserved:
            delta_text = (f"delta at most {self.delta_reserved:.3g} (the cap: the guarantee's "
                          "delta)")
        else:
            delta_text = f"delta={plan.delta:.3g}"
        lines.append(
            f"  planned before the data was read: epsilon={_fmt_eps(plan.epsilon)}, {delta_text}"
        )
        left = plan.epsilon - total.epsilon
        if abs(left) <= 1e-9 * max(1.0, plan.epsilon):
            how = "all of the plan"
        elif left > 0:
            how = f"{left:.4g} of epsilon left unspent (see 'unspent' below)"
        else:
            how = "MORE than planned"
        rule = (f"; delta {total.delta:.3g} is what the delta rule chose from a released count, "
                "a figure for this data set only" if self.delta_reserved else "")
        lines.append(
            f"  spent: epsilon={_fmt_eps(total.epsilon)}, delta={total.delta:.3g} ({how}){rule}"
        )
        return lines

    def __str__(self) -> str:
        lines = [
            f"Privacy report for {self.estimator} (privacy unit: adding or removing one record)",
            *self.summary(),
            f"  randomness: {self.random_source}",
            f"  {'mechanism':<24}{'released':<44}{'epsilon':>10}{'delta':>11}{'n':>7}",
        ]
        for r in self.releases:
            flag = "" if r.private else "  [NOT PRIVATE]"
            cost = f"{r.epsilon:>10.4g}" if not r.rho else f"{'rho ' + format(r.rho, '.3g'):>10}"
            # long names wrap within their columns (never cut, never run together)
            mech = textwrap.wrap(r.mechanism, 23) or [""]
            target = textwrap.wrap(r.target, 43) or [""]
            lines.append(
                f"  {mech[0]:<24}{target[0]:<44}{cost}{r.delta:>11.3g}"
                f"{r.n_released:>7}{flag}"
            )
            for i in range(1, max(len(mech), len(target))):
                more_mech = mech[i] if i < len(mech) else ""
                more_target = target[i] if i < len(target) else ""
                lines.append(f"  {more_mech:<24}{more_target}".rstrip())
        if any(r.rho for r in self.releases):
            lines.append(f"  zCDP releases (rho) are converted together at delta="
                         f"{self.zcdp_delta:.3g}")
        lines += [f"  unspent: {n}: epsilon {e:.4g} ({w})" for n, e, w in self.unspent]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _fmt_eps(eps: float) -> str:
    return f"{eps:.6g}"


def _fmt_delta(delta: float) -> str:
    return f"{delta:.3g}"


class Remaining(NamedTuple):
    """What an :class:`Accountant` has left: ``(epsilon, delta)``, also by name (a tuple, so
    ``eps, delta = acc.remaining`` works). Unlimited: ``(inf, 1.0)``."""

    epsilon: float
    delta: float

    def __repr__(self) -> str:
        return f"Remaining(epsilon={self.epsilon:.6g}, delta={self.delta:.3g})"


class Accountant:
    """A privacy budget shared by one or more fits.

    ``Accountant(Budget(2.0, 1e-6))`` lets several fits draw from one total; an estimator given
    ``accountant=acc`` checks its whole plan against ``acc.remaining`` before it reads data and
    raises :class:`BudgetExceededError` if it does not fit. ``Accountant()`` is unlimited (a
    private accountant is created for every fit that is not given one).

    An accountant is shared **by reference**: ``copy.copy``, ``copy.deepcopy`` and so
    scikit-learn's ``clone`` (which ``GridSearchCV``, ``cross_val_score`` and ``Pipeline`` use)
    return the same accountant, so every clone of an estimator spends from it and model
    selection is recorded, never free. A copy made by pickling (another process, e.g.
    ``n_jobs=2``) cannot report back what it spends, so it refuses every fit.
    """

    def __init__(self, budget: Budget | None = None):
        if budget is not None and not isinstance(budget, Budget):
            raise TypeError("Accountant(budget) takes a privclust.Budget or None (unlimited)")
        self.budget = budget
        self.reservations: list[tuple[str, Budget]] = []
        self.reports: list[PrivacyReport] = []
        self._lock = threading.Lock()  # fits in threads (n_jobs with a threading backend)
        self._detached = False

    # shared by reference: a clone of an estimator spends from the same budget
    def __copy__(self) -> Accountant:
        return self

    def __deepcopy__(self, memo) -> Accountant:
        return self

    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k != "_lock"}
        state["_detached"] = True  # what a copy in another process spends never comes back
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        budget = "unlimited" if self.budget is None else repr(self.budget)
        return (f"Accountant(budget={budget}, spent={self.spent!r}, "
                f"remaining={self.remaining!r}, fits={len(self.reports)})")

    @property
    def spent(self) -> Budget:
        """What the reservations add up to (``Budget(0, 0)`` before any fit)."""
        total = Budget(0.0, 0.0)
        for _, b in self.reservations:
            total = total + b
        return total

    @property
    def remaining(self) -> Remaining:
        """``(epsilon, delta)`` left after every reservation (``(inf, 1.0)``: unlimited)."""
        if self.budget is None:
            return Remaining(math.inf, 1.0)
        spent = self.spent
        return Remaining(self.budget.epsilon - spent.epsilon, self.budget.delta - spent.delta)

    def check(self, plan: Budget, label: str = "fit") -> None:
        """Raise :class:`BudgetExceededError` if ``plan`` does not fit what remains."""
        if self._detached:
            raise BudgetExceededError(
                f"{label} was given a copy of an Accountant made by pickling (another process, "
                "e.g. n_jobs > 1), which cannot record what it spends; run it in this process "
                "(n_jobs=None or 1). No data was read."
            )
        eps_left, delta_left = self.remaining
        if plan.epsilon > eps_left * (1 + _TOL) + 1e-12 or plan.delta > delta_left * (
            1 + _TOL
        ) + 1e-300:
            raise BudgetExceededError(
                f"{label} plans epsilon={plan.epsilon:.6g}, delta={plan.delta:.3g} but the "
                f"accountant has epsilon={eps_left:.6g}, delta={delta_left:.3g} left; lower the "
                "fit's epsilon/delta or use a fresh Accountant. No data was read."
            )

    def reserve(self, plan: Budget, label: str = "fit") -> int:
        """Check and book ``plan``; returns a handle for :meth:`settle`."""
        with self._lock:
            self.check(plan, label)
            self.reservations.append((label, plan))
            return len(self.reservations) - 1

    def settle(self, handle: int, actual: Budget) -> None:
        """Lower a reservation; never raises it. privclust settles a booking to zero only when
        a composite fit stopped before any noisy value was drawn (a user mistake caught
        early: nothing was released). A refusal that follows a noisy value is a release and is
        never settled down; nor is the delta rule's cap lowered to the delta the rule chose
        (the guarantee, and so the cost, is the reserved cap)."""
        with self._lock:
            label, booked = self.reservations[handle]
            if not actual.fits_in(booked):
                raise BudgetExceededError(f"{label}: cannot settle {actual} above the reserved "
                                          f"{booked}")
            self.reservations[handle] = (label, actual)

    def attach(self, report: PrivacyReport) -> None:
        """Keep a fit's report with the accountant (its spend is already reserved)."""
        with self._lock:
            self.reports.append(report)
