"""The choice of k without k, judged candidate by candidate: what the default's candidates could
reach, what its score picks, and what other per-record scores would pick from the same candidates.

    python benchmarks/no_k_choice.py                                  # the failing cells
    python benchmarks/no_k_choice.py --cells sipu_a1:0.5 fcps_engytime:0.5 --seeds 3

For every cell (set and epsilon) and seed, ``CoresetKMeans(epsilon=e, bounds="private",
random_state=s)`` is fitted without ``n_clusters`` with the choice's scoring wrapped (nothing else
changes). For each candidate the ARI of the records' nearest centres is measured; each score then
gives the exponential mechanism's probabilities at the fit's own epsilon of the choice
(``exp(eps_select * (score - max))``, monotone scores), and the line prints, averaged over the
seeds, the ARI that choice reaches in expectation ("E[ARI]"), beside the best candidate's ARI and
the fitted model's ARI (after its Lloyd step). Scores, each a sum over the records the default
scores (non-private here: a diagnosis, it reads the labels):

* ``sil``: the default's simplified silhouette (the sums the fit gave the mechanism);
* ``sil^p``: the silhouette raised to the power p (``--powers``);
* ``sil+ball``: ``(1 - l) * sil + l * [a <= r]`` for each ``--ball`` l, ``a`` the (noise-corrected)
  distance of the record to its nearest centre and ``r`` the coreset step's ball radius of the
  refined point nearest the record (public);
* ``prior``: the silhouette with a public prior ``k^beta`` on the candidates (``--betas``);
* ``noise x f``: the silhouette with ``f`` times the centres' expected squared noise taken off
  the squared distances (the default takes it once; ``--noise-off``);
* ``bic``: a spherical Gaussian mixture's BIC, each candidate cluster's weight and variance
  from the refined points nearest its centre (their noisy sizes, their spread about the centre,
  their cells' spread and the centre's noise), each record's log density clipped to a public
  range (from the uniform density on the bounds to the narrowest component's peak) and scaled
  to ``[0, 1]``, less ``(params / 2) log N`` on the same scale;
* ``gap c``: ``-sum t(x) - c (N / d) log k / L`` for each ``--gap`` c, ``t(x)`` the record's log
  distance to its nearest centre (noise taken off) clipped to the ``L = ln 1024`` below the
  bounds' half-diagonal and scaled to ``[0, 1]`` (``c = 1``: the gap statistic's expectation on
  a uniform reference);
* ``mix l:c``: ``(1 - l) sil + l (N + gap c)`` for each ``--mix`` (both terms per record in
  ``[0, 1]``).

With ``--ceiling`` a last column gives the criterion's own ARI without privacy: scikit-learn's
``KMeans(k, n_init=10, random_state=0)`` for every k from 2 to twice the classes, the k of the
highest mean simplified silhouette over the records, and the ARI there (minutes on the larger
sets: one fit per k). The documentation's
"Choices by measurement" (``docs/estimators/coreset.md``) quotes what this prints.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from scipy.spatial import cKDTree
from scipy.special import logsumexp

import privclust.cluster.coreset as coreset_module
from _criterion import criterion_k
from privclust import CoresetKMeans, datasets
from privclust.metrics import ari

CELLS = ["sipu_a1:0.5", "sipu_a2:0.25", "other_hdbscan:1", "fcps_engytime:0.5",
         "fcps_engytime:1", "sipu_s4:0.25", "wut_graph:1", "sipu_a1:1", "gen_unequal10_5d:1"]


def _capture(X, epsilon, seed):
    """Fit without k, keeping what the choice saw: candidates, their noise, scores, rate, the
    choice's epsilon, the refined points and their ball radii."""
    cap = {}
    scores_fn, choose, radius_fn = (coreset_module.sample_scores,
                                    coreset_module.CoresetKMeans._choose,
                                    coreset_module.point_radius)

    def scores(engine, rate, gen, cands, anchors=None, noise2=None):
        out = scores_fn(engine, rate, gen, cands, anchors, noise2)
        cap.update(rate=rate, cands=cands, anchors=anchors, noise2=noise2, scores=out)
        return out

    def chosen(Z, box, P, sizes, k_user, *rest, var=None, split=None):
        mech = rest[-1]
        cap.update(box=np.asarray(box), points=P.copy(), sizes=np.asarray(sizes, dtype=float))
        cap["eps_select"] = mech.plan.item(coreset_module._ITEM_SELECT).epsilon
        out = choose(Z, box, P, sizes, k_user, *rest, var=var, split=split)
        cap["ks"] = out[2]
        return out

    def radius(*args, **kwargs):
        out = radius_fn(*args, **kwargs)
        cap["radius"] = np.asarray(out).copy()
        return out

    coreset_module.sample_scores = scores
    coreset_module.CoresetKMeans._choose = staticmethod(chosen)
    coreset_module.point_radius = radius
    try:
        model = CoresetKMeans(epsilon=epsilon, bounds="private", random_state=seed).fit(X)
    finally:
        coreset_module.sample_scores = scores_fn
        coreset_module.CoresetKMeans._choose = staticmethod(choose)
        coreset_module.point_radius = radius_fn
    return model, cap


