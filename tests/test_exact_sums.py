"""Exact sums (``privclust.engine._exact``): every released sum is the exact total of the
records rounded to the public grid, converted to float64 once.

(a) The engine's sums against Python integers / ``fractions`` / ``math.fsum`` references on
data that makes float64 running sums order-dependent, and bit-for-bit permutation invariance;
(b) every release of DPLloyd, DPM, LSHSplits and DPGaussianMixture is the same on the NumPy and
the Dask engine for several chunkings; (c) sensitivity: one record at a bound moves a sum by
exactly its rounded value, never more than the bound.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

from privclust.engine import LocalEngine, NearestCentre
from privclust.engine._exact import ExactSums

# ------------------------------------------------------------------ independent references


def _step(lo, hi) -> np.ndarray:
    """The grid step per feature: the power of two ``2**e`` with ``max|bound| < 2**31 2**e``."""
    return np.array([2.0 ** (math.frexp(max(abs(a), abs(b)))[1] - 31) for a, b in zip(
        lo, hi, strict=True)])


def _ref_units(X, bounds) -> tuple[np.ndarray, np.ndarray]:
    """Records clipped, rounded to the nearest grid point and clamped into the bounds: integer
    units (int64) and the steps."""
    lo, hi = bounds[:, 0], bounds[:, 1]
    step = _step(lo, hi)
    u = np.rint(np.clip(X, lo, hi) / step)
    return np.clip(u, np.ceil(lo / step), np.floor(hi / step)).astype(np.int64), step


def _exact(es: ExactSums) -> Fraction:
    """The exact value of a one-group total of squared norms (rows: classes of features)."""
    lim, exp = es.limbs, np.broadcast_to(es.exp, es.shape)
    return sum(Fraction((int(lim[2, r, 0]) << 64) + (int(lim[1, r, 0]) << 32)
                        + int(lim[0, r, 0])) * Fraction(2) ** int(exp[r, 0])
               for r in range(es.shape[0]))


def _to_float(total: int, scale: Fraction) -> float:
    return float(Fraction(total) * scale)  # Fraction -> float rounds correctly


def _ref_group_stats(X, bounds, labels, k):
    """Per group: sums, sum of squared norms and moments of the rounded records, exactly."""
    u, step = _ref_units(X, bounds)
    d = X.shape[1]
    sums = np.empty((k, d))
    sq = np.empty(k)
    mom = np.empty((k, d, d))
    for g in range(k):
        ug = u[labels == g].astype(object)  # Python integers: no overflow, no rounding
        for j in range(d):
            sums[g, j] = _to_float(int(ug[:, j].sum()), Fraction(step[j]))
            for i in range(d):
                mom[g, i, j] = _to_float(int((ug[:, i] * ug[:, j]).sum()),
                                         Fraction(step[i]) * Fraction(step[j]))
        sq[g] = float(sum(Fraction(int((ug[:, j] ** 2).sum())) * Fraction(step[j]) ** 2
                          for j in range(d)))
    return sums, sq, mom


def _adversarial(n=100_000, seed=0):
    """Values whose float64 running sums depend on the order: huge and tiny magnitudes,
    alternating signs, values at the bounds."""
    rng = np.random.default_rng(seed)
    big = rng.choice([-1.0, 1.0], size=n) * 1e8 * rng.uniform(0.5, 1.0, size=n)
    tiny = rng.normal(size=n) * 1e-3
    X = np.column_stack([np.where(np.arange(n) % 2 == 0, big, tiny),
                         (-1.0) ** np.arange(n) * (1e8 - rng.uniform(0, 1e-2, size=n)),
                         rng.uniform(-1e8, 1e8, size=n) * 10.0 ** rng.integers(-8, 1, size=n)])
    X[:50] = 1e8
    return X, np.tile([-1e8, 1e8], (3, 1))


# ------------------------------------------------------------------ (a) exact kernels


def test_sums_equal_exact_references_and_ignore_the_order():
    X, bounds = _adversarial()
    eng = LocalEngine(X, bounds)
    c = np.array([[0.0, 0.0, 0.0]])
    counts, sums, sq = eng.nearest_centre_moments(c)
    ref_sums, ref_sq, _ = _ref_group_stats(X, bounds, np.zeros(len(X), int), 1)
    np.testing.assert_array_equal(sums, ref_sums)
    np.testing.assert_array_equal(sq, ref_sq)
    # math.fsum of the rounded values: the same correctly rounded totals
    u, step = _ref_units(X, bounds)
    assert [math.fsum(u[:, j] * step[j]) for j in range(3)] == sums[0].tolist()
    # float64 running sums of these records depend on the order; the exact sums do not
    perm = np.random.default_rng(1).permutation(len(X))
    floats = [X[order, j].cumsum()[-1] for order in (np.arange(len(X)), perm) for j in range(3)]
    assert floats[:3] != floats[3:]
    other = LocalEngine(X[perm], bounds).nearest_centre_moments(c)
    for a, b in zip((counts, sums, sq), other, strict=True):
        np.testing.assert_array_equal(a, b)
    assert sums.tobytes() == other[1].tobytes()


def test_moments_and_groups_equal_exact_references():
    """Per-group sums, squared norms and x x^T; features with different steps and bounds off
    the grid (the clamp after rounding), float32 storage."""
    rng = np.random.default_rng(2)
    X = np.column_stack([rng.uniform(-0.15, 0.35, 3000), rng.normal(0, 400.0, 3000)])
    bounds = np.array([[-0.1, 0.3], [-1000.0, 1000.0]])
    centres = np.array([[0.0, -300.0], [0.2, 0.0], [0.1, 300.0]])
    for dtype in (np.float64, np.float32):
        Xd = X.astype(dtype)
        eng = LocalEngine(Xd, bounds)
        st = eng.assignment_stats(NearestCentre(centres), second_moments=True,
                                  squared_norms=True)
        lab = np.argmin(((np.clip(Xd, bounds[:, 0].astype(dtype), bounds[:, 1].astype(dtype))
                          .astype(float)[:, None] - centres) ** 2).sum(-1), axis=1)
        np.testing.assert_array_equal(st.counts, np.bincount(lab, minlength=3))
        Xr = np.clip(Xd.astype(float), bounds[:, 0].astype(dtype), bounds[:, 1].astype(dtype))
        sums, sq, mom = _ref_group_stats(Xr, bounds, lab, 3)
        np.testing.assert_array_equal(st.sums, sums)
        np.testing.assert_array_equal(st.sq_norms, sq)
        np.testing.assert_array_equal(st.moments, mom)


def _trunc_toward_zero(x: float, c: float, step: float) -> int:
    q = (Fraction(x) - Fraction(c)) / Fraction(step)
    return int(q)  # int() truncates toward zero, exactly


def test_centred_sums_truncate_the_exact_difference():
    """``x - c`` that float64 rounds onto a grid point the exact difference does not reach:
    the naive truncation of ``fl(x - c)`` is wrong there, the engine's is exact."""
    rng = np.random.default_rng(3)
    bounds = np.tile([-1.0, 1.0], (2, 1))
    c = np.array([[0.1, -1.0 / 3.0]])
    step = _step([1.1, 1.0 + 1.0 / 3.0], [0, 0])
    k = rng.integers(-2**29, 2**29, size=(20000, 2)).astype(float)
    X = c + k * step  # rounded: lands near, not on, the grid about c
    X += rng.integers(-2, 3, size=X.shape) * np.spacing(X)
    X = np.clip(X, -1.0, 1.0)
    exact = np.array([[_trunc_toward_zero(x, cj, sj) for x, cj, sj in zip(row, c[0], step,
                                                                          strict=True)]
                      for row in X])
    naive = np.trunc((X - c) / step)
    assert (naive != exact).sum() > 100  # adversarial indeed
    eng = LocalEngine(X, bounds)
    got = eng.centred_sums(eng.root(), c)[0]
    want = [_to_float(int(exact[:, j].astype(object).sum()), Fraction(step[j]))
            for j in range(2)]
    assert got.tolist() == want
    assert (np.abs(exact * step) <= np.abs(X - c)).all()  # never farther from the centre


