"""Distribution tests for privclust.privacy's mechanisms and calibration (fixed seeds).

Statistical checks use confidence bounds wide enough that a correct implementation passes with
overwhelming probability (5 standard errors, or p-values above 1e-4); with fixed seeds they are
reproducible.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from _audit import clopper_pearson_lower, clopper_pearson_upper
from privclust.privacy import (
    Budget,
    Mechanisms,
    PrivacyReport,
    RandomSource,
    classic_gaussian_sigma,
    count_offset,
    exponential_mechanism_probabilities,
    gaussian_sigma,
    resolve_random_state,
    zcdp_gaussian_sigma,
)
from privclust.privacy.mechanisms import (
    exponential_mechanism,
    laplace_noise,
    private_quantile,
    two_sided_geometric,
)

Z = 5.0  # standard errors allowed in moment checks
ALPHA = 1e-6  # level of Clopper-Pearson bounds


def _rng(seed):
    return np.random.default_rng(seed)


def _mechanisms(seed=0) -> Mechanisms:
    return Mechanisms(RandomSource(_rng(seed), "test", False),
                      PrivacyReport("test", Budget(1e9, 0.5)))


def _geometric_tail(eps_unit: float, k: int) -> float:
    """P(Z >= k) = e^(-eps k) / (1 + e^-eps) for the two-sided geometric, k >= 0."""
    return math.exp(-eps_unit * k) / (1 + math.exp(-eps_unit))


# =========================================================================== two-sided geometric
@pytest.fixture(scope="module", params=[0.2, 1.0, 3.0], ids=lambda e: f"eps={e}")
def geometric_sample(request):
    eps = request.param
    base = np.arange(400_000, dtype=np.int64) % 7  # the noise is added to the values
    out = two_sided_geometric(_rng(1), base, eps, 1)
    return eps, base, out


def test_geometric_returns_integers_on_the_values(geometric_sample):
    eps, base, out = geometric_sample
    assert out.dtype == np.int64
    assert out.shape == base.shape
    assert (out - base).std() > 0


def test_geometric_mean_and_variance(geometric_sample):
    eps, base, out = geometric_sample
    z = (out - base).astype(float)
    a = math.exp(-eps)
    var = 2 * a / (1 - a) ** 2
    n = z.size
    assert abs(z.mean()) < Z * math.sqrt(var / n)
    # fourth central moment of the discrete Laplace, for the standard error of the variance
    m4 = 2 * a * (1 + 10 * a + a * a) / (1 - a) ** 4
    assert abs(z.var() - var) < Z * math.sqrt((m4 - var**2) / n)


def test_geometric_tails_match_the_formula(geometric_sample):
    eps, base, out = geometric_sample
    z = out - base
    n = z.size
    ks = np.arange(0, 6)
    for side in (z, -z):  # symmetric: P(Z >= k) = P(Z <= -k)
        counts = np.array([(side >= k).sum() for k in ks])
        lo = clopper_pearson_lower(counts, n, ALPHA)
        hi = clopper_pearson_upper(counts, n, ALPHA)
        exact = np.array([_geometric_tail(eps, int(k)) for k in ks])
        assert ((lo <= exact) & (exact <= hi)).all(), (counts / n, exact)


def test_geometric_scales_with_sensitivity():
    eps, sens = 1.0, 3
    z = two_sided_geometric(_rng(2), np.zeros(300_000, dtype=np.int64), eps, sens)
    for k in (0, 2, 5):
        c = int((z >= k).sum())
        exact = _geometric_tail(eps / sens, k)
        assert clopper_pearson_lower(c, z.size, ALPHA) <= exact <= clopper_pearson_upper(
            c, z.size, ALPHA)


def test_geometric_rejects_floats_and_bad_epsilon():
    with pytest.raises(TypeError, match="integer"):
        two_sided_geometric(_rng(0), np.array([1.5, 2.0]), 1.0)
    for eps in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="epsilon"):
            two_sided_geometric(_rng(0), np.array([1, 2]), eps)


def test_mechanisms_count_noise_and_ledger():
    mech = _mechanisms(3)
    counts = np.full(200_000, 10, dtype=np.int64)
    out = mech.count(counts, 0.7, target="counts", delta=1e-6)
    z = out - counts
    c = int((z >= 2).sum())
    exact = _geometric_tail(0.7, 2)
    assert clopper_pearson_lower(c, z.size, ALPHA) <= exact <= clopper_pearson_upper(
        c, z.size, ALPHA)
    (rel,) = mech.report.releases
    assert (rel.epsilon, rel.delta, rel.sensitivity) == (0.7, 1e-6, 1.0)
    assert rel.scale == pytest.approx(1 / 0.7)
    assert rel.n_released == counts.size


# =========================================================================== Laplace
@pytest.mark.parametrize(("eps", "sens"), [(1.0, 1.0), (0.3, 2.0), (4.0, 0.5)])
def test_laplace_scale(eps, sens):
    scale = sens / eps
    values = np.linspace(-3, 3, 100_000)
    z = laplace_noise(_rng(4), values, eps, sens) - values
    assert stats.kstest(z, stats.laplace(scale=scale).cdf).pvalue > 1e-4
    # mean absolute deviation of Laplace(b) is b; its standard deviation is b
    assert abs(np.abs(z).mean() - scale) < Z * scale / math.sqrt(z.size)


def test_mechanisms_laplace_records_scale():
    mech = _mechanisms(5)
    out = mech.laplace(np.zeros(50_000), 2.0, 0.5, target="sums")
    assert stats.kstest(out, stats.laplace(scale=4.0).cdf).pvalue > 1e-4
    assert mech.report.releases[-1].scale == pytest.approx(4.0)


# =========================================================================== Gaussian
def _profile(sigma, eps, sens):
    """Balle & Wang 2018 Thm. 8: the smallest delta of the Gaussian mechanism at epsilon."""
    a = sens / (2 * sigma)
    b = eps * sigma / sens
    return stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b)


GAUSS_GRID = [(0.05, 1e-5, 1.0), (0.5, 1e-6, 1.0), (1.0, 1e-5, 2.5), (3.0, 1e-8, 0.1),
              (10.0, 1e-3, 1.0)]


@pytest.mark.parametrize(("eps", "delta", "sens"), GAUSS_GRID)
def test_gaussian_sigma_is_the_smallest_that_meets_the_profile(eps, delta, sens):
    sigma = gaussian_sigma(eps, delta, sens)
    assert _profile(sigma, eps, sens) <= delta * (1 + 1e-9)
    assert _profile(sigma * (1 - 1e-6), eps, sens) > delta
    assert _profile(sigma * 0.99, eps, sens) > delta
    assert gaussian_sigma(eps, delta, 2 * sens) == pytest.approx(2 * sigma, rel=1e-9)


@pytest.mark.parametrize("eps", [0.05, 0.3, 0.9])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_classic_gaussian_is_larger_for_small_epsilon(eps, delta):
    classic = classic_gaussian_sigma(eps, delta, 1.7)
    assert classic == pytest.approx(math.sqrt(2 * math.log(1.25 / delta)) * 1.7 / eps)
    assert classic > gaussian_sigma(eps, delta, 1.7)
    assert _profile(classic, eps, 1.7) <= delta  # the classic bound is valid (eps < 1), loose


def test_gaussian_sigma_rejects_bad_arguments():
    for eps, delta in [(0.0, 1e-5), (-1.0, 1e-5), (math.inf, 1e-5), (1.0, 0.0), (1.0, 1.0)]:
        with pytest.raises(ValueError):
            gaussian_sigma(eps, delta)
        with pytest.raises(ValueError):
            classic_gaussian_sigma(eps, delta)


def test_mechanisms_gaussian_draws_sigma_per_row():
    mech = _mechanisms(6)
    sens = np.array([0.5, 2.0])
    n = 100_000
    values = np.zeros((2, n))
    out = mech.gaussian(values, sens, 1.0, 1e-5, target="leaf sums")
    for row, s in zip(out, sens, strict=True):
        sigma = gaussian_sigma(1.0, 1e-5, s)
        # (n - 1) s^2 / sigma^2 ~ chi2(n - 1)
        stat = (n - 1) * row.var(ddof=1) / sigma**2
        assert stats.chi2(n - 1).sf(stat) > 1e-4 and stats.chi2(n - 1).cdf(stat) > 1e-4
    rel = mech.report.releases[-1]
    assert rel.scale == pytest.approx(gaussian_sigma(1.0, 1e-5, 2.0))
    assert (rel.epsilon, rel.delta, rel.n_released) == (1.0, 1e-5, 2)


@pytest.mark.parametrize(("rho", "sens"), [(0.01, 1.0), (0.5, 3.0), (2.0, 0.2)])
def test_zcdp_gaussian_sigma(rho, sens):
    sigma = zcdp_gaussian_sigma(rho, sens)
    assert sigma == pytest.approx(sens / math.sqrt(2 * rho))
    # Renyi divergence of N(sens, sigma^2) from N(0, sigma^2), by quadrature: alpha * rho
    p = stats.norm(0, sigma)
    q = stats.norm(sens, sigma)
    for order in (1.5, 2.0, 5.0):
        val, _ = integrate.quad(
            lambda x, a=order: math.exp(a * q.logpdf(x) + (1 - a) * p.logpdf(x)),
            -30 * sigma - 10 * sens, 30 * sigma + 10 * sens, limit=400, points=[0.0, sens],
        )
        assert math.log(val) / (order - 1) == pytest.approx(order * rho, rel=1e-5)


def test_zcdp_gaussian_rejects_bad_rho_and_records_rho():
    for rho in (0.0, -0.1):
        with pytest.raises(ValueError, match="rho"):
            zcdp_gaussian_sigma(rho)
    mech = _mechanisms(7)
    out = mech.gaussian_zcdp(np.zeros(100_000), 2.0, 0.5, target="x")
    assert stats.kstest(out, stats.norm(scale=2.0).cdf).pvalue > 1e-4
    rel = mech.report.releases[-1]
    assert (rel.rho, rel.epsilon, rel.scale) == (0.5, 0.0, 2.0)


# =========================================================================== exponential mechanism
EM_SCORES = np.array([0.0, 1.0, 2.5, -1.0, 2.0, 0.3])


def _frequencies(idx, m):
    return np.bincount(np.asarray(idx).ravel(), minlength=m)


@pytest.mark.parametrize("monotone", [False, True])
@pytest.mark.parametrize(("eps", "sens"), [(1.0, 1.0), (2.0, 0.5), (0.5, 3.0)])
def test_exponential_mechanism_matches_probabilities(eps, sens, monotone):
    n = 200_000
    rows = np.broadcast_to(EM_SCORES, (n, EM_SCORES.size))
    idx = exponential_mechanism(_rng(8), rows, sens, eps, monotone=monotone)
    p = exponential_mechanism_probabilities(EM_SCORES, sens, eps, monotone=monotone)
    w = np.exp(eps * EM_SCORES / ((1 if monotone else 2) * sens))
    assert np.allclose(p, w / w.sum())  # the probabilities are the textbook ones
    assert stats.chisquare(_frequencies(idx, EM_SCORES.size), n * p).pvalue > 1e-4


def test_exponential_mechanism_one_row_at_a_time():
    rng = _rng(9)
    idx = np.array([exponential_mechanism(rng, EM_SCORES, 1.0, 1.0) for _ in range(20_000)])
    assert idx.shape == (20_000,)
    p = exponential_mechanism_probabilities(EM_SCORES, 1.0, 1.0)
    assert stats.chisquare(_frequencies(idx, EM_SCORES.size), idx.size * p).pvalue > 1e-4


def test_exponential_mechanism_never_picks_minus_infinity():
    scores = np.array([-np.inf, 3.0, -np.inf, -50.0, 2.0, -np.inf])
    n = 100_000
    idx = exponential_mechanism(_rng(10), np.broadcast_to(scores, (n, 6)), 0.01, 1.0)
    freq = _frequencies(idx, 6)
    assert freq[np.isinf(scores)].sum() == 0
    p = exponential_mechanism_probabilities(scores, 0.01, 1.0)
    assert (p[np.isinf(scores)] == 0).all()
    assert freq[3] == 0  # e^(-26500) relative weight


def test_exponential_mechanism_rows_use_their_own_sensitivity():
    scores = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [2.0, 0.0, 1.0]])
    sens = np.array([0.5, 4.0, 1.0])
    n = 100_000
    rows = np.repeat(scores, n, axis=0)
    idx = exponential_mechanism(_rng(11), rows, np.repeat(sens, n), 1.5).reshape(3, n)
    for r in range(3):
        p = exponential_mechanism_probabilities(scores[r], sens[r], 1.5)
        assert stats.chisquare(_frequencies(idx[r], 3), n * p).pvalue > 1e-4


@pytest.mark.parametrize("m", [3, 4])
def test_exponential_mechanism_probabilities_rows_use_their_own_sensitivity(m):
    scores = np.arange(3 * m, dtype=float).reshape(3, m) % 4
    sens = np.array([0.5, 4.0, 1.0])
    p = exponential_mechanism_probabilities(scores, sens, 1.5)
    expected = np.stack([exponential_mechanism_probabilities(scores[r], sens[r], 1.5)
                         for r in range(3)])
    np.testing.assert_allclose(p, expected)


def test_exponential_mechanism_rejects_nan_and_bad_sensitivity():
    with pytest.raises(ValueError, match="NaN"):
        exponential_mechanism(_rng(0), np.array([0.0, np.nan, 1.0]), 1.0, 1.0)
    with pytest.raises(ValueError, match="NaN"):
        exponential_mechanism(_rng(0), np.array([[0.0, 1.0], [np.nan, 1.0]]), 1.0, 1.0)
    for sens in (0.0, -1.0, np.inf, np.nan, np.array([1.0, 0.0])):
        with pytest.raises(ValueError, match="sensitivity"):
            exponential_mechanism(_rng(0), np.zeros((2, 3)), sens, 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        exponential_mechanism(_rng(0), np.zeros(3), 1.0, 0.0)


def test_mechanisms_select_uses_the_factor_two():
    mech = _mechanisms(12)
    n = 100_000
    idx = mech.select(np.broadcast_to(EM_SCORES, (n, EM_SCORES.size)), 1.0, 1.0, target="split")
    p = exponential_mechanism_probabilities(EM_SCORES, 1.0, 1.0, monotone=False)
    assert stats.chisquare(_frequencies(idx, EM_SCORES.size), n * p).pvalue > 1e-4
    rel = mech.report.releases[-1]
    assert rel.scale == pytest.approx(2.0) and rel.n_released == n


# =========================================================================== count offset
@pytest.mark.parametrize("eps", [0.01, 0.1, 0.3, 1.0, 2.0, 5.0])
@pytest.mark.parametrize("delta", [0.3, 1e-3, 1e-6, 1e-9])
def test_count_offset_discrete_is_the_smallest_safe_integer(eps, delta):
    """Departures 8: the bad event is noise >= lambda for integer noise."""
    lam = count_offset(eps, delta)
    assert lam == int(lam) and lam >= 0
    assert _geometric_tail(eps, int(lam)) <= delta * (1 + 1e-9)
    if lam > 0:
        assert _geometric_tail(eps, int(lam) - 1) > delta


@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 5.0])
@pytest.mark.parametrize("delta", [0.3, 1e-3, 1e-9])
def test_count_offset_laplace_has_the_plus_one(eps, delta):
    """Departures 8: lambda = 1 - ln(2 delta) / eps; the paper's eq. 1 (without the 1) fails."""
    lam = count_offset(eps, delta, discrete=False)
    assert lam == pytest.approx(1 - math.log(2 * delta) / eps)
    lap = stats.laplace(scale=1 / eps)
    assert lap.sf(lam - 1) <= delta * (1 + 1e-9)  # bad event: Lap > lambda - 1
    paper = -math.log(2 * delta) / eps
    assert lap.sf(paper - 1) > delta  # the paper's offset would not do


