"""Which k the usual criteria pick without privacy: where the data's own k-means structure and
its labels disagree, no private choice of k built on such a criterion can land on the classes.

    python benchmarks/k_criteria.py                                  # Fashion, Cluto-t4, MNIST
    python benchmarks/k_criteria.py --sets fashion_emb40 --ks 6 7 8 9 10 11 12

For every k, non-private ``KMeans(k, n_init=3, random_state=0)`` on the set (at most 20,000
records, a fixed random subset) gives one clustering; the table prints its ARI against the
labels (noise points, labelled -1, a group of their own, as in ``benchmarks/default.py``) and
four criteria of it: the mean simplified silhouette (what ``CoresetKMeans`` scores,
privately, through the exponential mechanism), the full silhouette on 5,000 records, the
Calinski-Harabasz index (higher is better) and the Davies-Bouldin index (lower is better). The
last lines name the k each criterion picks and the k of the best ARI. Sets come from the data
folder (``privclust.datasets.load``); absent ones are skipped with a printed line.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from scipy.spatial import cKDTree
from sklearn.cluster import KMeans
from sklearn.metrics import calinski_harabasz_score, davies_bouldin_score, silhouette_score

from privclust import datasets
from privclust.datasets import DatasetNotFoundError
from privclust.metrics import ari

SETS = ["fashion_emb40", "cluto_t4_8k", "mnist_emb40"]
MAX_ROWS = 20_000
SILHOUETTE_ROWS = 5_000


def simplified_silhouette(X, centres) -> float:
    """Mean over the records of ``(b - a) / b`` (a, b: distances to the nearest and
    second-nearest centre)."""
    dist, _ = cKDTree(centres).query(X, k=2)
    a, b = dist[:, 0], dist[:, 1]
    return float(np.mean(np.where(b > 0, (b - a) / np.maximum(b, 1e-300), 0.0)))


def criteria_rows(X, y, ks):
    """One row per k: ``(k, ARI, simplified silhouette, silhouette, CH, DB)``."""
    rows = []
    for k in ks:
        km = KMeans(k, n_init=3, random_state=0).fit(X)
        lab = km.labels_
        rows.append((k, ari(y, lab), simplified_silhouette(X, km.cluster_centers_),
                     silhouette_score(X, lab, sample_size=min(SILHOUETTE_ROWS, X.shape[0]),
                                      random_state=0),
                     calinski_harabasz_score(X, lab), davies_bouldin_score(X, lab)))
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sets", nargs="+", default=SETS)
    p.add_argument("--ks", type=int, nargs="+", default=list(range(2, 17)))
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    for name in args.sets:
        try:
            data = datasets.load(name)
        except DatasetNotFoundError as exc:
            print(f"{name}: skipped ({exc})")
            continue
        X, y = np.asarray(data.X, dtype=np.float64), np.asarray(data.y)
        if X.shape[0] > MAX_ROWS:
            idx = np.random.default_rng(0).choice(X.shape[0], MAX_ROWS, replace=False)
            X, y = X[idx], y[idx]
        classes = int(np.unique(y[y >= 0]).size)
        rows = criteria_rows(X, y, args.ks)
        print(f"\n### {name} ({X.shape[0]} records, {classes} classes)\n")
        print("| k | ARI | simplified silhouette | silhouette | Calinski-Harabasz | "
              "Davies-Bouldin |\n|---|---|---|---|---|---|")
        for k, a, ss, s, ch, db in rows:
            print(f"| {k} | {a:.3f} | {ss:.4f} | {s:.4f} | {ch:.1f} | {db:.3f} |")
        pick = {"simplified silhouette": max(rows, key=lambda r: r[2])[0],
                "silhouette": max(rows, key=lambda r: r[3])[0],
                "Calinski-Harabasz": max(rows, key=lambda r: r[4])[0],
                "Davies-Bouldin": min(rows, key=lambda r: r[5])[0]}
        best = max(rows, key=lambda r: r[1])
        print("\npicked: " + ", ".join(f"{c} k = {k}" for c, k in pick.items())
              + f"; best ARI {best[1]:.3f} at k = {best[0]}")


if __name__ == "__main__":
    main()
