"""DP-DBSCAN that publishes cluster spans (Qiu & Yi, "Approximate DBSCAN under Differential
Privacy"), with the corrections listed on the documentation's departures page
(``docs/departures.md``), items 11-16.

The released model is a set of *spans*: unions of grid cells, one union per cluster, over a grid
laid on the **public** bounds. Everything after the private histogram is post-processing.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass
from functools import partial

import numpy as np

from ..privacy import (
    NOISY_N_SHARE,
    Mechanisms,
    resolve_random_state,
)
from ..privacy.histogram import (
    NOISES,
    neighbourhood_noise_bounds,
    release_dense_histogram,
    release_sparse_histogram,
    sparse_threshold,
)
from ._base import (
    PrivateClusterMixin,
    check_epsilon,
    is_dask_input,
    raise_not_fitted,
)

__all__ = [
    "CORE_RADII",
    "DEFAULT_BETA",
    "DEFAULT_BETA_CELL",
    "DPDBSCAN",
    "core_offsets",
    "neighbour_offsets",
    "neighbourhood_size",
    "paper_kappa",
]

from ._grid import (
    _MAX_OFFSETS,
    CORE_RADII,
    _c_strides,
    _check_eta,
    _dense_merge,
    _dense_neighbourhood_sums,
    _dot_int,
    _Grid,
    _max_sq_gap,
    _renumber,
    _sparse_merge,
    _sparse_neighbourhood_sums,
    core_offsets,
    neighbour_offsets,
    neighbourhood_size,
    paper_kappa,
)
from ._span_lookup import SpanLookup

#: Failure probability behind Gamma with ``core_radius="eps"`` (the paper's test). The paper gives
#: none; the authors' code uses 0.5 (a guarantee that holds half of the time). With the exact
#: geometric tail, beta = 1e-6 gives a core threshold close to the authors' (MinPts + Gamma_Lap at
#: beta = 0.5, a looser bound) and had the best mean ARI over the six Table-2 sets x 20 seeds of the
#: values tried (1e-1 ... 1e-7): 0.703 vs 0.396 (1e-1), 0.614 (1e-4), 0.668 (1e-5), 0.691 (1e-7)
#: (dbscan.py --beta-scan).
DEFAULT_BETA = 1e-6
#: Failure probability behind Gamma with ``core_radius="cell"`` (the default): 1/2, the authors'
#: value. Gamma at beta = 1/2 bounds the median of the largest of the n_cells window noises, i.e.
#: the core threshold sits above the noise level a release typically draws somewhere on the grid,
#: not above a one-in-a-million tail. The 9-cell window's Gamma at 1e-6 (33-35 on the Table-2 grids)
#: drowns the sparse Cluto clusters (t4 ARI 0.03, t7 0.00; dbscan.py --beta-scan); at 1/2 it is
#: 15-18 and every Table-2 set reaches its target but Cluto-t5 (README, DPDBSCAN figures).
DEFAULT_BETA_CELL = 0.5
#: Share of epsilon spent on a noisy record count when one is needed (sparse threshold and the
#: dense/sparse choice, Departures 14).
DEFAULT_N_BUDGET_SHARE = NOISY_N_SHARE
#: ``histogram="auto"`` uses the dense histogram without looking at n up to this many cells:
#: dense is the more accurate histogram (no threshold) and costs well under a second here, so
#: no budget needs to go into a noisy n.
DENSE_FREE_CELLS = 1 << 22
#: Above this many cells the dense histogram is refused.
MAX_DENSE_CELLS = 1 << 26
#: After a sparse release, the neighbourhood sums use a dense scratch grid only when the grid has
#: at most max(DENSE_FREE_CELLS, this x released cells) cells; otherwise sorted cell keys (no
#: per-cell allocation: 10^12-cell grids work).
_SCRATCH_FACTOR = 32






# --------------------------------------------------------------------------- dimension limit
def _kappa_at_most(d: int, eta: float, cap: int) -> int:
    """``kappa = |NB|`` in ``d`` dimensions (:func:`neighbour_offsets`), counted without
    listing the offsets (per dimension 3 offsets of gap 0 and 2 of each gap g >= 1, squared
    gaps summed); a count above ``cap`` is returned as ``cap + 1``."""
    max_sq = _max_sq_gap(d, eta)
    ways = np.zeros(max_sq + 1)
    ways[0] = 1.0
    gaps = np.arange(1, math.isqrt(max_sq) + 1) ** 2
    for _ in range(d):
        new = 3.0 * ways
        for g2 in gaps:
            new[g2:] += 2.0 * ways[: ways.size - g2]
        ways = np.minimum(new, cap + 1.0)
    return int(min(ways.sum(), cap + 1))


def _grid_fits(d: int, eta: float) -> bool:
    """Whether the offsets NB of ``d`` dimensions are few enough to build (the limits of
    :func:`neighbour_offsets`)."""
    span = 2 * (math.isqrt(_max_sq_gap(d, eta)) + 1) + 1
    return span**d <= 50 * _MAX_OFFSETS and _kappa_at_most(d, eta, _MAX_OFFSETS) <= _MAX_OFFSETS


def check_dimension(d: int, eta: float) -> None:
    """Refuse, from public parameters only (the number of features and eta), a grid whose
    cells within eps of a cell are too many to merge, with the limit in the user's terms."""
    if _grid_fits(d, eta):
        return
    max_d = next((k for k in range(d - 1, 0, -1) if _grid_fits(k, eta)), 0)
    at = "" if eta == 4.0 else f" at eta={eta:g}"
    kappa = _kappa_at_most(d, eta, 10**9)
    many = f"{kappa:,}" if kappa <= 10**9 else "over 10^9"
    raise ValueError(
        f"DPDBSCAN handles at most {max_d} features{at}; the data has {d}: its grid cells are "
        f"{_width_words(eta)} wide, so {many} cells lie within eps of each cell. Reduce the "
        f"data to {max_d} or fewer features (e.g. with PCA)"
    )


