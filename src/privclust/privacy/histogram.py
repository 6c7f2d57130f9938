"""Private histograms over a grid of cells: dense (every cell) and linear-time sparse.

Privacy unit: add/remove one record, so a histogram of cell counts has L1 sensitivity 1 and
every cell is a disjoint subset of the data (one release of a whole histogram costs epsilon).

Two ways to release a histogram over a universe of ``n_cells`` cells:

* :func:`dense_histogram` (:func:`dense_geometric_histogram`, :func:`dense_laplace_histogram`):
  noise on **every** cell of the grid, empty or not. Releasing only the non-empty cells would
  leak which cells hold data: a cell that is absent from the output is known to be empty.
  Time and memory are O(n_cells).
* :func:`sparse_histogram`: the linear-time pure-DP histogram of Qiu & Yi
  (Alg. 2, after Cormode et al. 2012). Noise on the non-empty cells, keep those at or above a
  threshold ``theta``; for the ``M`` empty cells draw ``m ~ Binomial(M, p)`` with
  ``p = P(noise >= theta)``, pick ``m`` empty cells uniformly **without replacement** and give each
  a value from the noise's tail above ``theta``. The output has exactly the distribution of the
  dense histogram with every value below ``theta`` set to zero (Thm 6.1), so it is epsilon-DP,
  and it never enumerates the grid: empty cells are found by rejection sampling of random cell
  indices against the sorted non-empty set (grids of 10^12 cells need no allocation); when the
  grid is not much larger than the data, uniform ranks among the empty cells are drawn instead
  and each rank's cell found from the non-empty cells below it (no array over the grid either).
  The non-empty cells may be given in parts, read one at a time (a level of a tree held where
  the records are): the release is the same as over one array.

  **Pure DP in the Real-RAM model only** (paper, end of Sec. 6; ``Departures`` item 15). The
  equivalence proof assumes exact real arithmetic: the binomial draw with a tiny ``p`` over
  ``M ~ 10^12`` cells and the floating-point tail values are not exact on a finite computer,
  and no linear-time pure-DP histogram is known in the Word-RAM model. The dense histogram with
  two-sided geometric noise has no such caveat (integer noise, exact integers).

Noise. ``noise="geometric"`` (the default everywhere in privclust, DESIGN "Noise: fast and
sound"): two-sided geometric (discrete Laplace) with ``P(Z = z)`` proportional to
``exp(-eps |z|)``, exact integers; the sparse threshold is then an integer ``k >= 1`` and the tail
of an empty cell is ``k + Geom0(e^-eps)``, the **exact discrete tail** (the authors' code samples
it with the continuous Laplace inverse, which is not the distribution of a discrete noisy count).
``noise="laplace"``: continuous Laplace(1/eps) as in the paper (Mironov's floating-point caveat
applies, see :mod:`privclust.privacy.mechanisms`); the tail above ``theta > 0`` is
``theta + Exp(eps)``.

Randomness is drawn only through the ``_draw_*`` primitives of
:mod:`privclust.privacy.mechanisms` (looked up on that module at call time, so instrumented tests
see every draw): ``_draw_two_sided_geometric`` and ``_draw_laplace`` for the noise,
``_draw_binomial``, ``_draw_cell_indices`` and ``_draw_choice`` for the sparse histogram's
empty-cell sampling (the binomial count, uniform cell indices, a uniform subset). The
exponential tail is drawn as ``|Laplace(1/eps)|`` (exactly Exp(eps)); ``floor`` of it is exactly
``Geom0(e^-eps)``.

Error bounds (:func:`neighbourhood_noise_bounds`, used by DP-DBSCAN): high-probability bounds on
the sum of ``kappa`` released noisy counts (a cell's neighbourhood) minus the true sum,
simultaneously for all ``n_cells`` cells (a union bound), with total failure probability ``beta``:

* Laplace: Thm 2.9 / Sec. 7.1, ``Gamma_Lap = 2 sqrt(2)/eps max(sqrt(kappa ln(2|X|/beta)),
  ln(2|X|/beta))`` (38.2 at eps = 1, beta = 1/3, kappa = 21, |X| = 1000);
* geometric: the **exact** tail of the sum of ``kappa`` two-sided geometric variables (a difference
  of two negative binomials), not Lemma 2.10's looser bound nor the Laplace one (Departures 13);
* sparse: the sum is off by at most ``kappa * theta'`` below (a truncated cell had a noisy value
  below ``theta``) plus the lower tail above; above, the error of every cell is at most the
  positive part of its noise, so the upper bound is the exact tail of the sum of ``kappa``
  positive parts. (Sec. 7.1 prints the symmetric ``kappa theta + Gamma_Lap``; its upper half
  does not hold pathwise: dropping a truncated cell with very negative noise raises the sum.)
"""

