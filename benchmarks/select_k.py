"""Private choice of k: which k :func:`privclust.model_selection.select_n_clusters` picks, and
the ARI of the chosen model, per data set, estimator family and epsilon (median over seeds).

    python benchmarks/select_k.py                                   # everything, 3 seeds
    python benchmarks/select_k.py --sets blobs10 --families lloyd hst --seeds 5
    python benchmarks/select_k.py --data-split                      # also split the data

Sets: Synth-10d (``../shared/data/dpm_synth_10d.npz`` relative to the repository root, with
the public bounds of its ``.json`` sidecar; 64 classes, n = 100,000, d = 10; skipped with a
printed line when absent), ``blobs10`` (``make_blobs(50000, 4, centers=10, cluster_std=2,
center_box=(-50, 50), random_state=7)``, bounds (-60, 60)) and ``blobs25`` (``make_blobs(50000,
20, centers=25, cluster_std=1.5, center_box=(-20, 20), random_state=11)``, bounds (-30, 30)).

Columns: ``k`` the median chosen k; ``ARI`` the median ARI of the chosen model against the
labels; ``best`` the median of the best ARI among the candidates of the same run and ``true-k``
that of the candidate with the true k (evaluation only: reading the labels is not private);
``s`` the median time of the whole selection (every candidate's fit and the selection).

``--data-split`` adds the alternative the selection does not offer: every candidate fitted on
its own part of the data with the whole fit budget (parallel composition). A record's part is
a keyed hash of the record's bytes (a function of the record and a key drawn once, so adding or
removing a record changes one part only); the score and the choice are as in the selection.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import secrets
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from privclust import EMMC, DPLloyd, HSTKMeans, LSHSplits
from privclust.model_selection import select_n_clusters, silhouette_sum
from privclust.privacy import Mechanisms, PrivacyReport, resolve_random_state

ROOT = Path(__file__).resolve().parents[1]
SYNTH = ROOT.parent / "shared" / "data" / "dpm_synth_10d.npz"
SELECTION_SHARE = 0.05

FAMILIES = {
    "lloyd": lambda b: DPLloyd(bounds=b),
    "hst": lambda b: HSTKMeans(bounds=b),
    "emmc": lambda b: EMMC(bounds=b),
    "lsh": lambda b: LSHSplits(bounds=b),
}


def load_set(name):
    """``(X, y, bounds, candidates)`` or None (with a printed line) when the file is absent."""
    if name == "synth_10d":
        if not SYNTH.exists():
            print(f"synth_10d: skipped ({SYNTH} not found)")
            return None
        data = np.load(SYNTH)
        meta = json.loads(SYNTH.with_suffix(".json").read_text())
        return data["X"], data["y"], np.asarray(meta["bounds"], float), \
            [16, 32, 48, 64, 80, 96, 128]
    if name == "blobs10":
        X, y = make_blobs(50_000, 4, centers=10, cluster_std=2.0, center_box=(-50, 50),
                          random_state=7)
        return X, y, (-60.0, 60.0), [4, 6, 8, 10, 12, 16, 20]
    X, y = make_blobs(50_000, 20, centers=25, cluster_std=1.5, center_box=(-20, 20),
                      random_state=11)
    return X, y, (-30.0, 30.0), [10, 15, 20, 25, 30, 40, 50]


def run_budget_split(est, X, y, ks, eps, seed):
    """The selection as privclust offers it: ``(chosen k, ARI, best ARI, true-k ARI, s)``."""
    t = time.perf_counter()
    sel = select_n_clusters(est, X, ks, epsilon=eps, selection_share=SELECTION_SHARE,
                            random_state=seed)
    took = time.perf_counter() - t
    aris = [adjusted_rand_score(y, c.labels_) for c in sel.candidates_]
    true_k = np.unique(y).size
    at_true = aris[ks.index(true_k)] if true_k in ks else float("nan")
    return ks[sel.best_index_], aris[sel.best_index_], max(aris), at_true, took


def _parts(X, m, key):
    """Each record's part: a keyed hash of its bytes (a function of the record alone)."""
    rows = np.ascontiguousarray(X, dtype=np.float64)
    digest = [hashlib.blake2b(r.tobytes(), key=key, digest_size=8).digest() for r in rows]
    return np.frombuffer(b"".join(digest), dtype=np.uint64) % np.uint64(m)


def run_data_split(est, X, y, ks, eps, seed):
    """Every candidate on its own part with the whole fit budget; the same score and choice."""
    t = time.perf_counter()
    source = resolve_random_state(seed)
    part = _parts(X, len(ks), secrets.token_bytes(16))
    fitted = []
    for i, k in enumerate(ks):
        c = clone(est).set_params(n_clusters=k, epsilon=(1 - SELECTION_SHARE) * eps,
                                  random_state=source.generator)
        fitted.append(c.fit(X[part == i]))
    scores = [silhouette_sum(X, c.cluster_centers_, c.bounds_) for c in fitted]
    mech = Mechanisms(source, PrivacyReport("data split", None))
    idx = int(mech.select(scores, 1.0, SELECTION_SHARE * eps, target="the candidate"))
    took = time.perf_counter() - t
    aris = [adjusted_rand_score(y, c.predict(X)) for c in fitted]
    true_k = np.unique(y).size
    at_true = aris[ks.index(true_k)] if true_k in ks else float("nan")
    return ks[idx], aris[idx], max(aris), at_true, took


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=["synth_10d", "blobs10", "blobs25"])
    ap.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 0.5])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--data-split", action="store_true")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")  # clipping warnings: the data holder's diagnostics
    modes = [("budget", run_budget_split)] + ([("data", run_data_split)]
                                              if args.data_split else [])
    print(f"{'set':<10}{'true k':>7} {'family':<7}{'split':<7}{'eps':>5}{'k':>6}{'ARI':>7}"
          f"{'best':>7}{'true-k':>8}{'s':>7}   chosen k per seed")
    for name in args.sets:
        loaded = load_set(name)
        if loaded is None:
            continue
        X, y, bounds, ks = loaded
        for family in args.families:
            for mode, run in modes:
                for eps in args.epsilons:
                    rows = np.array([run(FAMILIES[family](bounds), X, y, ks, eps, s)
                                     for s in range(args.seeds)])
                    med = np.median(rows, axis=0)
                    chosen = ",".join(str(int(k)) for k in rows[:, 0])
                    print(f"{name:<10}{np.unique(y).size:>7} {family:<7}{mode:<7}{eps:>5g}"
                          f"{med[0]:>6g}{med[1]:>7.3f}{med[2]:>7.3f}{med[3]:>8.3f}"
                          f"{med[4]:>7.2f}   {chosen}", flush=True)


if __name__ == "__main__":
    main()