def test_count_offset_empirical_tail():
    eps, delta = 0.5, 0.02
    lam = int(count_offset(eps, delta))
    z = two_sided_geometric(_rng(13), np.zeros(400_000, dtype=np.int64), eps)
    n = z.size
    over = int((z >= lam).sum())
    assert clopper_pearson_lower(over, n, ALPHA) <= delta
    # lambda - 1 would overshoot with probability above delta
    over1 = int((z >= lam - 1).sum())
    assert clopper_pearson_lower(over1, n, ALPHA) > delta


def test_count_offset_rejects_bad_arguments():
    for eps, delta in [(0.0, 1e-3), (1.0, 0.0), (1.0, 1.0), (math.nan, 0.1)]:
        with pytest.raises(ValueError):
            count_offset(eps, delta)


# =========================================================================== private quantile
@pytest.mark.parametrize("quantile", [0.1, 0.5, 0.65, 0.9])
def test_private_quantile_concentrates_for_large_n(quantile):
    rng = _rng(14)
    values = rng.beta(2.0, 5.0, size=20_000) * 10 - 2  # in [-2, 8]
    truth = np.quantile(values, quantile)
    out = np.array([private_quantile(rng, values, quantile, -2.0, 8.0, 1.0) for _ in range(50)])
    # rank error O(1/eps) out of 20,000 values: well within 0.02 of the range
    assert np.abs(out - truth).max() < 0.2
    assert ((out >= -2.0) & (out <= 8.0)).all()


