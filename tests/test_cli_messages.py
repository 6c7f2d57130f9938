"""The command line's messages, help and human output, one regression test per report: flag
limits worded alike, estimator messages naming flags, noisy sizes below 0, the plan's verdict,
help that lists every algorithm an option applies to, the Morse base named, the plots' limits
and notes, and the demo's outputs."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

from privclust import DPDBSCAN, DPM, DPGaussianMixture, DPLloyd, MorseMerging, cli, io, viz
from privclust.registry import ENTRIES, morse_bases

SEED = 7


@pytest.fixture
def csv_file(tmp_path):
    X = np.random.default_rng(SEED).normal(size=(300, 2))
    path = tmp_path / "data.csv"
    np.savetxt(path, X, delimiter=",", header="a,b", comments="")
    return path


def _run(argv, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = cli.main([str(a) for a in argv])
    return rc, capsys.readouterr()


def _error(argv, capsys) -> str:
    rc, captured = _run(argv, capsys)
    lines = captured.err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, captured.err
    return lines[0].removeprefix("privclust: error: ")


# --------------------------------------------------------------------------- flag limits
@pytest.mark.parametrize(("flag", "value", "expected"), [
    ("--min-samples", "-2", "--min-samples must be a whole number of at least 1, got -2"),
    ("--min-samples", "0", "--min-samples must be a whole number of at least 1, got 0"),
    ("--seed", "-1", "--seed must be a whole number of at least 0, got -1"),
    ("--max-depth", "x", "--max-depth must be a whole number of at least 0, got 'x'"),
    ("--radius", "0", "--radius must be a positive number (e.g. 1.0), got 0"),
])
def test_flag_limits_are_worded_alike(csv_file, capsys, flag, value, expected):
    """Once "argument --min-samples: must be >= 0, got '-2'" and, for 0, "must be > 0"."""
    algo = ["--algorithm", "dbscan", "--radius", "1"] if flag != "--max-depth" else []
    extra = [] if flag == "--radius" else [flag, value]
    if flag == "--radius":
        algo = ["--algorithm", "dbscan", "--radius", value]
    msg = _error(["cluster", csv_file, "--epsilon", "1", "--bounds", "-3", "3", *algo, *extra],
                 capsys)
    assert msg.startswith(expected), msg


def test_a_huge_flag_value_is_not_echoed_in_full(csv_file, capsys):
    msg = _error(["cluster", csv_file, "--epsilon", "1", "--bounds", "-3", "3", "--algorithm",
                  "lloyd", "--n-clusters", "9" * 300 + ".5"], capsys)
    assert len(msg) < 200 and "9" * 40 not in msg


@pytest.mark.parametrize(("options", "expected", "python"), [
    ("--algorithm dpm --max-depth 40", "--max-depth 40 allows 2^40 clusters", "max_depth"),
    ("--algorithm lloyd --n-clusters 3 --iterations 100000", "--iterations 100000 is too large",
     "n_iter"),
    ("--algorithm morse --base lloyd --n-components 20000 --n-clusters 2",
     "--n-components 20000 is more than", "n_clusters"),
])
def test_estimator_messages_name_the_flags(csv_file, capsys, options, expected, python):
    """Once "max_depth=40 allows 2^40 clusters" for a user who typed --max-depth 40."""
    msg = _error(["cluster", csv_file, "--epsilon", "1", "--bounds", "-3", "3",
                  *options.split()], capsys)
    assert expected in msg and python not in msg, msg


def test_plan_names_the_flags_too(capsys):
    msg = _error(["plan", "--algorithm", "dpm", "--max-depth", "30", "--epsilon", "1",
                  "--bounds", "-3", "3", "--n", "100", "--d", "2"], capsys)
    assert msg.startswith("--max-depth 30"), msg


def test_missing_values_say_how_rows_and_columns_are_counted(tmp_path, capsys):
    path = tmp_path / "gap.csv"
    path.write_text("x,y\n1,2\n3,nan\n")
    msg = _error(["cluster", path, "--epsilon", "1", "--bounds", "-3", "3"], capsys)
    assert "row 1, column 1 ('y'); rows and columns counted from 0, header excluded" in msg


# --------------------------------------------------------------------------- human output
def test_noisy_sizes_below_zero_are_shown_as_zero_and_said(tmp_path, capsys):
    """Once -575, -19, -95 printed without a word; the model file keeps the release."""
    X = np.random.default_rng(0).normal(size=(150, 2))
    path = tmp_path / "small.csv"
    np.savetxt(path, X, delimiter=",")
    out = tmp_path / "m.json"
    rc, captured = _run(["cluster", path, "--algorithm", "lloyd", "--n-clusters", "8",
                         "--epsilon", "0.1", "--bounds", "-3", "3", "--seed", "0", "--out", out],
                        capsys)
    assert rc == 0, captured.err
    saved = io.load_model(out).cluster_sizes_
    assert (saved < 0).any()  # the release as drawn
    table = captured.out.split("cluster  noisy size")[1].split("iterations")[0]
    sizes = [int(line.split()[1]) for line in table.strip().splitlines()[1:]]
    assert min(sizes) == 0 and sizes == [max(int(s), 0) for s in saved]
    assert "noisy sizes below 0 after the noise are shown as 0 (post-processing)" in captured.out


def test_the_mixture_summary_clips_noisy_counts(capsys):
    from privclust import _summaries

    X = np.random.default_rng(0).normal(size=(200, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = DPGaussianMixture(6, epsilon=0.05, bounds=(-3, 3), n_iter=2, random_state=0).fit(X)
    if not (np.asarray(m.noisy_counts_) < 0).any():
        pytest.skip("no negative count at this seed")
    _summaries.print_mixture(m)
    out = capsys.readouterr().out
    assert "noisy counts below 0" in out and " -" not in out.split("noisy count")[1]


# --------------------------------------------------------------------------- the plan
def test_the_plan_says_plainly_when_a_fit_is_noise_dominated(capsys):
    """Once "separates clusters of at least 1 records" next to "counts off by about 285"."""
    rc, captured = _run(["plan", "--algorithm", "dpm", "--epsilon", "1", "--bounds", "-3", "3",
                         "--n", "150", "--d", "2"], capsys)
    assert rc == 0
    assert ("Verdict: at n = 150 and epsilon = 1, this fit is noise-dominated"
            in captured.out)
    assert not re.search(r"(?<![\d.,])1 records", captured.out)


@pytest.mark.parametrize("options", ["--algorithm dpm", "--algorithm lloyd --n-clusters 4",
                                     "--algorithm dbscan --radius 0.5",
                                     "--algorithm mixture --n-components 4"])
def test_every_plan_has_a_verdict_per_n(capsys, options):
    rc, captured = _run(["plan", *options.split(), "--epsilon", "1", "--bounds", "-3", "3",
                         "--n", "150", "200000", "--d", "2", "--json"], capsys)
    assert rc == 0
    plan = json.loads(captured.out)
    assert len(plan["verdict"]) == 2
    assert all(v.startswith("Verdict: at n = ") for v in plan["verdict"])
    assert "noise is small" in plan["verdict"][1]


def test_plan_refuses_private_bounds_and_does_not_offer_them(capsys):
    rc, captured = _run(["plan", "--help"], capsys)
    assert rc == 0 and "or 'private'" not in " ".join(captured.out.split())
    msg = _error(["plan", "--algorithm", "dpm", "--epsilon", "1", "--bounds", "private",
                  "--n", "100", "--d", "2"], capsys)
    assert "privclust plan needs public bounds" in msg and "--bounds LO HI" in msg


# --------------------------------------------------------------------------- help
def _help(capsys) -> str:
    rc, captured = _run(["cluster", "--help"], capsys)
    assert rc == 0
    return " ".join(captured.out.split())


def _option_help(text: str, flag: str) -> str:
    return text.split(f"{flag} ", 1)[1].split(" --", 1)[0]


def test_delta_help_lists_every_algorithm_that_takes_delta(capsys):
    text = _option_help(_help(capsys), "--delta DELTA")
    takes = [name for name, e in ENTRIES.items() if e.takes_delta]
    assert "lsh-splits" in takes
    for name in takes:
        assert name in text, (name, text)


def test_n_clusters_help_lists_every_algorithm_that_takes_it(capsys):
    text = _option_help(_help(capsys), "--n-clusters K").replace("- ", "-")
    for name, e in ENTRIES.items():
        if "n_clusters" in e.applicable():
            assert name in text, (name, text)


def test_base_and_n_components_help_list_every_base(capsys):
    text = _help(capsys)
    sized = [b for b, e in morse_bases().items() if e.morse_base.size_param]
    n_components = text.split("--n-components K0 ", 1)[1].split("--iterations T", 1)[0]
    assert "|".join(sized) in n_components


# --------------------------------------------------------------------------- Morse
def test_the_morse_warning_names_a_centre_base():
    """Once "the base mixture" for a DPM base."""
    X = np.random.default_rng(SEED).normal(size=(400, 2))
    with pytest.warns(UserWarning, match=r"the base DPM's centres give only \d+ live"):
        warnings.filterwarnings("ignore", message=".*clipped to them")
        MorseMerging(DPM(bounds=(-3, 3), max_depth=1), 50, epsilon=1.0,
                     random_state=0).fit(X)


# --------------------------------------------------------------------------- plots
@pytest.fixture
def plt():
    pytest.importorskip("matplotlib")
    viz.require_matplotlib()
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def test_a_centre_on_the_edge_is_drawn_whole(plt):
    X = np.random.default_rng(SEED).normal(size=(150, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = DPLloyd(8, epsilon=0.1, bounds=(-3, 3), random_state=0).fit(X)
    ax = viz.plot_clusters(X, m)
    centres = np.asarray(m.cluster_centers_)
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    margin = 0.05 * (x1 - x0)
    assert centres[:, 0].max() < x1 - margin and centres[:, 0].min() > x0 + margin
    assert centres[:, 1].max() < y1 - margin and centres[:, 1].min() > y0 + margin


def test_the_morse_plot_has_axis_labels_limits_and_the_raw_data_note(plt):
    X = np.random.default_rng(SEED).uniform(-1, 1, (1500, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = MorseMerging(DPGaussianMixture(4, bounds=(-1, 1), n_iter=2), 2, epsilon=2.0,
                         random_state=0).fit(X)
    ax = viz.plot_morse_density(m, X=X, feature_names=["u", "v"])
    assert ax.get_xlabel() == "u" and ax.get_ylabel() == "v"
    assert ax.get_xlim()[0] < -1 and ax.get_xlim()[1] > 1
    assert any("raw data, not private" in t.get_text() for t in ax.texts)
    ax2 = viz.plot_morse_density(m)
    assert not any("raw data" in t.get_text() for t in ax2.texts)


def test_the_spans_plot_notes_raw_data(plt):
    X = np.random.default_rng(SEED).normal(0, 0.3, (3000, 2))
    m = DPDBSCAN(1.0, eps=0.3, min_samples=10, bounds=(-3, 3), random_state=0).fit(X)
    ax = viz.plot_spans(m, X=X)
    assert ax.get_xlabel() == "x0"
    assert any("raw data, not private" in t.get_text() for t in ax.texts)


# --------------------------------------------------------------------------- demo
def test_the_demo_leaves_the_current_folder_alone(tmp_path, capsys, monkeypatch):
    """Once demo_model.json and demo_clusters.png written into the working folder (a
    checkout)."""
    monkeypatch.chdir(tmp_path)
    rc, captured = _run(["demo", "--seed", "0", "--n-samples", "3000"], capsys)
    assert rc == 0, captured.err
    assert list(tmp_path.iterdir()) == []
    written = re.search(r"wrote model: (\S+)", captured.out).group(1)
    assert written.endswith("demo_model.json") and io.load_model(written).n_clusters_ >= 1
    assert "--out-dir DIR" in captured.out
