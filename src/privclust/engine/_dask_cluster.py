"""The Dask engine's cluster: the current client (or a local cluster of its own) and the
workers' memory, from which the engine decides whether to persist the records."""

from __future__ import annotations

import os

import dask


def client_or_local():
    """The current ``distributed`` client, or ``(client, cluster)`` of a LocalCluster we own."""
    from distributed import Client, LocalCluster, default_client

    try:
        return default_client(), None
    except ValueError:
        cluster = LocalCluster(n_workers=1, threads_per_worker=os.cpu_count() or 1,
                               processes=False, dashboard_address=None)
        return Client(cluster, set_as_default=False), cluster


def workers_memory(client) -> int:
    """The sum of the workers' memory limits, in bytes. A worker without a limit counts as
    an equal share of the client host's physical memory among the workers."""
    workers = client.scheduler_info().get("workers", {}) or {}
    limits = [int(w.get("memory_limit") or 0) for w in workers.values()]
    if limits and all(limits):
        return sum(limits)
    import psutil

    host = int(psutil.virtual_memory().total)
    share = host // max(len(limits), 1)
    return sum(m or share for m in limits) if limits else host


def close(client, cluster) -> None:
    client.close()
    cluster.close()


def one_at_a_time(blocks, batch: int):
    """The computed ``blocks``, in order. On a ``distributed`` client all are submitted at
    once (the workers compute them in parallel and hold them) and gathered one at a time,
    each released once read: the client holds one chunk's labels in transit, whatever the
    number of chunks. On another scheduler, ``batch`` chunks at a time."""
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        client = None
    if client is None:
        for start in range(0, len(blocks), batch):
            yield from dask.compute(*blocks[start : start + batch])
        return
    futures = client.compute(blocks)
    for i in range(len(futures)):
        part = client.gather(futures[i])
        futures[i] = None  # released on the workers
        yield part
