"""The slowest parameter sets each estimator accepts, on 10,000 records: fit or refusal, and time.

    python benchmarks/worst_case.py

Target: every fit on at most 10,000 records finishes within 10 s, or is refused up front (before
any budget is spent) with the predicted time. Each case runs once in a fresh process state; the
figures are single wall-clock timings on a shared 2-core machine.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from privclust import (
    DPDBSCAN,
    DPM,
    DPGaussianMixture,
    DPLloyd,
    KMeansGuarantee,
    MorseMerging,
    SubClustering,
)


def _data(d: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (10_000, d))


B = (-1.0, 1.0)
CASES = {
    "DPM max_depth=20, d=100": lambda: DPM(delta=1e-6, bounds=B, max_depth=20,
                                           min_cluster_size=1).fit(_data(100)),
    "DPM adaptive, max_depth=20, d=50": lambda: DPM(delta=1e-6, bounds=B, max_depth=20,
                                                    min_cluster_size=1,
                                                    adaptive_intervals=True).fit(_data(50)),
    "DPM epsilon=1e-6": lambda: DPM(epsilon=1e-6, delta=1e-6, bounds=B).fit(_data(2)),
    "DPDBSCAN d=4, radius 0.05": lambda: DPDBSCAN(1.0, eps=0.05, bounds=B).fit(_data(4)),
    "DPDBSCAN d=3 dense Laplace": lambda: DPDBSCAN(1.0, eps=0.02, histogram="dense",
                                                   noise="laplace", bounds=B).fit(_data(3)),
    "DPDBSCAN epsilon=1e-6": lambda: DPDBSCAN(1e-6, eps=0.2, bounds=B).fit(_data(2)),
    "DPLloyd k=10000": lambda: DPLloyd(n_clusters=10_000, bounds=B).fit(_data(2)),
    "DPLloyd k=1000, d=100": lambda: DPLloyd(n_clusters=1000, bounds=B).fit(_data(100)),
    "DPLloyd k=100, n_iter=10000": lambda: DPLloyd(n_clusters=100, n_iter=10_000,
                                                   bounds=B).fit(_data(10)),
    "KMeansGuarantee k=1000, max_iter=50": lambda: KMeansGuarantee(
        n_clusters=1000, max_iter=50, bounds=B).fit(_data(10)),
    "KMeansGuarantee n_candidates=100000": lambda: KMeansGuarantee(
        n_clusters=50, n_candidates=100_000, bounds=B).fit(_data(2)),
    "SubClustering k=200, internal_k=50": lambda: SubClustering(
        n_clusters=200, internal_k=50, max_iter=10, bounds=B).fit(_data(10)),
    "DPGaussianMixture k=200, d=20": lambda: DPGaussianMixture(
        n_components=200, delta=1e-6, bounds=B).fit(_data(20)),
    "DPGaussianMixture k=50, d=100, n_iter=100": lambda: DPGaussianMixture(
        n_components=50, n_iter=100, delta=1e-6, bounds=B).fit(_data(100)),
    "MorseMerging over 43 components, d=16": lambda: MorseMerging(
        DPGaussianMixture(n_components=43, bounds=B), 2, epsilon=1.0).fit(_data(16)),
    "MorseMerging over 100 components": lambda: MorseMerging(
        DPGaussianMixture(n_components=100, bounds=B), 2, epsilon=1.0).fit(_data(2)),
}


def main():
    warnings.simplefilter("ignore")
    print("| case (10,000 records) | time | outcome |\n|---|---|---|")
    for name, fit in CASES.items():
        t0 = time.perf_counter()
        try:
            fit()
            outcome = "fit"
        except ValueError as exc:
            outcome = "refused: " + str(exc)[:90]
        print(f"| {name} | {time.perf_counter() - t0:.1f} s | {outcome} |")


if __name__ == "__main__":
    main()
