"""Exact, order-independent sums on a public fixed-point grid.

Every sum an engine returns for a release (group sums, sums of ``||x||^2`` and of ``x x^T``,
centred sums) is a sum of integers: each value is first mapped to an integer number of grid
*units* and the units are added exactly, so the total does not depend on the order of the
records, on the chunking, or on the engine. Only the total is converted to float64, once.

The grid. Per feature ``j`` the step is a power of two, ``2**e_j``, with ``e_j`` chosen from a
public magnitude ``D_j`` (the largest ``|x_j|`` the bounds allow, or the largest ``|x_j - c_j|``
for sums about public centres ``c``) so that ``D_j < 2**31 * 2**e_j``: every value is at most
``2**31`` units. The grid depends on public numbers only, never on the data.

Two roundings, each chosen so that the sensitivity argument of its release still holds exactly
for the rounded record (the argument is about the rounded record, and a record of the data set
maps to exactly one rounded record, so neighbouring data sets stay neighbouring):

- *Sums of the records* (and of their squares and products): ``q(x)_j`` is the grid point
  nearest ``x_j`` (ties to even), clamped after rounding to the grid points inside the public
  bounds ``[lo_j, hi_j]``. So ``q(x)`` is again a point of the public box, and every sensitivity
  stated for records clipped to the box (a record adds a vector with ``(x - mid) / half`` in
  ``[-1, 1]^d``, ``||x x^T||`` bounded by the box, ...) holds for ``q(x)`` unchanged.
- *Sums about centres* (``sum (x - c_g)`` over group ``g``): each coordinate of ``x - c_g`` is
  moved toward zero to a grid point, ``step * trunc((x_j - c_gj) / step)``, computed exactly
  (not from the rounded float difference). So ``|q_j| <= |x_j - c_gj|`` for every coordinate,
  and every bound on a record's distance from its centre (a leaf box's half-diagonal, the unit
  box of a scaled sum) bounds the rounded record as well.

Either way one record changes a sum by the exact contribution of its rounded record, which is
within the stated bound: the sensitivity proof needs no allowance for floating-point error in
the summation. Rounding moves a value by less than one step, ``2**-31`` of the magnitude that
set the grid, far below any noise a release adds.

Exact arithmetic. Per chunk of at most ``2**20`` (row, feature) values (the engine's chunks hold
``2**18``), sums of units are formed in float64, where they are exact: every partial sum is an
integer below ``2**53``. Products of two units (up to ``2**62``) need more: for ``x x^T`` each
unit is split into 16-bit limbs (``u = a 2**16 + b``, ``|a|, |b| <= 2**15``), so every product
of limbs is at most ``2**30`` and its chunk sums stay exact, also through BLAS in any order
(every intermediate is an integer below ``2**53``); for ``||x||^2`` the per-record sum of
squares is known modulo ``2**32`` (uint32 arithmetic) and within ``2**28`` (float64), which
together give it exactly (:func:`sq_norm_parts`). The chunk totals are then carried as three
base-``2**32`` int64 limbs (:class:`ExactSums`, range ``2**127``) and added exactly, chunk by
chunk or in a tree.

Conversion. The exact integer total ``N`` of a value with step ``2**e`` is released as the
float64 nearest to ``N * 2**e`` (one correct rounding; exact when ``|N| < 2**53``, e.g. every
sum of fewer than ``2**22`` records). This single rounding is a function of the exact total
alone, so it is the same on every engine and chunking; it does not grow with ``n`` or depend on
the order (unlike the ``n 2**-53 sum|x|`` of a running sum), and is of the same kind as the
rounding of the noise addition that follows, which the floating-point caveat of continuous
releases covers.

Centring. Totals about a public point ``a`` (``sum (q(x) - a)``, ``sum (q(x) - a)^2``, ...)
are formed from the exact totals and the exact value of ``a`` in integer arithmetic, then
rounded once (:func:`centred_stats`): still a function of the exact totals alone, which one
record moves by exactly its centred contribution. Centring after the conversion would not be:
``fl(N 2**e) - n a`` carries the conversion's error, up to ``n |a| 2**-53``, into a value that
may be ``|a| / half-width`` times smaller.

Scratch memory. The chunk-sized temporaries live in per-thread scratch arrays (about 25 MB
per thread at most) reused by every chunk and query: allocating them afresh costs page faults
on every chunk.
"""