from __future__ import annotations

import math
import numbers
from functools import lru_cache

import numpy as np
from scipy import optimize
from scipy.optimize import minimize_scalar
from scipy.stats import binom, nbinom
from scipy.stats import gamma as gamma_dist

from . import mechanisms as _mech
from ._cell_parts import SortedCells, empty_cells_at, in_sorted
from .budget import Release

__all__ = [
    "NOISES",
    "dense_geometric_histogram",
    "dense_histogram",
    "dense_laplace_histogram",
    "gamma_geometric",
    "gamma_laplace",
    "geometric_sum_sf",
    "neighbourhood_noise_bounds",
    "positive_part_sum_sf",
    "release_dense_histogram",
    "release_sparse_histogram",
    "sparse_histogram",
    "sparse_threshold",
    "tail_probability",
]

NOISES = ("geometric", "laplace")

#: Largest universe a flat int64 cell index may address.
MAX_CELLS = 2**62
#: Grids up to this many cells have their empty cells enumerated rather than rejection-sampled.
_ENUMERATE_CELLS = 1 << 16
#: Rejection-sampling batches are at most this long.
_BATCH = 1 << 22
#: Dense histograms draw their noise in blocks of this many cells.
_DENSE_BLOCK = 1 << 20
#: Refuse to release more sampled empty cells than this (the threshold is far too low).
_MAX_SAMPLED = 1 << 28


# --------------------------------------------------------------------------- checks
def _check_eps(epsilon) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise TypeError(f"epsilon must be a positive number, got {epsilon!r}")
    if not (epsilon > 0) or not math.isfinite(epsilon):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    return float(epsilon)


def _check_noise(noise) -> str:
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")
    return noise


def _check_beta(beta) -> float:
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not (0 < beta < 1):
        raise ValueError(f"beta (failure probability) must be in (0, 1), got {beta!r}")
    return float(beta)


def _check_n_cells(n_cells) -> int:
    if isinstance(n_cells, bool) or not isinstance(n_cells, numbers.Integral):
        raise TypeError(f"n_cells must be an integer, got {n_cells!r}")
    n_cells = int(n_cells)
    if not 1 <= n_cells < MAX_CELLS:
        raise ValueError(f"n_cells must be in [1, 2^62), got {n_cells}")
    return n_cells


def _check_kappa(kappa) -> int:
    if isinstance(kappa, bool) or not isinstance(kappa, numbers.Integral) or kappa < 1:
        raise ValueError(f"kappa must be a positive integer, got {kappa!r}")
    return int(kappa)


def _check_threshold(threshold, noise: str):
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
        raise TypeError(f"threshold must be a number, got {threshold!r}")
    if not (threshold > 0) or not math.isfinite(threshold):
        raise ValueError(f"the sparse threshold must be positive and finite, got {threshold!r}")
    if noise == "geometric":
        if float(threshold) != math.floor(threshold):
            raise ValueError(
                f"with geometric (integer) noise the threshold must be an integer >= 1, got "
                f"{threshold!r} (use sparse_threshold(...) to round it)"
            )
        return int(threshold)
    return float(threshold)


def _integer_counts(counts, name: str = "counts", keep_dtype: bool = False) -> np.ndarray:
    c = np.asarray(counts)
    if c.dtype == bool or not np.issubdtype(c.dtype, np.integer):
        if np.issubdtype(c.dtype, np.floating) and np.all(np.isfinite(c)) and np.all(
            c == np.floor(c)
        ):
            c = c.astype(np.int64)
        else:
            raise TypeError(f"{name} must be integer cell counts, got dtype {c.dtype}")
    if c.size and c.min() < 0:
        raise ValueError(f"{name} must be non-negative")
    return c if keep_dtype else c.astype(np.int64, copy=False)


