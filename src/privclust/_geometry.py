"""Nearest-centre assignment: one implementation for prediction, evaluation and the engine.

Imports nothing from privclust, so every layer may use it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["nearest_centres"]

_BLOCK_ELEMENTS = 1 << 18  # (rows, centres) distances per block: small, cache-friendly


def nearest_centres(X, centres, *, return_sq_distance: bool = False, chunk_rows=None):
    """Index of the nearest centre (Euclidean; ties to the lower index) for every row of X.

    Rows are processed in chunks so memory stays ``O(chunk * k)``; within a chunk the squared
    distances come from ``|c|^2 - 2 x.c`` (``|x|^2`` does not change the argmin), with both
    sides shifted by the centres' mean to limit cancellation far from the origin. With
    ``return_sq_distance`` the squared distance to the chosen centre is recomputed exactly.
    """
    C = np.asarray(centres, dtype=float)
    n, k = X.shape[0], C.shape[0]
    rows = chunk_rows or max(1, _BLOCK_ELEMENTS // max(k, 1))
    shift = C.mean(axis=0)
    Cs = C - shift
    c_sq = np.einsum("ij,ij->i", Cs, Cs)
    idx = np.empty(n, dtype=np.int64)
    dist = np.empty(n) if return_sq_distance else None
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        Xs = np.asarray(X[start:stop], dtype=float) - shift
        block = Xs @ Cs.T
        block *= -2.0
        block += c_sq
        j = np.argmin(block, axis=1)
        idx[start:stop] = j
        if return_sq_distance:
            diff = Xs - Cs[j]
            dist[start:stop] = np.einsum("ij,ij->i", diff, diff)
    return (idx, dist) if return_sq_distance else idx
