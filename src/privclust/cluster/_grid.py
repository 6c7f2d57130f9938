"""The grid of DP-DBSCAN (Qiu & Yi, Sec. 4-5): cells, the neighbour offsets NB and the core
window, and the vectorised kernels over cells (window sums, merges of core cells into spans)
that fit and predict share."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from scipy import ndimage
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

#: The radius of the core test (``core_radius``): "cell" counts the 3^d cells touching a cell
#: (the exact neighbour set for radius w, the cell width), "eps" the kappa cells of NB (radius
#: alpha; Sec. 5.2, Alg. 1 l. 4 as printed).
CORE_RADII = ("cell", "eps")
#: Offset sets larger than this are refused (the grid is too fine for the radius).
_MAX_OFFSETS = 200_000

#: The radius of the core test (``core_radius``): "cell" counts the 3^d cells touching a cell
#: (the exact neighbour set for radius w, the cell width), "eps" the kappa cells of NB (radius
#: alpha; Sec. 5.2, Alg. 1 l. 4 as printed).


# --------------------------------------------------------------------------- neighbour cells
def _max_sq_gap(d: int, eta, radius: str = "eps") -> int:
    """Largest integer sum of squared cell gaps strictly below ``(r / w)^2``: ``16 d / eta^2`` for
    ``r = alpha`` (in exact rational arithmetic: at eta = 4 the limit is the integer d, so (1, 1)
    in 2-D is out), 1 for ``r = w`` (only touching cells, gap 0)."""
    if radius == "cell":
        return 0
    limit = Fraction(16 * d) / Fraction(float(eta)) ** 2
    return math.ceil(limit) - 1


@lru_cache(maxsize=64)
def _offsets_cached(d: int, eta: float, radius: str = "eps") -> np.ndarray:
    max_sq = _max_sq_gap(d, eta, radius)
    g_max = math.isqrt(max_sq)
    span = 2 * (g_max + 1) + 1
    if span**d > 50 * _MAX_OFFSETS:
        raise ValueError(
            f"the alpha-neighbourhood of a cell has too many cells in d={d} with eta={eta}; "
            "use a larger eta or fewer dimensions"
        )
    r = np.arange(-(g_max + 1), g_max + 2)
    cand = np.stack(np.meshgrid(*([r] * d), indexing="ij"), axis=-1).reshape(-1, d)
    gap = np.maximum(np.abs(cand) - 1, 0)
    keep = (gap * gap).sum(axis=1) <= max_sq
    out = cand[keep].astype(np.int64)
    if out.shape[0] > _MAX_OFFSETS:
        raise ValueError(f"kappa={out.shape[0]} neighbour cells is too many; use a larger eta")
    out.setflags(write=False)
    return out


def neighbour_offsets(d: int, eta: float = 4.0) -> np.ndarray:
    """The exact offset set NB of a cell (Departures 11-12), lexicographically sorted.

    Cells have width ``w = eta * alpha / (4 sqrt(d))``. The offset ``o`` is in NB when a point of
    cell ``c + o`` can lie at distance ``< alpha`` of a point of cell ``c``: the cells' gap is
    ``max(|o_j| - 1, 0)`` cells per dimension, so ``o`` is in NB iff
    ``sum_j max(|o_j| - 1, 0)^2 < 16 d / eta^2`` (computed exactly). The same set decides which
    core cells merge (minimum distance below alpha, Sec. 5.3). ``kappa = len(NB)``: 3, 21, 117,
    609 for d = 1..4 at eta = 4.
    """
    if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1:
        raise ValueError(f"d must be a positive integer, got {d!r}")
    return _offsets_cached(int(d), _check_eta(eta))


def core_offsets(d: int, eta: float = 4.0, core_radius: str = "cell") -> np.ndarray:
    """The cells summed by the core test, lexicographically sorted.

    ``core_radius="eps"``: NB itself (:func:`neighbour_offsets`; Sec. 5.2, Alg. 1 l. 4).
    ``"cell"``: the cells that can hold a point within ``w`` (the cell width) of a point of the
    cell, by the same gap rule at radius w: the ``3^d`` cells touching it (9 in 2-D). For every
    point p of cell X the ball ``B(p, w)`` lies in these cells, which is what the sandwich's first
    condition needs at radius w (see :class:`DPDBSCAN`).
    """
    if core_radius not in CORE_RADII:
        raise ValueError(f"core_radius must be one of {CORE_RADII}, got {core_radius!r}")
    if core_radius == "eps":
        return neighbour_offsets(d, eta)
    if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1:
        raise ValueError(f"d must be a positive integer, got {d!r}")
    return _offsets_cached(int(d), _check_eta(eta), "cell")


def neighbourhood_size(d: int, eta: float = 4.0) -> int:
    """kappa = |NB| (exact, :func:`neighbour_offsets`)."""
    return int(neighbour_offsets(d, eta).shape[0])


def paper_kappa(d: int, eta: float = 4.0) -> float:
    """Thm 7.1's printed ``(1 + 8 sqrt(d)/eta)^d`` (3, 14.7, 89, 625 at eta = 4): **not** an
    upper bound on kappa (Departures 12); kept for comparison only."""
    return (1.0 + 8.0 * math.sqrt(d) / float(eta)) ** d


def _check_eta(eta) -> float:
    if isinstance(eta, bool) or not isinstance(eta, numbers.Real) or not (0 < eta <= 4):
        raise ValueError(f"eta must be in (0, 4] (cell width eta*alpha/(4 sqrt d)), got {eta!r}")
    return float(eta)


# --------------------------------------------------------------------------- grid geometry
@dataclass(frozen=True)
class _Grid:
    origin: np.ndarray  # (d,) public lower bounds
    width: float
    shape: np.ndarray  # (d,) int64 cells per dimension
    n_cells: int
    pad: int  # R: the largest |offset| per dimension

    @classmethod
    def make(cls, bounds: np.ndarray, width: float, pad: int) -> _Grid:
        ext = bounds[:, 1] - bounds[:, 0]
        per_dim = np.floor(ext / width) + 1  # float: a tiny width must not overflow the cast
        if float(np.sum(np.log2(per_dim))) >= 62:
            raise ValueError(
                f"eps (alpha) is too small for the bounds: a grid of cell width {width:.3g} "
                f"would have about 2^{float(np.sum(np.log2(per_dim))):.0f} cells, and at most "
                "2^62 are supported; use a larger eps (alpha) or eta, or narrower bounds"
            )
        shape = per_dim.astype(np.int64)
        n_cells = math.prod(int(s) for s in shape)
        padded = math.prod(int(s) + 2 * pad for s in shape)
        if n_cells >= 2**62 or padded >= 2**62:
            raise ValueError(
                f"the grid has {n_cells:.3g} cells (cell width {width:.3g} over the public "
                "bounds); at most 2^62 are supported: use a larger eps (alpha) or eta, or "
                "narrower bounds"
            )
        return cls(bounds[:, 0].astype(float).copy(), float(width), shape, n_cells, int(pad))

    @property
    def d(self) -> int:
        return int(self.shape.size)

    @property
    def strides(self) -> np.ndarray:
        return _c_strides(self.shape)

    @property
    def pshape(self) -> np.ndarray:
        return self.shape + 2 * self.pad

    @property
    def pstrides(self) -> np.ndarray:
        return _c_strides(self.pshape)

    def flat(self, coords: np.ndarray) -> np.ndarray:
        return _dot_int(coords, self.strides)

    def coords(self, flat: np.ndarray) -> np.ndarray:
        return _unflat(flat, self.strides)

    def padded_flat(self, coords: np.ndarray) -> np.ndarray:
        return _dot_int(coords + self.pad, self.pstrides)


def _c_strides(shape: np.ndarray) -> np.ndarray:
    s = np.ones(shape.size, dtype=np.int64)
    for j in range(shape.size - 2, -1, -1):
        s[j] = s[j + 1] * shape[j + 1]
    return s


def _dot_int(coords: np.ndarray, strides: np.ndarray) -> np.ndarray:
    out = coords[:, 0] * strides[0]
    for j in range(1, strides.size):
        out += coords[:, j] * strides[j]
    return out


def _unflat(flat: np.ndarray, strides: np.ndarray) -> np.ndarray:
    out = np.empty((flat.size, strides.size), dtype=np.int64)
    rest = flat
    for j in range(strides.size):
        out[:, j], rest = np.divmod(rest, strides[j])
    return out


# --------------------------------------------------------------------------- core cells, merge
def _interval_rows(offsets: np.ndarray):
    """NB as rows: for each prefix (all but the last coordinate), the last coordinate runs over
    ``[-a, a]`` (the gap condition is monotone in |o_last|). Returns [(prefix, a), ...]."""
    d = offsets.shape[1]
    rows: dict[tuple, int] = {}
    for o in offsets:
        key = tuple(int(v) for v in o[: d - 1])
        rows[key] = max(rows.get(key, 0), abs(int(o[-1])))
    return sorted(rows.items())


def _dense_neighbourhood_sums(values: np.ndarray, offsets: np.ndarray, pad: int) -> np.ndarray:
    """``out[X] = sum over o in NB of values[X + o]`` (cells outside the grid count 0), by
    window sums along the last axis and one shifted add per row of NB (8 adds instead of 21
    in 2-D)."""
    shape = values.shape
    d = values.ndim
    padded = np.pad(values, pad)
    last = shape[-1]
    rows = _interval_rows(offsets)
    windows: dict[int, np.ndarray] = {}
    cur = padded[..., pad : pad + last].copy()
    for a in range(0, max(a for _, a in rows) + 1):
        if a > 0:
            cur += padded[..., pad - a : pad - a + last]
            cur += padded[..., pad + a : pad + a + last]
        if any(ra == a for _, ra in rows):
            windows[a] = cur.copy() if a < max(ra for _, ra in rows) else cur
    out = np.zeros(shape, dtype=values.dtype)
    for prefix, a in rows:
        sl = tuple(slice(pad + p, pad + p + shape[j]) for j, p in enumerate(prefix))
        out += windows[a][sl] if d > 1 else windows[a]
    return out



def _components(n_nodes: int, rows: list, cols: list) -> np.ndarray:
    if n_nodes == 0:
        return np.zeros(0, dtype=np.int64)
    if rows:
        r = np.concatenate(rows)
        c = np.concatenate(cols)
    else:
        r = c = np.zeros(0, dtype=np.int64)
    graph = coo_matrix((np.ones(r.size, dtype=np.int8), (r, c)), shape=(n_nodes, n_nodes))
    _, lab = connected_components(graph, directed=False)
    return lab.astype(np.int64)


def _half(offsets: np.ndarray) -> np.ndarray:
    """Offsets after zero in lexicographic order: one of each pair {o, -o}."""
    nz = offsets[np.any(offsets != 0, axis=1)]
    first = nz[np.arange(nz.shape[0]), np.argmax(nz != 0, axis=1)]
    return nz[first > 0]


def _dense_merge(core: np.ndarray, offsets: np.ndarray, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Connected components of the core cells under the NB offsets, on a dense mask.

    ``scipy.ndimage.label`` with the full 3^d structure joins cells at offsets in {-1, 0, 1}^d
    (all in NB); the remaining offsets (some |o_j| >= 2) only add edges between those labels.
    Returns the flat indices of the core cells (sorted) and their component ids.
    """
    d = core.ndim
    lab, n_lab = ndimage.label(core, structure=np.ones((3,) * d, dtype=bool))
    keys = np.flatnonzero(core)
    if n_lab == 0:
        return keys, np.zeros(0, dtype=np.int64)
    extra = [o for o in _half(offsets) if np.abs(o).max() >= 2]
    rows, cols = [], []
    if extra:
        # each offset reads the label at (core cell + offset) in the padded label grid: work
        # in the number of core cells, not of grid cells (1,830 offsets over 1.9M cells took
        # 22 s for 243 core cells when every offset shifted the whole grid)
        lp = np.pad(lab, pad)
        flat = lp.ravel()
        strides = _c_strides(np.asarray(lp.shape, dtype=np.int64))
        pk = _dot_int(np.argwhere(core) + pad, strides)
        base = flat[pk]
        for s in _dot_int(np.asarray(extra, dtype=np.int64), strides):
            other = flat[pk + s]
            sel = (other > 0) & (base != other)
            if sel.any():
                pairs = np.unique(np.stack([base[sel], other[sel]], axis=1), axis=0)
                rows.append(pairs[:, 0].astype(np.int64) - 1)
                cols.append(pairs[:, 1].astype(np.int64) - 1)
    comp = _components(int(n_lab), rows, cols)
    return keys, comp[lab.ravel()[keys] - 1]


