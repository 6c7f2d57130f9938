"""DPHDBSCAN's grid release for low-dimensional data: one private level, the whole hierarchy.

Up to :data:`GRID_MAX_DIMS` features, DPHDBSCAN releases the record counts of **one** fine grid
over the public bounds, every cell with two-sided geometric noise (a dense histogram: the empty
cells too), at almost the whole budget. Every coarser level of the hierarchy is the sum of the
released counts of its ``2^d`` children: post-processing, so the whole multi-resolution density
estimate costs one level. A coarse cell's noise is the sum of its fine cells' (standard deviation
``sqrt(cells) * sigma``) while its records grow with its area, so each level above is resolved at
least as well as the finest, and no level's budget is spread over the others.

The finest grid is set from a released record count ``n_hat`` (a small share of epsilon): about
:data:`RECORDS_PER_CELL` noise standard deviations of records per cell were the records spread
over the whole box (:func:`finest_level`), so the finest level is as fine as the budget
resolves, and at most ``2^GRID_BITS`` cells. At every level a cell is dense when its noisy count
plus its neighbours' (the ``3^d`` cells around it, itself included) reaches
:data:`DENSE_SCALES` noise standard deviations of that sum, and its parent is dense: the density
threshold is the noise scale, read off public values (epsilon and the level) alone.

Everything after the two releases (the count and the histogram) reads released values and
public geometry only.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage

from ..privacy.histogram import release_dense_histogram
from ._density_tree import DenseLevel

__all__ = ["COARSE_BITS", "COARSE_SHARE", "COUNT_SHARE", "DENSE_SCALES", "GRID_BITS",
           "GRID_MAX_DIMS", "NEIGHBOURHOODS", "PAD", "RECORDS_PER_CELL", "finest_grid",
           "finest_level", "grid_levels", "noise_sd", "occupied_share", "release_grid",
           "square_box"]

#: Features up to which DPHDBSCAN releases one dense grid (above: the shifted grid tree).
GRID_MAX_DIMS = 3
#: The finest grid has at most ``2^GRID_BITS`` cells (a dense histogram of 1M cells).
GRID_BITS = 20
#: Share of epsilon spent on the noisy record count that sets the finest grid.
COUNT_SHARE = 0.03
#: Share of epsilon spent on a coarse grid (``2^COARSE_BITS`` cells) whose released counts say
#: what share of the box the records occupy (:func:`occupied_share`).
COARSE_SHARE = 0.07
COARSE_BITS = 8
#: The finest grid has about ``n_hat / (RECORDS_PER_CELL * sigma)`` cells (``sigma``: a cell's
#: noise standard deviation): records spread over the whole box would put about
#: ``RECORDS_PER_CELL`` noise standard deviations of records in each.
RECORDS_PER_CELL = 1.0
#: A cell is dense when its neighbourhood's noisy count reaches this many standard deviations of
#: the neighbourhood's noise.
DENSE_SCALES = 3.0
#: Neighbourhood sizes (cells per side) read at every grid level, largest first.
NEIGHBOURHOODS = (3,)
#: The grid spans the bounds widened by this fraction, so a record on the upper bound lies in
#: the last cell (powers of two keep every level's cells the union of their children's).
PAD = 2.0**-20


def noise_sd(epsilon: float) -> float:
    """Standard deviation of two-sided geometric noise at ``epsilon`` (sensitivity 1):
    ``sqrt(2 q) / (1 - q)``, ``q = e^-epsilon``."""
    q = math.exp(-epsilon)
    return math.sqrt(2.0 * q) / (1.0 - q)


def occupied_share(noisy: np.ndarray, epsilon: float) -> float:
    """The share of a coarse grid's cells the records occupy, from its released counts: the
    participation ratio ``(sum c)^2 / sum c^2`` over the cells (``k`` for records spread
    evenly over ``k`` cells), with the noise's variance taken out of ``sum c^2``; in
    ``[1 / cells, 1]``. Post-processing."""
    c = np.asarray(noisy, dtype=float).ravel()
    var = noise_sd(epsilon) ** 2
    total = max(float(c.sum()), 1.0)
    square = max(float((c * c).sum()) - c.size * var, total)
    return float(np.clip(total * total / square / c.size, 1.0 / c.size, 1.0))


def finest_level(n_hat: float, epsilon: float, d: int, occupied: float = 1.0) -> int:
    """Halvings of every dimension at the finest level (``2^(level d)`` cells): about
    ``n_hat / (RECORDS_PER_CELL * sigma)`` cells where the records are (``occupied``: their
    share of the box), at least 4 per dimension and at most ``2^GRID_BITS`` in all (released
    values and public values only)."""
    cells = max(float(n_hat), 1.0) / (RECORDS_PER_CELL * noise_sd(epsilon) * occupied)
    return int(np.clip(round(math.log2(cells) / d), 2, GRID_BITS // d))


def square_box(bounds: np.ndarray) -> np.ndarray:
    """The grid's box over ``bounds`` ((d, 2)): from the lower bounds, every side as wide as the
    widest feature's range (widened by ``PAD``), so that every cell is a square (a cube) in the
    data's own units, as the Euclidean distances of HDBSCAN and DPDBSCAN measure them. A
    feature narrower than the widest fills part of the box; the cells beyond it stay empty (only
    their noise). Public values only."""
    box = np.asarray(bounds, dtype=float).copy()
    span = float((box[:, 1] - box[:, 0]).max())
    box[:, 1] = box[:, 0] + span * (1.0 + PAD)
    return box


def finest_grid(n_hat: float, epsilon: float, box: np.ndarray,
                occupied: float = 1.0) -> tuple[int, np.ndarray]:
    """The finest level and the box its grid covers: cells as wide as about
    ``n_hat / (RECORDS_PER_CELL * sigma)`` cells over the share ``occupied`` of ``box`` give
    (:func:`finest_level`'s count, not rounded to a power of two), the box's sides grown to
    ``2^level`` such cells (the cells beyond the given box stay empty). Rounding the cell count
    to a power of two per feature moved the finest width by up to a factor ``sqrt 2`` and the
    clusters found with it; a continuous width does not. At most ``2^GRID_BITS`` cells (then
    the box is kept and its cells are as fine as that allows), at least 4 per feature.
    Released values and public values only."""
    d = box.shape[0]
    per_side = (max(float(n_hat), 1.0)
                / (RECORDS_PER_CELL * noise_sd(epsilon) * occupied)) ** (1.0 / d)
    level = int(np.clip(math.ceil(math.log2(max(per_side, 1.0))), 2, GRID_BITS // d))
    if (1 << level) < per_side or per_side < 4.0:
        return level, box  # capped (or coarser than 4 cells a side): the box as given
    out = box.copy()
    out[:, 1] = box[:, 0] + (box[:, 1] - box[:, 0]) / per_side * (1 << level)
    return level, out


def release_grid(engine, mech, origin: np.ndarray, width: np.ndarray, level: int,
                 epsilon: float, item: str) -> np.ndarray:
    """The noisy record count of every cell of the finest grid (``2^level`` cells per
    dimension, of widths ``width`` from ``origin``), empty cells included: one dense
    histogram with two-sided geometric noise (each record lies in one cell: sensitivity 1).
    Returns the noisy counts as a ``(2^level,) * d`` array."""
    d = origin.size
    m = 1 << level
    cells, counts = engine.cell_counts(origin, width)
    exact = np.zeros((m,) * d, dtype=np.int64)
    if cells.shape[0]:
        np.add.at(exact, tuple(np.clip(cells, 0, m - 1).T), counts)  # the box: 0 .. m - 1
    noisy = release_dense_histogram(
        mech, exact.ravel(), epsilon,
        target=f"cell counts of level {level}, all {m ** d} cells (dense histogram)",
        note="each record lies in one cell: sensitivity 1; the coarser levels are sums of "
             "these released counts (post-processing)", item=item)
    return np.asarray(noisy, dtype=np.int64).reshape((m,) * d)


def _coarser(counts: np.ndarray) -> np.ndarray:
    """The counts of the level above: every cell the sum of its ``2^d`` children."""
    d, s = counts.ndim, counts.shape[0] // 2
    return counts.reshape(sum(((s, 2) for _ in range(d)), ())).sum(
        axis=tuple(range(1, 2 * d, 2)))


def grid_levels(noisy: np.ndarray, level: int, epsilon: float,
                scales: float = DENSE_SCALES, sizes: tuple = NEIGHBOURHOODS,
                extra: int = 0) -> list[DenseLevel]:
    """The dense cells of every level, coarsest (2 cells per dimension) first, from the finest
    level's released counts (``level``): each level's counts are sums of the finest's. At
    every grid level one entry per neighbourhood size of ``sizes`` (largest first: a
    neighbourhood of 5 cells per side reads the level between this one and the one above): a
    cell is dense when its neighbourhood's noisy count reaches ``scales`` standard deviations
    of that sum's noise and its parent (the entry above) is dense; cells touching (diagonals
    included) form components. Entries above the first with a dense cell (coarse sums of many
    cells' noise) are skipped; stops at the next entry without a dense cell. Entries are
    numbered 1, 2, ... (``DenseLevel.level``), their grid level in ``width_level``.
    ``extra``: up to that many entries below the finest level, on its cells, each with a
    threshold ``2^(d/4)`` times the one above (a density level ``2^(1/4)`` higher: a quarter of
    a level's step in ``lambda``, noted in ``lam_shift``), while they have dense cells: the
    densities above the finest level's threshold, read off the same counts. Post-processing."""
    d = noisy.ndim
    grids = [noisy]
    while grids[-1].shape[0] > 2:
        grids.append(_coarser(grids[-1]))
    grids = grids[::-1]  # grids[i]: level i + 1
    out: list[DenseLevel] = []
    prev = None  # per cell of the entry above: its position among the dense, -1 if not dense
    for i, counts in enumerate(grids):
        below = level - (i + 1)  # halvings from this level to the finest
        steps = [(size, 1.0, math.log2(3.0 / size)) for size in sizes]
        if below == 0:
            steps += [(sizes[-1], 2.0 ** (k * d / 4.0), math.log2(3.0 / sizes[-1]) + k / 2.0)
                      for k in range(1, extra + 1)]
        sums: dict = {}  # neighbourhood sums of this level, per size
        for size, mult, shift in steps:
            sd = mult * noise_sd(epsilon) * math.sqrt(float(size**d) * 2.0 ** (below * d))
            if size not in sums:
                sums[size] = ndimage.correlate(counts, np.ones((size,) * d, dtype=np.int64),
                                               mode="constant", cval=0)
            near = sums[size]
            dense = near >= scales * sd
            if prev is None:
                up = np.full(counts.shape, -1, dtype=np.int64)
            else:
                up = prev
                for axis in range(d if prev.shape != counts.shape else 0):
                    up = np.repeat(up, 2, axis=axis)
                dense &= up >= 0
            if not dense.any():
                if out:
                    return out
                continue  # coarse sums the noise swamps: the hierarchy starts below
            comp, n_comp = ndimage.label(dense, structure=np.ones((3,) * d, dtype=bool))
            pos = np.full(counts.shape, -1, dtype=np.int64)
            pos[dense] = np.arange(int(dense.sum()))
            out.append(DenseLevel(len(out) + 1, np.argwhere(dense).astype(np.int64),
                                  counts[dense].astype(float),
                                  comp[dense].astype(np.int64) - 1, up[dense], int(n_comp),
                                  i + 1, shift,
                                  noise_sd(epsilon) * math.sqrt(2.0 ** (below * d))))
            prev = pos
    return out