# --------------------------------------------------------------------------- dense histograms
def dense_histogram(rng, counts, epsilon: float, noise: str = "geometric") -> np.ndarray:
    """Noise on every cell: ``counts`` is the full grid (any shape), one entry per cell.

    epsilon-DP under add/remove-one-record (L1 sensitivity 1; cells are disjoint). Geometric noise
    returns int64, Laplace float64. The noise is drawn in blocks of 2^20 cells (one draw per
    block) so temporary memory stays bounded on large grids.
    """
    eps = _check_eps(epsilon)
    noise = _check_noise(noise)
    c = _integer_counts(counts, keep_dtype=True)
    out = np.empty(c.shape, dtype=np.int64 if noise == "geometric" else np.float64)
    flat_c, flat_out = c.reshape(-1), out.reshape(-1)
    for start in range(0, flat_c.size, _DENSE_BLOCK):
        block = flat_c[start : start + _DENSE_BLOCK]
        if noise == "geometric":
            z = _mech._draw_two_sided_geometric(rng, eps, block.shape)
        else:
            z = _mech._draw_laplace(rng, 1.0 / eps, block.shape)
        np.add(block, z, out=flat_out[start : start + block.size])
    return out


def dense_geometric_histogram(rng, counts, epsilon: float) -> np.ndarray:
    """:func:`dense_histogram` with two-sided geometric noise (exact integers)."""
    return dense_histogram(rng, counts, epsilon, "geometric")


def dense_laplace_histogram(rng, counts, epsilon: float) -> np.ndarray:
    """:func:`dense_histogram` with Laplace(1/epsilon) noise (the paper's Thm 2.8)."""
    return dense_histogram(rng, counts, epsilon, "laplace")


# --------------------------------------------------------------------------- sparse histogram
def sparse_threshold(n_cells: int, n_hat: float, epsilon: float, noise: str = "geometric"):
    """The threshold of Thm 6.1, ``theta = ln(n_cells / n_hat) / epsilon``, from a **noisy or
    public** record count ``n_hat`` (never the exact n: Departures item 14).

    ``n_hat`` is floored at 1 and theta at ``ln(2) / epsilon`` (Thm 6.1 needs theta > 0; the
    sparse histogram is meant for ``n <= n_cells / 2``, where the floor is inactive). With
    geometric noise the threshold is the integer ``ceil(theta)`` (>= 1). A larger threshold only
    costs accuracy (Thm 6.1 holds for every theta > 0).
    """
    eps = _check_eps(epsilon)
    noise = _check_noise(noise)
    n_cells = _check_n_cells(n_cells)
    n_ref = max(float(n_hat), 1.0)
    theta = max(math.log(n_cells / n_ref), math.log(2.0)) / eps
    if noise == "geometric":
        return max(1, math.ceil(theta - 1e-12))
    return theta


def tail_probability(threshold, epsilon: float, noise: str = "geometric") -> float:
    """``p = P(Z >= threshold)`` for one cell's noise (Alg. 2 l. 6).

    Laplace: ``exp(-eps theta) / 2`` (theta > 0); geometric: ``q^k / (1 + q)`` with ``q = e^-eps``.
    """
    eps = _check_eps(epsilon)
    noise = _check_noise(noise)
    t = _check_threshold(threshold, noise)
    if noise == "geometric":
        return math.exp(-eps * t) / (1.0 + math.exp(-eps))
    return 0.5 * math.exp(-eps * t)


def _in_sorted(values: np.ndarray, sorted_ref: np.ndarray) -> np.ndarray:
    """Membership of every value in a sorted unique array (vectorised binary search)."""
    return in_sorted(values, sorted_ref)