from __future__ import annotations

import numpy as np

from .._geometry import single_threaded_blas
from .._scratch import as_scratch, scratch
from .base import AssignmentStats

__all__ = ["BoxGrid", "ExactSums", "as_scratch", "centred_exponents", "centred_stats",
           "centred_units", "check_width", "float_stats", "grid_exponents", "group_sums",
           "moment_parts", "row_group_sums", "scratch", "sq_norm_parts"]

#: Values are at most 2**UNIT_BITS grid units.
UNIT_BITS = 31
#: Most (row, feature) values whose units one float64 chunk sum may hold exactly.
MAX_CHUNK_VALUES = 1 << 20
_BASE = 32  # bits per limb of ExactSums
_MASK = (1 << _BASE) - 1
_HALF = 1 << 16


def grid_exponents(magnitude) -> np.ndarray:
    """Per feature, the exponent ``e`` of the grid step ``2**e``: the smallest with
    ``magnitude < 2**31 * 2**e`` (``magnitude`` >= 0, public)."""
    return (np.frexp(np.asarray(magnitude, dtype=float))[1] - UNIT_BITS).astype(np.int64)


class BoxGrid:
    """The grid of the records' sums: steps from the public bounds ``(d, 2)``, and the
    clamping range (the grid points inside the bounds) in units.

    ``dtype`` is the storage type of the records, which lie within the bounds as stored
    (float32 storage rounds the bounds); a feature needs the clamp only when rounding the
    stored bounds to the grid can leave the clamping range (never for bounds on the grid,
    such as integers)."""

    def __init__(self, bounds, dtype=np.float64):
        self.dtype = np.dtype(dtype)
        bounds = np.asarray(bounds, dtype=float)
        self.exp = grid_exponents(np.abs(bounds).max(axis=1))
        self.inv_step = np.ldexp(1.0, -self.exp)
        self.lo = np.ceil(bounds[:, 0] * self.inv_step)
        self.hi = np.floor(bounds[:, 1] * self.inv_step)
        if (self.lo > self.hi).any():
            j = int(np.flatnonzero(self.lo > self.hi)[0])
            raise ValueError(f"bounds of feature {j} are narrower than one step of the exact-sum "
                             f"grid (2**{int(self.exp[j])}); widen them")
        stored = bounds.astype(dtype).astype(float) * self.inv_step[:, None]
        self._clamp = np.flatnonzero((np.rint(stored[:, 0]) < self.lo)
                                     | (np.rint(stored[:, 1]) > self.hi))
        # one step for all features: a scalar multiply (a (d,) operand is several times slower)
        self._scale = self.inv_step[0] if (self.inv_step == self.inv_step[0]).all() else \
            self.inv_step[:, None]

    def units(self, x) -> np.ndarray:
        """``q(x)`` in units, feature-major: (d, m) float64 integers (|.| < 2**31) in a
        scratch array, the nearest grid point (ties to even) clamped into the bounds after
        rounding. ``x`` (m, d), within the bounds as stored.

        Feature-major because every later pass reduces over the features of a record or
        sums one feature per group: on contiguous rows of m values both run several times
        faster than on rows of d values."""
        u = np.multiply(x.T, self._scale, out=scratch("units", x.shape[::-1]))  # exact
        np.rint(u, out=u)
        for j in self._clamp:  # the features whose rounding can leave the bounds
            np.clip(u[j], self.lo[j], self.hi[j], out=u[j])
        return u

    def square_classes(self) -> list[np.ndarray]:
        """The features grouped by the exponent of their squares (one group when every
        feature has the same step, as with one ``(lo, hi)`` for all)."""
        return [np.flatnonzero(self.exp == e) for e in np.unique(self.exp)]


def check_width(d: int) -> None:
    """Refuse more features than one exact chunk may hold (a chunk is at least one row)."""
    if d > MAX_CHUNK_VALUES:
        raise ValueError(f"exact sums support at most {MAX_CHUNK_VALUES} features; got {d}")


