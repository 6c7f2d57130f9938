"""Text tables read by both engines (privclust._readers): one format, decided from the first
lines by ``sniff_csv``, gives the NumPy engine (``read_table``) and the Dask engine
(``read_table_lazy``, then ``privclust cluster --engine dask``) the same records, values and
column names."""

import json

import numpy as np
import pytest

from privclust import cli
from privclust._readers import CsvFormat, read_table, read_table_lazy, sniff_csv

# (file name, text, has_header, expected records, expected names)
CASES = {
    "no header, decimal first row": (
        "c.csv", "0.1,0.2\n0.3,0.4\n1,2\n3,4\n5,6\n", "auto",
        [[0.1, 0.2], [0.3, 0.4], [1, 2], [3, 4], [5, 6]], ["x0", "x1"]),
    "header": ("h.csv", "x,y\n1,2\n3.5,-4e1\n", "auto", [[1, 2], [3.5, -40]], ["x", "y"]),
    "semicolon with header": ("s.csv", "a;b\n1;2\n3;4\n", "auto", [[1, 2], [3, 4]], ["a", "b"]),
    "semicolon without header": (
        "s.csv", "1.5;2\n3;4\n", "auto", [[1.5, 2], [3, 4]], ["x0", "x1"]),
    "tab-separated": ("t.tsv", "a\tb\n1\t2\n3\t4\n", "auto", [[1, 2], [3, 4]], ["a", "b"]),
    "tab detected in a .csv": ("t.csv", "1\t2\n3\t4\n", "auto", [[1, 2], [3, 4]], ["x0", "x1"]),
    "whitespace-separated .txt": (
        "w.txt", "1 2  3\n 4\t5 6 \n\n7   8 9\n", "auto", [[1, 2, 3], [4, 5, 6], [7, 8, 9]],
        ["x0", "x1", "x2"]),
    "whitespace .txt with header": (
        "w.txt", "# made by hand\n  a b\n1 2\n", "auto", [[1, 2]], ["a", "b"]),
    "comment lines": (
        "k.csv", "# generated\n# by hand\nx,y\n1,2\n# middle\n3,4\n# end\n", "auto",
        [[1, 2], [3, 4]], ["x", "y"]),
    "comments after the values": (
        "k.csv", "1,2 # first\n3,4# second\n", "auto", [[1, 2], [3, 4]], ["x0", "x1"]),
    "indented comments before the data": (
        "k.csv", "  # note\n\t# more\n# last\nx,y\n1,2\n3,4\n", "auto", [[1, 2], [3, 4]],
        ["x", "y"]),
    "indented comment before headerless data": (
        "k.csv", "   # note\n1,2\n3,4\n", "auto", [[1, 2], [3, 4]], ["x0", "x1"]),
    "blank lines": (
        "b.csv", "\n\nx,y\n\n1,2\n   \n3,4\n\n\n", "auto", [[1, 2], [3, 4]], ["x", "y"]),
    "quoted numbers are numbers": (
        "q.csv", '"1","2"\n3,4\n', "auto", [[1, 2], [3, 4]], ["x0", "x1"]),
    "a header of numbers, forced": (
        "n.csv", "1,2\n3,4\n5,6\n", True, [[3, 4], [5, 6]], ["1", "2"]),
    "a header of quoted numbers, forced": (
        "n.csv", '"10","20"\n3,4\n', True, [[3, 4]], ["10", "20"]),
    "no header, forced": ("n.csv", "1,2\n3,4\n", False, [[1, 2], [3, 4]], ["x0", "x1"]),
    "quotes and spaces": (
        "q.csv", '"a", "b"\n"1.5", 2\n 3 ,"4"\n', "auto", [[1.5, 2], [3, 4]], ["a", "b"]),
    "CRLF line ends": (
        "r.csv", "x,y\r\n1,2\r\n\r\n# c\r\n3,4\r\n", "auto", [[1, 2], [3, 4]], ["x", "y"]),
    "CR line ends": ("r.csv", "1,2\r3,4\r", "auto", [[1, 2], [3, 4]], ["x0", "x1"]),
    "byte order mark": ("m.csv", "\ufeffx,y\n1,2\n", "auto", [[1, 2]], ["x", "y"]),
    "single column": ("o.csv", "v\n1\n2.5\n-3\n", "auto", [[1], [2.5], [-3]], ["v"]),
    "single column, no header": ("o.csv", "1\n2\n", "auto", [[1], [2]], ["x0"]),
    "one record": ("1.csv", "1,2,3\n", "auto", [[1, 2, 3]], ["x0", "x1", "x2"]),
    "one record under a header": ("1.csv", "a,b\n1,2", "auto", [[1, 2]], ["a", "b"]),
    "repeated and empty names": (
        "d.csv", "a,a,\n1,2,3\n", "auto", [[1, 2, 3]], ["a", "a", "x2"]),
    "integers and exponents": (
        "e.csv", "1,-2\n+3,4e-1\n.5,1E3\n", "auto", [[1, -2], [3, 0.4], [0.5, 1000]],
        ["x0", "x1"]),
}


