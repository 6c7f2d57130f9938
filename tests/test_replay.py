"""Every fit decides from released values only: record on D, replay on each neighbour D'.

See ``tests/_replay.py`` for what is checked. Run for every registry entry, MorseMerging over
every base, ``bounds="private"``, DPM's ``resolution="auto"`` on a rounded feature, the Dask
engine (also with ``bounds="private"``) and near ties (records on the bisector of two centres, a
record added after them, for every nearest-centre and projection path); the negative controls
plant each fault the harness exists to catch. Data far from zero (timestamps, 200,000 records
and more) is its own class, with its own planted fault: ``tests/test_replay_far_from_zero.py``;
the workflow layer (pipelines, selection, Morse, and refusals that must stay charged) is
``tests/test_workflow_replay.py``.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from _replay import ReplayMismatch, check_near_ties, check_neighbour, neighbours, replaced
from privclust import (
    DPDBSCAN,
    DPM,
    CoresetKMeans,
    DPCube,
    DPLloyd,
    LSHSplits,
    MorseMerging,
    registry,
)
from privclust.privacy.mechanisms import Mechanisms

BOUNDS = (-3.0, 3.0)
SEED = 5
ENTRIES = registry.ENTRIES


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(600, 2, centers=[[-1.5, -1.5], [1.5, 1.5], [-1.5, 1.5], [1.5, -1.5]],
                      cluster_std=0.3, random_state=1)
    return np.clip(X, *BOUNDS)


def _neighbours(X, rounded_feature=None):
    return neighbours(X, np.tile(BOUNDS, (X.shape[1], 1)), rounded_feature)


def _entry_model(name, **overrides):
    """The entry's example estimator, small enough to fit many times."""
    entry = ENTRIES[name]
    values = {dest: entry.example.get(dest) for dest in registry.OPTIONS}
    if name != "morse":
        params = dict(epsilon=1.0, delta=None, bounds=BOUNDS, random_state=SEED) | overrides
        return lambda: entry.build(values, **params)
    return _morse_over(ENTRIES[values["base"]], values["n_components"], values["n_clusters"])


def _morse_over(base_entry, size, n_clusters, **base_params):
    values = {dest: base_entry.example.get(dest) for dest in registry.OPTIONS}

    def make():
        base = base_entry.build(values | {"n_clusters": None, "n_components": None},
                                epsilon=1.0, bounds=BOUNDS, **base_params)
        if base_entry.morse_base.size_param:
            base.set_params(**{base_entry.morse_base.size_param: size})
        return MorseMerging(base, n_clusters, epsilon=1.0, random_state=SEED)

    return make


def _check_all(make, X, rounded_feature=None):
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # clipping warnings: the data holder's diagnostics
        for label, Xn in _neighbours(X, rounded_feature).items():
            try:
                checked += check_neighbour(make, X, Xn)
            except ReplayMismatch as exc:
                raise ReplayMismatch(f"{label}: {exc}") from None
    assert checked > 0


@pytest.mark.parametrize("name", list(ENTRIES))
def test_every_registered_estimator_decides_from_releases_only(name, blobs):
    _check_all(_entry_model(name), blobs)


@pytest.mark.parametrize("base", [n for n, e in ENTRIES.items() if e.morse_base is not None])
def test_morse_merging_over_every_base_decides_from_releases_only(base, blobs):
    _check_all(_morse_over(ENTRIES[base], 6, 2), blobs)


@pytest.mark.parametrize("name", ["dpm", "lloyd", "mixture", "lsh-splits", "dpcube"])
def test_private_bounds_decide_from_releases_only(name):
    X, _ = make_blobs(3000, 2, centers=3, cluster_std=0.5, random_state=2)
    _check_all(_entry_model(name, bounds="private"), X)


def test_dpm_resolution_auto_on_a_rounded_feature_decides_from_releases_only(blobs):
    X = blobs.copy()
    X[:, 0] = np.round(X[:, 0], 1)  # a feature recorded to 0.1: ties, a found step
    _check_all(lambda: DPM(epsilon=1.0, bounds=BOUNDS, max_depth=4, random_state=SEED), X,
               rounded_feature=0)


@pytest.mark.parametrize("make", [
    lambda: DPDBSCAN(1.0, eps=0.3, min_samples=10, histogram="sparse", bounds=BOUNDS,
                     random_state=SEED),
    lambda: DPM(epsilon=1.0, bounds=BOUNDS, max_depth=4, adaptive_intervals=True,
                random_state=SEED),
    lambda: LSHSplits(4, epsilon=1.0, delta=0.0, max_depth=8, bounds=BOUNDS,
                      random_state=SEED),
], ids=["dbscan-sparse", "dpm-adaptive", "lsh-splits-pure"])
def test_other_modes_decide_from_releases_only(make, blobs):
    _check_all(make, blobs)


