"""The k-means family: 002 Figs. 3-4 (CostGap against epsilon) and DP-Lloyd beside DPM.

    python benchmarks/kmeans.py                  # everything (30 runs, 10 for Digits)
    python benchmarks/kmeans.py --quick          # smoke run: 3 runs, 3 epsilons, small sets
    python benchmarks/kmeans.py --part fig3 --jobs 8
    python benchmarks/kmeans.py --part synth --runs 10

Part ``fig3`` (002 Sec. 5-6, Figs. 3-4). Iris (k=3), Wine (k=3), Breast Cancer (k=2), Digits
(k=10) from scikit-learn; ``--runs`` runs per epsilon (default 30; Digits 10, as in 002).
Algorithms: KMeans Guarantee and SubClustering (``internal_k`` 2-5), each in the faithful
variant (002 as printed, NOT private) and the private one; DPLloyd; and a re-implementation of
diffprivlib's DP-Lloyd run at the *same true spend* (see below). Figure: CostGap (002 eq. 1,
``privclust.metrics.cost_gap``) against ``Cost_Lloyd`` = scikit-learn KMeans (k-means++, best
of 10). Epsilon: 002's text does not give Fig. 3's axis values; we use 7 log-spaced values in
[0.1, 10] (3 with --quick). "Gain" is 002's figure: mean CostGap over epsilon of KMeans
Guarantee divided by that of SubClustering (paper: Iris 1.1, Wine 4.13, Breast Cancer 2.83,
Digits ~1, measured on the faithful variants, Departures 18).

Public bounds. Digits: pixel intensities are 0..16 by construction (documented with the data
set), a public range. Iris, Wine, Breast Cancer: no documented ranges exist, so the bounds are
the data's own min and max: **NOT private** (the bounds leak the extremes of the data; 002
presumably min-max scaled the same way). Every feature is scaled to [0, 1] by its bounds and the
algorithms get bounds (0, 1); CostGap is computed on the scaled data.

Part ``synth``: DPLloyd (ours), diffprivlib-like DP-Lloyd at the same true spend, and DPM on
Synth-10d (``privclust.datasets.synth_10d``, 100,000 x 10, k = 64, bounds (-100, 100)) and
``uci_letter`` (20,000 x 16, k = 26, bounds (0, 15)) at epsilon 0.5, 1, 2 (1 with --quick).
Figures: CostGap against KMeans (best of 3), ARI, majority-vote accuracy (004 Def. 12),
squared inertia, and the median fit time. 004 Tables 2-3 print diffprivlib's DP-Lloyd at a
*recorded* epsilon of 1 (its true spend at d = 10 is 1.21, at d = 16 1.41): accuracy 0.66,
inertia 6.0e8 on Synth-10d; accuracy 0.13, inertia 1.1e6 on UCI Letters.

diffprivlib-like DP-Lloyd (``dpl_like``): diffprivlib 0.6's ``KMeans`` re-implemented from its
source for this comparison only (it is not installed here): iterations from the exact n
(``_calc_iters``), the same sphere-packing initialisation, per-coordinate Laplace noise with
sensitivity ``hi - lo`` and a folded geometric count, and its budget split with the two results
unpacked in the wrong order, so that a *recorded* epsilon e spends ``e (1 + d c) / (d + c)``,
``c = cbrt(4 d 0.225^2)``. It is run with the recorded epsilon that makes its true spend equal
to the epsilon of the row, so the comparison is at equal privacy. Approximations: bounded-domain
Laplace is emulated by clipping the noisy sum to ``[n_hat lo, n_hat hi]`` (diffprivlib resamples),
the folded geometric by ``max(n_hat, 1)``.
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from privclust import metrics as M
from privclust.cluster.convergent import KMeansGuarantee, SubClustering
from privclust.cluster.dpm import DPM
from privclust.cluster.lloyd import DPLloyd, sphere_packing_init
from privclust.datasets import DatasetNotFoundError, load, synth_10d

SMALL_SETS = {  # name: (k, runs in the full benchmark)
    "iris": (3, 30),
    "wine": (3, 30),
    "breast_cancer": (2, 30),
    "digits": (10, 10),
}
PAPER_GAIN = {"iris": 1.1, "wine": 4.13, "breast_cancer": 2.83, "digits": 1.0}
INTERNAL_K = (2, 3, 4, 5)
RHO = 0.225


# ----------------------------------------------------------------------------- data
_CACHE: dict = {}


def small_set(name: str):
    """Scaled X (n, d) in [0, 1] and whether its bounds are public."""
    if name not in _CACHE:
        from sklearn import datasets as skd

        X = getattr(skd, f"load_{name}")().data.astype(float)
        if name == "digits":  # public: 8x8 images with intensities 0..16
            lo, hi, public = np.zeros(X.shape[1]), np.full(X.shape[1], 16.0), True
        else:  # NOT private: the data's own extremes
            lo, hi, public = X.min(axis=0), X.max(axis=0), False
        _CACHE[name] = ((X - lo) / np.where(hi > lo, hi - lo, 1.0), public)
    return _CACHE[name]


def big_set(name: str):
    if name not in _CACHE:
        if name == "synth_10d":
            ds = synth_10d()
            _CACHE[name] = (ds.X, ds.y, (-100.0, 100.0), 64)
        else:
            ds = load(name)
            _CACHE[name] = (ds.X.astype(float), ds.y, (0.0, 15.0), 26)
    return _CACHE[name]


# ----------------------------------------------------------------------------- diffprivlib-like
def dpl_like_true_factor(d: int) -> float:
    """True spend / recorded epsilon of diffprivlib's DP-Lloyd (its unpacking bug)."""
    c = float(np.cbrt(4 * d * RHO**2))
    return (1 + d * c) / (d + c)


