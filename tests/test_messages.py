"""Messages a user can trigger, in the user's terms: a fuzz over tampered model files of every
model type and over the command line on malformed files (fixed seeds, CI-sized), and one
regression test per message that once passed Python's, NumPy's or SciPy's words through.

The rule every message is held to: the documented error type (``ModelFormatError``,
``ValueError``, ``FileNotFoundError``, exit status 2 with one ``privclust: error:`` line), under
300 characters, no echo of a huge value, and none of the internal words of :data:`INTERNAL`.
"""

from __future__ import annotations

import copy
import json
import os
import re
import warnings

import numpy as np
import pytest

from privclust import (
    DPDBSCAN,
    DPM,
    Accountant,
    Budget,
    DPGaussianMixture,
    DPLloyd,
    MorseMerging,
    io,
)
from privclust.cluster.dbscan import _kappa_at_most
from privclust.io import ModelFormatError
from privclust.registry import ENTRIES, OPTIONS

#: words of Python, NumPy and SciPy that must never reach a user
INTERNAL = re.compile(
    r"Error:|__\w+__|\bnp\.|ndarray|Traceback|setting an array element|positional argument|"
    r"non-singleton|NoneType|object is not|has no attribute|unsupported operand|could not "
    r"convert|invalid literal|inhomogeneous|dtype|float64|int64|zcdp_rho_for|expected \(-1|"
    r"unhashable|subscriptable|out of bounds for axis|recursion"
)
SEED = 20240611
BOUNDS = (-3.0, 3.0)


def assert_user_message(msg: str, *, extra: int = 0) -> None:
    """Under 300 characters (plus ``extra``: a path the user gave), no internal words, no
    echo of a long number or word."""
    assert len(msg) < 300 + extra, (len(msg), msg[:400])
    assert not INTERNAL.search(msg), msg
    assert not re.search(r"\d{40}", msg), msg


# --------------------------------------------------------------------------- fitted models
def _data(d=2, n=600):
    rng = np.random.default_rng(SEED)
    return np.clip(np.concatenate([rng.normal(c, 0.4, (n // 2, d)) for c in (-1.5, 1.5)]),
                   *BOUNDS)


def _estimator(name):
    entry = ENTRIES[name]
    values = {dest: entry.example.get(dest) for dest in OPTIONS}
    if name == "morse":
        base = ENTRIES[values["base"]].build(values, epsilon=2.0, delta=None, bounds=BOUNDS)
        return MorseMerging(base, values["n_clusters"], epsilon=2.0, random_state=0)
    return entry.build(values, epsilon=2.0, delta=None, bounds=BOUNDS, random_state=0)


def _models():
    models = {name: _estimator(name) for name in ENTRIES}
    models["morse over dpm"] = MorseMerging(DPM(bounds=BOUNDS, max_depth=3), 2, epsilon=2.0,
                                            random_state=0)
    models["private bounds"] = DPLloyd(3, epsilon=4.0, bounds="private", random_state=0)
    return models


@pytest.fixture(scope="module")
def saved():
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, est in _models().items():  # private bounds need a few thousand records
            X = _data(n=4000 if name == "private bounds" else 600)
            out[name] = json.loads(json.dumps(io.model_to_dict(est.fit(X))))
    return out


#: what a tampered field gets: wrong types, Infinity, huge numbers, out-of-range indices,
#: values far outside the bounds, ragged lists, a huge text
TAMPERS = [None, "x", True, [], {}, [[1.0]], float("inf"), float("nan"), 10**300, -1, 10**9,
           2.5, 1e300, -1e300, [1e300, -1e300], [[1, 2], [3]], ["a", 1], "y" * 600_000,
           [10**300] * 3]
#: tampered values per field (``PRIVCLUST_FUZZ_TAMPERS=19`` tries every one: the long run)
TAMPERS_PER_FIELD = min(int(os.environ.get("PRIVCLUST_FUZZ_TAMPERS", "3")), len(TAMPERS))


def _paths(obj, prefix=(), depth=0):
    """Every field of a model file: keys of objects, and the first two entries of lists."""
    if depth > 3:
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k), depth + 1)
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:2]):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i), depth + 1)


def _set(d, path, value):
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value


def _load_and_use(d):
    """Load a (tampered) dict; a model that loads must also predict."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = io.model_from_dict(d)
        model.predict(_data()[:25])


def test_tampered_model_files_of_every_type_end_in_a_clear_error(saved):
    """Each field of each model type gets a few tampered values (a fixed-seed choice): the
    load ends in a loaded model that predicts, or in a ModelFormatError in the user's terms."""
    rng = np.random.default_rng(SEED)
    outcomes = {"loaded": 0, "refused": 0}
    for original in saved.values():
        _load_and_use(copy.deepcopy(original))  # the untouched file loads
        for path in _paths(original):
            if path[0] in ("format", "version", "privclust_version") and len(path) > 1:
                continue
            for i in rng.choice(len(TAMPERS), size=TAMPERS_PER_FIELD, replace=False):
                d = copy.deepcopy(original)
                _set(d, path, copy.deepcopy(TAMPERS[i]))
                try:
                    _load_and_use(d)
                except ModelFormatError as exc:
                    assert_user_message(str(exc))
                    outcomes["refused"] += 1
                else:
                    outcomes["loaded"] += 1
    assert outcomes["refused"] > 1000 and outcomes["loaded"] > 50, outcomes
    if "PRIVCLUST_FUZZ_TAMPERS" in os.environ:  # long runs: how the files ended
        print(f"tampered model files: {outcomes}")


