"""What the Dask benchmarks share: their float32 mixture, a process-based ``LocalCluster`` of
this machine (the shape of a real cluster: worker processes, one thread each) and the records
scattered onto it, one chunk on each worker."""

from __future__ import annotations

import contextlib
import warnings

import numpy as np


@contextlib.contextmanager
def process_cluster(n_workers: int = 2):
    """A ``distributed`` client on a fresh ``LocalCluster(n_workers, threads_per_worker=1,
    processes=True)``, its workers started; both closed on exit."""
    from distributed import Client, LocalCluster

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        client.wait_for_workers(n_workers)
        yield client
    finally:
        client.close()
        cluster.close()


def scattered(client, X):
    """``X`` as a dask array of two chunks, each already held by one worker (the engine's
    cache of validated inputs emptied first, so every call validates afresh)."""
    import dask.array as da
    from dask import delayed

    import privclust.engine.dask as dask_engine

    dask_engine._CACHE.clear()
    half = -(-X.shape[0] // 2)
    pieces = (X[:half], X[half:])
    parts = client.scatter(list(pieces))
    return da.concatenate([da.from_delayed(delayed(f), shape=p.shape, dtype=X.dtype)
                           for f, p in zip(parts, pieces, strict=True)])


def mixture(n: int, d: int, seed: int = 0) -> np.ndarray:
    """``n`` float32 records in ``d`` features: 8 Gaussian clusters (standard deviation 3)
    with centres in (-50, 50)^d, drawn 2^20 rows at a time."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-50, 50, size=(8, d)).astype(np.float32)
    X = np.empty((n, d), dtype=np.float32)
    step = 1 << 20
    for start in range(0, n, step):
        m = min(step, n - start)
        X[start:start + m] = centres[rng.integers(0, 8, m)] + rng.standard_normal(
            (m, d), dtype=np.float32) * 3
    return X
