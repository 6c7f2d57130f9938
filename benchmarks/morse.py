"""Morse merging (000): Fig. 4-5 and Table 2, plus DPM-Morse, and the Morse step's timing.

    python benchmarks/morse.py            # 5 runs, eps in {10, 5, 2, 1, 0.5}, the K0 sweep
    python benchmarks/morse.py --quick    # 2 runs, eps in {10, 2, 1}, smaller sweep
    python benchmarks/morse.py --timing   # only the Morse-step timing (K0 <= 20, d <= 16)
    python benchmarks/morse.py --runs 3 --sets uci_htru2 --predict flow

ARI (``privclust.metrics.ari``) of every base model with ``n_clusters = K0`` components against
the same base followed by MorseMerging to ``K`` clusters, at the same total epsilon:

* DPMoG-hard (DPGaussianMixture, tau1 = 10) vs DPMoG-hard-Morse (tau2 = 5, m = 20; pure
  post-processing, same budget). eps = 0.5 is run although the paper excludes it (Departures 22).
* DPLloyd with K0 centres vs DPLloyd-Morse: the Morse pipeline gives DPLloyd
  ``(1 - 0.15) eps`` and the private covariance pass ``0.15 eps`` (Sec. 5.1.2), so both columns
  spend eps. DPLloyd is pure eps-DP; the pass adds delta = 1 / n_hat^1.5 (n_hat: the sum of
  DPLloyd's released noisy sizes).
* Columns ``(K)``: the same base fitted directly with K components / centres at eps (what one
  would get without the Morse step).
* DPM (finds its own number of leaves) vs DPM-Morse (the same split: DPM at 0.85 eps, the
  pass at 0.15 eps; each picks delta = 1 / n_hat^1.5, so DPM-Morse's delta is twice DPM's).
  The base's ARI is that of its own leaves. More than 20 leaves are pooled to 20
  (``MorseMerging.max_components``) before the pass.
* MorseMerging runs with its defaults: add/remove sensitivity, prediction by the base's own
  assignment mapped to clusters (``--predict flow``: the paper's Thm 5.3 flow instead), runts
  below 3% of the weight not counted among the K clusters.

Data: every feature mapped to [-1, 1] by the sidecar's **public** bounds (the paper rescales to
[-1, 1]); all models then run with bounds (-1, 1). ``usps`` is reduced from 256 to 3 features by
3-D t-SNE on the data themselves, as in the paper (``--usps-reduction pca`` for PCA; the t-SNE
takes ~5 min once and is cached in the temp folder): a data-dependent reduction, NOT private,
and the bounds of the reduced features come from the data (also not private) -- the USPS rows
only show what the Morse step adds on a 3-D embedding. Departures 22: the paper's Pulsar (9,273
rows) and Shuttle (43,500) differ from uci_htru2 (17,898) and uci_shuttle (58,000).

Runs use fixed seeds (reproducible, not secure randomness) and one BLAS thread per process.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402

from privclust.cluster.dpcube import DPCube  # noqa: E402
from privclust.cluster.dpm import DPM  # noqa: E402
from privclust.cluster.lloyd import DPLloyd  # noqa: E402
from privclust.cluster.lsh_splits import LSHSplits  # noqa: E402
from privclust.cluster.mixture import DPGaussianMixture  # noqa: E402
from privclust.cluster.morse import MixtureField, MorseMerging, find_tevs  # noqa: E402
from privclust.datasets import load  # noqa: E402
from privclust.metrics import ari  # noqa: E402

SETS = {  # name: (K, K0) as in the paper's Table 1
    "uci_shuttle": (7, 12),
    "uci_htru2": (2, 6),
    "uci_magic": (2, 6),
    "usps": (10, 13),
}
SHARE = 0.15  # covariance pass's share of epsilon for centre models (the default)


USPS_REDUCTION = os.environ.get("PRIVCLUST_USPS_REDUCTION", "tsne")
PREDICT = os.environ.get("PRIVCLUST_MORSE_PREDICT", "base")


def _usps_3d(X, how):
    """256 -> 3 features: t-SNE as in the paper (cached in the temp folder: ~2 min) or PCA."""
    if how == "pca":
        from sklearn.decomposition import PCA

        return PCA(3, random_state=0).fit_transform(X)
    import tempfile
    from pathlib import Path

    cache = Path(tempfile.gettempdir()) / "privclust_usps_tsne3.npy"
    if cache.is_file():
        return np.load(cache)
    from sklearn.manifold import TSNE

    Y = TSNE(3, random_state=0, init="pca").fit_transform(X)
    np.save(cache, Y)
    return Y


def prepare(name):
    ds = load(name)
    X = ds.X.astype(float)
    if name == "usps":
        X = _usps_3d(X, USPS_REDUCTION)  # data-dependent: NOT private
        lo, hi = X.min(axis=0), X.max(axis=0)  # data-derived bounds: NOT private
        pad = 0.05 * (hi - lo)
        bounds = np.column_stack([lo - pad, hi + pad])
    else:
        bounds = ds.bounds
    mid, half = bounds.mean(axis=1), (bounds[:, 1] - bounds[:, 0]) / 2
    U = np.clip((X - mid) / half, -1, 1)
    return U, ds.y


def one_run(args):
    name, eps, seed, K, K0, which = args
    warnings.simplefilter("ignore")
    U, y = prepare(name)
    out = {"K0": K0, "errors": []}
    for key in which:
        try:
            if key == "gmm_sweep":
                out |= _gmm(U, y, eps, seed, K, K0, with_k=False)
            else:
                out |= RUNNERS[key](U, y, eps, seed, K, K0)
        except Exception as exc:  # a base model failing must not lose the other cells
            out["errors"].append(
                f"{name} eps={eps:g} seed={seed} {key}: {type(exc).__name__}: {exc}"
            )
    return name, eps, seed, out


def _gmm(U, y, eps, seed, K, K0, with_k=True):
    base = DPGaussianMixture(K0, epsilon=eps, bounds=(-1.0, 1.0), random_state=seed).fit(U)
    mm = MorseMerging(base, K, predict_method=PREDICT).fit(None)
    out = {
        "DPMoG-hard": ari(y, base.labels_),
        "DPMoG-hard-Morse": ari(y, mm.predict(U)),
        "t_gmm": mm.morse_time_,
    }
    if with_k:  # the main table (not the K0 sweep): also the base fitted with K components
        k_model = DPGaussianMixture(K, epsilon=eps, bounds=(-1.0, 1.0), random_state=seed)
        out["DPMoG-hard(K)"] = ari(y, k_model.fit(U).labels_)
    return out


def _lloyd(U, y, eps, seed, K, K0):
    B = (-1.0, 1.0)
    base = DPLloyd(K0, epsilon=eps, bounds=B, random_state=seed).fit(U)
    mm = MorseMerging(
        DPLloyd(K0, bounds=B, random_state=seed),
        K,
        epsilon=eps,
        covariance_share=SHARE,
        predict_method=PREDICT,
        random_state=seed,
    ).fit(U)
    k_model = DPLloyd(K, epsilon=eps, bounds=B, random_state=seed).fit(U)
    return {
        "DPLloyd": ari(y, base.labels_),
        "DPLloyd-Morse": ari(y, mm.labels_),
        "DPLloyd(K)": ari(y, k_model.labels_),
        "t_lloyd": mm.morse_time_,
    }


def _dpm(U, y, eps, seed, K, K0):
    B = (-1.0, 1.0)
    base = DPM(epsilon=eps, bounds=B, random_state=seed).fit(U)
    mm = MorseMerging(
        DPM(bounds=B, random_state=seed),
        K,
        epsilon=eps,
        covariance_share=SHARE,
        predict_method=PREDICT,
        random_state=seed,
    ).fit(U)
    return {
        "DPM": ari(y, base.labels_),
        "DPM-Morse": ari(y, mm.labels_),
        "DPM K0": mm.weights_.size,
        "t_dpm": mm.morse_time_,
    }


def _centre_base(cls, label):
    """Morse merging over a centre model that takes k (LSHSplits, DPCube: the paper's DPTree
    and DPCube baselines): the base with K0 centres, Morse over it, the base with K."""

    def run(U, y, eps, seed, K, K0):
        B = (-1.0, 1.0)
        base = cls(K0, epsilon=eps, bounds=B, random_state=seed).fit(U)
        mm = MorseMerging(cls(K0, bounds=B, random_state=seed), K, epsilon=eps,
                          covariance_share=SHARE, predict_method=PREDICT,
                          random_state=seed).fit(U)
        k_model = cls(K, epsilon=eps, bounds=B, random_state=seed).fit(U)
        return {label: ari(y, base.labels_), f"{label}-Morse": ari(y, mm.labels_),
                f"{label}(K)": ari(y, k_model.labels_), f"t_{label}": mm.morse_time_}

    return run


RUNNERS = {"gmm": _gmm, "lloyd": _lloyd, "dpm": _dpm,
           "lsh": _centre_base(LSHSplits, "LSHSplits"), "dpcube": _centre_base(DPCube, "DPCube")}


def _mean_k0(results, name, eps):
    v = [
        r["DPM K0"] for (m, e, _), r in results.items() if m == name and e == eps and "DPM K0" in r
    ]
    return f"{np.mean(v):.1f}" if v else "-"


def table(results, sets, epsilons, cols):
    lines = []
    for name in sets:
        lines.append(f"\n{name} (K={SETS[name][0]}, K0={SETS[name][1]}): mean ARI over runs")
        lines.append(f"{'eps':>6} " + " ".join(f"{c:>17}" for c in cols))
        for eps in epsilons:
            rows = [r for (n, e, _s), r in results.items() if n == name and e == eps]
            vals = []
            for c in cols:
                v = [r[c] for r in rows if c in r]
                vals.append(f"{np.mean(v):>10.3f} +-{np.std(v):.2f}" if v else f"{'-':>17}")
            lines.append(f"{eps:>6g} " + " ".join(vals))
    return "\n".join(lines)


def timing(reps=10):
    rng = np.random.default_rng(0)
    print("\nMorse step (TEV graph + merging) on random mixtures in the unit box, one thread:")
    print(f"{'K0':>4} {'d':>4} {'seconds (median of runs)':>26} {'max':>8} {'TEVs':>6}")
    for K0, d in [(6, 8), (12, 9), (13, 3), (20, 2), (20, 8), (20, 16)]:
        times, tevs = [], []
        for _ in range(reps):
            mu = rng.uniform(-0.7, 0.7, (K0, d))
            A = rng.normal(size=(K0, d, d)) * 0.1
            cov = A @ A.transpose(0, 2, 1) + 0.01 * np.eye(d)
            F = MixtureField(rng.dirichlet(np.ones(K0)), mu, cov)
            t = time.perf_counter()
            g = find_tevs(F, mu)
            times.append(time.perf_counter() - t)
            tevs.append(len(g["tevs"]))
        print(
            f"{K0:>4} {d:>4} {np.median(times):>26.3f} {max(times):>8.3f} {np.median(tevs):>6.0f}"
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--timing", action="store_true", help="only the Morse-step timing")
    ap.add_argument("--sets", nargs="*", default=list(SETS))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--usps-reduction", choices=("tsne", "pca"), default="tsne")
    ap.add_argument("--runs", type=int, default=None, help="runs per cell (default 5, quick 2)")
    ap.add_argument("--predict", choices=("base", "flow"), default="base")
    ap.add_argument("--bases", nargs="*", default=["gmm", "lloyd", "dpm"], choices=list(RUNNERS),
                    help="base models (lsh and dpcube: the paper's DPTree and DPCube baselines)")
    a = ap.parse_args()
    os.environ["PRIVCLUST_MORSE_PREDICT"] = a.predict
    global PREDICT
    PREDICT = a.predict
    global USPS_REDUCTION
    USPS_REDUCTION = a.usps_reduction
    os.environ["PRIVCLUST_USPS_REDUCTION"] = a.usps_reduction
    if "usps" in a.sets:
        prepare("usps")  # compute (and cache) the embedding once, before the workers start
    if a.timing:
        timing()
        return
    runs = a.runs or (2 if a.quick else 5)
    epsilons = (10.0, 2.0, 1.0) if a.quick else (10.0, 5.0, 2.0, 1.0, 0.5)
    tasks = [
        (n, e, s, *SETS[n], tuple(a.bases))
        for n in a.sets
        for e in epsilons
        for s in range(runs)
    ]
    sweep_k0 = (6, 10) if a.quick else (6, 10, 15, 20)
    sweep_sets = [n for n in ("uci_htru2", "uci_magic") if n in a.sets]
    sweep = [
        (n, e, s, SETS[n][0], k0, ("gmm_sweep",))
        for n in sweep_sets
        for e in (10.0, 5.0, 2.0, 1.0)
        for s in range(runs)
        for k0 in sweep_k0
    ]
    t0 = time.time()
    with ProcessPoolExecutor(a.jobs) as ex:
        res = list(ex.map(one_run, tasks))
        res_sweep = list(ex.map(one_run, sweep))
    results = {(n, e, s): r for n, e, s, r in res}
    errors = [m for _n, _e, _s, r in res + res_sweep for m in r["errors"]]
    cols = [
        "DPMoG-hard",
        "DPMoG-hard-Morse",
        "DPMoG-hard(K)",
        "DPLloyd",
        "DPLloyd-Morse",
        "DPLloyd(K)",
        "DPM",
        "DPM-Morse",
        "LSHSplits",
        "LSHSplits-Morse",
        "LSHSplits(K)",
        "DPCube",
        "DPCube-Morse",
        "DPCube(K)",
    ]
    print(f"{runs} runs per cell, seeds 0..{runs - 1}; {time.time() - t0:.0f} s in all")
    if errors:
        print(f"{len(errors)} fit(s) failed and are left out of the means:")
        for m in errors:
            print("  " + m)
    print(table(results, a.sets, epsilons, cols))
    print("\nDPM's number of leaves (K0 of DPM-Morse), mean:")
    for n in a.sets:
        print(f"  {n}: " + ", ".join(f"eps={e:g}: {_mean_k0(results, n, e)}" for e in epsilons))
    t_all = [r[k] for r in results.values() for k in r if k.startswith("t_")]
    print(
        f"\nMorse step on the benchmark mixtures: median {np.median(t_all):.3f} s, "
        f"max {np.max(t_all):.3f} s (DPM-Morse K0 can exceed 20)"
    )
    print("\nTable 2: DPMoG-hard-Morse ARI for K0 (mean over runs)")
    for n in sweep_sets:
        print(f"  {n}: " + "  ".join(f"K0={k:>2}" for k in sweep_k0))
        for e in (10.0, 5.0, 2.0, 1.0):
            vals = []
            for k0 in sweep_k0:
                v = [
                    r["DPMoG-hard-Morse"]
                    for nn, ee, _s, r in res_sweep
                    if nn == n and ee == e and r["K0"] == k0
                ]
                vals.append(f"{np.mean(v):.3f}" if v else "-")
            print(f"    eps={e:>4g}: " + "  ".join(f"{v:>5}" for v in vals))
    timing()


if __name__ == "__main__":
    main()
