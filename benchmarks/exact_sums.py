"""What exact sums cost: fit time with exact fixed-point sums over fit time with the float64
running sums they replaced, in one run.

    python benchmarks/exact_sums.py                 # Synth-10d (3 estimators) + DPDBSCAN, 11M
    python benchmarks/exact_sums.py --runs 9 --big-runs 3
    python benchmarks/exact_sums.py --quick         # Synth-10d only

The float64 path is not an option of the library. The script runs it from a ``git worktree``
of the last commit before exact sums (``--ref``; by default the parent of the commit that added
``src/privclust/engine/_exact.py``, or HEAD while that file is not committed), checked out
under ``--worktree``: two worker processes, one importing that checkout and one this one, fit
the same data in turn (interleaved, the order alternating from run to run), and the script
prints the median fit time of each and their ratio. Medians of interleaved runs, because the
machine may be shared. DPDBSCAN runs in a fresh process per fit (a warm-up fit, then the timed
one) on points saved once beside the worktree: a process that keeps 11M points and the big
temporaries of their fits disturbs its own timings and those of the small fits.

Data: Synth-10d, ``make_blobs(100000, 10, centers=64, center_box=(-100, 100),
random_state=42)`` with bounds (-110, 110), for DPLloyd (k = 64), DPM and LSHSplits (k = 64),
and DPGaussianMixture (8 components, "DPGMM": sums of ``x x^T``), epsilon 1; DPDBSCAN on 11M
2-D points (a ``cabs*`` data file of ../shared/data when one other than the tiny samples
exists, else the generated city of ``benchmarks/dbscan.py``: alpha 0.036, MinPts 100).
DPDBSCAN sums nothing (it releases cell counts), so its ratio shows the noise of the
measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NAMES = ("DPLloyd", "DPM", "LSHSplits", "DPDBSCAN")


# ---------------------------------------------------------------------------- worker side
def _synth_10d():
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(100000, 10, centers=64, center_box=(-100, 100), random_state=42)
    return X


def _big_points(n: int, folder: Path) -> tuple[Path, str]:
    """11M 2-D points saved once as ``.npy`` (points, bounds) in ``folder``: a large cabs* data
    file if there is one, else the generated city of ``benchmarks/dbscan.py``."""
    import numpy as np

    data = ROOT.parent / "shared" / "data"
    files = [p for p in sorted(data.glob("cabs*.npz")) if "tiny" not in p.stem]
    source = files[0].stem if files else "generated city"
    path = folder / f"privclust-exact-sums-{source.replace(' ', '-')}-{n}.npz"
    if not path.exists():
        if files:
            from privclust.datasets import load

            ds = load(files[0].stem)
            X, bounds = ds.X[:n], np.asarray(ds.bounds, dtype=float)
        else:
            sys.path.insert(0, str(HERE))
            from dbscan import make_city

            X, bounds = make_city(n)
        np.savez(path, X=X, bounds=bounds)
    return path, source


def _makers():
    from privclust import DPM, DPGaussianMixture, DPLloyd, LSHSplits

    b = (-110.0, 110.0)
    return {
        "DPLloyd": lambda: DPLloyd(64, epsilon=1.0, bounds=b, random_state=0),
        "DPM": lambda: DPM(epsilon=1.0, bounds=b, random_state=0),
        "LSHSplits": lambda: LSHSplits(64, epsilon=1.0, bounds=b, random_state=0),
        "DPGMM": lambda: DPGaussianMixture(epsilon=1.0, n_components=8, bounds=b,
                                           random_state=0),
    }


def worker() -> None:
    """Answer ``NAME`` lines on stdin with the time of one fit on Synth-10d (a JSON line)."""
    import privclust

    warnings.simplefilter("ignore")
    X = _synth_10d()
    makers = _makers()
    print(json.dumps({"ready": str(Path(privclust.__file__).parents[2])}), flush=True)
    for line in sys.stdin:
        t0 = time.perf_counter()
        makers[line.strip()]().fit(X)
        print(json.dumps({"seconds": time.perf_counter() - t0}), flush=True)


def big_worker(path: str) -> None:
    """One warm-up and one timed DPDBSCAN fit on the saved points, in a fresh process (a
    long-lived process holding 11M points disturbs the other timings and its own)."""
    import numpy as np

    from privclust import DPDBSCAN

    warnings.simplefilter("ignore")
    with np.load(path) as f:
        X, bounds = f["X"], f["bounds"]
    seconds = []
    for _ in range(2):
        t0 = time.perf_counter()
        DPDBSCAN(epsilon=1.0, eps=0.036, min_samples=100, bounds=bounds, random_state=0).fit(X)
        seconds.append(time.perf_counter() - t0)
    print(json.dumps({"seconds": seconds[-1]}), flush=True)


# ---------------------------------------------------------------------------- driver side
def _git(*args, cwd=ROOT) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _float_ref() -> str:
    """The last commit with float64 sums: the parent of the commit that added the exact-sum
    module, or HEAD while it is not committed."""
    added = _git("log", "--diff-filter=A", "--format=%H", "--", "src/privclust/engine/_exact.py")
    return f"{added.splitlines()[-1]}^" if added else "HEAD"


def _float_checkout(worktree: Path, ref: str) -> Path:
    """A worktree of ``ref`` (added once, moved to ``ref`` when it holds another commit)."""
    commit = _git("rev-parse", ref)
    if not (worktree / "src" / "privclust").is_dir():
        _git("worktree", "add", "--detach", str(worktree), commit)
    elif _git("rev-parse", "HEAD", cwd=worktree) != commit:
        _git("checkout", "--detach", commit, cwd=worktree)
    return worktree / "src"


def _start(src: Path):
    env = dict(os.environ, PYTHONPATH=str(src))
    proc = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env, cwd=str(HERE))
    hello = json.loads(proc.stdout.readline())
    return proc, hello


def _fit_time(proc, name: str) -> float:
    proc.stdin.write(name + "\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())["seconds"]


def _big_fit_time(src: Path, path: Path) -> float:
    out = subprocess.run([sys.executable, __file__, "--big-worker", str(path)], check=True,
                         capture_output=True, text=True, cwd=str(HERE),
                         env=dict(os.environ, PYTHONPATH=str(src)))
    return json.loads(out.stdout.splitlines()[-1])["seconds"]


def _interleaved(sides, names, runs, fit_time) -> dict:
    """Fit times per (name, side), the sides alternating which goes first."""
    times = {(n, s): [] for n in names for s in sides}
    for run in range(runs):
        order = list(sides) if run % 2 == 0 else list(sides)[::-1]
        for name in names:
            for side in order:
                times[name, side].append(fit_time(side, name))
    return times


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=11, help="interleaved runs on Synth-10d")
    p.add_argument("--big-runs", type=int, default=5, help="interleaved runs of DPDBSCAN")
    p.add_argument("--big-n", type=int, default=11_000_000)
    p.add_argument("--quick", action="store_true", help="Synth-10d only")
    p.add_argument("--ref", default=None, help="the commit with float64 sums (default: see "
                   "above)")
    p.add_argument("--worktree", type=Path, default=Path("/tmp/privclust-float-sums"))
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--big-worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker()
    if args.big_worker:
        return big_worker(args.big_worker)
    ref = args.ref or _float_ref()
    sides = {"float": _float_checkout(args.worktree, ref), "exact": ROOT / "src"}
    procs = {}
    for side, src in sides.items():
        procs[side], hello = _start(src)
        commit = _git("rev-parse", "--short", "HEAD", cwd=src.parent)
        print(f"{side:>5}: privclust from {hello['ready']} (commit {commit}"
              f"{' + working tree' if side == 'exact' else ''})")
    names = ["DPLloyd", "DPM", "LSHSplits", "DPGMM"]
    for name in names:  # one warm-up fit per side
        for side in sides:
            _fit_time(procs[side], name)
    times = _interleaved(sides, names, args.runs, lambda s, n: _fit_time(procs[s], n))
    for proc in procs.values():
        proc.stdin.close()
        proc.wait()
    if not args.quick:
        path, source = _big_points(args.big_n, args.worktree.parent)
        print(f"DPDBSCAN: {source}, {args.big_n:,} points, a fresh process per fit")
        times.update(_interleaved(sides, ["DPDBSCAN"], args.big_runs,
                                  lambda s, n: _big_fit_time(sides[s], path)))
        names.append("DPDBSCAN")
    print("\nmedian fit time (s), interleaved runs; ratio = exact / float")
    print(f"  {'estimator':<12}{'runs':>6}{'float':>10}{'exact':>10}{'ratio':>8}")
    for name in names:
        f = statistics.median(times[name, "float"])
        e = statistics.median(times[name, "exact"])
        print(f"  {name:<12}{len(times[name, 'float']):>6}{f:>10.4f}{e:>10.4f}{e / f:>8.3f}")


if __name__ == "__main__":
    main()
