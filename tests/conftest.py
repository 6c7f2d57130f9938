import warnings

import numpy as np
import pytest


@pytest.fixture
def blobs_2d():
    """Four well separated 2-D blobs in [0, 100]^2 (public bounds (0, 100))."""
    rng = np.random.default_rng(7)
    centres = np.array([[20.0, 20.0], [20.0, 80.0], [80.0, 20.0], [80.0, 80.0]])
    X = np.concatenate([c + rng.normal(scale=3.0, size=(2500, 2)) for c in centres])
    y = np.repeat(np.arange(4), 2500)
    return np.clip(X, 0, 100), y


@pytest.fixture(autouse=True)
def _quiet_clipping_warnings():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*clipped to them.*")
        yield


@pytest.fixture(scope="session")
def dask_client():
    """One in-process Dask cluster (2 workers, 1 thread each) for every Dask test."""
    pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                           dashboard_address=None)
        client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()
