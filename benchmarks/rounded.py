"""DPM on rounded and integer data against full precision.

    python benchmarks/rounded.py                # blobs r = 0..9, 3 DPM seeds each
    python benchmarks/rounded.py --sets 4 --seeds 10

Data: ``make_blobs(20000, 2, centers=4, cluster_std=1, center_box=(-8, 8), random_state=r)``
clipped to the public bounds (-10, 10), at full precision, rounded to one decimal and to
integers; DPM at epsilon 1, delta 1e-6. Prints the mean ARI and clusters per set and
precision, and the mean over sets. Then the integer example ``make_blobs(5000, centers=4,
cluster_std=3)`` (bounds (-30, 30)) at epsilon 1 and 10.

Runs against whichever privclust is on the path (an older one without ``resolution`` too).
"""

from __future__ import annotations

import argparse
import inspect
import warnings

import numpy as np
from sklearn.datasets import make_blobs

from privclust import DPM
from privclust.metrics import ari


def _dpm(**kw):
    if "resolution" not in inspect.signature(DPM).parameters:
        kw.pop("resolution", None)
    return DPM(**kw)


def _fit_all(X, y, bounds, eps, seeds):
    models = [_dpm(epsilon=eps, delta=1e-6, bounds=bounds, random_state=s).fit(X)
              for s in range(seeds)]
    return float(np.mean([ari(y, m.labels_) for m in models])), float(
        np.mean([m.n_clusters_ for m in models]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sets", type=int, default=10, help="data sets r = 0 .. sets-1")
    p.add_argument("--seeds", type=int, default=3, help="DPM seeds per set")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    print("| r | full precision: ARI (k) | one decimal | integers |\n|---|---|---|---|")
    rows = []
    for r in range(args.sets):
        X, y = make_blobs(20000, 2, centers=4, cluster_std=1, center_box=(-8, 8),
                          random_state=r)
        X = np.clip(X, -10, 10)
        cells = [_fit_all(Z, y, (-10, 10), 1.0, args.seeds)
                 for Z in (X, np.round(X, 1), np.round(X))]
        rows.append([c[0] for c in cells])
        print(f"| {r} | " + " | ".join(f"{a:.2f} ({k:.1f})" for a, k in cells) + " |")
    mean = np.mean(rows, axis=0)
    print("| mean | " + " | ".join(f"{a:.3f}" for a in mean) + " |")
    print("\nInteger example, make_blobs(5000, centers=4, cluster_std=3), bounds (-30, 30)")
    print("| epsilon | full: ARI (k) | integers: ARI (k) |\n|---|---|---|")
    for eps in (1.0, 10.0):
        cells = []
        for rounding in (False, True):
            a, k = [], []
            for r in range(args.sets):
                X, y = make_blobs(5000, 2, centers=4, cluster_std=3, random_state=r)
                X = np.clip(X, -30, 30)
                res = _fit_all(np.round(X) if rounding else X, y, (-30, 30), eps, args.seeds)
                a.append(res[0])
                k.append(res[1])
            cells.append(f"{np.mean(a):.2f} ({np.mean(k):.1f})")
        print(f"| {eps:g} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