def _sample_empty_cells(rng, occupied, n_cells: int, m: int,
                        method: str = "auto") -> np.ndarray:
    """``m`` cells drawn uniformly without replacement from the cells not in ``occupied`` (a
    sorted unique array, or a source of cells in parts: :mod:`._cell_parts`).

    ``method="rejection"`` draws i.i.d. uniform cell indices
    and keeps, in draw order, the first ``m`` distinct ones that are not occupied: the accepted
    sequence is a uniform ordered sample without replacement from the empty cells (batching
    only changes how many draws are made at once, not which are kept). Expected cost
    O(m n_cells / n_empty), no allocation per grid cell. ``method="enumerate"`` draws ``m``
    distinct ranks among the empty cells and finds the empty cell of each rank from the
    occupied ones (:func:`~privclust.privacy._cell_parts.empty_cells_at`: no array over the
    grid); ``"auto"`` enumerates when the grid has at most 2^16 cells or fewer than
    4 (occupied + m), i.e. when a uniform rank is as cheap as a rejection round.
    """
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    if not hasattr(occupied, "contains"):
        occupied = SortedCells(np.asarray(occupied, dtype=np.int64),
                               np.zeros(np.size(occupied), dtype=np.int64))
    n_occupied = sum(occupied.sizes)
    n_empty = n_cells - n_occupied
    if m > n_empty:
        raise ValueError(f"cannot sample {m} of {n_empty} empty cells")
    if method == "auto":
        # never refuse here on the exact occupancy: above _MAX_SAMPLED cells, rejection
        small = n_cells <= _ENUMERATE_CELLS or (
            n_cells <= _MAX_SAMPLED and n_cells <= 4 * (n_occupied + m))
        method = "enumerate" if small else "rejection"
    if method == "enumerate":
        if n_cells > _MAX_SAMPLED:
            raise ValueError(f"refusing to enumerate a grid of {n_cells} cells")
        return empty_cells_at(occupied, _mech._draw_choice(rng, n_empty, m))
    if method != "rejection":
        raise ValueError(f"unknown empty-cell sampling method {method!r}")
    chosen = np.zeros(0, dtype=np.int64)
    chosen_sorted = chosen
    while chosen.size < m:
        need = m - chosen.size
        accept = (n_empty - chosen.size) / n_cells
        size = int(min(_BATCH, math.ceil(need / accept * 1.1) + 16))
        cand = _mech._draw_cell_indices(rng, n_cells, size)
        cand = cand[~occupied.contains(cand)]
        cand = cand[~_in_sorted(cand, chosen_sorted)]
        _, first = np.unique(cand, return_index=True)  # first occurrence of every new cell
        first.sort()
        cand = cand[first[:need]]
        chosen = np.concatenate([chosen, cand])
        chosen_sorted = np.sort(chosen)
    return chosen


def _listed_cells(keys, counts, n_cells: int):
    """The listed cells as a source (:mod:`._cell_parts`): ``keys`` itself when it is one
    (``counts`` None), else :class:`~privclust.privacy._cell_parts.SortedCells` of the arrays,
    checked."""
    if counts is None and hasattr(keys, "parts"):
        return keys
    keys = np.asarray(keys)
    if keys.size and (keys.dtype == bool or not np.issubdtype(keys.dtype, np.integer)):
        raise TypeError(f"keys must be integer cell indices, got dtype {keys.dtype}")
    keys = keys.astype(np.int64, copy=False).ravel()
    c = _integer_counts(counts).ravel()
    if keys.shape != c.shape:
        raise ValueError(f"keys ({keys.size}) and counts ({c.size}) differ in length")
    return SortedCells(keys, c)


def _checked_parts(cells, n_cells: int):
    """The source's parts, each checked: integer counts, keys in ``[0, n_cells)``, strictly
    increasing within and across parts (one count per cell)."""
    last = -1
    for (keys, counts), size in zip(cells.parts(), cells.sizes, strict=True):
        keys = np.asarray(keys).astype(np.int64, copy=False)
        c = _integer_counts(counts)
        if keys.size != size or c.size != size:
            raise ValueError(f"a part of {size} cells came with {keys.size} keys and "
                             f"{c.size} counts")
        if keys.size:
            if keys[0] < 0 or keys[-1] >= n_cells:
                raise ValueError(f"cell indices must lie in [0, {n_cells})")
            if keys[0] <= last or (np.diff(keys) <= 0).any():
                raise ValueError("cell indices must be distinct (one count per cell)")
            last = int(keys[-1])
        yield keys, c


