"""A small black-box privacy auditor for single mechanisms.

Run a mechanism many times on two neighbouring data sets ``D0`` and ``D1``, count how often each
event of a fixed family happens, and turn the counts into a **lower confidence bound** on the
privacy loss::

    epsilon_lower = max over events E and both directions of  ln((p0_lo(E) - delta) / p1_hi(E))

with one-sided Clopper-Pearson bounds ``p_lo``/``p_hi`` at a Bonferroni-corrected level (four
bounds per event: lower and upper for each of ``D0`` and ``D1``). If the mechanism is
``(epsilon, delta)``-DP then ``P0(E) <= e^epsilon P1(E) + delta`` for every event, so
``epsilon_lower > epsilon`` happens with probability at most ``1 - confidence``:
:func:`assert_private` fails exactly then. Seeds are fixed, so a test's verdict is reproducible.

A sampler is a callable ``sampler(rng, n_trials) -> outputs`` that runs the mechanism
``n_trials`` times (vectorised where the mechanism allows it) and returns one output per trial
(``outputs.shape[0] == n_trials``). An :class:`EventFamily` maps a batch of outputs to one count
per event (how many outputs fall in the event).

The bound is only as strong as the event family: an audit that passes shows that *these* events
do not reveal more than the claim, not that the mechanism is private. Tests therefore also run
each audit against a deliberately broken variant (half the noise) and assert that it *fails*.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta as _beta

__all__ = [
    "AuditResult",
    "EventFamily",
    "assert_private",
    "audit",
    "audit_held_out",
    "bin_events",
    "categorical_events",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "combine",
    "interval_events",
    "threshold_events",
]

Sampler = Callable[[np.random.Generator, int], np.ndarray]


# --------------------------------------------------------------------------- event families
@dataclass(frozen=True)
class EventFamily:
    """Named events and a function counting, for a batch of outputs, how many fall in each."""

    names: tuple[str, ...]
    count: Callable[[np.ndarray], np.ndarray]

    def __len__(self) -> int:
        return len(self.names)


def _scalar_outputs(outputs) -> np.ndarray:
    x = np.asarray(outputs)
    if x.ndim != 1:
        raise ValueError(f"this event family needs one scalar output per trial, got {x.shape}")
    return np.sort(x)


def threshold_events(thresholds: Sequence[float]) -> EventFamily:
    """``x <= t`` and ``x > t`` for every threshold ``t`` (scalar outputs)."""
    t = np.asarray(thresholds, dtype=float)

    def count(outputs):
        xs = _scalar_outputs(outputs)
        below = np.searchsorted(xs, t, side="right")
        return np.concatenate([below, xs.size - below])

    names = tuple(f"x <= {v:.6g}" for v in t) + tuple(f"x > {v:.6g}" for v in t)
    return EventFamily(names, count)


def categorical_events(values: Sequence) -> EventFamily:
    """``x == v`` for every listed value (discrete outputs: counts, selected indices)."""
    v = np.asarray(values)

    def count(outputs):
        xs = _scalar_outputs(outputs)
        return np.searchsorted(xs, v, side="right") - np.searchsorted(xs, v, side="left")

    return EventFamily(tuple(f"x == {a}" for a in v.tolist()), count)


def bin_events(edges: Sequence[float]) -> EventFamily:
    """``edges[i] <= x < edges[i + 1]`` for consecutive edges (scalar outputs)."""
    e = np.asarray(edges, dtype=float)
    if e.ndim != 1 or e.size < 2 or (np.diff(e) <= 0).any():
        raise ValueError("bin_events needs at least two increasing edges")

    def count(outputs):
        xs = _scalar_outputs(outputs)
        return np.diff(np.searchsorted(xs, e, side="left"))

    names = tuple(f"{a:.6g} <= x < {b:.6g}" for a, b in zip(e[:-1], e[1:], strict=True))
    return EventFamily(names, count)


def interval_events(points: Sequence[float]) -> EventFamily:
    """``a <= x < b`` for every pair ``a < b`` of the given points (scalar outputs).

    With the points at the breakpoints of a piecewise-constant output density (e.g. the data
    values of a private quantile), every union of consecutive pieces is an event.
    """
    p = np.unique(np.asarray(points, dtype=float))
    if p.size < 2:
        raise ValueError("interval_events needs at least two distinct points")
    i, j = np.triu_indices(p.size, k=1)

    def count(outputs):
        xs = _scalar_outputs(outputs)
        at = np.searchsorted(xs, p, side="left")
        return at[j] - at[i]

    names = tuple(f"{p[a]:.6g} <= x < {p[b]:.6g}" for a, b in zip(i, j, strict=True))
    return EventFamily(names, count)


def combine(*families: EventFamily) -> EventFamily:
    """All events of several families (the Bonferroni correction counts them all)."""

    def count(outputs):
        return np.concatenate([np.asarray(f.count(outputs)) for f in families])

    return EventFamily(tuple(n for f in families for n in f.names), count)


# --------------------------------------------------------------------------- confidence bounds
def clopper_pearson_lower(k, n, alpha):
    """One-sided (1 - alpha) Clopper-Pearson lower bound on a binomial proportion."""
    k = np.asarray(k, dtype=float)
    with np.errstate(invalid="ignore"):
        lo = _beta.ppf(alpha, np.maximum(k, 1), n - k + 1)
    return np.where(k <= 0, 0.0, lo)


def clopper_pearson_upper(k, n, alpha):
    """One-sided (1 - alpha) Clopper-Pearson upper bound on a binomial proportion."""
    k = np.asarray(k, dtype=float)
    with np.errstate(invalid="ignore"):
        hi = _beta.ppf(1 - alpha, k + 1, np.maximum(n - k, 1))
    return np.where(k >= n, 1.0, hi)


# --------------------------------------------------------------------------- the audit
@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit`: the lower bound and the event that attains it."""

    epsilon_lower: float
    epsilon_point: float
    worst_event: str
    direction: str
    count_num: int
    count_den: int
    n_trials: int
    n_events: int
    delta: float
    confidence: float

    def __str__(self) -> str:
        return (
            f"epsilon >= {self.epsilon_lower:.4f} with confidence {self.confidence} "
            f"(point estimate {self.epsilon_point:.4f}; delta={self.delta:.3g}) from event "
            f"[{self.worst_event}], {self.direction}: {self.count_num} vs {self.count_den} of "
            f"{self.n_trials} trials each, {self.n_events} events"
        )


