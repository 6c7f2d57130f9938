"""The listed (non-empty) cells of a sparse histogram, held in parts: the input of
:func:`~privclust.privacy.histogram.sparse_histogram` when a level of cells is too large to
hold in one place (the cells of a deep tree level in many dimensions, kept where the records
are). A source of cells has

* ``sizes``: how many cells each part holds (known before any part is read);
* ``parts()``: the parts in order, each a pair ``(keys, counts)`` of int64 arrays, keys
  strictly increasing within a part and from one part to the next;
* ``contains(values)``: whether each value is a listed cell (the empty-cell sampler's test);
* ``below(ranks)``: for each ``r``, how many listed cells lie before the ``r``-th empty cell
  (:func:`listed_below`, summed over the parts: the empty-cell sampler's enumeration, without
  an array over the grid).

:class:`SortedCells` is the one-part source over arrays held here. The histogram's draws do
not depend on how the cells are cut into parts (see ``sparse_histogram``), so a source in
parts releases exactly what the same cells in one array release.
"""

from __future__ import annotations

import numpy as np

from .._sorted_keys import in_sorted, listed_below

__all__ = ["SortedCells", "empty_cells_at", "in_sorted", "listed_below"]


class SortedCells:
    """Listed cells held as two arrays (one part): ``keys`` distinct int64 cell indices (any
    order: sorted here, with their counts) and their non-negative integer ``counts``."""

    def __init__(self, keys: np.ndarray, counts: np.ndarray):
        order = np.argsort(keys, kind="stable")
        self.keys, self.counts = keys[order], counts[order]
        self.sizes = [int(self.keys.size)]

    def parts(self):
        yield self.keys, self.counts

    def contains(self, values: np.ndarray) -> np.ndarray:
        return in_sorted(values, self.keys)

    def below(self, ranks: np.ndarray) -> np.ndarray:
        return listed_below(self.keys, 0, ranks)


def empty_cells_at(source, ranks: np.ndarray) -> np.ndarray:
    """The ``r``-th empty cell (0-based, in increasing cell order) for each ``r`` of
    ``ranks``: ``r`` plus the listed cells before it (:func:`listed_below`, summed over the
    source's parts). No array over the grid's cells."""
    ranks = np.asarray(ranks, dtype=np.int64)
    return ranks + source.below(ranks)
