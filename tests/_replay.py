"""Record/replay: a fit's control flow may depend on released values only.

The audits elsewhere check that each noise draw matches the ledger; a branch on exact data
*outside* a release (a refusal on the exact n, a loop that stops on an exact count, a centre
divided by an exact size) is invisible to them. This harness (the record/replay idea behind
dp-recorder) catches those:

1. **Record.** Fit on a data set D with a fixed seed. Every call of
   :class:`privclust.privacy.Mechanisms` (and the two histogram releases) is recorded: the
   release's public arguments (line item, target, epsilon, sensitivity, thresholds, notes), its
   exact input (the counts, sums or scores the noise is added to), the noisy output, and the
   generator's state after the call.
2. **Replay.** Refit on a neighbour D' (one record added or removed) with every noisy output
   frozen to its recorded value and the generator put back to its recorded state after each
   release. If the fit decides only from released values and public inputs, then
     * the same releases are requested in the same order with the same public arguments
       (line items, scales, sensitivities, notes);
     * each release's exact input moves by at most its declared sensitivity (in the
       mechanism's norm; on disjoint rows only one row may move);
     * the fitted model, its file and its privacy report are identical.

Any difference is a decision on exact data, an understated sensitivity, or a release that
bypasses the ledger. The negative controls in ``test_replay.py`` plant each of these and check
that the harness fails.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import sys
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import numpy as np

from privclust import io
from privclust.privacy import histogram as _hist
from privclust.privacy.mechanisms import Mechanisms


class ReplayMismatch(AssertionError):
    """The replayed fit on a neighbour did not follow the recorded one."""


@dataclass(frozen=True)
class Spec:
    """How to read one release call: its exact inputs and how far they may move."""

    data: tuple[str, ...]
    #: "l1", "l2", "linf" (scores), "each" (AboveThreshold: every query by D), "quantile",
    #: "quantiles", "sparse" (keys and counts), or "" (no data: a ledger line only)
    norm: str = ""
    #: the argument holding the declared sensitivity (None: 1, as for counts)
    sensitivity: str | None = None
    #: rows of a 1-D input: "elements" (one group each) or "one" (one vector)
    flat_rows: str = "elements"


SPECS = {
    "count": Spec(("counts",), "l1"),
    "select": Spec(("scores",), "linf", "sensitivity", flat_rows="one"),
    "first_below": Spec(("values",), "each", "sensitivity"),
    "quantile": Spec(("values",), "quantile", "sensitivity"),
    "quantiles": Spec(("values_list",), "quantiles", "sensitivity"),
    # exact counts per public candidate: one record moves one count by 1
    "grid_quantile": Spec(("hist",), "l1"),
    "gaussian": Spec(("values",), "l2", "l2_sensitivity", flat_rows="one"),
    "gaussian_zcdp": Spec(("values",), "l2", "l2_sensitivity", flat_rows="one"),
    "laplace": Spec(("values",), "l1", "l1_sensitivity"),
    "account": Spec(()),
    "publish_exact": Spec(()),
}
HISTOGRAM_SPECS = {
    "release_dense_histogram": Spec(("counts",), "l1"),
    "release_sparse_histogram": Spec(("keys", "counts"), "sparse"),
}
#: arguments that change how a call computes, not what it releases
_IGNORED = {"self", "mech", "overwrite_input"}


@dataclass
class Call:
    """One recorded release."""

    name: str
    public: dict
    data: dict
    output: object
    state_before: dict | None
    state_after: dict | None


@dataclass
class Session:
    """The calls of one recorded fit, and the position of a replay in them."""

    calls: list[Call] = field(default_factory=list)
    mode: str = "record"
    position: int = 0
    tolerance: float = 1e-9
    #: replay: check each exact input against the recorded one (off when the replayed data
    #: set is not a neighbour of the recorded one: :func:`check_near_ties` compares two
    #: replays with each other instead)
    against_record: bool = True
    #: replay: the exact inputs of every release, in order
    inputs: list = field(default_factory=list)

    # ------------------------------------------------------------------ one call
    def handle(self, name, spec, original, bound, rng):
        public = {k: v for k, v in bound.arguments.items()
                  if k not in spec.data and k not in _IGNORED}
        data = {k: _copy(bound.arguments[k]) for k in spec.data}
        if self.mode == "record":
            before = _state(rng)
            out = original(*bound.args, **bound.kwargs)
            self.calls.append(Call(name, _copy(public), data, _copy(out), before, _state(rng)))
            return out
        if self.position >= len(self.calls):
            raise ReplayMismatch(f"release #{self.position} ({name}, {public.get('target')!r}) "
                                 "was not requested on the recorded data set")
        rec = self.calls[self.position]
        where = f"release #{self.position} ({rec.name}, {rec.public.get('target')!r})"
        self.position += 1
        if rec.name != name or not _equal(rec.public, public):
            raise ReplayMismatch(f"{where}: the neighbour requested {name} with "
                                 f"{_differences(rec.public, public)} instead")
        self.inputs.append((where, spec, public, data))
        if self.against_record:
            _check_sensitivity(where, spec, public, rec.data, data, self.tolerance)
        # Run the release again on D's exact input from D's generator state: the noisy output,
        # the ledger line and the state after it are then D's, bit for bit (frozen).
        if rec.state_before is not None:
            rng.bit_generator.state = copy.deepcopy(rec.state_before)
        for k in spec.data:
            bound.arguments[k] = _copy(rec.data[k])
        original(*bound.args, **bound.kwargs)
        if rec.state_after is not None:
            rng.bit_generator.state = copy.deepcopy(rec.state_after)
        return copy.deepcopy(rec.output)

    def finish(self) -> None:
        if self.mode == "replay" and self.position != len(self.calls):
            rec = self.calls[self.position]
            raise ReplayMismatch(f"the neighbour stopped after {self.position} releases; the "
                                 f"recorded fit went on with {rec.name} "
                                 f"{rec.public.get('target')!r}")


def _copy(value):
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(v) for v in value)
    return copy.deepcopy(value)


def _state(rng):
    return copy.deepcopy(rng.bit_generator.state) if rng is not None else None


def _equal(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    return bool(a == b)


def _differences(a: dict, b: dict) -> str:
    keys = [k for k in a.keys() | b.keys() if not _equal(a.get(k), b.get(k))]
    return "; ".join(f"{k}={b.get(k)!r} (recorded {a.get(k)!r})" for k in sorted(keys))


# ---------------------------------------------------------------------- sensitivity checks
def _declared(spec, public, rows: int) -> np.ndarray:
    sens = 1.0 if spec.sensitivity is None else public[spec.sensitivity]
    return np.broadcast_to(np.asarray(sens, dtype=float), (rows,)) if np.ndim(sens) \
        else np.full(rows, float(sens))


def _as_rows(a, spec) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    if a.ndim == 0:
        return a.reshape(1, 1)
    if a.ndim == 1:
        return a.reshape(-1, 1) if spec.flat_rows == "elements" else a.reshape(1, -1)
    return a.reshape(a.shape[0], -1)


def _row_distances(a, b, norm) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        diff = np.where((a == b) | (np.isinf(a) & np.isinf(b) & (np.sign(a) == np.sign(b))),
                        0.0, np.abs(a - b))
    if norm == "l2":
        return np.sqrt((diff**2).sum(axis=1))
    if norm == "l1":
        return diff.sum(axis=1)
    return diff.max(axis=1)  # linf


def _check_sensitivity(where, spec, public, old, new, tol) -> None:
    if not spec.norm:
        return
    if spec.norm == "quantile":
        _check_quantile(where, public, old["values"], new["values"], tol)
        return
    if spec.norm == "quantiles":
        moved = [i for i, (a, b) in enumerate(zip(old["values_list"], new["values_list"],
                                                  strict=True))
                 if not np.array_equal(np.sort(np.ravel(a)), np.sort(np.ravel(b)))]
        if len(old["values_list"]) != len(new["values_list"]) or len(moved) > 1:
            raise ReplayMismatch(f"{where}: {len(moved)} of the disjoint subsets moved")
        for i in moved:
            _check_quantile(where, public, old["values_list"][i], new["values_list"][i], tol)
        return
    if spec.norm == "sparse":
        _check_sparse(where, old, new)
        return
    a, b = (_as_rows(x[spec.data[0]], spec) for x in (old, new))
    if a.shape != b.shape:
        raise ReplayMismatch(f"{where}: exact input of shape {b.shape}, recorded {a.shape}")
    sens = _declared(spec, public, a.shape[0])
    if spec.norm == "each":  # AboveThreshold: every query may move by D
        dist, same_records = np.abs(a - b).max(axis=1), True
    else:
        dist = _row_distances(a, b, spec.norm)
        same_records = bool(public.get("same_records", False))
    scale = max(1.0, float(np.nanmax(np.abs(np.where(np.isfinite(a), a, 0.0)))))
    over = dist > sens * (1 + tol) + tol * scale
    if over.any():
        i = int(np.flatnonzero(over)[0])
        raise ReplayMismatch(f"{where}: row {i}'s exact input moved by {dist[i]:.6g} "
                             f"({spec.norm}), more than its declared sensitivity {sens[i]:.6g}")
    moved = int((dist > tol * scale).sum())
    if not same_records and moved > 1:
        raise ReplayMismatch(f"{where}: {moved} rows moved, but the rows are released as "
                             "disjoint subsets (parallel composition)")


def _check_quantile(where, public, old, new, tol) -> None:
    """The quantile's utility, -|#{v < t} - q m|, may move by at most D at every t."""
    lo, hi, q = float(public["lo"]), float(public["hi"]), float(public["quantile"])
    a = np.sort(np.clip(np.ravel(np.asarray(old, dtype=float)), lo, hi))
    b = np.sort(np.clip(np.ravel(np.asarray(new, dtype=float)), lo, hi))
    points = np.unique(np.concatenate([a, b, [lo, hi]]))
    probes = np.concatenate([points, (points[1:] + points[:-1]) / 2])

    def utility(z, side):
        return -np.abs(np.searchsorted(z, probes, side=side) - q * z.size)

    moved = max(np.abs(utility(a, s) - utility(b, s)).max() for s in ("left", "right"))
    sens = float(public["sensitivity"])
    if moved > sens * (1 + tol):
        raise ReplayMismatch(f"{where}: the quantile's utility moved by {moved:.6g}, more than "
                             f"its declared sensitivity {sens:.6g}")


