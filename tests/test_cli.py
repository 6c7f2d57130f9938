"""The privclust command line (privclust.cli.main)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from privclust import _cli_output, cli
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
    rc = cli.main(
        [
            "cluster",
            str(csv_file),
            "--epsilon",
            "1",
            "--bounds",
            "-40",
            "40",
            "--out",
            str(out),
            "--seed",
            "3",
        ]
    )
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
    rc = cli.main(
        [
            "cluster",
            str(csv_file),
            "--algorithm",
            "dpm",
            "--epsilon",
            "1",
            "--bounds",
            "-40",
            "40",
            "--out",
            str(model_path),
            "--plot",
            str(plot_path),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "clusters found:" in out and "Privacy report for DPM" in out
    assert "lon" in out and "lat" in out  # centres table uses the CSV header
    assert "randomness: secure" in out
    model = load_model(model_path)
    assert model.n_clusters_ >= 1 and model.privacy_report_.planned.epsilon == 1.0
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cluster_with_seed_warns(csv_file, capsys):
    rc = cli.main(
        [
            "cluster",
            str(csv_file),
            "--epsilon",
            "0.5",
            "--delta",
            "1e-6",
            "--bounds",
            "-40",
            "40",
            "--seed",
            "7",
            "--max-depth",
            "3",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 0
    warning = [ln for ln in captured.err.splitlines() if ln.startswith("privclust: warning:")]
    assert len(warning) == 1 and "seed" in warning[0]
    assert "reproducible (int seed; the seed is not recorded), not secure" in captured.out
    assert "seed=7" not in captured.out
    assert "planned before the data was read: epsilon=0.5, delta=1e-06" in captured.out


def test_cluster_is_reproducible_with_seed(csv_file, tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path in (a, b):
        assert (
            cli.main(
                [
                    "cluster",
                    str(csv_file),
                    "--epsilon",
                    "1",
                    "--bounds",
                    "-40",
                    "40",
                    "--seed",
                    "11",
                    "--out",
                    str(path),
                ]
            )
            == 0
        )
    assert json.loads(a.read_text())["model"] == json.loads(b.read_text())["model"]


def test_cluster_bounds_files(csv_file, tmp_path, capsys):
    bj = tmp_path / "bounds.json"
    bj.write_text(json.dumps({"name": "blobs", "bounds": [[-40, 40], [-40, 40]]}))
    assert (
        cli.main(
            ["cluster", str(csv_file), "--epsilon", "1", "--bounds-file", str(bj), "--seed", "0"]
        )
        == 0
    )
    bc = tmp_path / "bounds.csv"
    bc.write_text("-40,40\n-40,40\n")
    assert (
        cli.main(
            ["cluster", str(csv_file), "--epsilon", "1", "--bounds-file", str(bc), "--seed", "0"]
        )
        == 0
    )
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
    np.testing.assert_array_equal(np.array(lines[1:], dtype=int), load_model(fitted).predict(blobs))


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
    rc = cli.main(
        ["demo", "--out-dir", str(tmp_path / "demo"), "--seed", "0", "--n-samples", "3000"]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "accuracy (majority vote" in out and "privacy spent: epsilon=" in out
    acc = float(out.split("accuracy (majority vote): ")[1].split(",")[0])
    assert acc > 0.9
    assert load_model(tmp_path / "demo" / "demo_model.json").n_clusters_ >= 2
    assert (tmp_path / "demo" / "demo_clusters.png").read_bytes()[:4] == b"\x89PNG"


def test_demo_without_matplotlib(tmp_path, capsys, monkeypatch):
    def missing():
        raise ImportError('plotting needs matplotlib: pip install "privclust[plot]"')

    monkeypatch.setattr(cli.viz, "require_matplotlib", missing)
    rc = cli.main(["demo", "--out-dir", str(tmp_path), "--n-samples", "3000"])
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
    (tmp_path / "tiny.json").write_text(
        json.dumps(
            {
                "n": 3,
                "d": 2,
                "n_classes": 1,
                "bounds": [[0, 1], [0, 1]],
                "literature_params": {"k": 1},
            }
        )
    )
    monkeypatch.setenv("PRIVCLUST_DATA", str(tmp_path))
    assert cli.main(["datasets"]) == 0
    out = capsys.readouterr().out
    assert f"data folder: {tmp_path}" in out
    row = [ln for ln in out.splitlines() if ln.startswith("tiny")][0]
    assert row.split()[:4] == ["tiny", "3", "2", "1"] and "k=1" in row
    rc = cli.main(["datasets", "--data-dir", str(tmp_path / "nope")])
    _assert_one_error_line(capsys, rc, "is not a folder")


# --------------------------------------------------------------------------------------------
# every algorithm: cluster to a model file, then predict
# --------------------------------------------------------------------------------------------

SMALL_N = 2000
#: (--algorithm and its options, saved estimator, clusters asked for (None: the model decides),
#: pure epsilon-DP)
ALGORITHM_CASES = [
    ("dpm --max-depth 4", "DPM", None, False),
    ("dbscan --radius 3 --min-samples 10", "DPDBSCAN", None, True),
    ("lloyd --n-clusters 4", "DPLloyd", 4, True),
    ("kmeans-guarantee --n-clusters 4 --iterations 5", "KMeansGuarantee", 4, True),
    ("subclustering --n-clusters 4 --internal-k 3", "SubClustering", 4, True),
    ("mixture --n-components 4", "DPGaussianMixture", 4, False),
    ("morse --n-clusters 4 --n-components 6", "MorseMerging", 4, False),
    ("morse --base lloyd --n-clusters 4 --n-components 6", "MorseMerging", 4, False),
    ("morse --base dpm --n-clusters 4 --delta 1e-5", "MorseMerging", 4, False),
]


def _cluster(path, options: str, *extra) -> int:
    """``privclust cluster PATH`` with ``options`` (split on spaces) and ``extra`` arguments."""
    return cli.main(["cluster", str(path), *options.split(), *extra])


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """2,000 points in 4 separated blobs (public bounds (-40, 40)), as .npy, with true labels."""
    X, y = make_blobs(SMALL_N, 2, centers=CENTRES, cluster_std=2.0, random_state=0)
    path = tmp_path_factory.mktemp("small") / "small.npy"
    np.save(path, X)
    return path, X, y


@pytest.mark.parametrize(
    ("algo", "estimator", "k", "pure"), ALGORITHM_CASES, ids=[c[0] for c in ALGORITHM_CASES]
)
def test_every_algorithm_round_trip(algo, estimator, k, pure, small, tmp_path, capsys):
    from sklearn.metrics import adjusted_rand_score

    path, X, y = small
    model_path = tmp_path / "model.json"
    options = f"--algorithm {algo} --epsilon 2 --bounds -40 40 --seed 1"
    rc = _cluster(path, options, "--out", str(model_path))
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert (f"{SMALL_N:,} points x 2 feature(s) [your data: the exact count is not part of the "
            "release], epsilon=2") in captured.out
    assert "privacy spent: epsilon=" in captured.out and " of 2; guarantee: (" in captured.out
    assert f"Privacy report for {estimator}" in captured.out
    assert f"wrote model: {model_path}" in captured.out

    stored = json.loads(model_path.read_text())
    assert stored["estimator"] == estimator
    assert "labels" not in stored["model"] and "labels_" not in stored["model"]
    model = load_model(model_path)
    assert type(model).__name__ == estimator
    report = model.privacy_report_
    assert report.planned.epsilon == 2.0
    assert report.private
    total = report.total()
    assert total.epsilon <= 2.0 + 1e-9
    if pure:  # every release is planned up front: the whole budget is spent, and no delta
        assert total.epsilon == pytest.approx(2.0)
        assert report.planned.delta == 0.0 and total.delta == 0.0
        assert "delta=0 (pure epsilon-DP)" in captured.out
    if "--delta" in algo:  # morse over dpm splits the one delta between DPM and the covariances
        assert report.planned.delta == pytest.approx(1e-5)
        assert total.delta == pytest.approx(1e-5)
    # a mixture's clusters are its components
    n_clusters = model.n_components_ if estimator == "DPGaussianMixture" else model.n_clusters_
    if k is not None and estimator == "MorseMerging":
        # at most K: a runt, or a base with fewer components, leaves fewer clusters
        assert 2 <= n_clusters <= k
    elif k is not None:
        assert n_clusters == k

    rc = cli.main(["predict", str(model_path), str(path)])
    captured = capsys.readouterr()
    assert rc == 0 and captured.err == ""
    labels = np.array(captured.out.split(), dtype=np.int64)
    assert labels.shape == (SMALL_N,)
    np.testing.assert_array_equal(labels, model.predict(X))
    assert labels.max() < n_clusters
    assert labels.min() >= (-1 if estimator == "DPDBSCAN" else 0)
    assert adjusted_rand_score(y, labels) > 0.5  # four blobs 20 standard deviations apart


def test_summary_shows_each_algorithms_outputs(small, capsys):
    path = small[0]
    common = "--epsilon 2 --bounds -40 40 --seed 1 --algorithm"
    assert _cluster(path, f"{common} dbscan --radius 3") == 0
    out = capsys.readouterr().out
    assert "clusters (spans) found: " in out and "core cells per span: " in out
    assert "points in no span (label -1): " in out and "guarantee: with probability" in out
    assert _cluster(path, f"{common} lloyd --n-clusters 3 --iterations 2") == 0
    out = capsys.readouterr().out
    assert "clusters found: 3" in out and "iterations: 2" in out
    assert _cluster(path, f"{common} mixture --n-components 3") == 0
    out = capsys.readouterr().out
    assert "components: 3 (" in out and "noisy count" in out
    assert _cluster(path, f"{common} morse --n-clusters 2 --n-components 4") == 0
    out = capsys.readouterr().out
    assert "MorseMerging over DPGaussianMixture on " in out
    assert "clusters: 2 merged from 4 components of the private DPGaussianMixture" in out
    assert "cluster of each component: " in out


def test_faithful_variant_warns(small, tmp_path, capsys):
    path = small[0]
    model_path = tmp_path / "faithful.json"
    options = "--algorithm subclustering --n-clusters 4 --epsilon 1 --bounds -40 40"
    rc = _cluster(path, options, "--variant", "faithful", "--out", str(model_path))
    captured = capsys.readouterr()
    assert rc == 0
    warned = [ln for ln in captured.err.splitlines() if ln.startswith("privclust: warning:")]
    assert len(warned) == 1
    assert "--variant faithful is NOT differentially private" in warned[0]
    assert "variant: faithful  (NOT private)" in captured.out
    assert "** NOT PRIVATE (faithful variant) **" in captured.out
    assert "pure epsilon-DP" not in captured.out
    with pytest.warns(UserWarning, match="NOT differentially private"):
        assert not load_model(model_path).privacy_report_.private
    # Applying it warns again: the labels come from a model that is not private.
    assert cli.main(["predict", str(model_path), str(path)]) == 0
    err = capsys.readouterr().err
    assert "privclust: warning:" in err and "NOT differentially private" in err
    # The private variant (the default) warns about nothing.
    options = "--algorithm kmeans-guarantee --n-clusters 4 --epsilon 1 --bounds -40 40"
    assert _cluster(path, options) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "variant: private" in captured.out


def test_morse_seed_is_reproducible_and_not_stored(small, tmp_path, capsys):
    # one seed for the pipeline: the base and the covariance pass draw from one stream
    options = "--algorithm morse --base lloyd --n-clusters 3 --n-components 5 --epsilon 1"
    outs = [tmp_path / "a.json", tmp_path / "b.json"]
    for out in outs:
        assert (
            _cluster(small[0], options, "--bounds", "-40", "40", "--seed", "4", "--out", str(out))
            == 0
        )
    a, b = (json.loads(o.read_text()) for o in outs)
    assert a["model"] == b["model"]
    assert a["params"]["random_state"].startswith("int seed (")
    assert '"random_state": 4' not in outs[0].read_text()
    assert "reproducible (int seed" in capsys.readouterr().out


def test_plot_spans_mixture_and_morse(small, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    common = "--epsilon 2 --bounds -40 40 --seed 0 --algorithm"
    for algo in (
        "dbscan --radius 3",
        "mixture --n-components 4",
        "morse --n-clusters 4 --n-components 5",
    ):
        plot = tmp_path / f"{algo.split()[0]}.png"
        assert _cluster(small[0], f"{common} {algo}", "--plot", str(plot)) == 0
        assert plot.read_bytes()[:4] == b"\x89PNG"
    assert capsys.readouterr().out.count("wrote plot: ") == 3


def test_dbscan_plot_needs_2d_data_and_fails_before_fitting(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    data = tmp_path / "three.npy"
    np.save(data, np.random.default_rng(0).normal(size=(100, 3)))

    def boom(*a, **k):
        raise AssertionError("no budget may be spent when the plot cannot be drawn")

    monkeypatch.setattr(cli.ALGORITHMS["dbscan"].cls, "fit", boom)
    options = "--algorithm dbscan --radius 1 --epsilon 1 --bounds -4 4"
    rc = _cluster(data, options, "--plot", str(tmp_path / "p.png"))
    _assert_one_error_line(capsys, rc, "draws the spans of 2-D data only; the data has 3")


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
    (["cluster", "{d}/ok.csv", "--epsilon", "x", "--bounds", "0", "1"],
     "--epsilon must be a number"),
    (["cluster", "{d}/ok.csv", "--epsilon", "1", "--delta", "2", "--bounds", "0", "1"], "--delta"),
    (["cluster", "{d}/ok.csv", "--epsilon", "1"], "--bounds --bounds-file is required"),
    (["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds", "5", "1"], "lo < hi"),
    (
        ["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds-file", "{d}/b3.csv"],
        "expected (lo, hi) for all features, one (lo, hi) row per feature (shape (2, 2))",
    ),
    (
        ["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds-file", "{d}/nob.json"],
        'no "bounds" entry',
    ),
    (["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds-file", "{d}/none.json"], "bounds file"),
    (["cluster", "{d}/nan.csv", "--epsilon", "1", "--bounds", "-20", "20"], "NaN"),
    (
        ["cluster", "{d}/text.csv", "--epsilon", "1", "--bounds", "0", "5"],
        "column 'city' is not numeric",
    ),
    (["cluster", "{d}/empty.csv", "--epsilon", "1", "--bounds", "0", "5"], "empty"),
    (["cluster", "{d}/data.xlsx", "--epsilon", "1", "--bounds", "0", "5"], "unknown file type"),
    (
        ["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds", "0", "9", "--algorithm", "kmeans"],
        "unknown algorithm 'kmeans'; available: " + ", ".join(cli.ALGORITHMS),  # the registry
    ),
    (
        ["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds", "0", "9", "--algorithm", "dpm",
         "--max-depth", "40"],
        "--max-depth 40 allows 2^40 clusters",
    ),
    (
        [
            "cluster",
            "{d}/ok.csv",
            "--epsilon",
            "1",
            "--bounds",
            "0",
            "9",
            "--out",
            "{d}/no/dir/m.json",
        ],
        "does not exist",
    ),
    (["cluster", "{d}/ok.csv", "--epsilon", "1", "--bounds", "0", "9", "--seed", "-1"], "--seed"),
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


#: Options that do not fit the algorithm: after "cluster ok.csv --epsilon 1 --bounds 0 9".
BAD_OPTIONS = [
    (
        "--algorithm dpm --n-clusters 3",
        "--n-clusters does not apply to --algorithm dpm; it is an option of lloyd, "
        "kmeans-guarantee, subclustering, ",  # ... and every other estimator that takes k
    ),
    (
        "--algorithm lloyd --n-clusters 2 --max-depth 3",
        "--max-depth does not apply to --algorithm lloyd; it is an option of dpm, ",
    ),
    ("--algorithm lloyd --n-clusters 2 --variant faithful", "--variant does not apply to"),
    (
        "--algorithm kmeans-guarantee --n-clusters 2 --internal-k 3",
        "--internal-k does not apply to --algorithm kmeans-guarantee; it is an option of "
        "subclustering",
    ),
    (
        "--algorithm lloyd --n-clusters 2 --delta 1e-6",
        "--delta does not apply to --algorithm lloyd: DPLloyd is pure epsilon-DP (delta = 0)",
    ),
    ("--algorithm dbscan --radius 1 --delta 1e-6", "DPDBSCAN is pure epsilon-DP"),
    (
        "--algorithm dbscan",
        "--algorithm dbscan needs --radius: the DBSCAN neighbourhood radius in the data's units "
        "(not the privacy budget)",
    ),
    (
        "--algorithm dbscan --eps 0.5",
        "--eps is ambiguous: give the privacy budget as --epsilon and the DBSCAN "
        "neighbourhood radius as --radius",
    ),
    ("--algorithm dbscan --radius 0", "--radius must be a positive number"),
    (
        "--algorithm dbscan --radius 1 --n-clusters 2",
        "--n-clusters does not apply to --algorithm dbscan",
    ),
    ("--algorithm lloyd", "--algorithm lloyd needs --n-clusters"),
    ("--algorithm mixture", "--algorithm mixture needs --n-components"),
    ("--algorithm morse --n-components 4", "--algorithm morse needs --n-clusters"),
    ("--algorithm morse --n-clusters 2", "--algorithm morse --base mixture needs --n-components"),
    (
        "--algorithm morse --base dpm --n-clusters 2 --n-components 4",
        "--n-components does not apply to --algorithm morse --base dpm; it is an option of "
        "mixture, morse --base mixture|lloyd",
    ),
    ("--algorithm morse --n-clusters 5 --n-components 3", "it must be at least --n-clusters"),
    ("--algorithm morse --base kmeans --n-clusters 2", "--base: invalid choice: 'kmeans'"),
    (
        "--algorithm mixture --n-components 2 --base dpm",
        "--base does not apply to --algorithm mixture; it is an option of morse",
    ),
    (
        "--algorithm subclustering --n-clusters 2 --variant exact",
        "--variant: invalid choice: 'exact'",
    ),
]


@pytest.mark.parametrize(("options", "expected"), BAD_OPTIONS, ids=[o for o, _ in BAD_OPTIONS])
def test_options_that_do_not_fit_the_algorithm(options, expected, bad_files, capsys):
    rc = _cluster(bad_files / "ok.csv", f"--epsilon 1 --bounds 0 9 {options}")
    _assert_one_error_line(capsys, rc, expected)


def test_missing_bounds_for_every_algorithm(bad_files, capsys):
    for options in ("dbscan --radius 1", "lloyd --n-clusters 2", "morse --n-clusters 2"):
        rc = _cluster(bad_files / "ok.csv", f"--epsilon 1 --algorithm {options}")
        _assert_one_error_line(capsys, rc, "--bounds --bounds-file is required")


def test_bad_plot_path_fails_before_fitting(bad_files, capsys, monkeypatch):
    pytest.importorskip("matplotlib")

    def boom(*a, **k):
        raise AssertionError("the data must not be read before the outputs are checked")

    monkeypatch.setattr(cli, "read_table", boom)
    rc = cli.main(
        [
            "cluster",
            str(bad_files / "ok.csv"),
            "--epsilon",
            "1",
            "--bounds",
            "0",
            "9",
            "--plot",
            str(bad_files / "x.gif"),
        ]
    )
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
    out = capsys.readouterr().out
    assert "--bounds-file" in out
    # every algorithm on a line of its own with its description
    listed = out.split("algorithms (--algorithm):")[1]
    for name, algo in cli.ALGORITHMS.items():
        line = next(ln for ln in listed.splitlines() if ln.split()[:1] == [name])
        assert algo.description.split(":")[0] in line
    dbscan_group = out.split("\ndbscan:\n")[1]
    radius_help = " ".join(dbscan_group.split("--radius R")[1].split("--min-samples")[0].split())
    assert "NOT the privacy budget, which is --epsilon" in radius_help


def test_entry_point_subprocess():
    res = subprocess.run(
        [sys.executable, "-m", "privclust.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0 and "predict" in res.stdout
    script = shutil.which("privclust")
    if script is not None:
        res = subprocess.run(
            [script, "cluster", "missing.csv", "--epsilon", "1", "--bounds", "0", "1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 2
        assert res.stderr.strip() == "privclust: error: input file missing.csv does not exist"


@pytest.mark.parametrize(("base", "python_base"), [
    ("dpm", lambda b: __import__("privclust").DPM(epsilon=1.0, bounds=b, max_depth=7)),
    ("lloyd", lambda b: __import__("privclust").DPLloyd(n_clusters=6, epsilon=1.0, bounds=b)),
    ("mixture", lambda b: __import__("privclust").DPGaussianMixture(n_components=6, epsilon=1.0,
                                                                    bounds=b)),
])
@pytest.mark.parametrize("delta", [None, 1e-6])
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_morse_plan_is_the_same_from_the_cli_and_from_python(csv_file, blobs, tmp_path, base,
                                                             python_base, delta):
    """One plan, however the pipeline is built: the CLI's --epsilon and --delta are the
    pipeline's totals, exactly as MorseMerging(base, epsilon=..., delta=...) in Python."""
    from privclust import MorseMerging

    out = tmp_path / "m.json"
    args = ["cluster", str(csv_file), "--algorithm", "morse", "--base", base, "--epsilon", "1",
            "--bounds", "-40", "40", "--n-clusters", "4", "--seed", "5", "--out", str(out)]
    args += ["--n-components", "6"] if base != "dpm" else []
    args += ["--delta", str(delta)] if delta is not None else []
    assert cli.main(args) == 0
    from_cli = load_model(out).privacy_report_
    bounds = np.tile([-40.0, 40.0], (2, 1))
    from_python = MorseMerging(python_base(bounds), 4, epsilon=1.0, delta=delta,
                               random_state=5).fit(blobs).privacy_report_
    assert [i["item"] for i in from_cli.plan] == [i["item"] for i in from_python.plan]
    for a, b in zip(from_cli.plan, from_python.plan, strict=True):
        assert a["epsilon"] == pytest.approx(b["epsilon"], rel=1e-12)
        assert a["delta"] == pytest.approx(b["delta"], rel=1e-9)
    assert from_cli.planned.epsilon == from_python.planned.epsilon == 1.0
    assert from_cli.total().epsilon == pytest.approx(1.0, rel=1e-9)
    if delta is not None:
        assert from_cli.planned.delta == from_python.planned.delta == delta


