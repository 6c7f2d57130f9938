"""The ``privclust`` command.

::

    privclust cluster data.csv --epsilon 1 --bounds private --out model.json
    privclust cluster data.csv --algorithm dpm --epsilon 1 --bounds -100 100 --out model.json
    privclust cluster data.csv --algorithm dbscan --radius 0.5 --epsilon 1 --bounds -3 3
    privclust cluster data.csv --algorithm morse --base lloyd --n-components 12 --n-clusters 4 ...
    privclust predict model.json new.csv [--out labels.csv]
    privclust demo [--out-dir DIR] [--seed S]
    privclust datasets

``--algorithm`` is one of :data:`ALGORITHMS`; the options of all algorithms share one parser,
and one given to an algorithm it does not apply to is a user mistake (it would otherwise be
silently ignored).

User mistakes (missing file, bad bounds, epsilon <= 0, NaN in the data, a non-numeric column...)
end with one line ``privclust: error: ...`` on stderr and exit status 2, never a traceback;
warnings are one line ``privclust: warning: ...``. Anything else is a bug and raises.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

from . import _cli_parser as parser_
from . import _summaries, datasets, io, registry, viz
from ._cli_output import (
    PROG,
    _check_output_path,
    _note,
    _one_line,
    _progress,
    _show_warning,
    _warn_line,
)
from ._cli_parser import _join_bounds, _UsageError
from ._progress import disabled as fit_progress_disabled
from ._readers import read_table
from .cluster import (
    CoresetKMeans,
    MorseMerging,
)
from .cluster._base import check_bounds, check_data
from .privacy import BudgetExceededError

__all__ = ["main"]

_PACKAGE_DIR = Path(__file__).resolve().parent


#: Algorithms the command line can run, in the order ``--help`` lists them (the registry).
ALGORITHMS = registry.ENTRIES

_FAITHFUL_WARNING = (
    "--variant faithful is NOT differentially private: it publishes exact data-dependent "
    "values (the papers' steps as printed; see the privacy report). Use it to compare with the "
    "papers, never for a model you publish"
)

_SEED_WARNING = (
    "--seed makes the noise reproducible: anyone who knows the seed can remove it. Use it for "
    "tests and benchmarks, never for a model you publish"
)
def _spent_line(report) -> str:
    """The fit's spend against its plan, and the delta its guarantee holds at (with the delta
    rule: the reserved cap, not the per-data-set choice)."""
    spent, held = report.total(), report.guarantee()
    return (f"privacy spent: epsilon={spent.epsilon:.4g} of {report.planned.epsilon:g}; "
            f"guarantee: ({held.epsilon:.4g}, {held.delta:.3g})-DP")


_SECURE_NOTE = (
    "randomness: secure (ChaCha20 keyed from the operating system); --seed S gives reproducible "
    "runs for testing, which are not secure"
)


def _read_data(path: str, has_header) -> tuple[np.ndarray, list[str]]:
    X, names = read_table(path, has_header=has_header)
    bad = ~np.isfinite(X)
    if bad.any():  # counted from 0, as the Dask engine's message counts them
        rows = np.flatnonzero(bad.any(axis=1))
        r, j = int(rows[0]), int(np.flatnonzero(bad[rows[0]])[0])
        name = "" if names[j] == f"x{j}" else f" ({names[j]!r:.40})"
        raise ValueError(
            f"{path} has missing, NaN or infinite values in {rows.size:,} row(s) (first: row "
            f"{r}, column {j}{name}; rows and columns counted from 0, header excluded); remove "
            "or impute them before clustering"
        )
    return check_data(X, name=str(path)), names


def _read_dask_data(path: str, has_header):
    """A Parquet file or folder, or a CSV/TSV/TXT table (read with the NumPy engine's decisions
    on header, separator and comments: ``_readers.sniff_csv``), as lazy, validated data for the
    Dask engine."""
    from ._readers import LAZY_NAN_HINT, TEXT_EXTENSIONS, lazy_read_error, read_table_lazy
    from .cluster._base import is_dask_input

    try:
        import dask.dataframe  # noqa: F401
    except ImportError:
        raise ValueError("--engine dask needs the dask extra: pip install 'privclust[dask]'") \
            from None
    if is_dask_input(path):
        data = check_data(path, name=str(path))
        return data, list(data.columns) if data.columns else [f"x{j}" for j in range(data.shape[1])]
    if not str(path).lower().endswith(TEXT_EXTENSIONS):
        raise ValueError(f"--engine dask reads Parquet (a file or a folder) or CSV/TSV; got {path}")
    frame, names = read_table_lazy(path, has_header)
    try:
        return check_data(frame, name=str(path)), names
    except ValueError as exc:  # the values are parsed here, on the workers
        if not _raised_in_privclust(exc):
            raise lazy_read_error(path, exc) from None
        if "NaN" not in str(exc):
            raise
        raise ValueError(f"{exc} ({LAZY_NAN_HINT})") from None


@contextlib.contextmanager
def _dask_client(args):
    """The Dask client of an ``--engine dask`` run: the scheduler given, or none (the engine then
    starts a local cluster for the fit)."""
    if args.engine != "dask":
        if args.scheduler is not None:
            raise ValueError("--scheduler applies to --engine dask only")
        yield None
        return
    try:
        from distributed import Client
    except ImportError:
        raise ValueError("--engine dask needs the dask extra: pip install 'privclust[dask]'") \
            from None
    client = Client(args.scheduler) if args.scheduler else None
    try:
        yield client
    finally:
        if client is not None:
            client.close()


def _read_bounds(args, n_features: int) -> np.ndarray:
    if args.bounds == "private":
        return "private"
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


# --------------------------------------------------------------------------------------------
# commands
# --------------------------------------------------------------------------------------------


def _option_users(dest: str) -> str:
    """The algorithms (and morse bases) an algorithm-specific option applies to, for errors."""
    users = [name for name, e in ALGORITHMS.items() if dest in e.applicable()]
    bases = [b for b, e in registry.morse_bases().items() if dest in registry.base_options(e)]
    if bases and "morse" not in users:
        users.append(f"morse --base {'|'.join(bases)}")
    return ", ".join(users)


def _check_algorithm(args) -> tuple[str, registry.Entry]:
    """The chosen algorithm, after checking that every option given applies to it.

    The options of all algorithms share one parser (so ``--help`` lists them together); an
    option given to an algorithm that ignores it would silently do nothing, so it is an error.
    """
    if args.algorithm is None:  # the default on either engine
        args.algorithm = "coreset"
    name = args.algorithm.lower()
    if name not in ALGORITHMS:
        raise ValueError(
            f"unknown algorithm {args.algorithm!r}; available: {', '.join(ALGORITHMS)}"
        )
    entry = ALGORITHMS[name]
    base = args.base or registry.MORSE_DEFAULT_BASE
    options, required = registry.options_of(name, base)
    label = f"morse --base {base}" if name == "morse" else name
    for dest, option in registry.OPTIONS.items():
        if getattr(args, dest) is not None and dest not in options:
            raise ValueError(
                f"{option.flag} does not apply to --algorithm {label}; it is an option of "
                f"{_option_users(dest)}"
            )
    if args.delta is not None and not entry.takes_delta:
        raise ValueError(
            f"--delta does not apply to --algorithm {name}: {entry.cls.__name__} is pure "
            "epsilon-DP (delta = 0)"
        )
    for dest in required:
        if getattr(args, dest) is None:
            who = name if dest in entry.required else label  # name the base only if it matters
            option = registry.OPTIONS[dest]
            raise ValueError(f"--algorithm {who} needs {option.flag}: {option.hint}")
    if name == "morse" and args.n_components is not None and args.n_components < args.n_clusters:
        raise ValueError(
            f"--n-components ({args.n_components}) is the number of base components that morse "
            f"merges into --n-clusters ({args.n_clusters}) clusters; it must be at least "
            "--n-clusters"
        )
    return name, entry


def _build_estimator(name: str, args, bounds: np.ndarray):
    """The estimator for ``--algorithm name`` from the command-line options."""
    values = {dest: getattr(args, dest) for dest in registry.OPTIONS}
    if name != "morse":
        return ALGORITHMS[name].build(
            values, epsilon=args.epsilon, delta=args.delta, bounds=bounds,
            random_state=args.seed,
        )
    # --epsilon and --delta are the pipeline's totals: MorseMerging splits them between the
    # base and the covariance pass in one plan, exactly as the Python API does. Its seed seeds
    # the whole pipeline: the base draws from the same stream.
    base_entry = ALGORITHMS[args.base or registry.MORSE_DEFAULT_BASE]
    size = base_entry.morse_base.size_param
    if size is not None:
        values = values | {"n_clusters": None, "n_components": None}
    base = base_entry.build(values, epsilon=args.epsilon, bounds=bounds)
    if size is not None:
        base.set_params(**{size: args.n_components})
    return MorseMerging(
        base, n_clusters=args.n_clusters, epsilon=args.epsilon, delta=args.delta,
        random_state=args.seed,
    )


def _describe_fit(name: str, model) -> str:
    if name == "morse":
        return f"MorseMerging over {type(model.base_estimator).__name__}"
    return type(model).__name__


def _read_and_fit(args, name: str, algo, plot):
    """Read the data (in memory, or lazily for ``--engine dask``) and fit; returns
    ``(model, X, names, title)``."""
    if plot is not None and args.engine == "dask":
        raise ValueError("--plot draws the data points, which --engine dask does not bring to "
                         "this machine; leave out --plot")
    with _dask_client(args), _progress(total=2) as bar:
        bar.set_description_str(f"reading {args.input}")
        if args.engine == "dask":
            X, names = _read_dask_data(args.input, args.header)
        else:
            X, names = _read_data(args.input, args.header)
        bar.update()
        bounds = _read_bounds(args, X.shape[1])
        if plot is not None and algo.plot_2d_only and X.shape[1] != 2:
            raise ValueError(
                f"--plot for --algorithm {name} draws the {algo.plot_subject} of 2-D data only; "
                f"the data has "
                f"{X.shape[1]} features (leave out --plot)"
            )
        model = _build_estimator(name, args, bounds)
        title = _describe_fit(name, model)
        bar.set_description_str(f"fitting {title}")
        try:
            with fit_progress_disabled():  # this command shows its own progress
                model.fit(X)
        except ValueError as exc:
            raise ValueError(_in_cli_words(str(exc), args)) from None
        bar.update()
    return model, X, names, title


def _cmd_cluster(args) -> int:
    name, algo = _check_algorithm(args)
    # Check every output before the budget is spent.
    out = _check_output_path(args.out, "model file") if args.out else None
    plot = None
    if args.plot:
        viz.require_matplotlib()
        plot = viz.check_figure_path(_check_output_path(args.plot, "plot"))
    if args.seed is not None:
        _warn_line(_SEED_WARNING)
    if args.variant == "faithful":
        _warn_line(_FAITHFUL_WARNING)

    model, X, names, title = _read_and_fit(args, name, algo, plot)

    # Write the outputs first: the budget is spent, the release must not be lost.
    if out is not None:
        io.save_model(model, out)
    if plot is not None:
        viz.save_figure(algo.plot(model, X, names).figure, plot, close=True)

    n, d = X.shape
    if args.variant == "faithful":
        delta = "0 (but NOT private: --variant faithful)"
    elif not algo.takes_delta:
        delta = "0 (pure epsilon-DP)"
    elif args.delta is not None:
        delta = f"{args.delta:g}"
    else:
        delta = "auto (the delta rule: min(1e-5, 1/n_hat^1.5))"
    print(
        f"{title} on {args.input}: {n:,} points x {d} feature(s) [your data: the exact count "
        f"is not part of the release], epsilon={args.epsilon:g}, delta={delta}"
    )
    algo.summary(model, X, names)
    report = model.privacy_report_
    print(_spent_line(report)
          + ("" if report.private else "  ** NOT PRIVATE (faithful variant) **"))
    print()
    print(report)
    if args.seed is None:
        print(_SECURE_NOTE)
    if out is not None:
        print(
            f"wrote model: {out} (the private release: {algo.contents}, privacy "
            "report; no data, no labels)"
        )
    else:
        print("(pass --out model.json to save the model)")
    if plot is not None:
        if name == "morse" and d != 2:
            shows = "the merge hierarchy: post-processing of the private model"
        elif d > 2:
            shows = ("it shows the raw data points, projected on the two directions that "
                     "separate the released centres most: not a private release")
        else:
            shows = "it shows the raw data points: not a private release"
        print(f"wrote plot: {plot} ({shows})")
    return 0


def _cmd_plan(args) -> int:
    """``privclust plan``: the planner's statement for the estimator the options describe."""
    from . import planner

    name, _ = _check_algorithm(args)
    if len(args.n) > 2:
        raise ValueError("--n takes N or LOW HIGH")
    if args.bounds == "private":
        raise ValueError(
            "privclust plan needs public bounds: --bounds private estimates them from the data, "
            "which a plan never reads; give the range the data can take, --bounds LO HI or "
            "--bounds-file"
        )
    bounds = _read_bounds(args, args.d)
    est = _build_estimator(name, args, bounds)
    n = args.n[0] if len(args.n) == 1 else tuple(args.n)
    fit_plan = planner.plan(est, n, d=args.d, expected_clusters=args.expected_clusters)
    print(json.dumps(fit_plan.to_dict(), indent=2) if args.json else fit_plan)
    return 0


