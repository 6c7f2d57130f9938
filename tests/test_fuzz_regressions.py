"""One regression test per reproducer that an outside fuzz of the API found."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from privclust import (
    DPM,
    EMMC,
    DPGaussianMixture,
    DPLloyd,
    HSTKMeans,
    KMeansGuarantee,
    SubClustering,
)

PRIVATE_BOUNDS_ESTIMATORS = [
    lambda rs: DPLloyd(3, bounds="private", random_state=rs),
    lambda rs: DPGaussianMixture(3, bounds="private", random_state=rs),
    lambda rs: DPM(bounds="private", random_state=rs),
    lambda rs: SubClustering(3, bounds="private", random_state=rs),
    lambda rs: HSTKMeans(3, bounds="private", random_state=rs),
    lambda rs: EMMC(3, bounds="private", random_state=rs),
    lambda rs: KMeansGuarantee(3, bounds="private", random_state=rs),
]


@pytest.mark.parametrize("make", PRIVATE_BOUNDS_ESTIMATORS)
def test_a_negative_seed_with_private_bounds_gets_the_fits_own_message(make):
    """Once numpy's "expected non-negative integer" from the bounds' own stream."""
    X = np.random.default_rng(0).normal(size=(500, 2))
    with pytest.raises(ValueError, match="random_state must be a non-negative int, got -1"):
        make(-1).fit(X)


def test_the_quantile_of_values_at_its_floor_warns_nothing():
    """Once "invalid value encountered in log": float32 values clipped to the floor rounded
    just below it and made an interval of negative width."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = DPM(1000.0, bounds=(-1, 1), resolution=None, random_state=0).fit(
            np.zeros((1000, 1)))
    assert model.n_clusters_ >= 1


@pytest.mark.parametrize(("key", "value"), [("n_iter", "inf"), ("cluster_sizes", "big")])
def test_a_tampered_integer_field_is_a_model_format_error(key, value, tmp_path):
    """Once OverflowError (and a traceback from ``privclust predict``)."""
    import json

    from privclust import io
    from privclust.io import ModelFormatError

    X = np.random.default_rng(0).uniform(-3, 3, size=(500, 2))
    d = io.model_to_dict(DPLloyd(3, bounds=(-3, 3), random_state=0).fit(X))
    d["model"][key] = (float("inf") if value == "inf"
                       else [10**30] * len(d["model"]["cluster_sizes"]))
    with pytest.raises(ModelFormatError, match="Infinity or a value too large"):
        io.model_from_dict(json.loads(json.dumps(d)))


@pytest.fixture(scope="module")
def morse_file():
    import json

    from privclust import MorseMerging, io

    X = np.random.default_rng(0).uniform(-1, 1, size=(2000, 2))
    model = MorseMerging(DPGaussianMixture(6, bounds=(-1, 1), n_iter=3), 2, epsilon=1.0,
                         random_state=0).fit(X)
    return json.loads(json.dumps(io.model_to_dict(model)))


@pytest.mark.parametrize(("key", "tamper", "match"), [
    ("component_labels", lambda v: [7] * len(v), "component_labels must lie in"),
    ("means", lambda v: [[-1e300, 0.0], *v[1:]], "means lie outside the model's bounds"),
    ("n_clusters", lambda v: 0, "n_clusters must be >= 1"),
])
def test_a_tampered_morse_file_is_refused(morse_file, key, tamper, match):
    """Once loaded: predict then returned label 7 of 3, or used a mean of -1e300."""
    import copy

    from privclust import io
    from privclust.io import ModelFormatError

    d = copy.deepcopy(morse_file)
    io.model_from_dict(copy.deepcopy(d))  # the untouched file loads
    d["model"][key] = tamper(d["model"][key])
    with pytest.raises(ModelFormatError, match=match):
        io.model_from_dict(d)


@pytest.mark.parametrize(("field", "value", "match"), [
    ("mechanism", [[1.0]], "mechanism must be text"),
    ("n_released", -3, "n_released=-3"),
    ("sensitivity", "big", "sensitivity="),
    ("private", "yes", "private="),
])
def test_a_wrongly_typed_report_field_is_refused(field, value, match):
    """Once loaded: ``mechanism = [[1.0]]`` then made ``str(report)`` raise."""
    import json

    from privclust import io
    from privclust.io import ModelFormatError

    X = np.random.default_rng(0).uniform(-3, 3, size=(500, 2))
    d = json.loads(json.dumps(io.model_to_dict(DPLloyd(3, bounds=(-3, 3),
                                                       random_state=0).fit(X))))
    d["privacy_report"]["releases"][0][field] = value
    with pytest.raises(ModelFormatError, match=match):
        io.model_from_dict(d)


@pytest.mark.parametrize("make", [lambda: DPLloyd(2, bounds=(-10, 10), random_state=0),
                                  lambda: DPGaussianMixture(2, bounds=(-10, 10), random_state=0)])
