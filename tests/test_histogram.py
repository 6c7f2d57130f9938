"""Private histograms (privclust.privacy.histogram): audits, exact distributions, error bounds.

Audits follow tests/test_audit.py: run a release many times on D0 and on D1 = D0 + one record,
bound the privacy loss from below with Clopper-Pearson intervals, and check that a variant with
half the noise (or without the empty-cell path) is caught, so each audit can fail.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

import privclust.privacy.histogram as H
import privclust.privacy.mechanisms as mech_mod
from _audit import assert_private, audit, categorical_events, combine, threshold_events
from privclust.privacy import Budget, Mechanisms, PrivacyReport, RandomSource

CONFIDENCE = 0.999


def _mech(rng=None) -> Mechanisms:
    rng = rng if rng is not None else np.random.default_rng(0)
    return Mechanisms(RandomSource(rng, "test", False), PrivacyReport("test", Budget(10.0)))


# =========================================================================== dense audits
# D0: four cells [3, 0, 5, 1]; D1 adds one record to cell 1. Every trial releases the whole
# grid (trials are rows of one call: the noise is i.i.d. per cell); the audited output is cell 1.
DENSE_D0 = np.array([3, 0, 5, 1])
DENSE_D1 = np.array([3, 1, 5, 1])
DENSE_TRIALS = 200_000


def _dense_sampler(counts, noise, eps_used):
    def sample(rng, n):
        grid = np.tile(counts, (n, 1))
        return H.dense_histogram(rng, grid, eps_used, noise)[:, 1]

    return sample


@pytest.mark.parametrize("noise", ["geometric", "laplace"])
def test_dense_histogram_passes_audit(noise):
    eps = 1.0
    events = (combine(categorical_events(range(-5, 7)), threshold_events(np.arange(-3, 4)))
              if noise == "geometric" else threshold_events(np.arange(-2.0, 1.01, 0.5)))
    res = assert_private(eps, 0.0, _dense_sampler(DENSE_D0, noise, eps),
                         _dense_sampler(DENSE_D1, noise, eps), events, DENSE_TRIALS, seed=3,
                         confidence=CONFIDENCE)
    assert res.epsilon_lower > 0.85 * eps, str(res)  # the tail events are tight: e^eps exactly


@pytest.mark.parametrize("noise", ["geometric", "laplace"])
def test_dense_histogram_half_noise_is_caught(noise):
    eps = 1.0
    events = (categorical_events(range(-5, 7)) if noise == "geometric"
              else threshold_events(np.arange(-2.0, 1.01, 0.5)))
    res = audit(_dense_sampler(DENSE_D0, noise, 2 * eps), _dense_sampler(DENSE_D1, noise, 2 * eps),
                events, 50_000, seed=4, confidence=CONFIDENCE)
    assert res.epsilon_lower > eps, str(res)


def test_dense_histogram_noises_every_cell_and_keeps_integers():
    rng = np.random.default_rng(1)
    counts = np.zeros((50, 40), dtype=np.int64)
    out = H.dense_geometric_histogram(rng, counts, 1.0)
    assert out.dtype == np.int64 and out.shape == counts.shape
    assert (out != 0).mean() > 0.4  # empty cells are noised too
    q = math.exp(-1.0)
    assert out.var() == pytest.approx(2 * q / (1 - q) ** 2, rel=0.05)
    lap = H.dense_laplace_histogram(rng, counts, 0.5)
    assert lap.dtype == np.float64 and lap.var() == pytest.approx(2 / 0.25, rel=0.05)


# =========================================================================== sparse audits
# 16 cells. D0: only cell 0 holds records (5). D1 adds one record to cell 7. On D0 cell 7 can
# only appear through the empty-cell path (binomial count, uniform choice, tail value); on D1 it
# is noised like any non-empty cell. Output: cell 7's released value, -1 if not released.
# With threshold k = 1: P(not released) = 1/(1+q) on D0 and q/(1+q) on D1, ratio e^eps.
SPARSE_CELLS = 16
SPARSE_TRIALS = 8_000


def _sparse_sampler(keys, counts, eps_used, noise="geometric", method="auto", threshold=1):
    def sample(rng, n):
        out = np.empty(n)
        for i in range(n):
            k, v = H.sparse_histogram(rng, keys, counts, SPARSE_CELLS, eps_used, threshold,
                                      noise, empty_sampling=method)
            hit = np.flatnonzero(k == 7)
            out[i] = v[hit[0]] if hit.size else -1.0
        return out

    return sample


SPARSE_EVENTS = combine(categorical_events([-1, 1, 2, 3, 4, 5, 6]),
                        threshold_events([0.0, 1.5, 2.5]))


@pytest.mark.parametrize("method", ["enumerate", "rejection"])
def test_sparse_histogram_passes_audit_including_the_empty_cell_path(method):
    eps = 1.0
    res = assert_private(
        eps, 0.0,
        _sparse_sampler([0], [5], eps, method=method),
        _sparse_sampler([0, 7], [5, 1], eps, method=method),
        SPARSE_EVENTS, SPARSE_TRIALS, seed=5, confidence=CONFIDENCE,
    )
    assert res.epsilon_lower > 0.75 * eps, str(res)


def test_sparse_laplace_histogram_passes_audit():
    eps = 1.0
    res = assert_private(
        eps, 0.0,
        _sparse_sampler([0], [5], eps, noise="laplace", threshold=1.0),
        _sparse_sampler([0, 7], [5, 1], eps, noise="laplace", threshold=1.0),
        threshold_events([0.0, 1.5, 2.0, 2.5, 3.0]), SPARSE_TRIALS, seed=6,
        confidence=CONFIDENCE,
    )
    assert res.epsilon_lower > 0.6 * eps, str(res)


def test_sparse_histogram_half_noise_is_caught():
    res = audit(_sparse_sampler([0], [5], 2.0), _sparse_sampler([0, 7], [5, 1], 2.0),
                SPARSE_EVENTS, 3_000, seed=7, confidence=CONFIDENCE)
    assert res.epsilon_lower > 1.0, str(res)


def test_sparse_histogram_without_the_empty_cell_path_is_caught(monkeypatch):
    """Releasing only the non-empty cells leaks: the audit must see it."""
    monkeypatch.setattr(mech_mod, "_draw_binomial", lambda rng, n, p: 0)
    res = audit(_sparse_sampler([0], [5], 1.0), _sparse_sampler([0, 7], [5, 1], 1.0),
                SPARSE_EVENTS, 2_000, seed=8, confidence=CONFIDENCE)
    assert res.epsilon_lower > 3.0, str(res)


# =========================================================================== exact distributions
def test_sparse_equals_thresholded_dense_in_distribution():
    """Thm 6.1: every cell's output is that of the dense histogram with values < k set to 0."""
    rng = np.random.default_rng(11)
    eps, k, n_cells, trials = 0.7, 2, 12, 8_000
    keys, counts = np.array([1, 4]), np.array([3, 1])
    seen = {c: [] for c in (1, 4, 9)}
    for _ in range(trials):
        ck, cv = H.sparse_histogram(rng, keys, counts, n_cells, eps, k)
        for c in seen:
            hit = np.flatnonzero(ck == c)
            seen[c].append(cv[hit[0]] if hit.size else 0)
    q = math.exp(-eps)
    z = np.arange(-60, 61)
    pz = (1 - q) / (1 + q) * q ** np.abs(z)
    for c, true in ((1, 3), (4, 1), (9, 0)):
        vals = np.array(seen[c])
        for v in range(k, k + 6):
            p = pz[z == v - true][0]
            se = math.sqrt(p * (1 - p) / trials)
            assert abs((vals == v).mean() - p) < 4.5 * se + 1e-4, (c, v)
        p0 = pz[(z + true) < k].sum()
        assert abs((vals == 0).mean() - p0) < 4.5 * math.sqrt(p0 * (1 - p0) / trials)
        assert set(np.unique(vals)) <= {0} | set(range(k, 10**6))


