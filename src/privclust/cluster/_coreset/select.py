"""The choice of k: candidate centres from the private coreset (post-processing), one choice
among them by the exponential mechanism on the records' simplified silhouette.

For every k tried, weighted k-means (k-means++ seeding and Lloyd, scikit-learn) on the coreset's
points gives k centres: public, since they are computed from released values only. Each
candidate's score is the sum over the records of the **simplified silhouette** (Hruschka,
Campello, de Castro 2004; the same score as :mod:`privclust.model_selection._score`)

    s(x) = (b - a) / b,   a, b: distances of x to its nearest and second-nearest centre

(0 when ``b = 0``), in ``[0, 1]``. Given the candidates, adding or removing one record adds or
removes its own term and nothing else, so every score moves by at most 1, and all in the same
direction (the term is at least 0): the exponential mechanism with sensitivity 1 and monotone scores
(no factor 2; McSherry and Talwar 2007, Thm. 6) chooses one candidate with ``eps_select``, however
many there are, and releases only its index. Each term is a function of the record and the centres
alone (distances from a k-d tree, computed per record), rounded down to a multiple of ``2**-16`` and
added as integers, so the sums are exact and independent of the records' order.

Why not a criterion on the coreset itself: its points are cells of the tree, coarser than the
clusters' own spread. Measured: without the cells' spread, the weighted silhouette, BIC and
Calinski-Harabasz on the coreset grew until k reached the number of points (Synth-10d); with
it, the silhouette chose 68 of 64 clusters on Synth-10d but 23, 25 and 36 on the MNIST
embedding's 10 classes, where the records' silhouette chooses 10.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree
from sklearn.cluster import KMeans

__all__ = ["SCORE_UNITS", "candidate_ks", "fit_centres", "silhouette_sum", "ward_merge"]

#: Terms are rounded down to multiples of ``1 / SCORE_UNITS`` and added as integers.
SCORE_UNITS = 1 << 16
#: Every k up to this is a candidate; above it, k grows by :data:`K_RATIO` per candidate.
DENSE_UP_TO = 16
K_RATIO = 1.08
_ROWS = 1 << 16


def candidate_ks(k_max: int) -> list[int]:
    """The candidate values of k: every k from 2 to ``min(k_max, DENSE_UP_TO)``, then
    ``K_RATIO`` apart up to ``k_max``."""
    ks = list(range(2, min(k_max, DENSE_UP_TO) + 1))
    k = float(DENSE_UP_TO)
    while k * K_RATIO <= k_max:
        k *= K_RATIO
        if int(round(k)) > ks[-1]:
            ks.append(int(round(k)))
    if k_max > DENSE_UP_TO and ks[-1] != k_max:
        ks.append(int(k_max))
    return ks


def fit_centres(points, weights, k: int, seed: int, n_init: int) -> np.ndarray:
    """k centres by weighted k-means on the coreset; with at most k points, the points
    themselves (then fewer than k centres)."""
    if points.shape[0] <= k:
        return points.copy()
    km = KMeans(n_clusters=k, n_init=n_init, random_state=seed)
    return km.fit(points, sample_weight=weights).cluster_centers_


def silhouette_sum(Y, centres) -> float:
    """``sum_x s(x)`` over the rows of ``Y`` against ``centres`` (module docstring), each term
    rounded down to a multiple of ``1 / SCORE_UNITS`` and added exactly: one record changes it
    by at most 1. An exact aggregate of the data, passed to the exponential mechanism."""
    C = np.asarray(centres, dtype=np.float64)
    if C.shape[0] < 2 or Y.shape[0] == 0:
        return 0.0
    tree = cKDTree(C)
    total = 0
    for start in range(0, Y.shape[0], _ROWS):
        dist, _ = tree.query(np.asarray(Y[start:start + _ROWS], dtype=np.float64), k=2)
        a, b = dist[:, 0], dist[:, 1]
        with np.errstate(invalid="ignore", divide="ignore"):
            s = np.where(b > 0, (b - a) / b, 0.0)
        s = np.clip(s, 0.0, 1.0)
        total += int(np.floor(s * SCORE_UNITS).astype(np.int64).sum())
    return total / SCORE_UNITS


def ward_merge(centres, sizes, k: int, var=None):
    """Merge the closest centres until ``k`` are left (post-processing of released centres
    and noisy sizes): each time the pair of least Ward cost ``w_i w_j / (w_i + w_j)
    ||c_i - c_j||^2`` (weights: the noisy sizes, at least 1) becomes its weighted mean with the
    summed size. ``var``: the centres' noise variances, combined as those of the weighted
    mean (``sum w_i^2 var_i / (sum w_i)^2``). Returns ``(centres (k, d), sizes (k,), var)``."""
    C = np.asarray(centres, dtype=float).copy()
    n = np.asarray(sizes).astype(np.int64).copy()
    w = np.maximum(n, 1).astype(float)
    v = np.zeros(n.size) if var is None else np.asarray(var, dtype=float).copy()
    while C.shape[0] > k:
        d2 = ((C[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
        cost = w[:, None] * w[None, :] / (w[:, None] + w[None, :]) * d2
        np.fill_diagonal(cost, np.inf)
        i, j = np.unravel_index(int(np.argmin(cost)), cost.shape)
        C[i] = (w[i] * C[i] + w[j] * C[j]) / (w[i] + w[j])
        v[i] = (w[i] ** 2 * v[i] + w[j] ** 2 * v[j]) / (w[i] + w[j]) ** 2
        w[i] += w[j]
        n[i] += n[j]
        C, w, n, v = (np.delete(C, j, axis=0), np.delete(w, j), np.delete(n, j),
                      np.delete(v, j))
    return C, n, v