def _check_sparse(where, old, new) -> None:
    def table(x):
        keys = np.asarray(x["keys"]).ravel()
        return dict(zip(keys.tolist(), np.asarray(x["counts"]).ravel().tolist(), strict=True))

    a, b = table(old), table(new)
    moved = sum(abs(a.get(k, 0) - b.get(k, 0)) for k in a.keys() | b.keys())
    if moved > 1:
        raise ReplayMismatch(f"{where}: the histogram's cell counts moved by {moved} (L1), more "
                             "than 1")


# ---------------------------------------------------------------------- installing the hooks
def _wrap(session_ref, name, spec, original, rng_of):
    signature = inspect.signature(original)

    @functools.wraps(original)
    def hooked(*args, **kwargs):
        session = session_ref[0]
        if session is None:
            return original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return session.handle(name, spec, original, bound, rng_of(bound))

    return hooked


@contextmanager
def hooks(session: Session):
    """Route every release of the fits run inside through ``session``."""
    ref = [session]
    saved = []
    for name, spec in SPECS.items():
        original = getattr(Mechanisms, name)
        saved.append((Mechanisms, name, original))
        setattr(Mechanisms, name, _wrap(ref, name, spec, original,
                                        lambda b: b.arguments["self"].rng))
    for name, spec in HISTOGRAM_SPECS.items():
        original = getattr(_hist, name)
        hooked = _wrap(ref, name, spec, original, lambda b: b.arguments["mech"].rng)
        for module in list(sys.modules.values()):
            if (getattr(module, "__name__", "").startswith("privclust")
                    and getattr(module, name, None) is original):
                saved.append((module, name, original))
                setattr(module, name, hooked)
    try:
        yield session
    finally:
        ref[0] = None
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


