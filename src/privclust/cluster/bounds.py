"""``private_bounds``: every feature's range, estimated with differential privacy.

The release is described in :mod:`privclust.privacy.bounds`; this module reads the data (the
exact counts each step releases: the number of records, per feature the records in each bin of
the public grids, and the records in each bin of their scaled distance from the bulks) and runs
the steps under a privacy plan, each step a line item. On Dask input the counts are computed on
the workers (exact integers per chunk, added across chunks) and the noise is drawn on the
client, so the release is the same as in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..privacy import (
    Accountant,
    Budget,
    Mechanisms,
    PrivacyPlan,
    PrivacyReport,
    resolve_random_state,
)
from ..privacy.bounds import (
    DEFAULT_SCALES,
    FLEX_UNITS,
    TARGET_OUTSIDE,
    ZOOM_BINS,
    budget_split,
    feature_extents,
    log_grid,
    min_records,
    narrow_features,
    noise_sd,
    radius_edges,
    radius_from_counts,
    refusal_message,
    resolution,
    scaled_bounds,
    scaled_distance,
    zoom_extents,
    zoom_grid,
)
from ._checks import (
    MAX_ABS_BOUND,
    MIN_RELATIVE_WIDTH,
    MIN_WIDTH,
    check_data,
    check_epsilon,
    is_dask_input,
)

__all__ = ["BOUNDS_ITEMS", "PrivateBounds", "feature_bin_counts", "plan_bounds_items",
           "private_bounds"]

_CHUNK_ROWS = 1 << 16

#: The line items of the release (own plan), one per step.
BOUNDS_ITEMS = {
    "count": "bounds: record count",
    "scales": "bounds: feature scales",
    "zoom": "bounds: feature zoom",
    "radius": "bounds: radius",
}
#: The one line item a caller's plan may hold instead (every step then draws from it).
LEGACY_ITEM = "feature bounds"


def feature_bin_counts(X: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Exact (d, len(edges) + 1) counts: per feature, the records in each bin of ``edges``
    (bin ``i`` is ``[edges[i-1], edges[i])``; the first and last are unbounded). Chunked, so the
    temporaries stay small whatever n is."""
    n, d = X.shape
    n_bins = edges.size + 1
    counts = np.zeros((d, n_bins), dtype=np.int64)
    offsets = np.arange(d, dtype=np.int64) * n_bins
    for start in range(0, n, _CHUNK_ROWS):
        x = X[start : start + _CHUNK_ROWS]
        idx = np.searchsorted(edges, x, side="right") + offsets  # (rows, d) flat bin index
        counts += np.bincount(idx.ravel(), minlength=d * n_bins).reshape(d, n_bins)
    return counts


def _zoom_counts(X: np.ndarray, lo: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Exact (k, ZOOM_BINS + 2) counts of the k columns of ``X`` on their linear grids (one
    overflow bin on each side)."""
    n, k = X.shape
    size = ZOOM_BINS + 2
    counts = np.zeros((k, size), dtype=np.int64)
    offsets = np.arange(k, dtype=np.int64) * size
    for start in range(0, n, _CHUNK_ROWS):
        z = (X[start : start + _CHUNK_ROWS].astype(float) - lo) / width
        idx = np.clip(np.floor(z), -1, ZOOM_BINS).astype(np.int64) + 1 + offsets
        counts += np.bincount(idx.ravel(), minlength=k * size).reshape(k, size)
    return counts


def _radius_counts(X: np.ndarray, extents: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Exact counts of the records in each bin of ``edges`` by their scaled distance from the
    bulks (:func:`privclust.privacy.bounds.scaled_distance`)."""
    counts = np.zeros(edges.size + 1, dtype=np.int64)
    for start in range(0, X.shape[0], _CHUNK_ROWS):
        t = scaled_distance(X[start : start + _CHUNK_ROWS], extents)
        counts += np.bincount(np.searchsorted(edges, t, side="right"), minlength=edges.size + 1)
    return counts


def _zoom_chunk(x: np.ndarray, sel: np.ndarray, lo: np.ndarray, width: np.ndarray):
    """:func:`_zoom_counts` of the columns ``sel`` of one chunk."""
    return _zoom_counts(x[:, sel], lo, width)


class _Counts:
    """The exact counts of the release, read from in-memory records."""

    def __init__(self, arr: np.ndarray):
        self.arr = arr
        self.n, self.d = (int(s) for s in arr.shape)

    def features(self, edges: np.ndarray) -> np.ndarray:
        return feature_bin_counts(self.arr, edges)

    def zoom(self, sel: np.ndarray, lo: np.ndarray, width: np.ndarray) -> np.ndarray:
        return _zoom_chunk(self.arr, sel, lo, width)

    def radius(self, extents: np.ndarray, edges: np.ndarray) -> np.ndarray:
        return _radius_counts(self.arr, extents, edges)


class _DaskCounts(_Counts):
    """The same counts of Dask input (a validated ``DaskData``), each computed on the workers
    in one pass (a chunk's exact counts, added across chunks): the same integers as in memory,
    whatever the chunking. The record count is known from the validation pass."""

    def __init__(self, data):
        from ..engine.dask import chunk_totals

        self.data, self._totals = data, chunk_totals
        self.n, self.d = (int(s) for s in data.shape)

    def features(self, edges):
        return self._totals(self.data, feature_bin_counts, edges)

    def zoom(self, sel, lo, width):
        return self._totals(self.data, _zoom_chunk, sel, lo, width)

    def radius(self, extents, edges):
        return self._totals(self.data, _radius_counts, extents, edges)


@dataclass
class PrivateBounds:
    """The result of :func:`private_bounds`: ``bounds`` (d, 2), the release's
    ``privacy_report_``, a one-line ``description`` of what was spent and how the bounds were
    found, the public grid of the feature scales (``edges``) and ``threshold`` (None: the bounds
    are not the edges of bins above a count threshold; kept for compatibility)."""

    bounds: np.ndarray
    threshold: int | None
    edges: np.ndarray
    privacy_report_: PrivacyReport
    description: str = ""

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.bounds, dtype=dtype)