def dpl_like_fit(X, bounds, k: int, eps_recorded: float, seed: int) -> np.ndarray:
    """diffprivlib 0.6 KMeans.fit re-implemented (see the module docstring). Benchmark only:
    it draws its noise directly from NumPy, outside privclust's ledger."""
    rng = np.random.default_rng(seed)
    n, d = X.shape
    b = np.tile(np.asarray(bounds, float), (d, 1)) if np.ndim(bounds) == 1 else np.asarray(bounds)
    lo, hi = b[:, 0], b[:, 1]
    X = np.clip(X, lo, hi)
    c = float(np.cbrt(4 * d * RHO**2))
    eps_m = math.sqrt(500 * k**3 / n**2 * (d + c) ** 3)
    iters = int(max(min(eps_recorded / eps_m, 7), 2))  # from the exact n
    centres = sphere_packing_init(rng, b, k)
    norm = eps_recorded / iters / (d + c)
    eps_0, eps_i = norm * 1.0, norm * c  # the bug: (per-coordinate, count) unpacked as (0, i)
    for _ in range(iters):
        lab = M.assign(X, centres)
        for j in range(k):
            member = lab == j
            if not member.any():
                continue  # diffprivlib skips empty clusters
            cnt = member.sum()
            p = -math.expm1(-eps_0)
            n_hat = max(cnt + rng.geometric(p) - rng.geometric(p), 1)
            s = X[member].sum(axis=0) + rng.laplace(0.0, (hi - lo) / eps_i)
            centres[j] = np.clip(s, n_hat * lo, n_hat * hi) / n_hat
    return centres


# ----------------------------------------------------------------------------- part fig3
def fig3_algorithms(k: int, eps: float, seed: int, max_iter: int = 10):
    T = max_iter
    common = dict(epsilon=eps, bounds=(0, 1), max_iter=T, random_state=seed)
    out = {
        "KMG faithful": KMeansGuarantee(k, variant="faithful", **common),
        "KMG private": KMeansGuarantee(k, **common),
        "DPLloyd": DPLloyd(k, epsilon=eps, bounds=(0, 1), random_state=seed),
    }
    for ik in INTERNAL_K:
        out[f"SubC faithful ik={ik}"] = SubClustering(k, internal_k=ik, variant="faithful",
                                                      **common)
        out[f"SubC private ik={ik}"] = SubClustering(k, internal_k=ik, **common)
    return out


def fig3_task(args):
    name, k, eps, seed, opt, max_iter = args
    X, _ = small_set(name)
    res = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for algo, est in fig3_algorithms(k, eps, seed, max_iter).items():
            t = time.perf_counter()
            est.fit(X)
            dt = time.perf_counter() - t
            # the last iterate S_hat^(T), before the final Laplace step (a local diagnostic:
            # cost_history_[-2] is the exact cost of X at S_hat^(T), never released)
            history = getattr(est, "centers_history_", None)
            before = (abs(est.cost_history_[-2] - opt) / opt if history is not None
                      else float("nan"))
            res[algo] = (M.cost_gap(X, est.cluster_centers_, opt), dt, before)
        t = time.perf_counter()
        c = dpl_like_fit(X, (0.0, 1.0), k, eps / dpl_like_true_factor(X.shape[1]), seed)
        res["dpl_like (same true spend)"] = (M.cost_gap(X, c, opt), time.perf_counter() - t,
                                             float("nan"))
    return name, eps, seed, res


