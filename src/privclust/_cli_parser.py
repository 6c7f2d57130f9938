"""The command line's parser: argument types, ``--bounds`` in any float spelling, and the
subcommands' options (the algorithms and their options come from :mod:`privclust.registry`)."""

from __future__ import annotations

import argparse
import math
import re
import textwrap
from collections.abc import Callable, Mapping

from . import datasets, registry
from ._cli_output import PROG

ALGORITHMS = registry.ENTRIES


class _AmbiguousEps(argparse.Action):
    """``--eps``: refused, since DBSCAN users mean the radius and DP users the budget.

    Without it argparse would read ``--eps 0.5`` as an abbreviation of ``--epsilon``, silently
    turning a DBSCAN radius into the privacy budget.
    """

    def __call__(self, parser, namespace, values, option_string=None):
        raise argparse.ArgumentError(
            self,
            "is ambiguous: give the privacy budget as --epsilon and the DBSCAN "
            "neighbourhood radius as --radius",
        )


class _UsageError(Exception):
    """A command-line mistake found by argparse."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block
        # "argument --min-samples: must be ..." -> "--min-samples must be ..."
        message = re.sub(r"^argument ([^:]+?)(/[^:]+)?: ((?:must|is) )?",
                         lambda m: f"{m.group(1)} {m.group(3) or ': '}".replace(" : ", ": "),
                         message)
        raise _UsageError(f"{message} (see '{self.prog} --help')")


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------


def _echo(text: str) -> str:
    """What the user typed, as a message shows it: numbers as typed, other text quoted, and
    anything long cut (a 300-digit number is not repeated in full)."""
    text = str(text)
    if len(text) > 40:
        text = text[:24] + "..." + text[-8:]
    try:
        float(text)
    except ValueError:
        return repr(text)
    return text


def _number(text: str, kind=float, what: str = "a number"):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {_echo(text)}") from None


def _positive_float(text: str) -> float:
    v = _number(text)
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(
            f"must be a positive number (e.g. 1.0), got {_echo(text)}")
    return v


def _delta(text: str) -> float:
    v = _number(text)
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(
            f"must be a number in (0, 1), typically far below 1/n (e.g. 1e-6); got {_echo(text)}"
        )
    return v


def _whole(text: str, least: int) -> int:
    what = f"a whole number of at least {least}"
    v = _number(text, int, what)
    if v < least:
        raise argparse.ArgumentTypeError(f"must be {what}, got {_echo(text)}")
    return v


def _nonneg_int(text: str) -> int:
    return _whole(text, 0)


def _positive_int(text: str) -> int:
    return _whole(text, 1)


def _header(text: str):
    value = {"auto": "auto", "yes": True, "no": False}.get(text.lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"must be auto, yes or no; got {_echo(text)}")
    return value


def _add_header_option(parser) -> None:
    parser.add_argument(
        "--header",
        type=_header,
        default="auto",
        metavar="{auto,yes,no}",
        help="whether a CSV file has a header row (default: auto-detect)",
    )


def build_parser(commands: Mapping[str, Callable]) -> argparse.ArgumentParser:
    """The parser of every subcommand; ``commands`` maps each name to the function it runs."""
    from . import __version__

    parser = _Parser(
        prog=PROG,
        description="Differentially private clustering: fit, save, apply and plot private "
        "cluster models.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    _add_cluster_parser(sub, commands["cluster"])
    _add_plan_parser(sub, commands["plan"])

    p = sub.add_parser(
        "predict",
        help="apply a saved model to a data file",
        description="Print (or write) the cluster label of every row of INPUT.",
    )
    p.add_argument("model", metavar="MODEL.json", help="model written by 'privclust cluster --out'")
    p.add_argument("input", metavar="INPUT", help="data file with the model's features")
    p.add_argument("--out", metavar="LABELS.csv", help="write the labels (.csv or .npy)")
    _add_header_option(p)
    p.set_defaults(func=commands["predict"])

    p = sub.add_parser(
        "demo",
        help="cluster a generated data set and plot it",
        description="Generate a 2-D Gaussian mixture, cluster it with the default estimator, "
        "CoresetKMeans (it finds the number of clusters itself), at epsilon=1, print the "
        "result and write demo_model.json and demo_clusters.png into --out-dir (default: a "
        "new temporary folder, named at the end).",
    )
    p.add_argument(
        "--out-dir",
        default=None,
        metavar="DIR",
        help="folder for demo_model.json and demo_clusters.png (default: a new temporary "
        "folder; the demo prints where it wrote them)",
    )
    p.add_argument(
        "--seed",
        type=_nonneg_int,
        default=None,
        help="seed for reproducible (NOT secure) noise and data",
    )
    p.add_argument(
        "--n-samples",
        type=_positive_int,
        default=20000,
        metavar="N",
        help="number of generated points (default 20000)",
    )
    p.set_defaults(func=commands["demo"])

    p = sub.add_parser(
        "datasets",
        help="list the benchmark data sets",
        description="List the stored benchmark sets (folder: "
        f"${datasets.DATA_ENV_VAR} or ../shared/data) and the generated ones.",
    )
    p.add_argument("--data-dir", default=None, metavar="DIR", help="data folder to list")
    p.set_defaults(func=commands["datasets"])
    return parser


def _add_cluster_parser(sub, run) -> None:
    width = max(len(k) for k in ALGORITHMS)
    algos = "\n".join(
        textwrap.fill(
            a.description,
            width=100,
            initial_indent=f"  {k:<{width}}  ",
            subsequent_indent=" " * (width + 4),
        )
        for k, a in ALGORITHMS.items()
    )
    p = sub.add_parser(
        "cluster",
        help="cluster a data file privately",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Cluster a data file (CSV, NPY, NPZ, Parquet) with an (epsilon, delta)-DP "
        "algorithm\nand print the clusters and the privacy report.",
        epilog=f"algorithms (--algorithm):\n{algos}\n\n"
        "An option that does not apply to the chosen algorithm is an error. Examples:\n"
        "  privclust cluster data.csv --algorithm dbscan --radius 0.5 --min-samples 10 \\\n"
        "      --epsilon 1 --bounds -3 3\n"
        "  privclust cluster data.csv --algorithm morse --base mixture --n-components 12 \\\n"
        "      --n-clusters 4 --epsilon 2 --bounds -100 100 --out model.json",
    )
    p.add_argument("input", metavar="INPUT", help="data file: .csv/.tsv, .npy, .npz, .parquet")
    p.add_argument(
        "--algorithm",
        default=None,
        metavar="NAME",
        help=f"clustering algorithm: {', '.join(ALGORITHMS)} (default: coreset, which finds the "
        "number of clusters itself, on either engine; see the list below)",
    )
    _add_budget_options(p)
    _add_algorithm_options(p)
    g = p.add_argument_group("engine (data beyond one machine's memory)")
    g.add_argument(
        "--engine",
        choices=("numpy", "dask"),
        default="numpy",
        help="numpy: the data in memory (default); dask: a Parquet file or folder (or a CSV) "
        "read lazily on a Dask cluster (pip install 'privclust[dask]')",
    )
    g.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="with --engine dask: a running Dask scheduler, e.g. tcp://host:8786 (default: a "
        "local cluster for this run)",
    )
    g = p.add_argument_group("output")
    g.add_argument("--out", metavar="MODEL.json", help="write the fitted model as JSON")
    g.add_argument("--plot", metavar="FIG.png", help="write a plot of the clusters")
    g.add_argument(
        "--seed",
        type=_nonneg_int,
        default=None,
        help="seed for reproducible (NOT secure) noise; default: secure randomness",
    )
    _add_header_option(g)
    p.set_defaults(func=run)


def _add_plan_parser(sub, run) -> None:
    p = sub.add_parser(
        "plan",
        help="what a fit can find, before any budget is spent (reads no data)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="State from public inputs only (n, d, bounds, epsilon, delta, the "
        "algorithm's options) what a fit can and cannot find.",
        epilog="Example:\n  privclust plan --algorithm dpm --epsilon 0.5 --bounds -100 100 "
        "--n 20000 --d 10 --expected-clusters 8",
    )
    p.add_argument(
        "--algorithm",
        default="coreset",
        metavar="NAME",
        help=f"clustering algorithm: {', '.join(ALGORITHMS)} (default: coreset)",
    )
    _add_budget_options(p, private_bounds=False)
    _add_algorithm_options(p)
    g = p.add_argument_group("public inputs")
    g.add_argument("--n", type=_positive_int, nargs="+", required=True, metavar="N",
                   help="number of records, or LOW HIGH for a range")
    g.add_argument("--d", type=_positive_int, required=True, help="number of features")
    g.add_argument("--expected-clusters", type=_positive_int, default=None, metavar="K",
                   help="the number of clusters you expect")
    g.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=run, seed=None, engine="numpy", scheduler=None)


def _add_budget_options(p, private_bounds: bool = True) -> None:
    g = p.add_argument_group("privacy budget (every algorithm)")
    g.add_argument(
        "--epsilon",
        type=_positive_float,
        required=True,
        help="privacy budget epsilon (> 0), the total for the whole fit",
    )
    g.add_argument(
        "--delta",
        type=_delta,
        default=None,
        help="privacy parameter delta in (0, 1), the total for the whole fit "
        f"({_delta_users()}; the others are pure epsilon-DP); default: the delta rule, "
        "min(1e-5, 1/n_hat^1.5) from a released count",
    )
    g.add_argument("--eps", action=_AmbiguousEps, nargs="?", help=argparse.SUPPRESS)
    b = g.add_mutually_exclusive_group(required=True)
    b.add_argument(
        "--bounds",
        type=_bounds_pair,
        metavar="LO HI",
        help="public bounds of every feature (points outside are clipped): two numbers in any "
        "float spelling (--bounds -1e3 1e3) or one pair (--bounds=-10,10)"
        + ("; or 'private': estimated with 10%% of --epsilon (no public bounds needed; sparse "
           "tails are clipped)" if private_bounds else ""),
    )
    b.add_argument(
        "--bounds-file",
        metavar="F",
        help='public bounds per feature: JSON {"bounds": [[lo, hi], ...]} or a CSV of '
        "'lo,hi' rows",
    )


def _users(dest: str) -> str:
    """The algorithms (and morse bases) an option applies to, from the registry."""
    users = [name for name, e in ALGORITHMS.items() if dest in e.applicable()]
    bases = [b for b, e in registry.morse_bases().items() if dest in registry.base_options(e)]
    if bases and "morse" not in users:
        users.append(f"morse --base {'|'.join(bases)}")
    return ", ".join(users)


def _required_by(dest: str) -> str:
    """The algorithms that cannot run without an option (the registry's ``required``)."""
    return ", ".join(name for name, e in ALGORITHMS.items() if dest in e.required)


def _optional_for(dest: str) -> str:
    """The algorithms that take an option but run without it."""
    return ", ".join(name for name, e in ALGORITHMS.items()
                     if dest in e.applicable() and dest not in e.required)


def _centre_bases() -> str:
    """The morse bases that are centre models (the mixture brings its own components)."""
    return ", ".join(b for b, e in registry.morse_bases().items()
                     if "n_components" not in e.applicable())


def _delta_users() -> str:
    return ", ".join(name for name, e in ALGORITHMS.items() if e.takes_delta)


def _add_algorithm_options(p) -> None:
    g = p.add_argument_group(f"tree depth ({_users('max_depth')})")
    g.add_argument(
        "--max-depth",
        type=_nonneg_int,
        default=None,
        help="maximum depth of the tree the algorithm builds (dpm: at most 2^depth clusters, "
        f"default {ALGORITHMS['dpm'].cli_defaults['max_depth']}; the others: their own "
        "default)",
    )
    g = p.add_argument_group("dbscan")
    g.add_argument(
        "--radius",
        type=_positive_float,
        default=None,
        metavar="R",
        help="DBSCAN neighbourhood radius (called eps in DBSCAN, alpha in the paper) "
        "in the data's units; NOT the privacy budget, which is --epsilon. Required",
    )
    g.add_argument(
        "--min-samples",
        type=_positive_int,
        default=None,
        metavar="M",
        help="points within --radius that make a core point (MinPts, the point "
        "itself included; default 5)",
    )
    g = p.add_argument_group("number of clusters, iterations and the other options")
    g.add_argument(
        "--n-clusters",
        type=_positive_int,
        default=None,
        metavar="K",
        help=f"number of clusters k, required by {_required_by('n_clusters')} (morse: the "
        f"clusters after merging); optional for {_optional_for('n_clusters')}, which finds k "
        "itself when it is not given",
    )
    sized = "|".join(b for b, e in registry.morse_bases().items() if e.morse_base.size_param)
    g.add_argument(
        "--n-components",
        type=_positive_int,
        default=None,
        metavar="K0",
        help="mixture: number of Gaussian components (required); morse --base "
        f"{sized}: the base's number of components/centres, at least --n-clusters "
        "(required)",
    )
    g.add_argument(
        "--iterations",
        type=_positive_int,
        default=None,
        metavar="T",
        help="number of iterations (default: lloyd: Su et al.'s rule on a noisy "
        "count, at most 7; kmeans-guarantee, subclustering, mixture: 10)",
    )
    g.add_argument(
        "--variant",
        choices=("private", "faithful"),
        default=None,
        help="kmeans-guarantee, subclustering: 'private' (default) or 'faithful' "
        "(the papers' steps as printed: NOT private)",
    )
    g.add_argument(
        "--internal-k",
        type=_positive_int,
        default=None,
        metavar="J",
        help="subclustering: sub-clusters per convergent zone (default 4)",
    )
    g.add_argument(
        "--base",
        choices=tuple(registry.morse_bases()),
        default=None,
        help=f"morse: the private base model whose components are merged (default "
        f"{registry.MORSE_DEFAULT_BASE}); a centre model ({_centre_bases()}) adds a private "
        "covariance pass",
    )


def _bounds_pair(text: str) -> tuple[float, float]:
    """``--bounds``: "lo,hi" (what :func:`_join_bounds` makes of ``--bounds LO HI``), or
    "private" (estimated privately from a share of the budget)."""
    if text.strip().lower() == "private":
        return "private"
    parts = [t for t in text.replace(",", " ").split() if t]
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(
            f"must be two numbers LO HI (e.g. --bounds -100 100 or --bounds=-100,100), got "
            f"{_echo(text)}"
        )
    try:
        lo, hi = (float(t) for t in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be numbers, got {_echo(text)}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise argparse.ArgumentTypeError(
            f"must be finite (got {lo:g}, {hi:g}): give the range your data can take, "
            "e.g. --bounds -100 100"
        )
    return lo, hi


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _join_bounds(argv: list[str]) -> list[str]:
    """``--bounds LO HI`` -> ``--bounds=LO,HI``: argparse reads "-1e3" or "-inf" as an option,
    so the two values are joined before it sees them."""
    out, i = [], 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--bounds" and i + 2 < len(argv) and all(
            _is_number(t) for t in argv[i + 1 : i + 3]
        ):
            out.append(f"--bounds={argv[i + 1]},{argv[i + 2]}")
            i += 3
            continue
        out.append(tok)
        i += 1
    return out


