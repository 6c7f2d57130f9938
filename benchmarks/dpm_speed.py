"""DPM speed and memory on Synth-10d and Synth-100d beside one scikit-learn KMeans fit.

    python benchmarks/dpm_speed.py [--runs 7]

Prints the median fit time of DPM (epsilon = 1, bounds (-100, 100)), the median time of
``KMeans(n_clusters=64, n_init=1)`` on the same data, and DPM's peak traced memory as a multiple
of the input array (generated with make_blobs(100000, d, centers=64, center_box=(-100, 100),
random_state=42), float64).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
import warnings

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from privclust import DPM
from privclust.metrics import accuracy_majority


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=7)
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    for d in (10, 100):
        X, y = make_blobs(100_000, d, centers=64, center_box=(-100, 100), random_state=42)
        times, accs = [], []
        for seed in range(args.runs):
            t0 = time.perf_counter()
            model = DPM(epsilon=1.0, bounds=(-100, 100), random_state=seed).fit(X)
            times.append(time.perf_counter() - t0)
            accs.append(accuracy_majority(y, model.labels_))
        km = []
        for seed in range(3):
            t0 = time.perf_counter()
            KMeans(64, n_init=1, random_state=seed).fit(X)
            km.append(time.perf_counter() - t0)
        tracemalloc.start()
        DPM(epsilon=1.0, bounds=(-100, 100), random_state=0).fit(X)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"Synth-{d}d: DPM median {np.median(times):.3f} s (min {min(times):.3f}), "
              f"accuracy {np.mean(accs):.4f}; KMeans(64, n_init=1) median {np.median(km):.3f} s; "
              f"DPM peak memory {peak / X.nbytes:.2f}x the input")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