# ---------------------------------------------------------------------- negative controls
def _lloyd():
    return DPLloyd(3, epsilon=1.0, n_iter=3, bounds=BOUNDS, random_state=SEED)


def test_the_harness_catches_a_branch_on_the_exact_record_count(blobs, monkeypatch):
    original = DPLloyd.fit

    def planted(self, X, y=None):
        if np.asarray(X).shape[0] % 2:  # the planted fault: one iteration fewer on odd n
            self.set_params(n_iter=self.n_iter - 1)
        return original(self, X, y)

    monkeypatch.setattr(DPLloyd, "fit", planted)
    assert blobs.shape[0] % 2 == 0
    with pytest.raises(ReplayMismatch, match="requested|stopped after"):
        check_neighbour(_lloyd, blobs, np.vstack([blobs, blobs[:1]]))


def _planting(name, change):
    """A plant: ``Mechanisms.<name>`` called with arguments changed by ``change``, as the fit
    would pass them (installed inside the harness's hooks, so the harness sees them)."""
    @contextmanager
    def plant():
        hooked = getattr(Mechanisms, name)

        def planted(self, *args, **kwargs):
            args, kwargs = change(args, kwargs)
            return hooked(self, *args, **kwargs)

        setattr(Mechanisms, name, planted)
        try:
            yield
        finally:
            setattr(Mechanisms, name, hooked)

    return plant


def test_the_harness_catches_a_sensitivity_declared_at_half(blobs):
    def halve(args, kwargs):  # laplace(values, l1_sensitivity, epsilon, ...)
        return (args[0], args[1] / 2, *args[2:]), kwargs

    corner = np.vstack([blobs, np.full(2, BOUNDS[1])])
    with pytest.raises(ReplayMismatch, match="more than its declared sensitivity"):
        check_neighbour(_lloyd, blobs, corner, plant=_planting("laplace", halve))


def test_the_harness_catches_an_unrecorded_release(blobs, monkeypatch):
    original = DPLloyd.fit

    def planted(self, X, y=None):
        model = original(self, X, y)
        noise = np.random.default_rng(0).laplace(size=model.cluster_centers_.shape)
        model.cluster_centers_ = model.cluster_centers_ + 1e-3 * (np.mean(X, axis=0) + noise)
        return model

    monkeypatch.setattr(DPLloyd, "fit", planted)
    with pytest.raises(ReplayMismatch, match="model files differ"):
        check_neighbour(_lloyd, blobs, blobs[:-1])


def test_the_harness_catches_a_data_derived_note(blobs):
    """A public argument that carries an exact number (here a note) is a leak too."""
    def noted(args, kwargs):  # count(counts, epsilon, ...)
        return args, kwargs | {"note": f"{int(np.sum(args[0]))} records"}

    with pytest.raises(ReplayMismatch, match="note="):
        check_neighbour(_lloyd, blobs, blobs[:-1], plant=_planting("count", noted))


# ---------------------------------------------------------------------- the Dask engine