def _cmd_predict(args) -> int:
    model = io.load_model(args.model)  # warns if the model is not private
    out = _check_output_path(args.out, "labels file") if args.out else None
    X, _ = _read_data(args.input, args.header)
    d = int(model.n_features_in_)
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
        out.write_text(
            "label\n" + "\n".join(str(v) for v in labels.tolist()) + "\n", encoding="utf-8"
        )
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
    """The default estimator, CoresetKMeans, on a generated 2-D mixture: it finds the number of
    clusters itself."""
    from sklearn.datasets import make_blobs

    from .metrics import accuracy_majority, ari

    if args.out_dir is None:  # never litter the current folder (a checkout, say)
        out_dir = Path(tempfile.mkdtemp(prefix="privclust-demo-"))
    else:
        out_dir = Path(args.out_dir)
        if out_dir.exists() and not out_dir.is_dir():
            raise ValueError(f"--out-dir {out_dir} is a file; give a folder")
        out_dir.mkdir(parents=True, exist_ok=True)
    data_seed = 0 if args.seed is None else args.seed
    X, y = make_blobs(
        n_samples=args.n_samples,
        centers=_DEMO_CENTRES,
        cluster_std=_DEMO_STD,
        random_state=data_seed,
    )
    k_true = len(_DEMO_CENTRES)
    lo, hi = _DEMO_BOUNDS
    print(
        f"demo data: {args.n_samples:,} points, a 2-D Gaussian mixture of {k_true} clusters "
        f"(std {_DEMO_STD:g}), public bounds [{lo:g}, {hi:g}] per feature"
    )
    if args.seed is not None:
        _warn_line(_SEED_WARNING)
    model = CoresetKMeans(epsilon=_DEMO_EPSILON, bounds=_DEMO_BOUNDS,
                          random_state=args.seed).fit(X)
    print(
        f"CoresetKMeans(epsilon={_DEMO_EPSILON:g}, delta=auto), not told k, found "
        f"{model.n_clusters_} cluster(s) (true: {k_true})"
    )
    _summaries.print_centres(model, None, ["x0", "x1"])
    print(
        f"accuracy (majority vote): {accuracy_majority(y, model.labels_):.4f}, adjusted Rand "
        f"index: {ari(y, model.labels_):.4f}  [evaluation against the true labels; not part of "
        "the release]"
    )
    report = model.privacy_report_
    print(_spent_line(report))
    print()
    print(report)
    if args.seed is None:
        print(_SECURE_NOTE)
    model_path = io.save_model(model, out_dir / "demo_model.json")
    print(f"wrote model: {model_path}"
          + ("  (a temporary folder; --out-dir DIR writes elsewhere)"
             if args.out_dir is None else ""))
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
        rows.append(
            [
                e["name"] + (" (generated)" if e.get("generated") else ""),
                f"{e['n']:,}" if isinstance(e.get("n"), int) else str(e.get("n", "-")),
                str(e.get("d", "-")),
                str(classes) if classes is not None else "-",
                e.get("literature") or "-",
            ]
        )
    for line in _summaries.format_table(
        ["name", "n", "d", "classes", "literature parameters"], rows, right={1, 2, 3}
    ):
        print(line)
    return 0


