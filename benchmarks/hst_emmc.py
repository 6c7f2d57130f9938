"""HSTKMeans and EMMC: fit time on Synth-100d, and the k-means cost of ``refine="auto"``.

    python benchmarks/hst_emmc.py                          # all three parts
    python benchmarks/hst_emmc.py --part speed --runs 5
    python benchmarks/hst_emmc.py --part shuttle
    python benchmarks/hst_emmc.py --part sets --seeds 3

* ``speed``: Synth-100d (``privclust.datasets.synth_100d()``, i.e. ``make_blobs(100000, 100,
  centers=64, center_box=(-100, 100), random_state=42)``), bounds (-100, 100), k = 64 (the
  setting of ``benchmarks/compare.py``), epsilon 1. Each run times scikit-learn's
  ``KMeans(64, n_init=1, random_state=0)``, ``HSTKMeans`` and ``EMMC`` in turn (interleaved:
  the machine may be shared); printed: the median fit times and the median of the per-run
  ratios to KMeans. Target: each ratio <= 1.
* ``shuttle``: ``uci_shuttle`` (k = 7, its public sidecar bounds), epsilon 1, seeds 0-9: the
  k-means cost of the released centres (on the clipped records) over
  ``KMeans(7, n_init=10, random_state=0).inertia_`` for DPLloyd, HSTKMeans and EMMC with the
  same seed, and each one's ratio to DPLloyd's. Target: at most 2 on every seed.
* ``sets``: the same cost ratio on ``dpm_synth_10d`` (k = 64), ``mnist_emb40``,
  ``fashion_emb40`` (k = 10), ``cluto_t4_8k`` (k = 6) and ``uci_shuttle`` (k = 7), sidecar
  bounds, median over ``--seeds`` seeds, for ``refine=False`` (the previous default, whose
  releases are unchanged) and the default ``refine="auto"``. Target: "auto" no more than 10%
  above ``refine=False`` on the first four.

Sets absent from the data folder are skipped.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
from sklearn.cluster import KMeans

from privclust import EMMC, DPLloyd, HSTKMeans, datasets
from privclust.datasets import DatasetNotFoundError
from privclust.metrics import inertia

SETS = {"dpm_synth_10d": 64, "mnist_emb40": 10, "fashion_emb40": 10, "cluto_t4_8k": 6,
        "uci_shuttle": 7}
MODELS = {"HSTKMeans": HSTKMeans, "EMMC": EMMC}


def _timed(fit) -> float:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # records clipped to the public bounds
        fit()
    return time.perf_counter() - t0


def speed(runs: int) -> None:
    data = datasets.synth_100d()
    X, k, bounds = data.X, 64, (-100.0, 100.0)
    times = {"KMeans": [], **{name: [] for name in MODELS}}
    for run in range(runs):
        times["KMeans"].append(_timed(lambda: KMeans(k, n_init=1, random_state=0).fit(X)))
        for name, est in MODELS.items():
            times[name].append(_timed(lambda est=est, run=run: est(
                k, epsilon=1.0, bounds=bounds, random_state=run).fit(X)))
    base = times["KMeans"]
    print(f"Synth-100d (100000 x 100, k = 64, epsilon 1), {runs} interleaved runs")
    print(f"  KMeans(64, n_init=1)  median {statistics.median(base):.3f} s  "
          f"runs {np.round(base, 2).tolist()}")
    for name in MODELS:
        ratios = [t / b for t, b in zip(times[name], base, strict=True)]
        ok = statistics.median(ratios) <= 1.0
        print(f"  {name:<20}  median {statistics.median(times[name]):.3f} s  runs "
              f"{np.round(times[name], 2).tolist()}  ratio to KMeans: median "
              f"{statistics.median(ratios):.2f} (max {max(ratios):.2f}) -> target <= 1 "
              f"{'met' if ok else 'NOT met'}")


def _load(name):
    try:
        ds = datasets.load(name)
    except (DatasetNotFoundError, FileNotFoundError, OSError) as exc:
        print(f"{name}: skipped ({type(exc).__name__}: {exc})")
        return None
    bounds = np.asarray(ds.bounds, dtype=float)
    clipped = np.clip(ds.X, bounds[:, 0], bounds[:, 1])
    best = KMeans(SETS[name], n_init=10, random_state=0).fit(clipped).inertia_
    return ds.X, clipped, bounds, best


def _ratio(make, X, clipped, best) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make().fit(X)
    return inertia(clipped, model.cluster_centers_) / best


def shuttle(seeds: int) -> None:
    loaded = _load("uci_shuttle")
    if loaded is None:
        return
    X, clipped, bounds, best = loaded
    print("uci_shuttle (k = 7, epsilon 1): cost / KMeans(7, n_init=10); in brackets / DPLloyd")
    worst = {name: 0.0 for name in MODELS}
    for seed in range(seeds):
        base = _ratio(lambda seed=seed: DPLloyd(7, epsilon=1.0, bounds=bounds,
                                                random_state=seed), X, clipped, best)
        cells = [f"DPLloyd {base:6.2f}"]
        for name, est in MODELS.items():
            r = _ratio(lambda est=est, seed=seed: est(7, epsilon=1.0, bounds=bounds,
                                                      random_state=seed), X, clipped, best)
            worst[name] = max(worst[name], r / base)
            cells.append(f"{name} {r:6.2f} [{r / base:4.2f}]")
        print(f"  seed {seed}: " + "  ".join(cells), flush=True)
    for name, w in worst.items():
        print(f"  {name}: worst ratio to DPLloyd {w:.2f} -> target <= 2 "
              f"{'met' if w <= 2.0 else 'NOT met'}")


def sets(seeds: int) -> None:
    print(f"cost / KMeans(k, n_init=10), median of seeds 0-{seeds - 1}, epsilon 1")
    for name, k in SETS.items():
        loaded = _load(name)
        if loaded is None:
            continue
        X, clipped, bounds, best = loaded
        for model, est in MODELS.items():
            med = {}
            for refine in (False, "auto"):
                med[refine] = statistics.median(_ratio(
                    lambda seed=seed, refine=refine, est=est, k=k, bounds=bounds: est(
                        k, epsilon=1.0, bounds=bounds, refine=refine, random_state=seed),
                    X, clipped, best) for seed in range(seeds))
            change = med["auto"] / med[False] - 1.0
            print(f"  {name:<14} k={k:<3} {model:<10} refine=False {med[False]:8.3f}  "
                  f"refine='auto' {med['auto']:8.3f}  ({100 * change:+.1f}%)", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["speed", "shuttle", "sets"], nargs="+",
                    default=["speed", "shuttle", "sets"])
    ap.add_argument("--runs", type=int, default=5, help="timed runs (speed)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per set (sets)")
    args = ap.parse_args(argv)
    if "speed" in args.part:
        speed(args.runs)
    if "shuttle" in args.part:
        shuttle(10)
    if "sets" in args.part:
        sets(args.seeds)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
