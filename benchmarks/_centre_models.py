"""What the centre-model benchmarks share (``hst.py``, ``dpcube.py``, ``emmc.py``): the data
sets and one measured row per (estimator, set, epsilon).

Synth-10d: ``make_blobs(100000, 10, centers=64, center_box=(-100, 100), random_state=42)``,
bounds (-100, 100), k = 64. ``uci_letter`` (k = 26, bounds (0, 15)) and ``mnist_emb40`` (k = 10,
its bounds) come from ``privclust.datasets.load`` and are skipped when absent. A row: medians
over seeds of the majority-vote accuracy, the ARI, the exact k-means cost per record at the
released centres (of the clipped records) and the fit time.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
from sklearn.datasets import make_blobs

from privclust.datasets import DatasetNotFoundError, load
from privclust.metrics import accuracy_majority, ari, inertia


def base_parser(doc: str) -> argparse.ArgumentParser:
    """The options every centre-model benchmark takes: ``--runs``, ``--epsilons``, ``--quick``."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 0.5])
    ap.add_argument("--quick", action="store_true", help="Synth-10d only")
    return ap


def synth_10d():
    X, y = make_blobs(100_000, 10, centers=64, center_box=(-100, 100), random_state=42)
    return "synth-10d", X, y, 64, (-100.0, 100.0)


def stored(name, k, bounds=None):
    try:
        ds = load(name)
    except (DatasetNotFoundError, FileNotFoundError, OSError) as exc:
        print(f"{name}: skipped ({type(exc).__name__}: {exc})")
        return None
    return name, ds.X, ds.y, k, ds.bounds if bounds is None else bounds


def data_sets(quick: bool) -> list:
    """Synth-10d, and unless ``quick`` Letter and MNIST-emb40 when they are present."""
    sets = [synth_10d()]
    if not quick:
        sets += [s for s in (stored("uci_letter", 26, (0.0, 15.0)),
                             stored("mnist_emb40", 10)) if s]
    return sets


def measure(label, make, name, X, y, k, bounds, eps, runs) -> dict:
    """Fit ``make(seed)`` ``runs`` times, print one row, return its medians and the slowest
    fit. Every fit must spend exactly ``eps``."""
    acc, aris, costs, times = [], [], [], []
    b = np.asarray(bounds, dtype=float)
    clipped = np.clip(X, *(b.T if b.ndim == 2 else b))
    for seed in range(runs):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # records clipped to the public bounds
            model = make(seed).fit(X)
        times.append(time.perf_counter() - t0)
        acc.append(accuracy_majority(y, model.labels_))
        aris.append(ari(y, model.labels_))
        costs.append(inertia(clipped, model.cluster_centers_) / X.shape[0])
        assert abs(model.privacy_report_.total().epsilon - eps) < 1e-9 * eps
    med = statistics.median
    row = {"acc": med(acc), "ari": med(aris), "cost": med(costs), "fit": med(times),
           "slowest": max(times)}
    print(f"{label:<10} {name:<12} eps={eps:<4g} k={k:<3} acc {row['acc']:.3f} (min "
          f"{min(acc):.3f})  ARI {row['ari']:.3f}  cost/record {row['cost']:10.4g}  fit "
          f"{row['fit']:.3f} s (max {row['slowest']:.3f})  (median of {runs})")
    return row
