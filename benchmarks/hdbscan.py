"""DPHDBSCAN's ARI on the shared density sets (mean of 3 seeds, noise -1 its own label).

``bounds="private"`` unless the set is too small for it at that epsilon (the fit refuses); then
the sidecar's public bounds, marked ``public`` in the table. Run from the repository root:

* ``python benchmarks/hdbscan.py [set,...] [epsilon,...]``: the table;
* ``python benchmarks/hdbscan.py --vs-hdbscan [epsilon]``: beside scikit-learn's non-private
  ``HDBSCAN`` (default parameters, and its best ``min_cluster_size`` of 25, 100 and n / 100) on
  the shared non-convex sets;
* ``python benchmarks/hdbscan.py --convex [epsilon]``: beside ``CoresetKMeans`` (no k, same
  epsilon and bounds) on convex sets;
* ``python benchmarks/hdbscan.py --speed [n]``: fit time beside DPDBSCAN on the Cabs-shaped
  set of ``benchmarks/dbscan.py`` (11M points by default).
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score

from privclust import DPHDBSCAN, CoresetKMeans

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
SETS = ("cluto_t4_8k", "cluto_t5_8k", "cluto_t7_10k", "cluto_t8_8k", "dpdbscan_moons",
        "dpdbscan_circles", "dpdbscan_blobs")
NON_CONVEX = ("cluto_t4_8k", "cluto_t5_8k", "cluto_t7_10k", "cluto_t8_8k", "smile1",
              "complex9", "cure_t2_4k", "wut_labirynth", "wut_trapped_lovers", "wut_stripes",
              "wut_windows", "other_hdbscan")
CONVEX = ("gen_many80_2d", "dpm_synth_10d")
SEEDS = (0, 1, 2)


def load(name: str):
    if not (DATA / f"{name}.npz").exists():
        known = sorted(f.stem for f in DATA.glob("*.npz"))
        sys.exit(f"no set {name!r} in {DATA.resolve()}; the sets there: {', '.join(known)}")
    z = np.load(DATA / f"{name}.npz")
    meta = json.loads((DATA / f"{name}.json").read_text())
    b = np.asarray(meta["bounds"], dtype=float)
    return z["X"].astype(float), z["y"], {"lower": b[:, 0], "upper": b[:, 1]}


def run(name: str, epsilon: float, make=DPHDBSCAN) -> tuple[float, list, str, float]:
    X, y, public = load(name)
    aris, how, t0 = [], "private", time.perf_counter()
    for seed in SEEDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                model = make(epsilon=epsilon, bounds="private" if how == "private"
                             else public, random_state=seed).fit(X)
            except ValueError:
                how = "public"
                model = make(epsilon=epsilon, bounds=public, random_state=seed).fit(X)
        aris.append(adjusted_rand_score(y, model.labels_))
    return float(np.mean(aris)), aris, how, (time.perf_counter() - t0) / len(SEEDS)


def table(sets, epsilons) -> None:
    print(f"{'set':18s} {'epsilon':>7s} {'bounds':>7s} {'ARI':>6s}  per seed              fit s")
    for name in sets:
        for eps in epsilons:
            mean, aris, how, secs = run(name, eps)
            print(f"{name:18s} {eps:7g} {how:>7s} {mean:6.3f}  "
                  f"{', '.join(f'{a:.3f}' for a in aris):22s} {secs:.2f}")


def vs_hdbscan(epsilon: float) -> None:
    """DPHDBSCAN at ``epsilon`` beside non-private HDBSCAN (default, and its best of three
    ``min_cluster_size`` values: the best is chosen with the labels, an upper reference)."""
    from sklearn.cluster import HDBSCAN

    warnings.simplefilter("ignore", FutureWarning)  # scikit-learn's coming default of copy
    print(f"{'set':20s} {'DPHDBSCAN':>9s} {'bounds':>7s} {'HDBSCAN':>8s} {'best':>6s} (mcs)")
    ours, theirs = [], []
    for name in NON_CONVEX:
        X, y, _ = load(name)
        mean, _, how, _ = run(name, epsilon)
        default = adjusted_rand_score(y, HDBSCAN().fit(X).labels_)
        best = max((adjusted_rand_score(y, HDBSCAN(min_cluster_size=m).fit(X).labels_), m)
                   for m in (25, 100, max(2, len(X) // 100)))
        ours.append(mean)
        theirs.append(default)
        print(f"{name:20s} {mean:9.3f} {how:>7s} {default:8.3f} {best[0]:6.3f} ({best[1]})")
    print(f"{'mean':20s} {np.mean(ours):9.3f} {'':7s} {np.mean(theirs):8.3f}   ratio "
          f"{np.mean(ours) / np.mean(theirs):.3f}")


def convex(epsilon: float) -> None:
    """DPHDBSCAN beside CoresetKMeans (no k) on convex data."""
    print(f"{'set':16s} {'DPHDBSCAN':>9s} {'CoresetKMeans':>13s} {'ratio':>6s} bounds")
    for name in CONVEX:
        ours, _, how, secs = run(name, epsilon)
        base, _, how_b, secs_b = run(name, epsilon, CoresetKMeans)
        print(f"{name:16s} {ours:9.3f} {base:13.3f} {ours / base:6.3f} {how}/{how_b} "
              f"({secs:.2f} s / {secs_b:.2f} s per fit)")


def speed(n: int, runs: int = 3) -> None:
    """Fit time on the Cabs-shaped set of ``benchmarks/dbscan.py`` (``n`` points), DPHDBSCAN
    beside DPDBSCAN (that script's alpha and MinPts), epsilon 1, public bounds, alternating
    runs; medians."""
    import statistics

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from dbscan import BIG_PARAMS, make_city
    from privclust import DPDBSCAN

    X, bounds = make_city(n)
    alpha, min_pts = BIG_PARAMS
    fits = {
        "DPDBSCAN": lambda: DPDBSCAN(epsilon=1.0, eps=alpha, min_samples=min_pts,
                                     bounds=bounds, random_state=0).fit(X),
        "DPHDBSCAN": lambda: DPHDBSCAN(epsilon=1.0, bounds=bounds, random_state=0).fit(X),
    }
    times: dict = {k: [] for k in fits}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(runs):
            for name, fit in fits.items():
                t0 = time.perf_counter()
                model = fit()
                times[name].append(time.perf_counter() - t0)
                if name == "DPHDBSCAN":
                    found = model.n_clusters_
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{n} points, {runs} runs each: DPDBSCAN {med['DPDBSCAN']:.2f} s, DPHDBSCAN "
          f"{med['DPHDBSCAN']:.2f} s ({found} clusters), ratio "
          f"{med['DPHDBSCAN'] / med['DPDBSCAN']:.2f}")


def main(argv) -> None:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return
    if argv and argv[0].startswith("-") and argv[0] not in ("--speed", "--vs-hdbscan",
                                                             "--convex"):
        sys.exit(f"unknown option {argv[0]!r}: run with --help for the usage")
    if not (argv and argv[0] == "--speed") and not DATA.is_dir():
        sys.exit(f"the benchmark sets are not at {DATA.resolve()}: this script reads the "
                 "shared data folder beside the repository")
    if argv and argv[0] == "--speed":
        speed(int(float(argv[1])) if len(argv) > 1 else 11_000_000)
    elif argv and argv[0] == "--vs-hdbscan":
        vs_hdbscan(float(argv[1]) if len(argv) > 1 else 1.0)
    elif argv and argv[0] == "--convex":
        convex(float(argv[1]) if len(argv) > 1 else 1.0)
    else:
        table(argv[0].split(",") if argv else SETS,
              [float(e) for e in argv[1].split(",")] if len(argv) > 1 else [1.0, 0.25])


if __name__ == "__main__":
    main(sys.argv[1:])