# ---------------------------------------------------------------------- one neighbour pair
def model_file(model) -> str:
    """What the model file would hold, as canonical JSON (identical fits: identical text). A
    transformer has no model file: its fitted attributes and privacy report stand in."""
    from privclust.preprocessing._base import PrivateTransformerMixin

    if isinstance(model, PrivateTransformerMixin):
        fitted = {k: np.asarray(v).tolist() for k, v in vars(model).items()
                  if k.endswith("_") and not k.startswith("_") and k != "privacy_report_"}
        return json.dumps({"fitted": fitted, "report": model.privacy_report_.to_dict()},
                          sort_keys=True, default=str)
    return json.dumps(io.model_to_dict(model), sort_keys=True)


def _no_plant():
    return nullcontext()


def record(make, X, plant=_no_plant, **fit_kwargs):
    """Fit ``make()`` on ``X`` recording every release; returns (model, session). ``plant``:
    a context manager entered inside the hooks (the negative controls plant faults there, so
    the harness sees what the fit passes)."""
    session = Session()
    with hooks(session), plant():
        model = make().fit(X, **fit_kwargs)
    return model, session


def replay(make, session: Session, X_neighbour, plant=_no_plant, **fit_kwargs):
    """Refit ``make()`` on the neighbour with the recorded outputs frozen; raises
    :class:`ReplayMismatch` at the first difference. Returns the replayed model."""
    session.mode, session.position, session.inputs = "replay", 0, []
    with hooks(session), plant():
        model = make().fit(X_neighbour, **fit_kwargs)
    session.finish()
    return model


