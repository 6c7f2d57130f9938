"""Private bounds: each feature's range from a noisy histogram on a public log-scale grid.

Every privclust estimator needs public bounds: they clip the records and so bound every
sensitivity. When nobody can state them, they can be estimated privately at a small cost of the
budget (the approach of the "approximate bounds" of OpenDP and of Google's DP libraries, on a
finer grid):

1. a **public** grid of bin edges, symmetric about 0 and geometric in magnitude:
   ``+-2^(j / per_octave)`` for magnitudes in ``scales`` (default ``1e-6 .. 1e9``), so that a
   feature whose values span 1e-3 and one that spans 1e6 are both bounded to within a factor
   ``2^(1/per_octave)`` of their magnitude, whatever their scale (default one bin per octave:
   finer bins hold fewer records each, and a tail bin below the threshold is cut);
2. per feature, the exact number of records in each bin (a record is in one bin per feature:
   each feature's histogram has L1 sensitivity 1 under add/remove; the d histograms are of the
   same records, so each gets ``epsilon / d``, sequential composition);
3. two-sided geometric noise on every bin (:meth:`Mechanisms.count`), then, per feature, the
   lower bound is the lower edge of the lowest bin whose noisy count reaches the threshold
   ``T`` and the upper bound the upper edge of the highest one (post-processing).

``T`` is the smallest count for which an *empty* bin reaches it with probability at most
``beta`` over all bins of a feature: ``n_bins * a^T / (1 + a) <= beta`` with ``a = e^-eps_f``.
So with probability at least ``1 - beta`` per feature no empty bin is taken, and the bounds lie
within the data's own bins: never looser than one bin (a factor ``2^(1/per_octave)``) beyond
the data. The price: a tail bin holding fewer than about ``T`` records may be left out, and
those records are clipped to the bounds like any record outside public bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["DEFAULT_SCALES", "BoundsRelease", "bound_threshold", "bounds_from_noisy_counts",
           "log_grid"]

#: Magnitudes the default grid covers: values beyond 1e9 are clipped to it; a feature within
#: 1e-6 of 0 gets the central bin (-1e-6, 1e-6).
DEFAULT_SCALES = (1e-6, 1e9)


def log_grid(scales=DEFAULT_SCALES, per_octave: int = 1) -> np.ndarray:
    """The public bin edges, ascending: ``-s_max .. -s_min, s_min .. s_max`` with
    ``per_octave`` geometric steps per factor of 2. Bins: ``(-inf, e_0)``, ``[e_i, e_i+1)``
    and ``[e_last, inf)``; the central bin ``[-s_min, s_min)`` holds 0."""
    lo, hi = (float(s) for s in scales)
    if not (0 < lo < hi and math.isfinite(hi)):
        raise ValueError(f"scales must be two magnitudes 0 < min < max, got {scales!r}")
    if isinstance(per_octave, bool) or not isinstance(per_octave, int) or not 1 <= per_octave <= 64:
        raise ValueError(f"per_octave must be an int in 1..64, got {per_octave!r}")
    j = np.arange(math.floor(math.log2(lo) * per_octave), math.ceil(math.log2(hi) * per_octave) + 1)
    mags = np.exp2(j / per_octave)
    return np.concatenate([-mags[::-1], mags])


def bound_threshold(epsilon_per_feature: float, n_bins: int, beta: float) -> int:
    """Smallest ``T`` with ``n_bins * P(Z >= T) <= beta`` for two-sided geometric noise ``Z``
    at ``epsilon_per_feature`` (``P(Z >= T) = a^T / (1 + a)``, ``a = e^-eps``)."""
    eps = float(epsilon_per_feature)
    if not (eps > 0 and 0 < beta < 1):
        raise ValueError(f"need epsilon > 0 and 0 < beta < 1, got {eps!r}, {beta!r}")
    a = math.exp(-eps)
    t = math.log(beta * (1.0 + a) / n_bins) / math.log(a)
    return max(1, math.ceil(t - 1e-12))


@dataclass(frozen=True)
class BoundsRelease:
    """What the bounds release found: ``bounds`` (d, 2), the ``threshold`` T, and per feature
    the indices of the lowest and highest bins taken."""

    bounds: np.ndarray
    threshold: int
    low_bins: np.ndarray
    high_bins: np.ndarray


def bounds_from_noisy_counts(noisy: np.ndarray, edges: np.ndarray, threshold: int,
                             margin_bins: int = 0) -> BoundsRelease:
    """Post-processing of the released (d, len(edges) + 1) noisy counts: per feature the outer
    edges of the lowest and highest bins whose noisy count reaches ``threshold``, widened by
    ``margin_bins`` bins on each side (sparse tails kept, at the price of looser bounds)."""
    noisy = np.asarray(noisy)
    hit = noisy >= threshold
    found = hit.any(axis=1)
    if not found.all():
        missing = np.flatnonzero(~found).tolist()
        raise ValueError(
            f"private bounds: no bin of feature(s) {missing[:10]} reached the threshold "
            f"{threshold}; there are too few records for this epsilon. Give public bounds, "
            "more epsilon for the bounds, or a coarser grid (smaller per_octave)"
        )
    low = np.maximum(np.argmax(hit, axis=1) - margin_bins, 0)
    high = np.minimum(hit.shape[1] - 1 - np.argmax(hit[:, ::-1], axis=1) + margin_bins,
                      hit.shape[1] - 1)
    # bin i spans [edges[i-1], edges[i]); the outer bins are clipped to the grid's ends
    m = edges.size
    lo = edges[np.maximum(low - 1, 0)]
    hi = edges[np.minimum(high, m - 1)]
    # only records beyond the grid's ends put both bounds on one end: keep the outer step
    lo = np.where((hi <= lo) & (low == m), edges[m - 2], lo)
    hi = np.where((hi <= lo) & (high == 0), edges[1], hi)
    return BoundsRelease(np.column_stack([lo, hi]).astype(float), int(threshold), low, high)
