"""What one privacy plan per fit buys: utility at the same (epsilon, delta), before and after.

    python benchmarks/plan_utility.py                 # 5 runs of the Morse parts, 10 of DPM
    python benchmarks/plan_utility.py --runs 3 --parts mixture dpm_synth

Parts (every fit with a fixed seed; reproducible, not secure randomness):

* ``mixture``: DPGaussianMixture (DPMoG-hard, K0 = 6) on ``uci_htru2``, ARI, at epsilon 1 and
  0.5 with delta=None and delta=1e-6; the spent epsilon (the plan spends all of it).
* ``morse``: MorseMerging to K = 2 on ``uci_htru2`` over DPMoG-hard, DPLloyd and DPM as
  ``benchmarks/morse.py`` builds them (data mapped to [-1, 1] by the sidecar's public bounds).
* ``dpm_synth``: DPM on Synth-10d at epsilon 0.25, 0.5 and 1: runs that are exact (ARI 1 and
  64 clusters) and the mean ARI.
* ``dpm_letter``: DPM on ``uci_letter`` at epsilon 1 and 0.5: ARI, clusters, majority accuracy,
  silhouette; ``--resolution none`` runs it as continuous data (no recording-step estimate).

The script runs against whichever privclust is on the path, so the same file measures an older
checkout (put it in that checkout's ``benchmarks/`` and run it there).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import inspect  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.datasets import make_blobs  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import morse as morse_bench  # noqa: E402
from privclust import DPM, DPGaussianMixture, DPLloyd, MorseMerging  # noqa: E402
from privclust.datasets import load  # noqa: E402
from privclust.metrics import accuracy_majority, ari, silhouette  # noqa: E402

PARTS = ("mixture", "morse", "dpm_synth", "dpm_letter")


def _dpm(**kw):
    if "resolution" not in inspect.signature(DPM).parameters:
        kw.pop("resolution", None)  # an older privclust without the recording-step estimate
    return DPM(**kw)


def _mean(v):
    return f"{np.mean(v):.3f} +-{np.std(v):.3f}"


def part_mixture(runs):
    U, y = morse_bench.prepare("uci_htru2")
    print("\n## DPGaussianMixture on uci_htru2 (K0 = 6): ARI, spent epsilon")
    print("| epsilon | delta | ARI (mean +- sd) | spent epsilon |\n|---|---|---|---|")
    for eps in (1.0, 0.5):
        for delta in (None, 1e-6):
            a, spent = [], []
            for seed in range(runs):
                m = DPGaussianMixture(n_components=6, epsilon=eps, delta=delta,
                                      bounds=(-1.0, 1.0), random_state=seed).fit(U)
                a.append(ari(y, m.labels_))
                spent.append(m.privacy_report_.total().epsilon)
            print(f"| {eps:g} | {delta} | {_mean(a)} | {np.mean(spent):.4f} |")


def _pipeline(name, U, eps, seed):
    """The three Morse pipelines of benchmarks/morse.py (K = 2, K0 = 6, bounds (-1, 1))."""
    B = (-1.0, 1.0)
    if name == "DPMoG-hard":
        base = DPGaussianMixture(n_components=6, epsilon=eps, bounds=B, random_state=seed)
        return MorseMerging(base.fit(U), 2).fit(U)
    base = (DPLloyd(n_clusters=6, bounds=B, random_state=seed) if name == "DPLloyd"
            else _dpm(bounds=B, random_state=seed))
    return MorseMerging(base, 2, epsilon=eps, covariance_share=0.15,
                        random_state=seed).fit(U)


def part_morse(runs):
    U, y = morse_bench.prepare("uci_htru2")
    print("\n## MorseMerging (K = 2) on uci_htru2: ARI of the pipeline; spent (eps, delta)")
    print("| epsilon | base | ARI (mean +- sd) | spent epsilon | spent delta (mean) |")
    print("|---|---|---|---|---|")
    for eps in (1.0, 0.5):
        for name in ("DPMoG-hard", "DPLloyd", "DPM"):
            a, e, d = [], [], []
            for seed in range(runs):
                mm = _pipeline(name, U, eps, seed)
                a.append(ari(y, mm.labels_))
                total = mm.privacy_report_.total()
                e.append(total.epsilon)
                d.append(total.delta)
            print(f"| {eps:g} | {name} | {_mean(a)} | {np.mean(e):.4f} | {np.mean(d):.3g} |")


def part_dpm_synth(runs):
    X, y = make_blobs(100_000, 10, centers=64, center_box=(-100, 100), random_state=42)
    print(f"\n## DPM on Synth-10d: exact runs (ARI 1 and 64 clusters) of {runs}")
    print("| epsilon | exact runs | ARI (mean +- sd) | clusters (mean) | spent epsilon |")
    print("|---|---|---|---|---|")
    for eps in (0.25, 0.5, 1.0):
        exact, a, k, spent = 0, [], [], []
        for seed in range(runs):
            m = _dpm(epsilon=eps, bounds=(-100, 100), random_state=seed).fit(X)
            s = ari(y, m.labels_)
            exact += int(s > 1 - 1e-9 and m.n_clusters_ == 64)
            a.append(s)
            k.append(m.n_clusters_)
            spent.append(m.privacy_report_.total().epsilon)
        print(f"| {eps:g} | {exact} / {runs} | {_mean(a)} | {np.mean(k):.1f} | "
              f"{np.mean(spent):.4f} |")


def part_dpm_letter(runs, resolution):
    ds = load("uci_letter")
    X, y = ds.X, ds.y
    print(f"\n## DPM on uci_letter (bounds (0, 15), resolution={resolution!r}), {runs} runs")
    print("| epsilon | ARI | clusters | majority accuracy | silhouette | spent epsilon |")
    print("|---|---|---|---|---|---|")
    for eps in (1.0, 0.5):
        a, k, acc, sil, spent = [], [], [], [], []
        for seed in range(runs):
            m = _dpm(epsilon=eps, bounds=(0.0, 15.0), random_state=seed,
                     resolution=resolution).fit(X)
            a.append(ari(y, m.labels_))
            k.append(m.n_clusters_)
            acc.append(accuracy_majority(y, m.labels_))
            sil.append(silhouette(X, m.labels_, random_state=0))
            spent.append(m.privacy_report_.total().epsilon)
        print(f"| {eps:g} | {_mean(a)} | {np.mean(k):.1f} | {_mean(acc)} | {_mean(sil)} | "
              f"{np.mean(spent):.4f} |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=None,
                   help="runs per cell (default: 5 for the uci_htru2 parts, 10 for DPM)")
    p.add_argument("--parts", nargs="*", default=list(PARTS), choices=PARTS)
    p.add_argument("--resolution", default="auto", choices=["auto", "none"])
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    print("command: python benchmarks/plan_utility.py " + " ".join(argv or sys.argv[1:]))
    t0 = time.perf_counter()
    for part in args.parts:
        runs = args.runs or (10 if part.startswith("dpm") else 5)
        if part == "dpm_letter":
            part_dpm_letter(runs, None if args.resolution == "none" else "auto")
        else:
            globals()[f"part_{part}"](runs)
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