def test_exact_totals_add_in_any_order_and_round_correctly():
    rng = np.random.default_rng(4)
    parts = [rng.integers(-2**52, 2**52, size=(3, 5)).astype(float) for _ in range(40)]
    totals = []
    for order in (range(40), rng.permutation(40)):
        chunks = [ExactSums.zeros((5,), 0).add_parts(parts[i]) for i in order]
        while len(chunks) > 1:  # a tree, as the Dask engine adds chunk totals
            chunks = [sum(chunks[i + 1 : i + 3], start=chunks[i])
                      for i in range(0, len(chunks), 3)]
        totals.append(chunks[0])
    np.testing.assert_array_equal(totals[0].limbs, totals[1].limbs)
    want = [float(sum(Fraction(int(p[0, j])) * 2**32 + Fraction(int(p[1, j])) * 2**16
                      + int(p[2, j]) for p in parts)) for j in range(5)]
    assert totals[0].to_float().tolist() == want
    # huge totals (beyond int64, ties): correct rounding of every limb pattern
    vals = [(-1) ** i * ((1 << b) + (1 << max(b - 54, 0)) + i) for i, b in enumerate(
        range(0, 125, 3))]
    es = ExactSums.zeros((len(vals),), 0)
    es.limbs[:] = [[(v >> s) & 0xFFFFFFFF for v in vals] for s in (0, 32)] + [
        [v >> 64 for v in vals]]
    assert es.to_float().tolist() == [float(v) for v in vals]