def _expected(scores, eps, values, log_prior=0.0):
    z = eps * (np.asarray(scores, dtype=float) - np.max(scores)) + log_prior
    p = np.exp(z - np.max(z))
    return float(p @ np.asarray(values) / p.sum())


def _distances(Xs, C, noise2):
    dist, j = cKDTree(C).query(Xs, k=2)
    d2 = np.sort(np.maximum(dist**2 - np.asarray(noise2)[j], 0.0), axis=1)
    return np.sqrt(d2[:, 0]), np.sqrt(d2[:, 1])


def _cell(X, y, epsilon, seed, args):
    """One seed: the columns' values (final ARI, best candidate, E[ARI] per score)."""
    model, cap = _capture(X, epsilon, seed)
    row = {"fit": ari(y, model.labels_)}
    if not cap.get("ks"):
        return row
    cands, ks = cap["cands"], np.asarray(cap["ks"], dtype=float)
    values = [ari(y, cKDTree(C).query(X)[1]) for C in cands]
    row["best"] = max(values)
    eps = cap["eps_select"]
    rng = np.random.default_rng(seed)  # a sample of the same rate (not the fit's own sample)
    Xs = X if cap["rate"] >= 1 else X[rng.random(X.shape[0]) < cap["rate"]]
    noise2 = cap["noise2"] or [np.zeros(len(C)) for C in cands]
    ab = [_distances(Xs, C, n2) for C, n2 in zip(cands, noise2, strict=True)]
    with np.errstate(invalid="ignore", divide="ignore"):
        sil = [np.where(b > 0, (b - a) / b, 0.0) for a, b in ab]
    row["sil"] = _expected(cap["scores"], eps, values)
    for pw in args.powers:
        row[f"sil^{pw:g}"] = _expected([(s**pw).sum() for s in sil], eps, values)
    anchors = cap["anchors"] if cap["anchors"] is not None else cands[-1]
    if cap.get("radius") is not None and cap["radius"].shape[0] == anchors.shape[0]:
        r = cap["radius"][cKDTree(anchors).query(Xs)[1]]
        for lam in args.ball:
            mixed = [(1 - lam) * s.sum() + lam * (a <= r).sum()
                     for s, (a, _) in zip(sil, ab, strict=True)]
            row[f"sil+ball {lam:g}"] = _expected(mixed, eps, values)
    for beta in args.betas:
        row[f"prior k^{beta:g}"] = _expected(cap["scores"], eps, values, beta * np.log(ks))
    if cap["noise2"]:
        for f in args.noise_off:
            ab_f = [_distances(Xs, C, f * np.asarray(n2)) for C, n2 in zip(cands, noise2,
                                                                           strict=True)]
            with np.errstate(invalid="ignore", divide="ignore"):
                sums = [np.where(b > 0, (b - a) / b, 0.0).sum() for a, b in ab_f]
            row[f"noise x{f:g}"] = _expected(sums, eps, values)
    anchors_ok = cap.get("radius") is not None and cap["radius"].shape[0] == anchors.shape[0]
    if cap["noise2"] and anchors_ok and cap["points"].shape == anchors.shape:
        row["bic"] = _expected(_bic(Xs, cap, cands, noise2), eps, values)
    for c in args.gap:
        row[f"gap {c:g}"] = _expected(_gap(Xs, cap["box"], cands, noise2, ks, c), eps, values)
    for mix in args.mix:
        lam, c = (float(v) for v in mix.split(":"))
        gap = np.asarray(_gap(Xs, cap["box"], cands, noise2, ks, c)) + Xs.shape[0]
        mixed = (1 - lam) * np.array([x.sum() for x in sil]) + lam * gap
        row[f"mix {mix}"] = _expected(mixed, eps, values)
    return row


