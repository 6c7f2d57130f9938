"""A billion records on the Dask engine: lazily generated data, fitted on a process cluster.

    python benchmarks/billion.py                                   # 10^9 x 2, DPDBSCAN
    python benchmarks/billion.py --records 100_000_000 --estimators dbscan,dpm
    python benchmarks/billion.py --records 10_000_000 --check-chunkings
    python benchmarks/billion.py --estimators coreset-k,coreset     # CoresetKMeans, k given / not
    python benchmarks/billion.py --records 1e8 --estimators coreset-10d   # 10-D, without k

The records are never stored and never pass through this process: the data set is a dask
array whose every chunk is drawn inside its task, on the worker, from public seeds. The rows
are drawn in generation blocks of ``2^20`` rows, block ``b`` from ``default_rng([seed, b])``,
and a chunk of any size draws the blocks it overlaps and keeps its rows: the same seed gives
the same records whatever the chunking (``--check-chunkings`` fits DPDBSCAN on two chunkings
and prints a hash of each model). Two mixtures:

* ``cabs``: 2-D, a Cabs-like city in the box [0, 27] x [0, 34]: 55% of the records in 24
  Gaussian hotspots of different sizes, 35% along 12 straight roads (a uniform position
  along the road, Gaussian across it), 10% uniform background. Used by DPDBSCAN and
  CoresetKMeans.
* ``gauss10``: 10-D, 16 Gaussian clusters (standard deviation 4) with centres in
  (-80, 80)^10, bounds (-100, 100). Used by DPM and ``coreset-10d`` (CoresetKMeans without
  k).

Each estimator is fitted once on a fresh ``LocalCluster(n_workers=--workers,
threads_per_worker=1, processes=True)`` (worker start-up not timed). Printed per fit: wall
time; passes over the data (tasks that read a whole chunk, per chunk: the generation passes,
where the chunks are drawn, and all of them; a CoresetKMeans coreset step's labels and balls
count once); the bytes gathered to this process (the results
of every computation the fit asked for, by ``dask.sizeof``); the peak resident memory of this
process (client and scheduler; sampled every 0.1 s) and of each worker process (its
``ru_maxrss``, the worker being fresh), and each worker's CPU time during the fit (on a shared
host the steadier figure: an idle host's wall time is about the larger of the two). A fit
longer than 2 s shows privclust's progress bar on a terminal; a status line is printed every
``--status`` seconds (elapsed time, tasks done). An estimator the Dask engine does not run
yet is skipped with a printed line.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import resource
import sys
import threading
import time
import warnings

import numpy as np

BLOCK = 1 << 20  # rows per generation block
CABS_BOX = np.array([[0.0, 27.0], [0.0, 34.0]])
GAUSS_BOUNDS = (-100.0, 100.0)
#: Tasks that read every chunk of the records once (a pass over the data).
CHUNK_TASKS = ("generate", "_block_stats", "clip", "outside", "on_block", "regroup_chain",
               "histogram_block", "bins_block", "cell_keys", "labels", "gap_block",
               "take_columns", "split_block", "bucket_hist", "fine_counts", "_ball",
               "_corrected_counts", "corrected_nearest", "_distances", "_distance_counts",
               "_chunk_scores", "_labels_and_cost", "_clipped_cost", "labels64")


# ---------------------------------------------------------------------------- the data
def _cabs_model(seed: int):
    """The city's public layout: hotspots (centre, scale, weight) and roads (ends, width)."""
    rng = np.random.default_rng([seed, 2**32 - 1])
    lo, hi = CABS_BOX[:, 0], CABS_BOX[:, 1]
    hot = rng.uniform(lo + 2, hi - 2, size=(24, 2))
    hot_scale = rng.uniform(0.05, 0.6, size=24)
    hot_w = rng.dirichlet(np.ones(24))
    ends = rng.uniform(lo, hi, size=(12, 2, 2))
    return hot, hot_scale, hot_w, ends


