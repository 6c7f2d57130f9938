"""A fit's privacy plan: named line items fixed from the parameters before any data is read.

Every privclust fit works from one :class:`PrivacyPlan`:

1. the estimator turns its parameters into named **line items** (what is released, its
   mechanism family, pure / approximate / zCDP, its share of the budget);
2. the plan's total is composed by the same code as the ledger (:func:`compose`) and checked
   against the :class:`~privclust.privacy.Accountant` **before any data is read**. With
   ``delta=None`` the accountant reserves the most the delta rule can pick (:data:`DELTA_CAP`)
   and keeps it: the cap is the guarantee, so the cap is what a shared budget is charged;
3. :class:`~privclust.privacy.Mechanisms` draws only from a named line item and refuses to spend
   past it (:class:`PlanExceededError`);
4. budget a fit cannot use (levels a tree never reached) is moved to a later line item with
   :meth:`PrivacyPlan.move_unspent` or stated as unspent with :meth:`PrivacyPlan.leave_unspent`;
5. the fit ends with :meth:`PrivacyPlan.check_ledger`: the ledger's total equals the plan's.

Composite fits (Morse merging over a base) split one plan between their parts with
:meth:`PrivacyPlan.part`: each part holds a share of epsilon and of delta, and the delta rule is
resolved once for the whole pipeline.

Moving budget after a private output (step 4) and choosing delta from a released count (the
delta rule) are *adaptive* choices of privacy parameters. They are sound because every path a
fit can take spends at most the plan's fixed total: this is the basic-composition privacy filter
(Rogers, Roth, Ullman, Vadhan 2016, "Privacy odometers and filters"), for which a sequence of
mechanisms whose parameters are chosen from earlier outputs is ``(E, D)``-DP whenever the
parameters add up to at most ``(E, D)`` on every path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from .budget import Budget, compose, zcdp_to_approx_dp

__all__ = [
    "DELTA_CAP",
    "NOISY_N_SHARE",
    "LineItem",
    "PlanExceededError",
    "PrivacyPlan",
    "ZcdpBlockTakenError",
    "rule_delta",
    "zcdp_rho_for",
]

#: The delta rule (``delta=None``) never picks a delta above this: ``1 / n_hat^1.5`` for
#: n_hat >= 2155 records, this cap below that. 1e-5 is far below 1/n for any data set small enough
#: to reach the cap, so the guarantee still protects every record.
DELTA_CAP = 1e-5

#: Share of epsilon an estimator spends on a noisy record count when it needs one and has none
#: of its own (the delta rule, DPLloyd's iteration rule, DPDBSCAN's sparse threshold).
NOISY_N_SHARE = 0.02

# Relative tolerance when comparing composed budgets (floating-point sums of shares).
_TOL = 1e-9

_KINDS = ("pure", "approx", "zcdp")


class PlanExceededError(RuntimeError):
    """A release asked for more than its line item holds (a bug in an estimator, never a user
    mistake: the plan is fixed before data is read)."""


class ZcdpBlockTakenError(ValueError):
    """A second zCDP line item for a plan that has one: raised while the plan is built, before
    any data is read (a composite whose two parts each keep a zCDP block)."""


def rule_delta(n_hat: float, cap: float = DELTA_CAP) -> float:
    """The delta rule: ``min(cap, 1 / n_hat^1.5)`` from a *released* record count.

    ``1 / (n sqrt(n))`` is the papers' default; the cap keeps small or noisy counts from giving a
    delta that protects nobody (a noisy count of 2 would give 0.35)."""
    n_ref = float(n_hat) if math.isfinite(float(n_hat)) else 1.0
    return float(min(cap, max(n_ref, 1.0) ** -1.5))


@lru_cache(maxsize=1024)
def zcdp_rho_for(epsilon: float, delta: float) -> float:
    """The largest rho whose conversion to ``(eps, delta)``-DP (the ledger's own,
    :func:`~privclust.privacy.zcdp_to_approx_dp`) gives at most ``epsilon``.

    Calibrating with this rho makes the ledger land on the planned epsilon (to 1e-9), rather
    than below it as the looser ``rho + 2 sqrt(rho log(1/delta))`` bound would."""
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValueError(f"zcdp_rho_for needs epsilon > 0 and delta in (0, 1); got "
                         f"{epsilon}, {delta}")
    L = math.log(1.0 / delta)
    low = (math.sqrt(L + epsilon) - math.sqrt(L)) ** 2  # Bun-Steinke: converts to <= epsilon

    def excess(r: float) -> float:
        return zcdp_to_approx_dp(r, delta) - epsilon

    high = max(epsilon, 4 * low)
    for _ in range(200):
        if excess(high) >= 0:
            break
        high *= 2
    if excess(low) > 0:  # cannot happen (the ledger's conversion is at most Bun-Steinke's)
        return float(low)
    # bisection on the ledger's own conversion: the result never converts above epsilon
    for _ in range(200):
        mid = 0.5 * (low + high)
        if excess(mid) > 0:
            high = mid
        else:
            low = mid
        if high - low <= 1e-13 * high:
            break
    return float(low)


@dataclass
class LineItem:
    """One named line of a plan: what is released, how, and what it may spend.

    ``epsilon`` is the item's planned epsilon; for a zCDP item it is what the item's rho is worth
    once converted at the item's delta. ``delta_share`` is the item's share of the plan's delta
    (approximate-DP and zCDP items). ``spent_*`` accumulate as releases are drawn.
    """

    name: str
    mechanism: str
    kind: str
    epsilon: float
    delta_share: float = 0.0
    spent_epsilon: float = 0.0
    spent_delta: float = 0.0
    spent_rho: float = 0.0
    unspent_reason: str = ""
    plan: PrivacyPlan | None = None

    @property
    def delta(self) -> float:
        """This item's delta (needs the plan's delta: known, or resolved by the delta rule)."""
        if self.delta_share == 0:
            return 0.0
        return self.plan.require_delta() * self.delta_share

    @property
    def rho(self) -> float:
        """A zCDP item's total rho: the exact inverse of the ledger's conversion."""
        if self.kind != "zcdp" or self.epsilon == 0:
            return 0.0
        return zcdp_rho_for(self.epsilon, self.delta)

    def left(self) -> float:
        """Epsilon not yet spent (for a zCDP item: the share of rho left, times epsilon)."""
        if self.kind == "zcdp":
            rho = self.rho
            return self.epsilon * max(0.0, 1 - self.spent_rho / rho) if rho else 0.0
        return max(0.0, self.epsilon - self.spent_epsilon)


class PrivacyPlan:
    """The budget of one fit, as named line items (see the module docstring).

    ``delta=None`` selects the delta rule (:func:`rule_delta`): the plan reserves ``delta_cap``
    before data is read and the first released record count fixes delta for the whole plan
    (:meth:`resolve_delta`). Pure-DP estimators pass ``delta=0``.
    """

    def __init__(self, estimator: str, epsilon: float, delta: float | None,
                 delta_cap: float = DELTA_CAP):
        Budget(epsilon, 0.0 if delta is None else delta)  # validates
        self.estimator = estimator
        self.epsilon = float(epsilon)
        self.delta_rule = delta is None
        self.delta = None if delta is None else float(delta)
        self.delta_cap = float(delta_cap)
        self.delta_note = ""
        self.items: dict[str, LineItem] = {}
        self.notes: list[str] = []

    # ------------------------------------------------------------------ building
    def add(self, name: str, mechanism: str, kind: str, epsilon: float,
            delta_share: float = 0.0) -> LineItem:
        """Add a line item. ``epsilon`` is absolute (callers multiply shares themselves)."""
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
        if name in self.items:
            raise ValueError(f"the plan already has a line item {name!r}")
        if not (epsilon >= 0 and math.isfinite(epsilon)) or not 0 <= delta_share <= 1:
            raise ValueError(f"line item {name!r}: epsilon {epsilon}, delta share {delta_share}")
        if kind == "pure" and delta_share:
            raise ValueError(f"pure line item {name!r} cannot carry delta")
        if kind == "zcdp" and any(i.kind == "zcdp" for i in self.items.values()):
            # one zCDP block per plan: the ledger converts the sum of rho once, at one delta
            raise ZcdpBlockTakenError("a plan holds at most one zCDP line item")
        item = LineItem(name, mechanism, kind, float(epsilon), float(delta_share), plan=self)
        self.items[name] = item
        return item

    def part(self, prefix: str, share: float, delta_share: float | None = None) -> PlanPart:
        """A share of this plan for one part of a composite fit (``delta_share`` defaults to
        the epsilon share)."""
        return PlanPart(self, prefix, share, delta_share)

    # ------------------------------------------------------------------ delta
    def reserved(self) -> Budget:
        """What the accountant must hold before any data is read (the rule's cap for None)."""
        return Budget(self.epsilon, self.delta_cap if self.delta is None else self.delta)

    def require_delta(self) -> float:
        """The plan's delta; raises before the delta rule has chosen it."""
        if self.delta is None:
            raise PlanExceededError(
                f"{self.estimator}: a release needs delta before the delta rule has a released "
                "record count to choose it from"
            )
        return self.delta

    def resolve_delta(self, n_hat: float, source: str) -> float:
        """Fix delta by the delta rule from a released count (once; later calls return it)."""
        if self.delta is not None:
            return self.delta
        self.delta = rule_delta(n_hat, self.delta_cap)
        raw = max(float(n_hat), 1.0) ** -1.5
        capped = " (the cap: this few records would give " + f"{raw:.3g})" if raw > self.delta \
            else ""
        self.delta_note = (
            f"delta=None: delta = min({self.delta_cap:g}, 1/n_hat^1.5) = {self.delta:.3g}"
            f"{capped}, n_hat = {float(n_hat):g} from {source}; {self.delta_cap:g} was "
            "reserved before the data was read"
        )
        return self.delta

    def book(self, accountant, label: str) -> None:
        """Check and book the whole plan with ``accountant`` (before any data is read). With
        the delta rule the booking is the cap and stays the cap: the privacy filter that makes
        the rule sound (Rogers et al. 2016) proves the reserved cap, not the delta chosen from
        a released count, so the cap is what the fit costs a shared budget. Used by every
        fit; composite fits (Morse merging, pipelines, model selection) book once for all
        their parts, which book nothing themselves."""
        handle = accountant.reserve(self.reserved(), label)
        self.reservation = (accountant, handle)

    def refund_if_unspent(self) -> None:
        """Give the accountant back the booking when the fit stopped before any release (a
        part refused its input): nothing was published, so nothing was spent.

        Only then: a refusal that follows a noisy value is a release (whether a fit goes on
        depends on that value), so the budget behind it stays spent. Every release of a
        composite is charged to the plan when it is drawn (:class:`Mechanisms` bound to the
        plan or a part of it), so "no line item has spent anything" means "no noisy value was
        drawn"."""
        booked = getattr(self, "reservation", None)
        if booked is None or any(i.spent_epsilon or i.spent_delta or i.spent_rho
                                 for i in self.items.values()):
            return
        accountant, handle = booked
        accountant.settle(handle, Budget(0.0, 0.0))

    # ------------------------------------------------------------------ spending
    def has_item(self, name: str) -> bool:
        """Whether the plan has a line item of this name."""
        return name in self.items

    def item(self, name: str) -> LineItem:
        """The line item of this name."""
        try:
            return self.items[name]
        except KeyError:
            raise PlanExceededError(
                f"{self.estimator}: no line item {name!r} in the plan (items: "
                f"{', '.join(self.items)})"
            ) from None

    def charge(self, name: str, epsilon: float = 0.0, delta: float = 0.0,
               rho: float = 0.0) -> LineItem:
        """Spend from a line item; :class:`PlanExceededError` past what it holds."""
        item = self.item(name)
        if item.unspent_reason:
            raise PlanExceededError(f"line item {name!r} was closed: {item.unspent_reason}")
        if item.kind == "zcdp":
            if epsilon or delta:
                raise PlanExceededError(f"zCDP line item {name!r} is spent in rho")
            if item.spent_rho + rho > item.rho * (1 + _TOL):
                raise PlanExceededError(
                    f"{name!r}: rho {item.spent_rho + rho:.6g} exceeds the planned {item.rho:.6g}"
                )
        else:
            if rho:
                raise PlanExceededError(f"line item {name!r} is not zCDP")
            if item.spent_epsilon + epsilon > item.epsilon * (1 + _TOL) + 1e-15:
                raise PlanExceededError(
                    f"{name!r}: epsilon {item.spent_epsilon + epsilon:.6g} exceeds the planned "
                    f"{item.epsilon:.6g}"
                )
            if delta and item.spent_delta + delta > item.delta * (1 + _TOL) + 1e-300:
                raise PlanExceededError(
                    f"{name!r}: delta {item.spent_delta + delta:.3g} exceeds the planned "
                    f"{item.delta:.3g}"
                )
        item.spent_epsilon += epsilon
        item.spent_delta += delta
        item.spent_rho += rho
        return item

    def move_unspent(self, names, to: str, reason: str) -> float:
        """Move what the items ``names`` did not spend (epsilon and delta) to item ``to``, which
        must not have spent anything yet. Returns the epsilon moved."""
        return self.spread_unspent(names, [to], reason)

    def spread_unspent(self, names, to, reason: str) -> float:
        """Move what the items ``names`` did not spend (epsilon and delta) to the items ``to``,
        in equal parts; none of them may have spent anything yet. Returns the epsilon moved.
        A budget re-split on released values keeps the plan's total: a privacy filter."""
        targets = [self.item(t) for t in to]
        for name, target in zip(to, targets, strict=True):
            if target.spent_epsilon or target.spent_rho:
                raise PlanExceededError(f"cannot move budget to {name!r}: it has already spent")
            if target.kind == "zcdp":
                raise PlanExceededError("budget is moved to pure or approximate items only")
        where = ", ".join(repr(t) for t in to)
        moved_eps = moved_share = 0.0
        for name in names:
            item = self.item(name)
            if item.kind == "zcdp" or item.spent_epsilon or item.spent_delta:
                continue  # only whole, untouched items move
            moved_eps += item.epsilon
            moved_share += item.delta_share
            item.epsilon, item.delta_share = 0.0, 0.0
            item.unspent_reason = f"moved to {where}: {reason}"
        if moved_share and any(t.kind == "pure" for t in targets):
            raise PlanExceededError(f"cannot move delta to the pure item(s) {where}")
        for target in targets:
            target.epsilon += moved_eps / len(targets)
            target.delta_share += moved_share / len(targets)
        if moved_eps:
            self.notes.append(f"epsilon {moved_eps:.4g} moved to {where}: {reason}")
        return moved_eps

    def resplit(self, names, epsilons, reason: str) -> None:
        """Re-split the epsilon of the items ``names`` (pure, none spent yet) as ``epsilons``,
        whose sum must equal theirs: a budget re-split on released values keeps the plan's
        total (a privacy filter)."""
        items = [self.item(n) for n in names]
        if any(i.kind != "pure" or i.spent_epsilon or i.spent_delta for i in items):
            raise PlanExceededError("only pure items that have not spent are re-split")
        before, after = math.fsum(i.epsilon for i in items), math.fsum(epsilons)
        if len(epsilons) != len(items) or abs(after - before) > 1e-12 * max(before, 1.0):
            raise PlanExceededError(f"a re-split must keep the items' total {before:.6g}")
        for item, eps in zip(items, epsilons, strict=True):
            item.epsilon = float(eps)
        self.notes.append(f"epsilon {before:.4g} of {len(items)} items re-split: {reason}")

    def leave_unspent(self, name: str, reason: str) -> None:
        """State that an item will not be spent, and why (the report lists it)."""
        item = self.item(name)
        item.unspent_reason = reason

    # ------------------------------------------------------------------ totals
    def _own(self) -> list[LineItem]:
        return list(self.items.values())

    def total(self) -> Budget:
        """The planned total, composed by the ledger's own rules (:func:`compose`)."""
        return _total(self._own())

    def planned(self) -> Budget:
        """The budget the plan stands for, as the user stated it (the items' composed
        :meth:`total` equals it up to floating-point rounding; :meth:`validate` checks that)."""
        return _planned(self._own(), self.epsilon, self.delta)

    def zcdp_delta(self) -> float:
        """The delta the ledger converts this plan's zCDP releases at."""
        return _zcdp_delta(self._own())

    def validate(self) -> None:
        """The items add up to the plan's budget, delta shares to 1 when delta can be > 0."""
        _validate(self.estimator, self._own(), self.epsilon, 1.0,
                  self.delta is None or self.delta > 0)

    def unspent(self) -> list[tuple[str, float, str]]:
        """``(item, epsilon left, why)`` for every item that did not spend all it held."""
        return _unspent(self._own(), self.epsilon)

    def check_ledger(self, report) -> None:
        """The end of every fit: the ledger's total equals the plan's, less what the report
        states as unspent. Raises :class:`PlanExceededError` otherwise (an estimator bug)."""
        _check_ledger(self.estimator, self._own(), self.epsilon, report)

    def describe(self) -> list[dict]:
        """The line items as plain dicts (what the privacy report keeps of the plan)."""
        return _describe(self._own())

    def write_into(self, report) -> None:
        """What a closed plan tells its report: the line items, anything left unspent, and
        with the delta rule the cap that was reserved and the note on the value chosen."""
        report.unspent = self.unspent()
        report.plan = self.describe()
        if self.delta_rule and report.planned.delta:
            report.delta_reserved = self.delta_cap
        if self.delta_note and not any(self.delta_note in n for n in report.notes):
            report.notes.insert(0, self.delta_note)

    def summary(self) -> str:
        """The plan as text: one line per item."""
        out = [f"Privacy plan for {self.estimator}: epsilon={self.epsilon:g}, delta="
               + (f"{self.delta:.3g}" if self.delta is not None
                  else f"chosen from a released count, at most {self.delta_cap:g}")]
        for i in self._own():
            delta = ""
            if i.delta_share:
                delta = (f", delta {i.delta:.3g}" if self.delta is not None
                         else f", {i.delta_share:.3g} of delta")
            out.append(f"  {i.name:<48} {i.kind:<7} {i.mechanism:<22} epsilon {i.epsilon:.4g}"
                       f"{delta}")
        return "\n".join(out)


def _describe(items) -> list[dict]:
    out = []
    for i in items:
        known = i.plan.delta is not None or not i.delta_share
        out.append({"item": i.name, "kind": i.kind, "mechanism": i.mechanism,
                    "epsilon": i.epsilon, "delta": i.delta if known else None,
                    "rho": i.rho if i.kind == "zcdp" and known else 0.0})
    return out


def _planned(items, epsilon, delta) -> Budget:
    uses_delta = any(i.delta_share for i in items)
    return Budget(epsilon, (delta or 0.0) if uses_delta else 0.0)


def _total(items) -> Budget:
    return compose(
        [(i.epsilon, i.delta, 0.0) for i in items if i.kind != "zcdp"],
        sum(i.rho for i in items if i.kind == "zcdp"),
        _zcdp_delta(items),
    )


def _zcdp_delta(items) -> float:
    z = [i for i in items if i.kind == "zcdp" and i.epsilon > 0]
    return z[0].delta if z else 0.0


def _validate(name, items, epsilon, delta_total_share, wants_delta) -> None:
    eps_sum = sum(i.epsilon for i in items)
    if abs(eps_sum - epsilon) > _TOL * max(1.0, epsilon):
        raise PlanExceededError(
            f"{name}: line items plan epsilon {eps_sum:.12g}, the budget is {epsilon:.12g}"
        )
    share = sum(i.delta_share for i in items)
    if wants_delta and share and abs(share - delta_total_share) > _TOL:
        raise PlanExceededError(f"{name}: delta shares add up to {share}, not "
                                f"{delta_total_share}")


def _unspent(items, epsilon) -> list[tuple[str, float, str]]:
    out = []
    for i in items:
        if i.epsilon == 0 and i.unspent_reason.startswith("moved"):
            continue
        left = i.left()
        if left > _TOL * max(1.0, epsilon) or i.unspent_reason:
            out.append((i.name, left, i.unspent_reason or "not used by this fit"))
    return out


def _check_ledger(name, items, epsilon, report) -> None:
    spent = report.total()
    planned = _total(items)
    unspent_eps = sum(left for _, left, _ in _unspent(items, epsilon))
    if spent.epsilon > planned.epsilon * (1 + _TOL) + 1e-12 or spent.delta > (
        planned.delta * (1 + _TOL) + 1e-300
    ):
        raise PlanExceededError(f"{name}: spent {spent} exceeds the plan {planned}")
    if abs(spent.epsilon + unspent_eps - planned.epsilon) > 1e-7 * max(1, planned.epsilon):
        raise PlanExceededError(
            f"{name}: spent epsilon {spent.epsilon:.12g} + unspent {unspent_eps:.6g} != "
            f"planned {planned.epsilon:.12g}"
        )


class PlanPart:
    """A share of a :class:`PrivacyPlan` for one part of a composite fit (Morse merging's base
    and its covariance pass): items are added to the parent under ``prefix``, with epsilon and
    delta shares scaled by ``share``; the delta rule is the parent's."""

    def __init__(self, parent: PrivacyPlan, prefix: str, share: float,
                 delta_share: float | None = None):
        delta_share = share if delta_share is None else delta_share
        if not 0 < share <= 1 or not 0 <= delta_share <= 1:
            raise ValueError(f"a plan part's shares must be in (0, 1], got {share}, "
                             f"{delta_share}")
        self.parent = parent
        self.prefix = prefix
        self.share = float(share)
        self.delta_share = float(delta_share)
        self.estimator = prefix

    @property
    def epsilon(self) -> float:
        return self.parent.epsilon * self.share

    @property
    def delta(self) -> float | None:
        d = self.parent.delta
        return None if d is None else d * self.delta_share

    @property
    def delta_cap(self) -> float:
        return self.parent.delta_cap * self.delta_share

    def reserved(self) -> Budget:
        d = self.delta
        return Budget(self.epsilon, self.delta_cap if d is None else d)

    def _own(self) -> list[LineItem]:
        head = self.prefix + ": "
        return [i for n, i in self.parent.items.items() if n.startswith(head)]

    def total(self) -> Budget:
        return _total(self._own())

    def planned(self) -> Budget:
        return _planned(self._own(), self.epsilon, self.delta)

    def describe(self) -> list[dict]:
        return _describe(self._own())

    def write_into(self, report) -> None:
        PrivacyPlan.write_into(self, report)

    def validate(self) -> None:
        _validate(self.prefix, self._own(), self.epsilon, self.delta_share,
                  self.delta_share > 0 and (self.delta is None or self.delta > 0))

    def unspent(self):
        return _unspent(self._own(), self.epsilon)

    def check_ledger(self, report) -> None:
        _check_ledger(self.prefix, self._own(), self.epsilon, report)

    @property
    def delta_rule(self) -> bool:
        return self.parent.delta_rule

    def _name(self, name: str) -> str:
        return f"{self.prefix}: {name}"

    def add(self, name, mechanism, kind, epsilon, delta_share=0.0) -> LineItem:
        return self.parent.add(self._name(name), mechanism, kind, epsilon,
                               delta_share * self.delta_share)

    def has_item(self, name: str) -> bool:
        return self._name(name) in self.parent.items

    def item(self, name):
        return self.parent.item(self._name(name))

    def charge(self, name, epsilon=0.0, delta=0.0, rho=0.0):
        return self.parent.charge(self._name(name), epsilon, delta, rho)

    def require_delta(self) -> float:
        return self.parent.require_delta() * self.delta_share

    def resolve_delta(self, n_hat, source):
        self.parent.resolve_delta(n_hat, source)
        return self.delta

    def move_unspent(self, names, to, reason):
        return self.parent.move_unspent([self._name(n) for n in names], self._name(to), reason)

    def spread_unspent(self, names, to, reason):
        return self.parent.spread_unspent([self._name(n) for n in names],
                                          [self._name(t) for t in to], reason)

    def leave_unspent(self, name, reason):
        self.parent.leave_unspent(self._name(name), reason)

    @property
    def notes(self) -> list[str]:
        """The parent's notes about this part's own items (budget moved between them); a
        part's report does not repeat what other parts noted."""
        own = f"'{self.prefix}: "
        return [n for n in self.parent.notes if own in n]

    @property
    def delta_note(self):
        return self.parent.delta_note

    def zcdp_delta(self) -> float:
        return self.parent.zcdp_delta()