def check_neighbour(make, X, X_neighbour, plant=_no_plant, **fit_kwargs) -> int:
    """Record on ``X``, replay on ``X_neighbour``, compare the model files; returns the number
    of releases checked."""
    model, session = record(make, X, plant, **fit_kwargs)
    if not session.calls:
        raise ReplayMismatch("the fit made no release: nothing to replay")
    again = replay(make, session, X_neighbour, plant, **fit_kwargs)
    before, after = model_file(model), model_file(again)
    if before != after:
        raise ReplayMismatch("the model files differ between the data set and its neighbour "
                             "although every release was the same: "
                             + _first_difference(before, after))
    return len(session.calls)


def check_neighbours(make, X, named_neighbours: dict, plant=_no_plant, tolerance=None,
                     **fit_kwargs) -> int:
    """:func:`check_neighbour` for several neighbours of ``X``, recording on ``X`` once (big
    data: one fit per neighbour, not two). ``tolerance``: the relative slack allowed for the
    final rounding of a release's input (default the session's); a :class:`ReplayMismatch`
    names the neighbour. Returns the number of releases checked."""
    model, session = record(make, X, plant, **fit_kwargs)
    if not session.calls:
        raise ReplayMismatch("the fit made no release: nothing to replay")
    if tolerance is not None:
        session.tolerance = tolerance
    before, checked = model_file(model), 0
    for label, Xn in named_neighbours.items():
        try:
            after = model_file(replay(make, session, Xn, plant, **fit_kwargs))
            if before != after:
                raise ReplayMismatch("the model files differ between the data set and its "
                                     "neighbour although every release was the same: "
                                     + _first_difference(before, after))
        except ReplayMismatch as exc:
            raise ReplayMismatch(f"{label}: {exc}") from None
        checked += len(session.calls)
    return checked


