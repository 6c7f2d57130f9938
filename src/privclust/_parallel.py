"""Threads over chunks: NumPy releases the GIL inside its loops, so a pass over big data can
use every core when its chunks write disjoint parts of the output."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

from ._geometry import single_threaded_blas

#: Records above which a pass is shared between threads; below, starting threads costs more
#: than it saves.
THREADED_RECORDS = 1 << 20
N_THREADS = max(1, min(4, os.cpu_count() or 1))


def _each(fn, chunks, threaded: bool) -> None:
    """``fn(chunk)`` for every chunk, on a pool of ``N_THREADS`` threads if ``threaded``."""
    if not threaded:
        for chunk in chunks:
            fn(chunk)
        return
    with ThreadPoolExecutor(N_THREADS) as pool:
        for _ in pool.map(fn, chunks):
            pass


def each_chunk(fn, chunks, n_records: int) -> None:
    """``fn(chunk)`` for every chunk, on all cores for big data (chunks must write disjoint
    parts of any shared output)."""
    _each(fn, chunks, n_records >= THREADED_RECORDS and N_THREADS > 1)


def on_cores(fn, chunks, *, min_chunks: int = 8, one_blas_thread: bool = False) -> None:
    """``fn(chunk)`` for every chunk: on a pool of threads when there are at least
    ``min_chunks`` chunks (below, starting threads costs more than they save, measured on 2
    busy cores) and more than one core, and only from the main thread (a pass that
    already runs in a worker thread, e.g. a Dask task, leaves the cores to its pool).
    ``one_blas_thread``: BLAS pinned to one thread meanwhile (skinny products: faster on
    one thread, and each core already runs a chunk)."""
    chunks = list(chunks)
    main = threading.current_thread() is threading.main_thread()
    with single_threaded_blas() if one_blas_thread and main else nullcontext():
        _each(fn, chunks, N_THREADS > 1 and len(chunks) >= min_chunks and main)


def on_cores_per_thread(new, fn, chunks, **kwargs) -> list:
    """:func:`on_cores` of ``fn(acc, chunk)`` with one accumulator ``new()`` per thread, made
    on its first chunk; returns the accumulators (to be added: which thread took which chunk
    varies, so only a total that does not depend on the order is the same every time)."""
    parts = {}

    def run(chunk):
        acc = parts.get(threading.get_ident())
        if acc is None:
            acc = parts[threading.get_ident()] = new()
        fn(acc, chunk)

    on_cores(run, chunks, **kwargs)
    return list(parts.values())
