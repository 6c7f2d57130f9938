"""DPCube (Balcan et al., ICML 2017): accuracy, ARI, k-means cost and fit time.

    python benchmarks/dpcube.py                    # Synth-10d (eps 1, 0.5), letter, mnist_emb40
    python benchmarks/dpcube.py --runs 3 --quick   # Synth-10d only
    python benchmarks/dpcube.py --n-components 5 --recover-share 0.6 --n-lloyd 1

Synth-10d: ``make_blobs(100000, 10, centers=64, center_box=(-100, 100), random_state=42)``,
bounds (-100, 100), k = 64 (targets at epsilon 1: majority accuracy >= 0.90, fit <= 1 s).
``uci_letter`` (k = 26, bounds (0, 15)) and ``mnist_emb40`` (k = 10, its bounds) are loaded with
``privclust.datasets.load`` and skipped when absent. Every row: median over ``--runs`` seeds of
the majority-vote accuracy (``privclust.metrics.accuracy_majority``), the ARI, the exact k-means
cost per record at the released centres, and the fit time (the median of the runs).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
from sklearn.datasets import make_blobs

from privclust.cluster.dpcube import DPCube
from privclust.datasets import DatasetNotFoundError, load
from privclust.metrics import accuracy_majority, ari


def synth_10d():
    X, y = make_blobs(100_000, 10, centers=64, center_box=(-100, 100), random_state=42)
    return "synth-10d", X, y, 64, (-100.0, 100.0)


def stored(name, k):
    try:
        ds = load(name)
    except (DatasetNotFoundError, FileNotFoundError, OSError) as exc:
        print(f"{name}: skipped ({type(exc).__name__}: {exc})")
        return None
    return name, ds.X, ds.y, k, ds.bounds


def run(name, X, y, k, bounds, eps, runs, params):
    acc, aris, costs, times = [], [], [], []
    for seed in range(runs):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # records clipped to the public bounds
            model = DPCube(k, epsilon=eps, bounds=bounds, random_state=seed, **params).fit(X)
        times.append(time.perf_counter() - t0)
        acc.append(accuracy_majority(y, model.labels_))
        aris.append(ari(y, model.labels_))
        costs.append(model.cost_history_[-1] / X.shape[0])
        assert abs(model.privacy_report_.total().epsilon - eps) < 1e-9 * eps
    med = statistics.median
    print(f"{name:<12} eps={eps:<4g} k={k:<3} acc {med(acc):.3f} (min {min(acc):.3f})  "
          f"ARI {med(aris):.3f}  cost/record {med(costs):10.4g}  fit {med(times):.3f} s  "
          f"(median of {runs})")
    return med(acc), med(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 0.5])
    ap.add_argument("--quick", action="store_true", help="Synth-10d only")
    for opt, typ in (("n-components", int), ("max-depth", int), ("n-shifts", int),
                     ("recover-share", float), ("n-lloyd", int)):
        ap.add_argument(f"--{opt}", type=typ, default=None)
    args = ap.parse_args(argv)
    params = {key: val for key in ("n_projected", "max_depth", "n_shifts", "recover_share",
                                   "n_lloyd") if (val := getattr(args, key)) is not None}
    print(f"DPCube {params or '(defaults)'}")
    sets = [synth_10d()]
    if not args.quick:
        sets += [s for s in (stored("uci_letter", 26), stored("mnist_emb40", 10)) if s]
    for name, X, y, k, bounds in sets:
        if name == "uci_letter":
            bounds = (0.0, 15.0)
        for eps in args.epsilons:
            acc, fit = run(name, X, y, k, bounds, eps, args.runs, params)
            if name == "synth-10d" and eps == 1.0:
                ok = acc >= 0.90 and fit <= 1.0
                print(f"  target (accuracy >= 0.90, fit <= 1 s at epsilon 1): "
                      f"{'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