def _first_difference(a: str, b: str) -> str:
    i = next((j for j, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a),
                                                                               len(b)))
    return f"...{a[max(i - 60, 0):i + 40]!r} vs ...{b[max(i - 60, 0):i + 40]!r}"


# ---------------------------------------------------------------------- neighbours
def neighbours(X: np.ndarray, bounds: np.ndarray, rounded_feature: int | None = None):
    """Named neighbours of ``X`` (add or remove one record): the ones that move releases most."""
    lo, hi = bounds[:, 0], bounds[:, 1]
    out = {
        # the last record: records keep their positions, so per-record public randomness (a
        # dither, a random order) stays with its record, the coupling the proofs use
        "remove the last record": X[:-1],
        "add an outlier at the upper bound": np.vstack([X, hi]),
        "add an outlier far outside the bounds": np.vstack([X, lo - 10 * (hi - lo)]),
        "add a duplicate": np.vstack([X, X[:1]]),
        "add a record in an empty corner": np.vstack([X, lo + 1e-9 * (hi - lo)]),
    }
    if rounded_feature is not None:
        tie = X[:1].copy()
        tie[0, np.arange(X.shape[1]) != rounded_feature] += 0.5 * (hi - lo)[
            np.arange(X.shape[1]) != rounded_feature] * 1e-3
        out["add a tie on a rounded feature"] = np.vstack([X, tie])
    return out


# ---------------------------------------------------------------------- near ties
def _patch_everywhere(name: str, original, replacement) -> list:
    """``replacement`` for every privclust module attribute ``name`` bound to ``original``;
    returns what to put back."""
    saved = []
    for module in list(sys.modules.values()):
        if (getattr(module, "__name__", "").startswith("privclust")
                and getattr(module, name, None) is original):
            saved.append((module, name, original))
            setattr(module, name, replacement)
    return saved


@contextmanager
def replaced(owner, name: str, replacement):
    """``owner.name`` replaced by ``replacement`` wherever privclust imported it (a module
    function) or on the class (a method); the planted faults of the near-tie tests."""
    original = getattr(owner, name)
    saved = _patch_everywhere(name, original, replacement) if not isinstance(owner, type) \
        else [(owner, name, original)]
    if isinstance(owner, type):
        setattr(owner, name, replacement)
    try:
        yield
    finally:
        for module, attr, value in reversed(saved):
            setattr(module, attr, value)


@dataclass
class Spy:
    """What the fit's nearest-centre and projection paths saw: every centre set (with its
    offset) given to :func:`privclust._geometry.nearest_centres`, and every projection of
    the records (CoresetKMeans' and DPCube's)."""

    centres: list = field(default_factory=list)
    projections: list = field(default_factory=list)


#: the projection paths over records: (module, class) whose ``project`` the spy watches
PROJECTIONS = (("privclust.cluster._coreset.tree", "Space"),
               ("privclust.cluster.dpcube", "_Space"))


@contextmanager
def spying(spy: Spy):
    """Log into ``spy`` (installed over whatever is in place, planted faults included)."""
    import importlib

    import privclust._geometry as geometry

    current = {}
    for module in list(sys.modules.values()):
        fn = getattr(module, "nearest_centres", None) if getattr(
            module, "__name__", "").startswith("privclust") else None
        if callable(fn):
            current[module] = fn
    current.setdefault(geometry, geometry.nearest_centres)

    def watch(fn):
        @functools.wraps(fn)
        def watched(X, centres, *args, **kwargs):
            spy.centres.append((np.array(centres, dtype=float), kwargs.get("offset")))
            return fn(X, centres, *args, **kwargs)
        return watched

    saved = []
    for module, fn in current.items():
        saved.append((module, "nearest_centres", fn))
        module.nearest_centres = watch(fn)
    for mod, cls in PROJECTIONS:
        owner = getattr(importlib.import_module(mod), cls)
        fn = owner.project

        def project(self, X, *args, _fn=fn, **kwargs):
            out = _fn(self, X, *args, **kwargs)
            # the projection and how to compute one record's alone
            spy.projections.append((np.array(out), lambda rows, _s=self, _a=args, _k=kwargs,
                                    _X=X: np.array(_fn(_s, _X[rows], *_a, **_k))))
            return out

        saved.append((owner, "project", fn))
        owner.project = project
    try:
        yield spy
    finally:
        for owner, name, fn in reversed(saved):
            setattr(owner, name, fn)


