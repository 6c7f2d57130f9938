"""Small clusters standing apart: how many of a set's clusters the default finds, and its cost.

    python benchmarks/small_clusters.py                       # gen_unequal10_5d, the targets
    python benchmarks/small_clusters.py --epsilons 1 0.5 --seeds 5 --given

For each epsilon, ``CoresetKMeans(epsilon=e, bounds="private", random_state=s)`` without
``n_clusters`` (and with the true k, ``--given``), seeds ``0 .. seeds-1``: the clusters found
(a true cluster is found when the released centre most of its records are nearest to has most
of its own records from that cluster), the number of centres, the ARI, the k-means cost at the
released centres over non-private ``KMeans(k, n_init=10, random_state=0)``, and the report's
note on the smallest findable cluster. Medians over the seeds (ARI: mean). Needs the data
folder (``PRIVCLUST_DATA``).
"""

from __future__ import annotations

import argparse
import statistics
import warnings

import numpy as np
from sklearn.cluster import KMeans

from privclust import CoresetKMeans, datasets
from privclust.metrics import ari


def cost(X, centres) -> float:
    """The k-means cost of ``X`` at ``centres`` (squared distances to the nearest)."""
    d2 = ((X[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    return float(d2.min(axis=1).sum())


def found(y, labels) -> int:
    """True clusters whose main centre (the one most of their records are nearest to) takes
    most of its records from them."""
    out = 0
    for j in np.unique(y[y >= 0]):
        main = np.bincount(labels[y == j]).argmax()
        owners = y[(labels == main) & (y >= 0)]
        out += int(np.bincount(owners).argmax() == j)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--set", default="gen_unequal10_5d")
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 0.5])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--given", action="store_true", help="also given the true k")
    args = p.parse_args(argv)
    data = datasets.load(args.set)
    X, y = np.asarray(data.X, dtype=np.float64), np.asarray(data.y)
    k = int(np.unique(y[y >= 0]).size)
    base = cost(X, KMeans(k, n_init=10, random_state=0).fit(X).cluster_centers_)
    print(f"{args.set}: {X.shape[0]:,} x {X.shape[1]}, {k} clusters")
    print("| epsilon | k | found (median) | centres | ARI (mean) | cost (median) | per seed |")
    print("|---|---|---|---|---|---|---|")
    for eps in args.epsilons:
        for kk in ([None, k] if args.given else [None]):
            rows, note = [], ""
            for seed in range(args.seeds):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = CoresetKMeans(kk, epsilon=eps, bounds="private",
                                      random_state=seed).fit(X)
                rows.append((found(y, m.labels_), m.n_clusters_, ari(y, m.labels_),
                             cost(X, m.cluster_centers_) / base))
                note = next((n for n in m.privacy_report_.notes if "smallest" in n), note)
            f, c, a, r = zip(*rows, strict=True)
            per = ", ".join(f"{fi}/{ci}/{ri:.2f}x" for fi, ci, ri in zip(f, c, r, strict=True))
            print(f"| {eps:g} | {'given' if kk else 'none'} | {statistics.median(f):g} | "
                  f"{statistics.median(c):g} | {np.mean(a):.3f} | {statistics.median(r):.2f}x | "
                  f"{per} |", flush=True)
            if note:
                print(f"  ({note})")


if __name__ == "__main__":
    main()
