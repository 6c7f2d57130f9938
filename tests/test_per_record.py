"""Per-record arithmetic: a record's label, cell or projection depends on that record and public
values only, never on the other records, their number or the record's position.

Every record here sits at a near tie (on the bisector of two centres, or on a hyperplane, to
within the last bits, found by bisection), where any other rounding of the same arithmetic may
flip it; each is computed alone (a data set of one record), after 1, 2, 3, 60, 61, ... other
records (odd and even counts) and with one record added after it. A BLAS product over a block
whose shape follows n rounds a row differently by the block's shape (its edge rows, a lone
row, take other kernels); the fixed-shape blocks of ``privclust._geometry`` do not.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from _replay import tie_rows
from privclust import CoresetKMeans, DPCube
from privclust._geometry import nearest_centres
from privclust.cluster._coreset.refine import corrected_nearest
from privclust.cluster._coreset.tree import Space
from privclust.cluster.dpcube import _Space, public_projection
from privclust.engine import LocalEngine

BEFORE = (0, 1, 2, 3, 7, 60, 61, 62, 63, 64, 1998, 1999, 2000, 2001)


def _contexts(x, fill):
    """``(data set, row of x)``: x alone, after m other records, with one record after it."""
    for m in BEFORE:
        for after in (0, 1):
            yield np.vstack([fill[:m], x[None], fill[m:m + after]]), m


def _ties(rng, d, k, n_ties, offset=None):
    bounds = np.tile([-10.0, 10.0], (d, 1))
    C = rng.uniform(-5.0, 5.0, size=(k, d))
    off = np.zeros(k) if offset is None else offset
    return C, tie_rows(C, off, bounds, n_ties, rng)


@pytest.mark.parametrize("d", [2, 7, 100])
def test_a_records_label_does_not_depend_on_the_other_records(d):
    rng = np.random.default_rng(d)
    fill = rng.uniform(-5.0, 5.0, size=(BEFORE[-1] + 1, d))
    flips = 0
    ties = 0
    for k in (2, 3, 10, 50):
        offset = rng.uniform(0.0, 0.5, size=k)
        C, rows = _ties(rng, d, k, 6)
        corrected_rows = tie_rows(C, offset, np.tile([-10.0, 10.0], (d, 1)), 6, rng)
        for x in rows:
            ties += 1
            flips += len({int(nearest_centres(X, C)[m]) for X, m in _contexts(x, fill)}) > 1
        for x in corrected_rows:
            ties += 1
            flips += len({int(corrected_nearest(X, C, offset)[0][m])
                          for X, m in _contexts(x, fill)}) > 1
    assert ties >= 24
    assert flips == 0, f"{flips} of {ties} tie records changed label with the other records"


@pytest.mark.parametrize("d", [2, 7, 100])
def test_a_records_projection_does_not_depend_on_the_other_records(d):
    rng = np.random.default_rng(d)
    bounds = np.tile([-10.0, 10.0], (d, 1))
    p = max(1, min(d - 1, 10))
    spaces = [Space(bounds, p, np.random.default_rng(1)),
              _Space(bounds, public_projection(np.random.default_rng(2), d, p))]
    fill = rng.uniform(-10.0, 10.0, size=(BEFORE[-1] + 1, d))
    for space in spaces:
        for x in rng.uniform(-10.0, 10.0, size=(4, d)):
            seen = {space.project(X)[m].tobytes() for X, m in _contexts(x, fill)}
            assert len(seen) == 1, f"{type(space).__name__}: {len(seen)} projections"


def test_fixed_blocks_are_multiples_of_64_rows_from_public_shapes_only():
    from privclust._geometry import block_rows, project_rows

    for k, d in [(1, 1), (2, 2), (20, 100), (50, 10), (10_000, 3), (3, 100_000)]:
        rows = block_rows(k, d)
        assert rows % 64 == 0 and rows >= 64
    X = np.random.default_rng(0).normal(size=(1000, 7))
    G = np.random.default_rng(1).normal(size=(3, 7))
    mid = np.full(7, 0.5)
    np.testing.assert_allclose(project_rows(X, mid, G), (X - mid) @ G.T, rtol=1e-12,
                               atol=1e-12)
    C = X[:5]
    np.testing.assert_array_equal(nearest_centres(X, C),
                                  np.argmin(((X[:, None] - C) ** 2).sum(axis=2), axis=1))
    assert nearest_centres(np.zeros((0, 7)), C).shape == (0,)


def _on_hyperplane(rng, normal, offset, m, bounds):
    """Records with ``x . normal`` at ``offset`` to within the last bit (bisection on the
    elementwise dot product, the rows clipped to the bounds)."""
    d = normal.size
    u = normal / np.sqrt(normal @ normal)
    base = rng.uniform(-5.0, 5.0, size=(m, d))
    base += (offset - base @ normal)[:, None] * u / np.sqrt(normal @ normal)
    lo_t, hi_t = np.full(m, -1.0), np.full(m, 1.0)
    for _ in range(80):
        t = (lo_t + hi_t) / 2.0
        x = np.clip(base + t[:, None] * u, bounds[:, 0], bounds[:, 1])
        below = np.einsum("ij,ij->i", x, np.broadcast_to(normal, x.shape)) <= offset
        lo_t, hi_t = np.where(below, t, lo_t), np.where(below, hi_t, t)
    return np.clip(base + lo_t[:, None] * u, bounds[:, 0], bounds[:, 1])


@pytest.mark.parametrize("d", [2, 7, 100])
def test_a_records_side_of_a_hyperplane_does_not_depend_on_the_other_records(d):
    """LSHSplits' oblique cuts (``regroup_oblique``): a record on the hyperplane goes to the
    same side alone as among other records."""
    rng = np.random.default_rng(d)
    bounds = np.tile([-10.0, 10.0], (d, 1))
    normal = rng.normal(size=d)
    offset = float(rng.uniform(-1.0, 1.0))
    fill = rng.uniform(-10.0, 10.0, size=(BEFORE[-1] + 1, d))
    flips = 0
    for x in _on_hyperplane(rng, normal, offset, 12, bounds):
        sides = set()
        for X, m in _contexts(x, fill):
            engine = LocalEngine(X, bounds)
            g = engine.regroup_oblique(engine.root(), normal, [offset], [0], [1], 2)
            sides.add(int(g.group[m]))
        flips += len(sides) > 1
    assert flips == 0


# ---------------------------------------------------------------------- cells beside the box
def _fuzz_case(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 6))
    n = int(rng.integers(1, 300))
    lo = rng.uniform(-10.0, 0.0, size=d)
    hi = lo + rng.uniform(0.1, 10.0, size=d)
    return rng.uniform(lo, hi, size=(n, d)), lo, hi, rng


@pytest.mark.parametrize("seed", [1, 11, 17, 19])
def test_coreset_leaves_lie_inside_the_bounds(seed):
    """A released cell beside the box (the root's children reach past it; noise can release
    one) holds its leaf at the centre of its intersection with the box, a face: never outside
    the bounds (fuzzed cases that put leaves outside)."""
    X, lo, hi, rng = _fuzz_case(seed)
    k = None if seed % 2 else int(rng.integers(1, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CoresetKMeans(k, epsilon=float(rng.choice([0.1, 1, 10])),
                              bounds={"lower": lo, "upper": hi}, random_state=seed).fit(X)
    P = model.coreset_
    assert P.shape[0] > 0
    assert ((P >= lo) & (P <= hi)).all()
    assert np.isfinite(model.coreset_spread_).all() and (model.coreset_spread_ >= 0).all()


def test_dpcube_candidates_lie_inside_the_projected_box():
    rng = np.random.default_rng(9)
    d = int(rng.integers(1, 6))
    n = int(rng.integers(20, 300))
    lo = rng.uniform(-10.0, 0.0, size=d)
    hi = lo + rng.uniform(0.1, 10.0, size=d)
    X = rng.uniform(lo, hi, size=(n, d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DPCube(2, epsilon=float(rng.choice([0.1, 1, 10])),
                       bounds={"lower": lo, "upper": hi}, random_state=9).fit(X)
    reach = np.abs(model.projection_) @ ((hi - lo) / 2.0) * (1.0 + 1e-9) + 1e-12
    assert (np.abs(model.candidates_) <= reach).all()


@pytest.mark.parametrize("d", [2, 100])
def test_the_engines_assign_tie_records_alike_however_the_records_are_chunked(d, dask_client):
    """The engines' assignment passes: the NumPy engine and Dask chunks of 1, 7 and 250
    records give every tie record the same centre (the same counts per centre)."""
    import dask.array as da

    from privclust.engine.dask import DaskEngine

    rng = np.random.default_rng(d)
    bounds = np.tile([-10.0, 10.0], (d, 1))
    C, ties = _ties(rng, d, 3, 40)
    X = np.vstack([rng.uniform(-5.0, 5.0, size=(301, d)), ties])
    counts = LocalEngine(X, bounds).nearest_centre_stats(C)[0]
    for chunks in (1, 7, 250):
        engine = DaskEngine(da.from_array(X, chunks=(chunks, d)), bounds)
        np.testing.assert_array_equal(engine.nearest_centre_stats(C)[0], counts)
    np.testing.assert_array_equal(counts, np.bincount(nearest_centres(X, C), minlength=3))


@pytest.mark.parametrize("d", [2, 7, 30])
def test_a_records_most_likely_component_does_not_depend_on_the_other_records(d):
    """Morse's likelihood shortcut (``predict_method='likelihood'``, and the flow's mixed
    basins): a record where two components are equally likely goes to the same one alone as
    among other records."""
    from privclust.cluster._morse.field import MixtureField

    rng = np.random.default_rng(d)
    A = rng.normal(size=(2, d, d))
    cov = A @ np.swapaxes(A, 1, 2) / d + np.eye(d)
    means = rng.uniform(-1.0, 1.0, size=(2, d))
    field = MixtureField(np.array([0.4, 0.6]), means, cov)
    P = field.precisions

    def gap(x):  # elementwise log-term difference of the two components
        q = [np.einsum("nd,de,ne->n", x - means[c], P[c], x - means[c]) for c in (0, 1)]
        return (field.log_norm[0] - 0.5 * q[0]) - (field.log_norm[1] - 0.5 * q[1])

    u = means[1] - means[0]
    base = means[0] + 0.5 * u + rng.normal(size=(12, d)) * 0.05
    lo_t, hi_t = np.full(12, -2.0), np.full(12, 2.0)
    first = gap(base + lo_t[:, None] * u) >= 0
    for _ in range(80):
        t = (lo_t + hi_t) / 2.0
        same = (gap(base + t[:, None] * u) >= 0) == first
        lo_t, hi_t = np.where(same, t, lo_t), np.where(same, hi_t, t)
    ties = base + lo_t[:, None] * u
    fill = rng.uniform(-1.0, 1.0, size=(BEFORE[-1] + 1, d))
    flips = sum(len({int(np.argmax(field.log_terms(X)[m])) for X, m in _contexts(x, fill)}) > 1
                for x in ties)
    assert flips == 0
