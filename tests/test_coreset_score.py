"""The choice of k's score with anchors: every record's two nearest centres sought among the
centres nearest its anchor, all candidates scored together."""

from __future__ import annotations

import numpy as np

from privclust.cluster._coreset import select
from privclust.cluster._coreset.select import (
    silhouette_sum,
    silhouette_sums,
    silhouette_sums_near,
)


def _case(seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-50, 50, size=(12, 2))
    Y = np.vstack([c + rng.normal(size=(200, 2)) for c in centres])
    cands = [centres[:k] + rng.normal(scale=0.5, size=(k, 2)) for k in (1, 2, 3, 6, 12)]
    return Y, cands, centres


def test_near_scores_equal_the_exact_ones_where_the_near_centres_hold_the_two_nearest():
    Y, cands, anchors = _case()
    exact = np.array([silhouette_sum(Y, c) for c in cands])
    np.testing.assert_allclose(silhouette_sums_near(Y, cands, anchors), exact, rtol=0.002)
    # up to NEAR_CENTRES centres every centre is searched: the same sums, exactly
    small = [c for c in cands if c.shape[0] <= select.NEAR_CENTRES]
    np.testing.assert_array_equal(silhouette_sums(Y, small, anchors),
                                  [silhouette_sum(Y, c) for c in small])


def test_near_scores_move_by_at_most_one_per_record_in_one_direction():
    Y, cands, anchors = _case(1)
    base = silhouette_sums_near(Y, cands, anchors)
    for extra in ([[0.0, 0.0]], [[1e3, -1e3]], [list(anchors[3])]):
        more = silhouette_sums_near(np.vstack([Y, extra]), cands, anchors)
        assert np.all(more - base >= 0) and np.all(more - base <= 1)
    # the rows' order and chunks do not matter: each term is the record's own
    perm = np.random.default_rng(2).permutation(Y.shape[0])
    np.testing.assert_array_equal(silhouette_sums_near(Y[perm], cands, anchors), base)
    assert base[0] == 0.0  # one centre: no second distance, no score


def test_the_sample_rate_is_public_and_capped_where_asked():
    assert select.score_rate(1000, 0.03, 400.0) == 1.0  # every record of small data
    assert select.score_rate(100_000, 0.03, 400.0) == np.float64(400.0 / 3000.0)
    # at most about `cap` records, whatever epsilon
    assert select.score_rate(100_000, 0.0075, 400.0, cap=16000.0) == 0.16
    assert select.score_rate(0, 0.03, 400.0) == 1.0


def test_the_centres_expected_noise_comes_off_the_squared_distances():
    """``noise2``: a centre's expected squared noise is taken off the squared distances to it
    (at least 0) before the silhouette; zeros change nothing, and every term stays in
    ``[0, 1]``, so one record still moves every score by at most 1, in one direction."""
    Y, cands, centres = _case()
    zero = [np.zeros(np.asarray(c).shape[0]) for c in cands]
    plain = silhouette_sums(Y, cands, centres)
    assert np.array_equal(silhouette_sums(Y, cands, centres, zero), plain)
    # the 12-centre candidate with noisy centres: its noise taken off raises its score
    rng = np.random.default_rng(1)
    noisy = centres + rng.normal(scale=3.0, size=centres.shape)
    noise2 = [2 * 3.0**2 * np.ones(12)]
    raw = silhouette_sums(Y, [noisy], centres)[0]
    off = silhouette_sums(Y, [noisy], centres, noise2)[0]
    exact = silhouette_sums(Y, [centres], centres)[0]
    assert raw < off and abs(off - exact) < abs(raw - exact)
    big = [np.full(12, 1e9)]  # every distance taken to 0: every term 0, none negative
    assert silhouette_sums(Y, [noisy], centres, big)[0] == 0.0
    for extra in (np.array([[0.0, 0.0]]), noisy[:1] + 0.1):
        more = silhouette_sums(np.vstack([Y, extra]), [noisy], centres, noise2)[0]
        assert 0.0 <= more - off <= 1.0


def test_the_two_least_of_three_are_those_a_partition_gives():
    rng = np.random.default_rng(3)
    d2 = rng.integers(0, 4, size=(500, 7, 3)).astype(float)  # many ties
    d2[rng.random(d2.shape) < 0.1] = np.inf  # the sentinel centre at infinity
    a, b = select._two_least(d2)
    part = np.partition(d2, 1, axis=2)
    np.testing.assert_array_equal(a, part[..., 0])
    np.testing.assert_array_equal(b, part[..., 1])
    wide = rng.normal(size=(50, 4, 5))  # more than three: the partition itself
    np.testing.assert_array_equal(select._two_least(wide)[1], np.partition(wide, 1, axis=2)[..., 1])


def test_candidate_lloyd_steps_add_each_centres_points_in_their_order():
    # the weighted means a sparse membership matrix gives (points' order), bit for bit
    from scipy.sparse import csr_matrix

    rng = np.random.default_rng(4)
    P = rng.normal(scale=10.0, size=(300, 3))
    w = rng.integers(1, 400, size=300).astype(float)
    C, labels = P[:7].copy(), None
    for _ in range(select.CANDIDATE_MAX_ITER):
        new = select._nearest(P, C)
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        member = csr_matrix((w, (labels, np.arange(300))), shape=(7, 300))
        mass = np.asarray(member.sum(axis=1)).ravel()
        C = np.where((mass > 0)[:, None], (member @ P) / np.maximum(mass, 1e-300)[:, None], C)
    np.testing.assert_array_equal(select._lloyd(P, w, P[:7].copy()), C)