def _cabs_block(b: int, seed: int) -> np.ndarray:
    hot, hot_scale, hot_w, ends = _cabs_model(seed)
    rng = np.random.default_rng([seed, b])
    kind = rng.choice(3, size=BLOCK, p=[0.55, 0.35, 0.10])
    out = np.empty((BLOCK, 2))
    h = np.flatnonzero(kind == 0)
    c = rng.choice(24, size=h.size, p=hot_w)
    out[h] = hot[c] + rng.standard_normal((h.size, 2)) * hot_scale[c, None]
    r = np.flatnonzero(kind == 1)
    road = rng.integers(0, 12, size=r.size)
    t = rng.random(r.size)[:, None]
    a, z = ends[road, 0], ends[road, 1]
    direction = z - a
    normal = np.stack([-direction[:, 1], direction[:, 0]], axis=1)
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    out[r] = a + t * direction + normal * rng.normal(scale=0.03, size=(r.size, 1))
    g = np.flatnonzero(kind == 2)
    out[g] = rng.uniform(CABS_BOX[:, 0], CABS_BOX[:, 1], size=(g.size, 2))
    return out.astype(np.float32)


def _gauss10_block(b: int, seed: int) -> np.ndarray:
    centres = np.random.default_rng([seed, 2**32 - 1]).uniform(-80, 80, size=(16, 10))
    rng = np.random.default_rng([seed, b])
    x = rng.standard_normal((BLOCK, 10), dtype=np.float32) * np.float32(4)
    x += centres[rng.integers(0, 16, size=BLOCK)].astype(np.float32)
    return x


MAKERS = {"cabs": (_cabs_block, 2), "gauss10": (_gauss10_block, 10)}


