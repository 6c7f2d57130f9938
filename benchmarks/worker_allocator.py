"""Engine passes as a Dask worker's allocator runs them, with and without MALLOC_TRIM_THRESHOLD_.

    python benchmarks/worker_allocator.py              # every pass, 7 runs each
    python benchmarks/worker_allocator.py --runs 11

``distributed`` starts its worker processes with ``MALLOC_TRIM_THRESHOLD_=65536``, which fixes
glibc's mmap threshold at 128 KiB: every large temporary a task allocates is then a fresh
mapping that page-faults. This script runs the same passes in two fresh processes, one with the
variable and one without, one thread each (as one worker thread runs a task), and prints the
median time of each pass in both and their ratio. Passes: the exact centred group sums (5.5M x
10 would not fit the default; 2M x 10 float64, 30 groups and records outside every group), an
axis histogram on the same data, an axis regrouping (5M x 10) and DPDBSCAN's span lookup of
5.5M points (11M x 2 float32 blobs, as ``benchmarks/scale.py`` draws them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _passes(runs: int) -> dict:
    """The passes, timed in this process (one thread)."""
    sys.path.insert(0, str(HERE))
    import privclust._parallel as parallel
    from privclust.cluster._span_lookup import SpanLookup
    from privclust.engine.local import LocalEngine, LocalGrouping
    from scale import _timed, blob_rows, box_points, dbscan

    def _median_time(fn, runs):
        fn()  # warm-up: scratch arrays, caches
        return _timed(fn, runs)

    parallel.N_THREADS = 1  # a worker thread runs its task alone
    out = {}
    rng = np.random.default_rng(0)
    X = blob_rows(2_000_000, 10, 0).astype(np.float64)
    engine = LocalEngine(X, np.tile([-100.0, 100.0], (10, 1)))
    grouping = LocalGrouping(rng.integers(-1, 30, size=X.shape[0]).astype(np.int32), 30)
    centres = rng.normal(size=(30, 10)) * 50
    out["exact group sums, 2M x 10"] = _median_time(
        lambda: engine.exact_centred_sums(grouping, centres), runs)
    out["axis histogram, 2M x 10"] = _median_time(
        lambda: engine.axis_histogram(grouping, np.full(10, -100.0), np.full(10, 1.0), 200),
        runs)
    X = blob_rows(5_000_000, 10, 0).astype(np.float64)
    engine = LocalEngine(X, np.tile([-100.0, 100.0], (10, 1)))
    grouping = LocalGrouping(rng.integers(-3, 30, size=X.shape[0]).astype(np.int32), 30)
    left = np.arange(30, dtype=np.int32)
    out["regrouping, 5M x 10"] = _median_time(
        lambda: engine.regroup(grouping, np.arange(30) % 10, np.zeros(30), left, left + 30, 60),
        runs)
    points = box_points(11_000_000, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lookup = SpanLookup(dbscan().fit(points))
    lookup.table()
    chunk = points[:5_500_000].copy()
    out["span lookup, 5.5M x 2"] = _median_time(lambda: lookup(chunk), runs)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=7, help="timed runs per pass (default 7)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(_passes(args.runs)))
        return
    results = {}
    for label, trim in (("with", "65536"), ("without", None)):
        env = {k: v for k, v in os.environ.items() if k != "MALLOC_TRIM_THRESHOLD_"}
        if trim is not None:
            env["MALLOC_TRIM_THRESHOLD_"] = trim
        run = subprocess.run([sys.executable, __file__, "--child", "--runs", str(args.runs)],
                             env=env, capture_output=True, text=True, check=True)
        results[label] = json.loads(run.stdout.strip().splitlines()[-1])
    print(f"median of {args.runs} runs, one thread, in a fresh process each way (s)")
    print(f"{'pass':28} {'with the variable':>18} {'without':>10} {'ratio':>6}")
    for name, t_with in results["with"].items():
        t_without = results["without"][name]
        print(f"{name:28} {t_with:18.3f} {t_without:10.3f} {t_with / t_without:6.2f}")


if __name__ == "__main__":
    main()
