"""Time of MorseMerging's pooling of a centre model's centres (``pool_centres``).

    python benchmarks/morse_pooling.py            # 1,000 to 10,000 centres, d = 3 and 10

Prints the median of ``--runs`` runs per size (normal centres, exponential noisy sizes,
pooled down to 20 components, as MorseMerging does by default).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from privclust.cluster._morse.base import pool_centres


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 5000, 10000])
    p.add_argument("--dims", type=int, nargs="+", default=[3, 10])
    args = p.parse_args()
    print(f"{'centres':>8} {'d':>4} {'median s':>10}")
    for d in args.dims:
        for k in args.sizes:
            rng = np.random.default_rng(k + d)
            centres, sizes = rng.normal(size=(k, d)), rng.exponential(50.0, k)
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                pool_centres(centres, sizes, 20)
                times.append(time.perf_counter() - t0)
            print(f"{k:>8} {d:>4} {statistics.median(times):>10.3f}")


if __name__ == "__main__":
    main()
