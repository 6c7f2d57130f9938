"""DPGaussianMixture speed beside one scikit-learn KMeans fit, on the issue's two cases.

    python benchmarks/mixture_speed.py [--runs 3] [--case blobs20|blobs2]

Cases (generated once, float64):

* ``blobs20``: ``make_blobs(200000, 20, centers=32, random_state=0)``, K = 32, bounds (-15, 15);
* ``blobs2``: ``make_blobs(5000000, 2, centers=8, random_state=0)``, K = 8, bounds (-15, 15).

Per case, the runs are interleaved (mixture, KMeans, mixture, KMeans, ...) so that a busy
machine slows both alike; printed are the medians of the mixture's fit (``epsilon = 1``,
``delta = 1e-6``, ``n_iter = 10``), of ``KMeans(K, n_init=1, random_state=0).fit`` and of the
per-run ratio mixture / KMeans.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from privclust import DPGaussianMixture

CASES = {
    "blobs20": (200_000, 20, 32),
    "blobs2": (5_000_000, 2, 8),
}


def run_case(name: str, runs: int) -> None:
    n, d, k = CASES[name]
    X, _ = make_blobs(n, d, centers=k, random_state=0)
    mix, km, ratio = [], [], []
    for seed in range(runs):
        t0 = time.perf_counter()
        DPGaussianMixture(k, epsilon=1.0, delta=1e-6, bounds=(-15, 15),
                          random_state=seed).fit(X)
        t_mix = time.perf_counter() - t0
        t0 = time.perf_counter()
        KMeans(k, n_init=1, random_state=0).fit(X)
        t_km = time.perf_counter() - t0
        mix.append(t_mix)
        km.append(t_km)
        ratio.append(t_mix / t_km)
    print(f"{name} ({n} x {d}, K = {k}): DPGaussianMixture median {np.median(mix):.2f} s "
          f"(runs {', '.join(f'{t:.2f}' for t in mix)}); KMeans(K, n_init=1) median "
          f"{np.median(km):.2f} s; ratio median {np.median(ratio):.1f}x", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--case", choices=sorted(CASES), action="append")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    for name in args.case or list(CASES):
        run_case(name, args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