def test_values_near_the_float_limit_are_labelled_as_the_fit_saw_them(make):
    """Once "overflow encountered in matmul / multiply", and a label for (-1e308, 1e308) that
    was not the label of its clipped point (-10, 10)."""
    X = np.array([[1e308, 0.0], [-1e308, 1.0], [0.5, 0.5]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*clipped to them")
        model = make().fit(X)
        far = model.predict(np.array([[-1e308, 1e308], [1e308, 0.0]]))
    assert far.tolist() == model.predict(np.array([[-10.0, 10.0], [10.0, 0.0]])).tolist()
    assert model.labels_[0] == far[1]


def test_the_smallest_epsilon_with_private_bounds_is_explained_in_the_users_terms():
    """Once "epsilon=1e-07 is outside the range": a share the user never passed."""
    X = np.random.default_rng(0).normal(size=(500, 2))
    with pytest.raises(ValueError, match=r"bounds='private' spends 0.1 of epsilon") as err:
        DPM(epsilon=1e-6, bounds="private").fit(X)
    assert "1e-07" not in str(err.value) and "epsilon >= 1e-05" in str(err.value)


def test_a_pandas_series_gets_a_sentence_not_a_traceback():
    """Once "'numpy.dtypes.Float64DType' object is not iterable"."""
    pd = pytest.importorskip("pandas")
    for series in (pd.Series([1.0, 2.0]), pd.Series([1, 2], dtype="Float64")):
        with pytest.raises(ValueError, match=r"pandas Series .* X.to_frame\(\)"):
            DPLloyd(2, bounds=(0, 3), random_state=0).fit(series)


def test_object_arrays_of_numbers_are_converted_as_scikit_learn_does():
    X = np.array([[1, 2.5], [3, 4], [0.5, 1]] * 20, dtype=object)
    model = DPLloyd(2, bounds=(0, 5), random_state=0).fit(X)
    assert model.predict(X).shape == (60,)
    with pytest.raises(ValueError, match="must be numeric"):
        DPLloyd(2, bounds=(0, 5)).fit(np.array([[1, "a"]], dtype=object))



def test_dbscan_merges_few_core_cells_of_a_large_dense_grid_fast():
    """Once 31 s: every one of the 1,830 offsets beyond the 3^5 block shifted the whole grid of
    1.9M cells to join 243 core cells; the merge now reads one label per core cell and offset."""
    import time

    from privclust import DPDBSCAN

    X = np.random.default_rng(0).integers(0, 41, (2000, 5)).astype(float)
    start = time.perf_counter()
    model = DPDBSCAN(6.67, eps=51.5, min_samples=5, bounds=(-1, 401), random_state=0).fit(X)
    assert model.histogram_ == "dense" and model.n_cells_ == 18**5
    assert time.perf_counter() - start < 10  # 25-31 s before, about 1 s now
    assert model.n_clusters_ == 1 and (model.labels_ == 0).all()


@pytest.mark.parametrize("seed", range(4))
def test_the_dense_merge_finds_the_sparse_merges_components(seed):
    """The two merges of DPDBSCAN's core cells (dense grid, sorted keys) agree, cluster for
    cluster, with offsets beyond the 3^d block (eta < 4 in 2-D and 3-D)."""
    from privclust.cluster._grid import (
        _c_strides,
        _dense_merge,
        _dot_int,
        _renumber,
        _sparse_merge,
        neighbour_offsets,
    )

    rng = np.random.default_rng(seed)
    d = 2 + seed % 2
    offsets = neighbour_offsets(d, eta=2.0)
    pad = int(np.abs(offsets).max())
    core = rng.random((40,) * d if d == 2 else (20,) * d) < (0.02 if d == 2 else 0.003)
    keys, comp = _dense_merge(core, offsets, pad)
    pstrides = _c_strides(np.asarray(core.shape, dtype=np.int64) + 2 * pad)
    pkeys = _dot_int(np.argwhere(core) + pad, pstrides)
    np.testing.assert_array_equal(keys, np.flatnonzero(core))
    np.testing.assert_array_equal(_renumber(comp)[0], _renumber(_sparse_merge(pkeys, offsets,
                                                                              pstrides))[0])
    assert _renumber(comp)[1] > 1


def test_a_saved_morse_model_over_dpcube_loads():
    """Once refused by its own loader: DPCube's centre ``mid + half * 1`` rounded one ulp past
    the upper bound, and Morse kept it as a mean ("means lie outside the model's bounds")."""
    from privclust import DPCube, MorseMerging, io

    rng = np.random.default_rng(1)
    lo = rng.uniform(-10, 0, 3)
    hi = lo + rng.uniform(0.1, 10, 3)
    X = rng.uniform(lo, hi, (1, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        model = MorseMerging(DPCube(8, bounds=np.c_[lo, hi]), 1, epsilon=1.0,
                             random_state=1).fit(X)
        assert (model.means_ >= model.bounds_[:, 0]).all()
        assert (model.means_ <= model.bounds_[:, 1]).all()
        back = io.model_from_dict(io.model_to_dict(model))
    np.testing.assert_array_equal(back.predict(X), model.predict(X))


@pytest.fixture(scope="module")
def pipeline_cube_file():
    """A DPCube fitted as a pipeline step: its ``bounds`` parameter stays None (the scaler
    before it gives the bounds), so only the model section can say where its centres lie."""
    import json

    from privclust import DPCube, io
    from privclust.pipeline import make_private_pipeline
    from privclust.preprocessing import PrivateScaler

    X = np.random.default_rng(0).uniform(-3, 3, (5000, 2))
    pipe = make_private_pipeline(PrivateScaler(0.5, bounds=(-3, 3)), DPCube(3, epsilon=1.0),
                                 random_state=0).fit(X)
    return json.loads(json.dumps(io.model_to_dict(pipe[-1]))), pipe[-1]


def test_a_pipeline_step_round_trips_with_its_bounds(pipeline_cube_file):
    """Once loaded without bounds: far points were not clipped as the fit clipped them."""
    import copy

    from privclust import io

    d, step = pipeline_cube_file
    assert d["params"]["bounds"] is None
    back = io.model_from_dict(copy.deepcopy(d))
    np.testing.assert_array_equal(back.bounds_, step.bounds_)
    far = np.array([[1e308, -1e308], [-1e308, 1e308]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        np.testing.assert_array_equal(back.predict(far), step.predict(far))


@pytest.mark.parametrize(("key", "tamper", "match"), [
    ("cluster_centers", lambda v: [[1e308, 3.9e300], *v[1:]],
     "cluster_centers lie outside the model's bounds"),
    ("bounds", lambda v: [[-1e30, 1e30]] * len(v), "bounds in the model section differ"),
])
def test_edited_centres_of_a_pipeline_step_are_refused(pipeline_cube_file, key, tamper, match):
    """Once loaded (no bounds in the file to check against), then overflowed in predict."""
    import copy

    from privclust import io
    from privclust.io import ModelFormatError

    d = copy.deepcopy(pipeline_cube_file[0])
    d["model"][key] = tamper(d["model"][key])
    if key == "bounds":  # a file that also states bounds among its parameters
        d["params"]["bounds"] = [list(b) for b in pipeline_cube_file[1].bounds_]
    with pytest.raises(ModelFormatError, match=match):
        io.model_from_dict(d)


def test_edited_dbscan_grids_and_huge_covariances_are_refused_quietly():
    """Once loaded: an origin or a cell width of 1e308 overflowed in predict; a covariance of
    1e308 warned "overflow encountered in add" on its way to the refusal."""
    import copy
    import json

    from privclust import DPDBSCAN, MorseMerging, io
    from privclust.io import ModelFormatError

    X = np.random.default_rng(0).normal(0, 1, (3000, 2))
    spans = DPDBSCAN(1.0, eps=0.5, min_samples=10, bounds=(-3, 3), random_state=0).fit(X)
    morse = MorseMerging(DPGaussianMixture(4, bounds=(-3, 3), n_iter=2), 2,
                         random_state=0).fit(X)
    files = [json.loads(json.dumps(io.model_to_dict(m))) for m in (spans, morse)]
    edits = [(files[0], ("grid", "origin"), [1e308, 0.0]), (files[0], ("grid", "cell_width"),
                                                             1e308),
             (files[1], ("covariances",), [[[1.0, 1e308], [1e308, 1.0]]] * 4)]
    for d, path, value in edits:
        d = copy.deepcopy(d)
        section = d["model"]
        for key in path[:-1]:
            section = section[key]
        section[path[-1]] = value
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            with pytest.raises(ModelFormatError, match="the file was edited|covariances"):
                io.model_from_dict(d)


def test_noisy_centroids_stay_inside_off_centre_bounds():
    """``mid + half * 1`` rounds one ulp past ``hi`` on these bounds; a centre at the edge of
    the box (the noisy mean clipped to 1) must still lie inside it, so its file loads."""
    from privclust.cluster._centres import noisy_centroids
    from privclust.privacy import Mechanisms, PrivacyReport, resolve_random_state

    lo, hi = -6.4173194493136565, -3.251433784857987
    assert (lo + hi) / 2 + (hi - lo) / 2 > hi  # the rounding this test is about
    bounds = np.array([[lo, hi]])
    source = resolve_random_state(0)
    mech = Mechanisms(source, PrivacyReport(estimator="t", planned=None,
                                            random_source=source.description))
    n = 10**6  # sums past the box, as noise makes them: the noisy mean is clipped to 1
    sums = np.array([[2 * n * (hi - lo) / 2]])
    centres, _, _ = noisy_centroids(mech, [n], sums, np.array([[lo]]), bounds, 100.0,
                                    label="edge")
    assert centres[0, 0] <= hi
