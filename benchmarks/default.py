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
The last lines say which of the default's targets the medians meet (without k at epsilon 0.25
with private bounds: Google's ARI at epsilon 1 with a number of clusters within a factor 2 of
the classes; given k with public bounds: Google's cost at epsilon 1, ``GOOGLE_COST``).

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
#: Google's LSH-Splits at epsilon 1 with k and public bounds: cost over non-private KMeans(k)
#: (``../shared/peers``), the default's cost targets given k.
GOOGLE_COST = {"dpm_synth_10d": 64.96, "synth_100d": 89.74, "mnist_emb40": 1.296,
               "fashion_emb40": 1.166, "uci_letter": 1.408, "uci_gas_turbine": 1.149,
               "uci_htru2": 1.258, "uci_shuttle": 5.796, "cluto_t4_8k": 1.525}


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
                return "refused: " + str(exc).split(";")[0][:60], None
            took = time.perf_counter() - t0
        centres = np.asarray(model.cluster_centers_, dtype=float)
        kk = centres.shape[0]
        ratio = _cost(X, centres) / baseline.cost(set_name, X, kk) if kk else float("nan")
        score = float("nan") if y is None else ari(y, model.labels_)
        rows.append((score, kk, ratio, took))
    a, kk, r, t = (list(c) for c in zip(*rows, strict=True))
    med = statistics.median
    ari_s = "-" if np.isnan(a).all() else f"{med(a):.3f}"
    return (f"{ari_s} / {med(kk):g} / {med(r):.2f}x / {med(t):.1f} s",
            (med(a), med(kk), med(r)))


def _targets_met(results, classes) -> list[str]:
    """Lines saying which of the default's targets the medians meet: without k at epsilon
    0.25 with private bounds, ARI at or above Google's at epsilon 1 and a number of clusters
    within a factor 2 of the classes; given k with public bounds, cost at or below Google's at
    epsilon 1 (every epsilon measured)."""
    lines = []
    no_k = {s: m for (e, kind, est, s), m in results.items()
            if e == 0.25 and kind == "private" and est == "coreset, no k" and s in TARGETS}
    if no_k:
        met = [s for s, (a, kk, _) in no_k.items() if _ari_met(a, kk, TARGETS[s], classes[s])]
        lines.append(f"without k, epsilon 0.25, private bounds: ARI target met on {len(met)} of "
                     f"{len(no_k)} ({', '.join(met) or 'none'})")
    for eps in sorted({e for e, *_ in results}, reverse=True):
        given = {s: m for (e, kind, est, s), m in results.items()
                 if e == eps and kind == "public" and est == "coreset" and s in GOOGLE_COST}
        if given:
            met = [s for s, (_, _, r) in given.items() if r <= GOOGLE_COST[s]]
            lines.append(f"given k, epsilon {eps:g}, public bounds: cost at or below Google's "
                         f"on {len(met)} of {len(given)} (not: "
                         f"{', '.join(s for s in given if s not in met) or 'none'})")
    return lines


def _ari_met(ari_median, clusters, target, classes) -> bool:
    """An ARI target met: the median ARI reaches it with a median number of clusters within a
    factor 2 of the classes."""
    return ari_median >= target and classes / 2 <= clusters <= 2 * classes


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
    results, classes = {}, {}
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
                    classes[set_name] = k
                    text, medians = _cell(est, data, set_name, bounds, k, eps, args.seeds,
                                          baseline)
                    cells.append(text)
                    if medians is not None:
                        results[(eps, kind, est, set_name)] = medians
                print(f"| {est} | " + " | ".join(cells) + " |", flush=True)
    print("\nTargets (ARI of Google's LSH-Splits at epsilon 1 with k and public bounds): "
          + ", ".join(f"{k} {v}" for k, v in TARGETS.items() if k in loaded))
    for line in _targets_met(results, classes):
        print("- " + line)


if __name__ == "__main__":
    main()
