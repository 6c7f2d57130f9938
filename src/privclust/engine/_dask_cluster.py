"""The Dask engine's cluster: the current client (or a local cluster of its own) and the
workers' memory, from which the engine decides whether to persist the records."""

from __future__ import annotations

import os


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

