"""Readers of single fields of a model file: each checks that a value holds what the field
should (a whole number, a finite number, a list of numbers of some shape, one of some words)
and otherwise raises a ``ValueError`` that names the field and what it should hold, in the
file's terms (JSON: lists, numbers, ``null``), never NumPy's or Python's wording. Values of the
file are echoed cut short (:func:`short`): a tampered file can hold a number of 300 digits."""

from __future__ import annotations

import math
import numbers
import reprlib

import numpy as np

__all__ = ["array", "get", "number", "section", "shape_words", "short", "text", "whole"]

_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxlong, _REPR.maxother = 30, 24, 30
_REPR.maxlist, _REPR.maxdict, _REPR.maxlevel = 4, 3, 2
#: the largest whole number a field may hold (indices and counts fit an int64)
_MAX_WHOLE = 2**62
_WHAT = {"int": "whole numbers", "float": "numbers", "bool": "true or false values"}


def short(value) -> str:
    """A value of the file as a message shows it, in JSON's spelling, at most ~40 characters."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    text = _REPR.repr(value)
    return text if len(text) <= 44 else text[:40] + "..."


def _name(key, where: str) -> str:
    return f'"{where}.{key}"' if where else f'"{key}"'


def get(m, key, where: str = ""):
    """``m[key]``: ``m`` must be a JSON object; a missing key raises ``KeyError(key)``."""
    if not isinstance(m, dict):
        raise ValueError(f'"{where or "model"}" must be a JSON object, got {short(m)}')
    return m[key]


def section(m, key, where: str = "") -> dict:
    """A nested JSON object."""
    v = get(m, key, where)
    if not isinstance(v, dict):
        raise ValueError(f"{_name(key, where)} must be a JSON object, got {short(v)}")
    return v


def _range_words(lo, hi) -> str:
    if lo is not None and hi is not None:
        return f" from {lo} to {hi}"
    if lo is not None:
        return f" of at least {lo}"
    return "" if hi is None else f" of at most {hi}"


def whole(m, key, *, lo=None, hi=None, where: str = "") -> int:
    """A whole number (JSON integer) in ``[lo, hi]``."""
    v = get(m, key, where)
    ok = not isinstance(v, bool) and isinstance(v, numbers.Real) and (
        isinstance(v, numbers.Integral) or (math.isfinite(v) and float(v).is_integer()))
    if ok and abs(v) <= _MAX_WHOLE and (lo is None or v >= lo) and (hi is None or v <= hi):
        return int(v)
    if _too_large(v):
        raise ValueError(f"{_name(key, where)} holds Infinity or a value too large to be a "
                         f"count; it must be a whole number{_range_words(lo, hi)}")
    raise ValueError(
        f"{_name(key, where)} must be a whole number{_range_words(lo, hi)}, got {short(v)}")


def _too_large(v) -> bool:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return False
    return isinstance(v, numbers.Integral) and abs(v) > _MAX_WHOLE or (
        isinstance(v, float) and (math.isinf(v) or abs(v) > _MAX_WHOLE))


def number(m, key, *, lo=None, positive: bool = False, nullable: bool = False,
           where: str = "") -> float | None:
    """A finite number (``> 0`` when ``positive``, ``>= lo``), or None when ``nullable``."""
    v = get(m, key, where)
    if v is None and nullable:
        return None
    if not isinstance(v, bool) and isinstance(v, numbers.Real):
        try:
            f = float(v)
        except OverflowError:
            f = math.inf
        if math.isfinite(f) and (not positive or f > 0) and (lo is None or f >= lo):
            return f
    what = "a positive number" if positive else (
        "a number" + ("" if lo is None else f" of at least {lo:g}"))
    raise ValueError(f"{_name(key, where)} must be {what}"
                     f"{' or null' if nullable else ''}, got {short(v)}")


def text(m, key, choices=None, where: str = "") -> str:
    """Text, one of ``choices`` when given."""
    v = get(m, key, where)
    if isinstance(v, str) and (choices is None or v in choices):
        return v
    what = "text" if choices is None else " or ".join(repr(c) for c in choices)
    raise ValueError(f"{_name(key, where)} must be {what}, got {short(v)}")


def shape_words(shape, names=None) -> str:
    """``(-1, 2)`` -> ``(any number of rows, 2)``; ``names`` replaces entries (``("k", 2)``)."""
    parts = []
    for i, n in enumerate(shape):
        name = None if names is None else names[i]
        parts.append(str(name) if name is not None else (
            "any number of rows" if n == -1 else str(n)))
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _expect(kind: str, shape, names) -> str:
    what = _WHAT[kind]
    if len(shape) == 1:
        n = shape[0] if names is None or names[0] is None else names[0]
        if isinstance(n, str) and " " in n:
            return f"a list of {what}, {n}"
        return f"a list of {what}" if n == -1 else f"a list of {n} {what}"
    return f"a list of lists of {what}, of shape {shape_words(shape, names)}"


def _leaves_ok(arr: np.ndarray, kind: str) -> bool:
    allowed = {"int": (int, float), "float": (int, float, type(None)), "bool": (bool,)}[kind]
    return all(type(x) in allowed for x in arr.ravel().tolist())


def array(m, key, kind: str, shape, *, names=None, where: str = "",
          finite: bool = False) -> np.ndarray:
    """A (nested) JSON list as an array of ``shape`` (-1 allowed once): ``kind`` 'float'
    (``null`` reads as NaN unless ``finite``), 'int' (whole numbers) or 'bool'."""
    v = get(m, key, where)
    expect = _expect(kind, shape, names)
    bad = ValueError(f"{_name(key, where)} must be {expect}, got {short(v)}")
    if not isinstance(v, list):
        raise bad
    try:
        raw = np.array(v, dtype=object)
    except ValueError:  # ragged lists
        raise bad from None
    if raw.size and not _leaves_ok(raw, kind):
        raise bad
    try:
        if kind == "bool":
            out = raw.astype(bool)
        else:
            flat = [math.nan if x is None else x for x in raw.ravel().tolist()]
            out = np.array(flat, dtype=float).reshape(raw.shape)
    except OverflowError:
        raise ValueError(f"{_name(key, where)} holds a value too large for a number (Infinity "
                         f"or a value too large to be a count); it must be {expect}") from None
    except (TypeError, ValueError):
        raise bad from None
    try:
        out = out.reshape(shape)
    except ValueError:
        raise bad from None
    if kind == "int":
        if not (np.isfinite(out).all() and (out == np.round(out)).all()
                and (np.abs(out) <= _MAX_WHOLE).all()):
            if (np.abs(out[~np.isnan(out)]) > _MAX_WHOLE).any():
                raise ValueError(f"{_name(key, where)} holds Infinity or a value too large to "
                                 f"be a count; it must be {expect}")
            raise bad
        return out.astype(np.int64)
    if finite and kind == "float" and not np.isfinite(out).all():
        raise ValueError(f"{_name(key, where)} must hold finite numbers (no null, Infinity or "
                         "values too large for a float)")
    return out
