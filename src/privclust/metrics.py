"""Clustering-quality metrics reported by the DPM and SubClustering papers.

Evaluation is not a release: nothing here is differentially private and nothing here may be
published as if it were. The module therefore imports nothing from ``privclust.privacy`` or
``privclust.cli`` (import-linter contract "evaluation is not a release"); it uses only numpy,
scipy and scikit-learn.

Which figure comes from where
-----------------------------
======================================  ========================================================
function                                definition
======================================  ========================================================
:func:`inertia`                         DPM (004) App. C.1 Def. 10; squared (Departures 9)
:func:`silhouette`                      DPM (004) App. C.1 Def. 11 (-1 for fewer than 2 clusters)
:func:`accuracy_majority`               DPM (004) App. C.1 Def. 12 (many-to-one majority vote)
:func:`accuracy_hungarian`              one-to-one matching accuracy (not in the papers)
:func:`kmeans_reference`                the non-private reference runs of DPM (004) Sec. 6.2
:func:`kmeans_distance`                 DPM (004) Sec. 6.2 Def. 9, plus the per-centre and
                                        normalised figures of Departures 9
:func:`ari`, :func:`ami`                adjusted Rand index / adjusted mutual information
:func:`cost_gap`                        SubClustering (002) Sec. 5.2 eq. 1
:func:`optimal_kmeans_cost`             ``Cost_Lloyd`` of SubClustering (002) eq. 1
:func:`evaluate`                        all of the above that apply
======================================  ========================================================

Conventions shared by every function
------------------------------------
* ``X`` is an ``(n, d)`` float array, ``centers`` a ``(k, d)`` float array; both must be non-empty
  and finite (NaN or infinity raises :class:`ValueError`).
* Cluster labels are integers. ``-1`` is the noise marker used by density-based algorithms.
  Each function's docstring says what it does with ``-1`` (in the predicted labels and in
  ``y_true``); nothing is dropped silently.
* Every user mistake (shape mismatch, empty input, NaN, bad parameter) raises a
  :class:`ValueError` naming the argument, never an error from deep inside numpy.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.sparse import coo_matrix
from scipy.spatial.distance import cdist
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_mutual_info_score, adjusted_rand_score, silhouette_score

from ._geometry import nearest_centres

__all__ = [
    "KMeansDistance",
    "accuracy_hungarian",
    "accuracy_majority",
    "ami",
    "ari",
    "assign",
    "cost_gap",
    "evaluate",
    "inertia",
    "kmeans_distance",
    "kmeans_reference",
    "optimal_kmeans_cost",
    "silhouette",
]

NOISE = -1
"""Label value that marks noise (predicted labels) or an unlabelled point (``y_true``)."""

_CHUNK_ELEMENTS = 1 << 22
"""Default budget for one distance block in :func:`assign`: 4 Mi float64 = 32 MiB."""


# --------------------------------------------------------------------------------------------
# input validation
# --------------------------------------------------------------------------------------------


def _as_points(a, name: str) -> np.ndarray:
    """Return ``a`` as a finite, non-empty 2-d float64 array or raise ValueError."""
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric array, got {type(a).__name__}") from exc
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array of shape (n, d), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty (0 rows)")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has 0 columns")
    if not np.isfinite(arr).all():
        bad = int(np.count_nonzero(~np.isfinite(arr)))
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s)")
    return arr


def _as_data_and_centers(X, centers) -> tuple[np.ndarray, np.ndarray]:
    X = _as_points(X, "X")
    C = _as_points(centers, "centers")
    if C.shape[1] != X.shape[1]:
        raise ValueError(
            f"centers have {C.shape[1]} dimension(s) but X has {X.shape[1]}: "
            f"shapes {C.shape} and {X.shape}"
        )
    return X, C


def _as_labels(a, name: str, *, allow_strings: bool = False) -> np.ndarray:
    """Return ``a`` as a non-empty 1-d label array.

    Integer and boolean arrays become int64; float arrays must hold finite whole numbers (as
    read from a CSV file) and become int64. With ``allow_strings`` string arrays pass as they are.
    """
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-d array of labels, got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    kind = arr.dtype.kind
    if kind in "iub":
        return arr.astype(np.int64, copy=False)
    if kind == "f":
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} contains NaN or infinite labels")
        if not np.array_equal(arr, np.round(arr)):
            raise ValueError(f"{name} must hold integer labels, found non-integer values")
        return arr.astype(np.int64)
    if allow_strings and kind in "US":
        return arr
    raise ValueError(f"{name} must be an integer label array, got dtype {arr.dtype}")


def _same_length(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    if a.shape[0] != b.shape[0]:
        raise ValueError(
            f"{name_a} and {name_b} must have the same length, got {a.shape[0]} and {b.shape[0]}"
        )


def _check_positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _labelled_mask(y_true: np.ndarray) -> np.ndarray:
    """True where ``y_true`` carries a class (integer labels equal to -1 are unlabelled)."""
    if y_true.dtype.kind in "iu":
        return y_true != NOISE
    return np.ones(y_true.shape[0], dtype=bool)


# --------------------------------------------------------------------------------------------
# assignment and inertia
# --------------------------------------------------------------------------------------------


def _nearest(X: np.ndarray, C: np.ndarray, chunk_size: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Nearest-centre index and exact squared distance per row (shared with prediction, so an
    evaluation labels every point exactly as ``predict`` does)."""
    if chunk_size is not None:
        chunk_size = _check_positive_int(chunk_size, "chunk_size")
    return nearest_centres(X, C, return_sq_distance=True, chunk_rows=chunk_size)


