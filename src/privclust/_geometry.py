"""Nearest-centre assignment: one implementation for prediction, evaluation and the engine.

Imports nothing from privclust, so every layer may use it.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["nearest_centres"]

_BLOCK_ELEMENTS = 1 << 18  # (rows, centres) distances per block: small, cache-friendly
_MAX_WORKERS = 4
_controller = None


def _single_threaded_blas():
    """A context in which BLAS runs on one thread (process-wide while it lasts).

    The distance blocks are skinny products (rows x d times d x k) for which a threaded BLAS
    gains little and, on a machine with other work, loses a lot to oversubscription (measured:
    6x slower on 2 busy cores); scikit-learn's k-means makes the same choice. Parallelism comes
    from processing blocks in threads instead (NumPy releases the GIL in ``@`` and ``argmin``).
    """
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")


def nearest_centres(X, centres, *, return_sq_distance: bool = False, chunk_rows=None):
    """Index of the nearest centre (Euclidean; ties to the lower index) for every row of X.

    Rows are processed in blocks so memory stays ``O(block * k)`` per worker thread; within a
    block the squared distances come from ``|c|^2 - 2 x.c`` (``|x|^2`` does not change the
    argmin), with both sides shifted by the centres' mean to limit cancellation far from the
    origin. With ``return_sq_distance`` the squared distance to the chosen centre is recomputed
    exactly.
    """
    C = np.asarray(centres, dtype=float)
    n, k = X.shape[0], C.shape[0]
    rows = chunk_rows or max(1, _BLOCK_ELEMENTS // max(k, 1))
    shift = C.mean(axis=0)
    Cs = C - shift
    c_sq = np.einsum("ij,ij->i", Cs, Cs)
    minus_2c = -2.0 * Cs.T
    idx = np.empty(n, dtype=np.int64)
    dist = np.empty(n) if return_sq_distance else None

    def block(start: int) -> None:
        stop = min(start + rows, n)
        Xs = np.asarray(X[start:stop], dtype=float) - shift
        scores = Xs @ minus_2c
        scores += c_sq
        j = np.argmin(scores, axis=1)
        idx[start:stop] = j
        if return_sq_distance:
            diff = Xs - Cs[j]
            dist[start:stop] = np.einsum("ij,ij->i", diff, diff)

    starts = range(0, n, rows)
    workers = min(_MAX_WORKERS, os.cpu_count() or 1, len(starts))
    with _single_threaded_blas():
        if workers <= 1:
            for start in starts:
                block(start)
        else:
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(block, starts))  # list(): re-raises a worker's exception
    return (idx, dist) if return_sq_distance else idx
