"""The default beside Google's LSH-splits: fit time without k, given k, and the peer given k.

    PEER_GOOGLE_DIR=~/peers/goo/learning python benchmarks/vs_google.py
    python benchmarks/vs_google.py --sets gen_many80_2d blobs_100k_2d --epsilons 1 --seeds 3

For every set of at least 50,000 records of ``benchmarks/no_k_speed.py`` and every epsilon,
seeds ``0 .. seeds-1``, interleaved in one loop on this machine: ``CoresetKMeans(epsilon=e,
bounds="private")`` without ``n_clusters`` ("no k"), with the true number of classes ("given
k"), and Google's LSH-splits given k (``../shared/peers/google_lsh.py`` in its own Python,
``$PEER_PYTHON``, default ``~/peers/goo/venv/bin/python``; its fit call, which includes its
privacy calibration and its labelling of the records, as ours includes ``labels_``). Printed per
set and epsilon: the median fit times (seconds), the ratios no k / given k (target: at most 2)
and each of ours over the peer's (target: at most 0.5), and the mean ARI of all three. The peer
gets the sidecar's public bounds (generated sets: the generator's box, widened by six standard
deviations) and
delta ``1/(n sqrt n)``; ours finds private bounds from the data, paying for them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from no_k_speed import BLOBS, SETS, labelled_sets  # noqa: E402
from privclust import CoresetKMeans  # noqa: E402
from privclust.metrics import ari  # noqa: E402

#: The sets of at least 50,000 records (gen_unequal10_5d holds 47,482).
LARGE = [s for s in SETS if s != "gen_unequal10_5d"]
PEER = Path(__file__).resolve().parents[1].parent / "shared" / "peers" / "google_lsh.py"


def _generated_bounds(name) -> float | None:
    """The public half-width of a generated set's box (from its generator's parameters: the
    centres' box plus six standard deviations; Synth-100d's published (-100, 100))."""
    if name == "synth_100d":
        return 100.0
    if name in BLOBS:
        _, _, _, std, box = BLOBS[name]
        return box + 6 * std
    return None


def _peer_input(name, X, y, tmp) -> str:
    """What the peer script reads: a shared set's name, or an ``.npz`` of a generated one."""
    half = _generated_bounds(name)
    if half is None:
        return name
    path = os.path.join(tmp, f"{name}.npz")
    np.savez(path, X=X, y=y, bounds=np.tile([-half, half], (X.shape[1], 1)))
    return path


def _peer(python, data, k, eps, seed) -> tuple[float, float]:
    out = subprocess.run([python, str(PEER), data, "--k", str(k), "--epsilon", str(eps),
                          "--seed", str(seed)], capture_output=True, text=True, check=True)
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    return rec["fit_s"], rec.get("ari", float("nan"))


def _ours(X, y, k, eps, seed) -> tuple[float, float]:
    model = CoresetKMeans(k, epsilon=eps, bounds="private", random_state=seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X)
    return time.perf_counter() - t0, ari(y, model.labels_)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sets", nargs="+", default=LARGE, choices=LARGE)
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 0.25])
    p.add_argument("--seeds", type=int, default=3)
    args = p.parse_args(argv)
    python = os.environ.get("PEER_PYTHON", os.path.expanduser("~/peers/goo/venv/bin/python"))
    if not (os.environ.get("PEER_GOOGLE_DIR") and Path(python).exists() and PEER.exists()):
        sys.exit("needs the peer: PEER_GOOGLE_DIR set, $PEER_PYTHON (or ~/peers/goo/venv) and "
                 f"{PEER} (see the peers' README)")
    print("| set | eps | no k (s) | given k (s) | LSH-splits given k (s) | no k / given k | "
          "no k / peer | given k / peer | ARI no k / given k / peer |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, X, y, k in labelled_sets(args.sets):
            X = np.asarray(X, dtype=np.float64)
            data = _peer_input(name, X, y, tmp)
            for eps in args.epsilons:
                runs = [(_ours(X, y, None, eps, s), _ours(X, y, k, eps, s),
                         _peer(python, data, k, eps, s)) for s in range(args.seeds)]
                t = [statistics.median(r[i][0] for r in runs) for i in range(3)]
                a = [float(np.mean([r[i][1] for r in runs])) for i in range(3)]
                print(f"| {name} | {eps:g} | {t[0]:.2f} | {t[1]:.2f} | {t[2]:.2f} | "
                      f"{t[0] / t[1]:.2f} | {t[0] / t[2]:.2f} | {t[1] / t[2]:.2f} | "
                      f"{a[0]:.3f} / {a[1]:.3f} / {a[2]:.3f} |", flush=True)


if __name__ == "__main__":
    main()
