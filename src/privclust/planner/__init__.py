"""What a fit can find before it spends any budget: the planner.

:func:`plan` answers from **public inputs only** (the number of records ``n`` or a range for it,
the number of features, the public bounds, epsilon, delta and the estimator's parameters, and
optionally the number of clusters you expect). It never reads data: it runs the estimator's own
parameter checks, plan items and noise calibrations, and models what they imply.

* DPM: ``min_cluster_size`` (tau_e), the noise of every level's counts and of the leaf
  averages, the split-score sensitivity and the exponential mechanism's epsilon per level, the
  halting probability per level, ``expected_levels`` and ``expected_clusters``;
* DPDBSCAN: the grid, dense or sparse histogram, Gamma, tau, MinPts' and the smallest dense
  region (records per core window) that is found;
* the k-means family: ``noise_per_coordinate`` ``s``: a cluster of ``m`` records has its
  released centre off by about ``s / m`` per coordinate;
* CoresetKMeans: ``min_cluster_size``, the smallest cluster standing apart it can find (the
  tree's significance floors and the support floor of a centre of its own);
* DPGaussianMixture: ``sigma`` per iteration and the ``min_count`` below which a component is
  noise;
* DPHDBSCAN: the tree's levels, cell widths, thresholds and significance floor, and the
  default ``min_cluster_size``.

:func:`quality_curve` and :func:`plot_quality_curve` show a predicted quality against epsilon.
"""

from __future__ import annotations

import copy
import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from ..cluster._base import check_bounds, is_private_bounds
from ..cluster.dbscan import DPDBSCAN
from ..cluster.dpm import DPM
from ..cluster.hdbscan import DPHDBSCAN
from ..cluster.mixture import DPGaussianMixture
from . import _density, _dpm, _families, _verdict

__all__ = ["FitPlan", "plan", "plot_quality_curve", "quality_curve"]

#: family -> the plan's verdict line at one n (:mod:`._verdict`)
_VERDICTS = {"dpm": _verdict.verdict_dpm, "dbscan": _verdict.verdict_dbscan,
             "kmeans": _verdict.verdict_centres, "mixture": _verdict.verdict_mixture,
             "density": _density.verdict_density}
#: family -> (plan fields at one n, description in words, default quality metric)
_FAMILIES = {
    "dpm": (_dpm.plan_dpm, _dpm.describe_dpm, "expected_clusters"),
    "dbscan": (_families.plan_dbscan, _families.describe_dbscan, "min_dense_window"),
    "kmeans": (_families.plan_centres, _families.describe_centres, "relative_centre_error"),
    "mixture": (_families.plan_mixture, _families.describe_mixture, "relative_centre_error"),
    "density": (_density.plan_density, _density.describe_density, "min_cluster_size"),
}


