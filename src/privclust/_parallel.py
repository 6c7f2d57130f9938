"""Threads over chunks: NumPy releases the GIL inside its loops, so a pass over big data can
use every core when its chunks write disjoint parts of the output."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

#: Records above which a pass is shared between threads; below, starting threads costs more
#: than it saves.
THREADED_RECORDS = 1 << 20
N_THREADS = max(1, min(4, os.cpu_count() or 1))


def each_chunk(fn, chunks, n_records: int) -> None:
    """``fn(chunk)`` for every chunk, on all cores for big data (chunks must write disjoint
    parts of any shared output)."""
    if n_records < THREADED_RECORDS or N_THREADS == 1:
        for chunk in chunks:
            fn(chunk)
        return
    with ThreadPoolExecutor(N_THREADS) as pool:
        for _ in pool.map(fn, chunks):
            pass