def _width_words(eta: float) -> str:
    return "eps/sqrt(d)" if eta == 4.0 else f"{eta:g}*eps/(4 sqrt(d))"


def _no_cluster_warning(d, eta, width, kappa_core, core_t, min_pts, threshold) -> str:
    """Why a fit released no span, from public values and the release (post-processing)."""
    sparse = "" if threshold is None else (
        f"; the sparse release also drops cells under {threshold:.0f} records")
    fix = ("use a smaller min_samples or a larger eps" if min_pts >= core_t - min_pts
           else "use a larger eps or epsilon" + (", or fewer features" if d > 3 else ""))
    return (
        f"DPDBSCAN found no cluster: a core cell needs at least {core_t:.0f} records (noisy "
        f"count, min_samples={min_pts} plus the noise allowance) in the {kappa_core:,} cells "
        f"around it, each {width:.3g} wide ({_width_words(eta)} at d={d}){sparse}; {fix}"
    )


# --------------------------------------------------------------------------- the estimator
def _auto_mode(mode: str, n_hat: float, n_cells: int) -> str:
    """histogram='auto' between the bounds: sparse when the (noisy) record count is at most
    half the cells, dense otherwise."""
    if mode != "auto":
        return mode
    return "sparse" if n_hat <= n_cells / 2 else "dense"


@dataclass
class _NoisyGrid:
    """The released histogram: every cell's noisy count (dense), or the keys and noisy counts
    of the cells at or above ``threshold`` (sparse). Post-processing empties it as it goes."""

    mode: str
    n_hat: int | None
    threshold: float | None
    noisy: np.ndarray | None = None
    keys: np.ndarray | None = None
    values: np.ndarray | None = None


def _spans(grid: _Grid, released: _NoisyGrid, window, offsets, pad: int, core_t: float):
    """Post-processing of the noisy histogram: window sums, core cells (sum >= ``core_t``) and
    their merge over NB into spans. Returns ``(core cells, their flat keys, span labels, k)``."""
    n_cells = grid.n_cells
    if released.mode == "dense" or n_cells <= max(DENSE_FREE_CELLS,
                                                  _SCRATCH_FACTOR * released.keys.size):
        noisy = released.noisy
        if noisy is None:
            noisy = np.zeros(n_cells, dtype=released.values.dtype)
            noisy[released.keys] = released.values
        released.noisy = released.keys = released.values = None  # the only copy is ours now
        kappa_core = window.shape[0]
        if noisy.dtype == np.int64 and noisy.size and (
            int(np.abs(noisy).max()) * kappa_core < 2**31
        ):
            noisy = noisy.astype(np.int32)  # exact; halves the post-processing memory
        sums = _dense_neighbourhood_sums(noisy.reshape(tuple(grid.shape)), window, pad)
        del noisy
        core_keys, comp = _dense_merge(sums >= core_t, offsets, pad)
        del sums
        core_cells = grid.coords(core_keys)
    else:
        if core_t <= 0:
            raise ValueError(
                f"core threshold {core_t} <= 0 on a grid of {n_cells} cells: every cell "
                "would be a core cell; raise min_samples or min_samples_shift"
            )
        pkeys, sums, pcoords = _sparse_neighbourhood_sums(grid, released.keys, released.values,
                                                          window)
        core = sums >= core_t
        comp = _sparse_merge(pkeys[core], offsets, grid.pstrides)
        core_cells = pcoords[core]
        core_keys = grid.flat(core_cells)
    labels, n_clusters = _renumber(comp)
    return core_cells, core_keys, labels, n_clusters


