"""How unequal the split step's seed sizes are around each refined point, released and exact.

On a thin coreset without k, CoresetKMeans's split step gives every refined point ``2 d`` seeds
(``privclust.cluster._coreset.split``) and releases each seed's noisy size. A refined point
that is the mean of separate clusters should give its seeds unequal sizes (the seeds along the
axis that parts them get most records), a piece of one wide cluster about equal ones. This
script measures that imbalance per fit, from the released sizes (what a post-processing rule
could use) and from the exact counts of the same seeds' cells (what the data holds), and
prints each cell's median [10th, 90th percentile] over the seeds, and for two groups of cells
(``--many``: many small clusters; ``--wide``: few wide ones) the AUC: the chance that a fit of
the first group scores above one of the second (0.5: no separation, 1: complete).

Statistics, per fit (``N_ij``: the sizes of point i's seeds, ``s2``: the variance of the
sizes' two-sided geometric noise, public):

- ``cv``: the size-weighted mean over the refined points of the coefficient of variation of
  their seeds' sizes (released sizes, negative ones as 0);
- ``cv2``: the pooled squared coefficient of variation with the noise taken off,
  ``sum_i [sum_j (N_ij - mean_i)^2 - (2d - 1) s2] / sum_i [2d mean_i^2 - s2]`` (an unbiased
  ratio of sums; ``s2 = 0`` for the exact counts);
- ``spread``: the size-weighted mean over the refined points of the spread (root mean square
  distance) of their seeds' centroids (noisy sums / noisy sizes, as released) about their
  weighted mean, in the point's ball radius;
- ``scales``: the seeds' mean noisy size in noise scales (``1 / eps``) of the split step's
  count: how much of a seed's size is noise.

``--rule T`` also fits every seed with a split step at two more values of the split points'
cap (``SPLIT_SUPPORT_SCALES``: 1.0 and 2.0) and prints each cell's mean ARI without k at
today's value and under the rule "2.0 where the released ``cv`` is below T, else 1.0"
(post-processing: the releases are the same at every cap).

Usage::

    PYTHONPATH=src PRIVCLUST_DATA=/path/to/data \
        python benchmarks/split_imbalance.py --seeds 40 [--first-seed 40] [--rule 0.69]
"""

from __future__ import annotations

import argparse
import contextlib
import warnings

import numpy as np

from privclust import CoresetKMeans, datasets

CELLS = ["sipu_a1@0.5", "sipu_a2@0.25", "sipu_a2@0.5", "sipu_s2@0.25", "sipu_s4@0.25",
         "wut_graph@1", "wut_graph@0.5", "fcps_engytime@1", "fcps_engytime@0.5",
         "other_hdbscan@1"]
MANY = ["sipu_a1@0.5", "sipu_a2@0.25", "sipu_a2@0.5"]
WIDE = ["fcps_engytime@1", "fcps_engytime@0.5", "other_hdbscan@1"]


@contextlib.contextmanager
def capture():
    """Wrap the split step's release; yields a dict that holds the last split step's seeds,
    radii, noisy sizes, centroids and count epsilon (empty when the fit ran none)."""
    import privclust.cluster._coreset.split as split

    seen: dict = {}
    inner = split.ball_step

    def wrapped(engine, mech, labels, anchors, radius, epsilon, **kw):
        out = inner(engine, mech, labels, anchors, radius, epsilon, **kw)
        seen.update(seeds=np.array(anchors, dtype=float), radius=np.array(radius, dtype=float),
                    sizes=np.array(out[1], dtype=float), eps=float(kw["eps_count"]),
                    centroids=np.array(out[0], dtype=float))
        return out

    split.ball_step = wrapped
    try:
        yield seen
    finally:
        split.ball_step = inner


def _cells(X, seeds, radius):
    """Each record's nearest seed, and whether it lies within that seed's radius."""
    d2 = (np.einsum("ij,ij->i", X, X)[:, None] - 2.0 * X @ seeds.T
          + np.einsum("ij,ij->i", seeds, seeds)[None, :])
    lab = np.argmin(d2, axis=1)
    return lab, d2[np.arange(X.shape[0]), lab] <= radius[lab] ** 2


def exact_sizes(X, seeds, radius):
    """The exact number of records nearest each seed and within its radius (the released
    sizes without their noise)."""
    lab, inside = _cells(X, seeds, radius)
    return np.bincount(lab[inside], minlength=seeds.shape[0]).astype(float)


def exact_centroids(X, seeds, radius):
    """The exact mean of the records of each seed's cell (the seed where it has none)."""
    lab, inside = _cells(X, seeds, radius)
    n = np.bincount(lab[inside], minlength=seeds.shape[0])
    sums = np.stack([np.bincount(lab[inside], weights=X[inside, j], minlength=seeds.shape[0])
                     for j in range(X.shape[1])], axis=1)
    return np.where((n > 0)[:, None], sums / np.maximum(n, 1)[:, None], seeds)


