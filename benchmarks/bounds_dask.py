"""Private bounds on the Dask engine against the NumPy engine, on the same records.

    python benchmarks/bounds_dask.py                     # 10,000,000 x 10 float32
    python benchmarks/bounds_dask.py --n 2000000 --repeats 3

A Gaussian mixture (8 centres in [-50, 50]^d, one feature shifted to ``1000 + N(0, 1)`` so that
the zoom's pass runs too), float32, held in this process for the NumPy engine and persisted on
a ``LocalCluster(n_workers=2, threads_per_worker=1, processes=True)`` in chunks of about n / 2
rows for the Dask engine. ``private_bounds(X, 0.1)`` on each, one warm-up, then the median of
``--repeats`` timed calls; the Dask engine is timed on validated input (what a fit's bounds
cost: the fit validates its input once for the bounds and the engine) and with the validation
pass included (what a call on a fresh array costs). Checks that both give the same bounds.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from _dask_cluster import mixture, process_cluster, scattered
from privclust import private_bounds


def _data(n: int, d: int, seed: int = 0) -> np.ndarray:
    X = mixture(n, d, seed)
    rng = np.random.default_rng(seed + 1)
    X[:, -1] = 1000 + rng.standard_normal(n, dtype=np.float32)
    return X


def _time(fn, repeats: int) -> tuple[float, object]:
    out = fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import privclust.engine.dask as dask_engine

    X = _data(args.n, args.d)
    with process_cluster() as client:
        Xd = scattered(client, X)
        t_np, a = _time(lambda: private_bounds(X, 0.1, random_state=0), args.repeats)
        t_dask, b = _time(lambda: private_bounds(Xd, 0.1, random_state=0), args.repeats)

        def cold():
            dask_engine._CACHE.clear()
            return private_bounds(Xd, 0.1, random_state=0)

        t_cold, c = _time(cold, args.repeats)
        assert np.array_equal(a.bounds, b.bounds) and np.array_equal(a.bounds, c.bounds)
        print(f"private_bounds, {args.n:,} x {args.d} float32, epsilon 0.1 ({a.description})")
        print(f"NumPy engine, in memory          {t_np:7.2f} s")
        print(f"Dask engine, validated input     {t_dask:7.2f} s  ({t_dask / t_np:.2f}x)")
        print(f"Dask engine, with the validation {t_cold:7.2f} s  ({t_cold / t_np:.2f}x)")
        print("same bounds on both engines: yes")


if __name__ == "__main__":
    main()
