"""Scaling out: the Dask engine against the NumPy engine, and out-of-core fits from Parquet.

    python benchmarks/scale.py                 # everything (in-memory and out-of-core)
    python benchmarks/scale.py --quick         # small sizes, a minute or two
    python benchmarks/scale.py --only local    # the NumPy engine alone (no cluster)
    python benchmarks/scale.py --only memory   # only the in-memory comparisons
    python benchmarks/scale.py --only memory --processes --dpm-memory-points 10_000_000
    python benchmarks/scale.py --only memory --processes --no-malloc-trim   # see _start_cluster
    python benchmarks/scale.py --only memory --processes --dpm-memory-points 10_000_000 \
        --dpm-dtype float32                    # DPM on float32 rows
    python benchmarks/scale.py --only parquet --dbscan-points 100_000_000 --dpm-points 20_000_000

The NumPy engine alone (no cluster in the process): DPDBSCAN on the 11M-point set below and
DPM on Synth-10d, median fit times (targets 1.0 s and 0.1 s on 2 cores).

In memory (medians of ``--runs`` fits, the same data as a NumPy array and as a dask array on a
``LocalCluster`` of 2 workers, one thread each, in this process, or with ``--processes`` in
two worker processes; the array split evenly into ``--chunks-per-worker`` chunks per worker,
one by default):
  * DPDBSCAN on an 11M-point 2-D float32 set (blobs and background in a 27 x 34 box;
    alpha = 0.02, MinPts = 500);
  * DPM on Synth-100d (``make_blobs(100000, 100, centers=64, center_box=(-100, 100),
    random_state=42)``), or with ``--dpm-memory-points N`` on N x ``--dpm-dims`` float64
    blobs (16 Gaussian blobs in (-100, 100)^d).
Printed: NumPy time, Dask time (medians) and the overhead (the median ratio of the two times
over runs that alternate between the engines; target <= 1.5x).

Out of core: a Parquet folder is written chunk by chunk into a temporary folder (removed
afterwards), then one fit reads it from the path, in a fresh process of its own: DPDBSCAN on
a 2-D set (100M points, ~0.9 GB on disk by default) and DPM on a 20M x 10 set. Printed: fit
time and the peak resident memory of the fit's whole process tree (the process and its
children, sampled every 0.1 s with psutil, or /proc when psutil is absent; target <= 3 GB).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

from privclust import DPDBSCAN, DPM
from privclust.datasets import synth_100d

BOX = np.array([[0.0, 27.0], [0.0, 34.0]])
DPM_BOUNDS = (-100.0, 100.0)


def _rss_bytes() -> int:
    """Resident memory of this process and all its children."""
    try:
        import psutil

        me = psutil.Process()
        procs = [me, *me.children(recursive=True)]
        total = 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total
    except ImportError:  # /proc: this process only
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakMemory:
    """Samples the process tree's resident memory in a thread; ``peak`` in bytes."""

    def __enter__(self):
        self.peak = _rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, _rss_bytes())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_bytes())


def box_points(n: int, seed: int) -> np.ndarray:
    """2-D float32 points: 12 Gaussian blobs (90%) and uniform background (10%) in BOX."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(BOX[:, 0] + 3, BOX[:, 1] - 3, size=(12, 2))
    k = rng.integers(0, 12, size=n)
    X = centres[k] + rng.normal(scale=0.6, size=(n, 2))
    bg = rng.random(n) < 0.1
    X[bg] = rng.uniform(BOX[:, 0], BOX[:, 1], size=(int(bg.sum()), 2))
    return X.astype(np.float32)


def blob_rows(n: int, d: int, seed: int) -> np.ndarray:
    """DPM's out-of-core rows: 16 Gaussian blobs in (-100, 100)^d, float32."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(42).uniform(-80, 80, size=(16, d))
    X = centres[rng.integers(0, 16, size=n)] + rng.normal(scale=4.0, size=(n, d))
    return X.astype(np.float32)


def dbscan(bounds=BOX):
    return DPDBSCAN(epsilon=1.0, eps=0.02, min_samples=500, bounds=bounds, random_state=0)


def dpm():
    return DPM(epsilon=1.0, bounds=DPM_BOUNDS, random_state=0)


