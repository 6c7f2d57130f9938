"""The checks every private fit makes of its inputs: epsilon, delta and the data.

One module with no estimator in it, below everything that reads data (the estimators'
shared base, ``private_bounds``), so that those import it and not each other.
"""

from __future__ import annotations

import math
import numbers
import os
from pathlib import Path

import numpy as np

#: Supported numeric range (every estimator): bounds within +-MAX_ABS_BOUND, widths at least
#: MIN_WIDTH and MIN_RELATIVE_WIDTH of the largest bound. Inside it no sum, square or grid index
#: privclust computes can overflow float64 (or float32, which some passes use for speed).
MAX_ABS_BOUND = 1e30
#: Supported epsilon range of every estimator.
MIN_EPSILON, MAX_EPSILON = 1e-6, 1e3
MIN_WIDTH = 1e-30
MIN_RELATIVE_WIDTH = 1e-9


def check_epsilon(epsilon) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise TypeError(f"epsilon must be a positive number, got {epsilon!r}")
    if not (epsilon > 0) or not math.isfinite(epsilon):
        raise ValueError(
            f"epsilon must be a positive finite number (e.g. epsilon=1.0), got {epsilon!r}"
        )
    if not MIN_EPSILON <= epsilon <= MAX_EPSILON:
        raise ValueError(
            f"epsilon={epsilon!r} is outside the range privclust supports, [{MIN_EPSILON:g}, "
            f"{MAX_EPSILON:g}]: above it the guarantee (a factor e^epsilon) means nothing and "
            "the mechanisms' arithmetic overflows; below it every release is noise"
        )
    return float(epsilon)


def check_delta(delta, *, allow_none: bool = True, required: bool = False) -> float | None:
    if delta is None:
        if allow_none:
            return None
        raise ValueError("delta must be given (a number in (0, 1), e.g. 1e-6)")
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
        raise TypeError(f"delta must be a number in (0, 1) or None, got {delta!r}")
    if not (0 <= delta < 1):
        raise ValueError(
            f"delta must be in [0, 1) (typically far below 1/n, e.g. 1e-6), got {delta!r}"
        )
    if required and delta == 0:
        raise ValueError(
            "this estimator needs delta > 0 (its Gaussian noise and shifted counts are "
            "(epsilon, delta)-DP); pass e.g. delta=1e-6, or delta=None for the delta rule "
            "min(1e-5, 1/n_hat^1.5)"
        )
    return float(delta)


def feature_names(X) -> np.ndarray | None:
    """The column names of a DataFrame-like ``X`` when they are all strings (scikit-learn's
    rule for ``feature_names_in_``), else None."""
    cols = getattr(X, "columns", None)
    if cols is None:
        return None
    names = np.asarray(list(cols), dtype=object)
    if names.size and all(isinstance(c, str) for c in names):
        return names
    return None


