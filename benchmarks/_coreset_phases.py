"""Where one CoresetKMeans fit spends its time: seconds per phase, timed on the client by
wrapping the fit's steps, and (NumPy engine) the passes over the records each phase makes,
counted as calls of the per-record readers (each reads every record once; on the Dask engine
they run in the workers, so only the phases' seconds are shown there)."""

from __future__ import annotations

import contextlib
import inspect
import time
from collections import defaultdict

#: (phase, [(module, attribute)]) in the order a fit runs them; a call inside a phase
#: already being timed counts for the outer one.
PHASES = [
    ("validation, clip", [("privclust.cluster.coreset.CoresetKMeans", "_check_X"),
                          ("privclust.cluster.coreset.CoresetKMeans", "_make_engine")]),
    ("record count", [("privclust.cluster.coreset.CoresetKMeans", "_record_count")]),
    ("tree counts, one pass", [("privclust.cluster.coreset", "count_levels")]),
    ("data radius (projected)", [("privclust.cluster.coreset.CoresetKMeans", "_data_radius")]),
    ("tree levels", [("privclust.cluster.coreset", "grow")]),
    ("coreset-step labels", [("privclust.cluster.coreset", "nearest_labels")]),
    ("ball sizes and sums", [("privclust.cluster.coreset", "ball_step")]),
    ("k-means on the coreset", [("privclust.cluster.coreset", "fit_centres"),
                                ("privclust.cluster.coreset", "candidate_centres")]),
    ("choice of k: scores", [("privclust.cluster.coreset", "sample_scores")]),
    ("Lloyd labels + quantile", [("privclust.cluster.coreset", "corrected_quantile")]),
    ("final labels, cost", [("privclust.cluster.coreset", "finish_centre_fit")]),
]
#: Readers of every record (NumPy engine): one call is one pass.
READERS = [
    ("privclust.cluster._base", "check_X"),
    ("privclust.engine.local.LocalEngine", "__init__"),
    ("privclust.engine.local.LocalEngine", "count"),
    ("privclust.engine.local.LocalEngine", "split_cells"),
    ("privclust.engine._level_cells", "fine_counts"),
    ("privclust.engine.local.LocalEngine", "exact_centred_sums"),
    ("privclust.cluster._coreset.data", "nearest_centres"),
    ("privclust.cluster._coreset.data", "nearest_anchors"),
    ("privclust.cluster._coreset.data", "nearest_in_tree"),
    ("privclust.cluster._coreset.data", "outside"),
    ("privclust.cluster._coreset.data", "corrected_nearest"),
    ("privclust.cluster._coreset.data", "_distances"),
    ("privclust.cluster._coreset.data", "poisson_sample"),
    ("privclust.cluster._centres", "final_cost_and_labels"),
]


def _owner(path):
    import importlib

    for cls in ("CoresetKMeans", "LocalEngine"):
        if path.endswith("." + cls):
            return getattr(importlib.import_module(path[:-len(cls) - 1]), cls)
    return importlib.import_module(path)


@contextlib.contextmanager
def phases():
    """Patch the fit's steps; yields ``(seconds, passes)`` dicts filled by the fits run inside."""
    seconds, passes = defaultdict(float), defaultdict(int)
    current = []
    saved = []

    def timed(name, fn):
        def wrapper(*a, **k):
            if current:
                return fn(*a, **k)
            current.append(name)
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                seconds[name] += time.perf_counter() - t0
                current.pop()
        return wrapper

    reading = []

    def counted(fn):
        def wrapper(*a, **k):
            if reading:  # a reader inside a reader: the same pass
                return fn(*a, **k)
            passes[current[0] if current else "other"] += 1
            reading.append(1)
            try:
                return fn(*a, **k)
            finally:
                reading.pop()
        return wrapper

    def patch(owner, attr, wrap):
        try:
            fn = inspect.getattr_static(owner, attr)
        except AttributeError:  # an older tree without it
            return
        saved.append((owner, attr, owner.__dict__.get(attr) if isinstance(owner, type)
                      else fn))
        if isinstance(fn, staticmethod):
            setattr(owner, attr, staticmethod(wrap(fn.__func__)))
        else:
            setattr(owner, attr, wrap(fn))

    for name, targets in PHASES:
        for path, attr in targets:
            patch(_owner(path), attr, lambda fn, name=name: timed(name, fn))
    for path, attr in READERS:
        patch(_owner(path), attr, counted)
    try:
        yield seconds, passes
    finally:
        for owner, attr, fn in reversed(saved):
            if fn is None:
                delattr(owner, attr)
            else:
                setattr(owner, attr, fn)


def print_phases(label, total, seconds, passes=None):
    """One table: seconds and (``passes`` given: NumPy engine) passes per phase, the rest of
    the fit as "other"."""
    print(f"  {label}: {total:.2f} s")
    for name, _ in PHASES + [("other", None)]:
        s = total - sum(seconds.values()) if name == "other" else seconds.get(name, 0.0)
        p = 0 if passes is None else passes.get(name, 0)
        if s >= 0.005 or p:
            tail = "" if passes is None else f"  passes {p}"
            print(f"    {name:26s} {s:7.2f} s  {100 * s / total:5.1f}%{tail}")
    if passes is not None:
        print(f"    {'passes in all':26s} {sum(passes.values())}")