# --------------------------------------------------------------------------------------------
# parser and entry point
# --------------------------------------------------------------------------------------------


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


#: Phrases of estimator messages -> what the command line calls them (a hint must name a
#: flag that exists); then every parameter an option sets is named by its flag (_FLAG_OF).
_CLI_WORDS = (
    ("use a larger eps (alpha) or eta, or narrower bounds", "use a larger --radius or "
     "narrower --bounds"),
    ("use a larger eta or fewer dimensions", "use fewer features (the Python API's "
     "DPDBSCAN(eta=...) changes the cell width)"),
    ("eps (the DBSCAN radius alpha)", "--radius"),
    ("eps (alpha)", "--radius"),
    ("min_samples + min_samples_shift", "--min-samples plus the noise shift"),
    ("raise min_samples or min_samples_shift", "raise --min-samples"),
    ("larger eps or epsilon", "larger --radius or --epsilon"),
)
#: Python parameter -> flag, for the parameters the options set (``name=value`` and the bare
#: name), and the budget's, named only in the ``name=value`` form ("(epsilon, delta)-DP" stays).
_FLAG_OF = {p: o.flag for o in registry.OPTIONS.values() for p in o.params}
_ASSIGNED_ONLY = {"epsilon": "--epsilon", "delta": "--delta", "random_state": "--seed"}


