"""One entry per estimator: everything the command line, the model files and the plots need.

Adding an estimator is one new module in :mod:`privclust.cluster` plus one :class:`Entry` here:

- its command-line options come from its constructor's signature: an option of
  :data:`OPTIONS` applies to every estimator whose constructor has one of the option's
  parameters (``--iterations`` is ``n_iter`` or ``max_iter``), and ``--delta`` to every
  estimator that takes ``delta``;
- ``summary`` prints the fitted model (:mod:`privclust._summaries`), ``plot`` draws it
  (:mod:`privclust.viz`), ``codec`` saves and loads it (:mod:`privclust.io`), and ``contents``
  says in words what a model file holds.

The defaults fit a centre model (``cluster_centers_``, ``cluster_sizes_``, ``n_clusters_``), so
a new k-means-like estimator needs nothing but its class, a description and its required
options.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import _summaries, viz
from .cluster import (
    DPDBSCAN,
    DPM,
    DPGaussianMixture,
    DPLloyd,
    KMeansGuarantee,
    MorseMerging,
    SubClustering,
)
from .cluster.coreset import CoresetKMeans
from .cluster.dpcube import DPCube
from .cluster.emmc import EMMC
from .cluster.hdbscan import DPHDBSCAN
from .cluster.hst import HSTKMeans
from .cluster.lsh_splits import LSHSplits
from .io import codecs, register_built_in_codec
from .io._density import DENSITY_CODEC

__all__ = ["ENTRIES", "OPTIONS", "Entry", "MorseBase", "Option", "entry_for", "options_of"]


@dataclass(frozen=True)
class Option:
    """One algorithm-specific command-line option."""

    flag: str
    #: constructor parameters the option sets (the first one the estimator has)
    params: tuple[str, ...]
    #: what to say when a required option is missing (None: never required)
    hint: str | None = None


#: The algorithm-specific options: argparse dest -> option. The parser's help texts live in
#: the command line; which estimator an option applies to is read from the signatures.
OPTIONS: dict[str, Option] = {
    "max_depth": Option("--max-depth", ("max_depth",)),
    "radius": Option(
        "--radius",
        ("eps",),
        "the DBSCAN neighbourhood radius in the data's units (not the privacy budget), "
        "e.g. --radius 0.5",
    ),
    "min_samples": Option("--min-samples", ("min_samples",)),
    "n_clusters": Option(
        "--n-clusters", ("n_clusters",), "the number of clusters k, e.g. --n-clusters 5"
    ),
    "n_components": Option(
        "--n-components",
        ("n_components",),
        "the number of mixture components (morse: of base centres, K0, at least "
        "--n-clusters), e.g. --n-components 8",
    ),
    "variant": Option("--variant", ("variant",)),
    "internal_k": Option("--internal-k", ("internal_k",)),
    "iterations": Option("--iterations", ("n_iter", "max_iter")),
    "base": Option("--base", ()),
}


@dataclass(frozen=True)
class MorseBase:
    """How an estimator serves as ``morse --base``: which parameter ``--n-components`` sets."""

    size_param: str | None = None


def _centre_plot(model, X, names):
    """Two features as they are; more, projected on the two directions that separate the
    released centres most (post-processing of the release)."""
    dims = "centres" if X.shape[1] > 2 else (0, 1)
    return viz.plot_clusters(X, model, dims=dims, feature_names=names)


@dataclass(frozen=True)
class Entry:
    """One estimator as the command line, the model files and the plots see it."""

    name: str
    cls: type
    description: str
    #: options without a sensible default (a radius in the data's units, k...)
    required: tuple[str, ...] = ()
    #: command-line defaults that differ from the constructor's
    cli_defaults: Mapping[str, Any] = field(default_factory=dict)
    #: the options, when not read from the signature (MorseMerging: its base's)
    options: tuple[str, ...] | None = None
    summary: Callable = _summaries.print_centres
    plot: Callable = _centre_plot
    #: the plot draws 2-D data only
    plot_2d_only: bool = False
    #: what the plot shows, for messages
    plot_subject: str = "clusters"
    codec: codecs.Codec = codecs.CENTRES
    contents: str = "centres, noisy sizes"
    morse_base: MorseBase | None = None
    #: command-line options (dests) of a small example fit, for the docs and contract tests
    example: Mapping[str, Any] = field(default_factory=dict)

    def applicable(self) -> tuple[str, ...]:
        """The option dests that apply to this estimator."""
        if self.options is not None:
            return self.options
        return tuple(dest for dest in OPTIONS if self.param_for(dest) is not None)

    def param_for(self, dest: str) -> str | None:
        """The constructor parameter that option ``dest`` sets (None: it does not apply)."""
        names = inspect.signature(self.cls).parameters
        return next((p for p in OPTIONS[dest].params if p in names), None)

    @property
    def takes_delta(self) -> bool:
        """False for pure epsilon-DP estimators: they take no ``--delta``."""
        return "delta" in inspect.signature(self.cls).parameters

    def build(self, values: Mapping[str, Any], **common):
        """The estimator from option values (dest -> value; None: not given) and ``common``."""
        kwargs = dict(common)
        for dest in self.applicable():
            value = values.get(dest)
            if value is None:
                value = self.cli_defaults.get(dest)
            param = self.param_for(dest)
            if value is not None and param is not None:
                kwargs[param] = value
        if not self.takes_delta:
            kwargs.pop("delta", None)
        return self.cls(**kwargs)


def _morse_plot(model, X, names):
    return viz.plot_morse_density(model, X=X) if X.shape[1] == 2 else viz.plot_dendrogram(model)


def _dbscan_plot(model, X, names):
    return viz.plot_spans(model, X=X)


def _density_plot(model, X, names):
    return viz.plot_density_clusters(model, X=X, feature_names=names)


#: Every estimator the command line can run, in the order ``--help`` lists them.
ENTRIES: dict[str, Entry] = {
    e.name: e
    for e in (
        Entry(
            "dpm",
            DPM,
            "DPM (Liebenow et al.): private splits through sparse regions; finds k itself",
            cli_defaults={"max_depth": 7},
            codec=codecs.DPM_CODEC,
            contents="centres, noisy sizes, split tree",
            morse_base=MorseBase(),
            example={"max_depth": 4},
        ),
        Entry(
            "dbscan",
            DPDBSCAN,
            "DP-DBSCAN (Qiu & Yi): density spans of grid cells with noisy counts; -1 = noise",
            required=("radius",),
            summary=_summaries.print_spans,
            plot=_dbscan_plot,
            plot_2d_only=True,
            plot_subject="spans",
            codec=codecs.DBSCAN_CODEC,
            contents="grid and core cells of every span",
            example={"radius": 0.3, "min_samples": 10},
        ),
        Entry(
            "hdbscan",
            DPHDBSCAN,
            "DPHDBSCAN: density clusters without a radius, HDBSCAN's cluster tree on one "
            "private shifted grid tree; -1 = noise",
            summary=_summaries.print_density,
            plot=_density_plot,
            plot_2d_only=True,
            plot_subject="density clusters",
            codec=DENSITY_CODEC,
            contents="shifted grid, dense cells of every level with noisy counts and clusters",
            example={},
        ),
        Entry(
            "lloyd",
            DPLloyd,
            "DP-Lloyd (Su et al.): k-means with noisy counts and sums per iteration",
            required=("n_clusters",),
            morse_base=MorseBase("n_clusters"),
            example={"n_clusters": 4},
        ),
        Entry(
            "kmeans-guarantee",
            KMeansGuarantee,
            "KMeans Guarantee (Lu & Shen): k-means moved by the exponential mechanism",
            required=("n_clusters",),
            example={"n_clusters": 4, "iterations": 3},
        ),
        Entry(
            "subclustering",
            SubClustering,
            "SubClustering (Joshi & Thakkar): KMeans Guarantee sampling in sub-clusters",
            required=("n_clusters",),
            example={"n_clusters": 4, "iterations": 3},
        ),
        Entry(
            "mixture",
            DPGaussianMixture,
            "DPMoG-hard (Byun et al.): a Gaussian mixture by hard EM with Gaussian noise",
            required=("n_components",),
            summary=_summaries.print_mixture,
            codec=codecs.MIXTURE_CODEC,
            contents="weights, means, covariances, noisy counts",
            morse_base=MorseBase("n_components"),
            example={"n_components": 4, "iterations": 3},
        ),
        Entry(
            "hst-kmeans",
            HSTKMeans,
            "HST k-means (Cohen-Addad et al.): k-means on a private randomly shifted quadtree",
            required=("n_clusters",),
            example={"n_clusters": 4},
        ),
        Entry(
            "lsh-splits",
            LSHSplits,
            "LSH-Splits (Chang et al.): k-means on a private coreset of SimHash prefix-tree "
            "leaves",
            required=("n_clusters",),
            morse_base=MorseBase("n_clusters"),
            example={"n_clusters": 4, "max_depth": 8},
        ),
        Entry(
            "emmc",
            EMMC,
            "EM-MC (Nguyen, Chaturvedi & Xu): private max cover by the exponential mechanism "
            "on a private grid net, then weighted k-means",
            required=("n_clusters",),
            example={"n_clusters": 4},
        ),
        Entry(
            "dpcube",
            DPCube,
            "DPCube (Balcan et al.): random projection, private cube partition for candidates, "
            "private noisy means",
            required=("n_clusters",),
            morse_base=MorseBase("n_clusters"),
            example={"n_clusters": 4},
        ),
        Entry(
            "coreset",
            CoresetKMeans,
            "Coreset k-means: a private tree's weighted coreset; finds k itself (or takes "
            "--n-clusters), then refines the centres with noisy sizes and sums",
            codec=codecs.CORESET_CODEC,
            contents="centres, noisy sizes, bounds, the values of k considered",
            example={"max_depth": 5},
        ),
        Entry(
            "morse",
            MorseMerging,
            "Morse merging (Byun et al.): non-convex clusters from a private model's "
            "components",
            required=("n_clusters",),
            options=("base", "n_clusters"),
            summary=_summaries.print_morse,
            plot=_morse_plot,
            codec=codecs.MORSE_CODEC,
            contents="mixture, equilibria, merge hierarchy",
            example={"base": "mixture", "n_components": 6, "n_clusters": 2, "iterations": 3},
        ),
    )
}

#: ``morse --base`` when none is given.
MORSE_DEFAULT_BASE = "mixture"


def morse_bases() -> dict[str, Entry]:
    """The estimators ``morse --base`` accepts, the default first."""
    bases = {name: e for name, e in ENTRIES.items() if e.morse_base is not None}
    return {MORSE_DEFAULT_BASE: bases.pop(MORSE_DEFAULT_BASE)} | bases


def base_options(entry: Entry) -> tuple[str, ...]:
    """The options a ``morse --base`` adds: its own, with ``--n-components`` for its size."""
    own = tuple(d for d in entry.applicable() if d not in ("n_clusters", "n_components"))
    return own + (("n_components",) if entry.morse_base.size_param else ())

for _entry in ENTRIES.values():  # the model files know every estimator from here
    register_built_in_codec(_entry.cls, _entry.codec.dump, _entry.codec.load)
del _entry


def entry_for(model) -> Entry:
    """The entry of a (fitted or not) estimator."""
    for e in ENTRIES.values():
        if type(model) is e.cls:
            return e
    raise TypeError(f"{type(model).__name__} is not a registered privclust estimator")


def options_of(name: str, base: str | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(applicable, required)`` option dests of ``--algorithm name`` (and its morse base)."""
    entry = ENTRIES[name]
    options, required = entry.applicable(), entry.required
    if name == "morse":
        b = ENTRIES[base or MORSE_DEFAULT_BASE]
        options = options + base_options(b)
        required = required + (("n_components",) if b.morse_base.size_param else ())
    return options, required