@pytest.mark.parametrize("name", ["mixture", "morse", "dbscan", "dpm", "lloyd"])
def test_every_model_field_removed_is_named(saved, name):
    for key in saved[name]["model"]:
        d = copy.deepcopy(saved[name])
        del d["model"][key]
        try:
            _load_and_use(d)
        except ModelFormatError as exc:
            assert_user_message(str(exc))
            assert key in str(exc)


def test_a_ragged_list_names_its_field_and_shape(saved):
    """Once "setting an array element with a sequence. The requested array has an
    inhomogeneous shape..."."""
    d = copy.deepcopy(saved["lloyd"])
    d["model"]["cluster_centers"] = [[1, 2], [3]]
    with pytest.raises(ModelFormatError, match=r'"cluster_centers" must be .* \(k, 2\)'):
        io.model_from_dict(d)


def test_expected_shapes_are_written_in_words(saved):
    """Once "sevs has the wrong shape (expected (-1, 2))"."""
    d = copy.deepcopy(saved["morse"])
    d["model"]["sevs"] = [[0.0, 0.0, 0.0]]
    with pytest.raises(ModelFormatError, match=r"\(any number of rows, 2\)") as err:
        io.model_from_dict(d)
    assert "-1" not in str(err.value)


def test_a_release_without_a_required_field_says_which(saved):
    """Once "Release.__init__() missing 1 required positional argument: 'target'"."""
    d = copy.deepcopy(saved["lloyd"])
    del d["privacy_report"]["releases"][0]["target"]
    with pytest.raises(ModelFormatError, match='release 0 has no "target" field'):
        io.model_from_dict(d)


def test_an_invalid_linkage_is_refused_in_words(saved):
    """Once SciPy's "Linkage 'Z' uses non-singleton cluster before it is formed" (or a
    RecursionError for a fractional index)."""
    for bad in ([[5.0, 0.0, 0.1, 2.0]], [[0.0, 1.0, 0.1, 2.0], [0.0, 2.0, 0.2, 3.0]]):
        d = copy.deepcopy(saved["morse"])
        rows = len(d["model"]["linkage"])
        d["model"]["linkage"] = (bad * rows)[:rows] if rows else bad
        with pytest.raises(ModelFormatError, match='"linkage" must be a merge table'):
            io.model_from_dict(d)
    d = copy.deepcopy(saved["morse"])
    if d["model"]["linkage"]:
        d["model"]["linkage"][0][0] = 0.5
        with pytest.raises(ModelFormatError, match='"linkage"'):
            io.model_from_dict(d)


@pytest.mark.parametrize("where", [("format",), ("version",), ("estimator",),
                                   ("params", "n_clusters"), ("model", "n_iter")])
def test_huge_values_are_not_echoed_in_full(saved, where):
    """Once a 300-digit number (and a 600,130-character message) echoed back in full."""
    for value in (10**300, "z" * 600_000):
        d = copy.deepcopy(saved["lloyd"])
        _set(d, where, value)
        with pytest.raises(ModelFormatError) as err:
            io.model_from_dict(d)
        assert_user_message(str(err.value))


def test_an_unhashable_estimator_name_is_a_format_error(saved):
    """Once TypeError: unhashable type: 'list'."""
    d = copy.deepcopy(saved["dpm"])
    d["estimator"] = []
    with pytest.raises(ModelFormatError, match="cannot load"):
        io.model_from_dict(d)


# --------------------------------------------------------------------------- estimators
@pytest.mark.parametrize("base", [
    lambda: ENTRIES["dpcube"].cls(4, bounds=BOUNDS),
    lambda: DPLloyd(4, bounds=BOUNDS),
    lambda: DPM(bounds=BOUNDS, max_depth=3),
    lambda: DPGaussianMixture(4, bounds=BOUNDS, n_iter=2),
])
def test_morse_with_delta_zero_says_so_before_spending(base):
    """Once "zcdp_rho_for needs epsilon > 0 and delta in (0, 1); got 0.15, 0.0"."""
    acc = Accountant(Budget(5.0, 1e-3))
    with pytest.raises(ValueError, match=r"MorseMerging needs delta > 0") as err:
        MorseMerging(base(), 2, epsilon=1.0, delta=0.0, accountant=acc,
                     random_state=0).fit(_data())
    assert_user_message(str(err.value))
    assert acc.spent.epsilon == 0


