"""Read a numeric table (CSV/TSV, NPY, NPZ, Parquet) into a float array for clustering.

:func:`read_table` returns ``(X, column_names)``. Every problem a user can cause (missing file,
unknown extension, empty file, a non-numeric column, ragged rows, an object array) raises a
``FileNotFoundError``/``ValueError``/``ImportError`` whose message names the file and what to do.
Missing values (empty fields, ``NA``, ``NaN``) are read as NaN; the estimators reject NaN with a
message naming the row, so they are never silently dropped.

A text table's format (separator, header, comment and blank lines) is decided once, from its
first lines, by :func:`sniff_csv`; the NumPy engine parses the file with that decision and the
Dask engine (:func:`read_table_lazy`) hands the same decision to ``dask.dataframe.read_csv``, so
both engines read the same records under the same column names.
"""

from __future__ import annotations

import csv
import io
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "LAZY_NAN_HINT",
    "SUPPORTED_EXTENSIONS",
    "TEXT_EXTENSIONS",
    "CsvFormat",
    "lazy_read_error",
    "read_table",
    "read_table_lazy",
    "sniff_csv",
]

SUPPORTED_EXTENSIONS = (".csv", ".tsv", ".txt", ".npy", ".npz", ".parquet", ".pq")
#: The text tables (read by both engines with one :class:`CsvFormat`).
TEXT_EXTENSIONS = (".csv", ".tsv", ".txt")
_MISSING = {"", "na", "nan", "n/a", "null", "none", "-nan"}
_PARQUET_HINT = 'reading Parquet files needs pyarrow: pip install "privclust[parquet]"'