def _sparse_neighbourhood_sums(
    grid: _Grid, keys: np.ndarray, vals: np.ndarray, offsets: np.ndarray
):
    """Neighbourhood sums of released cells on sorted padded keys (no per-cell allocation).

    Every released value is added to the ``kappa`` cells it neighbours (NB is symmetric), in
    chunks of offsets merged by sorting; cells outside the grid are dropped. Returns the padded
    keys of all cells with a released neighbour (sorted) and their sums.
    """
    pk = grid.padded_flat(grid.coords(keys))
    shifts = _dot_int(offsets, grid.pstrides)
    acc_k = np.zeros(0, dtype=np.int64)
    acc_v = np.zeros(0, dtype=float)
    step = max(1, (1 << 23) // max(1, pk.size))
    w = vals.astype(float)
    for start in range(0, shifts.size, step):
        sh = shifts[start : start + step]
        kk = np.concatenate([acc_k, (pk[None, :] + sh[:, None]).ravel()])
        vv = np.concatenate([acc_v, np.tile(w, sh.size)])
        acc_k, inv = np.unique(kk, return_inverse=True)
        acc_v = np.bincount(inv.ravel(), weights=vv, minlength=acc_k.size)
    pc = _unflat(acc_k, grid.pstrides) - grid.pad
    inside = np.all((pc >= 0) & (pc < grid.shape), axis=1)
    return acc_k[inside], acc_v[inside], pc[inside]


def _sparse_merge(pkeys: np.ndarray, offsets: np.ndarray, pstrides: np.ndarray) -> np.ndarray:
    """Components of sorted padded core keys under the NB offsets (binary search per offset)."""
    m = pkeys.size
    rows, cols = [], []
    if m:
        for s in _dot_int(_half(offsets), pstrides):
            t = pkeys + s
            j = np.searchsorted(pkeys, t)
            j[j == m] = m - 1
            hit = pkeys[j] == t
            if hit.any():
                rows.append(np.flatnonzero(hit))
                cols.append(j[hit])
    return _components(m, rows, cols)


def _renumber(comp: np.ndarray) -> tuple[np.ndarray, int]:
    """Cluster ids 0..k-1 in order of each cluster's first cell (deterministic)."""
    if comp.size == 0:
        return comp.astype(np.int64), 0
    _, first, inv = np.unique(comp, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inv.ravel()], int(first.size)