@pytest.mark.parametrize("values", [
    np.array([]),
    np.array([0.3]),
    np.array([-5.0, -1.0, 7.0, 12.0]),  # outside [0, 1]: clipped
    np.full(10, 0.5),  # ties: zero-width intervals
    np.array([0.0, 0.0, 1.0, 1.0]),
])
@pytest.mark.parametrize("eps", [0.01, 1.0, 50.0])
def test_private_quantile_stays_in_range(values, eps):
    rng = _rng(15)
    out = np.array([private_quantile(rng, values, 0.5, 0.0, 1.0, eps) for _ in range(150)])
    assert np.isfinite(out).all()
    assert ((out >= 0.0) & (out <= 1.0)).all()


def _quantile_cdf(values, quantile, lo, hi, eps, sens):
    """Exact CDF of the quantile mechanism (independent of privclust's implementation)."""
    z = np.sort(np.clip(values, lo, hi))
    edges = np.concatenate(([lo], z, [hi]))
    widths = np.diff(edges)
    k = np.arange(z.size + 1)
    mass = widths * np.exp(-eps * np.abs(k - quantile * z.size) / (2 * sens))
    mass = mass / mass.sum()

    def cdf(x):
        x = np.asarray(x, dtype=float)[..., None]
        safe = np.where(widths > 0, widths, 1.0)
        frac = np.clip((x - edges[:-1]) / safe, 0.0, 1.0)
        return (frac * mass).sum(-1)

    return cdf


