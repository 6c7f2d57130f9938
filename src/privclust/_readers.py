"""Read a numeric table (CSV/TSV, NPY, NPZ, Parquet) into a float array for clustering.

:func:`read_table` returns ``(X, column_names)``. Every problem a user can cause (missing file,
unknown extension, empty file, a non-numeric column, ragged rows, an object array) raises a
``FileNotFoundError``/``ValueError``/``ImportError`` whose message names the file and what to do.
Missing values (empty fields, ``NA``, ``NaN``) are read as NaN; the estimators reject NaN with a
message naming the row, so they are never silently dropped.
"""

from __future__ import annotations

import csv
import io
import os
import zipfile
from pathlib import Path

import numpy as np

__all__ = ["SUPPORTED_EXTENSIONS", "read_table"]

SUPPORTED_EXTENSIONS = (".csv", ".tsv", ".txt", ".npy", ".npz", ".parquet", ".pq")
_MISSING = {"", "na", "nan", "n/a", "null", "none", "-nan"}
_PARQUET_HINT = 'reading Parquet files needs pyarrow: pip install "privclust[parquet]"'


def read_table(
    path: str | os.PathLike[str], has_header: bool | str = "auto"
) -> tuple[np.ndarray, list[str]]:
    """Read ``path`` into ``(X, column_names)``; X is a 2-D float32/float64 array.

    * ``.csv`` / ``.tsv`` / ``.txt``: numeric columns, separator ``,`` (``;`` or tab detected),
      lines starting with ``#`` skipped. ``has_header``: ``True``, ``False`` or ``"auto"`` (the
      first row is a header when it has a non-numeric field where the second row is numeric, or
      when every field is non-numeric). Without a header columns are named ``x0, x1, ...``.
    * ``.npy``: a 2-D numeric array (or a structured array with numeric fields).
    * ``.npz``: the array ``X``, or the only array in the file.
    * ``.parquet`` / ``.pq``: numeric columns (needs pyarrow).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"input file {path} does not exist")
    if path.is_dir():
        kinds = ", ".join(SUPPORTED_EXTENSIONS)
        raise ValueError(f"{path} is a folder; give a data file ({kinds})")
    if has_header not in (True, False, "auto"):
        raise ValueError(f"has_header must be True, False or 'auto', got {has_header!r}")
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv", ".txt"):
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
# CSV
# --------------------------------------------------------------------------------------------


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


def _data_lines(text: str):
    """(line number, line) of every non-blank, non-comment line."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            yield lineno, line


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
                label = f"column {names[j]!r}" if header else f"column {j + 1}"
                raise ValueError(
                    f"{path}: {label} is not numeric (line {linenos[i]}: {field!r}); drop that "
                    "column or encode it as numbers before clustering"
                )
    return X


def _read_csv(path: Path, has_header) -> tuple[np.ndarray, list[str]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(
            f"{path} is not a UTF-8 text file; save it as CSV text (or as .npy/.parquet)"
        ) from None
    lines = list(_data_lines(text))
    if not lines:
        raise ValueError(f"{path} is empty: it has no data rows")
    delim = _detect_delimiter(lines[0][1], path.suffix.lower())

    def split(block: list[str]) -> list[list[str]]:
        if delim == " ":
            rows = [ln.split() for ln in block]
        else:
            rows = list(csv.reader(io.StringIO("\n".join(block)), delimiter=delim,
                                   skipinitialspace=True))
        return [[f.strip() for f in r] for r in rows]

    head = split([ln for _, ln in lines[:2]])
    first = head[0]
    header = _has_header(head) if has_header == "auto" else bool(has_header)
    if header:
        names = [f or f"x{j}" for j, f in enumerate(first)]
        lines = lines[1:]
    else:
        names = [f"x{j}" for j in range(len(first))]
    if not lines:
        raise ValueError(f"{path} has a header but no data rows")
    width = len(names)

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
    rows = split([ln for _, ln in lines])
    linenos = [n for n, _ in lines]
    for r, lineno in zip(rows, linenos, strict=True):
        if len(r) != width:
            raise ValueError(
                f"{path}, line {lineno}: {len(r)} field(s) where {width} were expected "
                f"(separator {delim!r}); every row needs one value per column"
            )

    return _parse_fields(path, rows, linenos, names, header), names


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
