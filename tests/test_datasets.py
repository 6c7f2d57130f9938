"""Tests for privclust.datasets.

Tests that need the benchmark folder (../shared/data or $PRIVCLUST_DATA) skip when it is absent,
so the file passes on a fresh clone; everything else uses generated data or a tiny tmp folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from privclust import datasets as ds
from privclust.datasets import (
    Dataset,
    DatasetIntegrityError,
    DatasetNotFoundError,
    default_data_dir,
    list_datasets,
    load,
    load_or_generate,
    make_synth,
    synth_10d,
    synth_100d,
)

NO_DATA_REASON = (
    "benchmark data folder not found (../shared/data next to the checkout, or set PRIVCLUST_DATA)"
)


def _shared_dir() -> Path:
    d = default_data_dir()
    if d is None:
        pytest.skip(NO_DATA_REASON)
    return d


def _require(name: str) -> Path:
    d = _shared_dir()
    if not (d / f"{name}.npz").is_file() or not (d / f"{name}.json").is_file():
        pytest.skip(f"{name}.npz/.json not in the data folder {d}")
    return d


def _write_tiny(folder: Path, name: str = "tiny", *, labels: bool = True) -> dict:
    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 1.0, size=(12, 3)).astype(np.float32)
    y = np.repeat(np.arange(3, dtype=np.int32), 4) if labels else np.full(12, -1, np.int32)
    np.savez(folder / f"{name}.npz", X=X, y=y)
    meta = {
        "name": name,
        "n": 12,
        "d": 3,
        "n_classes": 3 if labels else None,
        "bounds": [[0.0, 1.0]] * 3,
        "literature_params": {"k": 3},
        "sha256_X": hashlib.sha256(X.tobytes()).hexdigest(),
        "sha256_y": hashlib.sha256(y.tobytes()).hexdigest(),
    }
    (folder / f"{name}.json").write_text(json.dumps(meta))
    return meta


# ------------------------------------------------------------------------- generators


def test_make_synth_shape_bounds_labels():
    s = make_synth(n_samples=640, n_features=10)
    assert s.name == "synth_10d"
    assert s.X.shape == (640, 10) and s.X.dtype == np.float64
    assert s.y is not None and s.y.dtype == np.int32
    assert np.array_equal(np.unique(s.y), np.arange(64))
    assert s.bounds.shape == (10, 2)
    assert np.all(s.bounds == [-100.0, 100.0])
    assert s.bounds_pair == (-100.0, 100.0)
    assert s.meta["generated"] is True and s.meta["n_classes"] == 64


def test_make_synth_is_make_blobs_and_deterministic():
    a = make_synth(n_samples=500, n_features=5, random_state=7)
    b = make_synth(n_samples=500, n_features=5, random_state=7)
    c = make_synth(n_samples=500, n_features=5, random_state=8)
    X, y = make_blobs(500, 5, centers=64, center_box=(-100, 100), random_state=7)
    assert np.array_equal(a.X, X) and np.array_equal(a.y, y)
    assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    assert not np.array_equal(a.X, c.X)


def test_make_synth_custom_box_and_dtype():
    s = make_synth(n_samples=100, n_features=3, n_centers=4, center_box=(0, 10), dtype=np.float32)
    assert s.X.dtype == np.float32
    assert s.bounds_pair == (0.0, 10.0)
    assert set(np.unique(s.y)) == {0, 1, 2, 3}


def test_named_synth_helpers():
    s10 = synth_10d(n_samples=256)
    s100 = synth_100d(n_samples=256)
    assert (s10.name, s10.d, s10.n) == ("synth_10d", 10, 256)
    assert (s100.name, s100.d, s100.n) == ("synth_100d", 100, 256)
    assert s100.bounds.shape == (100, 2) and s100.bounds_pair == (-100.0, 100.0)
    assert np.unique(s100.y).size == 64
    assert s10.meta["literature_params"]["dpm"]["k"] == 64


def test_load_or_generate_generated_needs_no_files(monkeypatch, tmp_path):
    monkeypatch.setenv("PRIVCLUST_DATA", str(tmp_path / "does-not-exist"))
    g = load_or_generate("synth_10d")
    assert g.X.shape == (100_000, 10)
    assert np.array_equal(g.X[:5], synth_10d().X[:5])
    with pytest.raises(DatasetNotFoundError, match="PRIVCLUST_DATA"):
        load_or_generate("flame")


# ------------------------------------------------------------------------- Dataset


def test_dataset_bounds_pair_and_validation():
    X = np.zeros((4, 2))
    mixed = Dataset("m", X, None, np.array([[0, 1], [0, 2]]), {})
    assert isinstance(mixed.bounds_pair, np.ndarray) and mixed.bounds_pair.shape == (2, 2)
    assert not mixed.bounds.flags.writeable
    same = Dataset("s", X, None, [[-1, 1], [-1, 1]], {})
    assert same.bounds_pair == (-1.0, 1.0)
    assert "n=4" in repr(same)
    with pytest.raises(ValueError, match="shape"):
        Dataset("bad", X, None, np.zeros((3, 2)), {})
    with pytest.raises(ValueError, match="lo <= hi"):
        Dataset("bad", X, None, [[1, 0], [0, 1]], {})
    with pytest.raises(AttributeError):
        same.name = "other"  # frozen


# ------------------------------------------------------------------------- data folder lookup


def test_env_override_with_tiny_set(monkeypatch, tmp_path):
    meta = _write_tiny(tmp_path)
    monkeypatch.setenv("PRIVCLUST_DATA", str(tmp_path))
    assert default_data_dir() == tmp_path.resolve()
    entries = {e["name"]: e for e in list_datasets()}
    assert entries["tiny"]["n"] == 12 and entries["tiny"]["generated"] is False
    assert entries["tiny"]["literature"] == "k=3"
    assert entries["synth_10d"]["generated"] is True
    t = load("tiny", verify=True)
    assert t.X.dtype == np.float32 and t.X.shape == (12, 3)
    assert t.y is not None and t.y.dtype == np.int32
    assert t.bounds_pair == (0.0, 1.0)
    assert t.meta["sha256_X"] == meta["sha256_X"]
    assert load("tiny.npz").n == 12


def test_unlabelled_set_has_y_none(tmp_path):
    _write_tiny(tmp_path, "nolab", labels=False)
    t = load("nolab", data_dir=tmp_path, verify=True)
    assert t.y is None


def test_verify_detects_corruption(tmp_path):
    meta = _write_tiny(tmp_path)
    meta["sha256_y"] = "0" * 64
    (tmp_path / "tiny.json").write_text(json.dumps(meta))
    assert load("tiny", data_dir=tmp_path).n == 12  # no check without verify
    with pytest.raises(DatasetIntegrityError, match="SHA-256 of y"):
        load("tiny", data_dir=tmp_path, verify=True)


def test_sidecar_shape_mismatch_is_reported(tmp_path):
    meta = _write_tiny(tmp_path)
    meta["n"] = 13
    (tmp_path / "tiny.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetIntegrityError, match="n=13"):
        load("tiny", data_dir=tmp_path)


def test_missing_name_suggests_close_match(tmp_path):
    _write_tiny(tmp_path)
    with pytest.raises(DatasetNotFoundError) as exc:
        load("tinny", data_dir=tmp_path)
    msg = str(exc.value)
    assert isinstance(exc.value, FileNotFoundError)
    assert "'tiny'" in msg and str(tmp_path) in msg and "PRIVCLUST_DATA" in msg


def test_missing_folder_degrades_cleanly(monkeypatch, tmp_path):
    missing = tmp_path / "nope"
    monkeypatch.setenv("PRIVCLUST_DATA", str(missing))
    assert default_data_dir() is None
    assert sorted(e["name"] for e in list_datasets()) == ["synth_100d", "synth_10d"]
    with pytest.raises(DatasetNotFoundError) as exc:
        load("flame")
    assert "PRIVCLUST_DATA" in str(exc.value) and str(missing) in str(exc.value)
    with pytest.raises(DatasetNotFoundError, match="not a directory"):
        load("flame", data_dir=missing)


def test_bad_names_rejected(tmp_path):
    for bad in ["../flame", "a/b", "", ".hidden"]:
        with pytest.raises(ValueError, match="plain name"):
            load(bad, data_dir=tmp_path)


def test_cwd_fallback(monkeypatch, tmp_path):
    monkeypatch.delenv("PRIVCLUST_DATA", raising=False)
    monkeypatch.setattr(ds, "_REPO_ROOT", tmp_path / "elsewhere" / "repo")
    data = tmp_path / "work" / "shared" / "data"
    data.mkdir(parents=True)
    (tmp_path / "work" / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "work" / "repo")
    assert default_data_dir() == data.resolve()
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")
    assert default_data_dir() is None


def test_default_data_dir_unset_env(monkeypatch):
    monkeypatch.delenv("PRIVCLUST_DATA", raising=False)
    d = default_data_dir()
    assert d is None or d.is_dir()


# ------------------------------------------------------------------------- real benchmark data


def test_load_flame_verified():
    _require("flame")
    f = load("flame", verify=True)
    assert f.X.shape == (240, 2) and f.X.dtype == np.float32
    assert f.y is not None and f.y.dtype == np.int32 and set(np.unique(f.y)) == {0, 1}
    assert isinstance(f.bounds_pair, np.ndarray) and f.bounds_pair.shape == (2, 2)
    assert np.all(f.X >= f.bounds[:, 0]) and np.all(f.X <= f.bounds[:, 1])
    assert f.meta["n_classes"] == 2


def test_list_real_sidecars():
    _require("flame")
    entries = {e["name"]: e for e in list_datasets()}
    assert entries["flame"]["n"] == 240 and entries["flame"]["d"] == 2
    assert entries["flame"]["n_classes"] == 2 and entries["flame"]["generated"] is False


def test_real_typo_suggests_flame():
    _require("flame")
    with pytest.raises(DatasetNotFoundError, match="'flame'"):
        load("flmae")


def test_stored_dpm_synth_10d_matches_generator():
    _require("dpm_synth_10d")
    stored = load("dpm_synth_10d", verify=True)
    gen = synth_10d()
    assert np.array_equal(gen.X.astype(np.float32), stored.X)
    assert np.array_equal(gen.y, stored.y)