@pytest.mark.parametrize(("quantile", "eps", "sens"), [(0.5, 1.0, 1.0), (0.65, 3.0, 2.7),
                                                       (0.1, 0.2, 1.0)])
def test_private_quantile_matches_its_exact_distribution(quantile, eps, sens):
    values = np.array([0.05, 0.1, 0.12, 0.4, 0.41, 0.42, 0.43, 0.7, 0.9, 0.9, 1.3])
    rng = _rng(16)
    out = np.array([private_quantile(rng, values, quantile, 0.0, 1.0, eps, sens)
                    for _ in range(3000)])
    cdf = _quantile_cdf(values, quantile, 0.0, 1.0, eps, sens)
    assert stats.kstest(out, cdf).pvalue > 1e-4


def test_private_quantile_in_log_space_keeps_its_distribution(monkeypatch):
    """Every weight underflows (1000 ties at the target: the nearest interval of positive width
    is 499.5 ranks away), so the draw works with log weights, one block at a time (small blocks
    here: the intervals of positive width fall in blocks with different peaks, and the blocks
    between them hold zero-width intervals only). Each interval gets its exact probability."""
    import privclust.privacy.mechanisms as mech

    monkeypatch.setattr(mech, "_QUANTILE_BLOCK", 64)
    values = np.r_[0.2, np.full(1000, 0.5), 0.8, 0.9]
    rng = _rng(21)
    out = np.array([private_quantile(rng, values, 0.5, 0.0, 1.0, 3.0) for _ in range(4000)])
    rate = 1.5  # epsilon / (2 sensitivity); exp(-rate * 499.5) underflows below 1e-250
    # width * exp(-rate * distance to the target rank 501.5), divided by exp(-499.5 rate)
    distance = np.array([501.5, 500.5, 499.5, 500.5, 501.5]) - 499.5
    w = np.array([0.2, 0.3, 0.3, 0.1, 0.1]) * np.exp(-rate * distance)
    expected = w / w.sum()
    found = np.histogram(out, bins=[0.0, 0.2, 0.5, 0.8, 0.9, 1.0])[0]
    for k, p in zip(found, expected, strict=True):
        assert clopper_pearson_lower(k, out.size, 1e-6) <= p <= clopper_pearson_upper(
            k, out.size, 1e-6)


