"""The choice of k seen from inside: every candidate the default scores without k, beside the
true clusters and a few other per-record scores.

    python benchmarks/no_k_candidates.py                       # gen_unequal10_5d, epsilon 1
    python benchmarks/no_k_candidates.py --set gen_unequal10_5d --epsilon 0.5 --seeds 3
    python benchmarks/no_k_candidates.py --ratios 3 5 --clip 400 8000

For each seed, ``CoresetKMeans(epsilon=e, bounds="private", random_state=s)`` without
``n_clusters`` is fitted with the choice's scoring wrapped (nothing else changes), and for every
candidate of at most ``--max-k`` centres it prints: the true clusters it holds (a class mean within
``--near`` of one of its centres), the ARI of the records' nearest centres, its k-means cost over
non-private ``KMeans(true k, n_init=10, random_state=0)``, the score the exponential mechanism was
given (the Poisson sample's sum), and on every record (non-private, for comparison only): the
simplified silhouette with the centres' expected noise taken off, the capped margin ``min(1, (b -
a) / ((r - 1) a))`` for each ``--ratios`` r, and the clipped cost gain ``sum 1 - min(d^2, B) / B``
for each ``--clip`` B. Then the true clusters' mean silhouette at a few k (``--per-class``).
A diagnosis, not a release: it reads the labels.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.cluster import KMeans

import privclust.cluster.coreset as coreset_module
from privclust.cluster import CoresetKMeans
from privclust.datasets import load
from privclust.metrics import ari


def _scores(X, C, noise2, ratios, clips):
    d2 = ((X[:, None, :] - C[None]) ** 2).sum(axis=2)
    near = d2.min(axis=1)
    off = np.sort(np.maximum(d2 - np.asarray(noise2)[None], 0.0), axis=1)
    a, b = np.sqrt(off[:, 0]), np.sqrt(off[:, 1])
    with np.errstate(invalid="ignore", divide="ignore"):
        sil = np.where(b > 0, (b - a) / b, 0.0)
        margins = [np.clip(np.where(a > 0, (b - a) / ((r - 1) * a), np.where(b > 0, 1, 0)), 0, 1)
                   for r in ratios]
    clipped = [(1 - np.minimum(near, c) / c).sum() for c in clips]
    return near, sil, [m.sum() for m in margins], clipped


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--set", default="gen_unequal10_5d")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--max-k", type=int, default=16)
    p.add_argument("--near", type=float, default=12.0)
    p.add_argument("--ratios", type=float, nargs="*", default=[3.0, 5.0])
    p.add_argument("--clip", type=float, nargs="*", default=[8000.0])
    p.add_argument("--per-class", type=int, nargs="*", default=[6, 8, 9, 10])
    args = p.parse_args()
    ds = load(args.set)
    X, y = np.asarray(ds.X, dtype=np.float64), np.asarray(ds.y)
    classes = np.unique(y)
    means = np.array([X[y == c].mean(axis=0) for c in classes])
    base = KMeans(len(classes), n_init=10, random_state=0).fit(X).inertia_
    print(f"{args.set}: n {X.shape[0]}, class sizes {np.bincount(np.searchsorted(classes, y))}")
    seen = {}
    inner = coreset_module.sample_scores

    def wrapped(Z, rate, gen, cands, P, noise2):
        s = inner(Z, rate, gen, cands, P, noise2)
        seen.update(cands=cands, noise2=noise2, scores=s, rate=rate)
        return s

    coreset_module.sample_scores = wrapped
    for seed in range(args.seeds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = CoresetKMeans(epsilon=args.epsilon, bounds="private", random_state=seed).fit(X)
        print(f"\nseed {seed}: chose k {fit.n_clusters_} (sample rate {seen['rate']:.3g}), "
              f"ARI {ari(y, fit.labels_):.3f}, coreset {fit.coreset_.shape[0]} leaves")
        head = " ".join([f"margin r{r:g}" for r in args.ratios] + [f"clip {c:g}" for c in
                                                                      args.clip])
        print(f"   k held   ARI  cost   score(EM)  silhouette {head}")
        per_class = {}
        for C, n2, score in zip(seen["cands"], seen["noise2"], seen["scores"], strict=True):
            k = C.shape[0]
            if k > args.max_k:
                continue
            near, sil, margins, clipped = _scores(X, C, n2, args.ratios, args.clip)
            held = int((np.sqrt(((means[:, None] - C[None]) ** 2).sum(2)).min(1)
                        < args.near).sum())
            agree = ari(y, ((X[:, None, :] - C[None]) ** 2).sum(axis=2).argmin(axis=1))
            cells = " ".join(f"{v:11.0f}" for v in [*margins, *clipped])
            print(f"  {k:3d} {held:4d} {agree:5.3f} {near.sum() / base:6.2f} {score:10.0f} "
                  f"{sil.sum():11.0f} {cells}")
            if k in args.per_class:
                per_class[k] = [sil[y == c].mean() for c in classes]
        for k, row in per_class.items():
            print(f"  mean silhouette per class at k {k}: {np.round(row, 3)}")
    coreset_module.sample_scores = inner


if __name__ == "__main__":
    main()