@pytest.fixture
def lazy(dask_client):
    """``read_table_lazy`` computed on the session's Dask cluster: (records, names)."""
    pytest.importorskip("dask.dataframe")

    def read(path, has_header="auto", blocksize="default"):
        frame, names = read_table_lazy(path, has_header, blocksize=blocksize)
        assert list(frame.dtypes.astype(str)) == ["float64"] * len(names)
        return frame.compute().to_numpy(dtype=np.float64), names

    return read


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.mark.parametrize("case", list(CASES))
def test_both_engines_read_the_same_records(case, tmp_path, lazy):
    name, text, has_header, expected, names = CASES[case]
    path = _write(tmp_path, name, text)
    X, got_names = read_table(path, has_header=has_header)
    np.testing.assert_array_equal(X, np.array(expected, dtype=np.float64))
    assert got_names == names
    # 26 bytes: every header above starts in the first partition, the records are split
    for blocksize in ("default", 26):
        D, lazy_names = lazy(path, has_header, blocksize)
        assert lazy_names == names, blocksize
        np.testing.assert_array_equal(D, X)


def test_many_partitions_and_every_digit(tmp_path, lazy):
    """Values written with all their digits come back bit for bit, across many partitions."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 3)) * 10.0 ** rng.integers(-200, 200, size=(3000, 3))
    X[::5] = rng.uniform(-1, 1, size=X[::5].shape)
    lines = [",".join(repr(float(v)) for v in row) for row in X]
    lines[100:100] = ["# a comment", "", "   "]
    for end in ("\n", "\r\n", "\r"):
        text = end.join(["# first", "  # second", "", "f0,f1,f2", *lines, ""])
        path = _write(tmp_path, "big.csv", text)
        A, names = read_table(path)
        np.testing.assert_array_equal(A, X)
        for blocksize in ("default", 4096):
            D, lazy_names = lazy(path, blocksize=blocksize)
            assert names == lazy_names == ["f0", "f1", "f2"]
            np.testing.assert_array_equal(D, X)


def test_sniff_decides_from_the_first_lines_only(tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes(b"# c\nx;y\n" + b"1;2\n" * 50_000 + b"\xff\xfe not text\n")
    fmt = sniff_csv(path)
    assert fmt == CsvFormat(";", True, ("x", "y"), skip_lines=2)
    with pytest.raises(ValueError, match="not a UTF-8 text file"):
        read_table(path)
    assert sniff_csv(path, has_header=False).names == ("x0", "x1")
    path.write_text("  # indented\n\t\n1\t2\n")
    assert sniff_csv(path) == CsvFormat("\t", False, ("x0", "x1"), skip_lines=2)
    path.write_bytes(b"a b\r1 2\r")
    assert sniff_csv(path) == CsvFormat(",", True, ("a b",), skip_lines=1, line_end="\r")
    path.write_text("")
    with pytest.raises(ValueError, match="is empty"):
        sniff_csv(path)
    path.write_text("x,y\n# no data\n")
    with pytest.raises(ValueError, match="has a header but no data rows"):
        sniff_csv(path)
    with pytest.raises(ValueError, match="has_header"):
        sniff_csv(path, has_header="maybe")


def test_pandas_options_carry_the_decision():
    pytest.importorskip("pandas")
    opts = CsvFormat(";", True, ("a", "b"), skip_lines=3).pandas_options()
    assert opts["sep"] == ";" and opts["header"] is None and opts["skiprows"] == 3
    assert opts["names"] == [0, 1, 2]  # the last one catches values past the last column
    assert opts["comment"] == "#" and opts["dtype"] == dict.fromkeys([0, 1, 2], "float64")
    opts = CsvFormat(" ", False, ("x0",), line_end="\r").pandas_options()
    assert opts["sep"] == r"\s+" and opts["lineterminator"] == "\r" and opts["skiprows"] == 0


def test_lazy_reader_refuses_what_the_numpy_engine_refuses(tmp_path, lazy):
    bad = _write(tmp_path, "bad.csv", "x,y\n1,2\n3,abc\n")
    with pytest.raises(ValueError, match="column 'y' is not numeric"):
        read_table(bad)
    with pytest.raises(ValueError, match="could not be read as a table of numbers.*'abc'"):
        lazy(bad)
    # a row with more fields than the header: refused, wherever it falls in the partitions
    rows = "".join(f"{i},{i}\n" for i in range(40))
    for text in ("x,y\n1,2,,7\n3,4,,8\n", "x,y\n" + rows + "3,4,5\n" + rows):
        path = _write(tmp_path, "long.csv", text)
        with pytest.raises(ValueError, match="field"):
            read_table(path)
        for blocksize in ("default", 26, 64):
            with pytest.raises(ValueError, match="field"):
                lazy(path, blocksize=blocksize)
    # pandas' parser reads an indented comment, or a line of tabs in a tab-separated file, as a
    # row of missing values: the Dask engine refuses such a file (NaN), never reads it otherwise
    for name, text in (("i.csv", "x,y\n1,2\n  # indented\n3,4\n"), ("t.tsv", "1\t2\n\t\n3\t4\n")):
        path = _write(tmp_path, name, text)
        assert read_table(path)[0].tolist() == [[1, 2], [3, 4]]
        D, _ = lazy(path)
        assert D.shape == (3, 2) and np.isnan(D[1]).all()
    with pytest.raises(ValueError, match="text file"):
        lazy(_write(tmp_path, "a.npy", "x"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        lazy(tmp_path / "nope.csv")


# --------------------------------------------------------------------------------------------
# the command line
# --------------------------------------------------------------------------------------------

_COMMON = ["--algorithm", "dpm", "--epsilon", "1", "--bounds", "-10", "10", "--seed", "5"]


def _cluster(path, *extra, capsys):
    """Exit status, stdout and the error lines of ``privclust cluster PATH ...``."""
    code = cli.main(["cluster", str(path), *_COMMON, *extra])
    captured = capsys.readouterr()
    errors = "".join(line for line in captured.err.splitlines(keepends=True)
                     if not line.startswith("privclust: warning:"))
    return code, captured.out, errors


@pytest.mark.parametrize("header", [[], ["--header", "no"], ["--header", "yes"]])
def test_command_line_dask_reads_the_records_numpy_reads(header, tmp_path, capsys,
                                                         dask_client):
    """The issue: a headerless CSV whose first row is decimals lost that row with
    ``--engine dask``. Both engines now count the same points and release the same model."""
    pytest.importorskip("dask.dataframe")
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(c, 0.5, size=(150, 2)) for c in (-5, 0, 5)])
    X[0] = [0.1, 0.2]
    path = tmp_path / "c.csv"
    path.write_text("\n".join(f"{a!r},{b!r}" for a, b in X.tolist()) + "\n")
    n = len(X) - (header == ["--header", "yes"])
    outs = {}
    for engine in ("numpy", "dask"):
        model = tmp_path / f"{engine}.json"
        extra = ["--engine", "dask", "--scheduler", dask_client.scheduler.address] \
            if engine == "dask" else []
        code, out, err = _cluster(path, *header, *extra, "--out", str(model), capsys=capsys)
        assert code == 0, err
        assert f"{n:,} points x 2 feature(s)" in out, out
        outs[engine] = json.loads(model.read_text())["model"]
    assert outs["dask"] == outs["numpy"]


def test_command_line_semicolons_with_dask(tmp_path, capsys, dask_client):
    pytest.importorskip("dask.dataframe")
    path = tmp_path / "s.csv"
    path.write_text("a;b\n" + "".join(f"{i % 7}.5;{i % 5}\n" for i in range(40)))
    code, out, err = _cluster(path, "--engine", "dask", "--scheduler",
                              dask_client.scheduler.address, capsys=capsys)
    assert code == 0, err
    assert "40 points x 2 feature(s)" in out


def test_command_line_dask_errors_are_one_line(tmp_path, capsys, dask_client):
    pytest.importorskip("dask.dataframe")
    scheduler = ["--engine", "dask", "--scheduler", dask_client.scheduler.address]
    bad = tmp_path / "bad.csv"
    bad.write_text("x,y\n1,2\n3,abc\n")
    code, _, err = _cluster(bad, *scheduler, capsys=capsys)
    assert code == 2 and "could not be read as a table of numbers" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    gap = tmp_path / "gap.csv"
    gap.write_text("x,y\n1,2\n3,\n")
    for extra in ([], scheduler):
        code, _, err = _cluster(gap, *extra, capsys=capsys)
        assert code == 2 and "NaN" in err and "row 1, column 1" in err


def test_parquet_folder_without_dask_says_what_to_do(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    folder = tmp_path / "data.parquet"
    folder.mkdir()
    pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]}).to_parquet(folder / "part0.parquet")
    code, _, err = _cluster(folder, capsys=capsys)
    message = err.strip().removeprefix("privclust: error: ").replace(str(folder), "DIR")
    assert code == 2 and err.count("\n") == 1
    assert "folder of Parquet files" in message and "add --engine dask" in message
    assert len(message) < 300 and message.count(". ") == 0
    other = tmp_path / "empty"
    other.mkdir()
    with pytest.raises(ValueError, match="is a folder; give a data file"):
        read_table(other)