def test_private_quantile_rejects_bad_ranges():
    with pytest.raises(ValueError, match="lo < hi"):
        private_quantile(_rng(0), [0.5], 0.5, 1.0, 1.0, 1.0)
    for q in (-0.1, 1.5):
        with pytest.raises(ValueError, match="quantile"):
            private_quantile(_rng(0), [0.5], q, 0.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        private_quantile(_rng(0), [0.5], 0.5, 0.0, 1.0, 0.0)


@pytest.mark.parametrize(("values", "sens"), [
    ([0.2, 0.5], 0.0), ([0.2, 0.5], -1.0), ([0.2, 0.5], math.nan), ([0.2, 0.5], math.inf),
    ([0.2, math.nan], 1.0),
])
def test_private_quantile_rejects_bad_sensitivity_and_nan(values, sens):
    """A negative sensitivity would silently invert the utility; 0 or NaN must not reach numpy."""
    with pytest.raises(ValueError, match="sensitivity|NaN"):
        private_quantile(_rng(0), values, 0.5, 0.0, 1.0, 1.0, sens)


def _sort_case(dtype, n, seed=0):
    """Values with ties, values beyond [-1, 1] (clipped onto lo and hi), -0.0 and 0.0."""
    rng = _rng(seed)
    x = np.round(rng.normal(0.0, 0.8, n), 2)  # rounded: many ties
    x[rng.random(n) < 0.1] = -0.0
    x[rng.random(n) < 0.1] = 0.0
    return x.astype(dtype)


def _assert_same_sort(got, want):
    """Equal values in the same order; bit-identical except where -0.0 and 0.0 (equal, and
    ordered among themselves as np.sort pleases) swap places."""
    assert got.dtype == want.dtype
    assert np.array_equal(got, want)
    bits = got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")
    assert (bits | (want == 0)).all()
    assert np.signbit(got).sum() == np.signbit(want).sum()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_threads", [2, 3, 4])
def test_threaded_sort_is_np_sort(monkeypatch, dtype, n_threads):
    import privclust._parallel as parallel
    import privclust.privacy.mechanisms as mech

    monkeypatch.setattr(parallel, "N_THREADS", n_threads)
    n = mech._THREADED_SORT + 12_345
    x = np.clip(_sort_case(dtype, n), -1.0, 1.0)
    z = x.copy()
    mech._sort_in_place(z)
    _assert_same_sort(z, np.sort(x))
    for x in (np.full(n, 0.5, dtype), np.arange(n, dtype=dtype), np.arange(n, 0, -1, dtype=dtype),
              np.r_[np.ones(n // 2), np.zeros(n - n // 2)].astype(dtype),
              np.r_[np.zeros(n // 2), np.ones(n - n // 2)].astype(dtype)):
        z = x.copy()
        mech._sort_in_place(z)
        _assert_same_sort(z, np.sort(x))


@pytest.mark.parametrize("n1", [0, 1, 7, 10, 19, 20])
def test_split_two_runs_puts_the_smallest_values_first(n1):
    import privclust.privacy.mechanisms as mech

    rng = _rng(n1)
    for _ in range(200):
        z = rng.integers(0, 6, 20).astype(float)
        z[:n1].sort()
        z[n1:].sort()
        want = np.sort(z)
        mech._split_two_runs(z, n1)
        mid = n1
        assert (z[:mid] <= (z[mid:].min() if mid < z.size else np.inf)).all()
        assert (np.diff(z[:mid]) < 0).sum() <= 1 and (np.diff(z[mid:]) < 0).sum() <= 1
        z[:mid].sort(kind="stable")
        z[mid:].sort(kind="stable")
        assert np.array_equal(z, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize(("lo", "hi", "log_scale", "floor_atom"),
                         [(-1.0, 1.0, False, 0.0), (0.0, 0.5, False, 1.0),
                          (1e-3, 1.0, True, 1.0)])
def test_private_quantile_threaded_sort_keeps_the_release(monkeypatch, dtype, lo, hi, log_scale,
                                                          floor_atom):
    """The release of the threaded sort equals the release of one ``np.sort`` (the old path,
    forced here by a threshold no array reaches) for the same generator, in place or not."""
    import privclust.privacy.mechanisms as mech

    n = mech._THREADED_SORT + 4_321
    x = _sort_case(np.float64, n, seed=3)
    x = (x * 100).astype(dtype) if dtype is np.int64 else x.astype(dtype)
    args = (0.65, lo, hi, 1.0, 1.35, log_scale)
    for in_place in (False, True):
        new_z, old_z = x.copy(), x.copy()
        new = private_quantile(_rng(5), new_z, *args, in_place, floor_atom)
        with monkeypatch.context() as patch:
            patch.setattr(mech, "_THREADED_SORT", 1 << 62)
            old = private_quantile(_rng(5), old_z, *args, in_place, floor_atom)
        assert new == old
        assert np.signbit(new) == np.signbit(old)
        if in_place and dtype is not np.int64:  # the caller's array ends sorted, as before
            _assert_same_sort(new_z, old_z)
            _assert_same_sort(new_z, np.sort(np.clip(x, lo, hi)))
        else:  # the caller's array is untouched
            assert np.array_equal(new_z, x) and np.array_equal(old_z, x)


def test_threaded_sort_stays_on_a_worker_thread(monkeypatch):
    """Called from a thread other than the main one (e.g. a Dask task), no pool is started."""
    import threading

    import privclust.privacy.mechanisms as mech

    def no_pool(*args, **kwargs):
        raise AssertionError("a pool was started from a worker thread")

    monkeypatch.setattr(mech, "ThreadPoolExecutor", no_pool)
    x = _sort_case(np.float32, mech._THREADED_SORT + 1)
    z = x.copy()
    worker = threading.Thread(target=mech._sort_in_place, args=(z,))
    worker.start()
    worker.join()
    _assert_same_sort(z, np.sort(x))


# =========================================================================== random state
def test_resolve_none_is_secure_chacha():
    a, b = resolve_random_state(None), resolve_random_state(None)
    assert a.secure and b.secure
    assert "secure" in a.description and "ChaCha" in a.description
    assert type(a.generator.bit_generator).__name__ == "ChaCha"
    assert not np.array_equal(a.generator.random(8), b.generator.random(8))


def test_resolve_int_is_reproducible():
    a, b = resolve_random_state(123), resolve_random_state(np.int64(123))
    c = resolve_random_state(7)
    assert not a.secure and "reproducible" in a.description and "not secure" in a.description
    x = a.generator.random(5)
    assert np.array_equal(x, b.generator.random(5))
    assert not np.array_equal(x, c.generator.random(5))


def test_resolve_generator_passthrough():
    g = np.random.default_rng(1)
    src = resolve_random_state(g)
    assert src.generator is g and not src.secure and "not secure" in src.description


@pytest.mark.parametrize("bad", [1.5, "42", True, [1, 2], np.random.RandomState(0), object()])
def test_resolve_bad_types_raise_type_error(bad):
    with pytest.raises(TypeError, match="random_state"):
        resolve_random_state(bad)


def test_resolve_negative_seed_raises():
    with pytest.raises(ValueError, match="non-negative"):
        resolve_random_state(-1)


def test_public_unit_directions_are_uniform_on_the_sphere():
    """Unit length; mean 0 and covariance I/d within 5 standard errors (n = 20,000, d = 3)."""
    from privclust.privacy import public_unit_directions

    n, d = 20_000, 3
    u = public_unit_directions(np.random.default_rng(0), (n, d))
    assert u.shape == (n, d)
    np.testing.assert_allclose(np.linalg.norm(u, axis=1), 1.0, rtol=1e-12)
    se = np.sqrt(1.0 / d / n)
    assert np.abs(u.mean(axis=0)).max() < 5 * se
    cov = u.T @ u / n
    assert np.abs(cov - np.eye(d) / d).max() < 5 * np.sqrt(2.0 / n) / d
