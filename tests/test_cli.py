"""The privclust command line (privclust.cli.main)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from privclust import cli
from privclust.io import load_model

CENTRES = [[-20, -20], [20, 20], [-20, 20], [20, -20]]


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(20000, 2, centers=CENTRES, cluster_std=2.0, random_state=0)
    return X


@pytest.fixture(scope="module")
def csv_file(blobs, tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "blobs.csv"
    np.savetxt(path, blobs, delimiter=",", header="lon,lat", comments="", fmt="%.6f")
    return path


@pytest.fixture(scope="module")
def fitted(csv_file, tmp_path_factory):
    """A model written by `privclust cluster` (shared by the predict tests)."""
    out = tmp_path_factory.mktemp("model") / "model.json"
    rc = cli.main(["cluster", str(csv_file), "--epsilon", "1", "--bounds", "-40", "40",
                   "--out", str(out), "--seed", "3"])
    assert rc == 0
    return out


def _assert_one_error_line(capsys, code, expected):
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, captured.err
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("privclust: error: ")
    assert "Traceback" not in captured.err + captured.out
    assert expected in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------------------------
# cluster
# --------------------------------------------------------------------------------------------


def test_cluster_writes_model_and_plot(csv_file, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    model_path, plot_path = tmp_path / "m.json", tmp_path / "m.png"
    rc = cli.main(["cluster", str(csv_file), "--algorithm", "dpm", "--epsilon", "1",
                   "--bounds", "-40", "40", "--out", str(model_path), "--plot", str(plot_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "clusters found:" in out and "Privacy report for DPM" in out
    assert "lon" in out and "lat" in out  # centres table uses the CSV header
    assert "randomness: secure" in out
    model = load_model(model_path)
    assert model.n_clusters_ >= 1 and model.privacy_report_.planned.epsilon == 1.0
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cluster_with_seed_warns(csv_file, capsys):
    rc = cli.main(["cluster", str(csv_file), "--epsilon", "0.5", "--delta", "1e-6",
                   "--bounds", "-40", "40", "--seed", "7", "--max-depth", "3"])
    captured = capsys.readouterr()
    assert rc == 0
    warning = [ln for ln in captured.err.splitlines() if ln.startswith("privclust: warning:")]
    assert len(warning) == 1 and "seed" in warning[0]
    assert "reproducible (int seed; the seed is not recorded), not secure" in captured.out
    assert "seed=7" not in captured.out
    assert "planned  epsilon=0.5 delta=1e-06" in captured.out


def test_cluster_is_reproducible_with_seed(csv_file, tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path in (a, b):
        assert cli.main(["cluster", str(csv_file), "--epsilon", "1", "--bounds", "-40", "40",
                         "--seed", "11", "--out", str(path)]) == 0
    assert json.loads(a.read_text())["model"] == json.loads(b.read_text())["model"]


def test_cluster_bounds_files(csv_file, tmp_path, capsys):
    bj = tmp_path / "bounds.json"
    bj.write_text(json.dumps({"name": "blobs", "bounds": [[-40, 40], [-40, 40]]}))
    assert cli.main(["cluster", str(csv_file), "--epsilon", "1", "--bounds-file", str(bj),
                     "--seed", "0"]) == 0
    bc = tmp_path / "bounds.csv"
    bc.write_text("-40,40\n-40,40\n")
    assert cli.main(["cluster", str(csv_file), "--epsilon", "1", "--bounds-file", str(bc),
                     "--seed", "0"]) == 0
    assert capsys.readouterr().out.count("clusters found:") == 2


def test_cluster_clipping_warning(tmp_path, capsys):
    X, _ = make_blobs(20000, 2, centers=CENTRES, cluster_std=2.0, random_state=1)
    path = tmp_path / "x.npy"
    np.save(path, X)
    rc = cli.main(["cluster", str(path), "--epsilon", "1", "--bounds", "-20", "20", "--seed", "0"])
    err = capsys.readouterr().err
    assert rc == 0
    clipped = [ln for ln in err.splitlines() if "clipped" in ln]
    assert len(clipped) == 1 and clipped[0].startswith("privclust: warning: ")


# --------------------------------------------------------------------------------------------
# predict
# --------------------------------------------------------------------------------------------


def test_predict_prints_labels(fitted, blobs, tmp_path, capsys):
    data = tmp_path / "new.npy"
    np.save(data, blobs[:200])
    capsys.readouterr()
    assert cli.main(["predict", str(fitted), str(data)]) == 0
    printed = np.array(capsys.readouterr().out.split(), dtype=int)
    np.testing.assert_array_equal(printed, load_model(fitted).predict(blobs[:200]))


def test_predict_writes_labels(fitted, csv_file, blobs, tmp_path, capsys):
    out = tmp_path / "labels.csv"
    assert cli.main(["predict", str(fitted), str(csv_file), "--out", str(out)]) == 0
    assert "wrote 20,000 labels" in capsys.readouterr().out
    lines = out.read_text().splitlines()
    assert lines[0] == "label"
    np.testing.assert_array_equal(np.array(lines[1:], dtype=int),
                                  load_model(fitted).predict(blobs))


def test_predict_wrong_columns(fitted, tmp_path, capsys):
    data = tmp_path / "three.csv"
    data.write_text("1,2,3\n4,5,6\n")
    rc = cli.main(["predict", str(fitted), str(data)])
    _assert_one_error_line(capsys, rc, "3 column(s) but the model was fitted on 2")


# --------------------------------------------------------------------------------------------
# demo and datasets
# --------------------------------------------------------------------------------------------


def test_demo(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    rc = cli.main(["demo", "--out-dir", str(tmp_path / "demo"), "--seed", "0",
                   "--n-samples", "20000"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "accuracy (majority vote" in out and "privacy spent: epsilon=" in out
    acc = float(out.split("Def. 12): ")[1].split()[0])
    assert acc > 0.9
    assert load_model(tmp_path / "demo" / "demo_model.json").n_clusters_ >= 2
    assert (tmp_path / "demo" / "demo_clusters.png").read_bytes()[:4] == b"\x89PNG"


def test_demo_without_matplotlib(tmp_path, capsys, monkeypatch):
    def missing():
        raise ImportError('plotting needs matplotlib: pip install "privclust[plot]"')

    monkeypatch.setattr(cli.viz, "require_matplotlib", missing)
    rc = cli.main(["demo", "--out-dir", str(tmp_path), "--n-samples", "5000"])
    captured = capsys.readouterr()
    assert rc == 0
    assert "randomness: secure" in captured.out
    assert "privclust: note: matplotlib is not installed" in captured.err
    assert (tmp_path / "demo_model.json").is_file()
    assert not (tmp_path / "demo_clusters.png").exists()


def test_datasets_without_data_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PRIVCLUST_DATA", str(tmp_path / "nowhere"))
    assert cli.main(["datasets"]) == 0
    captured = capsys.readouterr()
    assert "PRIVCLUST_DATA=" in captured.err and "is not a folder" in captured.err
    assert "synth_10d (generated)" in captured.out and "100,000" in captured.out


def test_datasets_with_folder(tmp_path, capsys, monkeypatch):
    np.savez(tmp_path / "tiny.npz", X=np.zeros((3, 2), np.float32), y=np.zeros(3, np.int32))
    (tmp_path / "tiny.json").write_text(json.dumps(
        {"n": 3, "d": 2, "n_classes": 1, "bounds": [[0, 1], [0, 1]],
         "literature_params": {"k": 1}}))
    monkeypatch.setenv("PRIVCLUST_DATA", str(tmp_path))
    assert cli.main(["datasets"]) == 0
    out = capsys.readouterr().out
    assert f"data folder: {tmp_path}" in out
    row = [ln for ln in out.splitlines() if ln.startswith("tiny")][0]
    assert row.split()[:4] == ["tiny", "3", "2", "1"] and "k=1" in row
    rc = cli.main(["datasets", "--data-dir", str(tmp_path / "nope")])
    _assert_one_error_line(capsys, rc, "is not a folder")


# --------------------------------------------------------------------------------------------
# user mistakes: one line, exit 2, no traceback
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    X, _ = make_blobs(300, 2, random_state=0)
    X[5, 1] = np.nan
    np.savetxt(d / "nan.csv", X, delimiter=",")
    (d / "text.csv").write_text("x,city\n1,Paris\n2,Rome\n")
    (d / "empty.csv").write_text("")
    (d / "ok.csv").write_text("1,2\n3,4\n5,6\n")
    (d / "b3.csv").write_text("0,1\n0,1\n0,1\n")
    (d / "nob.json").write_text(json.dumps({"name": "x"}))
    (d / "data.xlsx").write_text("x")
    return d


BAD = [
    (["cluster", "{d}/missing.csv", "--epsilon", "1", "--bounds", "0", "1"], "does not exist"),
    (["cluster", "{d}/ok.csv", "--epsilon", "0", "--bounds", "0", "1"], "--epsilon"),
    (["cluster", "{d}/ok.csv", "--epsilon", "-2", "--bounds", "0", "1"], "positive number"),
    (["cluster", "{d}/ok.csv", "--epsilon", "x", "--bounds", "0", "1"], "expected a number"),
    (["cluster", "{d}/ok.csv", "--epsilon", "1", "--delta", "2", "--bounds", "0", "1"],
     "--delta"),
    (["cluster", "{d}/ok.csv", "--epsilon", "1"], "--bounds --bounds-file is required"),
    (["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds", "5", "1"], "lo < hi"),
    (["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds-file", "{d}/b3.csv"],
     "expected (2,) for all features or (2, 2)"),
    (["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds-file", "{d}/nob.json"],
     'no "bounds" entry'),
    (["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds-file", "{d}/none.json"],
     "bounds file"),
    (["cluster", "{d}/nan.csv", "--epsilon", "1", "--bounds", "-20", "20"], "NaN"),
    (["cluster", "{d}/text.csv", "--epsilon", "1", "--bounds", "0", "5"],
     "column 'city' is not numeric"),
    (["cluster", "{d}/empty.csv", "--epsilon", "1", "--bounds", "0", "5"], "empty"),
    (["cluster", "{d}/data.xlsx", "--epsilon", "1", "--bounds", "0", "5"], "unknown file type"),
    (["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds", "0", "9", "--algorithm", "kmeans"],
     "unknown algorithm 'kmeans'; available: dpm"),
    (["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds", "0", "9", "--max-depth", "40"],
     "max_depth"),
    (["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds", "0", "9", "--out",
      "{d}/no/dir/m.json"], "does not exist"),
    (["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds", "0", "9", "--seed", "-1"],
     "--seed"),
    (["predict", "{d}/ok.csv", "{d}/ok.csv"], "not valid JSON"),
    (["predict", "{d}/nob.json", "{d}/ok.csv"], "not a privclust model"),
    (["predict", "{d}/missing.json", "{d}/ok.csv"], "model file"),
    (["frobnicate"], "invalid choice"),
    ([], "no command given"),
]


@pytest.mark.parametrize(("argv", "expected"), BAD, ids=[" ".join(a[:1] + a[2:4]) for a, _ in BAD])
def test_user_mistakes(argv, expected, bad_files, capsys):
    rc = cli.main([a.format(d=bad_files) for a in argv])
    _assert_one_error_line(capsys, rc, expected)


def test_bad_plot_path_fails_before_fitting(bad_files, capsys, monkeypatch):
    pytest.importorskip("matplotlib")

    def boom(*a, **k):
        raise AssertionError("the data must not be read before the outputs are checked")

    monkeypatch.setattr(cli, "read_table", boom)
    rc = cli.main(["cluster", str(bad_files / "ok.csv"), "--epsilon", "1", "--bounds", "0", "9",
                   "--plot", str(bad_files / "x.gif")])
    _assert_one_error_line(capsys, rc, "unknown image type '.gif'")


def test_genuine_bugs_are_not_hidden(csv_file, monkeypatch):
    def bug(*a, **k):
        return {}["missing"]  # a KeyError: not a user mistake

    monkeypatch.setattr(cli, "read_table", bug)
    with pytest.raises(KeyError):
        cli.main(["cluster", str(csv_file), "--epsilon", "1", "--bounds", "0", "1"])

    def foreign(*a, **k):
        raise ValueError("raised outside privclust")

    monkeypatch.setattr(cli, "read_table", foreign)
    with pytest.raises(ValueError, match="outside privclust"):
        cli.main(["cluster", str(csv_file), "--epsilon", "1", "--bounds", "0", "1"])


def test_help_returns_zero(capsys):
    assert cli.main(["--help"]) == 0
    assert "cluster" in capsys.readouterr().out
    assert cli.main(["cluster", "--help"]) == 0
    assert "--bounds-file" in capsys.readouterr().out


def test_entry_point_subprocess():
    res = subprocess.run([sys.executable, "-m", "privclust.cli", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "predict" in res.stdout
    script = shutil.which("privclust")
    if script is not None:
        res = subprocess.run([script, "cluster", "missing.csv", "--epsilon", "1", "--bounds",
                              "0", "1"], capture_output=True, text=True, timeout=60)
        assert res.returncode == 2
        assert res.stderr.strip() == "privclust: error: input file missing.csv does not exist"
