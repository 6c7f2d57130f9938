"""The choice of k's criterion without privacy: the k it chooses and its ARI there.

The no-k targets are judged at the k the non-private criterion chooses where it chooses
another k than the true one (a private choice cannot beat the criterion it makes private):
scikit-learn's ``KMeans(k, n_init=10, random_state=0)`` for every k of ``ks``, the k of the
highest mean simplified silhouette over the records (the choice's score, module docstring of
``privclust.cluster._coreset.select``), and the ARI of its nearest-centre labels.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree
from sklearn.cluster import KMeans

from privclust.metrics import ari


def simplified_silhouette(X, centres) -> float:
    """The records' mean simplified silhouette ``(b - a) / b`` against ``centres``."""
    dist, _ = cKDTree(centres).query(X, k=2)
    return float(np.mean((dist[:, 1] - dist[:, 0]) / np.maximum(dist[:, 1], 1e-300)))


def criterion_k(X, y, ks) -> tuple[int, float]:
    """The k of ``ks`` of the highest mean simplified silhouette over non-private k-means fits,
    and the ARI of its labels. Returns ``(k, ARI)``."""
    X = np.asarray(X, dtype=np.float64)
    best = (-1.0, 0, 0.0)
    for k in ks:
        C = KMeans(k, n_init=10, random_state=0).fit(X).cluster_centers_
        s = simplified_silhouette(X, C)
        if s > best[0]:
            best = (s, k, ari(y, cKDTree(C).query(X)[1]))
    return best[1], best[2]
