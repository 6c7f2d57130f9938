"""Checks on the candidates of a private selection, made before any data is read.

Every message names the user's parameter (``candidates``, ``epsilon``, ``selection_share``) and
what to do; none states anything about the data.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import clone

from ..cluster import DPDBSCAN, DPGaussianMixture
from ..cluster._base import (
    MIN_EPSILON,
    PRIVATE_BOUNDS_SHARE,
    PrivateClusterMixin,
    check_bounds,
    is_private_bounds,
)

__all__ = ["candidate_label", "check_candidates", "check_one_zcdp_block", "check_shares",
           "grid_candidates", "size_param", "takes_delta"]

#: Estimators whose fit releases no centres: the selection's score cannot be computed for them.
_NO_CENTRES = (DPDBSCAN,)
#: Estimators whose plan holds a zCDP line item (a plan holds one; see ``check_candidates``).
_ZCDP = (DPGaussianMixture,)
#: The parameter that sets the number of clusters, in the order looked for.
_SIZE_PARAMS = ("n_clusters", "n_components")


def size_param(est) -> str | None:
    """The name of the estimator's number-of-clusters parameter, or None (DPM finds its own)."""
    params = est.get_params(deep=False)
    return next((p for p in _SIZE_PARAMS if p in params), None)


def takes_delta(est) -> bool:
    """Whether the estimator has a ``delta`` parameter (approximate DP or the delta rule)."""
    return "delta" in est.get_params(deep=False)


def candidate_label(est) -> str:
    """``DPLloyd(n_clusters=16)``: the class and its number of clusters, for the report."""
    p = size_param(est)
    size = f"{p}={est.get_params(deep=False)[p]}" if p else ""
    return f"{type(est).__name__}({size})"


def check_candidates(candidates) -> list:
    """The candidates as a list of unfitted clones, or a clear error (before any data is read)."""
    if isinstance(candidates, PrivateClusterMixin) or not isinstance(candidates, (list, tuple)):
        raise TypeError(
            "candidates must be a list of privclust estimators, e.g. [DPLloyd(8, bounds=b), "
            f"DPLloyd(16, bounds=b)]; got {type(candidates).__name__}"
        )
    if len(candidates) < 2:
        raise ValueError(
            f"candidates holds {len(candidates)} estimator(s); a selection needs at least two, "
            "e.g. [DPLloyd(8, bounds=b), DPLloyd(16, bounds=b)]"
        )
    for i, est in enumerate(candidates):
        _check_one(i, est)
    if sum(isinstance(c, _ZCDP) for c in candidates) > 1:
        raise ValueError(
            "candidates holds more than one DPGaussianMixture; a selection's plan holds one "
            "zCDP block, so choose among at most one mixture (e.g. mixtures of different sizes "
            "in separate selections)"
        )
    _check_feature_counts(candidates)
    return [clone(c) for c in candidates]


def check_one_zcdp_block(candidates) -> None:
    """At most one candidate keeps a zCDP block at the delta the selection gave it (a plan
    holds one): checked from the parameters, before the plan is booked and any data is read,
    so that no candidate is refused after others have spent."""
    keeping = [(i, c) for i, c in enumerate(candidates)
               if c.keeps_zcdp_block(c.get_params(deep=False).get("delta", 0.0))]
    if len(keeping) < 2:
        return
    (i, a), (j, b) = keeping[:2]
    fix = "keep one of them"
    if not any(c.keeps_zcdp_block(0.0) for _, c in keeping):
        names = ", ".join(sorted({type(c).__name__ for _, c in keeping}))
        fix = (f"pass delta=0 to the selection ({names} then adds Laplace noise to its sums: "
               "pure epsilon-DP), or keep one of them")
    raise ValueError(
        f"candidates[{i}] ({type(a).__name__}) and candidates[{j}] ({type(b).__name__}) would "
        f"each keep a zCDP block (Gaussian noise on their sums), and a selection's plan holds "
        f"one; {fix}"
    )