def run_fig3(eps_grid, runs_override, sets, pool, max_iter=10):
    print("\n=== 002 Figs. 3-4: CostGap against epsilon (mean over runs; lower is better) ===")
    print(f"epsilon grid: {', '.join(f'{e:.3g}' for e in eps_grid)}; KMeans Guarantee and "
          f"SubClustering run T = {max_iter} iterations")
    tasks, opts = [], {}
    for name in sets:
        k, runs = SMALL_SETS[name]
        runs = runs_override or runs
        X, public = small_set(name)
        opts[name] = M.optimal_kmeans_cost(X, k, n_init=10, random_state=0)
        tasks += [(name, k, e, s, opts[name], max_iter) for e in eps_grid for s in range(runs)]
    results: dict = {}
    for name, eps, _, res in pool(fig3_task, tasks):
        for algo, row in res.items():
            results.setdefault(name, {}).setdefault(algo, {}).setdefault(eps, []).append(row)
    summary = {}
    for name in sets:
        X, public = small_set(name)
        k = SMALL_SETS[name][0]
        algos = results[name]
        print(f"\n--- {name}: n={X.shape[0]}, d={X.shape[1]}, k={k}, Cost_Lloyd={opts[name]:.4g}, "
              f"runs={len(next(iter(algos.values()))[eps_grid[0]])}, bounds: "
              + ("public (0..16)" if public else "the data's min/max (NOT private)"))
        head = f"{'algorithm':<28}" + "".join(f"{e:>9.3g}" for e in eps_grid)
        print(head + f"{'mean':>9}{'fit_ms':>9}")
        means, before = {}, {}
        for algo, by_eps in algos.items():
            m = [float(np.mean([g for g, _, _ in by_eps[e]])) for e in eps_grid]
            means[algo] = float(np.mean(m))
            before[algo] = float(np.mean([b for e in eps_grid for _, _, b in by_eps[e]]))
            t = float(np.median([t for e in eps_grid for _, t, _ in by_eps[e]])) * 1e3
            print(f"{algo:<28}" + "".join(f"{v:>9.3f}" for v in m) + f"{means[algo]:>9.3f}"
                  f"{t:>9.1f}")
        summary[name] = means
        for variant in ("faithful", "private"):
            kmg = means[f"KMG {variant}"]
            gains = {ik: kmg / means[f"SubC {variant} ik={ik}"] for ik in INTERNAL_K}
            best = max(gains, key=gains.get)
            print(f"gain KMG/SubC ({variant}): "
                  + ", ".join(f"ik={ik}: {g:.2f}x" for ik, g in gains.items())
                  + f"; best ik={best}: {gains[best]:.2f}x"
                  + (f"  (paper, faithful: {PAPER_GAIN[name]}x)" if variant == "faithful"
                     else ""))
            # the same ratio on the last iterate S_hat^(T), before the Laplace step: whether
            # the iterations themselves differ (they feed the final step only through the
            # partition they end in)
            kmg_b = before[f"KMG {variant}"]
            print(f"  before the Laplace step, mean CostGap KMG {kmg_b:.4f}; SubC "
                  + ", ".join(f"ik={ik}: {before[f'SubC {variant} ik={ik}']:.4f} "
                              f"({kmg_b / max(before[f'SubC {variant} ik={ik}'], 1e-12):.2f}x)"
                              for ik in INTERNAL_K))
        print(f"DPLloyd / dpl_like at the same true spend (mean CostGap): "
              f"{means['DPLloyd']:.3f} / {means['dpl_like (same true spend)']:.3f}; "
              f"diffprivlib's true spend here = {dpl_like_true_factor(X.shape[1]):.2f} x "
              "its recorded epsilon")
    return summary


