"""A table with no public bounds, clustered under one budget: pipelines against public bounds.

    python benchmarks/pipeline.py                 # 5 seeds, epsilon 1
    python benchmarks/pipeline.py --seeds 3 --sets uci_letter --estimator lsh-splits

For each set, the same estimator at total epsilon 1 three ways:

* ``public``: the sidecar's public bounds, epsilon 1;
* ``clip``: ``PrivateClipper(0.1)`` then the estimator at 0.9 (no bounds given anywhere);
* ``clip+scale``: ``PrivateClipper(0.1)``, ``PrivateScaler(0.1)``, the estimator at 0.8.

Prints the mean ARI where the set has labels (else the k-means cost of the partition over
non-private ``KMeans(k, n_init=3)``'s, in the original units), the share of records the private
bounds clip (max over seeds) and the median fit time. Breast cancer repeated 50 times (28,450 x
30, scikit-learn's copy) stands for a real table with features on scales from 0.001 to 4,000.
Sets absent from ``../shared/data`` are skipped with a line.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_breast_cancer
from sklearn.metrics import adjusted_rand_score

from privclust import DPCube, DPLloyd, LSHSplits, datasets
from privclust.pipeline import make_private_pipeline
from privclust.preprocessing import PrivateClipper, PrivateScaler

SETS = ("breast_cancer_x50", "uci_letter", "uci_gas_turbine", "mnist_emb40")
ESTIMATORS = {"lloyd": DPLloyd, "lsh-splits": LSHSplits, "dpcube": DPCube}


def _load(name):
    """X, y (or None), public bounds, k."""
    if name == "breast_cancer_x50":
        X, y = load_breast_cancer(return_X_y=True)
        X = np.tile(X, (50, 1))
        return X, np.tile(y, 50), np.column_stack([X.min(0), X.max(0)]) * [0.9, 1.1], 2
    ds = datasets.load(name)
    k = 2 if ds.y is None or len(np.unique(ds.y)) < 2 else len(np.unique(ds.y))
    return np.asarray(ds.X, float), ds.y, ds.bounds, k


def _partition_cost(X, labels):
    cost = 0.0
    for c in np.unique(labels):
        part = X[labels == c]
        cost += ((part - part.mean(0)) ** 2).sum()
    return cost


def _run(way, X, bounds, k, seed, make=DPLloyd):
    if way == "public":
        model = make(k, epsilon=1.0, bounds=bounds, random_state=seed).fit(X)
        return model.labels_, 0.0
    steps = [PrivateClipper(0.1)] + ([PrivateScaler(0.1)] if way == "clip+scale" else [])
    eps = 1.0 - 0.1 * len(steps)
    pipe = make_private_pipeline(*steps, make(k, epsilon=eps), random_state=seed).fit(X)
    clipped = float(np.mean(np.any(pipe[0].transform(X) != X, axis=1)))
    return pipe.predict(X), clipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--sets", nargs="*", default=list(SETS))
    parser.add_argument("--estimator", choices=sorted(ESTIMATORS), default="lloyd")
    args = parser.parse_args()
    print("| set | n x d | way | ARI (or cost / KMeans) | clipped (max) | time (median) |")
    print("|---|---|---|---|---|---|")
    for name in args.sets:
        try:
            X, y, bounds, k = _load(name)
        except datasets.DatasetNotFoundError:
            print(f"| {name} | skipped: not in the data folder | | | | |")
            continue
        base = None if y is not None else _partition_cost(
            X, KMeans(k, n_init=3, random_state=0).fit_predict(X))
        for way in ("public", "clip", "clip+scale"):
            scores, clips, times = [], [], []
            for seed in range(args.seeds):
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    labels, clipped = _run(way, X, bounds, k, seed,
                                           ESTIMATORS[args.estimator])
                times.append(time.perf_counter() - t0)
                clips.append(clipped)
                scores.append(adjusted_rand_score(y, labels) if y is not None
                              else _partition_cost(X, labels) / base)
            print(f"| {name} | {X.shape[0]} x {X.shape[1]} | {way} | {np.mean(scores):.3f} | "
                  f"{max(clips):.2%} | {statistics.median(times):.2f} s |", flush=True)


if __name__ == "__main__":
    main()