def _timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def in_memory(args) -> None:
    import dask.array as da

    sets = [
        ("DPDBSCAN", f"{args.memory_points:,} x 2 float32", box_points(args.memory_points, 0),
         dbscan),
        _dpm_set(args),
    ]
    kind = "processes" if args.processes else "threads"
    print(f"in memory: median fit time (s), NumPy engine vs Dask engine (2 workers, {kind})")
    print(f"{'estimator':10} {'data':30} {'numpy':>8} {'dask':>8} {'ratio':>6}")
    for name, label, X, make in sets:
        # a chunk per worker by default (--chunks-per-worker): each query costs a task per
        # chunk, so more chunks than workers only add tasks on in-memory data
        rows = min(args.chunk_rows, -(-X.shape[0] // (2 * args.chunks_per_worker)))
        with warnings.catch_warnings():  # the array travels once, in the graph: not timed
            warnings.simplefilter("ignore")
            Xd = da.from_array(X, chunks=(rows, -1)).persist()
        make().fit(Xd)  # warm-up: imports and the cluster's first tasks
        # the two engines alternate, so that both see the same load on a shared machine; the
        # ratio is the median of the per-pair ratios
        pairs = [(_timed(lambda X=X, make=make: make().fit(X), 1),
                  _timed(lambda Xd=Xd, make=make: make().fit(Xd), 1)) for _ in range(args.runs)]
        t_np, t_dk = (statistics.median(t) for t in zip(*pairs, strict=True))
        ratio = statistics.median(b / a for a, b in pairs)
        print(f"{name:10} {label:30} {t_np:8.2f} {t_dk:8.2f} {ratio:6.2f}", flush=True)
        del Xd


def _dpm_set(args):
    """DPM's in-memory set: Synth-100d, or ``--dpm-memory-points`` x ``--dpm-dims`` blobs."""
    if args.dpm_memory_points > 0:
        n, d = args.dpm_memory_points, args.dpm_dims
        dtype = np.dtype(args.dpm_dtype)
        return ("DPM", f"{n:,} x {d} {dtype}", blob_rows(n, d, 0).astype(dtype), dpm)
    n = 20_000 if args.quick else 100_000
    return ("DPM", f"Synth-100d ({n:,} x 100)", synth_100d(n).X, dpm)


def local(args) -> None:
    """The NumPy engine alone (no cluster in the process): the issue's local targets."""
    from privclust.datasets import synth_10d

    sets = [
        ("DPDBSCAN", f"{args.memory_points:,} x 2 float32", box_points(args.memory_points, 0),
         dbscan, 1.0),
        ("DPM", "Synth-10d", synth_10d().X, dpm, 0.1),
    ]
    print("NumPy engine on all cores: median fit time (s) over --runs fits")
    print(f"{'estimator':10} {'data':30} {'median':>8} {'min':>8} {'target':>8}")
    for name, label, X, make, target in sets:
        make().fit(X)  # warm-up
        times = [_timed(lambda X=X, make=make: make().fit(X), 1) for _ in range(args.runs)]
        print(f"{name:10} {label:30} {statistics.median(times):8.3f} {min(times):8.3f} "
              f"{target:8.1f}", flush=True)


def write_parquet(folder: Path, n: int, make_rows, rows_per_file: int, columns) -> float:
    """Write ``n`` rows in files of ``rows_per_file`` rows; returns the size in GB."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    for i, start in enumerate(range(0, n, rows_per_file)):
        X = make_rows(min(rows_per_file, n - start), 1000 + i)
        table = pa.table({c: X[:, j] for j, c in enumerate(columns)})
        pq.write_table(table, folder / f"part-{i:05d}.parquet", compression="none")
    return sum(f.stat().st_size for f in folder.iterdir()) / 1e9


def _start_cluster(processes: bool = False, keep_trim: bool = True):
    """A LocalCluster of 2 workers, one thread each. ``keep_trim=False``: worker processes
    without distributed's ``MALLOC_TRIM_THRESHOLD_`` (set, it fixes glibc's mmap threshold at
    128 KiB, so that every large NumPy temporary in a task is a fresh mmap that page-faults:
    the engine's tasks then run about 4x slower than the same code in this process)."""
    import dask
    from distributed import Client, LocalCluster

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not keep_trim:
            dask.config.set({"distributed.nanny.pre-spawn-environ": {}})
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=processes,
                               dashboard_address=None)
        return Client(cluster), cluster


def fit_parquet(name: str, folder: str) -> None:
    """One out-of-core fit in this (fresh) process, on a LocalCluster of 2 workers: prints
    ``RESULT seconds peak_bytes n_clusters`` for the parent."""
    make = {"DPDBSCAN": dbscan, "DPM": dpm}[name]
    client, cluster = _start_cluster()
    try:
        with PeakMemory() as mem, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            model = make().fit(folder)
            t_fit = time.perf_counter() - t
        print(f"RESULT {t_fit} {mem.peak} {model.n_clusters_}", flush=True)
    finally:
        client.close()
        cluster.close()


def out_of_core(args, tmp: Path) -> None:
    """Each fit runs in a fresh process (as a user's job would): its peak memory is its own,
    not what earlier parts of this script left behind."""
    print("\nout of core: one fit from a Parquet folder (path input), Dask engine, 2 workers")
    print(f"{'estimator':10} {'data':22} {'GB':>6} {'write s':>8} {'fit s':>8} {'peak GB':>8}")
    runs = [
        ("DPDBSCAN", args.dbscan_points, 2, lambda m, s: box_points(m, s)),
        ("DPM", args.dpm_points, 10, lambda m, s: blob_rows(m, 10, s)),
    ]
    for name, n, d, rows in runs:
        if n <= 0:
            continue
        folder = tmp / name
        t = time.perf_counter()
        gb = write_parquet(folder, n, rows, 1 << 20, [f"x{j}" for j in range(d)])
        t_write = time.perf_counter() - t
        out = subprocess.run([sys.executable, __file__, "--fit-parquet", name, str(folder)],
                             capture_output=True, text=True, check=True).stdout
        t_fit, peak, k = out.split("RESULT ")[1].split()
        print(f"{name:10} {f'{n:,} x {d}':22} {gb:6.2f} {t_write:8.1f} {float(t_fit):8.1f} "
              f"{int(peak) / 1e9:8.2f}   ({k} clusters)", flush=True)
        shutil.rmtree(folder)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a minute or two)")
    ap.add_argument("--only", choices=["local", "memory", "parquet"], help="run one part only")
    ap.add_argument("--runs", type=int, default=3, help="fits per median (in memory)")
    ap.add_argument("--memory-points", type=int, default=11_000_000)
    ap.add_argument("--dbscan-points", type=int, default=100_000_000)
    ap.add_argument("--dpm-points", type=int, default=20_000_000)
    ap.add_argument("--processes", action="store_true",
                    help="in memory: a LocalCluster of 2 worker processes (default: threads)")
    ap.add_argument("--no-malloc-trim", action="store_true",
                    help="with --processes: workers without distributed's MALLOC_TRIM_THRESHOLD_")
    ap.add_argument("--dpm-memory-points", type=int, default=0,
                    help="in memory: DPM on this many blob rows instead of Synth-100d")
    ap.add_argument("--dpm-dims", type=int, default=10, help="features of those rows")
    ap.add_argument("--dpm-dtype", choices=["float64", "float32"], default="float64",
                    help="type of those rows (default float64)")
    ap.add_argument("--chunk-rows", type=int, default=1 << 23, help="most rows per dask chunk")
    ap.add_argument("--chunks-per-worker", type=int, default=1,
                    help="in-memory chunks per worker (the data split evenly)")
    ap.add_argument("--tmp", default=None, help="folder for the Parquet sets (default: temp)")
    ap.add_argument("--fit-parquet", nargs=2, metavar=("ESTIMATOR", "FOLDER"),
                    help=argparse.SUPPRESS)  # one out-of-core fit, in a fresh process
    args = ap.parse_args()
    if args.fit_parquet:
        fit_parquet(*args.fit_parquet)
        return
    if args.quick:
        args.memory_points, args.dbscan_points, args.dpm_points = 1_000_000, 4_000_000, 1_000_000
        args.runs = min(args.runs, 2)

    if args.only in (None, "local"):
        local(args)
        if args.only == "local":
            return
    client, cluster = _start_cluster(args.processes, not args.no_malloc_trim)
    try:
        if args.only in (None, "memory"):
            in_memory(args)
        if args.only in (None, "parquet"):
            tmp = Path(tempfile.mkdtemp(prefix="privclust-scale-", dir=args.tmp))
            try:
                out_of_core(args, tmp)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
