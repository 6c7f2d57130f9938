"""The shifted grid tree's levels on the Dask engine: keying the records' cells where they live
and keeping each level there in parts (``split_keys``, what trees that read a level once use),
splitting the cells of the level above there (``split_cells``, what EMMC uses) and counting the
grid's cells and looking up every cell's parent on the client (``cell_counts``), and the NumPy
engine beside them; every cell of every level is released (the whole tree).

    python benchmarks/tree_dask.py                      # 2,000,000 x 10 float32, 7 levels
    python benchmarks/tree_dask.py --n 2000000 --d 2 --levels 9 --repeats 3

The mixture of ``benchmarks/coreset_dask.py`` (8 centres in [-50, 50]^d, standard deviation 3,
float32), persisted on a ``LocalCluster(n_workers=2, threads_per_worker=1, processes=True)``
in two chunks (one on each worker); the grid CoresetKMeans grows over ``bounds=(-70, 70)``
(public shift drawn from seed 0). Prints the median over ``--repeats`` walks of each level's
time (seconds) and the number of non-empty cells; checks that the walks agree.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from _dask_cluster import process_cluster, scattered
from coreset_dask import _data
from privclust.cluster._shifted_tree import CellWalk, ShiftedGrid
from privclust.engine import LocalEngine
from privclust.engine.dask import DaskEngine


def _walk(engine, grid, levels, how):
    """Every cell of every level released (the whole tree); a level's time includes reading
    its cells (a level kept on the workers in parts is read part by part)."""
    walk = CellWalk(engine, grid)
    if how != "key" and walk.by_key:  # the walk by groups, as trees that keep levels use
        walk.by_key, walk.groups = False, engine.root()
    if how == "lookup":
        walk.split, walk.groups = False, None
    times, outs = [], []
    for level in range(1, levels + 1):
        t0 = time.perf_counter()
        keys, counts = walk.next(level)
        if counts is None:  # a source in parts
            parts = list(keys.parts())
            keys = np.concatenate([p[0] for p in parts])
            counts = np.concatenate([p[1] for p in parts])
        order = np.argsort(keys)
        keys, counts = keys[order], counts[order]
        walk.released(keys)
        times.append(time.perf_counter() - t0)
        outs.append((keys, counts))
    return times, outs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--levels", type=int, default=7)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    X = _data(args.n, args.d)
    bounds = np.tile([-70.0, 70.0], (args.d, 1))
    grid = ShiftedGrid(bounds, np.random.default_rng(0).uniform(0.0, 1.0, args.d) * 140.0)
    with process_cluster() as client:
        engines = {"NumPy (split)": (LocalEngine(X, bounds), "split")}
        D = DaskEngine(scattered(client, X), bounds)
        engines["Dask by key, in parts"] = (D, "key")
        engines["Dask split_cells"] = (D, "split")
        engines["Dask cell_counts + lookup"] = (D, "lookup")
        print(f"tree levels, {args.n:,} x {args.d} float32, LocalCluster(2 worker processes, "
              f"1 thread each); median of {args.repeats} walks (s per level)")
        ref = None
        for name, (engine, split) in engines.items():
            _walk(engine, grid, args.levels, split)  # warm-up
            runs = [_walk(engine, grid, args.levels, split) for _ in range(args.repeats)]
            med = [statistics.median(r[0][i] for r in runs) for i in range(args.levels)]
            outs = runs[0][1]
            if ref is None:
                ref = outs
            for a, b in zip(ref, outs, strict=True):  # the same keys and counts
                assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), name
            print(f"{name:28s} " + " ".join(f"{t:6.3f}" for t in med)
                  + f"   total {sum(med):6.2f}")
        print("cells per level:            " + " ".join(f"{o[1].size:6d}" for o in ref))


if __name__ == "__main__":
    main()
