"""The ``privclust`` command.

::

    privclust cluster data.csv --algorithm dpm --epsilon 1 --bounds -100 100 --out model.json
    privclust predict model.json new.csv [--out labels.csv]
    privclust demo [--out-dir DIR] [--seed S]
    privclust datasets

User mistakes (missing file, bad bounds, epsilon <= 0, NaN in the data, a non-numeric column...)
end with one line ``privclust: error: ...`` on stderr and exit status 2, never a traceback;
warnings are one line ``privclust: warning: ...``. Anything else is a bug and raises.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import warnings
from pathlib import Path

import numpy as np

from . import datasets, io, viz
from ._readers import read_table
from .cluster import DPM
from .cluster._base import check_bounds, check_data
from .privacy import BudgetExceededError

__all__ = ["main"]

PROG = "privclust"
_PACKAGE_DIR = Path(__file__).resolve().parent

#: Algorithms the command line can run: name -> (estimator class, one-line description).
ALGORITHMS = {
    "dpm": (DPM, "DPM (DP-Mondrian, Liebenow et al.): private splits through sparse regions"),
}

_SEED_WARNING = (
    "--seed makes the noise reproducible: anyone who knows the seed can remove it. Use it for "
    "tests and benchmarks, never for a model you publish"
)
_SECURE_NOTE = (
    "randomness: secure (ChaCha20 keyed from the operating system); --seed S gives reproducible "
    "runs for testing, which are not secure"
)


class _UsageError(Exception):
    """A command-line mistake found by argparse."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block
        raise _UsageError(f"{message} (see '{self.prog} --help')")


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _warn_line(text: str) -> None:
    from tqdm import tqdm

    tqdm.write(f"{PROG}: warning: {_one_line(text)}", file=sys.stderr)


def _note(text: str) -> None:
    print(f"{PROG}: note: {_one_line(text)}", file=sys.stderr)


def _show_warning(message, category, filename, lineno, file=None, line=None):
    _warn_line(str(message))


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"must be a positive number (e.g. 1.0), got {text!r}")
    return v


def _delta(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(
            f"must be in (0, 1), typically far below 1/n (e.g. 1e-6); got {text!r}"
        )
    return v


def _nonneg_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return v


def _positive_int(text: str) -> int:
    v = _nonneg_int(text)
    if v == 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return v


def _header(text: str):
    value = {"auto": "auto", "yes": True, "no": False}.get(text.lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"expected auto, yes or no; got {text!r}")
    return value


def _check_output_path(path: str | Path, what: str) -> Path:
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{what} {path} is a folder; give a file name")
    if not path.parent.is_dir():
        raise FileNotFoundError(
            f"cannot write {what} {path}: the folder {path.parent} does not exist; create it first"
        )
    return path


@contextlib.contextmanager
def _progress(total: int):
    """A tqdm bar on stderr, only when stderr is a terminal."""
    from tqdm import tqdm

    try:
        enabled = sys.stderr.isatty()
    except (AttributeError, ValueError):
        enabled = False
    bar = tqdm(total=total, file=sys.stderr, disable=not enabled, leave=False,
               bar_format="{desc} |{bar}| {n_fmt}/{total_fmt} [{elapsed}]")
    try:
        yield bar
    finally:
        bar.close()


def _read_data(path: str, has_header) -> tuple[np.ndarray, list[str]]:
    X, names = read_table(path, has_header=has_header)
    try:
        return check_data(X, name=str(path)), names
    except ValueError as exc:
        if "NaN" not in str(exc):
            raise
        raise ValueError(f"{exc} (rows and columns counted from 0, header excluded)") from None


def _read_bounds(args, n_features: int) -> np.ndarray:
    if args.bounds is not None:
        try:
            return check_bounds(args.bounds, n_features)
        except ValueError as exc:
            raise ValueError(f"--bounds: {exc}") from None
    path = Path(args.bounds_file)
    if not path.is_file():
        raise FileNotFoundError(f"bounds file {path} does not exist")
    if path.suffix.lower() == ".json":
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"bounds file {path} is not valid JSON ({exc})") from None
        raw = content.get("bounds") if isinstance(content, dict) else content
        if raw is None:
            raise ValueError(
                f'bounds file {path} has no "bounds" entry; expected {{"bounds": [[lo, hi], ...]}}'
                " with one [lo, hi] per feature"
            )
    else:
        try:
            raw, _ = read_table(path)
        except ValueError as exc:
            raise ValueError(f"bounds file: {exc}; expected one 'lo,hi' row per feature") from None
        if raw.shape == (1, 2):
            raw = raw[0]
    try:
        return check_bounds(raw, n_features)
    except ValueError as exc:
        raise ValueError(f"bounds file {path}: {exc}") from None