def float_stats(counts, sums, moments=None, sq_norms=None, about=None) -> AssignmentStats:
    """:class:`AssignmentStats` of float64 values from exact totals (:class:`ExactSums`).

    ``about`` (public, (d,)): the statistics of the rounded records relative to it, centred
    exactly on the integer totals before their single rounding (:func:`centred_stats`)."""
    if about is not None and np.any(about):
        return centred_stats(counts, sums, moments, sq_norms, about)
    return AssignmentStats(counts, sums.to_float(),
                           None if moments is None else moments.to_float(),
                           None if sq_norms is None else sq_norms.total_float())


def _dyadic(values) -> tuple[np.ndarray, np.ndarray]:
    """Every float64 ``a`` is ``A * 2**f`` exactly: ``(A, f)`` as an object array of Python
    integers and an int64 array."""
    pairs = [float(v).as_integer_ratio() for v in np.ravel(values)]
    A = np.empty(len(pairs), dtype=object)
    A[:] = [num for num, _ in pairs]
    return A, np.array([1 - den.bit_length() for _, den in pairs], dtype=np.int64)


def _ints(es: ExactSums) -> np.ndarray:
    """The exact totals of ``es`` in units, as an object array of Python integers."""
    l0, l1, l2 = es.limbs
    return (l2.astype(object) << 64) + (l1.astype(object) << 32) + l0.astype(object)


def _ldexp_big(n: int, e: int) -> float:
    """The float64 nearest ``n * 2**e`` for a Python integer of any size: beyond 64 bits the
    discarded bits become a sticky bit (which keeps the rounding correct) and the exponent
    grows; then :func:`_ldexp_int`."""
    s = abs(n).bit_length() - 64
    if s > 0:
        mag = abs(n)
        kept = (mag >> s) | (1 if mag & ((1 << s) - 1) else 0)
        n, e = (kept if n > 0 else -kept), e + s
    return _ldexp_int(n, int(e))


_LDEXP_BIG = np.frompyfunc(_ldexp_big, 2, 1)


def _exact_sum(terms) -> np.ndarray:
    """The float64 nearest the exact sum of ``v * 2**e`` over ``terms`` (object arrays of
    Python integers ``v``, int64 exponents ``e``, broadcasting together): the terms are
    aligned to the smallest exponent and added as integers, then rounded once."""
    shape = np.broadcast_shapes(*(np.shape(v) for v, _ in terms))
    low = np.minimum.reduce([np.broadcast_to(e, shape) for _, e in terms])
    total = sum(v << (e - low).astype(object) for v, e in terms)
    return _to_float(total, low)


def _to_float(total, low) -> np.ndarray:
    """The float64 nearest ``total * 2**low`` (an object array of Python integers)."""
    try:  # float(int) rounds correctly; scaling by a power of two is exact (no underflow)
        return np.ldexp(np.asarray(total, dtype=object).astype(np.float64), low)
    except OverflowError:  # integers beyond 2**1024: a sticky bit keeps the rounding
        return _LDEXP_BIG(total, low).astype(np.float64)