def test_empty_cell_tail_is_the_exact_discrete_tail():
    """Sampled empty cells get k + Geom0(e^-eps): integers, the right pmf (not a continuous
    inverse, the authors' defect)."""
    rng = np.random.default_rng(12)
    eps, k = 0.5, 3
    keys, vals = H.sparse_histogram(rng, [], [], 2_000_000, eps, k)
    assert vals.dtype == np.int64 and (vals >= k).all()
    j = vals - k
    q = math.exp(-eps)
    assert keys.size == pytest.approx(2_000_000 * q**k / (1 + q), rel=0.02)
    for i in range(4):
        assert (j == i).mean() == pytest.approx((1 - q) * q**i, abs=0.01)
    assert j.mean() == pytest.approx(q / (1 - q), rel=0.03)
    lk, lv = H.sparse_histogram(rng, [], [], 2_000_000, eps, 3.0, "laplace")
    assert (lv >= 3.0).all() and (lv - 3.0).mean() == pytest.approx(1 / eps, rel=0.03)
    assert lk.size == pytest.approx(2_000_000 * 0.5 * math.exp(-eps * 3.0), rel=0.03)


@pytest.mark.parametrize("method", ["enumerate", "rejection"])
def test_empty_cells_are_sampled_uniformly_without_replacement(method):
    rng = np.random.default_rng(13)
    occupied = np.arange(0, 60, 3)  # 20 occupied cells of 60
    hits = np.zeros(60)
    reps = 3000
    for _ in range(reps):
        s = H._sample_empty_cells(rng, occupied, 60, 10, method)
        assert s.size == 10 and np.unique(s).size == 10
        assert not np.isin(s, occupied).any()
        hits[s] += 1
    empty = np.setdiff1d(np.arange(60), occupied)
    assert hits[occupied].sum() == 0
    expected = reps * 10 / 40
    chi2 = ((hits[empty] - expected) ** 2 / expected).sum()
    assert chi2 < 80  # 39 degrees of freedom: P(chi2 > 80) < 1e-4


