"""Every registered privclust estimator side by side on the DPM paper's sets (Tables 2-3).

    python benchmarks/compare.py                      # epsilon 1 and 0.5, 3 runs each
    python benchmarks/compare.py --runs 1 --sets dpm_synth_10d --epsilons 1
    python benchmarks/compare.py --estimators dpm lloyd lsh-splits

For each set (Synth-10d, Synth-100d, ``uci_letter``, ``uci_gas_turbine``, ``mnist_emb40``) and
epsilon, each estimator of :mod:`privclust.registry` is fitted with the set's public bounds and
the true number of classes k where it takes one (DPM finds k itself), ``delta = 1/(n sqrt n)``
where it takes a delta, and fixed seeds. Prints a Markdown table per epsilon: ARI, majority
accuracy, silhouette (5,000-point sample), number of clusters and median fit time per estimator
and set ("-" where a set has no labels). An estimator the sets do
not suit (DP-DBSCAN needs a radius in each set's units; Morse merging's cost grows with the cube
of its components, and the paper runs it on its own sets) is shown as "n/a" with the reason.
Sets absent from ``../shared/data`` are skipped.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np

from privclust import datasets, registry
from privclust.metrics import accuracy_majority, ari, silhouette

SETS = {
    # name: (public bounds (None: the sidecar's), k (None: the number of classes))
    "dpm_synth_10d": ((-100.0, 100.0), None),
    "synth_100d": ((-100.0, 100.0), None),
    "uci_letter": ((0.0, 15.0), None),
    "uci_gas_turbine": ((-6.23, 1100.9), 2),
    "mnist_emb40": (None, None),
}
#: why an estimator has no column on these sets
NOT_SUITED = {
    "dbscan": "needs a radius in each set's units (its own sets: benchmarks/dbscan.py)",
    "morse": "cost grows with K0^3; run on the paper's sets in benchmarks/morse.py",
}


def _load(name):
    if name == "synth_100d":
        return datasets.synth_100d()
    return datasets.load(name)


def _estimator(entry, k, epsilon, delta, bounds, seed):
    values = {dest: None for dest in registry.OPTIONS}  # the command line's defaults
    for dest in ("n_clusters", "n_components"):
        if dest in entry.applicable():
            values[dest] = k
    return entry.build(values, epsilon=epsilon, delta=delta, bounds=bounds, random_state=seed)


def _run(entry, data, bounds, k, epsilon, runs):
    X, y = data.X, data.y
    n = X.shape[0]
    delta = 1.0 / (n * np.sqrt(n))
    rows = []
    for seed in range(runs):
        model = _estimator(entry, k, epsilon, delta, bounds, seed)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                model.fit(X)
            except ValueError as exc:  # refused up front (e.g. its predicted cost)
                return "refused: " + str(exc).split(";")[0].split(" on these")[0]
        elapsed = time.perf_counter() - t0
        labels = model.labels_
        sil = silhouette(X, labels, sample_size=5000, random_state=seed) if len(
            np.unique(labels)) > 1 else float("nan")
        if y is None:  # unlabelled (Gas Turbine): the paper reports silhouette only
            rows.append((np.nan, np.nan, sil, model.n_clusters_, elapsed))
        else:
            rows.append((ari(y, labels), accuracy_majority(y, labels), sil, model.n_clusters_,
                         elapsed))
    a, acc, sil, kk, t = (list(c) for c in zip(*rows, strict=True))
    return (f"{_f(a)} / {_f(acc)} / {_f(sil)} / {np.mean(kk):.1f} / "
            f"{statistics.median(t):.2f} s")


def _f(values) -> str:
    v = float(np.mean(values))
    return "-" if np.isnan(v) else f"{v:.3f}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="seeds per cell (default 3)")
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 0.5])
    p.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    p.add_argument("--estimators", nargs="+", default=list(registry.ENTRIES),
                   choices=list(registry.ENTRIES))
    args = p.parse_args(argv)
    loaded = {}
    for name in args.sets:
        try:
            loaded[name] = _load(name)
        except (FileNotFoundError, OSError) as exc:
            print(f"(skipping {name}: {exc})")
    print("Cells: ARI / majority accuracy / silhouette / clusters / median fit time; "
          f"{args.runs} run(s) each; delta = 1/(n sqrt n) where the estimator takes one.")
    for eps in args.epsilons:
        print(f"\n### epsilon = {eps:g}\n")
        print("| estimator | " + " | ".join(loaded) + " |")
        print("|---|" + "---|" * len(loaded))
        for est in args.estimators:
            entry = registry.ENTRIES[est]
            if est in NOT_SUITED:
                print(f"| {est} | n/a: {NOT_SUITED[est]} |" + " |" * (len(loaded) - 1))
                continue
            cells = []
            for name, data in loaded.items():
                bounds, k = SETS[name]
                bounds = bounds if bounds is not None else data.bounds
                k = k or int(len(np.unique(data.y[data.y >= 0])))  # sets without k have labels
                cells.append(_run(entry, data, bounds, k, eps, args.runs))
            print(f"| {est} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
