"""The mixture's fast assignment (``privclust._geometry.most_likely_labeller``) against direct
reference implementations.

The assignment is post-processing of released values, so a faster one is free only if it gives
the same labels: checked here against a plain loop over components (the previous
implementation, one ``np.linalg.solve`` per component) and against ``scipy.stats``'s log
densities, on random mixtures with well and ill-conditioned covariances, float32 and float64
records. Rows whose reference scores for the two best components agree to 1e-11 (relative;
float64 rounding is about 1e-15) are near-ties, where the order is the rounding's (documented
in the labeller); there must be few of them, and every other row must get the same label.
Exact ties go to the lower index. Fits with the previous implementation and with the new one
release the same values.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal

import privclust.engine.local as local
from privclust import DPGaussianMixture
from privclust._geometry import _first_min, most_likely_labeller
from privclust.engine import LocalEngine, MostLikelyComponent


def reference_scores(x, means, chol, log_weights):
    """The previous engine code: ``log_w - log|det L| - ||L^-1 (x - mu)||^2 / 2`` per component,
    one ``np.linalg.solve`` each (n, k)."""
    log_det = np.log(np.abs(np.diagonal(chol, axis1=1, axis2=2))).sum(axis=1)
    score = np.empty((x.shape[0], means.shape[0]))
    for c in range(means.shape[0]):
        z = np.linalg.solve(chol[c], (x - means[c]).T)
        score[:, c] = log_weights[c] - log_det[c] - 0.5 * (z * z).sum(axis=0)
    return score


def _reference_most_likely(assignment):
    """The previous ``privclust.engine.local._most_likely``, verbatim in effect."""
    means = np.asarray(assignment.means, dtype=float)
    chol = np.asarray(assignment.cov_cholesky, dtype=float)
    log_weights = np.asarray(assignment.log_weights, dtype=float)

    def labels(sl, x):
        return np.argmax(reference_scores(x, means, chol, log_weights), axis=1)

    return labels


def _covariance(rng, d, condition):
    """A random SPD matrix with eigenvalues log-spaced over ``condition`` (rotated)."""
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    eig = np.geomspace(1.0, 1.0 / condition, d) * rng.uniform(0.01, 0.2)
    return (q * eig) @ q.T


def _mixture(rng, k, d, condition):
    means = rng.uniform(-0.8, 0.8, size=(k, d))
    cov = np.stack([_covariance(rng, d, condition) for _ in range(k)])
    w = rng.dirichlet(np.ones(k))
    return means, np.linalg.cholesky(cov), np.log(w)


def _records(rng, means, chol, n, dtype):
    """Half drawn from the mixture, half uniform over the box (far-off and in-between rows)."""
    k, d = means.shape
    comp = rng.integers(0, k, n // 2)
    near = means[comp] + np.einsum("nij,nj->ni", chol[comp], rng.standard_normal((n // 2, d)))
    far = rng.uniform(-1, 1, size=(n - n // 2, d))
    return np.clip(np.concatenate([near, far]), -1, 1).astype(dtype)


def _assert_same_except_near_ties(labels, scores, rel=1e-11, max_share=1e-3):
    top2 = np.sort(scores, axis=1)[:, -2:] if scores.shape[1] > 1 else None
    if top2 is None:
        np.testing.assert_array_equal(labels, 0)
        return
    gap = top2[:, 1] - top2[:, 0]
    near = gap <= rel * (1.0 + np.abs(top2[:, 1]))
    assert near.mean() <= max_share, f"{near.sum()} near-ties of {near.size}"
    ref = np.argmax(scores, axis=1)
    bad = np.flatnonzero((labels != ref) & ~near)
    assert bad.size == 0, f"{bad.size} rows differ away from ties, e.g. row {bad[:5]}"


CASES = [(1, 1, 1e0), (3, 1, 1e0), (4, 2, 1e0), (8, 2, 1e6), (5, 5, 1e2), (6, 7, 1e8),
         (32, 12, 1e4), (3, 20, 1e10)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("k", "d", "condition"), CASES)
def test_labels_equal_the_direct_loop_over_components(k, d, condition, dtype):
    rng = np.random.default_rng(k * 100 + d)
    means, chol, logw = _mixture(rng, k, d, condition)
    x = _records(rng, means, chol, 6000, dtype)
    labels = most_likely_labeller(means, chol, logw)(x)
    assert labels.shape == (x.shape[0],) and labels.dtype == np.intp
    _assert_same_except_near_ties(labels, reference_scores(x.astype(float), means, chol, logw))


def _boundary_records(rng, means, chol, logw, n_pairs=400):
    """Records at and near the decision boundary of random pairs of components: the point of
    the segment between their means where the reference scores are equal (bisection), moved
    along it by 1e-2 to 1e-10 of its length, so the gaps between the two scores cover every
    scale down to rounding."""
    k = means.shape[0]
    i = rng.integers(0, k, n_pairs)
    j = (i + rng.integers(1, k, n_pairs)) % k

    def diff(t):
        x = means[i] + t[:, None] * (means[j] - means[i])
        s = reference_scores(x, means, chol, logw)
        return s[np.arange(n_pairs), i] - s[np.arange(n_pairs), j]

    lo, hi = np.zeros(n_pairs), np.ones(n_pairs)
    keep = (diff(lo) > 0) & (diff(hi) < 0)
    for _ in range(50):
        mid = (lo + hi) / 2
        right = diff(mid) > 0
        lo, hi = np.where(right, mid, lo), np.where(right, hi, mid)
    t = ((lo + hi) / 2)[keep]
    step = np.geomspace(1e-2, 1e-10, 9)
    t = (t[:, None] + np.concatenate([-step, [0.0], step])[None, :]).ravel()
    a, b = np.repeat(i[keep], 19), np.repeat(j[keep], 19)
    return means[a] + t[:, None] * (means[b] - means[a])


@pytest.mark.parametrize(("k", "d", "condition"), [(3, 2, 1e8), (6, 5, 1e10), (12, 9, 1e4)])
def test_labels_at_decision_boundaries_of_ill_conditioned_mixtures(k, d, condition):
    """Near the boundaries, only the rows whose two best reference scores agree to 1e-11
    (relative) may be labelled either way (measured: every differing row is within 2e-15,
    the rounding of either computation, also at condition numbers of 1e10)."""
    rng = np.random.default_rng(k * 7 + d)
    means, chol, logw = _mixture(rng, k, d, condition)
    x = _boundary_records(rng, means, chol, logw)
    assert len(x) > 1000
    labels = most_likely_labeller(means, chol, logw)(x)
    _assert_same_except_near_ties(labels, reference_scores(x, means, chol, logw),
                                  max_share=0.25)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("k", "d", "condition"), [(4, 2, 1e0), (6, 3, 1e3), (16, 8, 1e2)])
def test_labels_equal_scipy_log_densities(k, d, condition, dtype):
    rng = np.random.default_rng(k + d)
    means, chol, logw = _mixture(rng, k, d, condition)
    x = _records(rng, means, chol, 4000, dtype)
    cov = chol @ np.swapaxes(chol, 1, 2)
    scores = np.stack([logw[c] + multivariate_normal(means[c], cov[c]).logpdf(x.astype(float))
                       for c in range(k)], axis=1)
    labels = most_likely_labeller(means, chol, logw)(x)
    _assert_same_except_near_ties(labels, scores, rel=1e-7)


def test_zero_weights_and_original_units():
    """A zero weight (log -inf) never wins unless every weight is zero (then the lowest index,
    as argmax of -inf everywhere); far from the origin the centring keeps the labels."""
    rng = np.random.default_rng(3)
    means, chol, logw = _mixture(rng, 5, 3, 1e3)
    logw[2] = -np.inf
    x = _records(rng, means, chol, 3000, np.float64)
    labels = most_likely_labeller(means, chol, logw)(x)
    assert not (labels == 2).any()
    _assert_same_except_near_ties(labels, reference_scores(x, means, chol, logw))
    shifted = most_likely_labeller(means * 50 + 1e4, chol * 50, logw)(x * 50 + 1e4)
    _assert_same_except_near_ties(shifted, reference_scores(x, means, chol, logw))
    np.testing.assert_array_equal(
        most_likely_labeller(means, chol, np.full(5, -np.inf))(x), 0)


def test_exact_ties_go_to_the_lower_index():
    """Integer data, means and unit covariances: every value is exact, so a record halfway
    between two equally weighted components is a true tie, and the lower index wins (also
    between identical components)."""
    means = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 0.0]])  # 1 and 3 identical
    chol = np.repeat(np.eye(2)[None], 4, axis=0)
    logw = np.zeros(4)
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0], [3.0, 0.0], [-1.0, 0.0]])
    for n in (len(x), 5000):  # one short block; blocks long enough for the fast argmin
        xs = np.resize(x, (n, 2))
        np.testing.assert_array_equal(most_likely_labeller(means, chol, logw)(xs),
                                      np.resize([0, 0, 0, 1, 1, 0], n))
    q = np.array([[1.0, 2.0, np.nan, 0.0], [1.0, 1.0, 0.0, np.nan], [0.5, 1.0, np.nan, -0.0]])
    q = np.tile(q, (1, 1024))  # long rows: the minimum-then-first-equal path
    np.testing.assert_array_equal(_first_min(q), np.argmin(q, axis=0))


def test_labels_do_not_depend_on_the_chunking():
    """The Dask engine labels its own chunks: any split of the records gives the same labels
    (every block is padded to one width, so each row meets the same arithmetic)."""
    rng = np.random.default_rng(5)
    means, chol, logw = _mixture(rng, 7, 6, 1e6)
    x = _records(rng, means, chol, 20000, np.float64)
    lab = most_likely_labeller(means, chol, logw)
    whole = lab(x)
    cuts = np.unique(np.r_[0, rng.integers(0, len(x), 40), 1, 2, 3, len(x)])
    parts = np.concatenate([lab(x[a:b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)])
    np.testing.assert_array_equal(parts, whole)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_threaded_pass_gives_the_serial_exact_stats(monkeypatch, dtype):
    rng = np.random.default_rng(8)
    means, chol, logw = _mixture(rng, 6, 3, 1e2)
    X = _records(rng, means, chol, 300_000, dtype)
    eng = LocalEngine(X, np.tile([-1.0, 1.0], (3, 1)))
    ml = MostLikelyComponent(means, chol, logw)
    monkeypatch.setattr(local, "_THREADED_WORK", 0)
    assert local._share_cores(len(X), 6, 3) == (local.N_THREADS > 1)
    a = eng.exact_assignment_stats(ml, second_moments=True, squared_norms=True)
    monkeypatch.setattr(local, "_share_cores", lambda *args: False)
    b = eng.exact_assignment_stats(ml, second_moments=True, squared_norms=True)
    np.testing.assert_array_equal(a.counts, b.counts)
    for name in ("sums", "moments", "sq_norms"):
        np.testing.assert_array_equal(getattr(a, name).limbs, getattr(b, name).limbs)
    ref = np.argmax(reference_scores(X.astype(float), means, chol, logw), axis=1)
    np.testing.assert_array_equal(a.counts, np.bincount(ref, minlength=6))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("k", "d"), [(4, 2), (8, 5)])
def test_fit_releases_what_the_direct_loop_releases(monkeypatch, k, d, dtype):
    """The whole fit with the previous assignment and with the new one: the same noisy
    releases, hence the same model, bit for bit; predict agrees with predict_log_terms."""
    rng = np.random.default_rng(d)
    centres = rng.uniform(-3, 3, size=(k, d))
    X = (centres[rng.integers(0, k, 4000)] + rng.standard_normal((4000, d))).astype(dtype)

    def fit():
        return DPGaussianMixture(k, epsilon=2.0, delta=1e-6, bounds=(-6, 6), n_iter=5,
                                 random_state=1).fit(X)

    new = fit()
    monkeypatch.setattr(local, "_most_likely", _reference_most_likely)
    old = fit()
    for name in ("noisy_counts_", "weights_", "means_", "covariances_", "labels_"):
        np.testing.assert_array_equal(getattr(new, name), getattr(old, name), err_msg=name)
    _assert_same_except_near_ties(new.predict(X), new.predict_log_terms(np.clip(X, -6, 6)))