def _score(x, centres, offset):
    """``||x - c_j||^2 - offset_j`` from the differences (elementwise): (m, k)."""
    diff = x[:, None, :] - centres[None]
    return np.einsum("mkd,mkd->mk", diff, diff) - offset


def tie_rows(centres, offset, bounds, m: int, rng) -> np.ndarray:
    """Up to ``m`` records on the bisector of the two closest centres (in the metric
    ``||x - c||^2 - offset``), each put where the elementwise score difference changes sign
    (bisection down to the last bit along the line between the centres, the record clipped to
    ``bounds`` as the fit clips it): a record whose label any other rounding of the same
    arithmetic may flip. Records nearer a third centre, or that clipping keeps off the tie,
    are left out."""
    centres = np.asarray(centres, dtype=float)
    k, d = centres.shape
    off = np.zeros(k) if offset is None else np.broadcast_to(np.asarray(offset, float), (k,))
    if k < 2:
        return np.zeros((0, d))
    gap = _score(centres, centres, off) + np.diag(np.full(k, np.inf))
    i, j = np.unravel_index(np.argmin(gap + gap.T), gap.shape)
    u = centres[j] - centres[i]
    length = float(np.sqrt(u @ u))
    if length == 0:
        return np.zeros((0, d))
    u = u / length
    # the exact bisector's point on the line: 2 t |c_j - c_i| = off_i - off_j (see docs)
    mid = (centres[i] + centres[j]) / 2.0 + u * (off[i] - off[j]) / (2.0 * length)
    v = rng.normal(size=(m, d)) * 0.1 * length / np.sqrt(d)  # near the middle of the pair
    v -= (v @ u)[:, None] * u
    lo, hi = bounds[:, 0], bounds[:, 1]
    base = mid + v
    lo_t = np.full(m, -0.25 * length)
    hi_t = np.full(m, 0.25 * length)
    for _ in range(80):  # bisection on t (records clipped, as the fit clips them)
        t = (lo_t + hi_t) / 2.0
        sc = _score(np.clip(base + t[:, None] * u, lo, hi), centres[[i, j]], off[[i, j]])
        nearer_i = sc[:, 0] <= sc[:, 1]
        lo_t = np.where(nearer_i, t, lo_t)
        hi_t = np.where(nearer_i, hi_t, t)
    x = np.clip(base + lo_t[:, None] * u, lo, hi)
    sc = _score(x, centres, off)
    top2 = np.sort(np.argsort(sc, axis=1)[:, :2], axis=1)
    gap = np.abs(sc[:, i] - sc[:, j]) <= 1e-9 * (1.0 + np.abs(sc[:, i]))
    keep = (top2 == sorted((i, j))).all(axis=1) & gap
    return x[keep]