def _dataframe_to_array(X, name: str) -> np.ndarray:
    """pandas (nullable dtypes included: ``Float64``, ``Int64``, ``boolean``) -> float array,
    missing values as NaN (refused with the others below)."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is not None and hasattr(dtypes, "items"):
        from pandas.api.types import is_bool_dtype, is_numeric_dtype

        bad = [str(c) for c, t in dtypes.items() if not (is_numeric_dtype(t) or is_bool_dtype(t))]
        if bad:
            raise ValueError(
                f"{name} must be numeric; column(s) {', '.join(bad[:5])} are not. Drop or "
                "encode non-numeric columns first."
            )
        return X.to_numpy(dtype=np.float64, na_value=np.nan)
    if hasattr(X, "dtype") and not np.issubdtype(np.dtype(getattr(X.dtype, "numpy_dtype",
                                                                  X.dtype)), np.number):
        return X.to_numpy()
    try:
        return X.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError):
        return X.to_numpy()


def is_dask_input(X) -> bool:
    """Whether ``X`` is for the Dask engine: a dask array or DataFrame, a validated
    ``DaskData``, or a path to a ``.parquet`` file or a directory of Parquet files. Imports
    nothing (the core install has no Dask)."""
    module = type(X).__module__ or ""
    if module.split(".")[0] == "dask" or module == "privclust.engine.dask":
        return True
    if isinstance(X, (str, os.PathLike)):
        path = Path(X)
        return path.suffix.lower() == ".parquet" or (path.is_dir()
                                                    and any(path.glob("*.parquet")))
    return False


def _as_numpy(X, name: str) -> np.ndarray:
    """``X`` (array-like, pandas) as a NumPy array, numbers held as objects converted; sparse
    matrices and pandas Series refused with the fix."""
    if hasattr(X, "tocsr") or type(X).__module__.startswith("scipy.sparse"):
        raise ValueError(
            f"{name} is a sparse matrix; privclust works on dense arrays. Convert it with "
            "X.toarray() if it fits in memory (clustering sparse high-dimensional data usually "
            "calls for a dense embedding first)"
        )
    if hasattr(X, "to_numpy") and getattr(X, "ndim", 2) == 1:  # a pandas Series
        raise ValueError(
            f"{name} is a pandas Series (one column of values); pass a DataFrame, e.g. "
            "X.to_frame() for one feature or df[[...]] to pick columns"
        )
    if hasattr(X, "to_numpy"):  # pandas
        if getattr(X, "dtypes", None) is not None and all(
            str(t) in ("float32", "float64") for t in getattr(X, "dtypes", [])
        ):
            X = X.to_numpy()
        else:
            X = _dataframe_to_array(X, name)
    try:
        arr = np.asarray(X)
    except (TypeError, ValueError):  # ragged lists etc.
        raise ValueError(f"{name} could not be read as a 2-D numeric array (rows of different "
                         "lengths?); pass equal-length rows of numbers or a 2-D array") from None
    if arr.dtype == object:  # numbers held as Python objects: converted, as scikit-learn does
        try:
            arr = arr.astype(np.float64)
        except ValueError:  # text: refused below with the fix
            pass
        except TypeError as exc:  # a dict, None, a list...: not a number at all
            raise NonNumericDataError(
                f"{name} must be numeric; it holds a value that is not a number ({exc}). Drop "
                "or encode non-numeric columns first, and impute missing values"
            ) from None
    return arr


class NonNumericDataError(TypeError, ValueError):
    """The data holds a value of a type that is no number (a dict, None...): a ``TypeError``,
    as scikit-learn raises for it, and a ``ValueError``, as privclust raises for bad data."""


def check_data(X, *, name: str = "X", min_samples: int = 1) -> np.ndarray:
    """A finite 2-D float array, or a clear error. float32 stays float32 (memory).

    Dask input is checked in one pass (chunk sizes and a NaN/inf count per chunk) and returned
    as a lazy ``privclust.engine.dask.DaskData``."""
    if is_dask_input(X):
        from ..engine.dask import as_dask_data

        return as_dask_data(X, name)
    arr = _as_numpy(X, name)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or arr.dtype == bool
    ):
        raise ValueError(
            f"{name} must be numeric; got dtype {arr.dtype}. Drop or encode non-numeric "
            "columns first."
        )
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(
            f"Complex data not supported: {name} must be real-valued, got complex numbers; "
            "pass the real part (X.real), or the real and imaginary parts as separate features"
        )
    if arr.ndim == 1:
        raise ValueError(
            f"{name} must be 2-D (n_samples, n_features); got a 1-D array of {arr.shape[0]} "
            "values. Reshape your data: X.reshape(-1, 1) for one feature or X.reshape(1, -1) "
            "for one sample."
        )
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {arr.shape}")
    if arr.shape[1] == 0:
        raise ValueError(
            f"{name} has no features: 0 feature(s) (shape={arr.shape}) while a minimum of 1 is "
            "required; pass at least one numeric column"
        )
    if arr.shape[0] < min_samples:
        raise ValueError(
            f"{name} has {arr.shape[0]} samples; at least {min_samples} needed"
            + (" (an empty data set cannot be clustered)" if arr.shape[0] == 0 else "")
        )
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        bad = ~np.isfinite(arr)
        rows = np.flatnonzero(bad.any(axis=1))
        raise ValueError(
            f"{name} contains NaN or infinite values in {rows.size} row(s) (first: row "
            f"{rows[0]}, column {int(np.flatnonzero(bad[rows[0]])[0])}); remove or impute them "
            "before fitting"
        )
    return arr