def read_table(
    path: str | os.PathLike[str], has_header: bool | str = "auto"
) -> tuple[np.ndarray, list[str]]:
    """Read ``path`` into ``(X, column_names)``; X is a 2-D float32/float64 array.

    * ``.csv`` / ``.tsv`` / ``.txt``: numeric columns, separator ``,`` (``;`` or tab detected;
      runs of spaces and tabs for a ``.txt`` file without either), ``#`` starts a comment, blank
      lines skipped (the rules: :class:`CsvFormat`). ``has_header``: ``True``, ``False`` or
      ``"auto"`` (the first row is a header when it has a non-numeric field where the second row
      is numeric, or when every field is non-numeric). Without a header columns are named
      ``x0, x1, ...``.
    * ``.npy``: a 2-D numeric array (or a structured array with numeric fields).
    * ``.npz``: the array ``X``, or the only array in the file.
    * ``.parquet`` / ``.pq``: numeric columns (needs pyarrow).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"input file {path} does not exist")
    if path.is_dir():
        if any(path.glob("*.parquet")):
            raise ValueError(
                f"{path} is a folder of Parquet files, which privclust cluster reads with "
                "--engine dask only: add --engine dask (pip install 'privclust[dask]') or give "
                "a single data file")
        kinds = ", ".join(SUPPORTED_EXTENSIONS)
        raise ValueError(f"{path} is a folder; give a data file ({kinds})")
    _check_has_header(has_header)
    suffix = path.suffix.lower()
    if suffix in TEXT_EXTENSIONS:
        X, names = _read_csv(path, has_header)
    elif suffix == ".npy":
        X, names = _read_npy(path)
    elif suffix == ".npz":
        X, names = _read_npz(path)
    elif suffix in (".parquet", ".pq"):
        X, names = _read_parquet(path)
    else:
        raise ValueError(
            f"{path}: unknown file type {suffix or '(no extension)'!r}; privclust reads "
            f"{', '.join(SUPPORTED_EXTENSIONS)}"
        )
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{path} contains no data (shape {X.shape}); it needs rows and columns")
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    return X, names


# --------------------------------------------------------------------------------------------
# CSV: one format, decided from the first lines, read by both engines
# --------------------------------------------------------------------------------------------

#: Spellings of a missing value for the Dask engine's parser (the NumPy engine compares the
#: lower-cased field with ``_MISSING``); both engines then refuse the missing value.
_NA_SPELLINGS = sorted({s for m in _MISSING for s in (m, m.upper(), m.title())}
                       | {"NaN", "-NaN", "N/A"})
#: Bytes the Dask engine's parser samples for the column types (``dask.dataframe.read_csv``).
_SAMPLE_BYTES = 256_000


@dataclass(frozen=True)
class CsvFormat:
    r"""How a text table is read, decided once from its first lines and used by both engines:
    the NumPy engine (:func:`read_table`) parses the file with it, the Dask engine
    (:func:`read_table_lazy`) hands it to ``dask.dataframe.read_csv``
    (:meth:`pandas_options`), so both read the same records under the same column names.

    The rules: lines end with ``\n``, ``\r\n`` or ``\r``; ``#`` starts a comment that runs
    to the end of the line (outside double quotes); a line left with no value (empty, spaces
    and tabs, a comment) is skipped; the first remaining line is the header when ``header``.
    pandas' parser departs from them in one place: it reads a comment indented by spaces, or a
    line of tabs in a tab-separated file, as a row of missing values, so after the first record
    such a line makes the Dask engine refuse the file (missing values) where the NumPy engine
    skips it; before the first record both skip it (``skip_lines``).

    Attributes
    ----------
    delimiter : str
        ``","``, ``";"``, ``"\t"``, or ``" "`` for runs of spaces and tabs.
    header : bool
        Whether the first line with values holds the column names.
    names : tuple of str
        The header's fields (an empty one named ``x{j}``), or ``x0, x1, ...`` without a header.
    skip_lines : int
        The lines before the first record (comments, blank lines, the header).
    line_end : str
        ``"\r"`` for a file whose lines end with a carriage return alone, else ``"\n"``.
    """

    delimiter: str
    header: bool
    names: tuple[str, ...]
    skip_lines: int = 0
    line_end: str = "\n"

    def split(self, lines: list[str]) -> list[list[str]]:
        """The fields of each line (quotes removed, spaces around them stripped)."""
        return _split(lines, self.delimiter)

    def pandas_options(self) -> dict:
        """Keyword arguments of ``pandas.read_csv`` (and ``dask.dataframe.read_csv``) that read
        the records of this format as float64 columns ``0, 1, ...``, plus one more column that
        catches a value past the last column (a row with too many fields: the parser would drop
        it silently from a block starting with that row), which must stay empty."""
        import pandas as pd

        keys = list(range(len(self.names) + 1))
        options = {
            "sep": r"\s+" if self.delimiter == " " else self.delimiter,
            "header": None,
            "skiprows": self.skip_lines,  # lines of the file, comments and blank ones included
            "names": keys,
            "index_col": False,
            "comment": "#",
            "quotechar": '"',
            "skipinitialspace": True,
            "skip_blank_lines": True,
            "dtype": dict.fromkeys(keys, "float64"),
            "keep_default_na": False,
            "na_values": _NA_SPELLINGS,
        }
        if self.line_end == "\r":
            options["lineterminator"] = "\r"
        if int(pd.__version__.split(".")[0]) < 3:  # pandas 3 rounds correctly by default
            options["float_precision"] = "round_trip"
        return options


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _is_numeric_or_missing(field: str) -> bool:
    return field.strip().lower() in _MISSING or _is_number(field)


def _detect_delimiter(first_line: str, suffix: str) -> str:
    if suffix == ".tsv":
        return "\t"
    for delim in (",", ";", "\t"):
        if delim in first_line:
            return delim
    return "," if suffix == ".csv" else " "


def _values(line: str) -> str | None:
    """``line`` without its comment, or None when no value is left (blank or comment line)."""
    if "#" in line:
        quoted = False
        for i, ch in enumerate(line):
            if ch == '"':
                quoted = not quoted
            elif ch == "#" and not quoted:
                line = line[:i]
                break
    return line if line.strip() else None


def _data_lines(raw_lines):
    """(line number, values) of every line that holds values."""
    for lineno, line in enumerate(raw_lines, start=1):
        values = _values(line)
        if values is not None:
            yield lineno, values


def _first_lines(raw_lines) -> list[tuple[int, str]]:
    """The first two lines with values, as (line number, values); reads no further."""
    head: list[tuple[int, str]] = []
    for item in _data_lines(raw_lines):
        head.append(item)
        if len(head) == 2:
            break
    return head


def _split(lines: list[str], delim: str) -> list[list[str]]:
    if delim == " ":
        rows = [ln.split() for ln in lines]
    else:
        rows = list(csv.reader(io.StringIO("\n".join(lines)), delimiter=delim,
                               skipinitialspace=True))
    return [[f.strip() for f in r] for r in rows]


def _has_header(head: list[list[str]]) -> bool:
    """Whether the first of these (at most two) rows is a header: it has a non-number where
    the next row has a number, or (alone) no number at all."""
    first = head[0]
    first_numeric = [_is_numeric_or_missing(f) for f in first]
    if all(first_numeric):
        return False
    if len(head) > 1 and len(head[1]) == len(first):
        header = not all(first_numeric[j] or not _is_number(head[1][j])
                         for j in range(len(first)))
        return header or not any(first_numeric)
    return not any(first_numeric)


def _ragged(path: Path, lineno: int, fields: int, width: int, delim: str) -> ValueError:
    return ValueError(f"{path}, line {lineno}: {fields} field(s) where {width} were expected "
                      f"(separator {delim!r}); every row needs one value per column")


def _decide(path: Path, head, has_header, line_end: str = "\n") -> CsvFormat:
    """The format of a table from its first two lines with values (see :func:`_first_lines`)."""
    if not head:
        raise ValueError(f"{path} is empty: it has no data rows")
    delim = _detect_delimiter(head[0][1], path.suffix.lower())
    rows = _split([ln for _, ln in head], delim)
    header = _has_header(rows) if has_header == "auto" else bool(has_header)
    if header and len(head) < 2:
        raise ValueError(f"{path} has a header but no data rows")
    if header:
        names = tuple(f or f"x{j}" for j, f in enumerate(rows[0]))
        if len(rows[1]) != len(names):  # the first record
            raise _ragged(path, head[1][0], len(rows[1]), len(names), delim)
    else:
        names = tuple(f"x{j}" for j in range(len(rows[0])))
    first_record = head[int(header)][0]
    return CsvFormat(delim, header, names, first_record - 1, line_end)


def _check_has_header(has_header) -> None:
    if has_header not in (True, False, "auto"):
        raise ValueError(f"has_header must be True, False or 'auto', got {has_header!r}")


def _not_utf8(path: Path) -> ValueError:
    return ValueError(f"{path} is not a UTF-8 text file; save it as CSV text (or as .npy/.parquet)")


def sniff_csv(path: str | os.PathLike[str], has_header: bool | str = "auto") -> CsvFormat:
    """The :class:`CsvFormat` of the text table ``path``, decided from its first lines only
    (the same decision :func:`read_table` makes): the separator from the first line with
    values, the header (``has_header``: ``True``, ``False`` or ``"auto"``) from the first two."""
    path = Path(path)
    _check_has_header(has_header)
    try:
        with open(path, encoding="utf-8-sig") as f:  # universal newlines, as read_table
            head = _first_lines(line.rstrip("\n") for line in f)
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    with open(path, "rb") as f:
        start = f.read(1 << 16)
    return _decide(path, head, has_header, "\r" if b"\r" in start and b"\n" not in start
                   else "\n")


def _parse_fields(path: Path, rows, linenos, names, header) -> np.ndarray:
    """The slow, exact reader: column by column, missing values to NaN, and the first field
    that is not a number named with its line."""
    width = len(names)
    table = np.array(rows, dtype=object).reshape(len(rows), width)
    X = np.empty((len(rows), width), dtype=np.float64)
    for j in range(width):
        col = table[:, j]
        try:
            X[:, j] = col.astype(np.float64)
            continue
        except ValueError:
            pass
        for i, field in enumerate(col):
            if field.lower() in _MISSING:
                X[i, j] = np.nan
            elif _is_number(field):
                X[i, j] = float(field)
            else:
                label = f"column {names[j]!r}" if header else f"column {j} (counted from 0)"
                shown = field if len(field) <= 40 else field[:37] + "..."
                raise ValueError(
                    f"{path}: {label} is not numeric (line {linenos[i]}: {shown!r}); drop that "
                    "column or encode it as numbers before clustering"
                )
    return X


def _read_csv(path: Path, has_header) -> tuple[np.ndarray, list[str]]:
    try:
        raw = path.read_text(encoding="utf-8-sig").split("\n")  # universal newlines
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    fmt = _decide(path, _first_lines(raw), has_header)
    lines = list(_data_lines(raw))[int(fmt.header):]
    names, delim, width = list(fmt.names), fmt.delimiter, len(fmt.names)

    # Fast path: NumPy's C parser. Anything unusual (missing values, text, ragged rows) falls
    # through to the field-by-field reader below, which says exactly what is wrong.
    try:
        X = np.loadtxt(io.StringIO("\n".join(ln for _, ln in lines)), dtype=np.float64,
                       delimiter=None if delim == " " else delim, quotechar='"',
                       comments=None, ndmin=2)
        if X.shape == (len(lines), width):
            return X, names
    except ValueError:
        pass
    rows = fmt.split([ln for _, ln in lines])
    linenos = [n for n, _ in lines]
    for r, lineno in zip(rows, linenos, strict=True):
        if len(r) != width:
            raise _ragged(path, lineno, len(r), width, delim)

    return _parse_fields(path, rows, linenos, names, fmt.header), names


def read_table_lazy(path: str | os.PathLike[str], has_header: bool | str = "auto", *,
                    blocksize="default"):
    """Read the text table ``path`` lazily for the Dask engine: ``(frame, names)``, a dask
    DataFrame of float64 columns holding the records :func:`read_table` reads, and the column
    names it gives (needs the ``dask`` extra).

    :func:`sniff_csv` decides the format from the file's first lines; ``dask.dataframe.read_csv``
    parses the blocks when the frame is computed (:func:`lazy_read_error` words what it
    raises there). ``blocksize`` is ``read_csv``'s (bytes per partition)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"input file {path} does not exist" if not path.exists()
                                else f"{path} is not a file")
    if path.suffix.lower() not in TEXT_EXTENSIONS:
        kinds = ", ".join(TEXT_EXTENSIONS)
        raise ValueError(f"{path}: a table read lazily is a text file ({kinds})")
    fmt = sniff_csv(path, has_header)
    try:
        import dask.dataframe as dd
        from dask.utils import parse_bytes
    except ImportError:
        raise ImportError("reading a table lazily needs the dask extra: "
                          "pip install 'privclust[dask]'") from None
    # read_csv checks its sample of the first lines against skiprows without the comment and
    # blank lines (and shrinks it below the block size): past one skipped line, it reads the
    # first block whole instead.
    small = isinstance(blocksize, (int, str)) and blocksize != "default" and \
        parse_bytes(blocksize) < _SAMPLE_BYTES
    sample = False if fmt.skip_lines > 1 or (fmt.skip_lines and small) else _SAMPLE_BYTES
    try:  # read_csv parses the first lines now (the column types), the rest when computed
        frame = dd.read_csv(str(path), blocksize=blocksize, sample=sample,
                            **fmt.pandas_options())
    except ValueError as exc:
        raise lazy_read_error(path, exc) from None
    names = list(fmt.names)
    columns = names if len(set(names)) == len(names) else list(range(len(names)))
    meta = frame._meta.iloc[:, :-1].set_axis(columns, axis=1)
    return frame.map_partitions(_named_columns, str(path), columns, meta=meta), names