def check_near_ties(make, X, bounds, plant=_no_plant, per_pass: int = 8, seed: int = 0,
                    max_rows: int = 96) -> int:
    """Near ties: a record on the bisector of two centres, with a record added after it.

    1. Record a fit on ``X`` and log the centres of every nearest-centre pass (spy).
    2. ``X_a``: ``X`` with records on the bisectors of each pass's closest centres
       (:func:`tie_rows`, at the end, so they are the last rows of any block), once with an
       even and once with an odd number of rows; ``X_b``: ``X_a`` with one record more after
       them (a neighbour of ``X_a``, changing every block's shape that follows n).
    3. Replay both with the releases of the fit on ``X`` frozen (the same centres in every
       pass) and check that the exact input of every release moves between ``X_a`` and
       ``X_b`` by at most its declared sensitivity (one row), that both model files are
       identical, that the labels of the shared records and every projection of them are
       the same bits, and that ``predict`` gives each tie record the same label alone as
       among the others.

    Returns the number of tie records checked."""
    rng = np.random.default_rng(seed)
    spy = Spy()
    with plant(), spying(spy):
        _, session = record(make, X)
    d = X.shape[1]
    ties = [tie_rows(c, off, bounds, per_pass, rng) for c, off in spy.centres
            if c.ndim == 2 and c.shape[1] == d]
    ties = np.concatenate(ties or [np.zeros((0, d))])[:max_rows]
    if ties.shape[0] == 0:
        raise ReplayMismatch("no nearest-centre pass in the original coordinates: nothing to tie")
    extra = X[rng.integers(X.shape[0])][None]
    for parity in (0, 1):
        X_a = np.vstack([X[: X.shape[0] - ((X.shape[0] + ties.shape[0] + parity) % 2)], ties])
        X_b = np.vstack([X_a, extra])
        runs = []
        for data in (X_a, X_b):
            spy_run = Spy()
            session.against_record = False
            with plant(), spying(spy_run):
                model = replay(make, session, data)
            runs.append((model, list(session.inputs), spy_run))
        _compare_tie_runs(runs, X_a.shape[0], ties, session.tolerance, plant, parity)
    return ties.shape[0]


def _compare_tie_runs(runs, n_a, ties, tol, plant, parity) -> None:
    (model_a, inputs_a, spy_a), (model_b, inputs_b, spy_b) = runs
    label = f"{'odd' if (n_a % 2) else 'even'} count ({n_a} rows), one added"
    for (where, spec, public, a), (_, _, _, b) in zip(inputs_a, inputs_b, strict=True):
        try:
            _check_sensitivity(where, spec, public, a, b, tol)
        except ReplayMismatch as exc:
            raise ReplayMismatch(f"near ties, {label}: {exc}") from None
    before, after = model_file(model_a), model_file(model_b)
    if before != after:
        raise ReplayMismatch(f"near ties, {label}: the model files differ: "
                             + _first_difference(before, after))
    for i, ((pa, alone), (pb, _)) in enumerate(zip(spy_a.projections, spy_b.projections,
                                                    strict=True)):
        moved = np.flatnonzero((pa != pb[:n_a]).any(axis=1))
        if moved.size:
            raise ReplayMismatch(f"near ties, {label}: projection {i} of {moved.size} shared "
                                 f"record(s) changed (row {moved[0]})")
        with plant():  # the tie records alone, one at a time (a data set of one record)
            single = np.vstack([alone(slice(r, r + 1)) for r in range(n_a - ties.shape[0], n_a)])
        if not np.array_equal(single, pa[n_a - ties.shape[0]:]):
            raise ReplayMismatch(f"near ties: projection {i} of a tie record alone differs "
                                 "from its projection among the others")
    la, lb = getattr(model_a, "labels_", None), getattr(model_b, "labels_", None)
    if la is not None and not np.array_equal(np.asarray(la), np.asarray(lb)[:n_a]):
        moved = np.flatnonzero(np.asarray(la) != np.asarray(lb)[:n_a])
        raise ReplayMismatch(f"near ties, {label}: labels_ of {moved.size} shared record(s) "
                             f"changed (row {moved[0]})")
    if hasattr(model_a, "predict"):
        with plant():
            together = np.asarray(model_a.predict(ties))
            alone = np.array([int(np.asarray(model_a.predict(t[None]))[0]) for t in ties])
        if not np.array_equal(together, alone):
            raise ReplayMismatch(f"near ties: predict gave {int((together != alone).sum())} "
                                 "tie record(s) another label alone than among the others")
