"""What every privclust estimator shares: input checks, bounds, budgets and prediction.

Input checks happen in ``fit`` (scikit-learn convention: constructors store arguments
unchanged). Every user mistake raises a ``ValueError``/``TypeError`` whose message names the
problem and the fix.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.exceptions import NotFittedError as _SklearnNotFittedError

from .._geometry import nearest_centres
from ..engine import LocalEngine
from ..privacy import Accountant, Budget, PrivacyLeakWarning, PrivacyPlan, PrivacyReport
from ._checks import (  # noqa: F401  (public here too: estimators import them from this module)
    MAX_ABS_BOUND,
    MAX_EPSILON,
    MIN_EPSILON,
    MIN_RELATIVE_WIDTH,
    MIN_WIDTH,
    check_data,
    check_delta,
    check_epsilon,
    feature_names,
    is_dask_input,
)

__all__ = [
    "MAX_ABS_BOUND",
    "MAX_EPSILON",
    "MIN_EPSILON",
    "MIN_RELATIVE_WIDTH",
    "MIN_WIDTH",
    "NotFittedError",
    "PrivateClusterMixin",
    "check_bounds",
    "check_X",
    "check_data",
    "check_delta",
    "check_epsilon",
    "nearest_centre",
    "sklearn_expected_failed_checks",
]


class NotFittedError(_SklearnNotFittedError, RuntimeError):
    """A fitted attribute or ``predict`` was asked of an estimator that was not fitted.

    scikit-learn's ``NotFittedError`` (so ``sklearn.utils.validation`` and pipelines treat it
    as theirs); also a ``RuntimeError``, as privclust raised before."""


#: scikit-learn's estimator checks (``sklearn.utils.estimator_checks``) that a private fit
#: fails by design, check name -> why. ``check_clustering`` asks for an adjusted Rand index
#: above 0.4 on 50 records: the noise a private fit adds for one record's sake swamps the
#: clusters of so small a set.
SKLEARN_EXPECTED_FAILED_CHECKS = {
    "check_clustering": "differentially private fits on tiny data are noisy by design: on "
    "scikit-learn's 50 records the noise that hides any one record swamps the clusters",
}


def sklearn_expected_failed_checks(estimator) -> dict[str, str]:
    """The scikit-learn estimator checks ``estimator`` fails by design, check name -> reason:
    the ``expected_failed_checks`` of :func:`sklearn.utils.estimator_checks.check_estimator`
    (a callable of it for ``parametrize_with_checks``), scikit-learn's way of marking them
    since the ``_xfail_checks`` tag was removed. An estimator states its own in the class
    attribute ``_sklearn_expected_failed_checks`` (by default, and for estimators outside
    :class:`PrivateClusterMixin` such as Morse merging: :data:`SKLEARN_EXPECTED_FAILED_CHECKS`).

    ::

        check_estimator(est, expected_failed_checks=sklearn_expected_failed_checks(est))
    """
    return dict(getattr(type(estimator), "_sklearn_expected_failed_checks",
                        SKLEARN_EXPECTED_FAILED_CHECKS))


def raise_not_fitted(est, what: str = "fit(X)") -> None:
    raise NotFittedError(f"this {type(est).__name__} is not fitted yet; call {what} first")


def check_X(est, X, *, reset: bool) -> np.ndarray:
    """``check_data`` plus scikit-learn's feature contract: ``fit`` (``reset=True``) records
    the columns of a DataFrame in ``est.feature_names_in_``; ``predict`` refuses other columns
    (a DataFrame with its columns swapped would otherwise be scored silently) and another
    number of features than ``est.n_features_in_``, in scikit-learn's words.

    Dask input (see :func:`is_dask_input`) is validated in one pass over the data and comes back
    as a ``privclust.engine.dask.DaskData`` (lazy; its shape is known), which the estimators
    route to the Dask engine."""
    if is_dask_input(X):
        X = check_data(X)
    names = feature_names(X)
    if reset:
        if names is not None:
            est.feature_names_in_ = names
        elif hasattr(est, "feature_names_in_"):
            del est.feature_names_in_
    else:
        fitted = getattr(est, "feature_names_in_", None)
        if fitted is not None and names is not None and (
            names.shape != fitted.shape or (names != fitted).any()
        ):
            raise ValueError(
                f"X has columns {list(names)[:8]} but the model was fitted on "
                f"{list(fitted)[:8]}; pass the same columns in the same order, e.g. "
                "X[model.feature_names_in_]"
            )
    arr = check_data(X)
    fitted_d = None if reset else getattr(est, "n_features_in_", None)
    if fitted_d is not None and arr.shape[1] != fitted_d:
        raise ValueError(
            f"X has {arr.shape[1]} features, but {type(est).__name__} is expecting {fitted_d} "
            f"features as input (the model was fitted on {fitted_d}); pass the same columns, in "
            "the same order, as for fitting"
        )
    return arr


def check_bounds(bounds, n_features: int, *, rows: bool = False) -> np.ndarray:
    """Public bounds as a (d, 2) float array.

    Accepted forms: ``(lo, hi)`` for all features; one ``(lo, hi)`` row per feature (a (d, 2)
    array); a ``(lower, upper)`` pair of arrays (a (2, d) array, diffprivlib's form); or the
    named ``{"lower": [...], "upper": [...]}``. On 2 features a 2 x 2 array that reads validly
    both ways is refused (say which with the named form). ``rows=True``: ``bounds`` is a
    (d, 2) array of rows as a fitted model stores it (``bounds_``)."""
    if bounds is None:
        raise ValueError(
            "bounds are required: they are public knowledge of the data's range, e.g. "
            "bounds=(-100, 100) or one (lo, hi) row per feature. Deriving them from the data "
            "is not private (use privclust.data_bounds(X, allow_leak=True) only if you accept "
            "that)."
        )
    b = _bounds_rows(bounds, n_features, rows)
    if not np.isfinite(b).all():
        raise ValueError(
            "bounds must be finite numbers (no inf or NaN): give the range your data can "
            "take, e.g. bounds=(-100, 100)"
        )
    if (b[:, 0] >= b[:, 1]).any():
        j = int(np.flatnonzero(b[:, 0] >= b[:, 1])[0])
        raise ValueError(
            f"bounds need lo < hi for every feature; feature {j} has lo={b[j, 0]}, hi={b[j, 1]}"
        )
    big = np.abs(b).max(axis=1)
    if (big > MAX_ABS_BOUND).any():
        j = int(np.flatnonzero(big > MAX_ABS_BOUND)[0])
        raise ValueError(
            f"bounds of feature {j} ({b[j, 0]:g}, {b[j, 1]:g}) lie outside the range privclust "
            f"supports, +-{MAX_ABS_BOUND:g}: rescale the feature (e.g. measure it in larger "
            "units) so that its bounds fit"
        )
    narrow = (b[:, 1] - b[:, 0]) < np.maximum(MIN_WIDTH, MIN_RELATIVE_WIDTH * big)
    if narrow.any():
        j = int(np.flatnonzero(narrow)[0])
        raise ValueError(
            f"bounds of feature {j} ({b[j, 0]:g}, {b[j, 1]:g}) are too narrow to compute with: "
            f"the width must be at least {MIN_WIDTH:g} and at least {MIN_RELATIVE_WIDTH:g} "
            "times the largest bound; rescale the feature (e.g. to smaller units) or drop it "
            "if it is constant"
        )
    return b


def _bounds_rows(bounds, n_features: int, rows: bool) -> np.ndarray:
    """Any accepted form of ``bounds`` as a (d, 2) array of rows (values not yet checked)."""
    named = isinstance(bounds, dict)
    if named:
        bounds = _named_bounds(bounds)
    try:
        b = np.asarray(bounds, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"bounds must be numbers: (lo, hi), a (d, 2) array or (lower, upper) arrays; got "
            f"{_short(bounds)}"
        ) from None
    if b.shape == (2,):
        b = np.tile(b, (n_features, 1))
    elif named:
        b = b.T if b.shape == (2, n_features) else b.reshape(-1, 2)
    elif b.shape == (2, n_features) and (n_features != 2 or not rows):
        b = _pair_of_arrays(b, n_features)
    if b.shape != (n_features, 2):
        raise ValueError(
            f"bounds has shape {b.shape}; expected (lo, hi) for all features, one (lo, hi) row "
            f"per feature (shape ({n_features}, 2)) or a (lower, upper) pair of arrays of "
            f"{n_features} values"
        )
    return b


def _named_bounds(bounds: dict):
    """``{"lower": [...], "upper": [...]}`` -> a (2, d) (or (2,)) array of the pair."""
    if set(bounds) != {"lower", "upper"}:
        raise ValueError(
            "bounds as a dict takes exactly the keys 'lower' and 'upper', e.g. bounds="
            f"{{'lower': [0, 5], 'upper': [10, 20]}}; got keys {sorted(map(str, bounds))[:5]}"
        )
    try:
        lower = np.asarray(bounds["lower"], dtype=float)
        upper = np.asarray(bounds["upper"], dtype=float)
    except (TypeError, ValueError):
        raise ValueError("bounds['lower'] and bounds['upper'] must be numbers or arrays of "
                         "numbers, one per feature") from None
    lower, upper = np.broadcast_arrays(lower, upper) if lower.ndim <= 1 and upper.ndim <= 1 \
        and (lower.size == 1 or upper.size == 1 or lower.size == upper.size) else (lower, upper)
    if lower.shape != upper.shape or lower.ndim > 1:
        raise ValueError("bounds['lower'] and bounds['upper'] must have one value per feature "
                         "(or one value for all features)")
    return np.stack([lower, upper])


def _pair_of_arrays(b: np.ndarray, n_features: int) -> np.ndarray:
    """A (2, d) array read as ``(lower, upper)``; on 2 features, refused when it also reads
    validly as one row per feature."""
    if n_features == 2:
        as_rows_ok = bool((b[:, 0] < b[:, 1]).all())
        as_pair_ok = bool((b[0] < b[1]).all())
        if as_rows_ok and as_pair_ok:
            r = [[_num(v) for v in row] for row in b.tolist()]
            raise ValueError(
                f"bounds {r} on 2 features reads two ways; say which: "
                f"bounds={{'lower': {r[0]}, 'upper': {r[1]}}} for a (lower, upper) pair, or "
                f"bounds={{'lower': {[r[0][0], r[1][0]]}, 'upper': {[r[0][1], r[1][1]]}}} "
                "for one (lo, hi) row per feature"
            )
        if as_rows_ok:
            return b
    return b.T


def _num(v: float):
    return int(v) if float(v).is_integer() and abs(v) < 1e15 else float(f"{v:.6g}")


def _short(value, limit: int = 60) -> str:
    """A user's value for a message, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def data_bounds(X, *, allow_leak: bool = False, margin: float = 0.0) -> np.ndarray:
    """Bounds taken from the data itself: NOT private. Requires ``allow_leak=True`` and warns."""
    if not allow_leak:
        raise ValueError(
            "data_bounds reads the exact min/max of the data, which is not differentially "
            "private; pass allow_leak=True to accept that, or give public bounds instead"
        )
    arr = check_data(X)
    warnings.warn(
        "bounds derived from the data without privacy: the released model leaks the data's "
        "exact range",
        PrivacyLeakWarning,
        stacklevel=2,
    )
    lo, hi = arr.min(axis=0).astype(float), arr.max(axis=0).astype(float)
    pad = (hi - lo) * margin + (hi == lo)
    return np.column_stack([lo - pad, hi + pad])


#: Work per record above which a fit is refused before it starts: about 1 ms per record
#: (10 s per 10,000 records) on this library's reference machine (2 cores).
MAX_SECONDS_PER_RECORD = 1e-3
#: Work that does not grow with the data (e.g. scoring candidates) above which a fit is refused.
MAX_FIXED_SECONDS = 10.0


def check_fit_cost(seconds_per_record: float, what: str, advice: str,
                   fixed_seconds: float = 0.0) -> None:
    """Refuse up front a fit whose parameters make it slow.

    ``seconds_per_record`` and ``fixed_seconds`` (work that does not grow with the data) come
    from the estimator's own measured cost model, a function of its parameters and the number
    of features only. The decision reads neither the number of records nor anything else about
    the data: whether a fit runs is then the same on every pair of neighbouring data sets (a
    refusal that depended on the exact record count would itself disclose it, with no finite
    epsilon), and the message states no data-derived number."""
    if seconds_per_record > MAX_SECONDS_PER_RECORD:
        raise ValueError(
            f"{what} would take about {seconds_per_record * 1e3:,.2g} ms per record (more than "
            f"the {MAX_SECONDS_PER_RECORD * 1e3:g} ms privclust allows); {advice}"
        )
    if fixed_seconds > MAX_FIXED_SECONDS:
        raise ValueError(
            f"{what} would take about {fixed_seconds:,.0f} s whatever the data (more than the "
            f"{MAX_FIXED_SECONDS:g} s privclust allows); {advice}"
        )


def clip_to_fitted_bounds(est, X):
    """``X`` clipped to the bounds the fit used (``bounds_``), so that labels and predictions
    treat a point exactly as the fit treated a record (and values near the float limit cannot
    overflow a distance). Dask input and models without bounds are returned as they are."""
    bounds = getattr(est, "bounds_", None)
    if bounds is None or is_dask_input(X):
        return X
    bounds = np.asarray(bounds, dtype=float)
    if bounds.shape != (X.shape[1], 2):
        return X
    lo, hi = bounds[:, 0].astype(X.dtype), bounds[:, 1].astype(X.dtype)
    if ((X < lo) | (X > hi)).any():
        return np.clip(X, lo, hi)
    return X


def nearest_centre(X: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Index of the nearest centre for every row (chunked: no (n, k) matrix for large n; dask
    input: chunk by chunk on the cluster)."""
    if is_dask_input(X):
        from ..engine.dask import nearest_centre_labels

        return nearest_centre_labels(X, centres)
    return nearest_centres(X, centres)


class PrivateFitMixin:
    """What every private fit shares, estimators and private transformers alike: the plan
    checked against the accountant before data is read, ``bounds="private"``, the report."""

    def _accountant(self) -> Accountant:
        acc = getattr(self, "accountant", None)
        if acc is None:
            return Accountant()
        if not isinstance(acc, Accountant):
            raise TypeError("accountant must be a privclust.Accountant or None")
        return acc

    # ------------------------------------------------------------------ the privacy plan
    def _open_plan(self, epsilon: float, delta: float | None):
        """The fit's :class:`~privclust.privacy.PrivacyPlan` and its accountant.

        The plan's total comes from the parameters alone and is checked against the accountant
        here, before any data is read (``delta=None``: the delta rule's cap). Inside a composite
        fit (Morse merging) the estimator is given a part of the composite's plan instead, and
        the composite's accountant holds the whole (``accountant`` is then None)."""
        part = getattr(self, "_plan_part", None)
        self._bounds_release = None
        if part is not None:
            self._bounds_epsilon = None  # a composite fit's part: bounds must be public
            return part, None
        name = type(self).__name__
        private = is_private_bounds(getattr(self, "bounds", None))
        # bounds="private": PRIVATE_BOUNDS_SHARE of epsilon estimates the bounds first
        self._bounds_epsilon = PRIVATE_BOUNDS_SHARE * epsilon if private else None
        if private and self._bounds_epsilon < MIN_EPSILON:
            raise ValueError(
                f"bounds='private' spends {PRIVATE_BOUNDS_SHARE:g} of epsilon on the bounds, "
                f"and at epsilon={epsilon:g} that is below the smallest epsilon privclust "
                f"supports ({MIN_EPSILON:g}); use epsilon >= {MIN_EPSILON / PRIVATE_BOUNDS_SHARE:g}"
                " or give public bounds"
            )
        plan = PrivacyPlan(name, epsilon - (self._bounds_epsilon or 0.0), delta)
        accountant = self._accountant()
        accountant.check(plan.reserved() + Budget(self._bounds_epsilon or 0.0, 0.0), name)
        self._fit_accountant = accountant
        return plan, accountant

    def _fit_bounds(self, X) -> np.ndarray:
        """The fit's bounds: the public ``bounds``, or with ``bounds="private"`` a private
        estimate (:func:`privclust.private_bounds`, a release of this fit, booked with the
        fit's accountant and listed first in its report)."""
        d = X.shape[1]
        if not is_private_bounds(self.bounds):
            self.bounds_ = check_bounds(self.bounds, d)
            return self.bounds_
        if getattr(self, "_bounds_epsilon", None) is None:
            raise ValueError(
                "bounds='private' is not available inside a composite fit (a MorseMerging base "
                "or a PrivatePipeline step); put a privclust.preprocessing.PrivateClipper step "
                "first, or estimate them with privclust.private_bounds and pass them as bounds"
            )
        from .bounds import private_bounds  # the module builds on this one

        self._fit_accountant.reserve(Budget(self._bounds_epsilon, 0.0), "private bounds")
        found = private_bounds(X, self._bounds_epsilon, random_state=_bounds_random_state(
            self.random_state))
        self._bounds_release = found
        self.bounds_ = found.bounds
        return found.bounds

    @staticmethod
    def _reserve_plan(plan, accountant, label: str) -> None:
        """Check that the line items add up to the budget and book it (still before any
        noise is drawn). With the delta rule the booking is the cap, and stays the cap."""
        plan.validate()
        if accountant is None:
            return
        plan.book(accountant, label)

    def _close_plan(self, plan, report, accountant) -> None:
        """The end of every fit: the report states the plan and what was left unspent, and the
        ledger is checked against the plan."""
        report.planned = plan.planned()
        plan.write_into(report)
        report.notes += [n for n in plan.notes if n not in report.notes]
        plan.check_ledger(report)
        _merge_bounds_release(report, getattr(self, "_bounds_release", None))
        if accountant is not None:
            accountant.attach(report)

    def _check_X(self, X, *, reset: bool) -> np.ndarray:
        return check_X(self, X, reset=reset)

    def _make_engine(self, X, bounds) -> LocalEngine:
        """The engine for validated ``X``: NumPy in memory, or the Dask engine for dask input
        (on the current ``distributed`` client, else a LocalCluster it starts and closes)."""
        if is_dask_input(X):
            from ..engine.dask import DaskEngine

            engine = DaskEngine(X, bounds)
        else:
            engine = LocalEngine(X, bounds)
        if getattr(engine, "clip_count_pending", False):  # counted with the first pass
            engine.on_clipped = _warn_clipped
        elif engine.n_clipped_records:
            _warn_clipped(engine.n_clipped_records, stacklevel=4)
        return engine

    def _start_report(self, planned: Budget, random_source) -> PrivacyReport:
        return PrivacyReport(
            estimator=type(self).__name__,
            planned=planned,
            random_source=random_source.description,
        )


def _warn_clipped(n_clipped: int, stacklevel: int = 2) -> None:
    warnings.warn(
        f"{n_clipped} record(s) lie outside the bounds and were clipped to them (clipping is "
        "what bounds the sensitivity; widen the bounds if this is unexpected)",
        UserWarning,
        stacklevel=stacklevel,
    )


class PrivateClusterMixin(PrivateFitMixin, ClusterMixin, BaseEstimator):
    """Shared behaviour of the estimators: the private fit (:class:`PrivateFitMixin`), engine
    set-up, nearest-centre prediction."""

    #: scikit-learn's estimator checks this estimator fails by design, check name -> reason
    #: (read by :func:`sklearn_expected_failed_checks`).
    _sklearn_expected_failed_checks = SKLEARN_EXPECTED_FAILED_CHECKS

    #: True for centre models whose fit releases noisy cluster sizes (``cluster_sizes_``): a
    #: composite fit (Morse merging) can take its delta rule's count from them.
    releases_cluster_sizes = False

    @staticmethod
    def keeps_zcdp_block(delta) -> bool:
        """Whether a fit at ``delta`` (a number, or None for the delta rule) keeps a zCDP line
        item in its plan, from the parameters alone. A plan holds one zCDP block (the ledger
        converts the sum of rho once, at one delta), so a composite fit (a selection, Morse
        merging) checks this before any data is read."""
        return False

    def plan(self, n, *, d=None, expected_clusters=None):
        """What a fit on ``n`` records (or a ``(low, high)`` range) can and cannot find, from
        public inputs only (:func:`privclust.planner.plan` of this unfitted estimator; no
        data is read and no budget is spent)."""
        from ..planner import plan

        return plan(self, n, d=d, expected_clusters=expected_clusters)

    def _check_fitted(self):
        if not hasattr(self, "cluster_centers_"):
            raise_not_fitted(self)

    def predict(self, X):
        """Index of the nearest private centre (post-processing of the private model)."""
        self._check_fitted()
        arr = self._check_X(X, reset=False)
        if arr.shape[1] != self.cluster_centers_.shape[1]:
            raise ValueError(
                f"X has {arr.shape[1]} features; the model was fitted on "
                f"{self.cluster_centers_.shape[1]}"
            )
        if self.cluster_centers_.shape[0] == 0:
            return np.full(arr.shape[0], -1, dtype=np.int64)
        return nearest_centre(clip_to_fitted_bounds(self, arr), self.cluster_centers_)

    def fit_predict(self, X, y=None, **kwargs):
        return self.fit(X, **kwargs).labels_

    def score(self, X, y=None) -> float:
        """Opposite of the k-means cost of ``X`` on the released centres (scikit-learn's
        ``KMeans.score``: higher is better), rows clipped to the fitted bounds as the fit
        clipped them.

        **Not private**: it reads ``X`` exactly. Use it on data you may look at (public or
        synthetic data, or a held-out set whose owner accepts that); to choose k or an
        estimator on private data use :class:`privclust.model_selection.PrivateSelection`."""
        self._check_fitted()
        arr = self._check_X(X, reset=False)
        if is_dask_input(arr):
            raise ValueError("score reads every record exactly and is not available on the Dask "
                             "engine; pass an in-memory array")
        centres = np.asarray(self.cluster_centers_, dtype=float)
        if arr.shape[1] != centres.shape[1]:
            raise ValueError(f"X has {arr.shape[1]} features; the model was fitted on "
                             f"{centres.shape[1]}")
        if centres.shape[0] == 0:
            return -math.inf
        arr = clip_to_fitted_bounds(self, arr).astype(float, copy=False)
        labels = nearest_centres(arr, centres)
        return -float(np.einsum("ij,ij->", arr - centres[labels], arr - centres[labels]))


#: The most clusters (or components) any k-means-family estimator accepts: the public
#: initialisation and every iteration are O(k) per record, and 10,000 centres take ~3 s to place.
MAX_CLUSTERS = 10_000


def check_n_clusters(k, n_samples: int | None = None, name: str = "n_clusters") -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"{name} must be an int >= 1, got {k!r}")
    if k > MAX_CLUSTERS:
        raise ValueError(f"{name}={k} is more than privclust supports ({MAX_CLUSTERS})")
    if n_samples is not None and k > n_samples:
        warnings.warn(
            f"{name}={k} is more than the {n_samples} records in X: at least {k - n_samples} "
            "of the released centres can hold no record and come from noise alone; ask for "
            "fewer (this check reads only the size of X, and nothing about it is released)",
            UserWarning,
            stacklevel=3,
        )
    return int(k)


def check_positive_int(value, name: str, upper: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if upper is not None and value > upper:
        raise ValueError(f"{name}={value} is too large (at most {upper})")
    return int(value)


#: Share of epsilon that ``bounds="private"`` spends on estimating the bounds.
PRIVATE_BOUNDS_SHARE = 0.1


def is_private_bounds(bounds) -> bool:
    """Whether ``bounds`` asks for private bounds (``"private"``)."""
    return isinstance(bounds, str) and bounds == "private"


def _bounds_random_state(random_state):
    """The bounds release's randomness: secure if the fit's is; from a seed, a stream of its
    own (never the fit's first draws again)."""
    if random_state is None or isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:  # the message the fit itself gives, before any draw
            raise ValueError(f"random_state must be a non-negative int, got {random_state}")
        return np.random.default_rng([int(random_state), 0x626F756E64])
    return random_state


def _merge_bounds_release(report, found) -> None:
    """Put the bounds release of ``bounds="private"`` at the head of the fit's report: its
    releases, its line item and its share of the planned budget (sequential composition)."""
    if found is None:
        return
    bounds_report = found.privacy_report_
    report.releases[:0] = bounds_report.releases
    report.planned = report.planned + bounds_report.planned
    report.plan[:0] = bounds_report.plan
    report.notes.insert(0, f"bounds='private': {bounds_report.planned.epsilon:.6g} of epsilon "
                           f"estimated the bounds ({found.description})")
