"""Noise mechanisms: the only place in privclust where noise is drawn.

Two layers:

* pure functions (``two_sided_geometric``, ``exponential_mechanism``, ``private_quantile``, ...)
  that take a ``numpy.random.Generator`` and return noisy values;
* :class:`Mechanisms`, bound to a fit's generator and :class:`~privclust.privacy.PrivacyReport`,
  which draws *and* writes the ledger entry in one call. Estimators use only this class, so a
  release cannot happen without being recorded.

Every draw goes through one of the ``_draw_*`` primitives below; tests instrument them to prove
that the noise actually drawn matches the ledger.

Floating-point attack (Mironov 2012). Textbook Laplace sampling on doubles leaks through the
pattern of representable outputs. privclust therefore releases **integer counts with discrete
noise** (two-sided geometric, exact integers: nothing to read in the low bits). Continuous
releases (sums, means, the exponential mechanism's Gumbel noise, the quantile's uniform draw) use
NumPy's floating-point samplers on clipped inputs; this is the same caveat every mainstream DP
library carries for floats, documented rather than hidden. Vetted samplers (e.g. OpenDP) were
measured 160-500x slower than NumPy, too slow for histograms of millions of cells.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from .. import _parallel
from .budget import PrivacyReport, Release
from .rng import RandomSource

__all__ = [
    "Mechanisms",
    "classic_gaussian_sigma",
    "count_offset",
    "exponential_mechanism",
    "exponential_mechanism_probabilities",
    "gaussian_sigma",
    "grid_quantile",
    "laplace_noise",
    "private_quantile",
    "quantile_grid",
    "two_sided_geometric",
    "zcdp_gaussian_sigma",
]


# --------------------------------------------------------------------------- draw primitives
def _draw_two_sided_geometric(rng: np.random.Generator, epsilon_per_unit: float, size):
    """Z = G1 - G2 with G ~ Geometric(1 - e^-eps): P(Z = z) proportional to e^(-eps |z|)."""
    p = -math.expm1(-epsilon_per_unit)
    return rng.geometric(p, size=size).astype(np.int64) - rng.geometric(p, size=size)


#: The first geometric variables of a draw in parts are drawn in batches of this many.
_GEOMETRIC_BATCH = 1 << 22


def _draw_two_sided_geometric_parts(rng: np.random.Generator, epsilon_per_unit: float, sizes):
    """:func:`_draw_two_sided_geometric` of ``sum(sizes)`` values, yielded in parts of
    ``sizes``: the same values, from the same draws in the same order (every first geometric
    variable, then every second one, each stream drawn value by value). The first ones are
    held meanwhile, as int32 where they fit (4 bytes a value instead of the 24 of the three
    int64 arrays of one draw); each part's second ones are drawn when the part is read."""
    p = -math.expm1(-epsilon_per_unit)
    sizes = [int(s) for s in sizes]
    total = sum(sizes)
    first = np.empty(total, dtype=np.int32)
    for start in range(0, total, _GEOMETRIC_BATCH):
        g = rng.geometric(p, size=min(_GEOMETRIC_BATCH, total - start))
        if g.size and g.max() > np.iinfo(np.int32).max:
            first = first.astype(np.int64)
        first[start : start + g.size] = g
    start = 0
    for s in sizes:
        yield first[start : start + s].astype(np.int64) - rng.geometric(p, size=s)
        start += s


def _draw_laplace(rng: np.random.Generator, scale, size):
    return rng.laplace(0.0, 1.0, size=size) * scale


def _draw_gaussian(rng: np.random.Generator, sigma, size):
    return rng.standard_normal(size=size) * sigma


def _draw_gumbel(rng: np.random.Generator, scale, size):
    return rng.gumbel(0.0, 1.0, size=size) * scale


def _draw_uniform(rng: np.random.Generator, low, high):
    return rng.uniform(low, high)


def _draw_binomial(rng: np.random.Generator, n: int, p: float) -> int:
    """m ~ Binomial(n, p): how many empty cells pass the sparse histogram's threshold."""
    return int(rng.binomial(n, p))


def _draw_cell_indices(rng: np.random.Generator, n_cells: int, size: int) -> np.ndarray:
    """``size`` i.i.d. uniform cell indices in ``[0, n_cells)`` (for rejection sampling)."""
    return rng.integers(0, n_cells, size=size, dtype=np.int64)


def _draw_choice(rng: np.random.Generator, population: int, size: int) -> np.ndarray:
    """A uniform ``size``-subset of ``range(population)`` in random order (no replacement)."""
    return np.asarray(rng.choice(population, size=size, replace=False), dtype=np.int64)


