"""DPCube (Balcan et al., ICML 2017): accuracy, ARI, k-means cost and fit time.

    python benchmarks/dpcube.py                    # Synth-10d (eps 1, 0.5), letter, mnist_emb40
    python benchmarks/dpcube.py --runs 3 --quick   # Synth-10d only
    python benchmarks/dpcube.py --n-projected 5 --recover-share 0.6 --n-lloyd 1

Synth-10d: ``make_blobs(100000, 10, centers=64, center_box=(-100, 100), random_state=42)``,
bounds (-100, 100), k = 64 (targets at epsilon 1: majority accuracy >= 0.90, fit <= 1 s).
``uci_letter`` (k = 26, bounds (0, 15)) and ``mnist_emb40`` (k = 10, its bounds) are loaded with
``privclust.datasets.load`` and skipped when absent. Every row: median over ``--runs`` seeds of
the majority-vote accuracy (``privclust.metrics.accuracy_majority``), the ARI, the exact k-means
cost per record at the released centres, and the fit time (the median of the runs).
"""

from __future__ import annotations

import numpy as np

from _centre_models import base_parser, data_sets, measure
from privclust import DPCube


def main(argv=None):
    ap = base_parser(__doc__)
    for opt, typ in (("n-projected", int), ("max-depth", int), ("n-shifts", int),
                     ("recover-share", float), ("n-lloyd", int)):
        ap.add_argument(f"--{opt}", type=typ, default=None)
    args = ap.parse_args(argv)
    params = {key: val for key in ("n_projected", "max_depth", "n_shifts", "recover_share",
                                   "n_lloyd") if (val := getattr(args, key)) is not None}
    print(f"DPCube {params or '(defaults)'}")
    for name, X, y, k, bounds in data_sets(args.quick):
        for eps in args.epsilons:
            row = measure("DPCube", lambda seed, k=k, eps=eps, bounds=bounds: DPCube(
                k, epsilon=eps, bounds=bounds, random_state=seed, **params),
                name, X, y, k, bounds, eps, args.runs)
            if name == "synth-10d" and eps == 1.0:
                ok = row["acc"] >= 0.90 and row["fit"] <= 1.0
                print(f"  target (accuracy >= 0.90, fit <= 1 s at epsilon 1): "
                      f"{'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
