"""The sparse histogram over cells held in parts: the same release, bit for bit, as over the
same cells in one array, however they are cut, for both noises and both ways of sampling
the empty cells; and the streamed geometric noise equals one draw."""

from __future__ import annotations

import numpy as np
import pytest

import privclust.privacy.histogram as H
import privclust.privacy.mechanisms as M
from privclust.privacy._cell_parts import SortedCells, empty_cells_at, listed_below


class Cut:
    """Sorted listed cells cut into parts at ``cuts`` (the protocol of a source in parts,
    answered part by part as a source held elsewhere answers it)."""

    def __init__(self, keys, counts, cuts):
        order = np.argsort(keys)
        k, c = keys[order], counts[order]
        self.pieces = list(zip(np.split(k, cuts), np.split(c, cuts), strict=True))
        self.sizes = [p[0].size for p in self.pieces]
        self.offsets = np.cumsum([0, *self.sizes[:-1]])
        self.read = 0

    def parts(self):
        self.read += 1  # each reading of the parts costs a pass where they are held
        yield from self.pieces

    def contains(self, values):
        return np.logical_or.reduce([np.isin(values, k) for k, _ in self.pieces])

    def below(self, ranks):
        return sum(listed_below(k, o, ranks) for (k, _), o in
                   zip(self.pieces, self.offsets, strict=True))


def _cells(seed, n_cells, m, top):
    rng = np.random.default_rng(seed)
    keys = rng.choice(n_cells, size=m, replace=False).astype(np.int64)
    counts = rng.integers(0, top, size=m)
    return keys, counts


@pytest.mark.parametrize("noise", ["geometric", "laplace"])
@pytest.mark.parametrize("sampling", ["enumerate", "rejection"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parts_release_what_one_array_releases(noise, sampling, seed):
    n_cells, m = 5000, 1200
    keys, counts = _cells(seed, n_cells, m, 30)
    t = H.sparse_threshold(n_cells, m, 0.5, noise) if noise == "geometric" else 3.0
    one = H.sparse_histogram(np.random.default_rng(seed), keys, counts, n_cells, 0.5, t,
                             noise, empty_sampling=sampling)
    cuts = np.sort(np.random.default_rng(seed + 9).choice(m, size=6, replace=False))
    cuts[0] = 0  # an empty first part
    src = Cut(keys, counts, cuts)
    parts = H.sparse_histogram(np.random.default_rng(seed), src, None, n_cells, 0.5, t, noise,
                               empty_sampling=sampling)
    assert src.read == 1 and len(src.sizes) == 7
    assert one[0].size > 10  # listed and sampled cells released
    for a, b in zip(one, parts, strict=True):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype


def test_streamed_geometric_noise_equals_one_draw(monkeypatch):
    monkeypatch.setattr(M, "_GEOMETRIC_BATCH", 1000)  # several batches of first variables
    sizes = [0, 1700, 3, 2500, 0, 4000]
    for eps in (0.05, 1.0):  # both of NumPy's geometric samplers (p below and above 1/3)
        one = M._draw_two_sided_geometric(np.random.default_rng(7), eps, (sum(sizes),))
        rng = np.random.default_rng(7)
        parts = list(M._draw_two_sided_geometric_parts(rng, eps, sizes))
        assert [p.size for p in parts] == sizes
        np.testing.assert_array_equal(np.concatenate(parts), one)
        assert np.abs(one).max() > 0


def test_the_generator_continues_where_one_draw_leaves_it():
    """After the parts, the generator is where one draw leaves it (the histogram's later draws
    are the same)."""
    sizes = [10, 0, 25]
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    M._draw_two_sided_geometric(a, 0.2, (35,))
    for _ in M._draw_two_sided_geometric_parts(b, 0.2, sizes):
        pass
    np.testing.assert_array_equal(a.random(5), b.random(5))


def test_empty_cells_at_finds_the_empty_cell_of_each_rank():
    rng = np.random.default_rng(4)
    n_cells = 700
    keys = np.sort(rng.choice(n_cells, size=300, replace=False))
    empty = np.setdiff1d(np.arange(n_cells), keys)
    ranks = rng.permutation(empty.size)[:50]
    src = SortedCells(keys, np.ones(keys.size, dtype=np.int64))
    np.testing.assert_array_equal(empty_cells_at(src, ranks), empty[ranks])
    cut = Cut(keys, np.ones(keys.size, dtype=np.int64), [40, 41, 200])
    np.testing.assert_array_equal(empty_cells_at(cut, ranks), empty[ranks])


def test_parts_out_of_order_are_refused():
    keys = np.array([5, 9, 20, 30], dtype=np.int64)
    src = Cut(keys, np.ones(4, dtype=np.int64), [2])
    src.pieces = src.pieces[::-1]
    with pytest.raises(ValueError, match="distinct"):
        H.sparse_histogram(np.random.default_rng(0), src, None, 100, 1.0, 3)
