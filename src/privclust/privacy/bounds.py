"""Private bounds: every feature's range with pure epsilon-DP, from a few pooled releases.

Every privclust estimator needs public bounds: they clip the records and so bound every
sensitivity. When nobody can state them, they can be estimated privately at a small cost of the
budget. One noisy histogram per feature that keeps the bins above a threshold (the approach of
the "approximate bounds" of OpenDP and Google's DP libraries) needs thousands of records per
feature at ``epsilon / d`` each, and cuts every tail below its threshold. privclust instead
spends most of the budget on what one record moves by at most 1 *whatever d is*:

1. **record count**: the number of records with two-sided geometric noise. Too few records for
   the design (below :func:`min_records`, a function of epsilon and d only) are refused here,
   from the released count; the count also sets the grid's resolution below.
2. **feature scales**: per feature, the records in each bin of a public grid that is symmetric
   about 0 and geometric in magnitude (:func:`log_grid`, 1 to 8 steps per octave as the noisy
   count allows), released together at ``epsilon / d`` per feature (the features are of the
   same records). Post-processing finds each feature's *bulk*, not its tails: the mode of the
   magnitudes (a window of :data:`MODE_OCTAVES` octaves), extended over neighbouring bins whose
   noisy count clears the noise (:func:`feature_extents`), and the sign of the bulk (one-sided
   features, such as values near 1000, get an interval that excludes 0).
3. **feature zoom** (larger data only): for features whose bulk is narrow next to its distance
   from 0 (``1000 + N(0, 1)``), a linear histogram of :data:`ZOOM_BINS` bins across that bulk
   (:func:`zoom_extents`); the budget goes to the radius when no feature needs it.
4. **radius**: every record's scaled distance from the bulks, ``t = max_j |x_j - c_j| / s_j``
   (one number per record: sensitivity 1 under add/remove), counted on a public log-scale grid
   (:func:`radius_edges`); the radius is the smallest grid point above which the noisy counts
   leave at most :data:`TARGET_OUTSIDE` of the records, or, when the noise is too large to
   show that, the top of the well-populated range times a margin for a tail of index
   :data:`TAIL_INDEX` (:func:`radius_from_counts`).

The bounds are ``c_j -+ radius * s_j``; a feature whose bulk starts at 0 with many values at 0
and none seen below (counts, amounts) reaches only ``(radius - 1) * s_j / FLOOR_RATE`` below 0
(:func:`scaled_distance` counts a record below that floor as FLOOR_RATE times further out).

The budget is split in "units" of epsilon x records (:func:`design_units`): the count gets
:data:`COUNT_UNITS`, each feature :data:`FEATURE_UNITS` and the radius :data:`RADIUS_UNITS`, so
that at the smallest data set the design accepts (:func:`min_records`) every step has what it
needs, and above it every step gets more. A share of the features' budget (FLEX_SHARE) is
assigned by the noisy count: to the scales on small data, else to the zoom or the radius.

Limits (measured, ``benchmarks/private_bounds.py``): one radius serves every feature, so a few
heavy-tailed features (Student t, log-normal) widen the bounds of all the others; and features
far from 0 next to their spread are only zoomed into on larger data (FLEX_UNITS per feature),
below which their bounds are wide.

Everything after a release is post-processing of released values and public constants: no
decision reads the data outside a release (``tests/test_replay.py`` checks it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "COUNT_UNITS",
    "DEFAULT_SCALES",
    "FEATURE_UNITS",
    "FLEX_UNITS",
    "RADIUS_UNITS",
    "TAIL_INDEX",
    "TARGET_OUTSIDE",
    "ZOOM_BINS",
    "BoundsBudget",
    "budget_split",
    "design_units",
    "feature_extents",
    "fold_counts",
    "log_grid",
    "min_records",
    "narrow_features",
    "radius_edges",
    "radius_from_counts",
    "refusal_message",
    "resolution",
    "scaled_bounds",
    "scaled_distance",
    "sum_threshold",
    "zoom_extents",
    "zoom_grid",
]

#: Magnitudes the default grid covers: values beyond 1e9 fall in its outer bins; a feature within
#: 1e-6 of 0 gets the central bin (-1e-6, 1e-6).
DEFAULT_SCALES = (1e-6, 1e9)

#: Units (epsilon x records) of each step at the smallest data set the design accepts.
COUNT_UNITS = 20.0
FEATURE_UNITS = 18.0
RADIUS_UNITS = 60.0
#: Share of the features' budget that the record count assigns: to the feature scales on small
#: data (below FLEX_UNITS per feature), else to the zoom when a feature needs one, else to the
#: radius.
FLEX_SHARE = 0.35
FLEX_UNITS = 80.0
#: (units per feature, steps per octave): the finest grid each noisy count affords.
RESOLUTIONS = ((0.0, 1), (60.0, 2), (120.0, 4), (240.0, 8))
#: Width of the window that finds each feature's mode, in octaves.
MODE_OCTAVES = 4
#: Chance that an empty bin extends a feature's bulk (per bin looked at).
CHAIN_BETA = 0.01
#: An octave anywhere on the grid whose noisy count is above what the noise reaches with this
#: probability (over all octaves of a feature) belongs to the feature's bulk (a second cluster
#: at another magnitude, a sparse tail).
OCTAVE_BETA = 1e-4
#: A feature is one-sided when the other sign holds less than this share (noise allowed for).
SIGN_SHARE = 0.25
SIGN_Z = 2.0
#: Bins of the zoom, and the ratio top / bottom below which a one-sided bulk is zoomed into.
ZOOM_BINS = 16
NARROW_RATIO = 2.0
#: The zoom keeps every bin from the first whose cumulative count exceeds this many standard
#: deviations of its noise.
ZOOM_Z = 2.5
#: The radius grid: steps per octave and the octaves it spans.
RADIUS_STEPS = 2
RADIUS_OCTAVES = (-10, 40)
#: How much faster the scaled distance grows past a floor at 0 (features such as counts).
FLOOR_RATE = 8.0
#: Chance that an empty radius bin extends the populated range (per bin looked at), and the
#: width (bins) of the window that finds the densest part.
RADIUS_BETA = 0.005
MODE_BINS = 4
#: Share of the records the radius aims to leave outside the bounds.
TARGET_OUTSIDE = 0.01
#: Bins summed above a candidate radius, the noise allowance (in standard deviations), how far
#: above the populated range candidates are looked for, and the largest noise (standard
#: deviation of the sum, as a share of the target) at which candidates are looked at at all.
CERT_BINS, CERT_Z, CERT_SPAN, CERT_POWER = 4, 1.0, 8, 0.5
#: The tail index the margin assumes when the counts cannot show the tail (Student t with 3
#: degrees of freedom has index 3; a smaller index is more cautious).
TAIL_INDEX = 2.5
#: The noise allowance (standard deviations) on the records above the populated range there.
TAIL_Z = 2.5


# ----------------------------------------------------------------------------- the budget
def design_units(d: int) -> float:
    """epsilon x records the design needs at its smallest data set, for ``d`` features."""
    return COUNT_UNITS + FEATURE_UNITS * int(d) + RADIUS_UNITS


def min_records(epsilon: float, d: int) -> int:
    """The smallest number of records private bounds work with at ``epsilon`` and ``d``
    features (public values only): ``design_units(d) / epsilon``."""
    return int(math.ceil(design_units(d) / float(epsilon) - 1e-9))


@dataclass(frozen=True)
class BoundsBudget:
    """The epsilon of each step (they add up to the release's epsilon)."""

    count: float
    scales: float
    zoom: float
    radius: float

    @property
    def total(self) -> float:
        """The release's epsilon."""
        return self.count + self.scales + self.zoom + self.radius


def budget_split(epsilon: float, d: int) -> BoundsBudget:
    """Each step's epsilon, in proportion to its units (the zoom is the features' FLEX_SHARE)."""
    units = design_units(d)
    features = epsilon * FEATURE_UNITS * d / units
    return BoundsBudget(epsilon * COUNT_UNITS / units, features * (1 - FLEX_SHARE),
                        features * FLEX_SHARE, epsilon * RADIUS_UNITS / units)


def noise_sd(epsilon: float) -> float:
    """Standard deviation of two-sided geometric noise at ``epsilon`` (sensitivity 1)."""
    a = math.exp(-epsilon)
    return math.sqrt(2.0 * a) / (1.0 - a)


def sum_threshold(epsilon: float, terms: int, tail: float) -> float:
    """A level that the sum of ``terms`` independent two-sided geometric noises at ``epsilon``
    exceeds with probability at most ``tail`` (the Chernoff bound on their exact moment
    generating function, ``(1 - a)^2 / ((1 - a e^s)(1 - a e^-s))`` with ``a = e^-epsilon``)."""
    s = epsilon * np.linspace(0.01, 0.99, 99)
    log_mgf = (2 * math.log1p(-math.exp(-epsilon)) - np.log1p(-np.exp(s - epsilon))
               - np.log1p(-np.exp(-s - epsilon)))
    return float(np.min((terms * log_mgf - math.log(tail)) / s))


def resolution(n_low: float, eps_features: float, d: int) -> int:
    """Grid steps per octave for a lower estimate ``n_low`` of the records (from the released
    count): the finer grids need more records per feature."""
    units = n_low * eps_features / max(int(d), 1)
    return max(p for need, p in RESOLUTIONS if units >= need)


def refusal_message(epsilon: float, d: int) -> str:
    """One sentence for data sets below :func:`min_records` (public values only)."""
    return (f"too few records for private bounds: at epsilon={epsilon:g} for the bounds (with "
            f"bounds='private', a share of the fit's epsilon) and {d} feature"
            f"{'s' if d != 1 else ''}, they need about {min_records(epsilon, d):,} records; "
            "give public bounds, or more epsilon")


# ----------------------------------------------------------------------------- the grid
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


def fold_counts(noisy: np.ndarray, edges: np.ndarray):
    """Split (d, len(edges) + 1) counts on :func:`log_grid` edges into ``(central, pos, neg,
    mags)``: ``pos[:, k]`` / ``neg[:, k]`` count magnitudes in ``[mags[k], mags[k + 1])`` on
    each side of 0 (the last one open-ended), ``central`` the bin around 0."""
    m = edges.size // 2
    mags = edges[m:]
    noisy = np.asarray(noisy, dtype=float)
    return noisy[:, m], noisy[:, m + 1:], noisy[:, m - 1::-1], np.append(mags, 2 * mags[-1])


# ----------------------------------------------------------------------------- feature bulks
def _chain(counts: np.ndarray, k0: int, threshold: float, gap: int) -> tuple[int, int]:
    """The run of bins around ``k0`` whose counts reach ``threshold``, gaps of up to ``gap``
    bins bridged."""
    lo = hi = k0
    size = counts.size
    while True:
        ahead = np.flatnonzero(counts[hi + 1:min(hi + 2 + gap, size)] >= threshold)
        if not ahead.size:
            break
        hi += 1 + int(ahead[0])
    while True:
        start = max(lo - 1 - gap, 0)
        behind = np.flatnonzero(counts[start:lo] >= threshold)
        if not behind.size:
            break
        lo = start + int(behind[-1])
    return lo, hi


def _bulk(central, pos, neg, mags, per_octave, eps_feature, t_octave):
    """One feature's bulk from its noisy histogram: ``(lo, hi, away)``, ``away`` when the bulk
    is on one side of 0 and excludes it. ``t_octave``: the level an octave's noisy count must
    reach to count as mass (:func:`sum_threshold`)."""
    sd = noise_sd(eps_feature)
    t_one = math.log(1 / (2 * CHAIN_BETA)) / eps_feature
    t_fold = math.sqrt(2.0) * t_one  # a folded bin adds two noises
    w = MODE_OCTAVES * per_octave
    folded = pos + neg
    sums = np.convolve(folded, np.ones(w), mode="valid")
    j = int(np.argmax(sums))
    sd_window = math.sqrt(2.0 * w) * sd
    if sums[j] < 5 * sd_window and central > sums[j] + 3 * sd_window:
        # no window clears the noise and the central bin holds clearly more: all at 0
        return -mags[0], mags[0], False
    logs = np.log2(mags[:-1]) + 0.5 / per_octave
    weight = np.maximum(folded[j:j + w], 0.0)
    m = (float(weight @ logs[j:j + w] / weight.sum()) if weight.sum() > 0
         else float(logs[j:j + w].mean()))
    top, bottom = 2.0 ** (m + 1.0 / per_octave), 2.0 ** (m - 1.0 / per_octave)
    k0 = j + int(np.argmax(folded[j:j + w]))
    if folded[k0] >= t_fold:
        a, b = _chain(folded, k0, t_fold, 1)
        top, bottom = max(top, mags[b + 1]), min(bottom, mags[a])
    else:
        a, b = j, j + w - 1
    octaves = np.convolve(folded, np.ones(per_octave), mode="valid")
    seen = np.flatnonzero(octaves >= t_octave)
    if seen.size:  # mass elsewhere (another cluster, a sparse tail): the bulk reaches it
        # the outermost octaves that clear the noise hold their mass where they overlap the
        # next ones: the first octave's last bin, the last octave's first bin
        first, last = int(seen[0]) + per_octave - 1, int(seen[-1])
        first, last = min(first, last), max(first, last)
        top, bottom = max(top, mags[last + 1]), min(bottom, mags[first])
        a, b = min(a, first), max(b, last)
    a, b = min(a, j), max(b, j + w - 1)  # the sign is read over the mode's window too
    plus, minus = pos[a:b + 1].sum(), neg[a:b + 1].sum()
    allowance = SIGN_Z * math.sqrt(b - a + 1) * sd
    zero = central >= t_one
    if minus + allowance < SIGN_SHARE * plus:
        return (0.0 if zero else bottom), top, not zero
    if plus + allowance < SIGN_SHARE * minus:
        return -top, (0.0 if zero else -bottom), not zero
    return -top, top, False


def feature_extents(noisy: np.ndarray, edges: np.ndarray, per_octave: int,
                    eps_feature: float) -> tuple[np.ndarray, np.ndarray]:
    """Post-processing of the released (d, len(edges) + 1) counts on ``log_grid(.., per_octave)``
    (noise at ``eps_feature`` per feature): every feature's bulk ``(lo, hi)`` and whether it is
    on one side of 0 and excludes it (a bulk that starts at 0 does not)."""
    central, pos, neg, mags = fold_counts(noisy, edges)
    d = central.size
    t_octave = sum_threshold(eps_feature, 2 * per_octave,
                             OCTAVE_BETA / (pos.shape[1] - per_octave + 1))
    out, one_sided = np.empty((d, 2)), np.zeros(d, dtype=bool)
    for f in range(d):
        lo, hi, side = _bulk(central[f], pos[f], neg[f], mags, per_octave, eps_feature,
                             t_octave)
        out[f], one_sided[f] = (lo, hi), side
    return out, one_sided


def narrow_features(extents: np.ndarray, one_sided: np.ndarray) -> np.ndarray:
    """Indices of the one-sided features whose bulk spans less than a factor NARROW_RATIO."""
    lo, hi = np.abs(extents).min(axis=1), np.abs(extents).max(axis=1)
    return np.flatnonzero(one_sided & (lo > 0) & (hi <= NARROW_RATIO * lo))


def zoom_grid(extents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zoom's public grid (from released bulks): per feature its lower edge and bin width
    (ZOOM_BINS bins across the bulk, one overflow bin on each side)."""
    lo = extents[:, 0]
    return lo, (extents[:, 1] - lo) / ZOOM_BINS


def _trim(row: np.ndarray, allowance: float) -> int:
    """How many bins from the start of ``row`` hold no mass the noise could not explain (their
    cumulative noisy count stays below ``allowance * sqrt(bins)``)."""
    sums = np.cumsum(row)
    k = 0
    while k < row.size and sums[k] < allowance * math.sqrt(k + 1):
        k += 1
    return k


def zoom_extents(noisy: np.ndarray, lo: np.ndarray, width: np.ndarray, eps_each: float,
                 extents: np.ndarray) -> np.ndarray:
    """Post-processing of the zoom's released (k, ZOOM_BINS + 2) counts: each zoomed feature's
    bulk, narrowed from both ends past the bins whose cumulative count the noise explains (an
    end whose overflow bin holds mass stays where it was)."""
    noisy = np.asarray(noisy, dtype=float)
    allowance = ZOOM_Z * noise_sd(eps_each)
    out = np.array(extents, dtype=float, copy=True)
    for i, row in enumerate(noisy):
        a = _trim(row, allowance)  # the first bin kept
        b = row.size - 1 - _trim(row[::-1], allowance)  # the last bin kept
        if a > b:
            continue  # nothing clears the noise: keep the bulk
        if 1 <= a <= ZOOM_BINS:
            out[i, 0] = lo[i] + (a - 1) * width[i]
        if 1 <= b <= ZOOM_BINS:
            out[i, 1] = lo[i] + b * width[i]
    return out


# ----------------------------------------------------------------------------- the radius
def radius_edges() -> np.ndarray:
    """The radius grid's public edges (scaled distances, log scale)."""
    lo, hi = RADIUS_OCTAVES
    return np.exp2(np.arange(lo * RADIUS_STEPS, hi * RADIUS_STEPS + 1) / RADIUS_STEPS)


def _populated_top(noisy: np.ndarray, eps_radius: float) -> int | None:
    """The highest bin of the run that climbs from the densest window (MODE_BINS bins) over
    bins that clear the noise (one empty bin bridged), or None when no window clears it."""
    step = math.log(1 / (2 * RADIUS_BETA)) / eps_radius
    sums = np.convolve(noisy, np.ones(MODE_BINS), mode="valid")
    j = int(np.argmax(sums))
    if sums[j] < sum_threshold(eps_radius, MODE_BINS, RADIUS_BETA / sums.size):
        return None
    k = j + int(np.argmax(noisy[j:j + MODE_BINS]))
    size = noisy.size
    while True:
        if k + 1 < size and noisy[k + 1] >= step:
            k += 1
        elif k + 2 < size and noisy[k + 2] >= step:
            k += 2
        else:
            return k


def radius_from_counts(noisy: np.ndarray, edges: np.ndarray, eps_radius: float,
                       n_hat: float) -> float:
    """Post-processing of a released radius histogram (bin ``k`` is ``[edges[k-1], edges[k])``;
    records at distance 0 are not in it): the radius. When no bin clears the noise, the records
    beyond the bulks' edges (distance 1) are too few to show, and the margin starts there."""
    noisy = np.asarray(noisy, dtype=float)
    size = noisy.size
    sd = noise_sd(eps_radius)
    target = TARGET_OUTSIDE * max(float(n_hat), 1.0)
    step = math.log(1 / (2 * RADIUS_BETA)) / eps_radius
    k = _populated_top(noisy, eps_radius)
    if k is None:
        return float(max(step / target, 1.0) ** (1 / TAIL_INDEX))
    for kk in range(k, min(k + CERT_SPAN, size - 1)):
        m = min(CERT_BINS, size - 1 - kk)
        allowance = CERT_Z * sd * math.sqrt(m)
        if sd * math.sqrt(m) > CERT_POWER * target:
            break  # the noise hides a tail of the target's size: no point can be shown
        if noisy[kk + 1:kk + 1 + m].sum() + allowance <= target:
            return float(edges[min(kk, edges.size - 1)])
    m = min(CERT_BINS, size - 1 - k)
    above = max(noisy[k + 1:k + 1 + m].sum() + TAIL_Z * sd * math.sqrt(m), step)
    return float(edges[min(k, edges.size - 1)] * max(above / target, 1.0) ** (1 / TAIL_INDEX))


def _floors(extents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Features whose bulk starts (ends) exactly at 0: one-sided with many values at 0 and none
    seen below (above) it, such as counts."""
    return extents[:, 0] == 0.0, extents[:, 1] == 0.0


def scaled_distance(x: np.ndarray, extents: np.ndarray) -> np.ndarray:
    """Every row's scaled distance from the bulks, ``max_j |x_j - c_j| / s_j`` (``c``, ``s``:
    each bulk's centre and half-width), except past a floor at 0, where it grows FLOOR_RATE
    times faster (so that the bounds :func:`scaled_bounds` draws from it reach past the floor
    FLOOR_RATE times less far than past the top)."""
    centre = extents.mean(axis=1)
    half = (extents[:, 1] - extents[:, 0]) / 2
    z = np.abs(np.asarray(x, dtype=float) - centre) / half
    low, high = _floors(extents)
    if low.any() or high.any():
        past = (low & (x < 0)) | (high & (x > 0))
        z = np.where(past, 1.0 + FLOOR_RATE * np.abs(x) / half, z)
    return z.max(axis=1)


def scaled_bounds(extents: np.ndarray, radius: float, max_abs: float, min_width: float,
                  min_relative: float) -> np.ndarray:
    """The records within ``radius`` by :func:`scaled_distance`: ``c -+ radius * s`` per
    feature, or ``-(radius - 1) * s / FLOOR_RATE`` past a floor at 0; kept inside ``+-max_abs``
    and at least the narrowest width the estimators compute with."""
    centre = extents.mean(axis=1)
    half = np.maximum((extents[:, 1] - extents[:, 0]) / 2, 0.0)
    low, high = _floors(extents)
    past = max(radius - 1.0, 0.0) / FLOOR_RATE
    lo = np.where(low & (radius >= 1), -past * half, centre - radius * half)
    hi = np.where(high & (radius >= 1), past * half, centre + radius * half)
    floor = np.maximum(min_width, 2 * min_relative * np.maximum(np.abs(lo), np.abs(hi)))
    lo, hi = np.where(hi - lo < floor, centre - floor, lo), np.where(hi - lo < floor,
                                                                      centre + floor, hi)
    lo = np.clip(lo, -max_abs, max_abs)
    hi = np.clip(hi, -max_abs, max_abs)
    squeezed = hi - lo < np.maximum(min_width, min_relative * np.maximum(np.abs(lo), np.abs(hi)))
    lo = np.where(squeezed & (hi >= max_abs), max_abs * (1 - 4 * min_relative), lo)
    hi = np.where(squeezed & (lo <= -max_abs), -max_abs * (1 - 4 * min_relative), hi)
    return np.column_stack([lo, hi])
