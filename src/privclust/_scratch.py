"""Scratch arrays kept by each thread and reused by every chunk of a pass.

A chunk-sized temporary allocated afresh costs page faults on every chunk, several times the
arithmetic done with it; in a Dask worker process, whose allocator maps every large array
afresh (``distributed`` sets ``MALLOC_TRIM_THRESHOLD_``), on every task as well."""

from __future__ import annotations

import math
import threading

import numpy as np

__all__ = ["as_scratch", "scratch"]

_POOL = threading.local()


def scratch(name: str, shape: tuple, dtype=np.float64) -> np.ndarray:
    """A scratch array of ``shape`` kept by this thread under ``name`` and reused by every chunk
    and query (a chunk-sized temporary allocated afresh costs page faults on every chunk,
    several times the arithmetic done with it). The caller must be done with it before the
    same name is asked for again."""
    size = math.prod(shape)
    key = (name, np.dtype(dtype).str)
    flat = _POOL.__dict__.get(key)
    if flat is None or flat.size < size:
        flat = _POOL.__dict__[key] = np.empty(max(size, 1), dtype)
    return flat[:size].reshape(shape)


def as_scratch(name: str, a, dtype) -> np.ndarray:
    """``a`` converted to ``dtype`` in a scratch array (see :func:`scratch`)."""
    out = scratch(name, np.shape(a), dtype)
    np.copyto(out, a, casting="unsafe")
    return out