def test_all_cells_occupied_and_nothing_released():
    rng = np.random.default_rng(14)
    keys, vals = H.sparse_histogram(rng, np.arange(5), np.full(5, 100), 5, 1.0, 1)
    assert keys.tolist() == [0, 1, 2, 3, 4] and (vals > 50).all()
    keys, vals = H.sparse_histogram(rng, [], [], 5, 1.0, 200)
    assert keys.size == 0


def test_sparse_histogram_on_1e12_cells_allocates_nothing_per_cell():
    rng = np.random.default_rng(15)
    n_cells = 10**12
    keys = rng.choice(10**12, size=5000, replace=False)
    counts = rng.integers(1, 50, size=5000)
    theta = H.sparse_threshold(n_cells, 5000, 1.0)
    tracemalloc.start()
    out_k, out_v = H.sparse_histogram(rng, keys, counts, n_cells, 1.0, theta)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20e6
    assert out_k.size < 10_000 and (np.diff(out_k) > 0).all() and out_k.max() < n_cells
    # expected number of sampled empty cells: M p <= n / 2
    assert (~np.isin(out_k, keys)).sum() <= 5000


def test_sparse_threshold_uses_the_given_n():
    assert H.sparse_threshold(10**6, 1000, 1.0, "laplace") == pytest.approx(math.log(1000))
    assert H.sparse_threshold(10**6, 1000, 1.0) == math.ceil(math.log(1000))
    assert H.sparse_threshold(10**6, -5, 2.0, "laplace") == pytest.approx(math.log(10**6) / 2)
    assert H.sparse_threshold(100, 10**6, 1.0, "laplace") == pytest.approx(math.log(2))
    assert H.sparse_threshold(100, 10**6, 1.0) == 1