def _ref_centred(X, bounds, labels, k, about):
    """Per group: sum (q - a), sum (q - a)(q - a)^T and sum ||q - a||^2 of the rounded records
    ``q``, exactly (Fractions), each rounded once."""
    u, step = _ref_units(X, bounds)
    d = X.shape[1]
    q = [[Fraction(int(v)) * Fraction(st) - Fraction(a) for v, st, a in zip(row, step, about,
                                                                            strict=True)]
         for row in u]
    sums, mom, sq = np.empty((k, d)), np.empty((k, d, d)), np.empty(k)
    for g in range(k):
        rows = [q[i] for i in np.flatnonzero(labels == g)]
        for i in range(d):
            sums[g, i] = float(sum((r[i] for r in rows), Fraction(0)))
            for j in range(d):
                mom[g, i, j] = float(sum((r[i] * r[j] for r in rows), Fraction(0)))
        sq[g] = float(sum((sum(v * v for v in r) for r in rows), Fraction(0)))
    return sums, mom, sq


def test_statistics_about_a_point_are_centred_exactly_then_rounded_once():
    """``about=``: sums, moments and squared norms of ``q(x) - a`` equal exact references
    (Fractions) on timestamps far from zero, a feature off the grid and a centre that is not a
    grid point (0.1); ``a = 0`` gives the uncentred totals bit for bit."""
    rng = np.random.default_rng(6)
    bounds = np.array([[1.7e9, 1.7e9 + 3600.0], [-0.15, 0.35], [-1.0, 1.0]])
    X = rng.uniform(bounds[:, 0], bounds[:, 1], size=(2000, 3))
    X[:, 0] = X[:, 0].round()
    centres = np.array([[1.7e9 + 900, 0.0, 0.0], [1.7e9 + 2700, 0.2, 0.5]])
    about = np.array([1.7e9 + 1800.0, 0.1, 0.0])
    eng = LocalEngine(X, bounds)
    st = eng.assignment_stats(NearestCentre(centres), second_moments=True, squared_norms=True,
                              about=about)
    lab = np.argmin(((X[:, None] - centres) ** 2).sum(-1), axis=1)
    sums, mom, sq = _ref_centred(X, bounds, lab, 2, about)
    np.testing.assert_array_equal(st.sums, sums)
    np.testing.assert_array_equal(st.moments, mom)
    np.testing.assert_array_equal(st.sq_norms, sq)
    tiny = np.array([1.7e9 + 1800.0, -1e-300, 0.3])  # integers of over 1,024 bits inside
    st_tiny = eng.assignment_stats(NearestCentre(centres), second_moments=True,
                                   squared_norms=True, about=tiny)
    for got, want in zip((st_tiny.sums, st_tiny.moments, st_tiny.sq_norms),
                         _ref_centred(X, bounds, lab, 2, tiny), strict=True):
        np.testing.assert_array_equal(got, want)
    plain = eng.assignment_stats(NearestCentre(centres), second_moments=True,
                                 squared_norms=True)
    zero = eng.assignment_stats(NearestCentre(centres), second_moments=True,
                                squared_norms=True, about=np.zeros(3))
    for a, b in ((plain.sums, zero.sums), (plain.moments, zero.moments),
                 (plain.sq_norms, zero.sq_norms)):
        assert a.tobytes() == b.tobytes()
    # the feature with a = 0 keeps its uncentred sum bit for bit
    assert st.sums[:, 2].tobytes() == plain.sums[:, 2].tobytes()
    with pytest.raises(ValueError, match="about must be a finite point of 3 features"):
        eng.assignment_stats(NearestCentre(centres), about=[0.0, 1.0])


# ------------------------------------------------------------------ (c) sensitivity