def _listed_noise(rng, eps: float, noise: str, sizes):
    """The noise of the listed cells, part by part: one draw over them all when they are one
    part (as the histogram has always drawn it), else the same values drawn part by part."""
    if len(sizes) == 1:
        if noise == "geometric":
            yield _mech._draw_two_sided_geometric(rng, eps, (sizes[0],))
        else:
            yield _mech._draw_laplace(rng, 1.0 / eps, (sizes[0],))
    elif noise == "geometric":
        yield from _mech._draw_two_sided_geometric_parts(rng, eps, sizes)
    else:
        for s in sizes:  # Laplace values are drawn one by one: parts cut the same stream
            yield _mech._draw_laplace(rng, 1.0 / eps, (s,))


def sparse_histogram(rng, keys, counts, n_cells: int, epsilon: float, threshold,
                     noise: str = "geometric", *, empty_sampling: str = "auto"):
    """Linear-time pure-DP histogram (Alg. 2): only cells with a noisy value ``>= threshold``.

    Parameters
    ----------
    keys : (m,) distinct int64 flat cell indices in ``[0, n_cells)``: the non-empty cells (cells
        listed with count 0 are allowed and handled exactly like empty ones); or, with
        ``counts=None``, a source of the listed cells in parts (:mod:`._cell_parts`), read
        part by part: the same release as the same cells in one array.
    counts : (m,) their counts (non-negative integers).
    n_cells : size of the universe (the whole grid), < 2^62.
    threshold : ``theta > 0`` (Laplace) or an integer ``k >= 1`` (geometric); see
        :func:`sparse_threshold` (its n must be noisy or public, Departures 14).
    empty_sampling : "auto", "rejection" or "enumerate" (see :func:`_sample_empty_cells`).

    Returns ``(cells, values)`` sorted by cell index: the released cells and their noisy values.
    Distributed exactly as the dense histogram with values below the threshold dropped (Thm 6.1):
    epsilon-DP in the Real-RAM model (module docstring). Expected output size
    ``m + (n_cells - m) p``; with the threshold of :func:`sparse_threshold`, O(n).
    """
    eps = _check_eps(epsilon)
    noise = _check_noise(noise)
    n_cells = _check_n_cells(n_cells)
    t = _check_threshold(threshold, noise)
    cells = _listed_cells(keys, counts, n_cells)
    if n_cells * tail_probability(t, eps, noise) > _MAX_SAMPLED / 4:
        # decided from public values (the grid, the threshold, epsilon), before any draw: a
        # refusal after the draw would depend on the exact number of occupied cells
        raise ValueError(
            f"the threshold {t} would release about {n_cells * tail_probability(t, eps, noise):.3g}"
            " empty cells; raise it (see sparse_threshold)"
        )
    sizes = [int(s) for s in cells.sizes]
    parts = _checked_parts(cells, n_cells)
    if len(sizes) == 1:  # checked before any draw, as the one-array histogram always was
        parts = iter([next(parts)])

    # lines 2-5: noise on the listed cells, keep those at or above the threshold
    kept_keys, kept_vals = [], []
    for (k, c), z in zip(parts, _listed_noise(rng, eps, noise, sizes), strict=True):
        noisy = c + z
        keep = noisy >= t
        kept_keys.append(k[keep])
        kept_vals.append(noisy[keep])
    # lines 6-8: how many of the other cells pass, and which
    n_other = n_cells - sum(sizes)
    p = tail_probability(t, eps, noise)
    m = _mech._draw_binomial(rng, n_other, p) if n_other > 0 else 0
    if m > _MAX_SAMPLED:  # excluded by the public check above: m would be 4x its bound
        raise RuntimeError(f"the sparse histogram drew {m} empty cells, past its public bound")
    sampled = _sample_empty_cells(rng, cells, n_cells, m, empty_sampling)
    # lines 9-11: values from the tail above the threshold (exact; discrete for geometric)
    expo = np.abs(_mech._draw_laplace(rng, 1.0 / eps, m))  # Exp(eps)
    if noise == "geometric":
        tail = t + np.floor(expo).astype(np.int64)  # k + Geom0(e^-eps): the exact discrete tail
    else:
        tail = t + expo
    dtype = np.int64 if noise == "geometric" else np.float64
    out_keys = np.concatenate([*kept_keys, sampled])
    out_vals = np.concatenate([*kept_vals, tail.astype(dtype, copy=False)])
    order = np.argsort(out_keys, kind="stable")
    return out_keys[order], out_vals[order]