class DPDBSCAN(PrivateClusterMixin):
    """DP-DBSCAN publishing cluster spans (003, Alg. 1-2; Departures items 11-16).

    A grid of cell width ``w = eta * eps / (4 sqrt(d))`` (``eps`` is DBSCAN's radius, alpha in the
    paper; Departures 11) is laid over the **public** bounds. One private histogram of the cell
    counts
    is released (dense: noise on every cell; or the linear-time sparse histogram, Alg. 2). For
    every cell X the noisy counts of a window of cells around X are summed and X is a *core cell*
    when that sum reaches ``MinPts' - Gamma_lower``. The window (``core_radius``) is

    * ``"eps"`` (Sec. 5.2, Alg. 1 l. 4 as printed): the ``kappa`` cells of NB(X), the exact set
      of cells whose alpha-neighbourhood can meet X (:func:`neighbour_offsets`, Departures 12);
    * ``"cell"`` (default): the ``3^d`` cells touching X (:func:`core_offsets`), the same
      construction at radius ``w`` instead of alpha. NB over-counts an alpha-ball about 3x (21
      cells of area alpha^2/2 against pi alpha^2), so with "eps" a core region reaches about two
      cells past the data and two dense structures four cells apart merge (Circles: the two
      rings became one span in 3 of 10 seeds, and the sparse outer ring broke in 4 others). The
      touching window keeps the core cells on the data, and its 9 noises have a smaller Gamma.

    Core cells closer than alpha (always the NB offsets, Sec. 5.3) are merged into spans by
    connected components over the core cells only. The spans, not the points' labels, are the
    private output (Sec. 3).

    Privacy guarantee
    -----------------
    epsilon-DP under add/remove-one-record neighbours. The ledger (``privacy_report_``) holds

    * the histogram of cell counts (L1 sensitivity 1, cells disjoint): ``epsilon`` with the dense
      histogram chosen without looking at n, else ``(1 - n_budget_share) * epsilon``;
    * when the sparse histogram or the dense/sparse choice needs n: a noisy record count
      (two-sided geometric, ``n_budget_share * epsilon``). The threshold ``theta``, Gamma, tau and
      the switch use that noisy n, never the exact n (Departures 14; Thm 6.1 as printed uses
      the true
      n, which makes the output's support data-dependent).

    Everything else (Gamma, core cells, merging, spans, ``labels_``, ``predict``) is
    post-processing. The sparse histogram is pure DP in the Real-RAM model only (Departures 15); the
    dense histogram with the default geometric noise draws exact integers. The grid comes from
    the public bounds alone: no extent or scaling is taken from the data (the authors' code
    takes both from the data without privacy).

    Accuracy guarantee (Thm 7.1, Lemma 5.1, Sec. 7.2)
    --------------------------------------------------
    With probability at least ``1 - beta`` every noisy window sum is within
    ``[-Gamma_lower, +Gamma_upper]`` of the true one (``gamma_lower_``, ``gamma_upper_``; equal for
    the dense histogram). Gamma comes from the noise actually drawn (Departures 13) and from the
    window
    size ``kappa_core_`` (9 or 21 in 2-D): the paper's Laplace bound (Sec. 7.1; 38.2 at eps = 1,
    beta = 1/3, kappa = 21, |X| = 1000) for ``noise="laplace"``, the exact tail of a sum of
    ``kappa_core`` two-sided geometric noises for the default ``noise="geometric"`` (24 in the
    same example); for the sparse histogram ``kappa_core * theta`` is added below and the upper
    side is the sum of positive parts (see :mod:`privclust.privacy.histogram`). With ``tau =
    Gamma_lower + Gamma_upper`` (``2 Gamma``, Lemma 5.1), ``MinPts' = min_samples + shift``
    (``min_samples_effective_``) and ``r = eps`` for ``core_radius="eps"``, ``r = w`` (the cell
    width, ``core_radius_``) for ``"cell"``, the spans then satisfy Def. 1.2 with ``rho = 3 + eta``
    (Thm 5.2), its first condition taken at radius r:

    1. every ``(r, MinPts')``-cluster lies in one span (for p in X the ball ``B(p, r)`` lies in
       the window, so a core point's cell passes the test; core points closer than ``r <= eps``
       sit in cells that are merged);
    2. every span lies in the span of one ``(rho * eps, MinPts' - tau)``-cluster (the window is
       part of NB, so a core cell's UB(X) is at least its window count and Lemma 5.1.2 applies
       unchanged).

    With "eps" this is the paper's statement; with "cell" the first condition speaks of clusters
    of the smaller radius w (alpha / sqrt(2) in 2-D at eta = 4), the price of the tighter test.

    ``min_samples_shift="tau"`` (default, Sec. 7.2 and the authors' code) gives ``MinPts' =
    MinPts + tau``: all ``(r, MinPts + tau)``-clusters are found and every span comes from a
    ``(rho eps, MinPts)``-cluster (core threshold ``MinPts + Gamma_upper``). ``0`` gives Def. 1.2
    literally for ``(r, MinPts)``; any number ``>= 0`` is accepted. ``guarantee_`` spells out
    the fitted statement. The grid-cut windows at the border have fewer terms; the bounds still
    hold (see :func:`~privclust.privacy.histogram.neighbourhood_noise_bounds`).

    Parameters
    ----------
    epsilon : privacy budget (pure DP).
    eps : the DBSCAN radius alpha (> 0), in the data's units.
    min_samples : MinPts (an integer >= 1), counting the point itself as scikit-learn does.
    eta : cell-size constant in (0, 4]; ``w = eta * eps / (4 sqrt d)``; 4 (``w = eps / sqrt d``) is
        the paper's best (Sec. 8.4.2). ``rho = 3 + eta``.
    beta : failure probability behind Gamma; None (default) picks ``DEFAULT_BETA_CELL`` = 0.5 for
        ``core_radius="cell"`` and ``DEFAULT_BETA`` = 1e-6 for ``"eps"`` (``beta_`` is the value
        used). The paper gives no value; the authors' code uses 0.5. Gamma grows only like
        ``sqrt(ln(n_cells / beta))``; it also sets the core threshold ``MinPts + Gamma_upper``,
        which is what the default is chosen for (see the two constants).
    core_radius : "cell" (default) or "eps": the window of the core test (above). "eps" is
        Alg. 1 as printed (Sec. 5.2).
    bounds : public bounds, ``(lo, hi)`` for all features or a ``(d, 2)`` array. Required; points
        outside are clipped for fitting.
    histogram : "auto", "dense" or "sparse". "auto" uses the dense histogram for grids of at most
        ``DENSE_FREE_CELLS`` (2^22) cells without spending budget on n (dense is the more
        accurate one); for larger grids it spends ``n_budget_share`` on a noisy n and picks the
        sparse histogram when ``n_hat <= n_cells / 2`` (the paper's rule, Sec. 8.1), always
        above ``MAX_DENSE_CELLS`` (2^26). Grids of 10^12 cells work in sparse mode without being
        allocated.
    noise : "geometric" (default; exact integers) or "laplace" (the paper's).
    n_budget_share : share of epsilon for the noisy n when one is needed (default 0.02, the
        share every privclust estimator spends on a noisy record count).
    min_samples_shift : "tau" (default) or a number >= 0: ``MinPts' = min_samples + shift``.
    border : True (default): a point in no core cell but closer than ``eps`` to a core cell
        belongs to the nearest such cell's span, following the paper's definition of a span,
        ``Span(C) = union of B(p, alpha)`` (Sec. 3), and DBSCAN's border points; False: only the
        core cells themselves (Alg. 1 l. 5 as printed). Post-processing of the released cells.
    random_state : None (secure), int or Generator (reproducible, not secure).
    accountant : a shared :class:`~privclust.Accountant`; the fit raises
        :class:`~privclust.BudgetExceededError` before reading data if it does not fit.

    Attributes
    ----------
    ``span_cells_`` : (m, d) int64 grid coordinates of the core cells (sorted in C order).
    ``span_labels_`` : (m,) cluster id of every core cell. ``spans_`` : list of (m_k, d) arrays, the
        cells of each cluster. ``n_clusters_`` : number of spans.
    ``grid_origin_``, ``cell_width_``, ``grid_shape_``, ``n_cells_`` : the grid (cell ``c`` is the
    box
        ``origin + c * w <= x < origin + (c + 1) * w``). ``kappa_`` : ``|NB|`` (merge and border
        window). ``kappa_core_`` : cells in the core test's window. ``core_radius_`` : its radius r
        (``w`` or ``eps``, data units).
    ``labels_`` : the private spans applied to the training points (:meth:`predict` of X;
        post-processing of the private model, not a release); -1 = in no span (noise), and for
        points outside the public bounds.
    ``histogram_`` : "dense" or "sparse". ``n_hat_`` : the released noisy n (None if none was
    needed).
    ``threshold_`` : the sparse threshold (None for dense). ``gamma_lower_``, ``gamma_upper_``,
    ``tau_``,
    ``rho_``, ``beta_``, ``min_samples_effective_`` (MinPts'), ``core_threshold_`` (MinPts' -
    Gamma_lower): the guarantee; ``guarantee_`` : the same as a dict with the statement in words.
    ``privacy_report_`` : :class:`~privclust.PrivacyReport`.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from privclust import DPDBSCAN
    >>> X, _ = make_blobs(5000, centers=[[0, 0]], cluster_std=0.3, random_state=0)
    >>> spans = DPDBSCAN(epsilon=1.0, eps=0.3, min_samples=10, bounds=(-3, 3),
    ...                  random_state=0).fit(X)
    >>> spans.n_clusters_, spans.predict([[0.0, 0.0], [2.9, 2.9]]).tolist()
    (1, [0, -1])
    """

    #: scikit-learn's checks that fail by design (see ``sklearn_expected_failed_checks``):
    #: besides every private fit's, two that fit 10 features (the grid handles at most 7).
    _sklearn_expected_failed_checks = PrivateClusterMixin._sklearn_expected_failed_checks | {
        "check_dtype_object": "DPDBSCAN's grid handles at most 7 features; the check fits 10",
        "check_fit2d_1sample": "DPDBSCAN's grid handles at most 7 features; the check fits 10",
    }

    def __init__(
        self,
        epsilon=1.0,
        *,
        eps=0.5,
        min_samples=5,
        eta=4.0,
        beta=None,
        bounds=None,
        histogram="auto",
        noise="geometric",
        n_budget_share=DEFAULT_N_BUDGET_SHARE,
        min_samples_shift="tau",
        border=True,
        core_radius="cell",
        random_state=None,
        accountant=None,
    ):
        self.border = border
        self.core_radius = core_radius
        self.epsilon = epsilon
        self.eps = eps
        self.min_samples = min_samples
        self.eta = eta
        self.beta = beta
        self.bounds = bounds
        self.histogram = histogram
        self.noise = noise
        self.n_budget_share = n_budget_share
        self.min_samples_shift = min_samples_shift
        self.random_state = random_state
        self.accountant = accountant

    # ------------------------------------------------------------------ parameter checks
    def _check_params(self):
        epsilon = check_epsilon(self.epsilon)
        alpha = self.eps
        if (
            isinstance(alpha, bool)
            or not isinstance(alpha, numbers.Real)
            or not (alpha > 0 and math.isfinite(alpha))
        ):
            raise ValueError(f"eps (the DBSCAN radius alpha) must be > 0 and finite, got {alpha!r}")
        mp = self.min_samples
        if isinstance(mp, bool) or not isinstance(mp, numbers.Integral) or mp < 1:
            raise ValueError(f"min_samples (MinPts) must be an integer >= 1, got {mp!r}")
        eta = _check_eta(self.eta)
        if self.core_radius not in CORE_RADII:
            raise ValueError(f"core_radius must be one of {CORE_RADII}, got {self.core_radius!r}")
        beta = self.beta
        if beta is None:
            beta = DEFAULT_BETA_CELL if self.core_radius == "cell" else DEFAULT_BETA
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not (0 < beta < 1):
            raise ValueError(f"beta (failure probability) must be in (0, 1), got {beta!r}")
        if self.histogram not in ("auto", "dense", "sparse"):
            raise ValueError(
                f"histogram must be 'auto', 'dense' or 'sparse', got {self.histogram!r}"
            )
        if self.noise not in NOISES:
            raise ValueError(f"noise must be one of {NOISES}, got {self.noise!r}")
        share = self.n_budget_share
        if isinstance(share, bool) or not isinstance(share, numbers.Real) or not (0 < share < 1):
            raise ValueError(f"n_budget_share must be in (0, 1), got {share!r}")
        shift = self.min_samples_shift
        if not (
            shift == "tau"
            or (
                isinstance(shift, numbers.Real)
                and not isinstance(shift, bool)
                and shift >= 0
                and math.isfinite(shift)
            )
        ):
            raise ValueError(f"min_samples_shift must be 'tau' or a number >= 0, got {shift!r}")
        return epsilon, float(alpha), int(mp), eta, float(beta), float(share), shift

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None):
        """Release the spans of X privately. ``y`` is ignored (scikit-learn compatibility)."""
        epsilon, alpha, min_pts, eta, beta, share, shift = self._check_params()
        plan, accountant = self._open_plan(epsilon, 0.0)  # checked before any data is read
        epsilon = plan.epsilon  # less than asked when bounds="private" estimates the bounds
        X = self._check_X(X, reset=True)
        d = X.shape[1]
        check_dimension(d, eta)  # before private bounds spend anything
        bounds = self._fit_bounds(X)
        offsets, pad, window, grid, mode, eps_n, eps_hist = self._grid_setup(
            d, bounds, epsilon, alpha, eta, share)
        self._check_sparse_floor(mode, grid.n_cells, eps_hist, beta, window.shape[0], min_pts,
                                 shift)

        source = resolve_random_state(self.random_state)
        if eps_n:
            plan.add("record count n", "two-sided geometric", "pure", eps_n)
        plan.add("cell counts", f"{self.noise} histogram", "pure", eps_hist)
        self._reserve_plan(plan, accountant, "DPDBSCAN")
        engine = self._make_engine(X, bounds)
        report = self._start_report(plan.reserved(), source)
        mech = Mechanisms(source, report, plan)
        released = self._release_histogram(engine, mech, grid, mode, eps_n, eps_hist)

        # post-processing: the noise bounds, the core threshold, the spans
        g_lo, g_hi, tau, min_eff, core_t = self._core_thresholds(
            eps_hist, beta, window.shape[0], grid.n_cells, released.threshold, min_pts, shift)
        core_cells, core_keys, labels, n_clusters = _spans(grid, released, window, offsets, pad,
                                                           core_t)
        self._describe_release(report, grid, offsets.shape[0], window.shape[0], released.mode,
                               g_lo, g_hi, beta, tau, min_eff, core_t)

        self.grid_origin_ = grid.origin
        self.cell_width_ = grid.width
        self.grid_shape_ = grid.shape.copy()
        self.n_cells_ = grid.n_cells
        self.kappa_ = int(offsets.shape[0])
        self.kappa_core_ = int(window.shape[0])
        self.core_radius_ = grid.width if self.core_radius == "cell" else alpha
        self.histogram_ = released.mode
        self.n_hat_ = released.n_hat
        self.threshold_ = released.threshold
        self.gamma_lower_, self.gamma_upper_, self.tau_ = g_lo, g_hi, tau
        self.rho_ = 3.0 + eta
        self.beta_ = beta
        self.min_samples_effective_ = min_eff
        self.core_threshold_ = core_t
        self.span_cells_, self.span_labels_, self._core_keys = core_cells, labels, core_keys
        self.n_clusters_ = n_clusters
        self.n_features_in_ = d
        self.bounds_ = bounds
        self.guarantee_ = self._guarantee()
        self.privacy_report_ = report
        self._close_plan(plan, report, accountant)
        self.labels_ = self._labels_of(X)  # the validated raw input, not the clipped copy
        if n_clusters == 0:
            warnings.warn(_no_cluster_warning(d, eta, grid.width, self.kappa_core_, core_t,
                                              min_pts, released.threshold), UserWarning,
                          stacklevel=2)
        return self

    def _grid_setup(self, d, bounds, epsilon, alpha, eta, share):
        """What the fit fixes from public inputs before its read of the data: the neighbour
        offsets NB and their pad, the core test's window (a subset of NB; merging and border
        points keep NB, Sec. 5.3), the grid, the histogram mode and the budget split
        ``(offsets, pad, window, grid, mode, eps_n, eps_hist)`` (also the planner's)."""
        check_dimension(d, eta)
        offsets = neighbour_offsets(d, eta)
        pad = int(np.abs(offsets).max())
        window = core_offsets(d, eta, self.core_radius)
        grid = _Grid.make(bounds, eta * alpha / (4.0 * math.sqrt(d)), pad)
        mode = self._histogram_mode(grid.n_cells)
        eps_n = share * epsilon if mode != "dense" else 0.0
        return offsets, pad, window, grid, mode, eps_n, epsilon - eps_n

    def _core_thresholds(self, eps_hist, beta, kappa_core, n_cells, threshold, min_pts, shift):
        """Gamma for the noise drawn (``threshold``: the sparse histogram's, None for dense),
        tau, the effective MinPts and the core threshold: ``(g_lo, g_hi, tau, min_eff,
        core_t)``, post-processing of public values (also the planner's)."""
        g_lo, g_hi = neighbourhood_noise_bounds(
            self.noise, eps_hist, beta, kappa_core, n_cells,
            *(() if threshold is None else (threshold,)))
        tau = g_lo + g_hi
        min_eff = min_pts + (tau if shift == "tau" else shift)
        return g_lo, g_hi, tau, min_eff, min_eff - g_lo

    def _histogram_mode(self, n_cells: int) -> str:
        """'dense', 'sparse', or 'auto' when the noisy record count must decide."""
        mode = self.histogram
        if mode == "dense" and n_cells > MAX_DENSE_CELLS:
            raise ValueError(
                f"the grid has {n_cells} cells, too many for a dense histogram (at most "
                f"{MAX_DENSE_CELLS}); use histogram='sparse' or 'auto'"
            )
        if mode == "auto":
            if n_cells <= DENSE_FREE_CELLS:
                return "dense"
            if n_cells > MAX_DENSE_CELLS:
                return "sparse"
        return mode

    def _check_sparse_floor(self, mode, n_cells, eps_hist, beta, kappa_core, min_pts, shift):
        """Refuse, before any release, a fixed shift that would make every cell a core cell."""
        if n_cells <= DENSE_FREE_CELLS or mode != "sparse" or shift == "tau":
            return
        g_lo_min, _ = neighbourhood_noise_bounds(self.noise, eps_hist, beta, kappa_core, n_cells)
        if min_pts + shift - g_lo_min <= 0:
            raise ValueError(
                f"min_samples + min_samples_shift = {min_pts + shift} does not exceed "
                f"Gamma = {g_lo_min}: every one of the {n_cells} cells would be a core "
                "cell; raise min_samples or min_samples_shift"
            )

    def _release_histogram(self, engine, mech, grid, mode, eps_n, eps_hist) -> _NoisyGrid:
        """The only read of the data (a group-by on integer cell keys) and its releases: the
        record count when the sparse threshold or the dense/sparse choice needs it, then the
        cell counts, dense or sparse."""
        d = grid.d
        cells, counts = engine.cell_counts(grid.origin, np.full(d, grid.width))
        keys, counts = self._cell_keys(grid, cells, counts)
        del cells
        n_cells, noise = grid.n_cells, self.noise
        n_hat = None
        if eps_n:
            n_hat = int(mech.count(
                [int(counts.sum())], eps_n,
                target="record count n (sparse threshold and dense/sparse choice)",
                note="noisy n, never the exact n (Departures 14)", item="record count n",
            )[0])
            mode = _auto_mode(mode, n_hat, n_cells)
        if mode == "dense":
            dense = np.zeros(n_cells, dtype=np.int32 if counts.sum() < 2**31 else np.int64)
            dense[keys] = counts
            del keys, counts
            noisy = release_dense_histogram(
                mech, dense, eps_hist, noise=noise,
                target=f"cell counts, all {n_cells} cells (dense histogram)", item="cell counts",
            )
            return _NoisyGrid(mode, n_hat, None, noisy=noisy)
        threshold = sparse_threshold(n_cells, n_hat, eps_hist, noise)
        rkeys, rvals = release_sparse_histogram(
            mech, keys, counts, n_cells, eps_hist, threshold, noise=noise,
            target=f"cell counts >= threshold, of {n_cells} cells (sparse histogram)",
            item="cell counts",
        )
        return _NoisyGrid(mode, n_hat, threshold, keys=rkeys, values=rvals)

    def _describe_release(self, report, grid, kappa, kappa_core, mode, g_lo, g_hi, beta, tau,
                          min_eff, core_t) -> None:
        report.notes += [
            f"grid of {grid.n_cells} cells of width {grid.width:.6g} over the public bounds "
            f"(shape {tuple(int(s) for s in grid.shape)}); kappa = {kappa}; core test over "
            f"{kappa_core} cells (core_radius={self.core_radius!r}); {mode} histogram, "
            f"{self.noise} noise",
            f"Gamma = (-{g_lo:.6g}, +{g_hi:.6g}) at beta = {beta}; tau = {tau:.6g}; "
            f"MinPts' = {min_eff:.6g}; core cells: noisy neighbourhood sum >= {core_t:.6g}",
            "labels_ are the private spans applied to X (post-processing, not a release)",
        ]
        if mode == "sparse":
            report.notes.append(
                "sparse histogram: pure DP in the Real-RAM model only (Departures 15)"
            )

    @staticmethod
    def _cell_keys(grid: _Grid, cells: np.ndarray, counts: np.ndarray):
        """Flat keys of the engine's cells, clipped into the grid (a point on the upper bound or
        a rounding step past it joins the last cell; counts of merged cells are added)."""
        clipped = np.clip(cells, 0, grid.shape - 1)
        keys = grid.flat(clipped)
        if not np.array_equal(clipped, cells):
            keys, inv = np.unique(keys, return_inverse=True)
            counts = np.bincount(inv.ravel(), weights=counts, minlength=keys.size)
            counts = counts.astype(np.int64)
        return keys, np.asarray(counts, dtype=np.int64)

    def _guarantee(self) -> dict:
        alpha = float(self.eps)
        r = float(self.core_radius_)
        return {
            "rho": self.rho_,
            "tau": self.tau_,
            "beta": self.beta_,
            "gamma_lower": self.gamma_lower_,
            "gamma_upper": self.gamma_upper_,
            "min_samples_effective": self.min_samples_effective_,
            "core_radius": r,
            "statement": (
                f"with probability >= {1 - self.beta_:.6g}: every ({r:.6g}, "
                f"{self.min_samples_effective_:.6g})-cluster lies in one span, and every span "
                f"lies in the span of one ({self.rho_ * alpha:.6g}, "
                f"{self.min_samples_effective_ - self.tau_:.6g})-cluster (Def. 1.2, Thm 7.1; "
                f"the first radius is the core test's, core_radius={self.core_radius!r})"
            ),
        }

    # ------------------------------------------------------------------ the model
    @property
    def spans_(self) -> list:
        """The cells (grid coordinates) of each span, one (m_k, d) array per cluster."""
        if not hasattr(self, "span_cells_"):
            raise AttributeError("spans_ is set by fit")
        order = np.argsort(self.span_labels_, kind="stable")
        bounds_ = np.searchsorted(self.span_labels_[order], np.arange(self.n_clusters_ + 1))
        cells = self.span_cells_[order]
        return [cells[bounds_[k] : bounds_[k + 1]] for k in range(self.n_clusters_)]

    def _check_fitted(self):
        if not hasattr(self, "span_cells_"):
            raise_not_fitted(self)

    @property
    def score(self):
        """DPDBSCAN publishes density spans, not centres: there is no cost to score, so it has
        no ``score`` (scikit-learn's tools then ask for ``scoring=``)."""
        raise AttributeError("DPDBSCAN has no score: it publishes density spans, not centres; "
                             "give scikit-learn's tools a scoring= of your own")

    def predict(self, X):
        """Span of every point (-1: in no span, or outside the public bounds).

        A point belongs to the span whose core cells contain it; with ``border=True`` a point
        within ``eps`` of a core cell takes the span of the nearest one (Sec. 5.3).
        Post-processing of the private model: one lookup of the point's grid cell in a table
        built from the released cells (dense when the grid is small next to the input, else a
        binary search), and the point-by-point border rule only for points in cells the table
        cannot decide.
        """
        self._check_fitted()
        arr = self._check_X(X, reset=False)
        d = self.span_cells_.shape[1]
        if arr.shape[1] != d:
            raise ValueError(f"X has {arr.shape[1]} features; the model was fitted on {d}")
        return self._labels_of(arr)

    def _labels_of(self, arr) -> np.ndarray:
        """The model's :class:`~privclust.cluster._span_lookup.SpanLookup` on an array, or on
        every chunk of dask input where the chunk lives (the labels come back as one NumPy
        array)."""
        lookup = SpanLookup(self)
        if is_dask_input(arr):
            from ..engine.dask import record_labels

            lookup.table()  # built once here, not in every chunk's task
            narrow = arr.shape[0] < 2**31 and lookup.n_clusters < 2**31
            return record_labels(arr, partial(lookup, dtype=np.int32 if narrow else np.int64))
        return lookup(arr)

    def _restore(self):
        """Rebuild the core-cell keys predict searches from the released spans (after loading
        a model: ``privclust.io`` sets the fitted attributes and calls this); returns self."""
        cells = self.span_cells_
        self._core_keys = (
            _dot_int(cells, _c_strides(self.grid_shape_)) if cells.size
            else np.zeros(0, dtype=np.int64)
        )
        self.core_threshold_ = self.min_samples_effective_ - self.gamma_lower_
        return self
