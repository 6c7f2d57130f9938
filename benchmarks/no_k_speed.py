"""The default estimator without k beside itself given k: fit time, ARI and clusters found.

    python benchmarks/no_k_speed.py                          # every set, epsilon 1 and 0.25
    python benchmarks/no_k_speed.py --sets gen_many80_2d blobs_100k_2d --epsilons 1 --seeds 3
    python benchmarks/no_k_speed.py --table                  # the default's table, below
    python benchmarks/no_k_speed.py --table --seeds 40 --criterion-k   # also at the criterion's k

For each set and epsilon, ``CoresetKMeans(epsilon=e, bounds="private", random_state=s)`` without
``n_clusters`` ("no k") and with the true number of classes ("given k"), seeds ``0 .. seeds-1``.
Cells: mean ARI, median number of clusters found, median fit time (seconds); the last column is
the ratio of the median fit times (no k over given k). The target: at most 2 on every set of
50,000 records or more.

Sets: ``gen_many80_2d``, ``gen_spiral60_2d``, ``gen_unequal10_5d``, ``dpm_synth_10d``,
``mnist_emb40`` (``privclust.datasets.load``), Synth-100d (``privclust.datasets.synth_100d``),
and generated mixtures (``make_blobs``, ``random_state=0``): ``blobs_100k_2d`` (100,000 x 2,
100 centres), ``blobs_200k_20d`` (200,000 x 20, 32 centres), ``blobs_50k_6d`` (50,000 x 6, 12
centres). ``--sets`` also takes smaller sets of Gagolewski's battery (``SMALL``). Sets absent
from the data folder are skipped with a printed line; a fit refused up front (too few records
for the budget) prints "refused" (in the table: a cell whose every seed was refused; otherwise
the figures are over the seeds that ran, the refused ones counted beside them).

``--table`` prints the default's quality table instead (``TABLE`` sets unless ``--sets`` names
others; epsilon 1, 0.5 and 0.25 unless ``--epsilons``): per set and epsilon, the mean ARI and
the median number of clusters without k, the mean ARI given the true k, and the k-means cost at
the released centres over non-private ``KMeans(k, n_init=10, random_state=0)`` (medians), then
the cells that miss the targets: without k at least the given-k ARI less 0.10, and at least k/4
clusters wherever given k reaches ARI 0.4 (each with its standard error over the seeds). With
``--criterion-k`` the cells are judged a second time at the k the non-private criterion chooses
(``_criterion.criterion_k`` over the choice's candidate ks up to twice the classes), where it
chooses another k than the true one: the no-k targets are judged there, since a private choice
cannot do better than the criterion it makes private.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from typing import NamedTuple

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from _criterion import criterion_k
from privclust import CoresetKMeans, datasets
from privclust.cluster._coreset.select import candidate_ks
from privclust.datasets import DatasetNotFoundError
from privclust.metrics import ari

SETS = ["gen_many80_2d", "gen_spiral60_2d", "gen_unequal10_5d", "dpm_synth_10d", "mnist_emb40",
        "synth_100d", "blobs_100k_2d", "blobs_200k_20d", "blobs_50k_6d"]
#: smaller sets of Gagolewski's battery (``--sets``), where the choice of k collapsed to 2
SMALL = ["sipu_a1", "sipu_a2", "sipu_s2", "sipu_s4", "other_hdbscan", "wut_graph",
         "fcps_engytime"]
#: ``--table``: Gagolewski's sets and the generated sets of the data folder
TABLE = SMALL + ["gen_unequal10_5d", "gen_spiral60_2d", "gen_many80_2d"]
#: generated mixtures: (n, d, centres, cluster_std, centre box half-width)
BLOBS = {"blobs_100k_2d": (100_000, 2, 100, 1.0, 100.0),
         "blobs_200k_20d": (200_000, 20, 32, 3.0, 100.0),
         "blobs_50k_6d": (50_000, 6, 12, 2.0, 50.0)}


def _load(name):
    if name in BLOBS:
        n, d, k, std, box = BLOBS[name]
        X, y = make_blobs(n, d, centers=k, cluster_std=std, center_box=(-box, box),
                          random_state=0)
        return X, y
    data = datasets.synth_100d() if name == "synth_100d" else datasets.load(name)
    return data.X, data.y


def labelled_sets(names):
    """``(name, X, y, k)`` of every set of ``names`` that loads (``k``: its true number of
    clusters, noise labels left out); a set that does not is skipped with a line on stderr."""
    for name in names:
        try:
            X, y = _load(name)
        except (DatasetNotFoundError, FileNotFoundError, OSError) as exc:
            print(f"(skipping {name}: {exc})", file=sys.stderr)
            continue
        yield name, X, y, int(np.unique(y[y >= 0]).size)


def _runs(X, y, k, epsilon, seeds):
    out = []
    for seed in range(seeds):
        model = CoresetKMeans(k, epsilon=epsilon, bounds="private", random_state=seed)
        t0 = time.perf_counter()
        model.fit(X)
        took = time.perf_counter() - t0
        out.append((ari(y, model.labels_), model.n_clusters_, took))
    a, kk, t = zip(*out, strict=True)
    return float(np.mean(a)), statistics.median(kk), statistics.median(t)


def _cost(X, centres):
    d2 = ((X[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    return float(d2.min(axis=1).sum())


def _quality(X, y, k, epsilon, seeds, base):
    """Mean ARI and its standard error, median clusters and median cost ratio over the seeds
    whose fit ran, and how many were refused; None if every seed was refused."""
    out, refused = [], 0
    for seed in range(seeds):
        try:
            model = CoresetKMeans(k, epsilon=epsilon, bounds="private", random_state=seed).fit(X)
        except ValueError:  # refused up front (the noisy count says too few records)
            refused += 1
            continue
        out.append((ari(y, model.labels_), model.n_clusters_,
                    _cost(X, model.cluster_centers_) / base))
    if not out:
        return None
    a, kk, c = zip(*out, strict=True)
    se = float(np.std(a, ddof=1) / np.sqrt(len(a))) if len(a) > 1 else float("nan")
    return Quality(float(np.mean(a)), se, statistics.median(kk), statistics.median(c), refused)


class Quality(NamedTuple):
    """One cell of the table over its seeds."""

    ari: float
    se: float
    k: float
    cost: float
    refused: int


def _refused(q, seeds) -> str:
    return f" ({q.refused} of {seeds} refused)" if q.refused else ""


def _miss(name, eps, no_k, given, k, judged="") -> str | None:
    """The target-1 line a cell misses (None when it meets it)."""
    if no_k.ari < given.ari - 0.10 or (given.ari >= 0.4 and no_k.k < k / 4):
        return (f"{name} at {eps:g}: {no_k.ari:.3f} +- {no_k.se:.3f} / {no_k.k:g} clusters "
                f"without k, {given.ari:.3f} +- {given.se:.3f} given k{judged}")
    return None


def table(sets, epsilons, seeds, criterion=False):
    """The default's quality table (module docstring) and the cells that miss its targets;
    with ``criterion``, also judged at the k the non-private criterion chooses."""
    print("| set (n, k) | " + " | ".join(f"eps {e:g}: no k (ARI / k / cost) | given k (ARI / "
                                          "cost)" for e in epsilons) + " |")
    print("|---|" + "---|---|" * len(epsilons))
    misses, judged = [], []
    for name, X, y, k in labelled_sets(sets):
        X = np.asarray(X, dtype=np.float64)
        base = _cost(X, KMeans(k, n_init=10, random_state=0).fit(X).cluster_centers_)
        k_star = criterion_k(X, y, candidate_ks(2 * k))[0] if criterion else k
        cells = []
        for eps in epsilons:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                no_k, given = (_quality(X, y, kk, eps, seeds, base) for kk in (None, k))
                at_star = given if k_star == k or no_k is None else _quality(
                    X, y, k_star, eps, seeds, base)
            if no_k is None or given is None:
                cells += ["refused", "refused"]
                continue
            cells += [f"{no_k.ari:.3f} / {no_k.k:g} / {no_k.cost:.2f}x" + _refused(no_k, seeds),
                      f"{given.ari:.3f} / {given.cost:.2f}x" + _refused(given, seeds)]
            misses.append(_miss(name, eps, no_k, given, k))
            judged.append(_miss(name, eps, no_k, at_star, k_star, f" = {k_star} (the "
                                "criterion's k)" if k_star != k else ""))
        print(f"| {name} ({X.shape[0]:,}, {k}) | " + " | ".join(cells) + " |", flush=True)
    for title, found in [("", misses)] + [(", judged at the criterion's k", judged)] * criterion:
        found = [m for m in found if m]
        print(f"Target 1 missed in {len(found)} cell(s){title}"
              + "".join(f"\n- {m}" for m in found))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3, help="seeds per cell (default 3)")
    p.add_argument("--epsilons", type=float, nargs="+", default=None)
    p.add_argument("--sets", nargs="+", default=None, choices=SETS + SMALL)
    p.add_argument("--table", action="store_true", help="the default's quality table")
    p.add_argument("--criterion-k", action="store_true",
                   help="with --table: also judge each set at the k the non-private criterion "
                        "chooses (minutes on the larger sets)")
    args = p.parse_args(argv)
    if args.table:
        table(args.sets or TABLE, args.epsilons or [1.0, 0.5, 0.25], args.seeds,
              args.criterion_k)
        return
    args.sets = args.sets or SETS
    args.epsilons = args.epsilons or [1.0, 0.25]
    print("| set (n x d, k) | epsilon | no k: ARI / clusters / time | given k: ARI / time | "
          "time ratio |")
    print("|---|---|---|---|---|")
    for name, X, y, k in labelled_sets(args.sets):
        for eps in args.epsilons:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    a0, k0, t0 = _runs(X, y, None, eps, args.seeds)
                    a1, _, t1 = _runs(X, y, k, eps, args.seeds)
                except ValueError as exc:  # refused up front
                    print(f"| {name} | {eps:g} | refused: {str(exc)[:60]} | | |")
                    continue
            print(f"| {name} ({X.shape[0]:,} x {X.shape[1]}, {k}) | {eps:g} | {a0:.3f} / {k0:g} / "
                  f"{t0:.2f} s | {a1:.3f} / {t1:.2f} s | {t0 / t1:.2f} |", flush=True)


if __name__ == "__main__":
    main()
