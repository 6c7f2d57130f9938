"""The default estimator without k (``CoresetKMeans``) beside every registered estimator given k.

    python benchmarks/default.py                                   # every set, 5 seeds
    python benchmarks/default.py --seeds 2 --epsilons 0.25 1 --sets dpm_synth_10d mnist_emb40
    python benchmarks/default.py --estimators coreset lsh-splits --bounds private

For each data set, epsilon and kind of bounds (the set's public bounds, or ``bounds="private"``),
prints one Markdown table: a row for ``CoresetKMeans`` without ``n_clusters`` ("coreset, no
k"), then one row per registered estimator given the true number of classes k (as
``benchmarks/compare.py`` builds them: the command line's defaults, ``delta = 1/(n sqrt n)``
where it takes one). Cells: median over the seeds of ARI (where the set has labels) / the
number of clusters / the k-means cost of the data at the released centres divided by that of
non-private ``KMeans(k, n_init=10, random_state=0)`` with the same k (the k each fit released).

Sets: Synth-10d (``dpm_synth_10d``), Synth-100d (``make_blobs(100000, 100, centers=64,
center_box=(-100, 100), random_state=42)``, bounds (-100, 100)), ``mnist_emb40``,
``fashion_emb40``, ``uci_letter``, ``uci_gas_turbine`` (no labels), ``uci_htru2``,
``uci_shuttle``, ``cluto_t4_8k`` (``privclust.datasets.load``, bounds from their sidecars; k is
the number of classes, noise points labelled -1 not counted; Gas Turbine: k = 2). Sets absent
from the data folder are skipped with a printed line.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings

import numpy as np
from sklearn.cluster import KMeans

from privclust import datasets, registry
from privclust.datasets import DatasetNotFoundError
from privclust.metrics import ari

SETS = ["dpm_synth_10d", "synth_100d", "mnist_emb40", "fashion_emb40", "uci_letter",
        "uci_gas_turbine", "uci_htru2", "uci_shuttle", "cluto_t4_8k"]
#: k for sets without labels
K_UNLABELLED = {"uci_gas_turbine": 2}
#: why an estimator has no row (as in benchmarks/compare.py)
NOT_SUITED = {
    "dbscan": "needs a radius in each set's units",
    "morse": "cost grows with K0^3 (benchmarks/morse.py)",
}
#: Google's LSH-Splits at epsilon 1 with k and public bounds (the DPM paper's Table 2 and our
#: measurement of Google's code): the ARI targets of the default at epsilon 0.25 without k.
TARGETS = {"dpm_synth_10d": 0.982, "synth_100d": 0.997, "mnist_emb40": 0.913,
           "fashion_emb40": 0.725, "cluto_t4_8k": 0.366}


def _load(name):
    if name == "synth_100d":
        return datasets.synth_100d()
    return datasets.load(name)


class _Baseline:
    """Non-private KMeans cost per (set, k), computed once."""

    def __init__(self):
        self.cache = {}

    def cost(self, name, X, k):
        key = (name, int(k))
        if key not in self.cache:
            km = KMeans(int(k), n_init=10, random_state=0).fit(X)
            self.cache[key] = float(km.inertia_)
        return self.cache[key]


def _cost(X, centres) -> float:
    from privclust._geometry import nearest_centres

    lab = nearest_centres(X, centres)
    return float(((X - centres[lab]) ** 2).sum())


def _build(name, k, epsilon, delta, bounds, seed):
    if name == "coreset, no k":
        return registry.ENTRIES["coreset"].cls(epsilon=epsilon, bounds=bounds,
                                               random_state=seed)
    entry = registry.ENTRIES[name]
    values = {dest: None for dest in registry.OPTIONS}
    for dest in ("n_clusters", "n_components"):
        if dest in entry.applicable():
            values[dest] = k
    return entry.build(values, epsilon=epsilon, delta=delta, bounds=bounds, random_state=seed)


def _cell(name, data, set_name, bounds, k, epsilon, seeds, baseline):
    X, y = data.X, data.y
    n = X.shape[0]
    delta = 1.0 / (n * np.sqrt(n))
    rows = []
    for seed in range(seeds):
        model = _build(name, k, epsilon, delta, bounds, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            try:
                model.fit(X)
            except ValueError as exc:  # refused up front (its predicted cost, too few records)
                return "refused: " + str(exc).split(";")[0][:60]
            took = time.perf_counter() - t0
        centres = np.asarray(model.cluster_centers_, dtype=float)
        kk = centres.shape[0]
        ratio = _cost(X, centres) / baseline.cost(set_name, X, kk) if kk else float("nan")
        score = float("nan") if y is None else ari(y, model.labels_)
        rows.append((score, kk, ratio, took))
    a, kk, r, t = (list(c) for c in zip(*rows, strict=True))
    med = statistics.median
    ari_s = "-" if np.isnan(a).all() else f"{med(a):.3f}"
    return f"{ari_s} / {med(kk):g} / {med(r):.2f}x / {med(t):.1f} s"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5, help="seeds per cell (default 5)")
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 0.5, 0.25])
    p.add_argument("--sets", nargs="+", default=SETS, choices=SETS)
    p.add_argument("--bounds", nargs="+", default=["public", "private"],
                   choices=["public", "private"])
    names = [n for n in registry.ENTRIES if n not in NOT_SUITED]
    p.add_argument("--estimators", nargs="+", default=names, choices=names,
                   help="registered estimators given k (default: every suited one)")
    args = p.parse_args(argv)
    loaded = {}
    for name in args.sets:
        try:
            loaded[name] = _load(name)
        except (DatasetNotFoundError, FileNotFoundError, OSError) as exc:
            print(f"(skipping {name}: {exc})", file=sys.stderr)
    print(f"Cells: ARI / clusters / cost over KMeans at that k / fit time; median of "
          f"{args.seeds} seed(s). Rows after the first are given the true k.")
    print("Not suited: " + "; ".join(f"{k}: {v}" for k, v in NOT_SUITED.items()))
    baseline = _Baseline()
    for eps in args.epsilons:
        for kind in args.bounds:
            print(f"\n### epsilon = {eps:g}, {kind} bounds\n")
            print("| estimator | " + " | ".join(loaded) + " |")
            print("|---|" + "---|" * len(loaded))
            for est in ["coreset, no k", *args.estimators]:
                cells = []
                for set_name, data in loaded.items():
                    bounds = "private" if kind == "private" else data.bounds
                    labels = data.y
                    k = K_UNLABELLED.get(set_name) or int(np.unique(labels[labels >= 0]).size)
                    cells.append(_cell(est, data, set_name, bounds, k, eps, args.seeds,
                                       baseline))
                print(f"| {est} | " + " | ".join(cells) + " |", flush=True)
    print("\nTargets (ARI of Google's LSH-Splits at epsilon 1 with k and public bounds): "
          + ", ".join(f"{k} {v}" for k, v in TARGETS.items() if k in loaded))


if __name__ == "__main__":
    main()