# --------------------------------------------------------------------------- ledger-bound API
def _histogram_release(mechanism, target, epsilon, n_cells, noise, note) -> Release:
    """One ledger entry for a whole histogram (mechanism names fit the report's column:
    "geometric, dense hist" = two-sided geometric noise on every cell, etc.)."""
    return Release(
        mechanism,
        target,
        epsilon=float(epsilon),
        sensitivity=1.0,
        scale=1.0 / float(epsilon),
        n_released=int(n_cells),
        note=note,
    )


def release_dense_histogram(mech, counts, epsilon: float, *, noise: str = "geometric",
                            target: str = "cell counts (dense histogram)", note: str = "",
                            item: str | None = None):
    """:func:`dense_histogram` drawn from a :class:`~privclust.privacy.Mechanisms`' generator and
    recorded in its ledger (one batch over all cells: parallel composition, cost epsilon)."""
    out = dense_histogram(mech.rng, counts, epsilon, noise)
    label = "geometric" if noise == "geometric" else "laplace"
    mech.record(_histogram_release(
        f"{label}, dense hist", target, epsilon, np.size(counts), noise,
        note or "noise on every cell of the grid (empty ones included)",
    ), item)
    return out


def release_sparse_histogram(mech, keys, counts, n_cells: int, epsilon: float, threshold, *,
                             noise: str = "geometric",
                             target: str = "cell counts (sparse histogram)", note: str = "",
                             empty_sampling: str = "auto", item: str | None = None):
    """:func:`sparse_histogram` drawn from a :class:`~privclust.privacy.Mechanisms`' generator and
    recorded in its ledger. The entry says that the guarantee holds in the Real-RAM model only
    (Departures 15)."""
    out = sparse_histogram(mech.rng, keys, counts, n_cells, epsilon, threshold, noise,
                           empty_sampling=empty_sampling)
    label = "geometric" if noise == "geometric" else "laplace"
    extra = (f"threshold {threshold:.6g}; pure DP in the Real-RAM model only (Departures 15); "
             f"{out[0].size} of {n_cells} cells released")
    mech.record(_histogram_release(
        f"{label}, sparse hist", target, epsilon, n_cells, noise,
        f"{note}; {extra}" if note else extra,
    ), item)
    return out


# --------------------------------------------------------------------------- error bounds
def gamma_laplace(epsilon: float, beta: float, kappa: int, n_cells: int) -> float:
    """Sec. 7.1 / Thm 2.9 with a union bound over ``n_cells`` cells: with probability at least
    ``1 - beta`` every sum of ``kappa`` Laplace(1/eps) noises is within
    ``2 sqrt(2)/eps max(sqrt(kappa ln(2 n_cells/beta)), ln(2 n_cells/beta))`` of zero."""
    eps, beta = _check_eps(epsilon), _check_beta(beta)
    kappa = _check_kappa(kappa)
    n_cells = int(n_cells)
    if n_cells < 1:
        raise ValueError("n_cells must be >= 1")
    ln = math.log(2.0 * n_cells / beta)
    return 2.0 * math.sqrt(2.0) / eps * max(math.sqrt(kappa * ln), ln)


def _nb_cutoff(kappa: int, p: float, atol: float) -> int:
    """Smallest b with P(NB(kappa, p) > b) <= atol (found by doubling)."""
    b = max(1, int(nbinom.isf(atol, kappa, p)) if atol < 1 else 0)
    while nbinom.sf(b, kappa, p) > atol:
        b *= 2
    return b


