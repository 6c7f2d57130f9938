"""The Dask engine: every query equals the NumPy engine's, every estimator releases the same on
NumPy and Dask input (for several chunkings), retried tasks draw no noise, Parquet input.

Everything is compared exactly: counts, histograms, cells, labels and neighbour gaps, and the
sums too (both engines add the same exact integers on the public grid and convert the total
once, ``privclust.engine._exact``), so every release is the same bit for bit.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")

from sklearn.base import clone  # noqa: E402
from sklearn.datasets import make_blobs  # noqa: E402
from tests._dask_cases import CHUNKINGS, cluster_on_both_engines, parquet_folder  # noqa: E402,E501

import privclust.engine._dask_tasks as dask_tasks  # noqa: E402
import privclust.engine.dask as dask_engine  # noqa: E402
from privclust import (  # noqa: E402
    DPDBSCAN,
    DPM,
    DPGaussianMixture,
    DPLloyd,
    MorseMerging,
)
from privclust.engine import LocalEngine, MostLikelyComponent  # noqa: E402
from privclust.engine.dask import DaskData, DaskEngine, as_dask_data  # noqa: E402


@pytest.fixture
def client(dask_client):
    """The session's Dask client (conftest)."""
    return dask_client


def _data(n=400, d=3, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 2.5
    X[::3, 0] = np.round(X[::3, 0])  # ties, for the gaps and the lattice
    return X.astype(dtype)


def _engines(X, bounds, chunking):
    Xd = da.from_array(X, chunks=(CHUNKINGS[chunking](X.shape[0]), X.shape[1]))
    return LocalEngine(X, bounds), DaskEngine(Xd, bounds)


def _offsets(n):
    """Public dither offsets in [-1/2, 1/2)."""
    return np.linspace(-0.5, 0.49, n)


def _same(a, b):
    """Equal bit for bit (sums are exact on both engines)."""
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_gaps_of_moderate_data_sort_whole_columns(client, monkeypatch, chunking):
    """Up to ``_COLUMN_VALUES`` records a gap pass sorts whole columns (a task per few
    columns), even with many sorting partitions: no bucket counting or splitting pass over the
    records, and the same gaps as the NumPy engine, dithered or not."""
    from distributed import get_task_stream

    monkeypatch.setattr(dask_engine, "_PART_VALUES", 97)  # the bucket sort's size, were it used
    X = _data(n=600, d=5, dtype=np.float32)
    b = np.tile([-6.0, 6.0], (5, 1))
    L, D = _engines(X, b, chunking)
    dither = (np.array([0.0, 0.01, 0.0, 0.02, 0.03]), _offsets)
    with get_task_stream(client) as ts:
        np.testing.assert_array_equal(L.neighbour_gaps(), D.neighbour_gaps())
        np.testing.assert_array_equal(L.neighbour_gaps(dither=dither),
                                      D.neighbour_gaps(dither=dither))
    names = {(r["key"][0] if isinstance(r["key"], tuple) else r["key"]).split("-")[0]
             for r in ts.data}
    assert "sort_columns" in names
    assert not names & {"bucket_hist", "split_block", "sort_part"}


@pytest.mark.parametrize("small_parts", [False, True], ids=["one-part", "many-parts"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_queries_equal_local(client, monkeypatch, chunking, dtype, small_parts):
    if small_parts:  # several sorting partitions and cell-key ranges
        monkeypatch.setattr(dask_engine, "_PART_VALUES", 97)
        monkeypatch.setattr(dask_engine, "_COLUMN_VALUES", 97)
    X = _data(dtype=dtype)
    b = np.tile([-6.0, 6.0], (3, 1))
    L, D = _engines(X, b, chunking)
    assert D.n_clipped_records == L.n_clipped_records > 0
    assert D.X.dtype == L.X.dtype and D.n_records == L.n_records
    gl, gd = L.root(), D.root()
    np.testing.assert_array_equal(L.count(gl), D.count(gd))
    args = ([0, -1], [0.5, 0.0], [0, 2], [1, 2], 3)
    gl, gd = L.regroup(gl, *args[:4], 2), D.regroup(gd, *args[:4], 2)
    gl, gd = L.regroup(gl, *args), D.regroup(gd, *args)
    np.testing.assert_array_equal(L.count(gl), D.count(gd))
    obl = (np.array([0.3, -0.2, 1.0]), [0.1, 0.0, 0.2], [0, 1, -1], [1, 1, 2], 3)
    np.testing.assert_array_equal(L.count(L.regroup_oblique(gl, *obl)),
                                  D.count(D.regroup_oblique(gd, *obl)))
    for lo, w in [(b[:, 0], np.full(3, 0.7)), (np.zeros((3, 3)) - 4, np.full((3, 3), 0.5))]:
        np.testing.assert_array_equal(L.axis_histogram(gl, lo, w, 16),
                                      D.axis_histogram(gd, lo, w, 16))
    centres = np.arange(9.0).reshape(3, 3) / 10
    _same(L.centred_sums(gl, centres), D.centred_sums(gd, centres))
    np.testing.assert_array_equal(L.neighbour_gaps(), D.neighbour_gaps())
    np.testing.assert_array_equal(L.neighbour_gaps(np.float64), D.neighbour_gaps(np.float64))
    dither = (np.array([0.5, 0.0, 0.1]), _offsets)
    np.testing.assert_array_equal(L.neighbour_gaps(dither=dither),
                                  D.neighbour_gaps(dither=dither))
    for a, c in zip(L.group_neighbour_gaps(gl), D.group_neighbour_gaps(gd), strict=True):
        np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(L.lattice_misses(0, [1.0, 0.5, 0.25]),
                                  D.lattice_misses(0, [1.0, 0.5, 0.25]))
    # cell keys counted per chunk (few cells), raw keys merged by bincount or by sorting (many
    # cells), rows when the keys would overflow
    for width in (4.0, 0.4, 0.1, 2e-6):
        for a, c in zip(L.cell_counts(b[:, 0], np.full(3, width)),
                        D.cell_counts(b[:, 0], np.full(3, width)), strict=True):
            np.testing.assert_array_equal(a, c)
    _check_assignments(L, D)


@pytest.mark.parametrize("chunking", ["uneven", "empty"])
def test_pending_regroupings_and_joint_queries_equal_local(client, chunking):
    """A chain of regroupings read at its end and in its middle (each read applies its own
    chain), and count_and_histogram against count plus axis_histogram, on both engines."""
    X = _data()
    b = np.tile([-6.0, 6.0], (3, 1))
    L, D = _engines(X, b, chunking)
    split = ([0], [0.0], [0], [1], 2)
    g1l, g1d = L.regroup(L.root(), *split), D.regroup(D.root(), *split)
    relabel = ([-1, -1], [0.0, 0.0], [-3, 1], [-3, 1], 2)  # group 0 parked, 1 -> 1
    g2l, g2d = L.regroup(g1l, *relabel), D.regroup(g1d, *relabel)
    split2 = ([-1, 2], [0.0, 0.3], [0, 1], [0, 2], 3)
    g3l, g3d = L.regroup(g2l, *split2), D.regroup(g2d, *split2)
    assert g3d.group is None  # pending until a query reads it
    lo, w = b[:, 0], np.full(3, 0.7)
    for gl, gd in ((g3l, g3d), (g1l, g1d), (g2l, g2d)):
        cl, hl = L.count_and_histogram(gl, lo, w, 16)
        cd, hd = D.count_and_histogram(gd, lo, w, 16)
        np.testing.assert_array_equal(cl, L.count(gl))
        np.testing.assert_array_equal(hl, L.axis_histogram(gl, lo, w, 16))
        np.testing.assert_array_equal(cl, cd)
        np.testing.assert_array_equal(hl, hd)
    assert g3d.group is not None
    parked = ([-1, -1, -1], [0.0] * 3, [0, 1, 2], [0, 1, 2], 4, [-1, 3])  # node 1 -> group 3
    np.testing.assert_array_equal(L.count(L.regroup(g3l, *parked)),
                                  D.count(D.regroup(g3d, *parked)))
    assert L.count(L.regroup(g3l, *parked))[3] == L.count(g1l)[0] > 0


def test_tasks_of_one_chunk_are_placed_where_it_lives(client):
    """The per-chunk tasks the gap pass keeps (pipelined behind another batch's sort) name
    the workers that hold their chunk, so that no worker fetches a whole chunk."""
    _, D = _engines(_data(1000), np.tile([-10.0, 10.0], (3, 1)), "uneven")
    held = client.who_has(D.X)
    where = D._chunk_workers()
    assert len(where) == len(D._xblocks) > 1
    for x, workers in zip(D._xblocks, where, strict=True):
        assert workers and set(workers) == set(held[x.key])


def test_labels_of_many_chunks_come_back_in_order(client):
    """More chunks than one batch of labels: predict and labels_ equal the NumPy fit's."""
    X = _blobs()
    rows = 2000 // (3 * dask_engine._LABEL_BATCH) + 1  # three batches and a bit
    for name in ("DPDBSCAN", "DPM"):
        a = ESTIMATORS[name]().fit(X)
        b = ESTIMATORS[name]().fit(da.from_array(X, chunks=(rows, 2)))
        np.testing.assert_array_equal(a.labels_, b.labels_)
        assert b.labels_.dtype == np.int64 and (a.labels_ >= 0).any()
        np.testing.assert_array_equal(a.predict(X), b.predict(da.from_array(X, chunks=rows)))


def test_labels_come_to_the_client_one_chunk_at_a_time(client, monkeypatch):
    """On a distributed client the chunks' labels are computed together and gathered one
    chunk at a time: the client never holds more than one chunk's labels in transit."""
    from distributed import Client

    X = _blobs()
    rows = 2000 // (3 * dask_engine._LABEL_BATCH) + 1
    data = as_dask_data(da.from_array(X, chunks=(rows, 2)))
    sizes, gather = [], Client.gather

    def counting(self, futures, *args, **kwargs):
        out = gather(self, futures, *args, **kwargs)
        parts = out if isinstance(out, (list, tuple)) else [out]
        sizes.append(sum(np.asarray(p).size for p in parts if isinstance(p, np.ndarray)))
        return out

    monkeypatch.setattr(Client, "gather", counting)
    labels = dask_engine.record_labels(data, _first_coordinate_sign)
    np.testing.assert_array_equal(labels, _first_coordinate_sign(X))
    assert len(sizes) == len(data.array.chunks[0]) and max(sizes) <= rows


def _first_coordinate_sign(x):
    return (x[:, 0] > 0).astype(np.int64)


def _check_assignments(L, D):
    centres = np.array([[0.0, 0, 0], [2, 2, 0], [-2, 1, 1]])
    for a, c in zip(L.nearest_centre_moments(centres), D.nearest_centre_moments(centres),
                    strict=True):
        _same(a, c)
    chol = np.stack([np.eye(3) * s for s in (1.0, 2.0, 0.5)])
    ml = MostLikelyComponent(centres, chol, np.log([0.2, 0.5, 0.3]))
    sl = L.assignment_stats(ml, second_moments=True, squared_norms=True)
    sd = D.assignment_stats(ml, second_moments=True, squared_norms=True)
    np.testing.assert_array_equal(sl.counts, sd.counts)
    for name in ("sums", "moments", "sq_norms"):
        _same(getattr(sl, name), getattr(sd, name))
    zc, zr = centres + 0.1, np.array([1.5, 2.0, 1.0])
    cells = centres[:, None, :] + np.random.default_rng(1).normal(size=(3, 4, 3))
    np.testing.assert_array_equal(L.zone_cell_counts(centres, zc, zr, cells),
                                  D.zone_cell_counts(centres, zc, zr, cells))
    with pytest.raises(NotImplementedError, match="not available on the Dask engine"):
        D.zone_records(centres, zc, zr)


# ------------------------------------------------------------------------ estimators
def _blobs(n=2000, d=2, seed=0):
    X, _ = make_blobs(n, d, centers=4, cluster_std=1.0, center_box=(-8, 8), random_state=seed)
    return X


ESTIMATORS = {
    "DPM": lambda: DPM(epsilon=1.0, bounds=(-12, 12), random_state=3),
    "DPDBSCAN": lambda: DPDBSCAN(epsilon=1.0, eps=0.8, min_samples=20, bounds=(-12, 12),
                                 random_state=3),
    "DPLloyd": lambda: DPLloyd(epsilon=1.0, n_clusters=4, bounds=(-12, 12), random_state=3),
    "DPGaussianMixture": lambda: DPGaussianMixture(epsilon=1.0, n_components=4,
                                                   bounds=(-12, 12), random_state=3),
    "Morse(DPLloyd)": lambda: MorseMerging(
        DPLloyd(epsilon=1.0, n_clusters=6, bounds=(-12, 12)), 2, epsilon=2.0, delta=1e-6,
        random_state=3),
}
RELEASED = ("cluster_centers_", "cluster_sizes_", "noisy_counts_", "n_hat_", "span_cells_",
            "span_labels_", "weights_", "covariances_", "labels_")


def _assert_same_fit(a, b):
    ra, rb = a.privacy_report_, b.privacy_report_
    assert len(ra.releases) == len(rb.releases)
    for x, y in zip(ra.releases, rb.releases, strict=True):
        dx, dy = x.to_dict(), y.to_dict()
        for key, vx in dx.items():
            assert vx == dy[key], key
    for name in RELEASED:
        if hasattr(a, name):
            va, vb = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
            if va.dtype.kind in "iubO":
                np.testing.assert_array_equal(va, vb, err_msg=name)
            else:
                _same(va, vb)


@pytest.mark.parametrize("chunks", [(2000,), (1, 700, 0, 1299)], ids=["one", "uneven"])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_estimators_release_the_same(client, name, chunks):
    X = _blobs()
    est = ESTIMATORS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = clone(est).fit(X)
        b = clone(est).fit(da.from_array(X, chunks=(chunks, 2)))
    _assert_same_fit(a, b)
    assert b.n_features_in_ == 2


def test_retried_tasks_draw_no_noise(client, monkeypatch):
    """Chunk tasks that fail once are rerun by the scheduler; the fit's generator ends in the
    same state as after the NumPy fit (tasks never touch it), and the ledger is the same."""
    # state kept in an importable module: tasks are serialised, closures would be copied
    monkeypatch.setattr(dask_tasks, "_test_failed", set(), raising=False)
    real = dask_tasks.on_block

    def flaky(proto, method, *args):
        if method not in dask_tasks._test_failed:  # every query kind fails once
            dask_tasks._test_failed.add(method)
            raise OSError("simulated worker failure")
        return real(proto, method, *args)

    monkeypatch.setattr(dask_tasks, "on_block", flaky)
    X = _blobs()
    for make in (ESTIMATORS["DPM"], ESTIMATORS["DPLloyd"]):
        g_np, g_dask = np.random.default_rng(11), np.random.default_rng(11)
        a = make().set_params(random_state=g_np).fit(X)
        b = make().set_params(random_state=g_dask).fit(da.from_array(X, chunks=300))
        assert g_np.bit_generator.state == g_dask.bit_generator.state
        _assert_same_fit(a, b)
    assert {"count", "regroup", "exact_assignment_stats"} <= dask_tasks._test_failed


# ------------------------------------------------------------------------ input routes
def test_parquet_and_dataframe_input(client, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    dd = pytest.importorskip("dask.dataframe")
    X = _blobs(1500)
    folder = tmp_path / "data"
    parquet_folder(X, folder)
    est = ESTIMATORS["DPM"]()
    ref = clone(est).fit(X)
    for source in (str(folder), folder / "part0.parquet"):
        model = clone(est).fit(source)
        assert list(model.feature_names_in_) == ["a", "b"] and model.n_features_in_ == 2
    model = clone(est).fit(str(folder))
    _assert_same_fit(ref, model)
    frame = dd.from_pandas(pd.DataFrame(X, columns=["a", "b"]), npartitions=4)
    _assert_same_fit(ref, clone(est).fit(frame))
    assert list(model.predict(frame)) == list(ref.labels_)


def test_validation_is_one_pass_and_refuses_nan(client, monkeypatch):
    X = _blobs(600)
    monkeypatch.setattr(dask_engine, "_test_rows", [], raising=False)

    def counted(block):
        dask_engine._test_rows.append(block.shape[0])
        return block

    Xd = da.from_array(X, chunks=100).map_blocks(counted, dtype=X.dtype, meta=X[:0])
    data = as_dask_data(Xd)
    assert isinstance(data, DaskData) and data.shape == (600, 2)
    assert sum(dask_engine._test_rows) == 600  # every row read once
    assert as_dask_data(Xd) is data  # validated once per input, even inside nested fits
    assert sum(dask_engine._test_rows) == 600
    bad = X.copy()
    bad[250, 1] = np.nan
    with pytest.raises(ValueError, match="row 250, column 1"):
        DPM(epsilon=1.0, bounds=(-12, 12)).fit(da.from_array(bad, chunks=100))
    with pytest.raises(ValueError, match="2-D"):
        DPM(epsilon=1.0, bounds=(-12, 12)).fit(da.zeros((5, 2, 2)))


def test_core_import_needs_no_dask():
    code = ("import sys, numpy as np; from privclust import DPM; "
            "DPM(epsilon=1.0, bounds=(-1, 1), random_state=0).fit(np.zeros((50, 2))); "
            "assert not any(m.split('.')[0] in ('dask', 'distributed') for m in sys.modules), "
            "'dask imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_command_line_on_a_parquet_folder(client, tmp_path, capsys):
    """``privclust cluster DIR --engine dask --scheduler ADDRESS`` on a Parquet folder gives
    the same model as the NumPy engine on the same records (same seed)."""
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from privclust import cli, io

    X = _blobs(3000, 2)
    common = ["--algorithm", "lloyd", "--n-clusters", "3", "--epsilon", "1", "--bounds", "-12",
              "12", "--seed", "4"]
    on_dask, in_memory = cluster_on_both_engines(client, tmp_path, X, common)
    assert on_dask == 0
    assert in_memory == 0
    d, n = io.load_model(tmp_path / "d.json"), io.load_model(tmp_path / "n.json")
    np.testing.assert_array_equal(d.cluster_centers_, n.cluster_centers_)  # exact sums
    assert "3,000 points x 2 feature(s)" in capsys.readouterr().out
    assert cli.main(["cluster", str(tmp_path / "X.npy"), *common, "--scheduler", "x"]) == 2
    assert "--scheduler applies to --engine dask only" in capsys.readouterr().err


# ------------------------------------------------------------------------ private bounds
def _bounds_data(n=4000, dtype=np.float64):
    """Blobs plus a narrow feature far from 0 (``1000 + N(0, 1)``): every step of the release
    reads the data (the scales, the zoom, the radius)."""
    X = np.column_stack([_blobs(n), np.random.default_rng(4).normal(1000.0, 1.0, n)])
    return X.astype(dtype)


PRIVATE = {
    "DPM": lambda: DPM(epsilon=2.0, bounds="private", random_state=3),
    "DPLloyd": lambda: DPLloyd(epsilon=2.0, n_clusters=4, bounds="private", random_state=3),
    "DPDBSCAN": lambda: DPDBSCAN(epsilon=2.0, eps=0.8, min_samples=20, bounds="private",
                                 random_state=3),
    "DPGaussianMixture": lambda: DPGaussianMixture(epsilon=2.0, n_components=4,
                                                   bounds="private", random_state=3),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_private_bounds_release_the_same(client, chunking, dtype):
    from privclust import private_bounds

    X = _bounds_data(dtype=dtype)
    Xd = da.from_array(X, chunks=(CHUNKINGS[chunking](X.shape[0]), X.shape[1]))
    a, b = private_bounds(X, 0.5, random_state=7), private_bounds(Xd, 0.5, random_state=7)
    assert "zoomed" in a.description  # the zoom's pass ran
    _same(a.bounds, b.bounds)
    assert a.description == b.description
    assert [r.to_dict() for r in a.privacy_report_.releases] == [
        r.to_dict() for r in b.privacy_report_.releases]


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("name", list(PRIVATE))
def test_estimators_with_private_bounds_release_the_same(client, name, chunking):
    """The bounds, every release and the whole model file are the same on both engines."""
    from privclust.io import model_to_dict
    from privclust.io._json import dumps

    X = _bounds_data(dtype=np.float32)
    Xd = da.from_array(X, chunks=(CHUNKINGS[chunking](X.shape[0]), X.shape[1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = PRIVATE[name]().fit(X), PRIVATE[name]().fit(Xd)
    _same(a.bounds_, b.bounds_)
    _assert_same_fit(a, b)
    assert dumps(model_to_dict(a)) == dumps(model_to_dict(b))


def test_private_bounds_read_the_data_once_per_step(client, monkeypatch):
    """After the validation pass: one pass for the scales, one for the zoom, one for the radius
    (the record count comes from the validation pass), on the workers: no record comes to the
    client."""
    from privclust import private_bounds

    def no_records(*args, **kwargs):
        raise AssertionError("records were gathered on the client")

    monkeypatch.setattr(DaskData, "__array__", no_records)
    monkeypatch.setattr(DaskData, "__getitem__", no_records)
    X = _bounds_data(1500)
    monkeypatch.setattr(dask_engine, "_test_rows", [], raising=False)

    def counted(block):
        dask_engine._test_rows.append(block.shape[0])
        return block

    Xd = da.from_array(X, chunks=400).map_blocks(counted, dtype=X.dtype, meta=X[:0])
    found = private_bounds(Xd, 1.0, random_state=0)
    assert "zoomed" in found.description
    assert sum(dask_engine._test_rows) == 4 * X.shape[0]


def test_private_bounds_refusals_are_the_same(client):
    """Too few records: the same sentence, after the same release (the noisy count, spent)."""
    from privclust import Accountant, Budget

    X = _blobs(300)
    messages, spent = [], []
    for data in (X, da.from_array(X, chunks=((7, 0, 293), 2))):
        acc = Accountant(Budget(10.0, 1e-3))
        with pytest.raises(ValueError, match="too few records for private bounds") as exc:
            DPM(epsilon=1.0, bounds="private", random_state=3, accountant=acc).fit(data)
        messages.append(str(exc.value))
        spent.append(acc.spent)
    assert messages[0] == messages[1] and spent[0] == spent[1]


def test_private_clipper_on_dask_input(client):
    from privclust.preprocessing import PrivateClipper

    X = _bounds_data(dtype=np.float32)
    Xd = da.from_array(X, chunks=((1, 0, 1999, 2000), 3))
    a = PrivateClipper(epsilon=0.5, random_state=2).fit(X)
    b = PrivateClipper(epsilon=0.5, random_state=2).fit(Xd)
    _same(a.output_bounds_, b.output_bounds_)
    assert [r.to_dict() for r in a.privacy_report_.releases] == [
        r.to_dict() for r in b.privacy_report_.releases]
    out = b.transform(Xd)
    assert isinstance(out, da.Array) and out.dtype == np.float32
    _same(a.transform(X), out.compute())


def test_command_line_private_bounds_on_a_parquet_folder(client, tmp_path):
    """``--bounds private --engine dask`` on Parquet: the NumPy engine's bounds and model."""
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from privclust import io

    X = _bounds_data(3000)
    common = ["--algorithm", "lloyd", "--n-clusters", "4", "--epsilon", "2", "--bounds",
              "private", "--seed", "4"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on_dask, in_memory = cluster_on_both_engines(client, tmp_path, X, common)
    assert on_dask == 0
    assert in_memory == 0
    d, n = io.load_model(tmp_path / "d.json"), io.load_model(tmp_path / "n.json")
    _same(d.bounds_, n.bounds_)
    _same(d.cluster_centers_, n.cluster_centers_)


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_hdbscan_labels_per_chunk(client, monkeypatch, chunking):
    """DPHDBSCAN's labels_ are computed on every chunk where it lives (no record comes to the
    client) and equal the NumPy engine's, as does every release."""
    from privclust import DPHDBSCAN

    X = _blobs(3000).astype(np.float32)
    Xd = da.from_array(X, chunks=(CHUNKINGS[chunking](X.shape[0]), 2))

    def est():
        return DPHDBSCAN(epsilon=4.0, bounds=(-12, 12), random_state=3)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = est().fit(X)

        def no_records(*args, **kwargs):
            raise AssertionError("records were gathered on the client")

        monkeypatch.setattr(DaskData, "__array__", no_records)
        monkeypatch.setattr(DaskData, "__getitem__", no_records)
        b = est().fit(Xd)
    _assert_same_fit(a, b)
    assert (a.labels_ >= 0).any()
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.predict(X), b.predict(Xd))