@pytest.mark.parametrize(
    ("kwargs", "err"),
    [
        (dict(keys=[1, 1], counts=[1, 2]), ValueError),
        (dict(keys=[20], counts=[1]), ValueError),
        (dict(keys=[-1], counts=[1]), ValueError),
        (dict(keys=[1], counts=[-1]), ValueError),
        (dict(keys=[1], counts=[1.5]), TypeError),
        (dict(keys=[1, 2], counts=[1]), ValueError),
        (dict(threshold=0), ValueError),
        (dict(threshold=1.5), ValueError),
        (dict(n_cells=2**62), ValueError),
        (dict(noise="gauss"), ValueError),
        (dict(epsilon=0.0), ValueError),
    ],
)
def test_sparse_histogram_rejects_bad_input(kwargs, err):
    args = dict(keys=[1], counts=[1], n_cells=16, epsilon=1.0, threshold=2, noise="geometric")
    args.update(kwargs)
    with pytest.raises(err):
        H.sparse_histogram(np.random.default_rng(0), **args)


# =========================================================================== ledger
def test_releases_are_recorded_with_their_noise_scale(monkeypatch):
    draws = []
    real_geo, real_lap = mech_mod._draw_two_sided_geometric, mech_mod._draw_laplace

    def geo(rng, eps_unit, size):
        draws.append(("geo", eps_unit, size))
        return real_geo(rng, eps_unit, size)

    def lap(rng, scale, size):
        draws.append(("lap", scale, size))
        return real_lap(rng, scale, size)

    monkeypatch.setattr(mech_mod, "_draw_two_sided_geometric", geo)
    monkeypatch.setattr(mech_mod, "_draw_laplace", lap)
    m = _mech()
    H.release_dense_histogram(m, np.zeros((6, 7), dtype=np.int64), 0.4)
    H.release_sparse_histogram(m, [3, 9], [4, 2], 1000, 0.6, 5)
    dense_rel, sparse_rel = m.report.releases
    assert dense_rel.epsilon == 0.4 and dense_rel.n_released == 42 and dense_rel.scale == 2.5
    assert sparse_rel.epsilon == 0.6 and sparse_rel.n_released == 1000
    assert "Real-RAM" in sparse_rel.note
    assert draws[0] == ("geo", 0.4, (42,))
    assert draws[1] == ("geo", 0.6, (2,))
    assert draws[2][0] == "lap" and draws[2][1] == pytest.approx(1 / 0.6)
    assert m.report.total().epsilon == pytest.approx(1.0)


# =========================================================================== error bounds
def test_gamma_laplace_matches_the_papers_worked_example():
    """Sec. 7.1: eps = 1, beta = 1/3, kappa = 21, |X| = 1000 gives Gamma_Lap = 38.2."""
    assert H.gamma_laplace(1.0, 1 / 3, 21, 1000) == pytest.approx(38.2, abs=0.05)
    # Thm 2.10's first bound, which the paper quotes as Gamma_Geom = 252 in the same example
    beta0 = (1 / 3) / 1000
    e = math.e
    geom_bound = 4 * e / (e - 1) * math.sqrt(21) * math.log(2 / beta0)
    assert geom_bound == pytest.approx(252, abs=0.5)
    # the exact geometric tail (Departures 13) is far below both
    assert H.gamma_geometric(1.0, 1 / 3, 21, 1000) == 24


def _sum_pmf(eps, kappa, half=150):
    q = math.exp(-eps)
    z = np.arange(-half, half + 1)
    pmf = (1 - q) / (1 + q) * q ** np.abs(z)
    out = pmf
    for _ in range(kappa - 1):
        out = np.convolve(out, pmf)
    return np.arange(-(kappa * half), kappa * half + 1), out


@pytest.mark.parametrize(("eps", "kappa"), [(1.0, 21), (0.5, 3), (2.0, 117)])
def test_geometric_sum_tail_is_exact(eps, kappa):
    s, pmf = _sum_pmf(eps, kappa)
    for g in (1, 3, 10, 25):
        assert H.geometric_sum_sf(g, eps, kappa) == pytest.approx(pmf[s >= g].sum(), rel=1e-9)