class _Steps:
    """The release's steps, each drawing from its line item (or all from one caller's item)."""

    def __init__(self, plan, mech, epsilon: float, d: int, own: bool):
        self.plan, self.mech, self.d = plan, mech, d
        self.budget = budget_split(epsilon, d)
        self.amounts = {"count": self.budget.count, "scales": self.budget.scales,
                        "zoom": self.budget.zoom, "radius": self.budget.radius}
        self.single = not own and not plan.has_item(BOUNDS_ITEMS["count"])
        if own:
            plan_bounds_items(plan, epsilon, d)

    def item(self, step: str) -> str:
        return LEGACY_ITEM if self.single else BOUNDS_ITEMS[step]

    def move(self, step: str, to: str, reason: str) -> None:
        """Give ``step``'s budget to the untouched step ``to``."""
        self.amounts[to] += self.amounts[step]
        self.amounts[step] = 0.0
        if not self.single:
            self.plan.move_unspent([BOUNDS_ITEMS[step]], BOUNDS_ITEMS[to], reason)

    def count(self, step: str, counts, *, target: str, note: str = "", same_records=False):
        return self.mech.count(counts, self.amounts[step], item=self.item(step), target=target,
                               note=note, same_records=same_records)


def plan_bounds_items(plan, epsilon: float, d: int) -> None:
    """Add the release's line items (:data:`BOUNDS_ITEMS`, each step's share of ``epsilon`` for
    ``d`` features) to ``plan``, a plan or a part of one, and check that they add up. A caller
    whose plan holds them (a pipeline's part) passes it to :func:`private_bounds`: every step
    then draws from the caller's plan, and the record count is charged when it is drawn."""
    budget = budget_split(epsilon, d)
    amounts = {"count": budget.count, "scales": budget.scales, "zoom": budget.zoom,
               "radius": budget.radius}
    for step, name in BOUNDS_ITEMS.items():
        plan.add(name, _MECHANISM[step], "pure", amounts[step])
    plan.validate()


_MECHANISM = {"count": "two-sided geometric count",
              "scales": "two-sided geometric histogram per feature",
              "zoom": "two-sided geometric histogram per zoomed feature",
              "radius": "two-sided geometric histogram"}