def assign(X, centers, chunk_size: int | None = None) -> np.ndarray:
    """Index of the nearest centre (Euclidean) for every row of ``X``.

    This is the cluster membership ``x in C_i`` of DPM (004) App. C.1 Def. 10 (and Defs. 11,
    12): each point belongs to its closest centre. Ties go to the lowest centre index.

    The work is done in blocks of a fixed number of rows (from ``k`` and ``d`` only, about
    ``2**16 / k``: :func:`privclust._geometry.nearest_centres`, the labelling ``predict``
    uses), so memory is ``O(block * max(k, d))`` and no ``(n, k)`` matrix is formed; every
    row's label depends on that row and the centres only. ``chunk_size`` is accepted for
    compatibility (validated) and changes nothing.

    Parameters
    ----------
    X : array of shape (n, d)
    centers : array of shape (k, d)
    chunk_size : positive int or None

    Returns
    -------
    labels : int array of shape (n,), values in ``0 .. k-1``.
    """
    X, C = _as_data_and_centers(X, centers)
    idx, _ = _nearest(X, C, chunk_size)
    return idx.astype(np.int64, copy=False)


def inertia(X, centers, squared: bool = True, chunk_size: int | None = None) -> float:
    """Inertia, DPM (004) App. C.1 **Def. 10**; squared (scikit-learn's inertia) by default.

    The sum over points of the (squared) distance to the nearest centre.

    * ``squared=True`` (the default) is scikit-learn's ``KMeans.inertia_``,
      ``sum_x min_c ||x - c||_2^2``, the k-means objective. Departures 9: DPM (004) App. C.1
      **Def. 10** prints an *unsquared* norm, but its tables report scikit-learn's inertia, so
      the squared figure is the default and the one :func:`evaluate` calls ``inertia_sq``.
    * ``squared=False`` is Def. 10 exactly as printed, ``sum_i sum_{x in C_i} ||c_i - x||_2``
      with ``C_i`` the points whose nearest centre is ``c_i``.

    Membership is by nearest centre (:func:`assign`), computed in chunks.
    """
    X, C = _as_data_and_centers(X, centers)
    _, dist_sq = _nearest(X, C, chunk_size)
    if squared:
        return float(dist_sq.sum())
    return float(np.sqrt(dist_sq).sum())


# --------------------------------------------------------------------------------------------
# silhouette
# --------------------------------------------------------------------------------------------


