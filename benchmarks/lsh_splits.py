"""LSH-Splits: ARI and fit time at epsilon = 1, delta = 1/(n sqrt(n)), k = number of classes.

    python benchmarks/lsh_splits.py                     # all sets, 10 runs each
    python benchmarks/lsh_splits.py --runs 5 --sets synth_10d
    python benchmarks/lsh_splits.py --centre-share 0 --count-share 0.3   # other settings

Sets: Synth-10d (``make_blobs(100000, 10, centers=64, center_box=(-100, 100),
random_state=42)``, bounds (-100, 100)), Synth-100d (the same with 100 features) and
``mnist_emb40`` (from ``../shared/data`` relative to the repository root or ``$PRIVCLUST_DATA``;
skipped when absent). Seeds 0..runs-1. ``fit_s`` is the median time of ``fit`` without the
labelling of the training data (post-processing: the private model applied to X), measured as
the fit's time minus a separate ``predict`` of X. The reference figures are Google's
implementation (``learning/clustering``) measured on the same machine class.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np

from privclust.cluster.lsh_splits import LSHSplits
from privclust.datasets import DatasetNotFoundError, load, synth_10d, synth_100d
from privclust.metrics import ari

#: Google's LSH-Splits on this machine class: ARI and fit time (s).
GOOGLE = {"synth_10d": (0.982, 2.4), "synth_100d": (0.997, 4.2), "mnist_emb40": (0.913, None)}


def _load(name: str):
    if name == "synth_10d":
        return synth_10d()
    if name == "synth_100d":
        return synth_100d()
    return load(name)


def run_set(name: str, runs: int, params: dict) -> dict | None:
    try:
        ds = _load(name)
    except (DatasetNotFoundError, FileNotFoundError) as exc:
        print(f"{name}: skipped ({exc})", file=sys.stderr)
        return None
    X, y, bounds = ds.X, ds.y, ds.bounds
    n = X.shape[0]
    k = int(np.unique(y).size)
    delta = 1.0 / (n * np.sqrt(n))
    scores, times = [], []
    for seed in range(runs):
        model = LSHSplits(k, epsilon=1.0, delta=delta, bounds=bounds, random_state=seed,
                          **params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # records outside the bounds are clipped
            t0 = time.perf_counter()
            model.fit(X)
            fit_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            model.predict(X)  # the labelling finish_centre_fit does inside fit
            label_s = time.perf_counter() - t0
        times.append(fit_s - label_s)
        scores.append(ari(y, model.labels_))
    return {"set": name, "n": n, "d": X.shape[1], "k": k, "runs": runs,
            "ari_median": float(np.median(scores)), "ari_mean": float(np.mean(scores)),
            "ari_min": float(np.min(scores)), "fit_s": float(np.median(times))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--sets", nargs="+", default=["synth_10d", "synth_100d", "mnist_emb40"])
    ap.add_argument("--centre-share", type=float)
    ap.add_argument("--count-share", type=float)
    ap.add_argument("--max-depth", type=int)
    ap.add_argument("--branch-factor", type=float)
    ap.add_argument("--min-leaf-size", type=float)
    args = ap.parse_args(argv)
    params = {key: value for key, value in (
        ("centre_share", args.centre_share), ("count_share", args.count_share),
        ("max_depth", args.max_depth), ("branch_factor", args.branch_factor),
        ("min_leaf_size", args.min_leaf_size)) if value is not None}
    print(f"LSHSplits {params or '(defaults)'}: epsilon = 1, delta = 1/(n sqrt n), "
          f"{args.runs} runs (seeds 0..{args.runs - 1})")
    print(f"{'set':<12} {'n':>7} {'d':>4} {'k':>3}  {'ARI med':>7} {'mean':>6} {'min':>6} "
          f"{'fit_s':>6}   Google ARI / fit_s")
    for name in args.sets:
        r = run_set(name, args.runs, params)
        if r is None:
            continue
        g_ari, g_s = GOOGLE.get(name, (None, None))
        ref = f"{g_ari if g_ari is not None else '-'} / {g_s if g_s is not None else '-'}"
        print(f"{name:<12} {r['n']:>7} {r['d']:>4} {r['k']:>3}  {r['ari_median']:>7.4f} "
              f"{r['ari_mean']:>6.4f} {r['ari_min']:>6.4f} {r['fit_s']:>6.3f}   {ref}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
