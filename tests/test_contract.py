"""The contract every registered estimator keeps, checked for each entry of the registry.

A new estimator gets these tests by being registered: scikit-learn's clone and get/set_params,
the not-fitted error, spending exactly what it planned, a JSON round trip with equal
predictions, and a command-line round trip (fit with ``privclust cluster``, predict with
``privclust predict``) that agrees with the Python API fitted with the same seed.
"""

from __future__ import annotations

import doctest
import json
import math
import shlex
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_blobs

from privclust import NotFittedError, cli, io, registry

ENTRIES = registry.ENTRIES
NAMES = list(ENTRIES)
BOUNDS = (-3.0, 3.0)
SEED = 3


@pytest.fixture(scope="module")
def data():
    X, _ = make_blobs(3000, 2, centers=[[-1.5, -1.5], [1.5, 1.5], [-1.5, 1.5], [1.5, -1.5]],
                      cluster_std=0.3, random_state=0)
    return np.clip(X, *BOUNDS)


def _values(name: str) -> dict:
    """Every option dest, set from the entry's example (None: not given)."""
    return {dest: ENTRIES[name].example.get(dest) for dest in registry.OPTIONS}


def _python_model(name: str, epsilon=1.0, seed=SEED):
    """The estimator as a Python user would build it from the entry's example."""
    entry, values = ENTRIES[name], _values(name)
    if name != "morse":
        return entry.build(values, epsilon=epsilon, delta=None, bounds=BOUNDS, random_state=seed)
    base_entry = ENTRIES[values["base"]]
    base = base_entry.build(
        values | {"n_clusters": None, "n_components": None}, epsilon=epsilon, bounds=BOUNDS
    )
    base.set_params(**{base_entry.morse_base.size_param: values["n_components"]})
    return entry.cls(base, values["n_clusters"], epsilon=epsilon, random_state=seed)


def _cli_options(name: str) -> list[str]:
    out = ["--algorithm", name]
    for dest, value in ENTRIES[name].example.items():
        out += [registry.OPTIONS[dest].flag, str(value)]
    return out


def test_every_registered_estimator_is_public():
    import privclust

    for entry in ENTRIES.values():
        assert getattr(privclust, entry.cls.__name__) is entry.cls
        assert entry.cls.__name__ in privclust.__all__


def test_every_entry_is_complete():
    for name, entry in ENTRIES.items():
        assert entry.description and entry.contents, name
        assert set(entry.required) <= set(registry.options_of(name)[0]), name
        assert set(entry.example) >= set(entry.required), f"{name}: example lacks a required option"
        for dest in entry.applicable():
            if dest != "base":
                assert entry.param_for(dest) is not None or name == "morse", (name, dest)


@pytest.mark.parametrize("name", NAMES)
def test_docstring_examples_run(name):
    """Every registered estimator's docstring has numpydoc sections and an Examples block that
    runs as a doctest (warnings are errors: an example must run clean)."""
    cls = ENTRIES[name].cls
    for section in ("Parameters\n    ----------", "Attributes\n    ----------",
                    "Examples\n    --------"):
        assert section in cls.__doc__, f"{cls.__name__} lacks {section.split()[0]}"
    (test,) = doctest.DocTestFinder(recurse=False).find(cls, cls.__name__, globs={})
    assert len(test.examples) >= 4
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = runner.run(test, out=lambda text: None)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"


@pytest.mark.parametrize("name", NAMES)
def test_clone_and_params(name):
    model = _python_model(name)
    params = model.get_params(deep=False)
    twin = clone(model)
    assert type(twin) is type(model)
    assert sorted(twin.get_params(deep=False)) == sorted(params)
    for key, value in params.items():
        if not hasattr(value, "get_params"):
            assert twin.get_params(deep=False)[key] == value, key
    assert model.set_params(epsilon=0.5).get_params()["epsilon"] == 0.5


@pytest.mark.parametrize("name", NAMES)
def test_not_fitted_error(name, data):
    with pytest.raises(NotFittedError):
        _python_model(name).predict(data)


@pytest.mark.parametrize("name", NAMES)
def test_spends_exactly_what_it_planned(name, data):
    report = _python_model(name).fit(data).privacy_report_
    spent = report.total()
    assert math.isclose(spent.epsilon, report.planned.epsilon, rel_tol=1e-9)
    assert math.isclose(spent.delta, report.planned.delta, rel_tol=1e-9, abs_tol=1e-15)


@pytest.mark.parametrize("name", NAMES)
def test_json_round_trip_predicts_the_same(name, data):
    model = _python_model(name).fit(data)
    loaded = io.model_from_dict(json.loads(json.dumps(io.model_to_dict(model))))
    np.testing.assert_array_equal(loaded.predict(data), model.predict(data))
    assert loaded.privacy_report_.total() == model.privacy_report_.total()


@pytest.mark.parametrize("name", NAMES)
def test_command_line_round_trip_agrees_with_python(name, data, tmp_path, capsys):
    X_path, model_path, labels_path = tmp_path / "X.npy", tmp_path / "m.json", tmp_path / "l.npy"
    np.save(X_path, data)
    argv = ["cluster", str(X_path), *_cli_options(name), "--epsilon", "1", "--bounds",
            *map(str, BOUNDS), "--seed", str(SEED), "--out", str(model_path)]
    assert cli.main(argv) == 0, shlex.join(argv) + "\n" + capsys.readouterr().err
    assert cli.main(["predict", str(model_path), str(X_path), "--out", str(labels_path)]) == 0
    capsys.readouterr()
    cli_labels = np.load(labels_path)
    python_labels = _python_model(name).fit(data).predict(data)
    np.testing.assert_array_equal(cli_labels, python_labels)