@pytest.mark.parametrize(("eps", "beta", "kappa", "n_cells"),
                         [(1.0, 0.1, 21, 5000), (0.5, 1e-6, 21, 10**6), (1.0, 0.3, 3, 10)])
def test_gamma_geometric_is_the_smallest_valid_bound(eps, beta, kappa, n_cells):
    g = H.gamma_geometric(eps, beta, kappa, n_cells)
    s, pmf = _sum_pmf(eps, kappa, half=400)
    tail = lambda t: pmf[np.abs(s) > t].sum()  # noqa: E731
    assert n_cells * tail(g) <= beta * (1 + 1e-6)
    assert n_cells * tail(g - 1) > beta
    assert g < H.gamma_laplace(eps, beta, kappa, n_cells)


@pytest.mark.parametrize("noise", ["geometric", "laplace"])
def test_positive_part_tail(noise):
    rng = np.random.default_rng(21)
    eps, kappa = 1.0, 21
    if noise == "geometric":
        z = mech_mod._draw_two_sided_geometric(rng, eps, (400_000, kappa))
    else:
        z = rng.laplace(0, 1 / eps, size=(400_000, kappa))
    t = np.maximum(z, 0).sum(axis=1)
    for g in (8.0, 12.0, 18.0):
        assert H.positive_part_sum_sf(g, eps, kappa, noise) == pytest.approx(
            (t > g).mean(), abs=0.003)


def test_sparse_bounds_add_the_threshold_below_and_positive_parts_above():
    lo, hi = H.neighbourhood_noise_bounds("geometric", 1.0, 0.1, 21, 10**6, 5)
    assert lo == 21 * 4 + H.gamma_geometric(1.0, 0.1, 21, 10**6)
    target = 0.1 / (2 * 10**6)
    assert H.positive_part_sum_sf(hi, 1.0, 21) <= target < H.positive_part_sum_sf(hi - 1, 1.0, 21)
    dense = H.neighbourhood_noise_bounds("geometric", 1.0, 0.1, 21, 10**6)
    assert dense == (H.gamma_geometric(1.0, 0.1, 21, 10**6),) * 2
    llo, lhi = H.neighbourhood_noise_bounds("laplace", 1.0, 0.1, 21, 10**6, 3.0)
    assert llo == pytest.approx(63 + H.gamma_laplace(1.0, 0.1, 21, 10**6))
    assert H.positive_part_sum_sf(lhi, 1.0, 21, "laplace") <= target * (1 + 1e-6)


def test_sparse_histogram_refuses_a_low_threshold_from_public_values_only():
    """Once refused after the binomial draw, whose size depends on the exact number of
    occupied cells; now the grid, the threshold and epsilon decide, before any draw."""
    messages = set()
    for occupied in (0, 1, 1000):
        keys = np.arange(occupied, dtype=np.int64)
        with pytest.raises(ValueError, match="raise it") as err:
            H.sparse_histogram(np.random.default_rng(0), keys, np.ones(occupied, np.int64),
                               10**12, 1.0, 1)
        messages.add(str(err.value))
    assert len(messages) == 1


def test_empty_cell_sampling_never_refuses_on_the_occupancy(monkeypatch):
    """Above the enumeration limit the sampler rejects instead of enumerating (which it
    refuses there), however full the grid: limits scaled down so the test is small."""
    monkeypatch.setattr(H, "_MAX_SAMPLED", 1 << 12)
    monkeypatch.setattr(H, "_ENUMERATE_CELLS", 1 << 8)
    n_cells = (1 << 12) + 2
    occupied = np.arange(0, n_cells, 2, dtype=np.int64)  # half the grid
    chosen = H._sample_empty_cells(np.random.default_rng(0), occupied, n_cells, 5)
    assert chosen.size == 5 and np.all(chosen % 2 == 1) and np.unique(chosen).size == 5
