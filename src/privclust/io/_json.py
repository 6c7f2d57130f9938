"""Plain-JSON helpers shared by the model envelope and the codecs."""

from __future__ import annotations

import json
import math
import numbers

import numpy as np


def jsonable(value, where: str):
    """Plain JSON types from numpy scalars/arrays, tuples, dicts; NaN/inf become None."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist(), where)
    if isinstance(value, (list, tuple)):
        return [jsonable(v, where) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v, f"{where}.{k}") for k, v in value.items()}
    raise TypeError(
        f"{where} holds a {type(value).__name__}, which cannot be written as JSON; "
        "privclust model files hold numbers, strings and lists only"
    )


def _is_scalar(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def dumps(obj, level: int = 0) -> str:
    """JSON with one key per line and short lists (vectors, matrix rows) kept on one line."""
    pad, inner = " " * level, " " * (level + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{inner}{json.dumps(k)}: {dumps(v, level + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        if all(_is_scalar(v) for v in obj):
            return json.dumps(obj, allow_nan=False)
        return "[\n" + ",\n".join(inner + dumps(v, level + 1) for v in obj) + "\n" + pad + "]"
    return json.dumps(obj, allow_nan=False)


def tuples(value):
    """JSON lists back to (nested) tuples: parameters are immutable in the estimators."""
    if isinstance(value, list):
        return tuple(tuples(v) for v in value)
    return value