def _named_columns(part, path: str, columns: list):
    """A partition of :func:`read_table_lazy`'s frame under the table's column names, once its
    last column (values past the table's columns) is found empty."""
    extra = part.iloc[:, -1]
    if extra.notna().any():
        value = float(extra.dropna().iloc[0])
        raise ValueError(f"{path}: a row has more than {len(columns)} field(s) (value {value:g} "
                         "past the last column); every row needs one value per column")
    return part.iloc[:, :-1].set_axis(columns, axis=1)


#: What the Dask engine adds to a message about missing values in a text table.
LAZY_NAN_HINT = ("rows and columns counted from 0, header excluded; the Dask engine reads a "
                 "comment line indented by spaces, or a line of tabs in a tab-separated file, "
                 "as a row of missing values")


def lazy_read_error(path, exc: BaseException) -> ValueError:
    """The message for an error raised while a :func:`read_table_lazy` frame is parsed (a field
    that is not a number, a row with too many fields, bytes that are not UTF-8)."""
    text = str(exc)
    if "Original Message:" in text:  # dask's wrapper around pandas' message
        text = text.split("Original Message:", 1)[1]
    detail = " ".join(text.split()) or type(exc).__name__
    not_a_number = re.search(r"could not convert string to float: (.*)", detail)
    if not_a_number:  # the parser's words, in the user's terms
        field = not_a_number.group(1)
        detail = f"the field {field[:40] + ('...' if len(field) > 40 else '')} is not a number"
    elif "fields" in detail and ("Expected" in detail or "saw" in detail):
        detail = "a row has more fields than the first one"
    elif "codec can't decode" in detail:
        detail = "the file is not UTF-8 text"
    return ValueError(
        f"{path} could not be read as a table of numbers ({detail[:120]}); every row needs one "
        "number per column: drop or encode text columns and check the separator")


