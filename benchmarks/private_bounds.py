"""Private bounds at epsilon 0.1 (a fit at epsilon 1 with ``bounds="private"``): do they run,
how much do they clip, how loose are they, and what do they cost a clustering.

    python benchmarks/private_bounds.py                  # 10 seeds, 3 clustering seeds
    python benchmarks/private_bounds.py --seeds 20 --fit-seeds 5 --sets uci_letter
    python benchmarks/private_bounds.py --small --seeds 20  # small sets at epsilon 0.025 .. 0.1

Table 1, per data set: how many of the seeds ran (the others were refused with one sentence),
the share of records outside the bounds (median and max over seeds), the bounds' width over the
data's true range (median over features, then median and 90th percentile over seeds; constant
features left out), and the median time. Sets: scikit-learn's iris, wine, breast cancer and
digits, breast cancer repeated 50 times (28,450 x 30: features on scales from 0.001 to 4,000),
generated sets at the smallest target sizes (10,000 x 40 and 2,000 x 4: features on scales
0.01 .. 1,000, near 1000, Student t with 3 degrees of freedom, constant, negative, integer
codes, uniform, all zero), and ``uci_letter``, ``uci_gas_turbine`` and ``mnist_emb40`` from
``../shared/data`` (skipped with a line when absent). ``--small``: table 1 only, for the small
sets of Gagolewski's battery in ``../shared/data`` at epsilon 0.025, 0.05 and 0.1 for the bounds
(the bounds of fits at epsilon 0.25, 0.5 and 1 with ``bounds="private"``).

Table 2, the shared sets: ``DPLloyd(k, epsilon=0.9)`` with the private bounds against
``DPLloyd(k, epsilon=0.9)`` with the sidecar's public bounds: mean ARI where the set has labels,
and the k-means cost of the centres over the records (mean squared distance to the nearest
centre) in every case, with its ratio private / public.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
from sklearn import datasets as sk_datasets
from sklearn.metrics import adjusted_rand_score

from privclust import DPLloyd, datasets, private_bounds

EPSILON = 0.1
SHARED = ("uci_letter", "uci_gas_turbine", "mnist_emb40")
SMALL = ("sipu_a1", "sipu_a2", "sipu_s2", "sipu_s4", "fcps_engytime", "other_hdbscan", "wut_graph")
SMALL_EPSILONS = (0.025, 0.05, 0.1)


def _generated(n, d, seed):
    """Features on scales 0.01 .. 1000, near 1000, heavy-tailed, constant, negative, codes."""
    rng = np.random.default_rng(seed)
    kinds = [
        lambda s: rng.normal(size=n) * s,
        lambda s: 1000 + rng.normal(size=n),
        lambda s: rng.standard_t(3, size=n) * s,
        lambda s: np.full(n, 3.7),
        lambda s: -s * (5 + rng.exponential(size=n)),
        lambda s: rng.integers(0, 7, size=n).astype(float),
        lambda s: rng.uniform(0, 1, size=n) * s,
        lambda s: np.zeros(n),
    ]
    return np.column_stack([kinds[j % len(kinds)](10 ** rng.uniform(-2, 3)) for j in range(d)])


def _sets(shared: bool):
    """(name, X, y, public bounds or None, k) for every set that loads."""
    out = []
    for name, loader in [("iris", sk_datasets.load_iris), ("wine", sk_datasets.load_wine),
                         ("breast cancer", sk_datasets.load_breast_cancer),
                         ("digits", sk_datasets.load_digits)]:
        X, y = loader(return_X_y=True)
        out.append((name, X.astype(float), y, None, 0))
    X, y = sk_datasets.load_breast_cancer(return_X_y=True)
    out.append(("breast cancer x50", np.tile(X, (50, 1)), np.tile(y, 50), None, 0))
    out.append(("generated 10,000 x 40", _generated(10_000, 40, 0), None, None, 0))
    out.append(("generated 2,000 x 4", _generated(2_000, 4, 1), None, None, 0))
    for name in SHARED if shared else ():
        try:
            ds = datasets.load(name)
        except datasets.DatasetNotFoundError as exc:
            print(f"(skipping {name}: {str(exc).splitlines()[0]})")
            continue
        k = 2 if ds.y is None or len(np.unique(ds.y)) < 2 else len(np.unique(ds.y))
        out.append((name, np.asarray(ds.X, float), ds.y, np.asarray(ds.bounds, float), k))
    return out


def _row(name, X, seeds, epsilon=EPSILON):
    ran, outside, widths, times, found = 0, [], [], [], []
    true = X.max(axis=0) - X.min(axis=0)
    for seed in range(seeds):
        start = time.perf_counter()
        try:
            b = private_bounds(X, epsilon, random_state=seed).bounds
        except ValueError as exc:
            message = str(exc)
            continue
        times.append(time.perf_counter() - start)
        ran += 1
        found.append(b)
        outside.append(100 * float(((X < b[:, 0]) | (X > b[:, 1])).any(axis=1).mean()))
        widths.append(float(np.median(((b[:, 1] - b[:, 0]) / true)[true > 0])))
    n, d = X.shape
    if not ran:
        print(f"| {name} | {n:,} x {d} | 0 / {seeds}: {message} | | | |")
        return found
    print(f"| {name} | {n:,} x {d} | {ran} / {seeds} | {statistics.median(outside):.2f}% / "
          f"{max(outside):.2f}% | {statistics.median(widths):.2f} / "
          f"{np.quantile(widths, 0.9):.2f} | {statistics.median(times):.3f} s |", flush=True)
    return found


def _cost(X, centres):
    nearest = np.full(X.shape[0], np.inf)
    for c in centres:
        nearest = np.minimum(nearest, ((X - c) ** 2).sum(axis=1))
    return float(nearest.mean())


def _clustering(name, X, y, public, k, found, fit_seeds):
    rows = {"public": [], "private": []}
    for seed in range(fit_seeds):
        for way, bounds in (("public", public), ("private", found[seed % len(found)])):
            model = DPLloyd(k, epsilon=0.9, bounds=bounds, random_state=seed).fit(X)
            ari = adjusted_rand_score(y, model.labels_) if y is not None else float("nan")
            rows[way].append((ari, _cost(X, model.cluster_centers_)))
    pub, priv = (np.array(rows[w]) for w in ("public", "private"))
    ari = ("-" if y is None else
           f"{np.mean(priv[:, 0]):.3f} vs {np.mean(pub[:, 0]):.3f}")
    print(f"| {name} | {k} | {ari} | {np.median(priv[:, 1]):.4g} vs {np.median(pub[:, 1]):.4g} "
          f"| {np.median(priv[:, 1]) / np.median(pub[:, 1]):.2f} |", flush=True)


def _small(seeds, only):
    """Table 1 for the small sets at each of SMALL_EPSILONS."""
    print("\n### private bounds on small sets\n")
    print("| set @ epsilon | n x d | ran | outside the bounds (median / max) | width / true range "
          "(median / p90) | time (median) |")
    print("|---|---|---|---|---|---|")
    for name in SMALL:
        if only is not None and name not in only:
            continue
        try:
            X = np.asarray(datasets.load(name).X, float)
        except datasets.DatasetNotFoundError as exc:
            print(f"(skipping {name}: {str(exc).splitlines()[0]})")
            continue
        for eps in SMALL_EPSILONS:
            _row(f"{name} @ {eps:g}", X, seeds, eps)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=10, help="private bounds seeds (default 10)")
    p.add_argument("--fit-seeds", type=int, default=3, help="DPLloyd seeds (default 3)")
    p.add_argument("--sets", nargs="*", default=None, help="only these sets (names as shown)")
    p.add_argument("--small", action="store_true",
                   help="table 1 for the small sets at epsilon 0.025 .. 0.1 instead")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")  # clipping warnings: the data holder's diagnostics
    if args.small:
        _small(args.seeds, args.sets)
        return
    sets = [s for s in _sets(shared=True) if args.sets is None or s[0] in args.sets]
    print(f"\n### private bounds at epsilon {EPSILON:g}\n")
    print("| set | n x d | ran | outside the bounds (median / max) | width / true range "
          "(median / p90) | time (median) |")
    print("|---|---|---|---|---|---|")
    found = {name: _row(name, X, args.seeds) for name, X, *_ in sets}
    shared = [s for s in sets if s[3] is not None and found[s[0]]]
    if not shared:
        return
    print("\n### DPLloyd(k, epsilon=0.9): private bounds vs the sidecar's public bounds\n")
    print("| set | k | ARI (private vs public) | k-means cost (private vs public) | ratio |")
    print("|---|---|---|---|---|")
    for name, X, y, public, k in shared:
        _clustering(name, X, y, public, k, found[name], args.fit_seeds)


if __name__ == "__main__":
    main()
