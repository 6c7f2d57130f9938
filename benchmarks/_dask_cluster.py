"""What the Dask benchmarks share: a process-based ``LocalCluster`` of this machine (the shape
of a real cluster: worker processes, one thread each) and the records scattered onto it, one
chunk on each worker."""

from __future__ import annotations

import contextlib
import warnings


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