def _in_cli_words(message: str, args=None) -> str:
    """An estimator's message with Python parameter names replaced by the flags that set them
    (``max_depth=40`` -> ``--max-depth 40``)."""
    for python, cli_words in _CLI_WORDS:
        message = message.replace(python, cli_words)
    flags = dict(_FLAG_OF)
    if args is not None and (getattr(args, "algorithm", None) or "").lower() == "morse":
        base = ALGORITHMS[args.base or registry.MORSE_DEFAULT_BASE].morse_base.size_param
        if base == "n_clusters" and args.n_components != args.n_clusters:
            # the base's n_clusters is set by --n-components: name it by its value
            message = re.sub(rf"(?<![\w.-])n_clusters={args.n_components}\b",
                             f"--n-components {args.n_components}", message)
    for python, flag in (flags | _ASSIGNED_ONLY).items():
        message = re.sub(rf"(?<![\w.'(-]){python}=(?=\S)", f"{flag} ", message)
    for python, flag in flags.items():
        message = re.sub(rf"(?<![\w.'-]){python}(?![\w'(-])", flag, message)
    return message


def build_parser():
    """The ``privclust`` parser (every subcommand and option)."""
    return parser_.build_parser(
        {"cluster": _cmd_cluster, "plan": _cmd_plan, "predict": _cmd_predict,
         "demo": _cmd_demo, "datasets": _cmd_datasets}
    )


