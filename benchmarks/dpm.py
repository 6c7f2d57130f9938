"""Reproduce the DPM rows of Tables 2-3 of the DPM paper (004) that our data allows.

    python benchmarks/dpm.py                    # all sets, 20 runs each
    python benchmarks/dpm.py --runs 5 --sets dpm_synth_10d uci_letter
    python benchmarks/dpm.py --budget-split paper    # the paper's (0.04, 0.18, 0.18, 0.6)

For every set: epsilon = 1, delta = 1/(n_hat^1.5) (the paper's), DPM fitted ``--runs`` times
(seeds 0..runs-1); printed beside the paper's DPM and KMeans columns and beside non-private
scikit-learn KMeans (k = number of classes, n_init=1, best of the references by silhouette).

Figures (names say which definition):
  silhouette       Def. 11, sklearn silhouette on a 10,000-point sample, -1 if < 2 clusters
  acc_majority     Def. 12 (many-to-one majority vote; what the paper's tables use)
  acc_hungarian    one-to-one matching (linear_sum_assignment)
  inertia          squared (scikit-learn's); the paper's Def. 10 prints an unsquared norm
  kmd_norm         KMeans distance (Def. 9) per private centre / ((hi - lo) sqrt(d)), against
                   the best-silhouette KMeans runs (the authors' evaluation code's normalisation)
  k                number of clusters found
  fit_s            median fit time; peak_x: peak traced memory of the fit / size of X
Data: ../shared/data relative to the repository root, or $PRIVCLUST_DATA. Synth-100d is
generated (make_blobs(100000, 100, centers=64, center_box=(-100, 100), random_state=42)).
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
import warnings

import numpy as np
from sklearn.cluster import KMeans
from tqdm import tqdm

from privclust import DPM
from privclust import metrics as M
from privclust.datasets import DatasetNotFoundError, load, synth_100d

# Paper (004) Tables 2-3: DPM column and non-private KMeans column (mean values).
PAPER = {
    "dpm_synth_10d": {"dpm": dict(silhouette=0.96, acc_majority=0.99, inertia=1.8e7,
                                  kmd_norm=0.01),
                      "kmeans": dict(silhouette=0.97, acc_majority=1.00, inertia=1.0e6)},
    "synth_100d": {"dpm": dict(silhouette=0.98, acc_majority=1.00, inertia=5.4e8, kmd_norm=0.03),
                   "kmeans": dict(silhouette=0.98, acc_majority=1.00, inertia=1.0e7)},
    "mnist_emb40": {"dpm": dict(silhouette=0.60, acc_majority=0.98, inertia=1.4e6,
                                kmd_norm=0.02),
                    "kmeans": dict(silhouette=0.61, acc_majority=0.98, inertia=1.4e6)},
    "fashion_emb40": {"dpm": dict(silhouette=0.40, acc_majority=0.71, inertia=1.6e6,
                                  kmd_norm=0.04),
                      "kmeans": dict(silhouette=0.40, acc_majority=0.77, inertia=1.2e6)},
    "uci_letter": {"dpm": dict(silhouette=0.05, acc_majority=0.20, inertia=9.5e5, kmd_norm=0.10),
                   "kmeans": dict(silhouette=0.15, acc_majority=0.28, inertia=5.8e5)},
    "uci_gas_turbine": {"dpm": dict(silhouette=0.13, inertia=3.7e7, kmd_norm=0.01),
                        "kmeans": dict(silhouette=0.37, inertia=2.5e7)},
}

# Public bounds: the DPM artifact's where they fit our copy of the data, else the sidecar's.
BOUNDS = {
    "dpm_synth_10d": (-100.0, 100.0),
    "synth_100d": (-100.0, 100.0),
    "uci_letter": (0.0, 15.0),
    "uci_gas_turbine": (-6.23, 1100.9),
    "mnist_emb40": None,  # our tanh embeddings live in [-1, 1] (the paper's used (0, 13))
    "fashion_emb40": None,
}
N_CLASSES = {"uci_gas_turbine": 2}  # the paper picks k = 2 by KMeans silhouette (Sec. 6.1)


def _load(name):
    if name == "synth_100d":
        return synth_100d()
    return load(name)


def _fit_measured(X, bounds, seed, budget_split):
    tracemalloc.start()
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DPM(epsilon=1.0, bounds=bounds, random_state=seed,
                    budget_split=budget_split).fit(X)
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return model, elapsed, peak


def run_set(name, runs, n_references, budget_split):
    data = _load(name)
    X, y = data.X, data.y
    bounds = BOUNDS[name] if BOUNDS.get(name) is not None else data.bounds
    k_true = N_CLASSES.get(name) or int(len(np.unique(y[y >= 0])))
    refs = M.kmeans_reference(X, k_true, n_runs=n_references, top=n_references,
                              random_state=0, sample_size=5000)
    rows = []
    for seed in tqdm(range(runs), desc=name, leave=False, file=sys.stderr):
        model, elapsed, peak = _fit_measured(X, bounds, seed, budget_split)
        c = model.cluster_centers_
        row = dict(
            k=model.n_clusters_,
            silhouette=M.silhouette(X, model.labels_, sample_size=10000, random_state=seed),
            inertia=M.inertia(X, c),
            kmd_norm=M.kmeans_distance(c, refs, bounds=bounds).normalised,
            fit_s=elapsed,
            peak_x=peak / X.nbytes,
        )
        if y is not None:
            row["acc_majority"] = M.accuracy_majority(y, model.labels_)
            row["acc_hungarian"] = M.accuracy_hungarian(y, model.labels_)
        rows.append(row)
    # non-private KMeans: the best reference run, and the time of one KMeans(n_init=1) fit
    t0 = time.perf_counter()
    km = KMeans(k_true, n_init=1, random_state=0).fit(X)
    km_time = time.perf_counter() - t0
    ref = refs[0]
    km_labels = M.assign(X, ref)
    km_row = dict(k=k_true, silhouette=M.silhouette(X, km_labels, sample_size=10000),
                  inertia=M.inertia(X, ref), kmd_norm=0.0, fit_s=km_time)
    if y is not None:
        km_row["acc_majority"] = M.accuracy_majority(y, km_labels)
        km_row["acc_hungarian"] = M.accuracy_hungarian(y, km_labels)
    del km
    return data, rows, km_row


def _fmt(v):
    if v is None:
        return "-"
    if isinstance(v, (int, np.integer)):
        return str(v)
    if abs(v) >= 1e4:
        return f"{v:.2e}"
    return f"{v:.3f}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--references", type=int, default=20,
                   help="KMeans runs for the KMeans distance reference (paper: best 20)")
    p.add_argument("--sets", nargs="*", default=list(BOUNDS))
    p.add_argument("--budget-split", default="default", choices=["default", "paper"])
    args = p.parse_args(argv)
    split = DPM.PAPER_BUDGET_SPLIT if args.budget_split == "paper" else DPM().budget_split
    print(f"DPM, epsilon=1, delta=1/n_hat^1.5, budget_split={split}, {args.runs} runs per set")
    metrics = ["k", "silhouette", "acc_majority", "acc_hungarian", "inertia", "kmd_norm",
               "fit_s", "peak_x"]
    for name in args.sets:
        try:
            data, rows, km_row = run_set(name, args.runs, args.references, split)
        except DatasetNotFoundError as exc:
            print(f"\n{name}: skipped ({str(exc).splitlines()[0]})")
            continue
        print(f"\n{name}  (n={data.n}, d={data.d})")
        print(f"  {'figure':<14}{'DPM mean':>11}{'std':>9}{'median':>10}{'paper DPM':>11}"
              f"{'KMeans':>10}{'paper KM':>10}")
        paper = PAPER.get(name, {})
        for key in metrics:
            vals = [r[key] for r in rows if key in r]
            if not vals:
                continue
            print(f"  {key:<14}{_fmt(float(np.mean(vals))):>11}{_fmt(float(np.std(vals))):>9}"
                  f"{_fmt(float(np.median(vals))):>10}"
                  f"{_fmt(paper.get('dpm', {}).get(key)):>11}{_fmt(km_row.get(key)):>10}"
                  f"{_fmt(paper.get('kmeans', {}).get(key)):>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