def silhouette(X, labels, sample_size: int | None = 10000, random_state=0) -> float:
    """Mean silhouette coefficient, DPM (004) App. C.1 **Def. 11**.

    Wraps :func:`sklearn.metrics.silhouette_score` (Euclidean), which computes Def. 11's
    ``(b(x) - a(x)) / max(a(x), b(x))`` with singleton clusters scoring 0.

    Conventions and deviations:

    * **Noise.** Points labelled ``-1`` are excluded before anything else; the score is the mean
      over the remaining points only (noise is not a cluster and has no ``a(x)``).
    * **Fewer than 2 clusters.** If fewer than 2 distinct labels remain, the result is ``-1.0``,
      Def. 11's convention ("only defined for |C| >= 2, otherwise it is set to -1"). Clusters are
      the *non-empty* ones: a centre that attracts no point does not count.
    * **Every point its own cluster.** scikit-learn refuses this case; each point then has
      silhouette 0 by the singleton convention, so the result is ``0.0``.
    * **Sampling (deviation).** Def. 11 averages over all n points, which costs O(n^2). When more
      than ``sample_size`` points remain, a uniform sample of ``sample_size`` of them, drawn
      without replacement with ``numpy.random.default_rng(random_state)``, is scored instead
      (the usual estimate; the DPM tables cannot have used the exact O(n^2) score on 100k+
      points either). The two rules above are then applied to the sample.
      ``sample_size=None`` scores all points.
    """
    X = _as_points(X, "X")
    labels = _as_labels(labels, "labels")
    _same_length(X, labels, "X", "labels")
    if sample_size is not None:
        sample_size = _check_positive_int(sample_size, "sample_size")

    keep = labels != NOISE
    Xk, lk = X[keep], labels[keep]
    if sample_size is not None and lk.shape[0] > sample_size:
        rng = np.random.default_rng(random_state)
        rows = np.sort(rng.choice(lk.shape[0], size=sample_size, replace=False))
        Xk, lk = Xk[rows], lk[rows]
    n_labels = np.unique(lk).shape[0]
    if n_labels < 2:
        return -1.0
    if n_labels == lk.shape[0]:
        return 0.0
    return float(silhouette_score(Xk, lk, metric="euclidean"))


# --------------------------------------------------------------------------------------------
# accuracy
# --------------------------------------------------------------------------------------------


def _contingency(y_true, labels) -> tuple[coo_matrix, int]:
    """Sparse (cluster x class) count table over the labelled points, and their number.

    Points with ``y_true == -1`` are removed; points with ``labels == -1`` stay in the count
    ``n`` but get no row in the table (they can never be counted correct). Built with
    ``np.unique(return_inverse=True)`` and a sparse COO sum of duplicates: no loop over points.
    """
    y_true = _as_labels(y_true, "y_true", allow_strings=True)
    labels = _as_labels(labels, "labels")
    _same_length(y_true, labels, "y_true", "labels")
    keep = _labelled_mask(y_true)
    n = int(np.count_nonzero(keep))
    if n == 0:
        raise ValueError("y_true has no labelled points (every entry is -1)")
    y_true, labels = y_true[keep], labels[keep]
    clustered = labels != NOISE
    _, cls = np.unique(y_true[clustered], return_inverse=True)
    _, clu = np.unique(labels[clustered], return_inverse=True)
    n_cls = int(cls.max()) + 1 if cls.size else 0
    n_clu = int(clu.max()) + 1 if clu.size else 0
    data = np.ones(clu.shape[0], dtype=np.int64)
    table = coo_matrix((data, (clu.ravel(), cls.ravel())), shape=(n_clu, n_cls))
    table.sum_duplicates()
    return table, n


def accuracy_majority(y_true, labels) -> float:
    """Clustering accuracy by majority vote, DPM (004) App. C.1 **Def. 12**.

    Every cluster is given the most frequent true class among its points (``LBL(C_i)``), several
    clusters may get the same class (many-to-one), and the result is the fraction of points whose
    class equals their cluster's label. This is the accuracy in the DPM tables; it can only grow
    with the number of clusters (one cluster per point scores 1.0).

    ``-1`` handling (neither case is dropped silently):

    * ``y_true == -1``: the point is unlabelled and is **excluded** from numerator and
      denominator. If no labelled point remains, ValueError.
    * ``labels == -1`` (noise of a density-based algorithm): the point **stays in the
      denominator and counts as wrong**; noise is not a cluster and gets no majority label.
      Def. 12 has no noise (every point belongs to its nearest centre).

    ``y_true`` may be integer or string labels (``-1`` means unlabelled only for integers).
    """
    table, n = _contingency(y_true, labels)
    if table.nnz == 0:
        return 0.0
    correct = table.tocsr().max(axis=1).toarray().sum()
    return float(correct) / n