def main(argv=None) -> int:
    """Run the command line; returns the exit status (0 success, 2 user error)."""
    parser = build_parser()
    argv = _join_bounds(list(sys.argv[1:] if argv is None else argv))
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    if getattr(args, "func", None) is None:
        print(
            f"{PROG}: error: no command given; choose one of cluster, predict, demo, datasets "
            f"(see '{PROG} --help')",
            file=sys.stderr,
        )
        return 2
    # estimators name their Python parameters; the fitting commands' users typed flags
    words = ((lambda text: _in_cli_words(text, args)) if args.command in ("cluster", "plan")
             else str)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("always", category=UserWarning)
            warnings.showwarning = lambda message, *rest, **kw: _show_warning(
                words(str(message)), *rest, **kw)
            return args.func(args)
    except _USER_ERRORS as exc:
        if not _raised_in_privclust(exc):
            raise
        print(f"{PROG}: error: {_one_line(words(str(exc)))}", file=sys.stderr)
        return 2
    except csv.Error as exc:  # the csv module's own error (either engine), not a ValueError
        what = ("a field of more than 131,072 characters, too long to be a number" if
                "field limit" in str(exc) else "a line the CSV reader cannot parse")
        print(f"{PROG}: error: {getattr(args, 'input', 'the input')} has {what}; check the "
              "separator and that every field is a number", file=sys.stderr)
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
