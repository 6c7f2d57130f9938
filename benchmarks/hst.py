"""HSTKMeans (Cohen-Addad et al., KDD 2022): accuracy, ARI, k-means cost and fit time.

    python benchmarks/hst.py                    # Synth-10d (eps 1, 0.5), letter, mnist_emb40
    python benchmarks/hst.py --runs 3 --quick   # Synth-10d only
    python benchmarks/hst.py --max-depth 6 --refine-share 0.3 --epsilons 1 0.5 0.2

Synth-10d: ``make_blobs(100000, 10, centers=64, center_box=(-100, 100), random_state=42)``,
bounds (-100, 100), k = 64 (targets at epsilon 1: majority accuracy >= 0.90, fit <= 1 s).
``uci_letter`` (k = 26, bounds (0, 15)) and ``mnist_emb40`` (k = 10, its bounds) are loaded with
``privclust.datasets.load`` and skipped when absent. Every row: median over ``--runs`` seeds of
the majority-vote accuracy (``privclust.metrics.accuracy_majority``), the ARI, the exact k-means
cost per record at the released centres, and the fit time (the median of the runs). The
default is ``refine="auto"``; ``--no-refine`` is the previous default, ``--refine-share`` always
refines. Fit time on Synth-100d and the rule's costs on more sets: ``benchmarks/hst_emmc.py``.
"""

from __future__ import annotations

import numpy as np

from _centre_models import base_parser, data_sets, measure
from privclust import HSTKMeans


def main(argv=None):
    ap = base_parser(__doc__)
    ap.add_argument("--max-depth", type=int, default=None)
    ap.add_argument("--no-refine", action="store_true", help='refine=False (default "auto")')
    ap.add_argument("--refine-share", type=float, default=None)
    args = ap.parse_args(argv)
    params = {}
    if args.max_depth is not None:
        params["max_depth"] = args.max_depth
    if args.no_refine:
        params["refine"] = False
    if args.refine_share is not None:
        params["refine"], params["refine_share"] = True, args.refine_share
    print(f"HSTKMeans {params or '(defaults)'}")
    for name, X, y, k, bounds in data_sets(args.quick):
        for eps in args.epsilons:
            row = measure("HSTKMeans", lambda seed, k=k, eps=eps, bounds=bounds: HSTKMeans(
                k, epsilon=eps, bounds=bounds, random_state=seed, **params),
                name, X, y, k, bounds, eps, args.runs)
            if name == "synth-10d" and eps == 1.0:
                ok = row["acc"] >= 0.90 and row["fit"] <= 1.0
                print(f"  target (accuracy >= 0.90, fit <= 1 s at epsilon 1): "
                      f"{'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