def _counts(sampler: Sampler, events: EventFamily, n_trials: int, rng, batch: int):
    total = np.zeros(len(events), dtype=np.int64)
    done = 0
    while done < n_trials:
        b = min(batch, n_trials - done)
        out = np.asarray(sampler(rng, b))
        if out.shape[0] != b:
            raise ValueError(f"sampler returned {out.shape[0]} outputs for {b} trials")
        c = np.asarray(events.count(out), dtype=np.int64)
        if c.shape != (len(events),):
            raise ValueError(f"event family returned counts of shape {c.shape}")
        total += c
        done += b
    return total


def _log_ratio(num, den, delta):
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.log(np.maximum(num - delta, 0.0)) - np.log(den)
    return np.where(num - delta > 0, r, -np.inf)


def audit(
    sample0: Sampler,
    sample1: Sampler,
    events: EventFamily,
    n_trials: int,
    *,
    delta: float = 0.0,
    seed: int = 0,
    confidence: float = 0.99,
    batch: int | None = None,
) -> AuditResult:
    """Run both samplers ``n_trials`` times (fixed seeds) and bound the privacy loss from below.

    ``delta`` is the claimed delta, subtracted from the larger probability. The returned
    ``epsilon_lower`` holds with probability ``confidence`` simultaneously over all events and
    both directions (Bonferroni over ``4 * len(events)`` one-sided Clopper-Pearson bounds).
    """
    if n_trials < 1:
        raise ValueError("n_trials must be >= 1")
    m = len(events)
    if m == 0:
        raise ValueError("the event family is empty")
    batch = int(batch or n_trials)
    rng0 = np.random.default_rng([seed, 0])
    rng1 = np.random.default_rng([seed, 1])
    k0 = _counts(sample0, events, n_trials, rng0, batch)
    k1 = _counts(sample1, events, n_trials, rng1, batch)

    a = (1.0 - confidence) / (4 * m)
    lo0, hi0 = clopper_pearson_lower(k0, n_trials, a), clopper_pearson_upper(k0, n_trials, a)
    lo1, hi1 = clopper_pearson_lower(k1, n_trials, a), clopper_pearson_upper(k1, n_trials, a)
    p0, p1 = k0 / n_trials, k1 / n_trials

    candidates = [
        (_log_ratio(lo0, hi1, delta), _log_ratio(p0, p1, delta), k0, k1, "P[D0] / P[D1]"),
        (_log_ratio(lo1, hi0, delta), _log_ratio(p1, p0, delta), k1, k0, "P[D1] / P[D0]"),
    ]
    best = None
    for lower, point, num, den, direction in candidates:
        i = int(np.argmax(lower))
        if best is None or lower[i] > best[0]:
            best = (float(lower[i]), float(point[i]), events.names[i], direction,
                    int(num[i]), int(den[i]))
    eps_lo, eps_pt, name, direction, cn, cd = best
    return AuditResult(
        epsilon_lower=eps_lo,
        epsilon_point=eps_pt,
        worst_event=name,
        direction=direction,
        count_num=cn,
        count_den=cd,
        n_trials=int(n_trials),
        n_events=m,
        delta=float(delta),
        confidence=float(confidence),
    )