# ----------------------------------------------------------------------------- part synth
def synth_algorithms(k, eps, bounds, seed):
    """Name -> constructor (None: the diffprivlib-like function)."""
    return {
        "DPLloyd": lambda: DPLloyd(k, epsilon=eps, bounds=bounds, random_state=seed),
        "dpl_like (same true spend)": None,
        "DPM": lambda: DPM(epsilon=eps, bounds=bounds, random_state=seed),
        "KMG private": lambda: KMeansGuarantee(k, epsilon=eps, bounds=bounds, random_state=seed),
        "KMG faithful": lambda: KMeansGuarantee(k, epsilon=eps, bounds=bounds, variant="faithful",
                                                random_state=seed),
        "SubC private ik=4": lambda: SubClustering(k, epsilon=eps, bounds=bounds,
                                                   random_state=seed),
        "SubC faithful ik=4": lambda: SubClustering(k, epsilon=eps, bounds=bounds,
                                                    variant="faithful", random_state=seed),
    }


def synth_task(args):
    name, eps, seed, opt = args
    X, y, bounds, k = big_set(name)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for algo, make in synth_algorithms(k, eps, bounds, seed).items():
            t = time.perf_counter()
            if make is None:
                centres = dpl_like_fit(X, bounds, k, eps / dpl_like_true_factor(X.shape[1]), seed)
            else:
                centres = make().fit(X).cluster_centers_
            dt = time.perf_counter() - t
            lab = M.assign(X, centres)
            out[algo] = dict(cost_gap=M.cost_gap(X, centres, opt), ari=M.ari(y, lab),
                             acc=M.accuracy_majority(y, lab),
                             inertia=M.inertia(X, centres), k=centres.shape[0], fit_s=dt)
    return name, eps, out


def run_synth(eps_grid, runs, pool):
    print("\n=== DP-Lloyd beside DPM (mean over runs; fit_s: median) ===")
    names = ["synth_10d", "uci_letter"]
    tasks = []
    opts = {}
    for name in names:
        try:
            X, y, bounds, k = big_set(name)
        except DatasetNotFoundError as exc:
            print(f"{name}: skipped ({exc})")
            continue
        opts[name] = M.optimal_kmeans_cost(X, k, n_init=3, random_state=0)
        tasks += [(name, e, s, opts[name]) for e in eps_grid for s in range(runs)]
    results: dict = {}
    for name, eps, out in pool(synth_task, tasks):
        for algo, row in out.items():
            results.setdefault((name, eps, algo), []).append(row)
    cols = ["cost_gap", "ari", "acc", "inertia", "k", "fit_s"]
    print(f"{'set':<11}{'eps':>5} {'algorithm':<28}" + "".join(f"{c:>10}" for c in cols))
    for (name, eps, algo), rows in results.items():
        vals = [float(np.median([r[c] for r in rows])) if c == "fit_s" else
                float(np.mean([r[c] for r in rows])) for c in cols]
        print(f"{name:<11}{eps:>5.3g} {algo:<28}" + "".join(
            f"{v:>10.3g}" if c in ("inertia",) else f"{v:>10.3f}" for c, v in zip(cols, vals,
                                                                                  strict=True)))
    return results


# ----------------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run (seconds)")
    ap.add_argument("--part", choices=["fig3", "synth", "all"], default="all")
    ap.add_argument("--runs", type=int, default=None, help="runs per point (default: 002's)")
    ap.add_argument("--sets", nargs="+", default=list(SMALL_SETS), choices=list(SMALL_SETS))
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--max-iter", type=int, default=10,
                    help="T of KMeans Guarantee and SubClustering in part fig3 (default 10)")
    args = ap.parse_args(argv)

    eps_grid = [0.1, 1.0, 10.0] if args.quick else list(np.geomspace(0.1, 10.0, 7))
    runs = args.runs or (3 if args.quick else None)
    sets = [s for s in args.sets if not (args.quick and s == "digits")]

    executor = None
    if args.jobs > 1:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        executor = ProcessPoolExecutor(args.jobs)

        def pool(fn, tasks):
            return executor.map(fn, tasks, chunksize=max(1, len(tasks) // (8 * args.jobs)))
    else:
        def pool(fn, tasks):
            return map(fn, tasks)

    t0 = time.perf_counter()
    try:
        if args.part in ("fig3", "all"):
            run_fig3(eps_grid, runs, sets, pool, args.max_iter)
        if args.part in ("synth", "all"):
            run_synth([1.0] if args.quick else [0.5, 1.0, 2.0],
                      args.runs or (2 if args.quick else 10), pool)
    finally:
        if executor is not None:
            executor.shutdown()
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