@pytest.mark.parametrize("name", ["dpm", "dbscan", "lloyd", "mixture", "lsh-splits"])
def test_the_dask_engine_decides_from_releases_only(name, blobs, dask_client):
    import dask.array as da

    make = _entry_model(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label, Xn in list(_neighbours(blobs).items())[:3]:
            try:
                check_neighbour(make, da.from_array(blobs, chunks=250),
                                da.from_array(Xn, chunks=250))
            except ReplayMismatch as exc:
                raise ReplayMismatch(f"{label}: {exc}") from None


@pytest.mark.parametrize("name", ["dpm", "lloyd"])
def test_private_bounds_on_the_dask_engine_decide_from_releases_only(name, dask_client):
    import dask.array as da

    X, _ = make_blobs(3000, 2, centers=3, cluster_std=0.5, random_state=2)
    make = _entry_model(name, bounds="private")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label, Xn in list(_neighbours(X).items())[:2]:
            try:
                check_neighbour(make, da.from_array(X, chunks=997),
                                da.from_array(Xn, chunks=997))
            except ReplayMismatch as exc:
                raise ReplayMismatch(f"{label}: {exc}") from None


# ---------------------------------------------------------------------- near ties
def _wide_blobs():
    """Wide data (60 features): CoresetKMeans and DPCube project it."""
    X, _ = make_blobs(1000, 60, centers=3, cluster_std=0.4, center_box=(-2.0, 2.0),
                      random_state=3)
    return np.clip(X, *BOUNDS)


_TIE_FITS = {
    "coreset-k": lambda: CoresetKMeans(4, epsilon=1.0, bounds=BOUNDS, random_state=SEED),
    # epsilon 8: k chosen above 1 on the wide data (a tie needs two centres)
    "coreset": lambda: CoresetKMeans(epsilon=8.0, bounds=BOUNDS, random_state=SEED),
    "lloyd": lambda: DPLloyd(4, epsilon=1.0, n_iter=3, bounds=BOUNDS, random_state=SEED),
    "dpcube": lambda: DPCube(4, epsilon=1.0, bounds=BOUNDS, random_state=SEED),
    "kmeans-guarantee": _entry_model("kmeans-guarantee"),
}


@pytest.mark.parametrize("wide", [False, True], ids=["2-features", "60-features"])
@pytest.mark.parametrize("name", list(_TIE_FITS))
def test_near_ties_move_no_label_and_no_release(name, wide, blobs):
    """Records on the bisector of two centres of every assignment pass, odd and even row
    counts, one record added after them: no shared record's label or projection changes,
    every release moves by at most its sensitivity (class (b) of the harness)."""
    if wide and name == "kmeans-guarantee":
        pytest.skip("2 features cover it (no projection)")
    X = _wide_blobs() if wide else blobs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        checked = check_near_ties(_TIE_FITS[name], X, np.tile(BOUNDS, (X.shape[1], 1)))
    assert checked > 0


def _block_shaped_nearest_centres(X, centres, *, return_sq_distance=False, chunk_rows=None,
                                  offset=None):
    """The planted fault: labels from one product over blocks whose last one has n's shape."""
    C = np.asarray(centres, dtype=float)
    shift = C.mean(axis=0)
    Cs = C - shift
    c_sq = np.einsum("ij,ij->i", Cs, Cs) - (0.0 if offset is None else np.asarray(offset))
    rows = max(1, (1 << 16) // C.shape[0])
    idx = np.empty(X.shape[0], dtype=np.int64)
    dist = np.empty(X.shape[0])
    for start in range(0, X.shape[0], rows):
        Xs = np.asarray(X[start:start + rows], dtype=float) - shift
        j = np.argmin(c_sq - 2.0 * Xs @ Cs.T, axis=1)
        idx[start:start + j.size] = j
        diff = Xs - Cs[j]
        dist[start:start + j.size] = np.einsum("ij,ij->i", diff, diff)
    return (idx, dist) if return_sq_distance else idx


def _whole_product_projection(self, X, clipped=False):
    """The planted fault: one product over all of X."""
    Xc = X if clipped else np.clip(X, self.bounds[:, 0], self.bounds[:, 1])
    return np.clip((Xc - self.mid) @ self.G.T, self.box[:, 0], self.box[:, 1])


def test_the_harness_catches_labels_read_off_a_block_shaped_product(blobs):
    import privclust._geometry as geometry

    def plant():
        return replaced(geometry, "nearest_centres", _block_shaped_nearest_centres)

    with warnings.catch_warnings(), pytest.raises(ReplayMismatch, match="near ties"):
        warnings.simplefilter("ignore")
        check_near_ties(_TIE_FITS["lloyd"], blobs, np.tile(BOUNDS, (2, 1)), plant=plant)


@pytest.mark.parametrize("name", ["dpcube", "coreset"])
def test_the_harness_catches_a_projection_read_off_one_product(name):
    from privclust.cluster._coreset.tree import Space
    from privclust.cluster.dpcube import _Space

    owner = _Space if name == "dpcube" else Space

    def plant():
        return replaced(owner, "project", _whole_product_projection)

    X = _wide_blobs()
    with warnings.catch_warnings(), pytest.raises(ReplayMismatch, match="projection"):
        warnings.simplefilter("ignore")
        check_near_ties(_TIE_FITS[name], X, np.tile(BOUNDS, (X.shape[1], 1)), plant=plant)


class _OnDask:
    """Fits the model on a Dask array of the data, in chunks of 97 records (odd)."""

    def __init__(self, model):
        self.model = model

    def fit(self, X, y=None):
        import dask.array as da

        return self.model.fit(da.from_array(X, chunks=(97, X.shape[1])))


def test_near_ties_on_the_dask_engine_move_no_label_and_no_release(blobs, dask_client):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        checked = check_near_ties(lambda: _OnDask(_TIE_FITS["lloyd"]()), blobs,
                                  np.tile(BOUNDS, (2, 1)))
    assert checked > 0