def assert_private(
    eps_claim: float,
    delta_claim: float,
    sample0: Sampler,
    sample1: Sampler,
    events: EventFamily,
    n_trials: int,
    **kwargs,
) -> AuditResult:
    """Audit and fail if the lower confidence bound on epsilon exceeds ``eps_claim``."""
    res = audit(sample0, sample1, events, n_trials, delta=delta_claim, **kwargs)
    assert res.epsilon_lower <= eps_claim, (
        f"privacy audit failed: claimed ({eps_claim}, {delta_claim:.3g})-DP but {res}"
    )
    return res


def audit_held_out(
    sample0: Sampler,
    sample1: Sampler,
    events: EventFamily,
    n_select: int,
    n_trials: int,
    *,
    delta: float = 0.0,
    seed: int = 0,
    confidence: float = 0.99,
    batch: int | None = None,
) -> AuditResult:
    """Choose the event on one set of runs, bound the privacy loss on fresh ones.

    ``n_select`` runs per data set pick the event and direction with the largest lower bound
    that ``n_trials`` runs with the same frequencies would give. ``n_trials`` *new* runs per
    data set (independent seeds) then bound that one event's log-ratio, with two one-sided
    Clopper-Pearson bounds (lower on the numerator, upper on the denominator) at
    ``(1 - confidence) / 2`` each. The choice does not depend on the second set of runs, so the
    bound holds with probability ``confidence`` however many events the family has: a large
    family (every cut of a statistic) costs no Bonferroni correction, which is what gives
    whole-fit audits their power.
    """
    if n_select < 1 or n_trials < 1:
        raise ValueError("n_select and n_trials must be >= 1")
    if len(events) == 0:
        raise ValueError("the event family is empty")
    a = (1.0 - confidence) / 2
    sel = [_counts(s, events, n_select, np.random.default_rng([seed, side, 0]),
                   int(batch or n_select)) for side, s in enumerate((sample0, sample1))]
    # the bound each event would get from n_trials runs with the frequencies seen here
    scaled = [k * (n_trials / n_select) for k in sel]
    lo = [clopper_pearson_lower(k, n_trials, a) for k in scaled]
    hi = [clopper_pearson_upper(k, n_trials, a) for k in scaled]
    scores = np.stack([_log_ratio(lo[0], hi[1], delta), _log_ratio(lo[1], hi[0], delta)])
    num, i = np.unravel_index(int(np.argmax(scores)), scores.shape)
    ev = [_counts(s, events, n_trials, np.random.default_rng([seed, side, 1]),
                  int(batch or n_trials))[i] for side, s in enumerate((sample0, sample1))]
    kn, kd = int(ev[num]), int(ev[1 - num])
    lower = _log_ratio(clopper_pearson_lower(kn, n_trials, a),
                       clopper_pearson_upper(kd, n_trials, a), delta)
    point = _log_ratio(np.float64(kn / n_trials), np.float64(kd / n_trials), delta)
    return AuditResult(
        epsilon_lower=float(lower),
        epsilon_point=float(point),
        worst_event=events.names[i],
        direction="P[D0] / P[D1]" if num == 0 else "P[D1] / P[D0]",
        count_num=kn,
        count_den=kd,
        n_trials=int(n_trials),
        n_events=1,
        delta=float(delta),
        confidence=float(confidence),
    )