def _check_one(i: int, est) -> None:
    name = type(est).__name__
    if not isinstance(est, PrivateClusterMixin):
        raise TypeError(
            f"candidates[{i}] is a {name}, not a privclust centre model; PrivateSelection "
            "chooses among privclust estimators such as DPLloyd, HSTKMeans, LSHSplits or DPM"
        )
    if isinstance(est, _NO_CENTRES):
        raise ValueError(
            f"candidates[{i}] is a {name}, which releases dense regions, not centres; the "
            "selection scores released centres, so use centre models (DPLloyd, DPM, ...)"
        )
    p = size_param(est)
    if p is not None:
        k = est.get_params(deep=False)[p]
        if isinstance(k, numbers.Integral) and not isinstance(k, bool) and k == 1:
            raise ValueError(
                f"candidates[{i}] ({name}) has {p}=1; one centre scores 0 on every record (the "
                "least any candidate can score), so leave it out and use 2 or more"
            )


def _bounds_features(bounds) -> int | None:
    """How many features ``bounds`` describes, or None for one ``(lo, hi)`` pair (any number)
    or a form check_bounds will refuse with its own message."""
    if bounds is None or is_private_bounds(bounds):
        return None
    if isinstance(bounds, dict):
        lower = np.asarray(bounds.get("lower", []), dtype=object)
        return int(lower.size) if lower.ndim == 1 and lower.size > 1 else None
    try:
        b = np.asarray(bounds, dtype=float)
    except (TypeError, ValueError):
        return None
    if b.ndim != 2:
        return None
    if b.shape[1] == 2:
        return int(b.shape[0])
    return int(b.shape[1]) if b.shape[0] == 2 else None


def _check_feature_counts(candidates) -> None:
    counts = {i: _bounds_features(getattr(c, "bounds", None)) for i, c in enumerate(candidates)}
    known = {i: d for i, d in counts.items() if d is not None}
    if len(set(known.values())) > 1:
        shown = ", ".join(f"candidates[{i}]: {d}" for i, d in list(known.items())[:4])
        raise ValueError(
            f"the candidates' bounds are for different numbers of features ({shown}); give "
            "every candidate bounds for the same features"
        )


def check_bounds_for(candidates, d: int) -> None:
    """Every candidate's public bounds fit ``d`` features (``d`` is the shape of X: public)."""
    for i, est in enumerate(candidates):
        bounds = getattr(est, "bounds", None)
        if is_private_bounds(bounds):
            continue
        try:
            check_bounds(bounds, d)
        except ValueError as exc:
            raise ValueError(f"candidates[{i}] ({type(est).__name__}): {exc}") from None


def check_shares(epsilon: float, selection_share, n_candidates: int, private_bounds: bool):
    """``(bounds epsilon, each candidate's epsilon, selection epsilon)`` or a clear error."""
    if isinstance(selection_share, bool) or not isinstance(selection_share, numbers.Real) or \
            not 0 < selection_share < 1:
        raise ValueError(
            f"selection_share must be a number in (0, 1), the share of epsilon the selection "
            f"step spends (e.g. 0.05); got {selection_share!r}"
        )
    eps_bounds = PRIVATE_BOUNDS_SHARE * epsilon if private_bounds else 0.0
    eps_select = float(selection_share) * epsilon
    each = (epsilon - eps_bounds - eps_select) / n_candidates
    if min(each, eps_select, eps_bounds or MIN_EPSILON) < MIN_EPSILON:
        raise ValueError(
            f"epsilon={epsilon:g} split over {n_candidates} candidates and the selection "
            f"(selection_share={selection_share:g}) leaves a share below privclust's smallest "
            f"epsilon ({MIN_EPSILON:g}); raise epsilon or use fewer candidates"
        )
    return eps_bounds, each, eps_select


def grid_candidates(estimator, n_clusters) -> list:
    """Clones of ``estimator``, one per value of ``n_clusters`` (set on its ``n_clusters`` or
    ``n_components`` parameter)."""
    if not isinstance(estimator, PrivateClusterMixin):
        raise TypeError(
            f"estimator must be a privclust estimator such as DPLloyd(bounds=b); got "
            f"{type(estimator).__name__}"
        )
    p = size_param(estimator)
    if p is None:
        raise ValueError(
            f"estimator {type(estimator).__name__} has no n_clusters or n_components parameter "
            "to vary; pass the candidates to PrivateSelection yourself"
        )
    values = list(np.atleast_1d(np.asarray(n_clusters, dtype=object)))
    if not values:
        raise ValueError("n_clusters is empty; pass the numbers of clusters to choose "
                         "among, e.g. [8, 16, 32]")
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, numbers.Integral)]
    if bad:
        raise ValueError(f"n_clusters must hold ints >= 2, e.g. [8, 16, 32]; got {bad[0]!r}")
    return [clone(estimator).set_params(**{p: int(v)}) for v in values]
