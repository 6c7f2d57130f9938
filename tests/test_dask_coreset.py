"""CoresetKMeans on the Dask engine: every release, the coreset and the labels equal the NumPy
engine's bit for bit, with and without k, narrow and wide (projected) data, on four chunkings
(one chunk, uneven chunks, a one-row chunk, an empty partition) and float32 or float64 input;
the no-k choice's Poisson sample holds the same records (each chunk draws its own)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")

from tests._dask_cases import CHUNKINGS, cluster_on_both_engines  # noqa: E402

from privclust import CoresetKMeans  # noqa: E402
from privclust.cluster._coreset import data as coreset_data  # noqa: E402

FITTED = ("cluster_centers_", "cluster_sizes_", "n_clusters_", "labels_", "candidate_ks_",
          "coreset_", "coreset_weights_", "coreset_spread_", "n_hat_", "delta_", "bounds_")


@pytest.fixture
def client(dask_client):
    """The session's Dask client (conftest)."""
    return dask_client


def _mixture(n, d, k, seed):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-6, 6, size=(k, d))
    X = centres[rng.integers(0, k, n)] + rng.normal(scale=0.6, size=(n, d))
    X[:3] = 9.5  # a few records outside the bounds: clipped on both engines
    return X


def _same_fit(a, b) -> int:
    """Assert the two fits equal; returns how many releases were compared."""
    ra, rb = a.privacy_report_, b.privacy_report_
    assert [r.to_dict() for r in ra.releases] == [r.to_dict() for r in rb.releases]
    assert ra.notes == rb.notes
    for name in FITTED:
        np.testing.assert_array_equal(np.asarray(getattr(a, name)),
                                      np.asarray(getattr(b, name)), err_msg=name)
    return len(ra.releases)