@pytest.mark.parametrize("eta", [4.0, 2.0, 1.5, 1.0])
def test_the_neighbour_count_matches_the_offsets(eta):
    from privclust.cluster._grid import neighbour_offsets

    for d in range(1, 5):
        assert _kappa_at_most(d, eta, 10**9) == neighbour_offsets(d, eta).shape[0]


def test_dbscan_refuses_too_many_features_up_front():
    """Once "kappa=1278129 neighbour cells is too many; use a larger eta" (eta is at its
    largest already), after private bounds had spent."""
    acc = Accountant(Budget(5.0, 0.0))
    X = np.random.default_rng(SEED).uniform(-1, 1, (300, 8))
    with pytest.raises(ValueError, match="handles at most 7 features; the data has 8") as err:
        DPDBSCAN(1.0, eps=0.5, bounds="private", accountant=acc, random_state=0).fit(X)
    assert_user_message(str(err.value))
    assert "eta" not in str(err.value) and acc.spent.epsilon == 0
    with pytest.raises(ValueError, match="at most 4 features at eta=1"):
        DPDBSCAN(1.0, eps=0.5, eta=1.0, bounds=BOUNDS).fit(X[:, :5])


def test_dbscan_says_why_it_found_no_cluster():
    """Once: 0 clusters at d = 6 without a word."""
    X = _data(d=6, n=2000)
    with pytest.warns(UserWarning, match=r"found no cluster: a core cell needs at least \d+") as w:
        m = DPDBSCAN(1.0, eps=0.5, min_samples=10, bounds=BOUNDS, random_state=0).fit(X)
    assert m.n_clusters_ == 0
    msg = str(w[0].message)
    assert_user_message(msg)
    assert "min_samples=10" in msg and "eps" in msg and "d=6" in msg


# --------------------------------------------------------------------------- the command line
def _cli(argv, capsys):
    from privclust import cli

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = cli.main([str(a) for a in argv])
    return rc, capsys.readouterr()


def _bad_tables(folder):
    """Malformed data files: (name, text)."""
    rows = "\n".join(f"{a:.3f},{b:.3f}" for a, b in _data(n=40))
    return {
        "text.csv": "x,y\n1,2\n3,abc\n4,5\n",
        "nan.csv": "x,y\n1,2\n3,nan\n",
        "ragged.csv": "1,2\n3\n4,5\n",
        "empty.csv": "",
        "header.csv": "x,y\n",
        "huge.csv": "x,y\n1," + "9" * 400 + "\n2,3\n",
        "long.csv": "x,y\n1," + "q" * 100_000 + "\n2,3\n",
        "longer.csv": "x,y\n1," + "q" * 600_000 + "\n2,3\n",
        "inf.csv": "x,y\n1,inf\n2,3\n",
        "ok.csv": "x,y\n" + rows + "\n",
        "binary.csv": "\x00\x01\x02\n",
    }


def _assert_clean(rc, captured, path_len):
    assert "Traceback" not in captured.err
    assert rc in (0, 2), captured.err[-2000:]
    if rc == 2:
        errors = [ln for ln in captured.err.splitlines() if ln.startswith("privclust: error:")]
        assert len(errors) == 1, captured.err[-2000:]
        assert_user_message(errors[0], extra=path_len + 20)


ENGINES = [[], ["--engine", "dask"]]


@pytest.mark.parametrize("engine", ENGINES, ids=["numpy", "dask"])
def test_malformed_data_files_end_in_one_clear_line(tmp_path, capsys, engine, request):
    if engine:
        pytest.importorskip("dask.dataframe")
        client = request.getfixturevalue("dask_client")
        engine = [*engine, "--scheduler", client.scheduler.address]
    for name, text in _bad_tables(tmp_path).items():
        path = tmp_path / name
        path.write_bytes(text.encode("utf-8"))
        for algo in (["--algorithm", "lloyd", "--n-clusters", "2"],
                     ["--algorithm", "dbscan", "--radius", "0.5", "--min-samples", "-2"]):
            rc, captured = _cli(["cluster", path, "--epsilon", "1", "--bounds", "-3", "3",
                                 "--seed", "0", *algo, *engine], capsys)
            _assert_clean(rc, captured, len(str(path)))


def test_predict_on_tampered_model_files_ends_in_one_clear_line(saved, tmp_path, capsys):
    data = tmp_path / "new.csv"
    data.write_text("x,y\n0.5,0.5\n-1,1\n")
    rng = np.random.default_rng(SEED)
    for name in ("dpm", "dbscan", "morse", "mixture", "lloyd"):
        paths = list(_paths(saved[name]))
        for k in rng.choice(len(paths), size=25, replace=False):
            d = copy.deepcopy(saved[name])
            _set(d, paths[k], copy.deepcopy(TAMPERS[rng.integers(len(TAMPERS))]))
            model = tmp_path / "m.json"
            model.write_text(json.dumps(d))
            rc, captured = _cli(["predict", model, data], capsys)
            _assert_clean(rc, captured, len(str(model)))
