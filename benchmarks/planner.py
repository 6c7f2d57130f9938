"""The planner's predictions against measured fits (median of 5 seeds).

    python benchmarks/planner.py                       # every part, epsilon 0.1 .. 2
    python benchmarks/planner.py --parts synth --figure planner.png

Parts:

* ``synth``: DPM (default parameters) on Synth-10d (``make_blobs(100000, 10, centers=64,
  center_box=(-100, 100), random_state=42)``, bounds (-100, 100)), ``expected_clusters=64``:
  predicted vs observed clusters and levels. Target: predicted clusters within 20% of the
  observed median at every epsilon.
* ``letter``: DPM on ``uci_letter`` (bounds (0, 15), 26 letters expected); skipped when the
  data set is not installed.
* ``dbscan``: DPDBSCAN on the DP-DBSCAN sets with their (radius, MinPts) from
  ``benchmarks/dbscan.py``: the predicted core threshold and clusters vs the observed core
  cells and clusters.

The planner never sees the data: it is given n, d, the bounds, epsilon and the parameters.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import make_blobs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dbscan import SETS  # noqa: E402
from privclust import DPDBSCAN, DPM  # noqa: E402
from privclust.datasets import DatasetNotFoundError, load  # noqa: E402
from privclust.planner import plan  # noqa: E402

EPSILONS = (0.1, 0.25, 0.5, 1.0, 2.0)
SEEDS = range(5)


def _quiet_fit(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X)


def dpm_rows(name, X, bounds, k, epsilons):
    """Rows (set, epsilon, predicted clusters, observed median, levels pred/obs, ratio)."""
    rows = []
    n, d = X.shape
    for eps in epsilons:
        fp = plan(DPM(epsilon=eps, bounds=bounds), n, d=d, expected_clusters=k)
        ks, lv = [], []
        for s in SEEDS:
            m = _quiet_fit(DPM(epsilon=eps, bounds=bounds, random_state=s), X)
            ks.append(m.n_clusters_)
            lv.append(max(m.split_tree_.depth))
        obs = statistics.median(ks)
        rows.append((name, eps, fp.expected_clusters, obs, fp.expected_levels,
                     statistics.median(lv), fp.expected_clusters / obs - 1.0))
    return rows


def part_synth(epsilons):
    X, _ = make_blobs(100000, 10, centers=64, center_box=(-100, 100), random_state=42)
    return dpm_rows("Synth-10d", X, (-100, 100), 64, epsilons)


def part_letter(epsilons):
    try:
        ds = load("uci_letter")
    except (DatasetNotFoundError, FileNotFoundError, OSError) as exc:
        print(f"\n(uci_letter skipped: {exc})")
        return []
    return dpm_rows("uci_letter", np.asarray(ds.X, float), (0, 15), 26, epsilons)


def print_dpm(rows):
    print("\n## DPM: predicted vs observed (median of 5 seeds)")
    print("| set | epsilon | clusters predicted | clusters observed | levels predicted "
          "| levels observed | off by |\n|---|---|---|---|---|---|---|")
    for name, eps, pk, ok, pl, ol, off in rows:
        print(f"| {name} | {eps:g} | {pk:.1f} | {ok:g} | {pl} | {ol:g} | {100 * off:+.0f}% |")


def part_dbscan(epsilons):
    rows = []
    for name, (alpha, mp) in SETS.items():
        try:
            ds = load(name)
        except (DatasetNotFoundError, FileNotFoundError, OSError) as exc:
            print(f"\n({name} skipped: {exc})")
            continue
        X = np.asarray(ds.X, float)
        k_true = int(np.unique(ds.y[ds.y >= 0]).size) if ds.y is not None else None
        for eps in epsilons:
            est = DPDBSCAN(epsilon=eps, eps=alpha, min_samples=mp, bounds=ds.bounds)
            fp = plan(est, X.shape[0], d=X.shape[1], expected_clusters=k_true)
            cores, ks = [], []
            for s in SEEDS:
                m = _quiet_fit(est.set_params(random_state=s), X)
                cores.append(len(m.span_cells_))
                ks.append(m.n_clusters_)
            rows.append((name, eps, fp.min_dense_window, fp.core_threshold, fp.max_core_cells,
                         statistics.median(cores), fp.expected_clusters, k_true,
                         statistics.median(ks)))
    print("\n## DPDBSCAN: predicted vs observed (median of 5 seeds)")
    print("| set | epsilon | MinPts' (window) | core threshold | core cells at most | "
          "core cells observed | clusters predicted | true | observed |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:g} | {r[2]:.1f} | {r[3]:.1f} | {r[4]} | {r[5]:g} | "
              f"{r[6]:.0f} | {r[7]} | {r[8]:g} |")
    return rows


def figure(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for name in dict.fromkeys(r[0] for r in rows):
        sel = [r for r in rows if r[0] == name]
        line = ax.plot([r[1] for r in sel], [r[2] for r in sel], marker="o",
                       label=f"{name} predicted")[0]
        ax.plot([r[1] for r in sel], [r[3] for r in sel], "x", color=line.get_color(),
                markersize=9, label=f"{name} observed (median of 5)")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("DPM clusters")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"\nfigure: {path}")


def main(argv=None):
    """Run the parts asked for and print their tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", nargs="+", default=["synth", "letter", "dbscan"],
                    choices=["synth", "letter", "dbscan"])
    ap.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    ap.add_argument("--figure", help="save the DPM figure here (PNG)")
    args = ap.parse_args(argv)
    rows = []
    if "synth" in args.parts:
        rows += part_synth(args.epsilons)
    if "letter" in args.parts:
        rows += part_letter(args.epsilons)
    if rows:
        print_dpm(rows)
        synth = [r for r in rows if r[0] == "Synth-10d"]
        if synth:
            ok = all(abs(r[6]) <= 0.2 for r in synth)
            verdict = "met" if ok else "MISSED"
            print(f"\ntarget (Synth-10d within +-20% at every epsilon): {verdict}")
    if "dbscan" in args.parts:
        part_dbscan(args.epsilons)
    if args.figure and rows:
        figure(rows, args.figure)


if __name__ == "__main__":
    main()