def geometric_sum_sf(g: int, epsilon: float, kappa: int, atol: float = 0.0) -> float:
    """``P(S >= g)`` for ``S`` the sum of ``kappa`` i.i.d. two-sided geometric(eps) noises, g >= 1.

    ``S = A - B`` with ``A, B ~ NegBinomial(kappa, 1 - e^-eps)`` (each two-sided geometric is a
    difference of two geometric variables), so ``P(S >= g) = sum_b P(B = b) P(A >= g + b)``. The
    sum is cut where ``P(B > b) <= atol`` and that remainder is **added** (the result is an upper
    bound, exact up to ``atol`` and floating-point rounding).
    """
    eps = _check_eps(epsilon)
    kappa = _check_kappa(kappa)
    g = int(g)
    if g < 1:
        raise ValueError("geometric_sum_sf needs g >= 1")
    p = -math.expm1(-eps)
    atol = float(atol) if atol > 0 else 1e-300
    b_max = _nb_cutoff(kappa, p, atol)
    b = np.arange(b_max + 1)
    val = float(np.sum(nbinom.pmf(b, kappa, p) * nbinom.sf(g + b - 1, kappa, p)))
    return val + float(nbinom.sf(b_max, kappa, p))


def _smallest_int(pred, hi: int) -> int:
    """Smallest integer g in [0, hi] with pred(g) true (pred monotone, pred(hi) true)."""
    lo = -1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


@lru_cache(maxsize=512)
def gamma_geometric(epsilon: float, beta: float, kappa: int, n_cells: int) -> int:
    """Exact counterpart of :func:`gamma_laplace` for two-sided geometric noise (Departures 13).

    The smallest integer ``Gamma`` with ``n_cells * P(|S| > Gamma) <= beta``, ``S`` the sum of
    ``kappa`` two-sided geometric(eps) noises, from its exact tail (:func:`geometric_sum_sf`,
    ``P(|S| > g) = 2 P(S >= g + 1)``). The search starts from the per-cell exact bound
    ``kappa * gamma``, ``P(|Z| >= k) = 2 e^{-eps k} / (1 + e^{-eps})``, which it can only improve.
    """
    eps, beta = _check_eps(epsilon), _check_beta(beta)
    kappa = _check_kappa(kappa)
    target = beta / (2.0 * int(n_cells))
    q = math.exp(-eps)
    per_cell = math.ceil(math.log(2.0 * kappa * int(n_cells) / (beta * (1.0 + q))) / eps)
    hi = kappa * max(per_cell, 1)

    if _nb_cutoff(kappa, -math.expm1(-eps), target * 1e-9) > _EXACT_TAIL_TERMS:
        # small epsilon: the exact tail sums millions of terms (seconds to minutes, growing
        # like 1/eps); its Chernoff bound is a few evaluations and only ever larger
        def ok(g: int) -> bool:
            return geometric_sum_chernoff(g + 1, eps, kappa) <= target
    else:
        def ok(g: int) -> bool:
            return geometric_sum_sf(g + 1, eps, kappa, atol=target * 1e-9) * (1 + 1e-9) <= target

    return _smallest_int(ok, hi)


#: Terms of the exact tail sum above which gamma_geometric uses the Chernoff bound instead.
_EXACT_TAIL_TERMS = 200_000


def geometric_sum_chernoff(g: int, epsilon: float, kappa: int) -> float:
    """Chernoff upper bound on ``P(S >= g)``, ``S`` the sum of ``kappa`` two-sided
    geometric(eps) noises: ``min_t exp(-t g) M(t)^kappa`` over ``0 < t < eps`` with the moment
    generating function ``M(t) = (1 - q)^2 / ((1 - q e^t)(1 - q e^-t))``, ``q = e^-eps``. Never
    below the exact tail, so a Gamma computed from it keeps its guarantee."""
    eps = _check_eps(epsilon)
    kappa = _check_kappa(kappa)
    log_q = -eps

    def log_bound(u: float) -> float:  # t = u * eps, u in (0, 1)
        t = u * eps
        log_m = (2 * math.log(-math.expm1(log_q)) - math.log(-math.expm1(log_q + t))
                 - math.log(-math.expm1(log_q - t)))
        return -t * g + kappa * log_m

    res = minimize_scalar(log_bound, bounds=(1e-12, 1 - 1e-12), method="bounded",
                          options={"xatol": 1e-12})
    return float(min(1.0, math.exp(min(res.fun, 0.0))))


