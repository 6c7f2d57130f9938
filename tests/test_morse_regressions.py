"""Morse merging regressions: the pooling of many centres (fast, and equal bit for bit to the
greedy Ward agglomeration it replaces) and the string search between coincident centres
(no 0/0 in the hyperplane relaxation)."""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

from privclust.cluster._morse.base import _pooling_seconds, _sq_dists
from privclust.cluster.lloyd import DPLloyd
from privclust.cluster.mixture import DPGaussianMixture
from privclust.cluster.morse import MixtureField, MorseMerging, find_tevs, pool_centres


def _pool_centres_reference(centres, sizes=None, max_components: int = 20):
    """The greedy pooling as first written (every pair's cost recomputed at every merge,
    O(K^3)): the reference that pool_centres must reproduce exactly."""
    c = np.atleast_2d(np.asarray(centres, dtype=float)).copy()
    k = c.shape[0]
    owner = np.arange(k)
    if k <= max_components:
        return c, owner
    n = np.ones(k) if sizes is None else np.maximum(np.asarray(sizes, dtype=float), 1.0).copy()
    alive = np.ones(k, dtype=bool)
    d2 = ((c[:, None, :] - c[None, :, :]) ** 2).sum(axis=2)
    for _ in range(k - max(int(max_components), 1)):
        idx = np.flatnonzero(alive)
        nn = n[idx]
        cost = nn[:, None] * nn[None, :] / (nn[:, None] + nn[None, :]) * d2[np.ix_(idx, idx)]
        np.fill_diagonal(cost, np.inf)
        i, j = np.unravel_index(np.argmin(cost), cost.shape)
        a, b = int(idx[min(i, j)]), int(idx[max(i, j)])
        c[a] = (n[a] * c[a] + n[b] * c[b]) / (n[a] + n[b])
        n[a] += n[b]
        alive[b] = False
        owner[owner == b] = a
        d2[a] = d2[:, a] = ((c - c[a]) ** 2).sum(axis=1)
    keep = np.flatnonzero(alive)
    remap = np.full(k, -1, dtype=np.int64)
    remap[keep] = np.arange(keep.size)
    return c[keep], remap[owner]


def _assert_same_pooling(centres, sizes, max_components):
    want_c, want_o = _pool_centres_reference(centres, sizes, max_components)
    got_c, got_o = pool_centres(centres, sizes, max_components)
    assert got_c.shape == want_c.shape and got_c.dtype == want_c.dtype
    assert got_c.tobytes() == want_c.tobytes()  # bit for bit, signed zeros included
    np.testing.assert_array_equal(got_o, want_o)


def _centres(rng, kind, k, d):
    if kind == "normal":
        return rng.normal(size=(k, d))
    if kind == "grid":  # many exact ties and duplicates
        return rng.integers(0, 3, size=(k, d)).astype(float)
    if kind == "rounded":
        return np.round(rng.normal(size=(k, d)), 1)
    if kind == "same":
        return np.zeros((k, d))
    return rng.uniform(-1, 1, size=(k, d)) * 10.0 ** rng.uniform(-3, 3)


def _sizes(rng, kind, k):
    if kind is None:
        return None
    if kind == "counts":  # noisy counts: negatives and zeros clip to 1, many equal
        return rng.integers(-5, 50, k).astype(float)
    return rng.exponential(30.0, k)


# =========================================================================== pool_centres
@pytest.mark.parametrize("sizes", [None, "counts", "exponential"])
@pytest.mark.parametrize("kind", ["normal", "grid", "rounded", "same", "scaled"])
def test_pool_centres_equals_the_greedy_reference(kind, sizes):
    rng = np.random.default_rng(zlib.crc32(f"{kind}-{sizes}".encode()))
    for _ in range(12):
        k = int(rng.integers(2, 70))
        d = int(rng.choice([1, 2, 3, 5, 8, 9, 17]))
        m = int(rng.integers(1, k + 2))
        _assert_same_pooling(_centres(rng, kind, k, d), _sizes(rng, sizes, k), m)


@pytest.mark.parametrize("extra", [1, 2, 3])
@pytest.mark.parametrize("sizes", [None, "counts"])
def test_pool_centres_just_above_max_components(extra, sizes):
    rng = np.random.default_rng(extra)
    for kind in ("normal", "grid", "same"):
        for m in (1, 2, 20):
            k = m + extra
            _assert_same_pooling(_centres(rng, kind, k, 3), _sizes(rng, sizes, k), m)


@pytest.mark.parametrize("kind,d", [("normal", 2), ("grid", 3), ("rounded", 9), ("same", 2)])
def test_pool_centres_equals_the_reference_across_blocks(kind, d):
    # more centres than one block of the first pass holds (its column minima are mirrored)
    rng = np.random.default_rng(d)
    k = 300
    for sizes in (None, "counts"):
        _assert_same_pooling(_centres(rng, kind, k, d), _sizes(rng, sizes, k), 20)


def test_pool_centres_in_many_dimensions_equals_the_reference():
    rng = np.random.default_rng(5)
    for d in (130, 200):  # past 128 coordinates: NumPy's own sum over blocks of columns
        _assert_same_pooling(rng.normal(size=(40, d)), rng.exponential(30.0, 40), 5)