def _format_table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]

    def fmt(row):
        cells = [str(c).rjust(w) if j in right else str(c).ljust(w)
                 for j, (c, w) in enumerate(zip(row, widths, strict=True))]
        return "  ".join(cells).rstrip()

    return [fmt(header)] + [fmt(r) for r in rows]


def _print_clusters(model, names: list[str], max_rows: int = 20, max_dims: int = 6) -> None:
    k = int(model.n_clusters_)
    sizes = np.asarray(model.cluster_sizes_)
    print(f"clusters found: {k}")
    if k == 0:
        return
    d = model.cluster_centers_.shape[1]
    if k <= max_rows and d <= max_dims:
        rows = [[str(i), str(int(sizes[i]))] + [f"{v:.4g}" for v in model.cluster_centers_[i]]
                for i in range(k)]
        header = ["cluster", "noisy size"] + [str(n) for n in names]
        for line in _format_table(header, rows, right=set(range(len(header)))):
            print("  " + line)
    else:
        shown = ", ".join(str(int(s)) for s in sizes[:max_rows])
        more = f", ... ({k - max_rows} more)" if k > max_rows else ""
        print(f"noisy sizes: {shown}{more}")
        print(f"centres: {k} x {d} (in the model file)")


# --------------------------------------------------------------------------------------------
# commands
# --------------------------------------------------------------------------------------------


def _cmd_cluster(args) -> int:
    name = args.algorithm.lower()
    if name not in ALGORITHMS:
        raise ValueError(
            f"unknown algorithm {args.algorithm!r}; available: {', '.join(sorted(ALGORITHMS))}"
        )
    cls, _ = ALGORITHMS[name]
    # Check every output before the budget is spent.
    out = _check_output_path(args.out, "model file") if args.out else None
    plot = None
    if args.plot:
        viz.require_matplotlib()
        plot = viz.check_figure_path(_check_output_path(args.plot, "plot"))
    if args.seed is not None:
        _warn_line(_SEED_WARNING)

    with _progress(total=2) as bar:
        bar.set_description_str(f"reading {args.input}")
        X, names = _read_data(args.input, args.header)
        bar.update()
        bounds = _read_bounds(args, X.shape[1])
        model = cls(epsilon=args.epsilon, delta=args.delta, bounds=bounds,
                    max_depth=args.max_depth, random_state=args.seed)
        bar.set_description_str(f"fitting {cls.__name__}")
        model.fit(X)
        bar.update()

    # Write the outputs first: the budget is spent, the release must not be lost.
    if out is not None:
        io.save_model(model, out)
    if plot is not None:
        fig = viz.plot_clusters(X, model, feature_names=names).figure
        viz.save_figure(fig, plot, close=True)

    n, d = X.shape
    delta = f"{args.delta:g}" if args.delta is not None else "auto (1/n_hat^1.5)"
    print(f"{cls.__name__} on {args.input}: {n:,} points x {d} feature(s), "
          f"epsilon={args.epsilon:g}, delta={delta}")
    _print_clusters(model, names)
    print()
    print(model.privacy_report_)
    if args.seed is None:
        print(_SECURE_NOTE)
    if out is not None:
        print(f"wrote model: {out} (the private release: centres, noisy sizes, split tree, "
              "privacy report; no data, no labels)")
    else:
        print("(pass --out model.json to save the model)")
    if plot is not None:
        print(f"wrote plot: {plot} (it shows the raw data points: not a private release)")
    return 0


def _cmd_predict(args) -> int:
    model = io.load_model(args.model)
    out = _check_output_path(args.out, "labels file") if args.out else None
    X, _ = _read_data(args.input, args.header)
    d = int(getattr(model, "n_features_in_", model.cluster_centers_.shape[1]))
    if X.shape[1] != d:
        raise ValueError(
            f"{args.input} has {X.shape[1]} column(s) but the model was fitted on {d}; give "
            "the same columns, in the same order, as for fitting"
        )
    labels = np.asarray(model.predict(X), dtype=np.int64)
    if out is None:
        sys.stdout.write("\n".join(str(v) for v in labels.tolist()) + "\n")
        return 0
    if out.suffix.lower() == ".npy":
        np.save(out, labels)
    else:
        out.write_text("label\n" + "\n".join(str(v) for v in labels.tolist()) + "\n",
                       encoding="utf-8")
    print(f"wrote {labels.size:,} labels to {out}")
    return 0