# --------------------------------------------------------------------------------------------
# NumPy
# --------------------------------------------------------------------------------------------


def _as_table(arr: np.ndarray, source: str) -> tuple[np.ndarray, list[str]]:
    if arr.dtype.names:  # structured array: one column per numeric field
        from numpy.lib import recfunctions

        for name in arr.dtype.names:
            kind = arr.dtype[name].kind
            if kind not in "biuf":
                raise ValueError(
                    f"{source}: field {name!r} is not numeric (dtype {arr.dtype[name]}); drop "
                    "that field or encode it as numbers before clustering"
                )
        names = list(arr.dtype.names)
        arr = recfunctions.structured_to_unstructured(arr.reshape(-1), dtype=np.float64)
        return arr, names
    if arr.dtype.kind not in "biuf":
        raise ValueError(
            f"{source} holds {arr.dtype} values; privclust needs a numeric array (int or float)"
        )
    if arr.ndim == 1:
        raise ValueError(
            f"{source} holds a 1-D array of {arr.shape[0]} values; save it as a 2-D array "
            "(n_samples, n_features), e.g. X.reshape(-1, 1) for one feature"
        )
    if arr.ndim != 2:
        raise ValueError(
            f"{source} holds an array of shape {arr.shape}; expected 2-D (n_samples, n_features)"
        )
    return arr, [f"x{j}" for j in range(arr.shape[1])]