@pytest.mark.parametrize("d", [*range(0, 20), 31, 64, 127, 128, 129, 200])
def test_sq_dists_add_in_numpy_order(d):
    rng = np.random.default_rng(d)
    c = rng.normal(size=(23, d)) * 10.0 ** rng.uniform(-6, 6, size=(23, d))
    want = ((c[:, None, :] - c[None, :, :]) ** 2).sum(axis=2)
    ct, cols = np.ascontiguousarray(c.T), np.arange(23)
    for rows in (cols, cols[:1], cols[4:9]):
        got = _sq_dists(ct, rows, cols, np.empty((11, 23 * 23)))
        assert got.tobytes() == np.ascontiguousarray(want[rows]).tobytes()


def test_pool_centres_pools_thousands_of_centres():
    """Once ~45 s at this size (cubic); benchmarks/morse_pooling.py measures the time."""
    rng = np.random.default_rng(0)
    centres, sizes = rng.normal(size=(3000, 3)), rng.exponential(50.0, 3000)
    pooled, owner = pool_centres(centres, sizes, 20)
    assert pooled.shape == (20, 3) and set(owner.tolist()) == set(range(20))
    # every pooled centre is the size-weighted mean of the centres it owns
    for j in range(20):
        w = np.maximum(sizes[owner == j], 1.0)  # sizes are clipped at 1
        np.testing.assert_allclose(pooled[j], (centres[owner == j] * w[:, None]).sum(0) / w.sum())


def test_pooling_too_many_centres_is_refused_before_the_base_spends():
    X = np.random.default_rng(0).uniform(-1, 1, (200, 50))
    assert _pooling_seconds(10_000, 50) > 10.0 > _pooling_seconds(10_000, 3)
    base = DPLloyd(n_clusters=9000, bounds=(-1, 1))
    mm = MorseMerging(base, 2, epsilon=1.0, random_state=0)
    with pytest.raises(ValueError, match=r"9000 centres in 50 dimensions.*n_clusters"):
        mm.fit(X)
    assert not hasattr(mm, "base_estimator_")


def test_pooling_too_many_fitted_centres_is_refused():
    class Fitted:
        cluster_centers_ = np.random.default_rng(1).uniform(-1, 1, (9000, 50))
        bounds_ = np.tile([-1.0, 1.0], (50, 1))

    X = np.random.default_rng(0).uniform(-1, 1, (200, 50))
    with pytest.raises(ValueError, match=r"9000 centres in 50 dimensions"):
        MorseMerging(Fitted(), 2, epsilon=1.0, random_state=0).fit(X)


# =========================================================================== coincident means
def test_string_search_between_coincident_centres_has_no_zero_division():
    mu = np.array([[-1.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [0.0, 1.5]])
    field = MixtureField(np.full(4, 0.25), mu, np.array([0.3 * np.eye(2)] * 4))
    with warnings.catch_warnings(), np.errstate(divide="raise", invalid="raise"):
        warnings.simplefilter("error")
        g = find_tevs(field, mu)
    lb = g["line_barrier"]
    assert lb[0, 2] == lb[2, 0] == field.f(mu[:1])[0]  # no segment: f at the common point
    assert np.isfinite(lb[~np.eye(4, dtype=bool)]).all()
    assert len(g["tevs"]) >= 2  # the other pairs are searched as before


def test_noisy_mixture_with_coincident_means_fits_without_runtime_warnings():
    # at epsilon = 0.001 many released means are clipped onto the same points of the bounds
    for seed in range(15):
        U = np.random.default_rng(seed).uniform(-1, 1, (1000, 2))
        est = MorseMerging(
            DPGaussianMixture(20, bounds=(-1, 1)), 2, epsilon=0.001, random_state=seed
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            # the documented notice when the noise leaves a single live component
            warnings.filterwarnings(
                "ignore", message="n_clusters=2 but the base mixture has only 1 live",
                category=UserWarning,
            )
            est.fit(U)
        assert est.labels_.shape == (1000,)


def test_a_base_with_its_own_zcdp_block_is_refused_before_any_data_is_read():
    """CoresetKMeans keeps its sums in a zCDP block of its own, which cannot share a plan with
    the covariance pass: an unfitted one is refused with the way out (fit it first), before
    it reads the data; fitted first under a shared accountant, both spend what they plan."""
    from sklearn.datasets import make_blobs

    from privclust import Accountant, Budget, CoresetKMeans

    class Unread:  # the shape is public metadata; the values must not be read
        shape = (6000, 4)

        def __array__(self, *args, **kwargs):
            raise AssertionError("the data was read")

    X, _ = make_blobs(6000, 4, centers=5, random_state=0)
    base = CoresetKMeans(8, bounds=(-15, 15), random_state=1)
    booked = Accountant(Budget(1.0, 1e-4))
    for delta in (1e-5, None):
        refused = MorseMerging(base, 3, epsilon=0.5, delta=delta, random_state=1,
                               accountant=booked)
        with pytest.raises(ValueError, match="fit it first") as info:
            refused.fit(Unread())
        message = str(info.value)
        assert message.count(". ") == 0 and "MorseMerging(epsilon=...)" in message
        assert not hasattr(refused, "base_estimator_") and not hasattr(refused, "labels_")
    assert booked.spent == Budget(0.0, 0.0) and booked.reservations == []
    accountant = Accountant(Budget(0.8, 2e-5))
    base.set_params(epsilon=0.5, delta=1e-5, accountant=accountant)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base.fit(X)
        model = MorseMerging(base, 3, epsilon=0.3, delta=1e-5, random_state=1,
                             accountant=accountant).fit(X)
    assert accountant.spent.epsilon == pytest.approx(0.8, rel=1e-9)
    assert len(np.unique(model.labels_)) == 3