@dataclass
class FitPlan:
    """What a fit of ``estimator`` can and cannot find, from public inputs (:func:`plan`).

    ``ends`` holds the fields at every ``n`` asked for (one, or the two ends of a range);
    a field read as an attribute (``fp.min_cluster_size``) is its value at that ``n``, or the
    pair ``(at low, at high)`` for a range. ``can`` and ``cannot`` say it in words (one list
    per ``n``). ``given_clusters`` is the ``expected_clusters`` argument; the field
    ``expected_clusters`` is the prediction.
    """

    estimator: str
    family: str
    n: tuple
    d: int
    epsilon: float
    delta: float | None
    given_clusters: int | None
    ends: list = field(default_factory=list)
    can: list = field(default_factory=list)
    cannot: list = field(default_factory=list)
    #: one plain line per ``n``: noise-dominated, marginal or usable, from the figures above
    verdict: list = field(default_factory=list)

    def __getattr__(self, name):
        ends = self.__dict__.get("ends") or []
        if ends and name in ends[0]:
            values = [e[name] for e in ends]
            return values[0] if len(values) == 1 else tuple(values)
        raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    @property
    def fields(self) -> list[str]:
        """The family's field names."""
        return list(self.ends[0]) if self.ends else []

    def to_dict(self) -> dict:
        """A JSON-ready dict: the inputs, the fields at every ``n`` and the statements."""
        return _jsonable({
            "estimator": self.estimator, "family": self.family, "n": list(self.n),
            "d": self.d, "epsilon": self.epsilon, "delta": self.delta,
            "given_clusters": self.given_clusters,
            "at_n": [{"n": n, **e} for n, e in zip(self.n, self.ends, strict=True)],
            "can": self.can, "cannot": self.cannot, "verdict": self.verdict,
        })

    def __str__(self) -> str:
        n_txt = " to ".join(f"{n:,.0f}" for n in self.n)
        head = (f"{self.estimator} plan: n = {n_txt} records, d = {self.d}, epsilon = "
                f"{self.epsilon:g}" + ("" if self.delta is None else f", delta = {self.delta:g}")
                + ("" if self.given_clusters is None
                   else f", {self.given_clusters} clusters expected"))
        lines = [head]
        verdicts = self.verdict or [None] * len(self.n)
        for n, can, cannot, verdict in zip(self.n, self.can, self.cannot, verdicts, strict=True):
            if len(self.n) > 1:
                lines.append(f"at n = {n:,.0f}:")
            lines += ["  can find: " + c for c in can]
            lines += ["  cannot find: " + c for c in cannot]
            if verdict:
                lines.append("  " + verdict)
        return "\n".join(lines)


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def family_of(estimator) -> str:
    """The planner's family for ``estimator`` ('dpm', 'dbscan', 'kmeans', 'mixture',
    'density')."""
    if isinstance(estimator, DPM):
        return "dpm"
    if isinstance(estimator, DPDBSCAN):
        return "dbscan"
    if isinstance(estimator, DPGaussianMixture):
        return "mixture"
    if isinstance(estimator, DPHDBSCAN):
        return "density"
    if isinstance(estimator, _families.CENTRE_CLASSES):
        return "kmeans"
    raise TypeError(f"the planner has no model for {type(estimator).__name__}")


def _check_n(n) -> tuple:
    values = (n,) if isinstance(n, numbers.Real) else tuple(n)
    if not 1 <= len(values) <= 2 or any(
            isinstance(v, bool) or not isinstance(v, numbers.Real) or not v >= 2
            or not math.isfinite(v) for v in values):
        raise ValueError(f"n must be a number of records >= 2 or a (low, high) range, got {n!r}")
    if len(values) == 2 and values[0] > values[1]:
        raise ValueError(f"n range must be (low, high), got {n!r}")
    return tuple(float(v) for v in values)


def _bounds_and_d(estimator, d):
    bounds = getattr(estimator, "bounds", None)
    if bounds is None or is_private_bounds(bounds):
        raise ValueError("the planner needs public bounds (bounds=(lo, hi) or one row per "
                         "feature); bounds='private' are estimated from the data")
    arr = np.asarray(bounds, dtype=float)
    if arr.ndim == 2:
        if d is not None and int(d) != arr.shape[0]:
            raise ValueError(f"d={d} but the bounds have {arr.shape[0]} rows")
        d = arr.shape[0]
    elif d is None:
        raise ValueError("d (the number of features) is required when the bounds are one "
                         "(lo, hi) pair for every feature")
    d = int(d)
    return check_bounds(bounds, d), d