def accuracy_hungarian(y_true, labels) -> float:
    """One-to-one clustering accuracy (optimal matching); not defined in DPM (004) or 002.

    Deviation from DPM (004) App. C.1 Def. 12 (which is :func:`accuracy_majority`), reported
    beside it because majority vote rewards over-splitting.

    Clusters and classes are matched one-to-one so that the number of points in matched
    (cluster, class) pairs is maximal (:func:`scipy.optimize.linear_sum_assignment` on the
    contingency table). Points in unmatched clusters (more clusters than classes) and in
    unmatched classes count as wrong, so unlike Def. 12 (:func:`accuracy_majority`) this does
    not reward over-splitting. It is always ``<=`` the majority-vote accuracy.

    ``-1`` handling is the same as :func:`accuracy_majority`: ``y_true == -1`` is excluded,
    ``labels == -1`` stays in the denominator and counts as wrong.
    """
    table, n = _contingency(y_true, labels)
    if table.nnz == 0:
        return 0.0
    dense = table.toarray()
    rows, cols = linear_sum_assignment(dense, maximize=True)
    return float(dense[rows, cols].sum()) / n


# --------------------------------------------------------------------------------------------
# ARI / AMI
# --------------------------------------------------------------------------------------------


def _pair(y_true, labels) -> tuple[np.ndarray, np.ndarray]:
    y_true = _as_labels(y_true, "y_true", allow_strings=True)
    labels = _as_labels(labels, "labels")
    _same_length(y_true, labels, "y_true", "labels")
    return y_true, labels


def ari(y_true, labels) -> float:
    """Adjusted Rand index, :func:`sklearn.metrics.adjusted_rand_score`.

    Not defined in DPM (004) or SubClustering (002); the DP-DBSCAN paper's evaluation uses it.

    ``-1`` is **kept as a label of its own** in both arguments (all noise points form one
    group), as the DP-DBSCAN paper's evaluation does; nothing is excluded. 1.0 is a perfect
    match, about 0 a random one.
    """
    y_true, labels = _pair(y_true, labels)
    return float(adjusted_rand_score(y_true, labels))


def ami(y_true, labels) -> float:
    """Adjusted mutual information, :func:`sklearn.metrics.adjusted_mutual_info_score`.

    scikit-learn's default arithmetic-mean normalisation. Not defined in DPM (004) or
    SubClustering (002); the DP-DBSCAN paper's evaluation uses it. As in :func:`ari`,
    ``-1`` is **kept as a label of its own** (DP-DBSCAN paper's evaluation); nothing is excluded.
    """
    y_true, labels = _pair(y_true, labels)
    return float(adjusted_mutual_info_score(y_true, labels))


# --------------------------------------------------------------------------------------------
# KMeans distance (DPM Def. 9)
# --------------------------------------------------------------------------------------------


