"""DPHDBSCAN's ARI on the shared density sets (mean of 3 seeds, noise -1 its own label).

``bounds="private"`` unless the set is too small for it at that epsilon (the fit refuses); then
the sidecar's public bounds, marked ``public`` in the table. Run from the repository root:
``python benchmarks/hdbscan.py [set,...] [epsilon,...]``.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score

from privclust import DPHDBSCAN

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
SETS = ("cluto_t4_8k", "cluto_t7_10k", "dpdbscan_moons", "dpdbscan_circles", "dpdbscan_blobs")
SEEDS = (0, 1, 2)


def load(name: str):
    z = np.load(DATA / f"{name}.npz")
    meta = json.loads((DATA / f"{name}.json").read_text())
    b = np.asarray(meta["bounds"], dtype=float)
    return z["X"].astype(float), z["y"], {"lower": b[:, 0], "upper": b[:, 1]}


def run(name: str, epsilon: float) -> tuple[float, list, str, float]:
    X, y, public = load(name)
    aris, how, t0 = [], "private", time.perf_counter()
    for seed in SEEDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                model = DPHDBSCAN(epsilon=epsilon, bounds="private" if how == "private"
                                  else public, random_state=seed).fit(X)
            except ValueError:
                how = "public"
                model = DPHDBSCAN(epsilon=epsilon, bounds=public, random_state=seed).fit(X)
        aris.append(adjusted_rand_score(y, model.labels_))
    return float(np.mean(aris)), aris, how, (time.perf_counter() - t0) / len(SEEDS)


def main(argv) -> None:
    sets = argv[0].split(",") if argv else SETS
    epsilons = [float(e) for e in argv[1].split(",")] if len(argv) > 1 else [1.0, 0.25]
    print(f"{'set':18s} {'epsilon':>7s} {'bounds':>7s} {'ARI':>6s}  per seed              fit s")
    for name in sets:
        for eps in epsilons:
            mean, aris, how, secs = run(name, eps)
            print(f"{name:18s} {eps:7g} {how:>7s} {mean:6.3f}  "
                  f"{', '.join(f'{a:.3f}' for a in aris):22s} {secs:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
