"""Queries on sorted unique int64 keys (cells of a grid), shared by the engines, which keep a
level's cells where the records are, and the sparse histogram, which reads them."""

from __future__ import annotations

import numpy as np

__all__ = ["in_sorted", "listed_below"]


def in_sorted(values: np.ndarray, sorted_ref: np.ndarray) -> np.ndarray:
    """Membership of every value in a sorted unique array (vectorised binary search)."""
    if sorted_ref.size == 0:
        return np.zeros(values.shape, dtype=bool)
    pos = np.searchsorted(sorted_ref, values)
    pos[pos == sorted_ref.size] = sorted_ref.size - 1
    return sorted_ref[pos] == values


def listed_below(keys: np.ndarray, offset: int, ranks: np.ndarray) -> np.ndarray:
    """For each ``r`` of ``ranks``: how many of one part's sorted ``keys`` (the listed cells
    ``offset`` to ``offset + keys.size - 1`` of the whole sorted list) lie before the ``r``-th
    empty cell (0-based). The ``i``-th listed cell has ``keys[i] - (offset + i)`` empty cells
    below it, a non-decreasing sequence; a listed cell lies before the ``r``-th empty cell
    exactly when that number is at most ``r``."""
    empties_below = keys - (offset + np.arange(keys.size, dtype=np.int64))
    return np.searchsorted(empties_below, ranks, side="right").astype(np.int64)