def kmeans_reference(
    X,
    n_clusters: int | Sequence[int],
    n_runs: int = 20,
    top: int = 20,
    random_state=0,
    sample_size: int | None = 10000,
) -> list[np.ndarray]:
    """The non-private KMeans reference centre sets ``C_0 .. C_{l-1}`` of DPM (004) **Def. 9**.

    Sec. 6.2: "a non-private hyper-parameter search with the KMeans clustering algorithm to find
    multiple sets of clusters that maximise the silhouette score ... we pick the top 20 KMeans
    runs". Here: ``n_runs`` runs of :class:`sklearn.cluster.KMeans` (k-means++, ``n_init=1``)
    per value of ``n_clusters``, each with its own seed drawn from
    ``numpy.random.default_rng(random_state)``; every run is scored by :func:`silhouette` of its
    own labels (sampled to ``sample_size`` points, the same sample for every run); the ``top``
    best are returned, best first (ties keep run order).

    ``n_clusters`` may be a sequence of ``k`` values: that is the paper's search over the number
    of clusters for data without known classes (UCI Gas Emissions); the runs of all ``k`` compete.

    Defaults: 20 runs, keep 20, i.e. ``l = 20`` as in the paper and (with a single ``k``) every
    run is kept, so the silhouette only orders them. The paper does not say how many runs its
    search made; pass a larger ``n_runs`` for a real selection (cost is linear in it). Measured
    cost: about 3 s per run on 2 CPU cores for n = 100,000, d = 10, k = 20 (KMeans and a
    10,000-point silhouette in roughly equal parts), so about a minute with the defaults;
    ``sample_size=5000`` quarters the silhouette part.
    ``top <= n_runs * len(n_clusters)`` is required.

    Returns
    -------
    list of ``(k_i, d)`` float arrays, length ``top``.
    """
    X = _as_points(X, "X")
    if isinstance(n_clusters, numbers.Integral):
        ks = [n_clusters]
    elif isinstance(n_clusters, Sequence | np.ndarray) and not isinstance(n_clusters, str):
        ks = list(n_clusters)
    else:
        raise ValueError(f"n_clusters must be an int or a sequence of ints, got {n_clusters!r}")
    if not ks:
        raise ValueError("n_clusters is an empty sequence")
    ks = [_check_positive_int(k, "n_clusters") for k in ks]
    n_runs = _check_positive_int(n_runs, "n_runs")
    top = _check_positive_int(top, "top")
    if sample_size is not None:
        sample_size = _check_positive_int(sample_size, "sample_size")
    if top > n_runs * len(ks):
        raise ValueError(f"top={top} exceeds the number of runs ({n_runs * len(ks)})")
    if max(ks) > X.shape[0]:
        raise ValueError(f"n_clusters={max(ks)} exceeds the number of points ({X.shape[0]})")

    rng = np.random.default_rng(random_state)
    sil_seed = int(rng.integers(2**31 - 1))
    runs: list[tuple[float, np.ndarray]] = []
    for k in ks:
        for seed in rng.integers(2**31 - 1, size=n_runs):
            km = KMeans(n_clusters=k, n_init=1, random_state=int(seed)).fit(X)
            score = silhouette(X, km.labels_, sample_size=sample_size, random_state=sil_seed)
            runs.append((score, km.cluster_centers_.copy()))
    order = sorted(range(len(runs)), key=lambda i: -runs[i][0])
    return [runs[i][1] for i in order[:top]]


@dataclass(frozen=True)
class KMeansDistance:
    """Result of :func:`kmeans_distance` (DPM (004) Def. 9 and Departures 9).

    Attributes
    ----------
    total : Def. 9 as printed: the sum over private centres of the distance to the nearest
        reference centre, averaged over the ``l`` reference sets.
    per_centre : ``total / k_priv``, the mean distance of one private centre.
    normalised : ``per_centre / diameter`` (what the DPM tables print, per the authors'
        evaluation code), or None when no normaliser was given.
    diameter : the normaliser used, or None.
    n_references : ``l``.
    n_centres : ``k_priv``.
    """

    total: float
    per_centre: float
    normalised: float | None
    diameter: float | None
    n_references: int
    n_centres: int

    def as_dict(self) -> dict:
        """The figures as a plain dictionary."""
        return asdict(self)


