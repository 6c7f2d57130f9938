"""The selection score: the simplified silhouette of a candidate's released centres, summed over
the records on a public fixed-point grid.

Simplified silhouette (Hruschka, Campello, de Castro 2004, "Improving the efficiency of a
clustering genetic algorithm"; also Vendramin, Campello, Hruschka 2010): for a record ``x`` with
distances ``a`` and ``b`` to its nearest and second-nearest centre,

    s(x) = (b - a) / max(a, b)   (0 when b = 0: two centres on the record),

which lies in ``[0, 1]``: near 1 when the record sits close to one centre and far from every
other, near 0 when two centres are about as close (a cluster split in two, or two clusters
sharing one centre). A model with one centre scores 0 on every record.

Why the sum has sensitivity 1 (add/remove one record). The centres are a release of the
candidate's fit; given them, ``S(D) = sum_{x in D} s(x)`` is a sum of one term per record, and
each term is a function of that record alone (clipped to the candidate's public bounds) and of
the centres. Adding or removing a record adds or removes its term, which lies in ``[0, 1]``.
Two details keep that exact in floating point:

* every distance is computed per record with the same float operations in the same order,
  feature by feature (no matrix product whose rounding depends on the block a row falls in),
  so ``s(x)`` does not depend on the other records or on the chunking;
* each term is rounded down to a multiple of ``2**-16`` and the terms are added as integers,
  so the sum is exact and independent of the order; its one conversion to float64 is exact
  below ``2**37`` records. The rounded term still lies in ``[0, 1]``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SCORE_UNITS", "silhouette_sum", "simplified_silhouette"]

#: Terms are rounded down to multiples of ``1 / SCORE_UNITS`` and added as integers.
SCORE_UNITS = 1 << 16

#: (rows x centres) distances per block: the temporaries stay small whatever n is.
_BLOCK_ELEMENTS = 1 << 18


def simplified_silhouette(X, centres, bounds=None) -> np.ndarray:
    """Every row's simplified silhouette ``s(x) = (b - a) / max(a, b)`` against ``centres``
    (rows clipped to ``bounds``, a (d, 2) array, when given), as float64 in ``[0, 1]``.

    Exact per row (see the module docstring): a row's value does not depend on the other
    rows. Memory stays ``O(block * k)``."""
    C = np.asarray(centres, dtype=np.float64)
    n, k = X.shape[0], C.shape[0]
    out = np.zeros(n)
    if k < 2 or n == 0:
        return out
    rows = max(1, _BLOCK_ELEMENTS // k)
    lo = hi = None
    if bounds is not None:
        b = np.asarray(bounds, dtype=np.float64)
        lo, hi = b[:, 0], b[:, 1]
    for start in range(0, n, rows):
        x = np.asarray(X[start:start + rows], dtype=np.float64)
        if lo is not None:
            x = np.clip(x, lo, hi)
        out[start:start + x.shape[0]] = _rows_silhouette(x, C)
    return out


def _rows_silhouette(x: np.ndarray, C: np.ndarray) -> np.ndarray:
    """One block: squared distances built feature by feature (elementwise, fixed order), then
    the two smallest per row."""
    sq = np.zeros((x.shape[0], C.shape[0]))
    diff = np.empty_like(sq)
    for j in range(x.shape[1]):
        np.subtract(x[:, j:j + 1], C[None, :, j], out=diff)
        np.multiply(diff, diff, out=diff)
        sq += diff
    two = np.partition(sq, 1, axis=1)[:, :2]
    a = np.sqrt(two[:, 0])
    b = np.sqrt(two[:, 1])
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.where(b > 0, (b - a) / b, 0.0)
    return np.clip(s, 0.0, 1.0)


def silhouette_sum(X, centres, bounds=None) -> float:
    """``sum_x s(x)`` over the rows of ``X``, each term rounded down to a multiple of
    ``1 / SCORE_UNITS`` and added exactly: one record changes it by at most 1.

    This is an exact aggregate of the data, not a release: the selection passes it to the
    exponential mechanism."""
    C = np.asarray(centres, dtype=np.float64)
    n = X.shape[0]
    if C.shape[0] < 2 or n == 0:
        return 0.0
    rows = max(1, _BLOCK_ELEMENTS // C.shape[0])
    total = 0
    for start in range(0, n, rows * 16):  # bounded memory for the per-row terms as well
        s = simplified_silhouette(X[start:start + rows * 16], C, bounds)
        total += int(np.floor(s * SCORE_UNITS).astype(np.int64).sum())
    return total / SCORE_UNITS