def centred_stats(counts, sums, moments, sq_norms, about) -> AssignmentStats:
    """The statistics of the rounded records ``q(x)`` about a public point ``a`` ((d,)):
    ``sum (q - a)``, ``sum (q - a)(q - a)^T`` and ``sum ||q - a||^2`` per group, as float64.

    Each is computed exactly from the exact totals (``N``: sums, ``M``: moments, ``Q``:
    squared norms, ``n``: counts) and the exact value of ``a`` (a float64 is a dyadic
    rational): ``N - n a``, ``M - a N^T - N a^T + n a a^T``, ``Q - 2 a.N + n ||a||^2`` in
    Python integers (object arrays: vectorised), then rounded to float64 once. So each is a
    function of the exact totals alone, and one record moves its exact value by the record's
    own centred contribution (``q(x) - a``, ...), whatever ``n`` and ``|a|``: centring the
    float64 totals instead (``fl(N) - n a``) leaves a rounding error of about
    ``n |a| 2**-53`` that does not cancel between neighbouring data sets. Features with
    ``a_j = 0`` keep the uncentred sums bit for bit."""
    about = np.asarray(about, dtype=float)
    A, f = _dyadic(about)
    n = np.asarray(counts).astype(object)  # Python integers: no overflow
    N, e = _ints(sums), np.broadcast_to(sums.exp, sums.shape)  # (k, d)
    out_sums = np.where(about != 0, _exact_sum([(N, e), (-(n[:, None] * A), f)]),
                        sums.to_float())
    out_moments = None
    if moments is not None:
        out_moments = _exact_sum([
            (_ints(moments), np.broadcast_to(moments.exp, moments.shape)),
            (-(A[None, None, :] * N[:, :, None]), f[None, None, :] + e[:, :, None]),
            (-(A[None, :, None] * N[:, None, :]), f[None, :, None] + e[:, None, :]),
            (n[:, None, None] * np.multiply.outer(A, A)[None], (f[:, None] + f)[None])])
    out_sq = None
    if sq_norms is not None:
        Q, q_exp = _ints(sq_norms), np.broadcast_to(sq_norms.exp, sq_norms.shape)  # (r, k)
        cols = np.flatnonzero(about)
        Ac, fc, Nc = A[cols], f[cols], N[:, cols]
        cross_e = fc + e[:, cols]  # (k, c): the exponents of -2 a_j N_j and of n a_j^2
        low = np.minimum.reduce([q_exp.min(axis=0), cross_e.min(axis=1),
                                 np.full(n.shape, 2 * fc.min())])
        total = sum(Q[r] << (q_exp[r] - low).astype(object) for r in range(Q.shape[0]))
        total = total + ((-2 * Ac * Nc) << (cross_e - low[:, None]).astype(object)).sum(axis=1)
        total = total + ((n[:, None] * (Ac * Ac)) << (2 * fc - low[:, None]).astype(object)
                         ).sum(axis=1)
        out_sq = _to_float(total, low)
    return AssignmentStats(counts, out_sums, out_moments, out_sq)


def group_sums(lab, u, k: int) -> np.ndarray:
    """Per group, the sums of the units ``u`` (d, m) of each feature: (k, d), exact (every
    partial sum is an integer below 2**53). ``lab`` (m,) intp."""
    out = np.empty((k, u.shape[0]))
    for j, row in enumerate(u):  # one bincount per feature, over a contiguous row
        out[:, j] = np.bincount(lab, weights=row, minlength=k)
    return out


def centred_exponents(bounds, centres) -> np.ndarray:
    """Per feature, the grid exponent of sums about ``centres`` (n_groups, d): from the largest
    ``|x_j - c_gj|`` the bounds allow, public."""
    bounds = np.asarray(bounds, dtype=float)
    c = np.asarray(centres, dtype=float).reshape(-1, bounds.shape[0])
    far = np.maximum(np.abs(bounds[:, 0] - c), np.abs(bounds[:, 1] - c)).max(axis=0, initial=0.0)
    return grid_exponents(far)


def centred_units(x, centres, group, inv_step) -> np.ndarray:
    """``trunc((x - c) / step)`` per value with ``c = centres[group]``, exactly: (m, d) float64
    integers in a scratch array, each coordinate of ``x - c`` moved toward zero to the grid.
    ``x`` (m, d), ``group`` (m,).

    ``s = fl(x - c)`` may round onto a grid point that the exact difference does not reach;
    only then (``s`` on the grid) does the truncation of ``s`` differ from the exact one, and
    the error of the subtraction (TwoSum, exact) tells whether the exact difference lies
    closer to zero. Otherwise ``s`` and the exact difference lie between the same two grid
    points, which are floats (|units| <= 2**31 + 1), so they truncate alike."""
    shape = x.shape
    c = np.take(centres, group, axis=0, out=scratch("centres", shape), mode="clip")
    s = np.subtract(x, c, out=scratch("diff", shape), dtype=np.float64)
    scale = inv_step[0] if (inv_step == inv_step[0]).all() else inv_step  # scalar: faster
    v = np.multiply(s, scale, out=scratch("scaled", shape))  # exact: powers of two
    t = np.trunc(v, out=scratch("units", shape))
    on = np.flatnonzero(np.equal(t, v, out=scratch("on", shape, bool)))
    if on.size:
        xs, cs, ss = np.ravel(x)[on].astype(float), c.ravel()[on], s.ravel()[on]
        bb = ss - xs
        err = (xs - (ss - bb)) + (-cs - bb)  # x - c - s, exactly (Knuth's TwoSum)
        sign = np.sign(ss)
        fix = sign * err < 0  # the exact difference lies closer to zero than s
        t.ravel()[on[fix]] -= sign[fix]
    return t