def _diameter(bounds, d: int) -> float:
    """Diameter of the public data box.

    ``(lo, hi)`` scalars: ``(hi - lo) * sqrt(d)``. A ``(d, 2)`` array of per-dimension
    ``[lo, hi]`` rows: ``||hi - lo||_2``. (For ``d = 2`` a ``(2, 2)`` array is read as
    per-dimension rows.)
    """
    try:
        b = np.asarray(bounds, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError("bounds must be (lo, hi) or an array of shape (d, 2)") from exc
    if not np.isfinite(b).all():
        raise ValueError("bounds contain NaN or infinite values")
    if b.shape == (2,):
        lo, hi = b
        width = np.full(d, hi - lo)
    elif b.shape == (d, 2):
        lo, hi = b[:, 0], b[:, 1]
        width = hi - lo
    else:
        raise ValueError(
            f"bounds must be (lo, hi) or an array of shape (d, 2) = ({d}, 2), got shape {b.shape}"
        )
    if np.any(width < 0):
        raise ValueError("bounds have hi < lo")
    diameter = float(np.linalg.norm(width))
    if diameter <= 0.0:
        raise ValueError("bounds describe a box of zero diameter")
    return diameter


def kmeans_distance(
    centers, reference_centers_list, bounds=None, *, normalise_by=None
) -> KMeansDistance:
    """KMeans distance, DPM (004) Sec. 6.2 **Def. 9**.

    ``KD = (1/l) * sum_{i=0}^{l-1} sum_{c in C_priv} min_{c' in C_i} ||c - c'||_2``

    with ``C_priv = centers`` and ``C_i`` the reference sets (from :func:`kmeans_reference`).
    Three figures are returned (Departures 9; name the one you report):

    * ``total``: Def. 9 as printed. A *sum* over private centres, so it grows with ``k_priv``.
    * ``per_centre``: ``total / k_priv``.
    * ``normalised``: ``per_centre / diameter``. Not defined in the paper; the DPM authors'
      evaluation code divides the per-centre mean by the data diameter and the tables print
      that. The diameter comes from ``bounds`` -- ``(lo, hi)`` scalars give
      ``(hi - lo) * sqrt(d)``, a ``(d, 2)`` array of per-dimension ``[lo, hi]`` gives
      ``||hi - lo||_2`` -- or is given directly as the positive number ``normalise_by``
      (at most one of the two). Without either, ``normalised`` is None.

    The reference sets may differ in size; all must have the same dimension as ``centers``.
    """
    C = _as_points(centers, "centers")
    if isinstance(reference_centers_list, np.ndarray) and reference_centers_list.ndim == 2:
        raise ValueError(
            "reference_centers_list must be a list of (k_i, d) arrays; wrap a single set in a list"
        )
    refs = list(reference_centers_list)
    if not refs:
        raise ValueError("reference_centers_list is empty")
    total = 0.0
    for i, ref in enumerate(refs):
        R = _as_points(ref, f"reference_centers_list[{i}]")
        if R.shape[1] != C.shape[1]:
            raise ValueError(
                f"reference_centers_list[{i}] has {R.shape[1]} dimension(s) but centers have "
                f"{C.shape[1]}"
            )
        total += float(cdist(C, R).min(axis=1).sum())
    total /= len(refs)
    per_centre = total / C.shape[0]

    if bounds is not None and normalise_by is not None:
        raise ValueError("give at most one of bounds and normalise_by")
    diameter = None
    if bounds is not None:
        diameter = _diameter(bounds, C.shape[1])
    elif normalise_by is not None:
        try:
            diameter = float(normalise_by)
        except (TypeError, ValueError) as exc:
            raise ValueError("normalise_by must be a positive number (the diameter)") from exc
        if not np.isfinite(diameter) or diameter <= 0.0:
            raise ValueError(f"normalise_by must be a positive finite number, got {normalise_by}")
    normalised = None if diameter is None else per_centre / diameter
    return KMeansDistance(
        total=total,
        per_centre=per_centre,
        normalised=normalised,
        diameter=diameter,
        n_references=len(refs),
        n_centres=C.shape[0],
    )


# --------------------------------------------------------------------------------------------
# CostGap (SubClustering eq. 1)
# --------------------------------------------------------------------------------------------


def _gap(cost: float, optimal_cost) -> float:
    try:
        opt = float(optimal_cost)
    except (TypeError, ValueError) as exc:
        raise ValueError("optimal_cost must be a positive number") from exc
    if not np.isfinite(opt) or opt <= 0.0:
        raise ValueError(f"optimal_cost must be a positive finite number, got {optimal_cost}")
    return abs(cost - opt) / opt


def optimal_kmeans_cost(
    X, n_clusters: int, n_init: int = 10, random_state=0, return_centers: bool = False
):
    """``Cost_Lloyd`` of SubClustering (002) Sec. 5.2 **eq. 1**: the non-private k-means cost.

    Lloyd's algorithm via :class:`sklearn.cluster.KMeans` (k-means++, best of ``n_init``
    starts). "Optimal" is the paper's reference, not the global optimum: Lloyd finds a local one.
    The cost is the squared :func:`inertia` of the fitted centres (002 never writes its cost
    out; it is the k-means objective of Lloyd's algorithm and of its baseline [3], the sum of
    squared distances). Computed with :func:`inertia`, so it is consistent with
    :func:`cost_gap` to the last bit: ``cost_gap(X, centres, cost) == 0`` for the returned
    centres.

    Returns the cost, or ``(cost, centres)`` with ``return_centers=True``.
    """
    X = _as_points(X, "X")
    n_clusters = _check_positive_int(n_clusters, "n_clusters")
    n_init = _check_positive_int(n_init, "n_init")
    if n_clusters > X.shape[0]:
        raise ValueError(f"n_clusters={n_clusters} exceeds the number of points ({X.shape[0]})")
    km = KMeans(n_clusters=n_clusters, n_init=n_init, random_state=random_state).fit(X)
    centres = km.cluster_centers_.copy()
    cost = inertia(X, centres, squared=True)
    return (cost, centres) if return_centers else cost


def cost_gap(X, centers, optimal_cost: float) -> float:
    """CostGap, SubClustering (002) Sec. 5.2 **eq. 1**.

    ``CostGap = |Cost_DP - Cost_Lloyd| / Cost_Lloyd``

    with ``Cost_DP`` the k-means cost (squared :func:`inertia`) of ``centers`` on ``X`` and
    ``Cost_Lloyd = optimal_cost`` the cost of non-private Lloyd (:func:`optimal_kmeans_cost`).
    Exactly as printed, including the absolute value: a private result that beats Lloyd's local
    optimum also gets a positive gap. Smaller is better; 0 means the same cost.
    ``optimal_cost`` must be positive (the ratio is undefined for a zero-cost data set).
    """
    return _gap(inertia(X, centers, squared=True), optimal_cost)


# --------------------------------------------------------------------------------------------
# everything at once
# --------------------------------------------------------------------------------------------


def evaluate(
    X,
    centers,
    y_true=None,
    bounds=None,
    reference=None,
    optimal_cost: float | None = None,
    silhouette_sample_size: int | None = 10000,
    random_state=0,
    chunk_size: int | None = None,
) -> dict:
    """All applicable figures of DPM (004) Defs. 9-12 and SubClustering (002) eq. 1 at once.

    For one (private) clustering given by its centres.

    Points belong to their nearest centre (:func:`assign`), as in DPM (004) Defs. 10-12.
    Keys, and the definition each computes:

    ``n_clusters``
        number of centres released (``k``).
    ``n_nonempty_clusters``
        number of centres nearest to at least one point.
    ``inertia_sq``
        :func:`inertia` squared, scikit-learn's inertia (Departures 9 reading of DPM Def. 10).
    ``inertia_unsq``
        :func:`inertia` unsquared, DPM Def. 10 as printed.
    ``silhouette``
        :func:`silhouette`, DPM Def. 11 (sampled to ``silhouette_sample_size`` points).
    ``accuracy_majority``, ``accuracy_hungarian``, ``ari``, ``ami``
        with ``y_true`` only: DPM Def. 12 majority vote, one-to-one matching, ARI, AMI.
    ``kmeans_distance_total``, ``kmeans_distance_per_centre``
        with ``reference`` (a list of centre arrays, e.g. from :func:`kmeans_reference`) only:
        DPM Def. 9 as printed and divided by ``k``.
    ``kmeans_distance_normalised``
        with ``reference`` and ``bounds``: per-centre figure / data diameter (Departures 9).
    ``cost_gap``
        with ``optimal_cost`` only: SubClustering (002) eq. 1.
    """
    X, C = _as_data_and_centers(X, centers)
    idx, dist_sq = _nearest(X, C, chunk_size)
    out: dict = {
        "n_clusters": int(C.shape[0]),
        "n_nonempty_clusters": int(np.unique(idx).shape[0]),
        "inertia_sq": float(dist_sq.sum()),
        "inertia_unsq": float(np.sqrt(dist_sq).sum()),
        "silhouette": silhouette(
            X, idx, sample_size=silhouette_sample_size, random_state=random_state
        ),
    }
    if y_true is not None:
        y = _as_labels(y_true, "y_true", allow_strings=True)
        _same_length(X, y, "X", "y_true")
        out["accuracy_majority"] = accuracy_majority(y, idx)
        out["accuracy_hungarian"] = accuracy_hungarian(y, idx)
        out["ari"] = ari(y, idx)
        out["ami"] = ami(y, idx)
    if reference is not None:
        kd = kmeans_distance(C, reference, bounds=bounds)
        out["kmeans_distance_total"] = kd.total
        out["kmeans_distance_per_centre"] = kd.per_centre
        if kd.normalised is not None:
            out["kmeans_distance_normalised"] = kd.normalised
    elif bounds is not None:
        _diameter(bounds, X.shape[1])  # validate even if unused
    if optimal_cost is not None:
        out["cost_gap"] = _gap(out["inertia_sq"], optimal_cost)  # same as cost_gap(X, C, ...)
    return out
