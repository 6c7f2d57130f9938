"""The Dask engine on worker processes (everything a task needs travels pickled): its queries and
the estimators' releases equal the NumPy engine's bit for bit, as on the in-process cluster."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from sklearn.datasets import make_blobs  # noqa: E402

import privclust.engine.dask as dask_engine  # noqa: E402
from privclust import DPDBSCAN, DPM  # noqa: E402
from privclust.engine import LocalEngine  # noqa: E402
from privclust.engine.dask import DaskEngine  # noqa: E402


@pytest.fixture(scope="module")
def process_client():
    """A LocalCluster of 2 worker processes, current only inside the tests that ask for it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        client = distributed.Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


@pytest.fixture
def on_processes(process_client):
    with process_client.as_current():
        yield process_client


@pytest.mark.parametrize("small_parts", [False, True], ids=["whole-columns", "bucket-sort"])
def test_queries_equal_local_on_processes(on_processes, monkeypatch, small_parts):
    if small_parts:
        monkeypatch.setattr(dask_engine, "_PART_VALUES", 97)
        monkeypatch.setattr(dask_engine, "_COLUMN_VALUES", 97)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5)) * 2.5
    X[::3, 0] = np.round(X[::3, 0])  # ties
    b = np.tile([-6.0, 6.0], (5, 1))
    L = LocalEngine(X, b)
    D = DaskEngine(da.from_array(X, chunks=((7, 293, 300), 5)), b)
    assert D._client is on_processes
    np.testing.assert_array_equal(L.neighbour_gaps(), D.neighbour_gaps())
    dither = (np.array([0.0, 0.01, 0.0, 0.02, 0.03]), lambda n: np.linspace(-0.5, 0.49, n))
    np.testing.assert_array_equal(L.neighbour_gaps(dither=dither),
                                  D.neighbour_gaps(dither=dither))
    gl = L.regroup(L.root(), [0], [0.1], [0], [1], 2)
    gd = D.regroup(D.root(), [0], [0.1], [0], [1], 2)
    lo, w = np.full(5, -6.0), np.full(5, 0.5)
    for a, c in zip(L.count_and_histogram(gl, lo, w, 24), D.count_and_histogram(gd, lo, w, 24),
                    strict=True):
        np.testing.assert_array_equal(a, c)
    centres = np.array([[0.5] * 5, [-1.0] * 5])
    np.testing.assert_array_equal(L.centred_sums(gl, centres), D.centred_sums(gd, centres))
    for a, c in zip(L.cell_counts(lo, np.full(5, 1.5)), D.cell_counts(lo, np.full(5, 1.5)),
                    strict=True):
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("make", [
    lambda: DPM(epsilon=1.0, bounds=(-12, 12), random_state=3),
    lambda: DPDBSCAN(epsilon=1.0, eps=0.8, min_samples=20, bounds=(-12, 12), random_state=3),
], ids=["DPM", "DPDBSCAN"])
def test_estimators_release_the_same_on_processes(on_processes, make):
    X, _ = make_blobs(3000, 2, centers=4, cluster_std=1.0, center_box=(-8, 8), random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = make().fit(X)
        b = make().fit(da.from_array(X, chunks=((1000, 2000), 2)))
    ra, rb = a.privacy_report_.releases, b.privacy_report_.releases
    assert len(ra) == len(rb)
    for x, y in zip(ra, rb, strict=True):
        assert x.to_dict() == y.to_dict()
    for name in ("cluster_centers_", "noisy_counts_", "span_cells_", "span_labels_",
                 "labels_"):
        if hasattr(a, name):
            np.testing.assert_array_equal(np.asarray(getattr(a, name)),
                                          np.asarray(getattr(b, name)), err_msg=name)


def test_pending_groupings_are_applied_once_on_processes(on_processes):
    """A pending grouping read only through one derived from it (DPM reads a level's children
    through their left halves) gets its groups from that pass; later regroupings of it, and
    one derived from it before that pass, start from those groups: the NumPy engine's groups,
    and no chain of regroupings since the root applied again."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 3)) * 2.0
    b = np.tile([-6.0, 6.0], (3, 1))
    L, D = LocalEngine(X, b), DaskEngine(da.from_array(X, chunks=((200, 300), 3)), b)
    applied, apply_chain = [], D._apply_chain

    def spy(base, ops, keep=None):
        applied.append((len(ops), keep))
        return apply_chain(base, ops, keep)

    D._apply_chain = spy
    out = []
    for E in (L, D):
        children = E.regroup(E.root(), [0], [0.1], [0], [1], 2)
        left = E.regroup(children, [-1, -1], [0.0, 0.0], [0, -1], [0, -1], 1)
        other = E.regroup(children, [1, -1], [0.5, 0.0], [0, 1], [1, 1], 2)
        hist = E.axis_histogram(left, np.full(3, -6.0), np.full(3, 0.5), 24)
        if E is D:  # the children came with their left halves; the others start from them
            assert children.group is not None and len(other._ops) == 2
        relabel = E.regroup(children, [-1, -1], [0.0, 0.0], [1, 0], [1, 0], 2)
        if E is D:
            assert relabel._base is children and len(relabel._ops) == 1
        out.append((hist, E.count(relabel), E.count(other), E.count(children)))
    for a, c in zip(*out, strict=True):
        np.testing.assert_array_equal(a, c)
    assert applied == [(2, 1), (1, None), (1, None)]  # left (keeping children), relabel, other