def test_draws_are_where_searchsorted_puts_them():
    rng = np.random.default_rng(5)
    w = rng.integers(0, 3, size=(4, 40)).astype(float)  # zero increments: repeated sums
    cum, u = np.cumsum(w, axis=1), rng.random((4, 9))
    u[0, 0] = 0.0
    want = np.stack([np.searchsorted(c, x * c[-1]) for c, x in zip(cum, u, strict=True)])
    np.testing.assert_array_equal(select._draw(cum, u), np.minimum(want, 39))


def test_seedings_from_the_table_of_distances_are_those_computed_per_trial(monkeypatch):
    for d in (2, 9, 40):
        rng = np.random.default_rng(d)
        P = rng.normal(scale=30.0, size=(120, d))
        w = rng.integers(0, 50, size=120).astype(float)
        tabled = select._seedings(P, w, 60, 3, np.random.default_rng(1))
        with monkeypatch.context() as m:
            m.setattr(select, "SEED_TABLE", 0)
            per_trial = select._seedings(P, w, 60, 3, np.random.default_rng(1))
        for a, b in zip(tabled, per_trial, strict=True):
            np.testing.assert_array_equal(a, b)


def _near_reference(Y, cands, anchors, noise2):
    """The near-centre score record by record, each candidate on its own (no sharing)."""
    from scipy.spatial import cKDTree

    anchor = cKDTree(anchors).query(Y)[1]
    out = []
    for C, off in zip(cands, noise2, strict=True):
        if C.shape[0] < 2:
            out.append(0.0)
            continue
        q = min(select.NEAR_CENTRES, C.shape[0])
        da = ((anchors[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
        near = np.argpartition(da, q - 1, axis=1)[:, :q] if q < C.shape[0] else \
            np.tile(np.arange(q), (anchors.shape[0], 1))
        diff = C[near[anchor]] - Y[:, None, :]
        d2 = np.maximum(np.einsum("rqd,rqd->rq", diff, diff) - off[near[anchor]], 0.0)
        if q < select.NEAR_CENTRES:
            d2 = np.hstack([d2, np.full((d2.shape[0], 1), np.inf)])
        a, b = np.sqrt(select._two_least(d2)[0]), np.sqrt(select._two_least(d2)[1])
        with np.errstate(invalid="ignore", divide="ignore"):
            s = np.clip(np.where(b > 0, (b - a) / b, 0.0), 0.0, 1.0)
        out.append(int(np.floor(s * select.SCORE_UNITS).astype(np.int64).sum())
                   / select.SCORE_UNITS)
    return np.array(out)


def test_near_scores_sharing_centres_are_those_of_each_candidate_on_its_own():
    # candidates that share centres bit for bit (a copy, a candidate holding another's centres
    # and two of them twice) are scored as each would be alone, record by record
    for d in (2, 9):
        rng = np.random.default_rng(d)
        centres = rng.uniform(-50, 50, size=(12, d))
        Y = np.vstack([c + rng.normal(size=(150, d)) for c in centres])
        anchors = centres + rng.normal(size=centres.shape)
        cands = [centres[:k] + rng.normal(scale=0.3, size=(k, d)) for k in (1, 2, 3, 6, 12)]
        cands += [cands[3].copy(), np.vstack([cands[4], cands[4][:2]])]
        noise2 = [rng.uniform(0, 2, c.shape[0]) * (rng.random(c.shape[0]) < 0.7) for c in cands]
        np.testing.assert_array_equal(silhouette_sums_near(Y, cands, anchors, noise2),
                                      _near_reference(Y, cands, anchors, noise2))


def test_squared_distances_are_numpys_sums_bit_for_bit():
    # up to two coordinates they are added one coordinate at a time: the same bits as NumPy's
    # sum along the last axis (and einsum's for the records' distances)
    rng = np.random.default_rng(6)
    for d in (1, 2, 3, 7):
        P = rng.normal(scale=1e3, size=(200, d))
        Q = rng.normal(size=(150, d))
        np.testing.assert_array_equal(select._pair_sq(P, Q),
                                      ((Q[None, :, :] - P[:, None, :]) ** 2).sum(axis=2))
        diff = Q[None, :, :] - P[:, None, :]
        np.testing.assert_array_equal(select._sq_distances_to(P, Q),
                                      np.einsum("rud,rud->ru", diff, diff))


def test_near_scores_shared_among_threads_are_those_of_one_thread(monkeypatch):
    # the records' chunks go to a pool of threads (each adds integers of its own): the same sums
    from privclust import _parallel

    rng = np.random.default_rng(7)
    centres = rng.uniform(-50, 50, size=(10, 3))
    Y = np.vstack([c + rng.normal(size=(400, 3)) for c in centres])
    cands = [centres[:k] + rng.normal(scale=0.5, size=(k, 3)) for k in (2, 5, 10)]
    monkeypatch.setattr(_parallel, "N_THREADS", 2)
    pooled = silhouette_sums_near(Y, cands, centres)
    monkeypatch.setattr(_parallel, "N_THREADS", 1)
    np.testing.assert_array_equal(silhouette_sums_near(Y, cands, centres), pooled)
    np.testing.assert_array_equal(pooled, _near_reference(Y, cands, centres,
                                                          [np.zeros(c.shape[0]) for c in cands]))