def row_group_sums(lab, t, k: int) -> np.ndarray:
    """Per group, the column sums of the units ``t`` (m, d) (record-major): (k, d), exact.
    The rows sorted by group, then one sum per run of a group (``reduceat``): the same exact
    totals as any order of the additions, 2.5x faster than a ``bincount`` over the key
    ``group * d + column`` (measured) and without the GIL. With at most ``_BINCOUNT_COLUMNS``
    columns whose every partial sum stays below ``2**53`` (``m * max |t|``: the sums of
    integers are then exact in any order), a weighted ``bincount`` per column instead: no
    sort (2-D, 24 groups, 131,072 rows: 32 -> 9 ns a row in a worker)."""
    m, d = t.shape
    if k == 1 or m == 0:
        return np.add.reduce(t, axis=0, keepdims=True) if k == 1 else np.zeros((k, d))
    if d <= _BINCOUNT_COLUMNS and m * float(np.abs(t).max()) < 2.0**53:
        out = np.empty((k, d))
        for j in range(d):
            out[:, j] = np.bincount(lab, weights=t[:, j], minlength=k)
        return out
    order = np.argsort(lab)
    # the rest in this thread's scratch arrays (a Dask worker maps every large array afresh)
    # (mode "clip": with "raise", take fills a temporary copy of out; every index is valid)
    ls = np.take(lab, order, out=scratch("sorted groups", (m,), lab.dtype), mode="clip")
    change = scratch("group starts", (m,), bool)
    change[0] = True
    np.not_equal(ls[1:], ls[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    out = np.zeros((k, d))
    out[ls[starts]] = np.add.reduceat(np.take(t, order, axis=0, out=scratch("by group", (m, d)),
                                              mode="clip"),
                                      starts, axis=0)
    return out


_BINCOUNT_COLUMNS = 5
_ROUND_2_16 = 1.5 * 2.0**68  # adding it rounds |u| < 2**51 to a multiple of 2**16


def _split(u, c, b) -> None:
    """``u = c + b`` with ``c`` the multiple of ``2**16`` nearest ``u`` (ties to even) and
    ``|b| <= 2**15``, into the float64 arrays ``c`` and ``b`` (exact: ``u + 1.5 * 2**68``
    has a last place of ``2**16``). With ``|u| < 2**31``, ``c = a * 2**16`` for
    ``|a| <= 2**15``: every product of two parts is an integer of at most 32 significant
    bits times a power of two, so chunk sums of them are exact."""
    np.add(u, _ROUND_2_16, out=c)
    np.subtract(c, _ROUND_2_16, out=c)
    np.subtract(u, c, out=b)


#: Features per block of an exact squared norm (the float64 sum of a block's squares is then
#: within 2**28 of the exact one, see sq_norm_parts).
_SQ_BLOCK = 512


def sq_norm_parts(lab, u, k, classes):
    """Per group and class of features (:meth:`BoxGrid.square_classes`), the sum of
    ``sum_j u_j^2`` as exact float64 parts ``(hi, 0, lo)`` of shape (n_classes, k), worth
    ``hi * 2**32 + lo`` units. ``u`` (d, m) feature-major.

    Per record and block of at most 512 features, the exact integer ``S = sum_j u_j^2``
    (below ``2**71``) is known two ways: modulo ``2**32`` from uint32 arithmetic (wrapping is
    exact modular arithmetic), and within ``2**28`` from its float64 sum ``F`` (each square
    and each addition rounds by at most ``2**-53`` relative: ``d**2 2**10`` in all). So
    ``lo = S mod 2**32`` and ``hi = rint((F - lo) / 2**32)`` are exact (before rounding, ``hi``
    is off by less than ``(2**28 + 2**18) / 2**32``), and so are their chunk sums (below
    ``2**50``)."""
    parts = np.zeros((3, len(classes), k))
    m = u.shape[1]
    f, low = scratch("row", (m,)), scratch("low", (m,), np.uint32)
    for i, cols in enumerate(classes):
        for start in range(0, cols.size, _SQ_BLOCK):
            block = cols[start : start + _SQ_BLOCK]
            ub = u if block.size == u.shape[0] else u[block]
            iu = as_scratch("squares", ub, np.int32).view(np.uint32)  # |units| < 2**31
            np.multiply(iu, iu, out=iu)  # u**2 mod 2**32
            np.add.reduce(iu, axis=0, out=low)  # sum_j u_j**2 mod 2**32
            np.einsum("ji,ji->i", ub, ub, out=f)  # within 2**28 of the exact sum
            lo = low.astype(np.float64)
            f -= lo
            f *= 2.0**-32
            np.rint(f, out=f)
            parts[0, i] += np.bincount(lab, weights=f, minlength=k)
            parts[2, i] += np.bincount(lab, weights=lo, minlength=k)
    return parts


def moment_parts(lab, u, k):
    """Per group, the sum of ``u u^T`` as three exact float64 parts ``(hi, mid, lo)`` of shape
    (k, d, d), worth ``hi * 2**32 + mid * 2**16 + lo`` units (products of 16-bit limbs,
    one product of the (2d, rows) limb matrix per group). ``u`` (d, m) feature-major."""
    d, m = u.shape
    limbs = scratch("limbs", (2 * d, m))
    _split(u, limbs[:d], limbs[d:])
    limbs[:d] *= 2.0**-16  # the multiples of 2**16 as integers: exact
    order = np.argsort(lab, kind="stable")
    edges = np.searchsorted(lab[order], np.arange(k + 1))
    limbs = np.take(limbs, order, axis=1, out=scratch("sorted", (2 * d, m)), mode="clip")
    parts = np.zeros((3, k, d, d))
    with single_threaded_blas():  # small products: threads cost more than they save
        for c in range(k):  # a loop over groups, vectorised over records
            part = limbs[:, edges[c] : edges[c + 1]]
            if part.shape[1] == 0:
                continue
            g = part @ part.T
            parts[0, c] = g[:d, :d]
            parts[1, c] = g[:d, d:] + g[d:, :d]
            parts[2, c] = g[d:, d:]
    return parts


class ExactSums:
    """Exact totals of integer units: ``value = (l0 + l1 2**32 + l2 2**64) * 2**exp`` with
    ``l0, l1`` in ``[0, 2**32)`` and ``l2`` signed (three int64 limbs, ``limbs`` of shape
    (3, *shape)); ``exp`` broadcasts to ``shape``. Addition is exact and associative, so any
    order or tree of partial totals gives the same limbs.

    Chunk totals are first added in float64 (``pending``: parts worth ``2**32``, ``2**16``
    and ``1`` unit) while that is exact, i.e. while every result stays below ``2**53`` in
    magnitude (checked before each addition), and moved into the limbs when it would not."""

    __slots__ = ("_limbs", "exp", "pending")

    def __init__(self, limbs, exp):
        self._limbs = limbs
        self.exp = np.asarray(exp, dtype=np.int64)
        self.pending = None

    @classmethod
    def zeros(cls, shape: tuple, exp) -> ExactSums:
        """A zero total of ``shape`` (a non-empty tuple) on the grid ``2**exp``."""
        return cls(np.zeros((3, *shape), dtype=np.int64), exp)

    @property
    def shape(self) -> tuple:
        return self._limbs.shape[1:]

    @property
    def limbs(self) -> np.ndarray:
        """The normalised limbs of the total (pending float parts moved in first)."""
        self._flush()
        return self._limbs

    def _flush(self) -> None:
        if self.pending is None:
            return
        v = self.pending.astype(np.int64)  # exact: integers below 2**53
        self.pending = None
        lim = self._limbs
        lim[1] += v[0] + (v[1] >> 16)  # parts worth 2**32, then the high half of 2**16's
        lim[0] += ((v[1] & (_HALF - 1)) << 16) + v[2]
        for i in range(2):  # carry: the low limbs end in [0, 2**32)
            carry = lim[i] >> _BASE
            lim[i] &= _MASK
            lim[i + 1] += carry

    def add_parts(self, parts) -> ExactSums:
        """Add ``hi * 2**32 + mid * 2**16 + lo`` for ``parts = (hi, mid, lo)`` (float64 or
        int64 arrays of ``shape``, exact integers below 2**53 in magnitude). In place."""
        parts = np.asarray(parts, dtype=np.float64)
        if self.pending is None:
            self.pending = parts.copy()
            return self
        room = (np.abs(self.pending).max(initial=0.0) + np.abs(parts).max(initial=0.0)
                < 2.0**53)
        if not room:
            self._flush()
            self.pending = parts.copy()
        else:
            self.pending += parts  # exact: every result is an integer below 2**53
        return self

    def add(self, units) -> ExactSums:
        """Add ``units`` (exact integers below 2**53 in magnitude). In place; returns self."""
        units = np.asarray(units, dtype=np.float64)
        zero = np.zeros_like(units)
        return self.add_parts(np.stack([zero, zero, units]))

    def __add__(self, other: ExactSums) -> ExactSums:
        out = ExactSums(self.limbs + other.limbs, self.exp)
        out.pending = np.zeros((3, *self.shape))
        out._flush()  # normalise
        return out

    def to_float(self) -> np.ndarray:
        """The float64 nearest each exact total (one correct rounding).

        With ``h = l2 2**32 + l1`` the total is ``h 2**32 + l0``: where ``|h| < 2**53`` both
        terms are exact floats and one addition rounds their sum correctly; where
        ``|h| >= 2**55``, ``l0`` only decides ties, so a sticky bit in ``h`` replaces it and
        the int64 -> float64 conversion (correctly rounded) does the rest; the few totals in
        between or beyond ``2**94`` units go through Python integers."""
        l0, l1, l2 = self.limbs
        h = np.where(np.abs(l2) < 1 << 30, (l2 << _BASE) + l1, 0)
        big = np.abs(h) >= 1 << 55
        out = np.where(big, (h | (l0 != 0)).astype(np.float64),
                       h.astype(np.float64) * 2.0**_BASE + l0.astype(np.float64))
        out[big] *= 2.0**_BASE
        slow = (np.abs(l2) >= 1 << 30) | ((np.abs(h) >= 1 << 53) & ~big)
        for i in np.argwhere(slow):  # rare: Python integers
            i = tuple(i)
            out[i] = float(_as_int(self.limbs, i))
        return np.ldexp(out, np.broadcast_to(self.exp, out.shape))

    def total_float(self) -> np.ndarray:
        """The float64 nearest the exact sum over the first axis (whose rows may have
        different ``exp``): shape ``shape[1:]``."""
        exp = np.broadcast_to(self.exp, self.shape)
        if self.shape[0] == 1:
            return ExactSums(self.limbs[:, 0], exp[0]).to_float()
        low = int(exp.min())
        out = np.empty(self.shape[1:])
        for i in np.ndindex(*self.shape[1:]):
            total = sum(_as_int(self.limbs, (r, *i)) << int(exp[(r, *i)] - low)
                        for r in range(self.shape[0]))
            out[i] = _ldexp_int(total, low)
        return out


def _as_int(limbs, index) -> int:
    return (int(limbs[(2, *index)]) << 64) + (int(limbs[(1, *index)]) << 32) + int(
        limbs[(0, *index)])


def _ldexp_int(n: int, e: int) -> float:
    """The float64 nearest ``n * 2**e`` (``float(n)`` rounds correctly; scaling by a power of
    two is exact away from underflow)."""
    return float(np.ldexp(float(n), e))