@pytest.mark.parametrize("spelling", [["--bounds", "-1e3", "1e3"], ["--bounds=-1e3,1e3"],
                                      ["--bounds", "-1000.0", "+1000"]])
def test_bounds_take_any_float_spelling(csv_file, capsys, spelling):
    rc = cli.main(["cluster", str(csv_file), "--epsilon", "1", "--seed", "1", *spelling])
    out = capsys.readouterr().out
    assert rc == 0 and "privacy spent" in out


@pytest.mark.parametrize(("spelling", "expected"), [
    (["--bounds", "-inf", "inf"], "--bounds must be finite"),
    (["--bounds", "-1e308", "1e308"], "outside the range privclust supports"),
    (["--bounds=-10"], "--bounds must be two numbers"),
    (["--bounds", "a", "b"], "--bounds must be two numbers"),
])
def test_bad_bounds_are_one_clear_error(csv_file, capsys, spelling, expected):
    rc = cli.main(["cluster", str(csv_file), "--epsilon", "1", *spelling])
    _assert_one_error_line(capsys, rc, expected)


def test_dbscan_hints_name_flags_that_exist(csv_file, capsys):
    rc = cli.main(["cluster", str(csv_file), "--algorithm", "dbscan", "--radius", "1e-12",
                   "--epsilon", "1", "--bounds", "-40", "40"])
    err = capsys.readouterr().err
    assert rc == 2 and "--radius" in err and "eta" not in err and "eps (alpha)" not in err


