"""The engine queries added for the k-means family, against brute force."""

import numpy as np
import pytest

import privclust.engine.local as local
from privclust.engine import LocalEngine

BOUNDS = np.array([[-1.0, 1.0]] * 3)


@pytest.fixture(params=[False, True], ids=["one-chunk", "many-chunks"])
def data(request, monkeypatch):
    if request.param:  # force the chunked path
        monkeypatch.setattr(local, "_CHUNK_ELEMENTS", 64)
    rng = np.random.default_rng(3)
    X = rng.uniform(-1.4, 1.4, size=(700, 3))  # some records outside the bounds
    centres = rng.uniform(-1, 1, size=(5, 3))
    return LocalEngine(X, BOUNDS), np.clip(X, -1, 1), centres


def _labels(X, centres):
    d2 = ((X[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    return np.argmin(d2, axis=1)


def test_nearest_centre_moments_match_brute_force(data):
    eng, X, centres = data
    counts, sums, sq = eng.nearest_centre_moments(centres)
    lab = _labels(X, centres)
    for i in range(len(centres)):
        member = X[lab == i]
        assert counts[i] == len(member)
        np.testing.assert_allclose(sums[i], member.sum(axis=0), atol=1e-10)
        np.testing.assert_allclose(sq[i], (member**2).sum(), atol=1e-10)
    c2, s2 = eng.nearest_centre_stats(centres)  # same assignment as the existing query
    np.testing.assert_array_equal(counts, c2)
    np.testing.assert_allclose(sums, s2)


def test_nearest_centre_moments_ties_go_to_the_lower_index():
    eng = LocalEngine(np.array([[0.0, 0.0]]), np.array([[-1.0, 1.0]] * 2))
    counts, _, _ = eng.nearest_centre_moments(np.array([[0.5, 0.0], [-0.5, 0.0]]))
    assert counts.tolist() == [1, 0]


def _zone_brute(X, centres, zc, zr, cells):
    lab = _labels(X, centres)
    inside = ((X - zc[lab]) ** 2).sum(axis=1) < zr[lab] ** 2
    out = np.zeros(cells.shape[:2], dtype=np.int64)
    recs = []
    for i in range(len(centres)):
        pts = X[inside & (lab == i)]
        recs.append(pts)
        if len(pts):
            j = np.argmin(((pts[:, None, :] - cells[i][None]) ** 2).sum(axis=2), axis=1)
            out[i] += np.bincount(j, minlength=cells.shape[1])
    return out, recs


def test_zone_cell_counts_and_records_match_brute_force(data):
    eng, X, centres = data
    rng = np.random.default_rng(4)
    zc = centres + rng.uniform(-0.2, 0.2, size=centres.shape)
    zr = np.array([0.0, 0.3, 0.6, 1.0, np.inf])
    cells = rng.uniform(-1, 1, size=(5, 4, 3))
    want, recs = _zone_brute(X, centres, zc, zr, cells)
    got = eng.zone_cell_counts(centres, zc, zr, cells)
    np.testing.assert_array_equal(got, want)
    assert got[0].sum() == 0  # radius 0: empty zone
    for a, b in zip(eng.zone_records(centres, zc, zr), recs, strict=True):
        np.testing.assert_allclose(np.sort(a, axis=0), np.sort(b, axis=0))


def test_zone_boundary_is_strict_and_infinite_radius_takes_all():
    X = np.array([[0.0, 0.0], [0.5, 0.0], [0.2, 0.0]])
    eng = LocalEngine(X, np.array([[-1.0, 1.0]] * 2))
    c = np.zeros((1, 2))
    assert eng.zone_cell_counts(c, c, np.array([0.5]), c[:, None, :]).tolist() == [[2]]
    assert eng.zone_records(c, c, np.array([np.inf]))[0].shape == (3, 2)


def test_zone_cell_counts_have_sensitivity_one():
    """Adding one record changes exactly one (zone, cell) count by one, or none."""
    rng = np.random.default_rng(5)
    X0 = rng.uniform(-1, 1, size=(300, 3))
    centres = rng.uniform(-1, 1, size=(3, 3))
    zc, zr = centres.copy(), np.full(3, 0.8)
    cells = rng.uniform(-1, 1, size=(3, 5, 3))
    base = LocalEngine(X0, BOUNDS).zone_cell_counts(centres, zc, zr, cells)
    for y in rng.uniform(-1.5, 1.5, size=(50, 3)):
        plus = LocalEngine(np.vstack([X0, y]), BOUNDS).zone_cell_counts(centres, zc, zr, cells)
        diff = plus - base
        assert diff.min() >= 0 and diff.sum() <= 1