# --------------------------------------------------------------------------- calibration
def _check_eps(epsilon: float) -> float:
    if not (epsilon > 0) or not math.isfinite(epsilon):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon}")
    return float(epsilon)


def _check_delta(delta: float) -> float:
    if not (0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    return float(delta)


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest sigma for which the Gaussian mechanism is (epsilon, delta)-DP.

    The analytic Gaussian mechanism (Balle & Wang 2018, Thm. 8): the exact privacy profile
    ``Phi(D/2s - eps s/D) - e^eps Phi(-D/2s - eps s/D) <= delta``, solved for sigma. Valid for
    every epsilon > 0 (unlike the classic ``sqrt(2 ln(1.25/delta)) D / eps``, which needs eps < 1).
    Sigma scales linearly with the L2 sensitivity D.
    """
    eps, delta = _check_eps(epsilon), _check_delta(delta)

    def excess(log_sigma: float) -> float:
        s = math.exp(log_sigma)
        a = 1 / (2 * s) - eps * s
        b = -1 / (2 * s) - eps * s
        return float(ndtr(a) - math.exp(eps + log_ndtr(b)) - delta)

    lo, hi = -40.0, 40.0
    log_s = brentq(excess, lo, hi, xtol=1e-14, rtol=1e-14, maxiter=500)
    # brentq returns a point within tolerance; nudge up so the profile holds, not nearly holds.
    while excess(log_s) > 0:
        log_s += 1e-12
    return math.exp(log_s) * float(sensitivity)


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """``sqrt(2 ln(1.25/delta)) * sensitivity / epsilon`` (Dwork & Roth Thm. A.1, eps < 1)."""
    eps, delta = _check_eps(epsilon), _check_delta(delta)
    return math.sqrt(2 * math.log(1.25 / delta)) * float(sensitivity) / eps


def zcdp_gaussian_sigma(rho: float, sensitivity: float = 1.0) -> float:
    """sigma = sensitivity / sqrt(2 rho): the Gaussian mechanism is then rho-zCDP."""
    if not (rho > 0):
        raise ValueError(f"rho must be > 0, got {rho}")
    return float(sensitivity) / math.sqrt(2 * rho)


def count_offset(epsilon: float, delta: float, discrete: bool = True) -> float:
    """Offset lambda of DPM's shifted noisy count (004 eq. 1, corrected per Departures item 8).

    The split score's sensitivity bound ``(t/q + alpha) / (n_hat - lambda)`` needs
    ``n_hat - lambda <= |S|`` on the *smaller* of two neighbouring data sets. Run on the larger one
    (``|S| + 1`` records) this fails exactly when the noise ``Z >= lambda`` (integer noise), or
    ``Z > lambda - 1`` (Laplace). So

    * two-sided geometric noise: the smallest integer lambda with
      ``P(Z >= lambda) = e^(-eps lambda) / (1 + e^-eps) <= delta``;
    * Laplace noise: ``lambda = 1 - ln(2 delta) / eps`` (the paper's eq. 1 omits the ``1``).
    """
    eps, delta = _check_eps(epsilon), _check_delta(delta)
    if discrete:
        lam = math.log(1.0 / (delta * (1.0 + math.exp(-eps)))) / eps
        return float(max(0, math.ceil(lam - 1e-12)))
    return 1.0 - math.log(2 * delta) / eps


# --------------------------------------------------------------------------- pure mechanisms
def two_sided_geometric(rng, values, epsilon: float, sensitivity: int = 1) -> np.ndarray:
    """Integer values + two-sided geometric (discrete Laplace) noise: epsilon-DP for L1
    sensitivity ``sensitivity`` (an integer). Exact integers (see the module note on Mironov)."""
    eps = _check_eps(epsilon)
    values = np.asarray(values)
    if not np.issubdtype(values.dtype, np.integer):
        raise TypeError("two_sided_geometric releases integer counts; got " + str(values.dtype))
    return values.astype(np.int64) + _draw_two_sided_geometric(
        rng, eps / float(sensitivity), values.shape
    )


def laplace_noise(rng, values, epsilon: float, sensitivity: float = 1.0) -> np.ndarray:
    """values + Laplace(sensitivity / epsilon): epsilon-DP for L1 sensitivity ``sensitivity``."""
    eps = _check_eps(epsilon)
    values = np.asarray(values, dtype=float)
    return values + _draw_laplace(rng, float(sensitivity) / eps, values.shape)


def exponential_mechanism(
    rng, scores, sensitivity, epsilon: float, monotone: bool = False
) -> np.ndarray:
    """Index of a candidate drawn with probability proportional to ``exp(eps f / (2 D))``.

    ``scores`` is ``(m,)`` or ``(r, m)`` (r independent selections, e.g. one per disjoint subset);
    ``sensitivity`` is a scalar or ``(r,)``. Implemented as Gumbel-max (argmax of
    ``f + (2 D / eps) * Gumbel``), exact in distribution, stable for any number of candidates and
    vectorised over rows. Candidates with score ``-inf`` are never chosen. The factor 2 is the
    general exponential mechanism (Departures item 1); ``monotone=True`` drops it and is only
    correct for scores that move in one direction for every candidate when a record is added.
    """
    eps = _check_eps(epsilon)
    scores = np.asarray(scores, dtype=float)
    if np.isnan(scores).any():
        raise ValueError("exponential_mechanism: scores contain NaN")
    sens = np.asarray(sensitivity, dtype=float)
    if (sens <= 0).any() or not np.isfinite(sens).all():
        raise ValueError("exponential_mechanism: sensitivity must be positive and finite")
    if np.isneginf(scores).all(axis=-1).any():
        raise ValueError("exponential_mechanism: a row has no candidate (all scores are -inf)")
    scale = (1.0 if monotone else 2.0) * sens / eps
    if scores.ndim == 2:
        scale = np.broadcast_to(scale, scores.shape[:1])[:, None]
    noisy = scores + _draw_gumbel(rng, scale, scores.shape)
    return np.argmax(noisy, axis=-1)


def exponential_mechanism_probabilities(scores, sensitivity, epsilon, monotone=False):
    """The exact output distribution of :func:`exponential_mechanism` (for audits and tests)."""
    scores = np.asarray(scores, dtype=float)
    factor = epsilon / ((1.0 if monotone else 2.0) * np.asarray(sensitivity, float))
    if scores.ndim == 2 and factor.ndim == 1:  # one sensitivity per row
        factor = factor[:, None]
    logits = factor * scores
    logits = logits - np.max(logits, axis=-1, keepdims=True)
    w = np.exp(logits)
    return w / w.sum(axis=-1, keepdims=True)


def private_quantile(
    rng,
    values,
    quantile: float,
    lo: float,
    hi: float,
    epsilon: float,
    sensitivity: float = 1.0,
    log_scale: bool = False,
    overwrite_input: bool = False,
    floor_atom: float = 0.0,
) -> float:
    """A private ``quantile`` of ``values`` in the public range ``[lo, hi]``.

    The exponential mechanism over the gaps between sorted values (Smith 2011; Du et al. 2020,
    Alg. 4.3, "ExpMech"): values are clipped to ``[lo, hi]`` and sorted into ``z_1..z_m``; every
    output ``v`` in the interval with ``k`` values below it has utility ``-|k - quantile m|``; an
    interval is drawn with probability proportional to ``width * exp(eps u / (2 D))`` and the output
    is uniform inside it. The base measure (width) is data-independent Lebesgue measure, so the
    release is epsilon-DP whenever ``u(v)`` changes by at most ``D`` between neighbours for every
    ``v``: ``D = 1`` for raw values under add/remove (rank moves by at most 1, target by
    ``quantile``); callers that pass derived values (e.g. DPM's neighbour gaps) pass their own D.

    ``log_scale=True`` (needs ``0 < lo``) uses the data-independent base measure ``dv / v``
    instead of ``dv``: interval weights are widths in ``log v`` and the output is log-uniform
    inside the chosen interval. The ranking is done on the raw values, so the sensitivity is the
    same; for values spanning orders of magnitude it keeps a wide empty interval (e.g. above the
    largest value) from outweighing the dense region around the target at small epsilon.

    ``overwrite_input=True`` clips and sorts a float ndarray in place (no copy of the values).

    ``floor_atom > 0`` adds a point mass of that weight at ``lo`` to the base measure (still
    data-independent). Its utility is the quantile utility for ties,
    ``-max(q m - #{z <= lo}, 0)``, which moves by no more than the interval utilities (the
    counts below and at ``lo`` move like any rank). Data with many values at the floor (DPM's
    zero gaps on integer-valued features) then gets ``lo`` when its quantile is there, instead of
    a log-uniform draw over the first non-empty interval.
    """
    eps = _check_eps(epsilon)
    if not lo < hi:
        raise ValueError(f"private_quantile needs lo < hi, got [{lo}, {hi}]")
    if log_scale and not lo > 0:
        raise ValueError(f"private_quantile(log_scale=True) needs lo > 0, got {lo}")
    if not (float(sensitivity) > 0) or not math.isfinite(float(sensitivity)):
        raise ValueError(f"private_quantile: sensitivity must be positive, got {sensitivity}")
    if not 0 <= quantile <= 1:
        raise ValueError(f"quantile must be in [0, 1], got {quantile}")
    arr = np.asarray(values)
    in_place = (
        overwrite_input and arr.dtype in (np.float32, np.float64) and arr.flags.c_contiguous
    )
    z = arr.reshape(-1) if in_place else arr.ravel()
    if z.dtype not in (np.float32, np.float64):  # float32 sorts fast; weights stay float64
        z = z.astype(float)
    if z.size and np.isnan(z.min()):  # min propagates NaN without a mask the size of z
        raise ValueError("private_quantile: values contain NaN")
    if in_place:
        np.clip(z, lo, hi, out=z)
    else:
        z = np.clip(z, lo, hi)  # a new array: ours to sort in place
    _sort_in_place(z)
    rate = eps / (2.0 * float(sensitivity))
    atom = None
    if floor_atom > 0:
        # the key in z's own dtype: a float64 key would make NumPy copy a float32 z
        at_floor = int(np.searchsorted(z, z.dtype.type(lo), side="right"))
        atom = math.log(floor_atom) - rate * max(quantile * z.size - at_floor, 0.0)
    out = _sample_quantile_interval(rng, z, float(lo), float(hi), quantile * z.size, rate,
                                    log_scale, atom)
    return float(min(max(out, lo), hi))


def quantile_grid(lo: float, hi: float, size: int, log_scale: bool = False) -> np.ndarray:
    """The public candidates of :func:`grid_quantile`: ``size`` points from ``lo`` to ``hi``,
    evenly spaced (``log_scale``: evenly spaced in ``log v``, needs ``0 < lo``)."""
    if not lo < hi or size < 2:
        raise ValueError(f"quantile_grid needs lo < hi and size >= 2, got [{lo}, {hi}], {size}")
    if log_scale and not lo > 0:
        raise ValueError(f"quantile_grid(log_scale=True) needs lo > 0, got {lo}")
    grid = np.geomspace(lo, hi, size) if log_scale else np.linspace(lo, hi, size)
    grid[0], grid[-1] = lo, hi
    return grid


def grid_quantile(rng, hist, grid, quantile: float, epsilon: float) -> float:
    """A private ``quantile`` of ``m`` values, drawn among the public candidates ``grid``
    (increasing, from :func:`quantile_grid`), read through exact counts only.

    ``hist[j]`` counts the values ``v`` with ``grid[j-1] < v <= grid[j]`` (``hist[0]``: ``v <=
    grid[0]``; the last cell also holds the values above ``grid[-1]``, as if clipped to it), so
    ``c_j = hist[0] + ... + hist[j]`` is the number of values at most ``grid[j]`` and ``m =
    sum(hist)``. Candidate ``j`` has utility ``u_j = -|c_j - quantile m|`` and is drawn with
    probability proportional to ``exp(eps u_j / 2)`` (the exponential mechanism, factor 2;
    McSherry and Talwar 2007). Sensitivity ``D = 1`` under add/remove one value: the value falls
    in exactly one cell, so every ``c_j`` moves by 0 or 1 and ``quantile m`` by ``quantile``, in
    the same direction; ``c_j - quantile m`` moves by ``1 - quantile`` or ``-quantile``, at most 1
    in size, and so does ``u_j``. The candidates are public, so the release is epsilon-DP. It is
    the grid's analogue of :func:`private_quantile` (its base measure the counting measure on
    the grid; on a log-spaced grid, of ``dv / v``), with the grid's resolution: the counts are
    integers, added exactly, so data split in chunks gives the same release."""
    eps = _check_eps(epsilon)
    if not 0 <= quantile <= 1:
        raise ValueError(f"quantile must be in [0, 1], got {quantile}")
    hist = np.asarray(hist, dtype=np.int64)
    grid = np.asarray(grid, dtype=np.float64)
    if hist.shape != grid.shape or grid.ndim != 1:
        raise ValueError(f"grid_quantile: hist {hist.shape} and grid {grid.shape} differ")
    below = np.cumsum(hist)
    utility = -np.abs(below - quantile * float(below[-1]))
    j = exponential_mechanism(rng, utility, 1.0, eps)
    return float(grid[int(j)])


#: Values above which :func:`_sort_in_place` sorts on several threads (below, starting them
#: costs more than it saves).
_THREADED_SORT = 1 << 20


def _stable_sort(part) -> None:
    part.sort(kind="stable")  # timsort: finds the sorted runs and merges them in linear time


def _sort_in_place(z) -> None:
    """``z.sort()`` of a contiguous 1-D float array, on all cores for big arrays.

    The parts of ``z`` are sorted on a pool of threads (NumPy's sort releases the GIL), then
    merged: neighbouring runs in pairs by a stable sort, and the last two split first into two
    independent parts (:func:`_split_two_runs`) merged in parallel. The result is
    ``np.sort(z)``: the same values in the same order (only the order of ``-0.0`` and ``0.0``
    among themselves, which compare equal and which ``np.sort`` leaves unspecified too, may
    differ; the quantile release cannot tell them apart). Extra memory: at most half a copy of
    ``z`` at a time. From a worker thread (e.g. a Dask task) the sort stays on that thread, as
    in :func:`privclust._parallel.on_cores`."""
    n_threads = _parallel.N_THREADS
    if (z.size < _THREADED_SORT or n_threads < 2
            or threading.current_thread() is not threading.main_thread()):
        z.sort()
        return
    bounds = [z.size * i // n_threads for i in range(n_threads + 1)]
    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(np.ndarray.sort, [z[bounds[i]:bounds[i + 1]] for i in range(n_threads)]))
        while len(bounds) > 3:  # merge neighbouring runs in pairs (an odd one out waits)
            list(pool.map(_stable_sort, [z[bounds[i]:bounds[i + 2]]
                                         for i in range(0, len(bounds) - 2, 2)]))
            bounds = bounds[::2] if len(bounds) % 2 else bounds[:-1:2] + bounds[-1:]
        _split_two_runs(z, bounds[1])
        list(pool.map(_stable_sort, (z[:bounds[1]], z[bounds[1]:])))


def _split_two_runs(z, n1: int) -> None:
    """Rearrange ``z = [a | b]`` (two sorted runs, ``a = z[:n1]``) in place so that ``z[:n1]``
    holds the ``n1`` smallest values, ``a[:i]`` then ``b[:j]`` (``i + j = n1``, found by binary
    search), and ``z[n1:]`` the rest, ``a[i:]`` then ``b[j:]``: each part two sorted runs, no
    value of the first above one of the second. ``a[i:]`` and ``b[:j]``, both ``j`` long, swap
    places (a copy of ``j <= z.size / 2`` values)."""
    a, b = z[:n1], z[n1:]
    lo, hi = max(0, n1 - b.size), n1
    while lo < hi:  # the least i with a[i] >= b[n1 - i - 1]
        i = (lo + hi) // 2
        if a[i] < b[n1 - i - 1]:
            lo = i + 1
        else:
            hi = i
    j = n1 - lo
    if j:
        moved = a[lo:].copy()
        a[lo:] = b[:j]
        b[:j] = moved


_QUANTILE_BLOCK = 1 << 16


def _quantile_block_weights(
    z, lo, hi, start, stop, target, rate, geo, log_space=False, log_scale=False
):
    """Weights of intervals ``start..stop-1`` between the edges ``[lo, z_0, ..., z_{m-1}, hi]``:
    ``width_j * exp(-rate |j - target|)`` (or their logs). ``geo[i] = exp(-rate i)`` lets a block
    on one side of the target reuse one precomputed decay instead of an ``exp`` per interval.
    With ``log_scale`` the edges (and so the widths) are in ``log v``."""
    m = z.size
    length = stop - start
    nearest = max(start - target, target - (stop - 1), 0.0)
    if not log_space and -rate * nearest < -690.0:
        # Below 1e-300 of the peak factor: these weights vanish next to the blocks around the
        # target in float64 (and would only produce slow subnormal arithmetic). Such a block is
        # never drawn (its total is 0), so its edges are not needed either.
        return None, np.zeros(length)
    parts = [np.array([lo])] if start == 0 else []
    parts.append(z[max(start, 1) - 1 : min(stop, m)].astype(float))
    if stop == m + 1:
        parts.append(np.array([hi]))
    edges = np.concatenate(parts)
    if log_scale:
        edges = np.log(edges)
    # a float32 value clipped to lo can round just below it: such an interval has no width
    widths = np.maximum(np.diff(edges), 0.0)
    if log_space:
        dist = np.abs(np.arange(start, stop, dtype=float) - target)
        with np.errstate(divide="ignore"):
            return edges, np.log(widths) - rate * dist
    if start >= target:
        factor = math.exp(-rate * (start - target)) * geo[:length]
    elif stop - 1 <= target:
        factor = math.exp(-rate * (target - (stop - 1))) * geo[:length][::-1]
    else:
        factor = np.exp(-rate * np.abs(np.arange(start, stop, dtype=float) - target))
    return edges, widths * factor


def _sample_quantile_interval(rng, z, lo, hi, target, rate, log_scale=False,
                              log_atom=None) -> float:
    """Draw from the quantile mechanism's density in two stages (a block of intervals by its
    total weight, then an interval inside it, then a point inside that), each by inverse CDF.
    Exact in distribution; works block by block so no m-long float64 temporaries are made.
    With ``log_scale`` the point is drawn uniformly in ``log v`` and returned as ``v``."""
    n_int = z.size + 1
    geo = np.exp(-rate * np.arange(min(_QUANTILE_BLOCK, n_int), dtype=float))
    starts = np.arange(0, n_int, _QUANTILE_BLOCK)
    stops = np.minimum(starts + _QUANTILE_BLOCK, n_int)

    def block(a, b, log_space=False):
        return _quantile_block_weights(z, lo, hi, a, b, target, rate, geo, log_space, log_scale)

    totals = np.array([block(a, b)[1].sum() for a, b in zip(starts, stops, strict=True)])
    log_space = not totals.max() > 1e-250  # all weights near underflow: work with logs
    peak = 0.0
    if log_space:  # a log-sum-exp per block, in one pass: no block's weights are kept
        peaks, sums = np.empty(starts.size), np.empty(starts.size)
        for i, (a, b) in enumerate(zip(starts, stops, strict=True)):
            lg = block(a, b, True)[1]
            peaks[i] = lg.max()
            sums[i] = np.exp(lg - peaks[i]).sum() if np.isfinite(peaks[i]) else 0.0
        peak = peaks.max()
        with np.errstate(invalid="ignore"):
            totals = np.where(sums > 0, sums * np.exp(peaks - peak), 0.0)
    if log_atom is not None:  # the point mass at lo competes with the blocks
        # P(atom) = a / (a + T), computed from logs: a and T can be far apart in scale
        log_total = math.log(totals.sum()) + peak if totals.sum() > 0 else -math.inf
        gap = log_total - log_atom
        p_atom = 1.0 if gap < -700 else 0.0 if gap > 700 else 1.0 / (1.0 + math.exp(gap))
        if _draw_uniform(rng, 0.0, 1.0) < p_atom:
            return lo
    cdf = np.cumsum(totals)
    u = _draw_uniform(rng, 0.0, cdf[-1])
    k = min(int(np.searchsorted(cdf, u, side="right")), totals.size - 1)
    while totals[k] <= 0:
        k -= 1
    edges, w = block(int(starts[k]), int(stops[k]), log_space)
    if log_space:
        w = np.exp(w - peak)
    cdf = np.cumsum(w)
    u = _draw_uniform(rng, 0.0, cdf[-1])
    j = min(int(np.searchsorted(cdf, u, side="right")), w.size - 1)
    while w[j] <= 0:  # u landed on a zero-weight boundary: step back to a positive one
        j -= 1
    point = float(_draw_uniform(rng, edges[j], edges[j + 1]))
    return math.exp(point) if log_scale else point


# --------------------------------------------------------------------------- ledger-bound API
def _rows(values) -> int:
    a = np.asarray(values)
    return int(a.shape[0]) if a.ndim >= 1 else 1


class Mechanisms:
    """The mechanisms of one fit: every call draws noise *and* records the release.

    Each call releases a batch of rows on **disjoint** subsets of the data (parallel
    composition: the batch costs one row's budget); pass one row when the subsets overlap.

    Bound to a :class:`~privclust.privacy.PrivacyPlan`, every call names the line item it draws
    from (``item=``) and is refused (:class:`~privclust.privacy.PlanExceededError`) past what the
    item holds, so a fit cannot spend outside its plan. Without a plan (``plan=None``) the
    calls only record: that form exists for audits of a single mechanism.
    """

    def __init__(self, random_source: RandomSource, report: PrivacyReport, plan=None):
        self.random_source = random_source
        self.rng = random_source.generator
        self.report = report
        self.plan = plan

    def record(self, release: Release, item: str | None = None) -> Release:
        """Charge ``release`` to its line item (when bound to a plan) and write it to the
        ledger. A release past its item raises here, before its noisy value is returned."""
        if self.plan is not None:
            if item is None:
                raise ValueError(f"release {release.target!r} names no line item of the plan")
            line = self.plan.charge(item, release.epsilon, release.delta, release.rho)
            if release.rho:
                self.report.zcdp_delta = line.delta
        if item is not None:
            release.item = item
        return self.report.add(release)

    # counts ----------------------------------------------------------------------------
    def count(self, counts, epsilon: float, *, target: str, delta: float = 0.0, note: str = "",
              item: str | None = None, same_records: bool = False):
        """Integer counts + two-sided geometric noise (sensitivity 1 under add/remove).

        ``delta`` is recorded with the release when a later step relies on the count not
        overshooting (DPM's shifted count, Departures item 8); the noise itself is pure epsilon-DP.
        ``same_records=True``: the counts are of the same records (e.g. one per feature), so
        each gets ``epsilon / rows`` and the batch costs ``epsilon`` (sequential composition).
        """
        rows = _rows(counts)
        per_row = epsilon / rows if same_records else epsilon
        if same_records and rows > 1:
            note = f"{note}; {rows} counts of the same records, epsilon / {rows} each".lstrip("; ")
        noisy = two_sided_geometric(self.rng, np.asarray(counts, dtype=np.int64), per_row, 1)
        self.record(
            Release(
                "two-sided geometric",
                target,
                epsilon=float(epsilon),
                delta=float(delta),
                sensitivity=1.0,
                scale=1.0 / float(per_row),
                n_released=_rows(counts),
                note=note,
            ),
            item,
        )
        return noisy

    # selection -------------------------------------------------------------------------
    def select(self, scores, sensitivity, epsilon: float, *, target: str, note: str = "",
               item: str | None = None, same_records: bool = False, monotone: bool = False):
        """Exponential mechanism (factor 2, Departures item 1) over the last axis of ``scores``.

        Rows of a 2-D ``scores`` are selections on disjoint subsets (parallel composition: the
        batch costs ``epsilon``). ``same_records=True``: the rows are selections on the *same*
        records (e.g. one per feature); each then runs at ``epsilon / rows`` and the batch costs
        ``epsilon`` by sequential composition. ``monotone=True`` drops the factor 2
        (McSherry and Talwar, FOCS 2007, Thm. 6): only for scores that every added record
        moves up (or every one down) for every candidate at once, by at most the sensitivity,
        such as a sum of one term in ``[0, D]`` per record."""
        rows = _rows(scores) if np.ndim(scores) == 2 else 1
        per_row = epsilon / rows if same_records else epsilon
        idx = exponential_mechanism(self.rng, scores, sensitivity, per_row, monotone=monotone)
        sens = np.asarray(sensitivity, dtype=float)
        factor = 1.0 if monotone else 2.0
        self.record(
            Release(
                "exponential",
                target,
                epsilon=float(epsilon),
                sensitivity=float(sens.max()),
                scale=float((factor * sens / per_row).max()),
                n_released=rows,
                note=note + (f"; {rows} selections on the same records, epsilon / {rows} each"
                             if same_records and rows > 1 else "")
                + ("; monotone scores: factor 1" if monotone else ""),
            ),
            item,
        )
        return idx

    def first_below(self, values, threshold: float, epsilon: float, *, target: str,
                    sensitivity: float = 1.0, note: str = "", item: str | None = None) -> int:
        """The sparse vector technique (AboveThreshold, Dwork & Roth 2014, Alg. 1) on
        ``-values``: the index of the first query whose value is (noisily) at most
        ``threshold``, or -1 if none is. Every query has sensitivity ``sensitivity``; the whole
        scan is ``epsilon``-DP, however many queries it reads (the threshold gets
        Laplace(2 D / eps) noise, each query Laplace(4 D / eps)). ``threshold`` must not depend
        on the data (or only on released values)."""
        eps = _check_eps(epsilon)
        sens = float(sensitivity)
        values = -np.asarray(values, dtype=float)
        noisy_t = -float(threshold) + float(_draw_laplace(self.rng, 2.0 * sens / eps, None))
        noise = _draw_laplace(self.rng, 4.0 * sens / eps, values.shape)
        hits = np.flatnonzero(values + noise >= noisy_t)
        self.record(
            Release("sparse vector (AboveThreshold)", target, epsilon=float(eps),
                    sensitivity=sens, scale=4.0 * sens / eps, n_released=1, note=note),
            item,
        )
        return int(hits[0]) if hits.size else -1

    def quantile(
        self, values, quantile, lo, hi, epsilon, sensitivity, *, target: str, note: str = "",
        log_scale: bool = False, overwrite_input: bool = False, floor_atom: float = 0.0,
        item: str | None = None,
    ) -> float:
        """Private quantile (exponential mechanism over gaps, Du et al. 2020 Alg. 4.3)."""
        out = private_quantile(
            self.rng, values, quantile, lo, hi, epsilon, sensitivity, log_scale, overwrite_input,
            floor_atom,
        )
        self._record_quantiles(target, epsilon, sensitivity, 1, note, item)
        return out

    def quantiles(
        self, values_list, quantile, lo, hi, epsilon, sensitivity, *, target: str, note: str = "",
        log_scale: bool = False, floor_atom: float = 0.0, item: str | None = None,
    ) -> np.ndarray:
        """One private quantile per array of ``values_list``; the arrays come from disjoint
        subsets (parallel composition: one ledger entry, one epsilon)."""
        out = np.array([
            private_quantile(self.rng, v, quantile, lo, hi, epsilon, sensitivity, log_scale,
                             False, floor_atom)
            for v in values_list
        ])
        self._record_quantiles(target, epsilon, sensitivity, len(out), note, item)
        return out

    def grid_quantile(self, hist, grid, quantile, epsilon, *, target: str, note: str = "",
                      item: str | None = None) -> float:
        """Private quantile over the public candidates ``grid`` from exact counts ``hist``
        (:func:`grid_quantile`, sensitivity 1)."""
        out = grid_quantile(self.rng, hist, grid, quantile, epsilon)
        grid = np.asarray(grid)
        note = (f"{note}; " if note else "") + (f"{grid.size} public candidates in "
                                                 f"[{grid[0]:.6g}, {grid[-1]:.6g}], counts "
                                                 "per candidate (exact)")
        self.record(Release("exponential (grid quantile)", target, epsilon=float(epsilon),
                            sensitivity=1.0, scale=2.0 / float(epsilon), n_released=1,
                            note=note), item)
        return out

    def _record_quantiles(self, target, epsilon, sensitivity, n_released, note, item) -> None:
        self.record(
            Release(
                "exponential (quantile)",
                target,
                epsilon=float(epsilon),
                sensitivity=float(sensitivity),
                scale=2.0 * float(sensitivity) / float(epsilon),
                n_released=int(n_released),
                note=note,
            ),
            item,
        )

    # continuous values -----------------------------------------------------------------
    def gaussian(
        self, values, l2_sensitivity, epsilon: float, delta: float, *, target: str, note="",
        item: str | None = None,
    ) -> np.ndarray:
        """values + N(0, sigma^2) per row, sigma from the analytic Gaussian mechanism for each
        row's L2 sensitivity (``l2_sensitivity`` scalar or one per row)."""
        values = np.asarray(values, dtype=float)
        sens = np.asarray(l2_sensitivity, dtype=float)
        if (sens < 0).any() or not np.isfinite(sens).all():
            raise ValueError("gaussian: l2_sensitivity must be finite and >= 0")
        unit = gaussian_sigma(epsilon, delta, 1.0)
        sigma = unit * sens
        if values.ndim == 2 and sigma.ndim == 1:
            sigma = sigma[:, None]
        noisy = values + _draw_gaussian(self.rng, sigma, values.shape)
        self.record(
            Release(
                "gaussian (analytic)",
                target,
                epsilon=float(epsilon),
                delta=float(delta),
                sensitivity=float(sens.max()) if sens.size else 0.0,
                scale=float(np.max(sigma)) if np.size(sigma) else 0.0,
                n_released=_rows(values),
                note=note,
            ),
            item,
        )
        return noisy

    def gaussian_zcdp(self, values, l2_sensitivity, rho: float, *, target: str, note="",
                      item: str | None = None):
        """values + N(0, sigma^2), sigma = sensitivity / sqrt(2 rho): rho-zCDP."""
        values = np.asarray(values, dtype=float)
        sigma = zcdp_gaussian_sigma(rho, float(l2_sensitivity))
        noisy = values + _draw_gaussian(self.rng, sigma, values.shape)
        self.record(
            Release(
                "gaussian (zCDP)",
                target,
                rho=float(rho),
                sensitivity=float(l2_sensitivity),
                scale=sigma,
                n_released=_rows(values),
                note=note,
            ),
            item,
        )
        return noisy

    def laplace(self, values, l1_sensitivity, epsilon: float, *, target: str, note="",
                item: str | None = None):
        """values + Laplace(l1_sensitivity / epsilon): epsilon-DP (floating-point caveat above)."""
        noisy = laplace_noise(self.rng, values, epsilon, l1_sensitivity)
        self.record(
            Release(
                "laplace",
                target,
                epsilon=float(epsilon),
                sensitivity=float(l1_sensitivity),
                scale=float(l1_sensitivity) / float(epsilon),
                n_released=_rows(values),
                note=note,
            ),
            item,
        )
        return noisy

    def account(self, target: str, *, item: str | None, delta: float, note: str = "") -> None:
        """Record a cost that draws no noise of its own: the probability that a shifted count
        fails its bound (DPM's ``count_shift``)."""
        self.record(Release("failure probability", target, delta=float(delta), note=note), item)

    def publish_exact(self, target: str, note: str) -> None:
        """Record a step that a paper publishes without noise: it makes the fit non-private."""
        self.report.add(Release("none (exact)", target, private=False, note=note))
