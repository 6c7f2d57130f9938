"""Records larger than ``engine.dask.PERSIST_SHARE`` of the workers' memory are not persisted:
the Dask engine keeps no per-record array of them on the workers, every pass recomputes its
chunks (re-reads or re-draws them), and every estimator releases what the persisted path (and
the NumPy engine) releases, bit for bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")

from privclust import DPDBSCAN, DPM, CoresetKMeans, DPLloyd  # noqa: E402
from privclust.engine import dask as dask_engine  # noqa: E402
from privclust.engine.dask import DaskEngine  # noqa: E402

BOUNDS = (-8.0, 8.0)
ESTIMATORS = {
    "dbscan": lambda: DPDBSCAN(epsilon=2.0, eps=0.8, min_samples=20, bounds=BOUNDS,
                               random_state=1),
    "dpm": lambda: DPM(epsilon=2.0, bounds=BOUNDS, random_state=1),
    "lloyd": lambda: DPLloyd(n_clusters=3, epsilon=2.0, bounds=BOUNDS, random_state=1),
    "coreset-k": lambda: CoresetKMeans(3, epsilon=2.0, bounds=BOUNDS, random_state=1),
    "coreset": lambda: CoresetKMeans(epsilon=2.0, bounds=BOUNDS, random_state=1),
}
RELEASED = ("cluster_centers_", "cluster_sizes_", "n_clusters_", "span_cells_",
            "span_labels_", "labels_", "coreset_", "coreset_weights_", "n_hat_")
CALLS = []  # chunks drawn by _drawn (the test cluster's workers are threads of this process)


@pytest.fixture
def client(dask_client):
    return dask_client


def _data(n=4000, d=2, seed=3):
    rng = np.random.default_rng(seed)
    centres = np.array([[-4.0, -4.0], [0.0, 4.0], [4.0, -2.0]])[:, :d]
    X = centres[rng.integers(0, 3, n)] + rng.normal(scale=0.7, size=(n, d))
    X[:2] = 9.0  # outside the bounds: clipped
    return X.astype(np.float32)


def _drawn(x, block_info=None):
    """A chunk drawn in its task (as lazily generated data are): counted in CALLS."""
    CALLS.append(block_info[None]["chunk-location"][0])
    return x


def _lazy(X, chunks):
    return da.from_array(X, chunks=(chunks, X.shape[1])).map_blocks(_drawn, dtype=X.dtype)


def _same(a, b):
    assert [r.to_dict() for r in a.privacy_report_.releases] == \
        [r.to_dict() for r in b.privacy_report_.releases]
    for name in RELEASED:
        if hasattr(a, name):
            np.testing.assert_array_equal(np.asarray(getattr(a, name)),
                                          np.asarray(getattr(b, name)), err_msg=name)


def test_large_records_are_not_persisted(client, monkeypatch):
    """Above the share, no chunk of the records (nor the root grouping) is held on the
    workers; every computation draws the chunks again. Below it they are persisted once."""
    X = _data()
    bounds = np.tile(BOUNDS, (2, 1))
    kept = DaskEngine(_lazy(_data(seed=4), (1500, 0, 2500)), bounds)
    assert kept.persisted and client.who_has(kept.X)
    monkeypatch.setattr(dask_engine, "PERSIST_SHARE", 0.0, raising=False)
    CALLS.clear()
    engine = DaskEngine(_lazy(X, (1500, 0, 2500)), bounds)
    assert not getattr(engine, "persisted", True)
    assert not any(client.who_has(engine.X).values())
    assert not any(client.who_has(engine.root().group).values())
    assert CALLS == []  # nothing drawn yet: the clip count waits for the first pass
    assert engine.count(engine.root()).tolist() == [4000]
    assert len(CALLS) == 3
    assert engine.n_clipped_records == 2  # counted with the first pass, no pass of its own
    assert len(CALLS) == 3
    assert engine.count(engine.root()).tolist() == [4000]
    assert len(CALLS) == 6  # every pass draws the three chunks again


def test_clipping_is_warned_after_the_first_pass(client, monkeypatch):
    monkeypatch.setattr(dask_engine, "PERSIST_SHARE", 0.0, raising=False)
    X = _data()
    dask_engine._CACHE.clear()
    CALLS.clear()
    with pytest.warns(UserWarning, match="2 record\\(s\\) lie outside the bounds"):
        ESTIMATORS["dbscan"]().fit(_lazy(X, (1500, 0, 2500)))
    assert len(CALLS) == 3 * 3  # validation, grid counts, labels: no pass for the clip count


def test_the_decision_reads_the_workers_memory(client, monkeypatch):
    total = dask_engine.workers_memory(client)
    assert total > 0
    monkeypatch.setattr(dask_engine, "PERSIST_SHARE", 0.5)
    rows = int(0.5 * total) // 8
    assert dask_engine.keeps_records(client, (rows, 2), np.float32)
    assert not dask_engine.keeps_records(client, (rows + 1, 2), np.float32)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_releases_equal_the_persisted_path(client, monkeypatch, name):
    X = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = ESTIMATORS[name]().fit(X)
        dask_engine._CACHE.clear()  # each fit validates its input afresh
        CALLS.clear()
        persisted = ESTIMATORS[name]().fit(_lazy(X, (1500, 0, 2500)))
        drawn = len(CALLS)
        monkeypatch.setattr(dask_engine, "PERSIST_SHARE", 0.0, raising=False)
        dask_engine._CACHE.clear()
        CALLS.clear()
        recomputed = ESTIMATORS[name]().fit(_lazy(X, (1500, 0, 2500)))
    _same(local, persisted)
    _same(persisted, recomputed)
    assert len(CALLS) >= drawn  # the passes over the clipped records draw the chunks again