def generate(start, *, rows_of, kind, seed):
    """The records ``[start, start + rows)`` (one chunk), drawn here from the blocks they
    overlap (``start`` is a one-element array holding the chunk's first row)."""
    make, _ = MAKERS[kind]
    a = int(start[0])
    z = a + int(rows_of[a])
    parts = [make(b, seed) for b in range(a // BLOCK, (z - 1) // BLOCK + 1)]
    block = np.concatenate(parts) if len(parts) > 1 else parts[0]
    off = a - (a // BLOCK) * BLOCK
    return np.ascontiguousarray(block[off : off + (z - a)])


def lazy_records(n: int, kind: str, chunk_rows: int, seed: int):
    """A dask array of ``n`` records of mixture ``kind``, each chunk drawn inside its task."""
    import dask.array as da

    d = MAKERS[kind][1]
    sizes = [min(chunk_rows, n - s) for s in range(0, n, chunk_rows)]
    starts = np.cumsum([0, *sizes[:-1]])
    rows_of = dict(zip(starts.tolist(), sizes, strict=True))
    first = da.from_array(starts.astype(np.int64), chunks=1)
    return first.map_blocks(generate, rows_of=rows_of, kind=kind, seed=seed,
                            chunks=(tuple(sizes), (d,)), new_axis=1, dtype=np.float32)


# ---------------------------------------------------------------------------- measuring
class ClientPeak:
    """Peak resident memory of this process (client and scheduler), sampled every 0.1 s."""

    def __enter__(self):
        import psutil

        self._p = psutil.Process()
        self.peak = self._p.memory_info().rss
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, self._p.memory_info().rss)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


class Gathered:
    """Bytes of every result gathered to the client (``Client.gather``, which
    ``dask.compute`` on a distributed client goes through too)."""

    def __enter__(self):
        from dask.sizeof import sizeof
        from distributed import Client

        self.nbytes, self.calls, self._orig = 0, 0, Client.gather

        def gather(client, futures, *a, **k):
            out = self._orig(client, futures, *a, **k)
            self.nbytes += sizeof(out)
            self.calls += 1
            return out

        Client.gather = gather
        return self

    def __exit__(self, *exc):
        from distributed import Client

        Client.gather = self._orig


def _worker_peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _worker_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def _status(client, t0, stop, every):
    while not stop.wait(every):
        try:
            done = client.run_on_scheduler(_tasks_done)
        except Exception:  # the cluster is closing
            return
        print(f"    ... {time.perf_counter() - t0:7.1f} s, {done} tasks done", flush=True)


def _tasks_done(dask_scheduler) -> int:
    return sum(ts.state in ("memory", "released", "forgotten")
               for ts in dask_scheduler.tasks.values())


def model_hash(model) -> str:
    """sha256 of what the fit released (centres, or DPDBSCAN's spans), first 16 hex digits."""
    h = hashlib.sha256()
    for name in ("cluster_centers_", "span_cells_", "span_labels_", "n_clusters_"):
        v = getattr(model, name, None)
        if v is not None:
            h.update(np.ascontiguousarray(np.asarray(v)).tobytes())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------- the fits
def _estimator(name: str, k: int):
    from privclust import DPDBSCAN, DPM, CoresetKMeans

    if name == "dbscan":
        return "cabs", DPDBSCAN(epsilon=1.0, eps=0.02, min_samples=500, bounds=CABS_BOX,
                                random_state=0)
    if name == "dpm":
        return "gauss10", DPM(epsilon=1.0, bounds=GAUSS_BOUNDS, random_state=0)
    if name == "coreset-k":
        return "cabs", CoresetKMeans(k, epsilon=1.0, bounds=CABS_BOX, random_state=0)
    if name == "coreset":
        return "cabs", CoresetKMeans(epsilon=1.0, bounds=CABS_BOX, random_state=0)
    if name == "coreset-10d":
        return "gauss10", CoresetKMeans(epsilon=1.0, bounds=GAUSS_BOUNDS, random_state=0)
    raise SystemExit(f"unknown estimator {name!r}: dbscan, dpm, coreset-k, coreset or "
                     "coreset-10d")


def fit_once(name: str, args, chunk_rows: int | None = None) -> dict | None:
    """One fit on a fresh process cluster; its figures, or None when skipped."""
    from distributed import Client, LocalCluster, get_task_stream

    import privclust.engine.dask as dask_engine

    kind, est = _estimator(name, args.k)
    rows = chunk_rows or args.chunk_rows
    X = lazy_records(args.records, kind, rows, args.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, memory_limit=args.worker_memory)
        client = Client(cluster)
    try:
        client.wait_for_workers(args.workers)
        if args.persist_share is not None:
            dask_engine.PERSIST_SHARE = args.persist_share
        kept = dask_engine.keeps_records(client, X.shape, X.dtype)
        cpu0 = client.run(_worker_cpu)
        stop = threading.Event()
        t0 = time.perf_counter()
        status = threading.Thread(target=_status, args=(client, t0, stop, args.status),
                                  daemon=True)
        status.start()
        try:
            with ClientPeak() as mem, Gathered() as moved, get_task_stream(client) as ts, \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                est.fit(X)
                wall = time.perf_counter() - t0
        except ValueError as e:
            if "in-memory data only" in str(e):
                print(f"{name}: skipped, the Dask engine does not run it yet ({e})")
                return None
            raise
        finally:
            stop.set()
        workers = sorted(client.run(_worker_peak).values())
        cpu = [after - cpu0.get(w, 0.0) for w, after in sorted(client.run(_worker_cpu).items())]
        prefixes = [(r["key"][0] if isinstance(r["key"], tuple) else r["key"]).split("-")[0]
                    for r in ts.data]
        n_chunks = X.numblocks[0]
        busy: dict = {}
        for r, p in zip(ts.data, prefixes, strict=True):
            for ss in r.get("startstops", ()):
                if ss["action"] == "compute":
                    busy.setdefault(p, [0.0, 0])[0] += ss["stop"] - ss["start"]
            busy.setdefault(p, [0.0, 0])[1] += 1
        return {
            "estimator": name, "data": f"{args.records:,} x {X.shape[1]} {kind}",
            "chunks": n_chunks, "seconds": wall,
            "generation passes": sum(p == "generate" for p in prefixes) / n_chunks,
            "chunk passes": sum(p in CHUNK_TASKS for p in prefixes) / n_chunks,
            "tasks": len(prefixes), "round trips": moved.calls,
            "gathered MB": moved.nbytes / 1e6, "client peak GB": mem.peak / 1e9,
            "worker peaks GB": [w / 1e9 for w in workers], "clusters": est.n_clusters_,
            "records kept": kept, "worker CPU s": cpu,
            "hash": model_hash(est), "task seconds": busy,
        }
    finally:
        client.close()
        cluster.close()


def _print(r: dict) -> None:
    per_record = r["seconds"] / float(r["data"].split(" x ")[0].replace(",", "")) * 1e9
    print(f"{r['estimator']:10} {r['data']:28} {r['seconds']:8.1f} s  ({per_record:.0f} ns a "
          f"record)  {r['chunks']} chunks, passes: {r['generation passes']:.0f} generating, "
          f"{r['chunk passes']:.0f} reading a chunk (records "
          f"{'persisted' if r['records kept'] else 'recomputed every pass'}); {r['tasks']} "
          f"tasks, {r['round trips']} "
          f"gathers, {r['gathered MB']:.1f} MB to the client; peak memory: client "
          f"{r['client peak GB']:.2f} GB, workers "
          f"{', '.join(f'{w:.2f}' for w in r['worker peaks GB'])} GB; worker CPU "
          f"{', '.join(f'{c:.0f}' for c in r['worker CPU s'])} s; {r['clusters']} clusters, "
          f"model {r['hash']}", flush=True)
    if r.get("show tasks"):
        busy = sorted(r["task seconds"].items(), key=lambda kv: -kv[1][0])
        print("    task seconds by kind (tasks): " + ", ".join(
            f"{k} {v:.1f} ({c})" for k, (v, c) in busy if v >= 0.05), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=lambda s: int(float(s)), default=10**9)
    ap.add_argument("--estimators", default="dbscan",
                    help="comma-separated: dbscan, dpm, coreset-k, coreset, coreset-10d "
                         "(default dbscan)")
    ap.add_argument("--k", type=int, default=24, help="k for coreset-k (default 24)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk-rows", type=lambda s: int(float(s)), default=1 << 24)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--worker-memory", default="4GB",
                    help="each worker's memory limit (default 4GB; 'auto': the host's memory "
                         "shared among the workers); the engine persists the records when "
                         "they fit in privclust.engine.dask.PERSIST_SHARE of the sum")
    ap.add_argument("--persist-share", type=float, default=None,
                    help="override privclust.engine.dask.PERSIST_SHARE (0: never persist)")
    ap.add_argument("--status", type=float, default=10.0, help="seconds between status lines")
    ap.add_argument("--task-seconds", action="store_true",
                    help="print the workers' seconds per kind of task (from the task stream)")
    ap.add_argument("--check-chunkings", action="store_true",
                    help="fit DPDBSCAN on two chunkings of the same records; compare the models")
    args = ap.parse_args()
    if not sys.stdout.isatty():  # privclust's progress: log lines where there is no bar
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("    %(message)s"))
        logging.getLogger("privclust").addHandler(handler)
        logging.getLogger("privclust").setLevel(logging.INFO)
    print(f"{args.records:,} records, {args.workers} worker processes (1 thread each), chunks "
          f"of {args.chunk_rows:,} rows, seed {args.seed}", flush=True)
    if args.check_chunkings:
        other = max(1, args.records // 3 - 12_345)
        a = fit_once("dbscan", args)
        b = fit_once("dbscan", args, chunk_rows=other)
        for r in (a, b):
            _print(r)
        print(f"same release on chunks of {args.chunk_rows:,} and {other:,} rows: "
              f"{'yes' if a['hash'] == b['hash'] else 'NO'}")
        return
    for name in args.estimators.split(","):
        r = fit_once(name.strip(), args)
        if r is not None:
            r["show tasks"] = args.task_seconds
            _print(r)


if __name__ == "__main__":
    main()