def test_one_record_at_a_bound_moves_each_sum_by_its_rounded_value():
    """The Casacuberta et al. example: float64 running sums of [-B, 1, 1, ...] absorb the ones
    (B = 2**54); adding the record +B first cancels -B, the ones then count, and the float sum
    moves by more than B. The exact sums move by exactly B (the ones round to 0 on the grid of
    +-B)."""
    B = 2.0**54
    m = 100_000
    X = np.concatenate([[-B], np.ones(m)])[:, None]
    Xp = np.concatenate([[-B, B], np.ones(m)])[:, None]
    float_move = Xp[:, 0].cumsum()[-1] - X[:, 0].cumsum()[-1]
    assert float_move > B  # the float64 sensitivity is broken
    bounds = np.array([[-B, B]])
    sums = [LocalEngine(Y, bounds).nearest_centre_stats(np.zeros((1, 1)))[1][0, 0]
            for Y in (X, Xp)]
    assert sums[1] - sums[0] == B


def test_records_at_the_bounds_move_sums_within_the_bounds():
    rng = np.random.default_rng(5)
    bounds = np.array([[-0.1, 0.3], [-7.0, 13.0], [0.0, 1e6]])
    X = rng.uniform(bounds[:, 0], bounds[:, 1], size=(5000, 3))
    corners = np.array([bounds[:, 1], bounds[:, 0], [0.3, -7.0, 1e6]])
    c = np.array([[0.1, 3.0, 5e5]])  # the middle of the bounds
    half = (bounds[:, 1] - bounds[:, 0]) / 2
    base = LocalEngine(X, bounds)
    s0 = base.nearest_centre_moments(c)
    sq0 = base.exact_assignment_stats(NearestCentre(c), squared_norms=True).sq_norms
    cs0 = base.centred_sums(base.root(), c)
    for r in corners:
        eng = LocalEngine(np.vstack([X, r]), bounds)
        n, s, sq = eng.nearest_centre_moments(c)
        move = [Fraction(a) - Fraction(b) for a, b in zip(s[0], s0[1][0], strict=True)]
        q, step = _ref_units(r[None, :], bounds)
        assert move == [Fraction(int(v)) * Fraction(st) for v, st in zip(q[0], step,
                                                                         strict=True)]
        assert all(Fraction(lo) <= mv <= Fraction(hi) for mv, (lo, hi) in zip(move, bounds,
                                                                            strict=True))
        sq_move = _exact(eng.exact_assignment_stats(NearestCentre(c), squared_norms=True)
                         .sq_norms) - _exact(sq0)
        assert sq_move == sum(Fraction(int(v)) ** 2 * Fraction(st) ** 2
                              for v, st in zip(q[0], step, strict=True))
        assert 0 <= sq_move <= sum(Fraction(max(abs(lo), abs(hi))) ** 2 for lo, hi in bounds)
        cmove = eng.centred_sums(eng.root(), c)[0] - cs0[0]  # exact: both on the same grid
        assert (np.abs(cmove) <= np.abs(r - c[0])).all() and (np.abs(cmove) <= half).all()


def test_centred_statistics_move_by_the_records_own_contribution_far_from_zero():
    """Timestamps within one hour, 200,000 records: one record moves ``sum (q - mid)`` and
    ``sum (q - mid)^2`` by exactly its own centred contribution (at most half and half^2),
    where centring the rounded totals of ``q`` and ``q^2`` in float64 moved the squares by
    tens of half^2."""
    rng = np.random.default_rng(0)
    lo, half = 1.7e9, 1800.0
    bounds = np.array([[lo, lo + 2 * half]])
    mid = bounds.mean(axis=1)
    X = rng.uniform(lo, lo + 2 * half, (200_000, 1)).round()
    worst_old = 0.0
    base = LocalEngine(X, bounds).assignment_stats(NearestCentre(mid[None]),
                                                   second_moments=True, about=mid)
    raw = LocalEngine(X, bounds).assignment_stats(NearestCentre(mid[None]), second_moments=True)
    for r in (*rng.uniform(lo, lo + 2 * half, (6, 1)).round(), np.array([lo + 2 * half])):
        eng = LocalEngine(np.vstack([X, r]), bounds)
        st = eng.assignment_stats(NearestCentre(mid[None]), second_moments=True, about=mid)
        dev = Fraction(float(r[0])) - Fraction(float(mid[0]))  # on the grid (step 1)
        assert Fraction(st.sums[0, 0]) - Fraction(base.sums[0, 0]) == dev
        assert Fraction(st.moments[0, 0, 0]) - Fraction(base.moments[0, 0, 0]) == dev**2
        old = eng.assignment_stats(NearestCentre(mid[None]), second_moments=True)

        def centred(s):  # the float centring the scaler used to do
            n, S, Q = s.counts[0], s.sums[0, 0], s.moments[0, 0, 0]
            return (Q - 2.0 * mid[0] * S + n * mid[0] * mid[0]) / half**2

        worst_old = max(worst_old, abs(centred(old) - centred(raw)))
    assert worst_old > 5.0  # what the float centring did: far above the sensitivity 1