def test_a_long_stage_says_so_when_not_on_a_terminal(capsys):
    """Piped or logged, a stage that takes a second or more leaves a line (short ones stay
    quiet, so a user mistake is still one line)."""
    log = _cli_output._StageLog()
    now = [100.0]
    log._clock = lambda: now[0]
    log.set_description_str("fitting DPGaussianMixture")
    now[0] += 42.0
    log.update()
    log.set_description_str("writing")
    now[0] += 0.1
    log.update()
    log.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["privclust: fitting DPGaussianMixture: done in 42.0 s"]


def test_default_algorithm_finds_k_itself(csv_file, capsys):
    """Without --algorithm, `cluster` runs CoresetKMeans (no k, private bounds), on the Dask
    engine too (no switch to another algorithm)."""
    rc = cli.main(["cluster", str(csv_file), "--epsilon", "1", "--bounds", "private",
                   "--seed", "0"])
    out = capsys.readouterr().out
    assert rc == 0 and "Privacy report for CoresetKMeans" in out and "clusters found:" in out
    base = ["cluster", str(csv_file), "--epsilon", "1", "--bounds=0,1"]
    parse = cli.build_parser().parse_args
    assert cli._check_algorithm(parse(base))[0] == "coreset"
    assert cli._check_algorithm(parse([*base, "--engine", "dask"]))[0] == "coreset"