def _bic(Xs, cap, cands, noise2):
    P, d = cap["points"], Xs.shape[1]
    w, spread = np.maximum(cap["sizes"], 0.0), (cap["radius"] / coreset_module.BALL_FACTOR) ** 2
    models = []
    for C, n2 in zip(cands, noise2, strict=True):
        lab, k = cKDTree(C).query(P)[1], C.shape[0]
        W = np.bincount(lab, weights=w, minlength=k)
        between = ((P - C[lab]) ** 2).sum(axis=1)
        v = np.bincount(lab, weights=w * (between + spread), minlength=k) / np.maximum(W, 1e-300)
        models.append((C, np.maximum((v + np.asarray(n2)) / d, 1e-12), np.maximum(W, 1e-300)))
    top = max(float((-(d / 2) * np.log(2 * np.pi * v)).max()) for _, v, _ in models)
    low = -float(np.log(cap["box"][:, 1] - cap["box"][:, 0]).sum())
    out = []
    for C, v, W in models:
        q = min(3, C.shape[0])
        j = cKDTree(C).query(Xs, k=q)[1].reshape(Xs.shape[0], q)
        d2 = ((Xs[:, None, :] - C[j]) ** 2).sum(axis=2)
        lp = logsumexp(np.log(W[j] / W.sum()) - (d / 2) * np.log(2 * np.pi * v[j])
                       - d2 / (2 * v[j]), axis=1)
        params = C.shape[0] * (d + 2) - 1
        out.append(((np.clip(lp, low, top) - low).sum() - params / 2 * np.log(Xs.shape[0]))
                   / (top - low))
    return out


def _gap(Xs, box, cands, noise2, ks, c):
    d = Xs.shape[1]
    top = 0.5 * float(np.sqrt(((box[:, 1] - box[:, 0]) ** 2).sum()))
    low, L = top / 1024.0, np.log(1024.0)
    out = []
    for C, n2, k in zip(cands, noise2, ks, strict=True):
        dist, j = cKDTree(C).query(Xs)
        a2 = np.maximum(dist**2 - np.asarray(n2)[j], low**2)
        t = np.clip(0.5 * np.log(a2 / low**2) / L, 0.0, 1.0)
        out.append(-t.sum() - c * Xs.shape[0] * np.log(k) / (d * L))
    return out


def _ceiling(X, y, k_true):
    """The non-private criterion's k and ARI over KMeans fits for k = 2 .. 2 k_true
    (:func:`_criterion.criterion_k`). Returns ``(k, ARI)``."""
    return criterion_k(X, y, range(2, 2 * k_true + 1))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", nargs="+", default=CELLS, help="set:epsilon")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--powers", type=float, nargs="*", default=[2.0, 4.0])
    p.add_argument("--ball", type=float, nargs="*", default=[0.25])
    p.add_argument("--betas", type=float, nargs="*", default=[1.0])
    p.add_argument("--noise-off", type=float, nargs="*", default=[2.0])
    p.add_argument("--gap", type=float, nargs="*", default=[1.0, 2.0])
    p.add_argument("--mix", nargs="*", default=[], help="l:c, (1 - l) sil + l gap c")
    p.add_argument("--ceiling", action="store_true", help="the criterion's non-private ARI")
    args = p.parse_args(argv)
    header = None
    for cell in args.cells:
        name, eps = cell.rsplit(":", 1)
        ds = datasets.load(name)
        X, y = np.asarray(ds.X, dtype=np.float64), np.asarray(ds.y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rows = [_cell(X, y, float(eps), s, args) for s in range(args.seeds)]
        cols = [c for c in rows[0] if all(c in r for r in rows)]
        ceiling = _ceiling(X, y, int(np.unique(y[y >= 0]).size)) if args.ceiling else None
        if header != cols:
            header = cols
            extra = ["ceiling (k)"] if args.ceiling else []
            print("| cell | " + " | ".join(cols + extra) + " |\n|---|"
                  + "---|" * (len(cols) + len(extra)))
        cells = [f"{np.mean([r[c] for r in rows]):.3f}" for c in cols]
        cells += [f"{ceiling[1]:.3f} ({ceiling[0]})"] if ceiling else []
        print(f"| {name} at {eps} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