def _np_load(path: Path):
    with open(path, "rb") as f:
        magic = f.read(6)
    expected = b"\x93NUMPY" if path.suffix.lower() == ".npy" else b"PK"
    if not magic.startswith(expected):
        kind = "a NumPy .npy file" if expected == b"\x93NUMPY" else "a NumPy .npz archive"
        raise ValueError(f"{path} is not {kind} (it may be empty, truncated or of another type)")
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc):
            raise ValueError(
                f"{path} holds Python objects (pickled); privclust reads numeric arrays only "
                "and never unpickles. Save a float array instead."
            ) from None
        raise ValueError(f"{path} is not a readable NumPy file: {exc}") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path} is not a readable NumPy file ({exc}); is it truncated?") from None


def _read_npy(path: Path) -> tuple[np.ndarray, list[str]]:
    arr = _np_load(path)
    if not isinstance(arr, np.ndarray):
        raise ValueError(f"{path} is not a .npy array file")
    return _as_table(arr, str(path))


def _read_npz(path: Path) -> tuple[np.ndarray, list[str]]:
    archive = _np_load(path)
    if not hasattr(archive, "files"):
        raise ValueError(f"{path} is not a .npz archive")
    with archive as f:
        if not f.files:
            raise ValueError(f"{path} is empty: the archive holds no arrays")
        if "X" in f.files:
            key = "X"
        elif len(f.files) == 1:
            key = f.files[0]
        else:
            raise ValueError(
                f"{path} holds several arrays ({', '.join(f.files)}) and none is named 'X'; "
                "save the data as X (np.savez(path, X=data))"
            )
        try:
            arr = f[key]
        except ValueError as exc:
            raise ValueError(
                f"{path}: array {key!r} cannot be read without unpickling ({exc}); save a "
                "numeric array instead"
            ) from None
        return _as_table(arr, f"{path} (array {key!r})")


# --------------------------------------------------------------------------------------------
# Parquet
# --------------------------------------------------------------------------------------------


def _read_parquet(path: Path) -> tuple[np.ndarray, list[str]]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(_PARQUET_HINT) from None
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{path} is not a readable Parquet file: {exc}") from None
    names = list(table.column_names)
    if table.num_rows == 0 or not names:
        raise ValueError(f"{path} contains no data (shape ({table.num_rows}, {len(names)}))")
    X = np.empty((table.num_rows, len(names)), dtype=np.float64)
    for j, name in enumerate(names):
        col = table.column(j)
        t = col.type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
                or pa.types.is_decimal(t)):
            raise ValueError(
                f"{path}: column {name!r} is not numeric (type {t}); drop that column or "
                "encode it as numbers before clustering"
            )
        if pa.types.is_decimal(t) or pa.types.is_boolean(t):
            col = col.cast(pa.float64())
        X[:, j] = col.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    return X, names