def imbalance(sizes, d, s2):
    """``(cv, cv2)`` of the module docstring from the seeds' sizes (2 d per refined point, in
    order) and the noise variance ``s2``."""
    N = np.asarray(sizes, dtype=float).reshape(-1, 2 * d)
    pos = np.maximum(N, 0.0)
    tot = pos.sum(axis=1)
    cv = pos.std(axis=1) / np.maximum(tot / (2 * d), 1e-12)
    mean = N.mean(axis=1)
    ss = ((N - mean[:, None]) ** 2).sum(axis=1)
    cv2 = (ss.sum() - N.shape[0] * (2 * d - 1) * s2) / max(
        (2 * d * mean ** 2).sum() - N.shape[0] * s2, 1e-12)
    return float(np.sum(tot * cv) / max(tot.sum(), 1e-12)), float(cv2)


def spread(centroids, sizes, radius, d):
    """``spread`` of the module docstring from the seeds' centroids, sizes and radii."""
    N = np.maximum(np.asarray(sizes, dtype=float), 0.0).reshape(-1, 2 * d)
    C = np.asarray(centroids, dtype=float).reshape(N.shape[0], 2 * d, d)
    tot = np.maximum(N.sum(axis=1), 1e-12)
    mean = np.einsum("ij,ijk->ik", N, C) / tot[:, None]
    ss = np.einsum("ij,ij->i", N, ((C - mean[:, None, :]) ** 2).sum(axis=2)) / tot
    per = np.sqrt(ss) / np.asarray(radius, dtype=float).reshape(-1, 2 * d)[:, 0]
    return float(np.sum(tot * per) / tot.sum())


def fit_ari(X, y, eps, seed, cap=None):
    """The ARI without k at one seed, the split points' cap at ``cap`` (None: today's)."""
    import privclust.cluster._coreset.split as split
    from privclust.metrics import ari

    today = split.SPLIT_SUPPORT_SCALES
    split.SPLIT_SUPPORT_SCALES = today if cap is None else cap
    try:
        model = CoresetKMeans(epsilon=eps, bounds="private", random_state=seed).fit(X)
    finally:
        split.SPLIT_SUPPORT_SCALES = today
    return ari(y, model.labels_)


def measure(cell, seeds, rule=None, first=0):
    """Per fit with a split step: released cv, cv2, exact cv, cv2, released spread, exact
    spread, the noise scales; with ``rule``, the ARI at today's cap and under the rule."""
    name, eps = cell.split("@")
    data = datasets.load(name)
    X, y, eps = np.asarray(data.X, dtype=float), np.asarray(data.y), float(eps)
    rows = []
    for seed in range(first, first + seeds):
        with capture() as seen:
            try:
                today = fit_ari(X, y, eps, seed)
            except ValueError:  # too few records for private bounds at this epsilon
                continue
        if not seen:
            continue
        d, e = X.shape[1], seen["eps"]
        q = np.exp(-e)
        s2 = 2.0 * q / (1.0 - q) ** 2
        exact = exact_sizes(X, seen["seeds"], seen["radius"])
        row = [*imbalance(seen["sizes"], d, s2), *imbalance(exact, d, 0.0),
               spread(seen["centroids"], seen["sizes"], seen["radius"], d),
               spread(exact_centroids(X, seen["seeds"], seen["radius"]), exact,
                      seen["radius"], d), float(np.mean(seen["sizes"]) * e)]
        if rule is not None:
            row += [today, fit_ari(X, y, eps, seed, 2.0 if row[0] < rule else 1.0)]
        rows.append(row)
    return np.array(rows).reshape(-1, 7 if rule is None else 9)


def auc(a, b) -> float:
    """The chance that a value of ``a`` exceeds one of ``b`` (ties count half)."""
    a, b = np.asarray(a)[:, None], np.asarray(b)[None, :]
    return float(np.mean(a > b) + 0.5 * np.mean(a == b))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--cells", nargs="+", default=CELLS, help="name@epsilon")
    parser.add_argument("--many", nargs="+", default=MANY)
    parser.add_argument("--wide", nargs="+", default=WIDE)
    parser.add_argument("--rule", type=float, default=None, help="cv threshold (see above)")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    names = ["released cv", "released cv2", "exact cv", "exact cv2", "released spread",
             "exact spread", "scales"]
    print(f"{'cell':20s} {'fits':>4s}" + "".join(f"{n:>22s}" for n in names))
    got = {}
    for cell in dict.fromkeys([*args.cells, *args.many, *args.wide]):
        got[cell] = v = measure(cell, args.seeds, args.rule, args.first_seed)
        if not v.shape[0]:
            print(f"{cell:20s} {0:4d}  (no fit ran a split step)")
            continue
        print(f"{cell:20s} {v.shape[0]:4d}" + "".join(
            f"{np.median(v[:, j]):9.2f} [{np.percentile(v[:, j], 10):5.2f},"
            f"{np.percentile(v[:, j], 90):5.2f}]" for j in range(7)), flush=True)
        if args.rule is not None:
            gain = v[:, 8] - v[:, 7]
            print(f"{'':25s}ARI over these fits: today {v[:, 7].mean():.3f}, rule "
                  f"{v[:, 8].mean():.3f} ({gain.mean():+.3f} +- "
                  f"{gain.std() / np.sqrt(len(gain)):.3f})", flush=True)
    many = np.vstack([got[c] for c in args.many])
    wide = np.vstack([got[c] for c in args.wide])
    print("AUC (--many above --wide): " + ", ".join(
        f"{n} {auc(many[:, j], wide[:, j]):.2f}" for j, n in enumerate(names[:6])))


if __name__ == "__main__":
    main()