def plan(estimator, n, *, d=None, expected_clusters=None) -> FitPlan:
    """What a fit of ``estimator`` on ``n`` records can and cannot find, without the data.

    Parameters
    ----------
    estimator : an unfitted privclust estimator (its parameters and public bounds are read;
        :class:`~privclust.MorseMerging` is planned through its base estimator).
    n : int or (low, high)
        The number of records, or a range for it (the plan reports both ends).
    d : int, optional
        The number of features; taken from the bounds when they have one row per feature.
    expected_clusters : int, optional
        The number of clusters you expect (DPM: predicts how many of them it separates).

    Returns
    -------
    FitPlan
        Per-family fields (``min_cluster_size``, ``expected_levels``, ``expected_clusters``,
        ``noise_per_coordinate``, ``gamma_lower``, ``sigma``...), ``to_dict()`` and a readable
        ``str()``.

    Examples
    --------
    >>> from privclust import DPM
    >>> from privclust.planner import plan
    >>> fp = plan(DPM(epsilon=0.5, bounds=(-100, 100)), 20_000, d=10, expected_clusters=8)
    >>> fp.min_cluster_size
    156.25
    >>> round(fp.expected_clusters)
    8
    >>> print(str(fp).splitlines()[0])
    DPM plan: n = 20,000 records, d = 10, epsilon = 0.5, 8 clusters expected
    """
    base = getattr(estimator, "base_estimator", None)
    if base is not None and type(estimator).__name__ == "MorseMerging":
        estimator = base  # Morse merging is post-processing of its base's release
    family = family_of(estimator)
    ns = _check_n(n)
    if expected_clusters is not None and (
            isinstance(expected_clusters, bool)
            or not isinstance(expected_clusters, numbers.Integral) or expected_clusters < 1):
        raise ValueError(f"expected_clusters must be an int >= 1, got {expected_clusters!r}")
    bounds, d = _bounds_and_d(estimator, d)
    fields_at, describe, _ = _FAMILIES[family]
    ends = [fields_at(estimator, m, d, bounds, expected_clusters) for m in ns]
    words = [describe(e, m, expected_clusters) for e, m in zip(ends, ns, strict=True)]
    return FitPlan(
        estimator=type(estimator).__name__, family=family, n=ns, d=d,
        epsilon=float(estimator.epsilon), delta=getattr(estimator, "delta", None),
        given_clusters=expected_clusters, ends=ends,
        can=[w[0] for w in words], cannot=[w[1] for w in words],
        verdict=[_VERDICTS[family](e, m, float(estimator.epsilon), expected_clusters)
                 for e, m in zip(ends, ns, strict=True)],
    )


def quality_curve(estimator, n, epsilons, *, d=None, expected_clusters=None, metric=None):
    """Predicted quality against epsilon: ``{"epsilon", "metric", "n", "values"}``.

    ``metric`` is a field of the family's plan (default: DPM ``expected_clusters``, DBSCAN
    ``min_dense_window``, centre fits ``relative_centre_error``); ``values[i][j]`` is its value
    at ``epsilons[i]`` and the ``j``-th end of ``n``.
    """
    family = family_of(getattr(estimator, "base_estimator", None) or estimator)
    metric = metric or _FAMILIES[family][2]
    values = []
    for e in epsilons:
        est = copy.copy(estimator)
        est.set_params(epsilon=float(e))
        fp = plan(est, n, d=d, expected_clusters=expected_clusters)
        if metric not in fp.fields:
            raise ValueError(f"metric must be one of {fp.fields}, got {metric!r}")
        values.append([end[metric] for end in fp.ends])
    return {"epsilon": [float(e) for e in epsilons], "metric": metric,
            "n": list(_check_n(n)), "values": values}


def plot_quality_curve(estimator, n, epsilons, *, d=None, expected_clusters=None, metric=None,
                       ax=None, observed=None):
    """Plot :func:`quality_curve` (matplotlib imported here). ``observed``: optional
    ``(epsilons, values)`` measured, drawn as points. Returns the axes."""
    import matplotlib.pyplot as plt

    curve = quality_curve(estimator, n, epsilons, d=d, expected_clusters=expected_clusters,
                          metric=metric)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    vals = np.asarray(curve["values"], dtype=float)
    for j, m in enumerate(curve["n"]):
        ax.plot(curve["epsilon"], vals[:, j], marker="o", label=f"predicted, n = {m:,.0f}")
    if observed is not None:
        ax.plot(observed[0], observed[1], "kx", label="observed")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel(curve["metric"].replace("_", " "))
    ax.legend()
    return ax