def positive_part_sum_sf(g: float, epsilon: float, kappa: int,
                         noise: str = "geometric") -> float:
    """``P(sum_i max(Z_i, 0) > g)`` over ``kappa`` i.i.d. noises (exact).

    ``K ~ Binomial(kappa, P(Z > 0))`` of the noises are positive; given K, the sum is
    ``Gamma(K, 1/eps)`` (Laplace) or ``K + NegBinomial(K, 1 - e^-eps)`` (geometric).
    """
    eps = _check_eps(epsilon)
    kappa = _check_kappa(kappa)
    noise = _check_noise(noise)
    k = np.arange(1, kappa + 1)
    if noise == "laplace":
        w = binom.pmf(k, kappa, 0.5)
        return float(np.sum(w * gamma_dist.sf(g, k, scale=1.0 / eps)))
    q = math.exp(-eps)
    w = binom.pmf(k, kappa, q / (1.0 + q))
    return float(np.sum(w * nbinom.sf(math.floor(g) - k, k, -math.expm1(-eps))))


@lru_cache(maxsize=512)
def _positive_part_quantile(epsilon: float, kappa: int, noise: str, target: float):
    q = math.exp(-epsilon)
    # union bound on the largest of kappa noises: an upper end for the search
    per = math.log(kappa / (target * (1.0 + q))) / epsilon + 1.0
    hi = kappa * max(per, 1.0)
    if noise == "geometric":
        return _smallest_int(
            lambda g: positive_part_sum_sf(g, epsilon, kappa, noise) * (1 + 1e-9) <= target,
            math.ceil(hi),
        )
    f = lambda g: positive_part_sum_sf(g, epsilon, kappa, noise) - target  # noqa: E731
    if f(0.0) <= 0:
        return 0.0
    g = optimize.brentq(f, 0.0, hi, xtol=1e-12, rtol=1e-12)
    return float(g) * (1 + 1e-9) + 1e-12


@lru_cache(maxsize=512)
def neighbourhood_noise_bounds(noise: str, epsilon: float, beta: float, kappa: int,
                               n_cells: int, threshold=None) -> tuple:
    """``(gamma_lower, gamma_upper)``: with probability ``>= 1 - beta``, for **every** cell X,
    ``UB(X) - gamma_lower <= noisy sum over NB(X) <= UB(X) + gamma_upper``.

    ``UB(X)`` is the true count of the ``kappa`` cells of X's neighbourhood; the noisy sum adds the
    released values (0 for cells not released). Dense histogram (``threshold=None``): symmetric,
    :func:`gamma_geometric` or :func:`gamma_laplace`. Sparse histogram: ``gamma_lower = kappa
    theta' + Gamma`` (``theta'`` = the largest value a dropped cell can have: ``theta``, or ``k -
    1`` for integer noise) and ``gamma_upper`` = the ``beta / (2 n_cells)`` quantile of the sum of
    ``kappa`` positive parts (module docstring). A neighbourhood cut by the grid's border has
    fewer than ``kappa`` terms; the bounds still hold (a sum of fewer independent symmetric
    log-concave noises is more peaked, Birnbaum 1948).
    """
    noise = _check_noise(noise)
    eps, beta = _check_eps(epsilon), _check_beta(beta)
    kappa = _check_kappa(kappa)
    n_cells = _check_n_cells(n_cells)
    if noise == "geometric":
        two_sided = gamma_geometric(eps, beta, kappa, n_cells)
    else:
        two_sided = gamma_laplace(eps, beta, kappa, n_cells)
    if threshold is None:
        return two_sided, two_sided
    t = _check_threshold(threshold, noise)
    dropped_max = t - 1 if noise == "geometric" else t
    lower = kappa * dropped_max + two_sided  # one side of S at beta / (2 n_cells), by symmetry
    upper = _positive_part_quantile(eps, kappa, noise, beta / (2.0 * n_cells))
    return lower, upper
