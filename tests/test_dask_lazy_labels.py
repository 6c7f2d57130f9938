"""Above ``engine.dask.LAZY_LABELS`` records, ``labels_`` and ``predict`` on Dask input stay on
the cluster as a lazy dask array (one block per chunk) instead of one NumPy array on the client;
read, they equal the NumPy engine's labels. Below it they come back as NumPy, as before."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")

from privclust import DPDBSCAN, DPHDBSCAN, DPM, CoresetKMeans, DPLloyd  # noqa: E402
from privclust.engine import dask as dask_engine  # noqa: E402

BOUNDS = {"lower": [-8.0, -8.0], "upper": [8.0, 8.0]}
ESTIMATORS = {
    "coreset": lambda: CoresetKMeans(epsilon=2.0, n_clusters=3, bounds=BOUNDS, random_state=1),
    "lloyd": lambda: DPLloyd(n_clusters=3, epsilon=2.0, bounds=BOUNDS, random_state=1),
    "dpm": lambda: DPM(epsilon=2.0, bounds=BOUNDS, random_state=1),
    "dbscan": lambda: DPDBSCAN(epsilon=2.0, eps=0.8, min_samples=20, bounds=BOUNDS,
                               random_state=1),
    "hdbscan": lambda: DPHDBSCAN(epsilon=2.0, bounds=BOUNDS, random_state=1),
}


@pytest.fixture
def client(dask_client):
    return dask_client


def _data():
    rng = np.random.default_rng(3)
    centres = np.array([[-4.0, -4.0], [0.0, 4.0], [4.0, -2.0]])
    return centres[rng.integers(0, 3, 4000)] + rng.normal(scale=0.7, size=(4000, 2))


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_labels_stay_on_the_cluster_above_the_threshold(client, name, monkeypatch):
    X = _data()
    Xd = da.from_array(X, chunks=((1000, 0, 3000), 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = ESTIMATORS[name]().fit(X)
        monkeypatch.setattr(dask_engine, "LAZY_LABELS", 1000)
        big = ESTIMATORS[name]().fit(Xd)
        predicted = big.predict(Xd)
    for labels in (big.labels_, predicted):
        assert isinstance(labels, da.Array), type(labels)
        assert labels.dtype == np.int64
        assert labels.numblocks == (3,)
        np.testing.assert_array_equal(labels.compute(), local.labels_)


def test_labels_are_numpy_below_the_threshold(client):
    X = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = ESTIMATORS["lloyd"]().fit(da.from_array(X, chunks=(1500, 2)))
    assert isinstance(fit.labels_, np.ndarray)