def private_bounds(X, epsilon: float, *, scales=DEFAULT_SCALES, random_state=None,
                   accountant=None, plan: PrivacyPlan | None = None,
                   mech: Mechanisms | None = None) -> PrivateBounds:
    """Each feature's range, with pure ``epsilon``-DP (add/remove one record).

    Parameters
    ----------
    X : (n, d) array of finite numbers, or Dask input (dask array or DataFrame, Parquet path):
        the counts are then exact sums over chunks computed on the workers (a pass each for the
        scales, the zoom if any and the radius; n from the validation pass), the noise drawn
        on the client: the same release as in memory for the same seed, whatever the chunking.
    epsilon : the budget of the whole release (a noisy record count, per-feature scales, a
        zoom for narrow features on large data, and one radius shared by all features; see
        :mod:`privclust.privacy.bounds`).
    scales : the magnitudes the public grid of the feature scales covers (default 1e-6 .. 1e9):
        a feature within ``scales[0]`` of 0 gets the central bin; larger values are still
        covered (the radius reaches them), only less tightly.
    random_state : None (secure) or an int / Generator (reproducible, not secure).
    accountant : a shared :class:`~privclust.Accountant`, charged before the data is read.
    plan, mech : internal: a caller's plan and ledger, when the bounds are a part of a larger
        release. The plan holds either the line items of :data:`BOUNDS_ITEMS`
        (:func:`plan_bounds_items`) or one item ``"feature bounds"`` of ``epsilon`` that every
        step draws from. Every release is then charged to the caller's plan as it is drawn, so
        a refusal on the noisy record count has spent it (the caller has booked the plan).

    Returns
    -------
    PrivateBounds
        ``bounds`` (d, 2) usable as any estimator's ``bounds`` (also through ``np.asarray``).

    Raises
    ------
    ValueError
        When the noisy record count is below :func:`privclust.privacy.bounds.min_records`
        (which depends on ``epsilon`` and the number of features only): one sentence with the
        number of records the design needs. The refusal follows a release (the noisy count):
        the budget booked for the bounds is spent, never refunded.

    Notes
    -----
    The radius aims to leave about 1% of the records outside the bounds (at most 2% in the
    measured worst cases); like any record outside public bounds they are clipped by the
    estimator that uses them. Small data is refused rather than given bounds the noise made:
    with 40 features at epsilon 0.1 the design needs about 8,000 records, with 4 about 1,520.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from privclust import private_bounds
    >>> X, _ = make_blobs(20000, 2, centers=[[0, 0], [40, 40]], random_state=0)
    >>> found = private_bounds(X, epsilon=0.1, random_state=0)
    >>> bool((found.bounds[:, 0] < 0).all() and (found.bounds[:, 1] > 40).all())
    True
    >>> round(found.privacy_report_.total().epsilon, 6)
    0.1
    """
    eps = check_epsilon(epsilon)
    log_grid(scales)  # the scales are checked before anything else
    own = plan is None
    if own:  # booked before the data is read
        plan = PrivacyPlan("private_bounds", eps, 0.0)
        accountant = accountant if accountant is not None else Accountant(Budget(eps, 0.0))
        accountant.reserve(plan.reserved(), "private_bounds")
    arr = check_data(X)
    counts = _DaskCounts(arr) if is_dask_input(arr) else _Counts(arr)
    if own:
        source = resolve_random_state(random_state)
        report = PrivacyReport(estimator="private_bounds", planned=plan.reserved(),
                               random_source=source.description)
        mech = Mechanisms(source, report, plan)
    steps = _Steps(plan, mech, eps, arr.shape[1], own)
    bounds, edges, description = _release(counts, eps, scales, steps)
    if own:
        report.planned = plan.planned()
        plan.write_into(report)
        plan.check_ledger(report)
        accountant.attach(report)
        return PrivateBounds(bounds, None, edges, report, description)
    return PrivateBounds(bounds, None, edges, mech.report, description)


def _release(counts: _Counts, eps: float, scales, steps: _Steps):
    """The four steps; returns ``(bounds, edges of the scales' grid, description)``."""
    n, d = counts.n, counts.d
    n_hat = float(steps.count("count", np.array([n]), target="number of records",
                              note="decides whether the data is large enough, and the grid")[0])
    if n_hat < min_records(eps, d):
        raise ValueError(refusal_message(eps, d))
    n_low = max(n_hat - 3 * noise_sd(steps.amounts["count"]), 1.0)
    if n_low * (steps.amounts["scales"] + steps.amounts["zoom"]) / d < FLEX_UNITS:
        steps.move("zoom", "scales", "few records per feature: the scales need it")
    per_octave = resolution(n_low, steps.amounts["scales"], d)
    edges = log_grid(scales, per_octave)
    noisy = steps.count(
        "scales", counts.features(edges), same_records=True,
        target=f"records per bin of a log-scale grid ({edges.size + 1} bins, {per_octave} "
               "per octave), per feature",
        note="each feature's bulk: its mode, neighbouring bins above the noise, its sign")
    extents, one_sided = feature_extents(noisy, edges, per_octave, steps.amounts["scales"] / d)
    zoomed = _zoom(counts, extents, one_sided, steps) if steps.amounts["zoom"] else 0
    redges = radius_edges()
    noisy_r = steps.count(
        "radius", counts.radius(extents, redges),
        target="records per bin of their scaled distance from the bulks (log scale)",
        note=f"the radius leaves about {TARGET_OUTSIDE:.0%} of the records outside")
    radius = radius_from_counts(noisy_r, redges, steps.amounts["radius"], n_hat)
    bounds = scaled_bounds(extents, radius, MAX_ABS_BOUND, MIN_WIDTH, MIN_RELATIVE_WIDTH)
    zoom_text = f", {zoomed} narrow feature(s) zoomed into" if zoomed else ""
    description = (f"epsilon {eps:.4g}: each feature's bulk on a log-scale grid ({per_octave} "
                   f"per octave){zoom_text}, widened by one shared radius ({radius:.3g} "
                   f"half-widths) that leaves about {TARGET_OUTSIDE:.0%} of the records outside")
    return bounds, edges, description


def _zoom(counts: _Counts, extents: np.ndarray, one_sided: np.ndarray, steps: _Steps) -> int:
    """The zoom into the narrow one-sided features (their bulks are updated in place); its
    budget goes to the radius when there is none. Returns how many were zoomed into."""
    sel = narrow_features(extents, one_sided)
    if not sel.size:
        steps.move("zoom", "radius", "no feature's bulk is narrow next to its distance from 0")
        return 0
    lo, width = zoom_grid(extents[sel])
    noisy = steps.count(
        "zoom", counts.zoom(sel, lo, width), same_records=True,
        target=f"records per bin of a linear grid ({ZOOM_BINS} bins) across the bulk, per "
               "narrow feature",
        note="narrows the bulk to the bins above the noise around its mode")
    extents[sel] = zoom_extents(noisy, lo, width, steps.amounts["zoom"] / sel.size, extents[sel])
    return int(sel.size)