#: The demo's mixture: well-separated centres inside the public box [-50, 50]^2.
_DEMO_CENTRES = np.array(
    [[-30.0, -25.0], [0.0, -30.0], [28.0, -18.0], [-25.0, 22.0], [5.0, 8.0], [30.0, 28.0]]
)
_DEMO_STD = 3.0
_DEMO_BOUNDS = (-50.0, 50.0)
_DEMO_EPSILON = 1.0


def _cmd_demo(args) -> int:
    from sklearn.datasets import make_blobs

    from .metrics import accuracy_majority

    out_dir = Path(args.out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out-dir {out_dir} is a file; give a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    data_seed = 0 if args.seed is None else args.seed
    X, y = make_blobs(n_samples=args.n_samples, centers=_DEMO_CENTRES, cluster_std=_DEMO_STD,
                      random_state=data_seed)
    k_true = len(_DEMO_CENTRES)
    lo, hi = _DEMO_BOUNDS
    print(f"demo data: {args.n_samples:,} points, a 2-D Gaussian mixture of {k_true} clusters "
          f"(std {_DEMO_STD:g}), public bounds [{lo:g}, {hi:g}] per feature")
    if args.seed is not None:
        _warn_line(_SEED_WARNING)
    model = DPM(epsilon=_DEMO_EPSILON, bounds=_DEMO_BOUNDS, random_state=args.seed).fit(X)
    print(f"DPM(epsilon={_DEMO_EPSILON:g}, delta=auto) found {model.n_clusters_} cluster(s) "
          f"(true: {k_true})")
    _print_clusters(model, ["x0", "x1"])
    acc = accuracy_majority(y, model.labels_)
    print(f"accuracy (majority vote, DPM paper Def. 12): {acc:.4f}  "
          "[evaluation against the true labels; not part of the release]")
    report = model.privacy_report_
    spent = report.total()
    print(f"privacy spent: epsilon={spent.epsilon:.4g} of {report.planned.epsilon:g}, "
          f"delta={spent.delta:.3g} of {report.planned.delta:.3g}")
    print()
    print(report)
    if args.seed is None:
        print(_SECURE_NOTE)
    model_path = io.save_model(model, out_dir / "demo_model.json")
    print(f"wrote model: {model_path}")
    try:
        viz.require_matplotlib()
    except ImportError:
        _note('matplotlib is not installed, so no plot was drawn (pip install "privclust[plot]")')
        return 0
    fig = viz.plot_clusters(X, model).figure
    plot_path = viz.save_figure(fig, out_dir / "demo_clusters.png", close=True)
    print(f"wrote plot: {plot_path}")
    return 0


def _cmd_datasets(args) -> int:
    if args.data_dir is not None:
        folder = Path(args.data_dir)
        if not folder.is_dir():
            raise FileNotFoundError(f"--data-dir {folder} is not a folder")
    else:
        folder = datasets.default_data_dir()
    env = os.environ.get(datasets.DATA_ENV_VAR, "").strip()
    if folder is None and env:
        _note(
            f"{datasets.DATA_ENV_VAR}={env} is not a folder, so only the generated sets are "
            f"listed. Point {datasets.DATA_ENV_VAR} to the folder of NAME.npz + NAME.json files"
        )
    elif folder is None:
        _note(
            "no benchmark data folder found, so only the generated sets are listed. Set "
            f"{datasets.DATA_ENV_VAR}=/path/to/data (a folder of NAME.npz + NAME.json files) or "
            "pass --data-dir"
        )
    else:
        print(f"data folder: {folder}")
    entries = datasets.list_datasets(folder)
    rows = []
    for e in entries:
        classes = e.get("n_classes")
        rows.append([
            e["name"] + (" (generated)" if e.get("generated") else ""),
            f"{e['n']:,}" if isinstance(e.get("n"), int) else str(e.get("n", "-")),
            str(e.get("d", "-")),
            str(classes) if classes is not None else "-",
            e.get("literature") or "-",
        ])
    for line in _format_table(["name", "n", "d", "classes", "literature parameters"], rows,
                              right={1, 2, 3}):
        print(line)
    return 0


# --------------------------------------------------------------------------------------------
# parser and entry point
# --------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(
        prog=PROG,
        description="Differentially private clustering: fit, save, apply and plot private "
        "cluster models.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    algos = "; ".join(f"{k}: {v[1]}" for k, v in ALGORITHMS.items())
    p = sub.add_parser("cluster", help="cluster a data file privately",
                       description="Cluster a data file (CSV, NPY, NPZ, Parquet) with an "
                       "(epsilon, delta)-DP algorithm and print the clusters and the privacy "
                       "report.")
    p.add_argument("input", metavar="INPUT", help="data file: .csv/.tsv, .npy, .npz, .parquet")
    p.add_argument("--algorithm", default="dpm", help=f"clustering algorithm ({algos})")
    p.add_argument("--epsilon", type=_positive_float, required=True,
                   help="privacy budget epsilon (> 0)")
    p.add_argument("--delta", type=_delta, default=None,
                   help="privacy parameter delta in (0, 1); default 1/n_hat^1.5")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--bounds", nargs=2, type=float, metavar=("LO", "HI"),
                   help="public bounds of every feature (points outside are clipped)")
    g.add_argument("--bounds-file", metavar="F",
                   help='public bounds per feature: JSON {"bounds": [[lo, hi], ...]} or a CSV of '
                   "'lo,hi' rows")
    p.add_argument("--max-depth", type=int, default=7,
                   help="maximum depth of the split tree (at most 2^depth clusters; default 7)")
    p.add_argument("--out", metavar="MODEL.json", help="write the fitted model as JSON")
    p.add_argument("--plot", metavar="FIG.png", help="write a plot of the clusters")
    p.add_argument("--seed", type=_nonneg_int, default=None,
                   help="seed for reproducible (NOT secure) noise; default: secure randomness")
    p.add_argument("--header", type=_header, default="auto", metavar="{auto,yes,no}",
                   help="whether a CSV file has a header row (default: auto-detect)")
    p.set_defaults(func=_cmd_cluster)

    p = sub.add_parser("predict", help="apply a saved model to a data file",
                       description="Print (or write) the cluster label of every row of INPUT.")
    p.add_argument("model", metavar="MODEL.json", help="model written by 'privclust cluster --out'")
    p.add_argument("input", metavar="INPUT", help="data file with the model's features")
    p.add_argument("--out", metavar="LABELS.csv", help="write the labels (.csv or .npy)")
    p.add_argument("--header", type=_header, default="auto", metavar="{auto,yes,no}",
                   help="whether a CSV file has a header row (default: auto-detect)")
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser("demo", help="cluster a generated data set and plot it",
                       description="Generate a 2-D Gaussian mixture, cluster it with DPM at "
                       "epsilon=1, print the result and write demo_model.json and "
                       "demo_clusters.png.")
    p.add_argument("--out-dir", default=".", metavar="DIR",
                   help="folder for demo_model.json and demo_clusters.png (default: .)")
    p.add_argument("--seed", type=_nonneg_int, default=None,
                   help="seed for reproducible (NOT secure) noise and data")
    p.add_argument("--n-samples", type=_positive_int, default=20000, metavar="N",
                   help="number of generated points (default 20000)")
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("datasets", help="list the benchmark data sets",
                       description="List the stored benchmark sets (folder: "
                       f"${datasets.DATA_ENV_VAR} or ../shared/data) and the generated ones.")
    p.add_argument("--data-dir", default=None, metavar="DIR", help="data folder to list")
    p.set_defaults(func=_cmd_datasets)
    return parser


def _raised_in_privclust(exc: BaseException) -> bool:
    """True when the innermost frame of ``exc`` is privclust code (a deliberate, checked error)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    try:
        Path(tb.tb_frame.f_code.co_filename).resolve().relative_to(_PACKAGE_DIR)
    except ValueError:
        return False
    return True


_USER_ERRORS = (ValueError, TypeError, FileNotFoundError, BudgetExceededError, ImportError)


def main(argv=None) -> int:
    """Run the command line; returns the exit status (0 success, 2 user error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    if getattr(args, "func", None) is None:
        print(f"{PROG}: error: no command given; choose one of cluster, predict, demo, datasets "
              f"(see '{PROG} --help')", file=sys.stderr)
        return 2
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("always", category=UserWarning)
            warnings.showwarning = _show_warning
            return args.func(args)
    except _USER_ERRORS as exc:
        if not _raised_in_privclust(exc):
            raise
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `privclust predict ... | head`: stop quietly
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OSError as exc:  # permissions, full disk...: the environment, not a bug
        if exc.filename is None:
            raise
        print(f"{PROG}: error: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