# ------------------------------------------------------------------ (b) NumPy = Dask


from tests._dask_cases import CHUNKINGS  # noqa: E402

RELEASED = ("cluster_centers_", "cluster_sizes_", "centers_history_", "cost_history_",
            "coreset_", "coreset_weights_", "centre_", "means_", "covariances_", "weights_",
            "noisy_counts_", "n_hat_", "labels_")


def _estimators():
    from privclust import DPM, DPGaussianMixture, DPLloyd, LSHSplits

    b = (-12, 12)
    return {
        "DPLloyd": DPLloyd(4, epsilon=1.0, bounds=b, random_state=3),
        "DPM": DPM(epsilon=1.0, bounds=b, random_state=3),
        "LSHSplits": LSHSplits(4, epsilon=1.0, bounds=b, random_state=3),
        "DPGaussianMixture": DPGaussianMixture(epsilon=1.0, n_components=4, bounds=b,
                                               random_state=3),
    }


@pytest.fixture
def client(dask_client):
    """The session's Dask client (conftest)."""
    return dask_client


@pytest.mark.parametrize("name", ["DPLloyd", "DPM", "LSHSplits", "DPGaussianMixture"])
def test_releases_are_the_same_bits_on_both_engines(client, name):
    import dask.array as da
    from sklearn.base import clone
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(1500, 3, centers=4, cluster_std=1.0, center_box=(-8, 8), random_state=0)
    X[::7] *= 1.7  # some records outside the bounds: clipped
    est = _estimators()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = clone(est).fit(X)
        fits = {c: clone(est).fit(da.from_array(X, chunks=(f(len(X)), 3)))
                for c, f in CHUNKINGS.items()}
    compared = 0
    for chunking, fit in fits.items():
        assert [r.to_dict() for r in fit.privacy_report_.releases] == [
            r.to_dict() for r in ref.privacy_report_.releases], chunking
        for attr in RELEASED:
            if hasattr(ref, attr):
                a, b = np.asarray(getattr(ref, attr)), np.asarray(getattr(fit, attr))
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (chunking, attr)
                compared += 1
    assert compared >= 3 * len(CHUNKINGS)


def test_centred_releases_are_the_same_bits_on_both_engines_far_from_zero(client):
    """Timestamps within one hour: the statistics about the middle of the bounds (centred on
    the exact totals after the chunks' totals are added), the scaler's releases and DP-Lloyd's
    are the NumPy engine's bit for bit, whatever the chunking."""
    import dask.array as da
    from sklearn.base import clone

    from privclust import DPLloyd
    from privclust.engine.dask import DaskEngine
    from privclust.preprocessing import PrivateScaler

    rng = np.random.default_rng(7)
    bounds = np.tile([1.7e9, 1.7e9 + 3600.0], (2, 1))
    X = np.clip(rng.normal(1.7e9 + 1000.0, 900.0, (3000, 2)), *bounds[0]).round(3)
    mid = bounds.mean(axis=1)
    centres = np.array([[1.7e9 + 500.0, 1.7e9 + 900.0], [1.7e9 + 2500.0, 1.7e9 + 3000.0]])
    local = LocalEngine(X, bounds).assignment_stats(
        NearestCentre(centres), second_moments=True, squared_norms=True, about=mid)
    ests = [PrivateScaler(1.0, bounds=bounds, random_state=3),
            DPLloyd(2, epsilon=1.0, bounds=bounds, random_state=3)]
    refs = [clone(e).fit(X) for e in ests]
    for chunking, f in CHUNKINGS.items():
        dX = da.from_array(X, chunks=(f(len(X)), 2))
        st = DaskEngine(dX, bounds).assignment_stats(
            NearestCentre(centres), second_moments=True, squared_norms=True, about=mid)
        for a, b in ((local.sums, st.sums), (local.moments, st.moments),
                     (local.sq_norms, st.sq_norms)):
            assert a.tobytes() == b.tobytes(), chunking
        for est, ref in zip(ests, refs, strict=True):
            fit = clone(est).fit(dX)
            assert [r.to_dict() for r in fit.privacy_report_.releases] == [
                r.to_dict() for r in ref.privacy_report_.releases], chunking
            for attr in ("centre_", "scale_", "cluster_centers_"):
                if hasattr(ref, attr):
                    assert getattr(ref, attr).tobytes() == getattr(fit, attr).tobytes()
