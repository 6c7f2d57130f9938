"""CoresetKMeans on the Dask engine against the NumPy engine, on the same records.

    python benchmarks/coreset_dask.py                     # 10,000,000 x 10 float32
    python benchmarks/coreset_dask.py --n 2000000 --repeats 3
    python benchmarks/coreset_dask.py --repeats 1 --only k    # given k only
    python benchmarks/coreset_dask.py --phases --n 4000000 --d 2 --repeats 3 --engine numpy

A Gaussian mixture (8 centres in [-50, 50]^d, standard deviation 3), float32, held in this
process for the NumPy engine and persisted on a ``LocalCluster(n_workers=2,
threads_per_worker=1, processes=True)`` in two chunks of about n / 2 rows (one on each worker)
for the Dask engine. ``CoresetKMeans(epsilon=1, bounds=(-70, 70))`` given k = 8 and without k,
one warm-up pair (NumPy, Dask), then the median of ``--repeats`` timed pairs; each Dask fit is
timed on the persisted array (its validation pass included). Checks that both engines release
the same centres, and prints each fit's time per stage of the Dask fit (``--profile``).
``--phases``: instead, the seconds of each phase of the fit (the median over ``--repeats``
fits, after one warm-up fit) and, on the NumPy engine, the passes each makes over the records
(``benchmarks/_coreset_phases.py``), on the engines of ``--engine``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np

from _dask_cluster import mixture, process_cluster, scattered
from privclust import CoresetKMeans


def _data(n: int, d: int, seed: int = 0) -> np.ndarray:
    return mixture(n, d, seed)


def _fit(X, k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        model = CoresetKMeans(k, epsilon=1.0, bounds=(-70, 70), random_state=0).fit(X)
        return time.perf_counter() - t0, model


def _phase_runs(X, k, repeats):
    from _coreset_phases import phases

    runs = []
    _fit(X, k)  # warm-up
    for _ in range(repeats):
        with phases() as (seconds, passes):
            t, model = _fit(X, k)
        runs.append((t, dict(seconds), dict(passes), model))
    runs.sort(key=lambda r: r[0])
    return runs[len(runs) // 2]


def _phases(X, args):
    from _coreset_phases import print_phases

    n, d = X.shape
    print(f"CoresetKMeans phases, {n:,} x {d} float32, epsilon 1, median of {args.repeats} "
          "fit(s) after a warm-up")
    for k in {"k": (8,), "no-k": (None,)}.get(args.only, (8, None)):
        label = f"k = {k}" if k else "no k"
        if args.engine in ("numpy", "both"):
            t, seconds, passes, model = _phase_runs(X, k, args.repeats)
            print_phases(f"NumPy, {label} (k = {model.n_clusters_}, coreset "
                         f"{model.coreset_.shape[0]})", t, seconds, passes)
            print(f"    per record: {1e9 * t / n:.0f} ns")
        if args.engine in ("dask", "both"):
            with process_cluster() as client:
                t, seconds, _, model = _phase_runs(scattered(client, X), k, args.repeats)
            print_phases(f"Dask (2 worker processes), {label} (k = {model.n_clusters_})", t,
                         seconds)
            print(f"    per record: {1e9 * t / n:.0f} ns")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=("k", "no-k"), default=None,
                    help="time only the fit given k (8) or only the one without k")
    ap.add_argument("--profile", action="store_true",
                    help="print the slowest functions of one Dask fit (cProfile, client side)")
    ap.add_argument("--phases", action="store_true",
                    help="seconds and passes over the records per phase of the fit")
    ap.add_argument("--engine", choices=("numpy", "dask", "both"), default="both",
                    help="with --phases: the engines to time")
    args = ap.parse_args()
    X = _data(args.n, args.d)
    if args.phases:
        _phases(X, args)
        return
    with process_cluster() as client:
        Xd = scattered(client, X)
        print(f"CoresetKMeans, {args.n:,} x {args.d} float32, epsilon 1, "
              "LocalCluster(2 worker processes, 1 thread each)")
        for k in {"k": (8,), "no-k": (None,)}.get(args.only, (8, None)):
            _fit(X, k), _fit(Xd, k)  # warm-up pair
            t_np, t_dask = [], []
            for _ in range(args.repeats):
                t, a = _fit(X, k)
                t_np.append(t)
                t, b = _fit(Xd, k)
                t_dask.append(t)
                assert np.array_equal(a.cluster_centers_, b.cluster_centers_)
            m_np, m_dask = statistics.median(t_np), statistics.median(t_dask)
            label = f"k = {k}" if k else f"no k (found {a.n_clusters_})"
            print(f"{label:18s} NumPy {m_np:7.2f} s   Dask {m_dask:7.2f} s   "
                  f"{m_dask / m_np:.2f}x   (same centres: yes)")
            if args.profile:
                import cProfile
                import pstats

                prof = cProfile.Profile()
                prof.runcall(_fit, Xd, k)
                pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
