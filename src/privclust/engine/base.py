"""The aggregate queries an algorithm may ask of the data.

Algorithms never see records. They hold a public *grouping* of the records (a partition built
only from released, public split decisions) and ask for exact aggregates per group; the privacy
layer then adds noise. This keeps every sensitivity obvious and lets one algorithm run on NumPy in
memory (:class:`~privclust.engine.local.LocalEngine`) or on another backend later.

Grouping protocol: group ``i`` of a grouping is routed by :meth:`Engine.regroup` with
``feature[i]``/``threshold[i]``: records with ``x[feature] <= threshold`` go to ``left[i]``, the
others to ``right[i]``; ``feature[i] < 0`` sends the whole group to ``left[i]``; a target of -1
drops the records from the new grouping. A target ``p <= -2`` *parks* the records: they are in
no group for every aggregate, and every later regrouping keeps them at ``p`` until one is given
``parked`` (``parked[-2 - p]`` is then their group; DPM parks the records of a leaf as it halts
and assigns every leaf's records in one pass at the end).

Engines return exact values and import nothing from ``privclust.privacy`` or algorithms.

Exact sums: every sum an engine returns (:meth:`Engine.centred_sums`, the sums, moments and
squared norms of :meth:`Engine.assignment_stats`) adds the clipped values rounded to a public
fixed-point grid as integers, exactly, and converts the total to float64 once
(:mod:`privclust.engine._exact`). So it does not depend on the order of the records, the
chunking or the engine, and one record changes it by exactly its rounded contribution, which
keeps within the bound that clipping gives (the sensitivity needs no allowance for float64
summation error).

Centring happens here too. A release of sums about a public point (the middle of the bounds)
asks for them centred: :meth:`Engine.centred_sums`, or ``about=`` of
:meth:`Engine.assignment_stats`, which centres the exact integer totals before their single
rounding. Centring the float64 totals afterwards (``S - n mid``) would add a rounding error of
about ``n |mid| 2**-53`` that does not cancel between neighbouring data sets: far from zero
(timestamps, say) it exceeds the sensitivity.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

__all__ = ["AssignmentStats", "Engine", "Grouping", "MostLikelyComponent", "NearestCentre"]


@dataclass(frozen=True)
class NearestCentre:
    """Assign each record to its nearest centre (Euclidean; ties to the lower index)."""

    centres: np.ndarray


@dataclass(frozen=True)
class MostLikelyComponent:
    """Assign each record to its most likely Gaussian component, ``argmax_k log_weights[k] +
    log N(x; means[k], L_k L_k^T)`` with ``L = cov_cholesky`` (ties to the lower index)."""

    means: np.ndarray
    cov_cholesky: np.ndarray
    log_weights: np.ndarray


@dataclass
class AssignmentStats:
    """Exact per-group statistics of an assignment: ``counts`` (k,) int64, ``sums`` (k, d),
    and when asked ``moments`` (k, d, d), the sum of ``x x^T``, and ``sq_norms`` (k,), the sum
    of ``||x||^2``. Sums are of the records rounded to the public grid (each value to the
    nearest grid point, clamped into the bounds), exact, then rounded to float64 once (see the
    module docstring)."""

    counts: np.ndarray
    sums: np.ndarray
    moments: np.ndarray | None = None
    sq_norms: np.ndarray | None = None


class Grouping(ABC):
    """An engine-specific handle on a partition of (some of) the records into groups."""

    n_groups: int


class Engine(ABC):
    """Data behind a small set of exact aggregate queries.

    ``bounds`` (d, 2) are the public bounds; records are clipped to them when the engine is
    built (clipping is what bounds every sensitivity).
    """

    bounds: np.ndarray

    @property
    def n_features(self) -> int:
        """The number of features d (from the public bounds)."""
        return int(self.bounds.shape[0])

    @abstractmethod
    def root(self) -> Grouping:
        """All records in one group."""

    @abstractmethod
    def regroup(self, grouping, feature, threshold, left, right, n_groups: int,
                parked=None) -> Grouping:
        """Route each group's records by one axis-aligned test (see the module docstring);
        ``parked`` (optional) maps parked records to groups of the new grouping."""

    @abstractmethod
    def regroup_oblique(self, grouping, normal, offset, left, right,
                        n_groups: int) -> Grouping:
        """Route each group's records by one half-space test (an oblique split).

        A record of group ``i`` goes to ``left[i]`` when ``x . normal_i <= offset[i]`` and to
        ``right[i]`` otherwise, where ``x`` is the clipped record and ``normal_i`` is
        ``normal`` itself when ``normal`` has shape (d,) (one direction shared by every group)
        or its row ``i`` when it has shape (n_groups_in, d). Where ``left[i] == right[i]`` the
        whole group goes there untested. A target of -1 drops the records from the new
        grouping; records in no group stay in none, parked records stay parked. ``offset``,
        ``left``, ``right``: shape (n_groups_in,). Returns the new grouping of ``n_groups``
        groups.
        """

    @abstractmethod
    def count(self, grouping) -> np.ndarray:
        """Exact number of records per group, shape (n_groups,), int64."""

    @abstractmethod
    def axis_histogram(self, grouping, lo, width, n_bins: int) -> np.ndarray:
        """Per group and dimension, counts in ``n_bins`` equal bins starting at ``lo``.

        ``lo``/``width`` are (d,) arrays, or (n_groups, d) for bins of their own per group;
        bin ``b`` of dimension ``j`` holds
        ``lo[j] + b*width[j] <= x[j] < lo[j] + (b+1)*width[j]`` (the last bin also takes everything
        above). Returns (n_groups, d, n_bins) int64.
        """

    def count_and_histogram(self, grouping, lo, width, n_bins: int):
        """``(count(grouping), axis_histogram(grouping, lo, width, n_bins))`` in one request:
        on a cluster one round trip instead of two (DPM asks for a level's counts and, from
        the same groups, the next level's histograms)."""
        return self.count(grouping), self.axis_histogram(grouping, lo, width, n_bins)

    @abstractmethod
    def centred_sums(self, grouping, centres) -> np.ndarray:
        """Per group, the sum of ``x - centres[group]``; (n_groups, d) float64.

        Exact on a public grid: each coordinate of ``x - c`` is moved toward zero to a
        multiple of a power-of-two step (about ``2**-31`` of the largest ``|x - c|`` the bounds
        allow), so no coordinate grows, and every bound on a record's distance from its
        centre bounds its rounded contribution; the integer total is converted once."""

    @abstractmethod
    def group_neighbour_gaps(self, grouping) -> tuple[np.ndarray, np.ndarray]:
        """Per group, the gaps between consecutive sorted values per dimension:
        ``(gaps (m, d), group (m,))``."""

    @abstractmethod
    def neighbour_gaps(self, dtype=np.float32, dither=None) -> np.ndarray:
        """Per dimension, the gaps between consecutive sorted values of all records: (n-1, d).

        ``dither=(widths, offsets)``: before sorting, every value of dimension ``j`` moves by
        ``widths[j] * offsets(n)[i]``, with ``offsets`` a callable returning ``n`` public
        offsets in ``[-1/2, 1/2)`` (so rounded values become continuous again)."""

    @abstractmethod
    def lattice_misses(self, feature: int, steps) -> np.ndarray:
        """For each step ``s`` of ``steps``, how many records of ``feature`` are *not* multiples
        of ``s`` (to a relative tolerance of 2e-6, float32 storage): (len(steps),) int64."""

    @abstractmethod
    def cell_counts(self, origin, cell_width) -> tuple[np.ndarray, np.ndarray]:
        """Group-by on grid cells: the non-empty cells and their exact counts.

        Cell of a record: ``floor((x - origin) / cell_width)`` per dimension (``origin``,
        ``cell_width``: (d,) arrays). Returns ``(cells, counts)``: ``cells`` (m, d) int64 indices
        of the m non-empty cells (sorted lexicographically), ``counts`` (m,) int64. Nothing is
        allocated per cell of the grid, so grids of 10^12 cells work.
        """

    @abstractmethod
    def assignment_stats(self, assignment, *, second_moments: bool = False,
                         squared_norms: bool = False, about=None) -> AssignmentStats:
        """One pass: each record to a group by ``assignment`` (:class:`NearestCentre` or
        :class:`MostLikelyComponent`), then exact per-group statistics (:class:`AssignmentStats`).
        The hard assignment makes the groups disjoint: one record changes one group's values.

        ``about`` (optional, a public point (d,)): the sums, moments and squared norms are of
        the records relative to it (``x - about``), centred exactly on the integer totals and
        then rounded once (:func:`privclust.engine._exact.centred_stats`). Ask for them this
        way whenever a release needs them centred (about the middle of the bounds, say):
        centring the returned totals in float64 leaves a rounding error that grows with
        ``n |about|`` and does not cancel between neighbouring data sets."""

    def _check_about(self, about):
        """``about`` as a finite (d,) float array (None stays None)."""
        if about is None:
            return None
        about = np.asarray(about, dtype=float)
        if about.shape != (self.n_features,) or not np.isfinite(about).all():
            raise ValueError(f"about must be a finite point of {self.n_features} features; got "
                             f"shape {about.shape}")
        return about

    # the three statistics the estimators ask for, all through assignment_stats ------------
    def gaussian_assignment_stats(self, means, cov_cholesky, log_weights):
        """Per most likely component: ``(counts, sums, sum x x^T)`` (the mixture's E-step)."""
        st = self.assignment_stats(MostLikelyComponent(means, cov_cholesky, log_weights),
                                   second_moments=True)
        return st.counts, st.sums, st.moments

    def nearest_centre_stats(self, centres, second_moments: bool = False, about=None):
        """Per nearest centre: ``(counts, sums)``, and ``sum x x^T`` with ``second_moments``
        (of ``x - about`` with ``about``, see :meth:`assignment_stats`)."""
        st = self.assignment_stats(NearestCentre(centres), second_moments=second_moments,
                                   about=about)
        return (st.counts, st.sums, st.moments) if second_moments else (st.counts, st.sums)

    # k-means family (cluster/_centres.py) -----------------------------------------
    def nearest_centre_moments(self, centres, about=None):
        """Per nearest centre: ``(counts, sums, sq_norms)``. One pass gives everything a Lloyd
        step needs plus the exact k-means cost of ``centres`` (``sq_norms - 2 <c, sums> +
        counts ||c||^2``), a local diagnostic that is never released. With ``about`` the sums
        and squared norms are of ``x - about`` (see :meth:`assignment_stats`): the cost is
        then that of ``centres - about``."""
        st = self.assignment_stats(NearestCentre(centres), squared_norms=True, about=about)
        return st.counts, st.sums, st.sq_norms

    @abstractmethod
    def zone_cell_counts(self, centres, zone_centres, zone_radii, cell_centres) -> np.ndarray:
        """Counts per (zone, cell): (k, m) int64.

        A record belongs to zone ``i`` when its nearest of ``centres`` (k, d) is ``i`` (ties to
        the lower index) and it lies strictly inside the ball ``zone_centres[i]``, radius
        ``zone_radii[i]``; inside zone ``i`` it falls in the cell of its nearest
        ``cell_centres[i, j]`` ((k, m, d); ties to the lower j). Zones are disjoint, so adding
        or removing one record changes exactly one count by one.
        """

    @abstractmethod
    def zone_records(self, centres, zone_centres, zone_radii) -> list:
        """The records themselves of every zone (as in :meth:`zone_cell_counts`): a list of k
        arrays (n_i, d).

        NOT an aggregate. It exists only for *faithful* reproductions of papers that publish
        records (SubClustering, 002 Alg. 1-2, Departures 17); a private algorithm never calls it.
        """