def _fit_both(X, est, chunking):
    Xd = da.from_array(X, chunks=(CHUNKINGS[chunking](X.shape[0]), X.shape[1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est().fit(X), est().fit(Xd)


CASES = {
    # 2-D without k: the choice scores a Poisson sample (rate about 0.55: 6,000 records at
    # epsilon 4)
    "2d-no-k": (lambda: _mixture(6000, 2, 4, 0), lambda: CoresetKMeans(
        epsilon=4.0, bounds=(-9, 9), random_state=3)),
    "2d-k": (lambda: _mixture(3000, 2, 4, 1), lambda: CoresetKMeans(
        4, epsilon=1.0, bounds=(-9, 9), random_state=3)),
    # 12-D: projected to 10 dimensions for the tree, scored in the original coordinates
    "12d-no-k": (lambda: _mixture(3000, 12, 3, 2), lambda: CoresetKMeans(
        epsilon=2.0, bounds=(-9, 9), random_state=5)),
    # 60-D: projected, the choice in the projection, then the recovery (wide data)
    "60d-no-k": (lambda: _mixture(3000, 60, 3, 3), lambda: CoresetKMeans(
        epsilon=2.0, bounds=(-9, 9), random_state=5)),
    "60d-k": (lambda: _mixture(3000, 60, 3, 4), lambda: CoresetKMeans(
        3, epsilon=2.0, delta=0, bounds=(-9, 9), random_state=5)),
}


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("case", list(CASES))
def test_releases_equal_the_numpy_engine(client, case, chunking):
    data, est = CASES[case]
    a, b = _fit_both(data(), est, chunking)
    if case == "2d-no-k":  # the sample was drawn (rate < 1), and k chosen among candidates
        assert "Poisson sample of public rate 0." in str(
            [r.to_dict() for r in a.privacy_report_.releases])
    assert _same_fit(a, b) > 0


@pytest.mark.parametrize("chunking", ["uneven", "empty"])
def test_float32_and_private_bounds(client, chunking):
    X = _mixture(4000, 3, 4, 6).astype(np.float32)

    def est():
        return CoresetKMeans(epsilon=2.0, bounds="private", random_state=1)

    a, b = _fit_both(X, est, chunking)
    assert _same_fit(a, b) > 0
    assert a.bounds_.dtype == np.float64 and a.n_clusters_ >= 2


def test_a_generator_that_cannot_move_ahead_draws_on_the_client(client):
    """MT19937 has no exact ``advance``: the client draws the sample's uniforms, in the same
    order, and the release is the same."""
    X = _mixture(6000, 2, 4, 0)

    def est():
        return CoresetKMeans(epsilon=4.0, bounds=(-9, 9), random_state=np.random.Generator(
            np.random.MT19937(11)))

    assert not coreset_data._moves_ahead(np.random.MT19937(11))
    assert coreset_data._moves_ahead(np.random.PCG64(11))
    a, b = _fit_both(X, est, "uneven")
    assert _same_fit(a, b) > 0


def test_secure_generator_moves_ahead_exactly(client):
    """The secure default's bit generator (randomgen's ChaCha20, here with a known key) moves
    ahead exactly as drawing doubles does, a buffered word included: the same release."""
    randomgen = pytest.importorskip("randomgen")
    X = _mixture(6000, 2, 4, 0)

    def est():
        gen = np.random.Generator(randomgen.ChaCha(key=12345, rounds=20))
        gen.integers(0, 10, dtype=np.int32)  # the counter at an odd word
        return CoresetKMeans(epsilon=4.0, bounds=(-9, 9), random_state=gen)

    assert coreset_data._moves_ahead(randomgen.ChaCha(key=1, rounds=20))
    a, b = _fit_both(X, est, "one-row")
    assert _same_fit(a, b) > 0


def test_no_records_come_to_the_client(client, monkeypatch):
    """The fit reads aggregates, labels and distances per chunk: the records themselves never
    leave the workers, nor do they for ``labels_`` and the cost diagnostic (each chunk labels
    and costs its own records)."""
    from privclust.engine.dask import DaskData

    def no_records(*args, **kwargs):
        raise AssertionError("records were gathered on the client")

    X = _mixture(3000, 12, 3, 2)
    Xd = da.from_array(X, chunks=((1000, 0, 2000), 12))
    monkeypatch.setattr(DaskData, "__getitem__", no_records)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        monkeypatch.setattr(DaskData, "__array__", no_records)
        model = CoresetKMeans(epsilon=2.0, bounds=(-9, 9), random_state=5).fit(Xd)
    assert model.labels_.shape == (3000,) and model.n_clusters_ >= 2


def test_command_line_default_on_the_dask_engine(client, tmp_path):
    """``privclust cluster --engine dask`` without ``--algorithm`` runs CoresetKMeans, as the
    NumPy engine does: the same model from a Parquet folder as from the array in memory."""
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from privclust import io

    X = _mixture(3000, 2, 4, 1)
    common = ["--epsilon", "2", "--bounds=-9,9", "--seed", "4"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on_dask, in_memory = cluster_on_both_engines(client, tmp_path, X, common)
    assert on_dask == 0
    assert in_memory == 0
    d, n = io.load_model(tmp_path / "d.json"), io.load_model(tmp_path / "n.json")
    assert type(d).__name__ == type(n).__name__ == "CoresetKMeans"
    np.testing.assert_array_equal(d.cluster_centers_, n.cluster_centers_)
    np.testing.assert_array_equal(d.cluster_sizes_, n.cluster_sizes_)


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_tree_labels_per_chunk_equal_the_numpy_engine(client, chunking):
    """The coreset step's labels from a k-d tree (3 to TREE_MAX_DIMS coordinates, many
    anchors), sent to the workers and read per chunk: the in-memory labels (the product's)."""
    import dask

    from privclust.engine import LocalEngine
    from privclust.engine.dask import DaskEngine

    X = _mixture(3000, 4, 5, 6)
    X[:50] = np.round(X[:50])
    A = _mixture(coreset_data.TREE_MIN_ANCHORS + 100, 4, 5, 7)
    A[:60] = np.round(A[:60])
    bounds = np.tile([-10.0, 10.0], (4, 1))
    Xd = da.from_array(X, chunks=(CHUNKINGS[chunking](X.shape[0]), 4))
    want = coreset_data.nearest_labels(LocalEngine(X, bounds), A)
    engine = DaskEngine(Xd, bounds)  # held: its records live on the workers while it does
    blocks = coreset_data.nearest_labels(engine, A).blocks
    got = np.concatenate(dask.compute(*blocks))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_a_capped_coreset_equals_the_numpy_engine(client, chunking, monkeypatch):
    """A tree with more leaves than the cap (4-D, cap 24): the cut is made on the client from
    the released counts, so both engines label the records by the same few anchors."""
    from privclust.cluster._coreset import tree as tree_module

    monkeypatch.setattr(tree_module, "CORESET_CAP", 24)
    a, b = _fit_both(_mixture(4000, 4, 5, 8), lambda: CoresetKMeans(
        epsilon=4.0, bounds=(-9, 9), random_state=2), chunking)
    assert any(n.startswith("coreset capped at 24") for n in a.privacy_report_.notes)
    assert a.coreset_.shape[0] <= 24
    assert _same_fit(a, b) > 0


@pytest.mark.parametrize("case", ["12d-no-k", "60d-k"])
def test_tree_levels_in_many_parts_release_the_same(client, monkeypatch, case):
    """A tree level's cells kept on the workers in many parts (one per 200 records here) and
    noised part by part on the client: the same releases as the NumPy engine's one array."""
    from privclust.engine import _dask_keys

    monkeypatch.setattr(_dask_keys, "RECORDS_PER_PART", 200)
    seen = []
    real = _dask_keys.LevelParts.__init__

    def spy(self, engine, parts):
        real(self, engine, parts)
        seen.append(len(self.sizes))

    monkeypatch.setattr(_dask_keys.LevelParts, "__init__", spy)
    data, est = CASES[case]
    a, b = _fit_both(data(), est, "uneven")
    assert _same_fit(a, b) > 0
    assert max(seen) >= 8  # levels were read in many parts
