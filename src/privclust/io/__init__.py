"""Save and load fitted privclust models as JSON (never pickle, never raw points).

A model file holds only what the fit *released* (and the parameters it was run with)::

    {
      "format": "privclust-model",
      "version": 1,
      "estimator": "DPM",
      "privclust_version": "0.1.0",
      "params": {...},          # get_params() minus accountant; random_state as a description
      "model": {...},           # the private outputs (centres, noisy sizes, split tree, ...)
                                # and the bounds the fit clipped to; a loader refuses
                                # centres or means outside them (an edited file)
      "privacy_report": {...}   # PrivacyReport.to_dict()
    }

What is never written: ``labels_`` (one label per training record), the training data, and the
random seed. A seed lets anyone who knows it regenerate the noise and subtract it, so an int
``random_state`` is recorded as ``"int seed (reproducible, not secure; seed not stored)"`` and the
seed is redacted from the privacy report's ``random_source`` as well. A loaded model therefore has
``random_state=None``.

JSON is plain data: loading a file never executes code (unlike pickle), so a model file from an
untrusted source is safe to open.

Other estimators plug in with :func:`register_model`: a *dump* function returning the JSON-able
``"model"`` section of a fitted estimator, and a *load* function setting the fitted attributes on
an estimator built from the stored parameters.
"""

from __future__ import annotations

import inspect
import json
import math
import numbers
import os
import re
import warnings
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ..cluster import MorseMerging
from ..cluster._base import check_bounds, is_private_bounds
from ..privacy import Budget, PrivacyLeakWarning, PrivacyReport, Release
from . import _fields
from ._json import dumps, jsonable, tuples
from .codecs import check_inside

__all__ = [
    "FORMAT",
    "VERSION",
    "ModelCodec",
    "ModelFormatError",
    "load_model",
    "model_from_dict",
    "model_to_dict",
    "privacy_report_from_dict",
    "register_model",
    "registered_estimators",
    "save_model",
]

#: Value of the ``"format"`` key of every privclust model file.
FORMAT = "privclust-model"
#: Newest format version this module writes and reads.
VERSION = 1

# a shared ledger object and an estimator object: not parameters of the release
_NOT_SAVED_PARAMS = ("accountant", "base_estimator")
_SEED_RE = re.compile(r"seed=\s*-?\d+")


class ModelFormatError(ValueError):
    """A file or dictionary is not a (readable) privclust model."""


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelCodec:
    """How one estimator class is written to and read from the ``"model"`` section.

    ``dump(estimator) -> dict`` returns the JSON-able private outputs of a fitted estimator (never
    per-record values, never data). ``load(estimator, section)`` sets the fitted attributes on an
    unfitted estimator built from the stored parameters, validating ``section`` (raise
    ``KeyError``/``ValueError``/``TypeError`` on malformed input; they are reported as
    :class:`ModelFormatError`).
    """

    name: str
    cls: type
    dump: Callable[[Any], dict]
    load: Callable[[Any, dict], None]


#: The built-in estimators' codecs: :mod:`privclust.registry` hands them over when it loads
#: (:func:`register_built_in_codec`; importing privclust loads it), so this package never
#: imports the registry.
_BUILT_IN_CODECS: dict[str, ModelCodec] = {}
#: Codecs registered with :func:`register_model`.
_EXTRA_CODECS: dict[str, ModelCodec] = {}


def register_built_in_codec(cls: type, dump, load) -> None:
    """Called by :mod:`privclust.registry` for each of its estimators (not for users: see
    :func:`register_model`)."""
    _BUILT_IN_CODECS[cls.__name__] = ModelCodec(cls.__name__, cls, dump, load)


def _codecs() -> dict[str, ModelCodec]:
    """Every codec by stored name: the registry's estimators, then any registered here."""
    return _BUILT_IN_CODECS | _EXTRA_CODECS


def register_model(
    name: str,
    cls: type,
    dump: Callable[[Any], dict],
    load: Callable[[Any, dict], None],
    *,
    replace: bool = False,
) -> ModelCodec:
    """Register how estimator ``cls`` (stored as ``"estimator": name``) is saved and loaded."""
    if not isinstance(name, str) or not name:
        raise ValueError("register_model needs a non-empty estimator name")
    if name in _codecs() and not replace:
        raise ValueError(f"an estimator named {name!r} is already registered (pass replace=True)")
    codec = ModelCodec(name, cls, dump, load)
    _EXTRA_CODECS[name] = codec
    return codec


def registered_estimators() -> list[str]:
    """Names of the estimators that can be saved and loaded."""
    return sorted(_codecs())


def _codec_for_estimator(model) -> ModelCodec:
    codecs = _codecs().values()
    for codec in codecs:
        if type(model) is codec.cls:
            return codec
    for codec in codecs:
        if isinstance(model, codec.cls):
            return codec
    raise TypeError(
        f"cannot save a {type(model).__name__}: privclust.io knows how to save "
        f"{', '.join(registered_estimators())} (see privclust.io.register_model)"
    )


# --------------------------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------------------------


def _describe_random_state(random_state) -> str:
    if random_state is None:
        return "None (secure randomness)"
    if isinstance(random_state, np.random.Generator):
        return "numpy Generator (reproducible, not secure; state not stored)"
    if isinstance(random_state, (numbers.Integral, np.integer)):
        return "int seed (reproducible, not secure; seed not stored)"
    return f"{type(random_state).__name__} (not stored)"


def _redact_seed(text: str) -> str:
    return _SEED_RE.sub("seed=<not stored>", text)


def _params_to_dict(model) -> dict:
    params = model.get_params(deep=False)
    out = {}
    for key, value in sorted(params.items()):
        if key in _NOT_SAVED_PARAMS:
            continue
        if key == "random_state":
            out[key] = _describe_random_state(value)
            continue
        out[key] = jsonable(value, f"parameter {key!r}")
    return out


def _params_from_dict(cls: type, params: dict) -> dict:
    if not isinstance(params, dict):
        raise ModelFormatError('"params" must be a JSON object')
    valid = {
        name
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    unknown = sorted(set(params) - valid)
    if unknown:
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        raise ModelFormatError(
            f"unknown parameter(s) {', '.join(map(_fields.short, unknown[:3]))}{more} for "
            f"{cls.__name__}; the file may come from a different privclust version"
        )
    out = {
        k: tuples(v) for k, v in params.items() if k not in ("random_state", *_NOT_SAVED_PARAMS)
    }
    # The seed is never stored: a loaded (and possibly refitted) model uses secure randomness.
    out["random_state"] = None
    return out


# --------------------------------------------------------------------------------------------
# Privacy report
# --------------------------------------------------------------------------------------------


def _privacy_report_to_dict(report: PrivacyReport) -> dict:
    d = jsonable(report.to_dict(), "privacy_report")
    d["random_source"] = _redact_seed(str(d.get("random_source", "")))
    return d


def privacy_report_from_dict(d: dict) -> PrivacyReport:
    """Rebuild a :class:`~privclust.PrivacyReport` from :meth:`PrivacyReport.to_dict` output."""
    if not isinstance(d, dict):
        raise ModelFormatError('"privacy_report" must be a JSON object')
    try:
        report = _report_fields(d)
        for i, r in enumerate(_list_of(d, "releases", dict, "JSON objects")):
            report.add(_checked_release(_release(r, i)))
        total = report.total()
    except KeyError as exc:
        raise ModelFormatError(f"the privacy report is malformed: {_describe(exc)}") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise ModelFormatError(f"the privacy report is malformed: {_cut(exc)}") from None
    if "private" in d and bool(d["private"]) != report.private:
        raise ModelFormatError(
            f'the privacy report says "private": {str(bool(d["private"])).lower()} but its '
            "releases say otherwise; the file was edited"
        )
    if not total.fits_in(report.planned):
        raise ModelFormatError(
            f"the privacy report's releases spend epsilon={total.epsilon:.6g}, "
            f"delta={total.delta:.3g}, more than its plan (epsilon={report.planned.epsilon:.6g}, "
            f"delta={report.planned.delta:.3g}); the file was edited or is corrupt"
        )
    return report


def _list_of(d: dict, key: str, kind, words: str) -> list:
    """``d[key]`` (absent: empty), a list whose entries are all ``kind``."""
    v = d.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, kind) for x in v):
        raise ValueError(f'"{key}" must be a list of {words}, got {_fields.short(v)}')
    return v


def _report_fields(d: dict) -> PrivacyReport:
    """The report without its releases, every field checked."""
    planned = _fields.section(d, "planned")
    eps = _fields.number(planned, "epsilon", lo=0, where="planned")
    delta = _fields.number(planned, "delta", lo=0, where="planned")
    if delta >= 1:
        raise ValueError(f'"planned.delta" must be below 1, got {_fields.short(delta)}')
    unspent = []
    for u in _list_of(d, "unspent", dict, "JSON objects"):
        unspent.append((_fields.text(u, "item", where="unspent"),
                        _fields.number(u, "epsilon", lo=0, where="unspent"),
                        _fields.text(u, "reason", where="unspent")))
    optional = {k: _fields.number(d, k, lo=0, nullable=True) or 0.0 if k in d else 0.0
                for k in ("zcdp_delta", "delta_reserved")}
    return PrivacyReport(
        estimator=_fields.text(d, "estimator"),
        planned=Budget(eps, delta),
        random_source=_fields.text(d, "random_source") if "random_source" in d else "",
        zcdp_delta=optional["zcdp_delta"],
        notes=list(_list_of(d, "notes", str, "text")),
        unspent=unspent,
        plan=[dict(i) for i in _list_of(d, "plan", dict, "JSON objects")],
        delta_reserved=optional["delta_reserved"],
    )


def _release(r: dict, i: int) -> Release:
    """One release of the report; its required fields must be there."""
    names = {f.name for f in fields(Release)}
    for f in fields(Release):
        if f.default is MISSING and f.name not in r:
            raise ValueError(f'release {i} has no "{f.name}" field (every release names its '
                             "mechanism and target)")
    return Release(**{k: v for k, v in r.items() if k in names})


def _nonneg_number(v) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v) and v >= 0
    except OverflowError:  # a whole number of hundreds of digits
        return False


def _checked_release(r: Release) -> Release:
    short = _fields.short
    for name in ("mechanism", "target", "note", "item"):
        if not isinstance(getattr(r, name), str):
            raise ValueError(f"a release's {name} must be text, got {short(getattr(r, name))}")
    target = short(r.target)
    if not isinstance(r.private, bool):
        raise ValueError(f"release {target} has private={short(r.private)}; it must be true or "
                         "false")
    if isinstance(r.n_released, bool) or not isinstance(r.n_released, int) or not (
            0 <= r.n_released <= 2**62):
        raise ValueError(f"release {target} has n_released={short(r.n_released)}; it must be a "
                         "whole number >= 0")
    for name in ("sensitivity", "scale"):
        v = getattr(r, name)
        if v is not None and not _nonneg_number(v):
            raise ValueError(f"release {target} has {name}={short(v)}; it must be a number >= 0")
    for name in ("epsilon", "delta", "rho"):
        v = getattr(r, name)
        if not _nonneg_number(v):
            raise ValueError(f"release {target} has {name}={short(v)}; it must be a number >= 0")
    if r.delta >= 1:
        raise ValueError(f"release {target} has delta={short(r.delta)}; it must be < 1")
    return r


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


#: Python's and NumPy's own wording, never passed on as it is
_INTERNAL = re.compile(
    r"argument must be|NoneType|object is not|has no attribute|setting an array element|could "
    r"not convert|unsupported operand|subscriptable|invalid literal|inhomogeneous|__\w+__|"
    r"\bnp\.|ndarray|dtype|float64|int64|Traceback|positional argument|unexpected keyword|"
    r"out of bounds for axis|unhashable|cannot be interpreted")


def _cut(exc) -> str:
    """An error's message with long words cut short (a file can hold a 300-digit number)."""
    text = re.sub(r"\S{41,}", lambda m: m.group(0)[:24] + "..." + m.group(0)[-8:], str(exc))
    return text if len(text) <= 220 else text[:217] + "..."


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing key {_fields.short(exc.args[0])}"
    if isinstance(exc, OverflowError):
        return "a whole-number field holds Infinity or a value too large to be a count"
    if _INTERNAL.search(str(exc)):
        return "a field holds a value of the wrong type; the file was edited or is corrupt"
    return _cut(exc)


def _check_params_of(est) -> None:
    """The stored parameters against the estimator's own checks, before the model section
    (which reads some of them) is loaded."""
    check = next((getattr(est, c) for c in ("_check_params", "_check_common")
                  if hasattr(est, c)), None)
    if check is None:
        return
    unnamed = isinstance(est, MorseMerging) and est.base_estimator is None
    if unnamed:  # the base is named in the file, not stored: any placeholder passes the check
        est.base_estimator = "stored by name"
    try:
        check()
    except (ValueError, TypeError, OverflowError) as exc:
        words = _param_type_hint(est) if _INTERNAL.search(str(exc)) else None
        raise ModelFormatError(f'"params" are invalid: {words or _describe(exc)}') from None
    finally:
        if unnamed:
            est.base_estimator = None


def _param_type_hint(est) -> str | None:
    """The first parameter whose value is not of its default's kind (a number where the
    default is a number...), in the file's terms."""
    for name, p in inspect.signature(type(est).__init__).parameters.items():
        default, value = p.default, getattr(est, name, None)
        if name in ("self", "random_state", *_NOT_SAVED_PARAMS) or default is p.empty:
            continue
        if isinstance(default, bool):
            ok, words = isinstance(value, bool), "true or false"
        elif isinstance(default, (int, float)):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            words = "a number"
        elif isinstance(default, tuple):
            ok = isinstance(value, tuple) and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
            words = "a list of numbers"
        else:
            continue
        if not ok:
            return f"params.{name} must be {words}, got {_fields.short(value)}"
    return None


def model_to_dict(model) -> dict:
    """The JSON-able dictionary of a fitted model (see the module docstring for the layout)."""
    codec = _codec_for_estimator(model)
    if not hasattr(model, "privacy_report_"):
        raise ValueError(f"this {type(model).__name__} is not fitted yet; fit it before saving")
    from .. import __version__

    return {
        "format": FORMAT,
        "version": VERSION,
        "estimator": codec.name,
        "privclust_version": __version__,
        "params": _params_to_dict(model),
        "model": _with_private_bounds(model, codec.dump(model)),
        "privacy_report": _privacy_report_to_dict(model.privacy_report_),
    }


def model_from_dict(d: dict, *, source: str = "the model") -> Any:
    """A fitted estimator (``predict`` works) from :func:`model_to_dict` output."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        found = (f' (found "format": {_fields.short(d.get("format"))})' if isinstance(d, dict)
                 else "")
        raise ModelFormatError(
            f'{source} is not a privclust model{found}: expected a JSON object with "format": '
            f'"{FORMAT}", as written by privclust.io.save_model or `privclust cluster --out`'
        )
    version = d.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ModelFormatError(f"{source} has an invalid format version {_fields.short(version)}: "
                               f"it must be a whole number from 1 to {VERSION}")
    if version > VERSION:
        raise ModelFormatError(
            f"{source} uses model format version {_fields.short(version)}, but this privclust "
            "reads up to "
            f"version {VERSION}; upgrade privclust (pip install -U privclust)"
        )
    name = d.get("estimator")
    known = _codecs()
    if not isinstance(name, str) or name not in known:
        raise ModelFormatError(
            f"{source} holds an estimator {_fields.short(name)} this privclust cannot load; known: "
            f"{', '.join(registered_estimators())}"
        )
    codec = known[name]
    for key in ("params", "model", "privacy_report"):
        if key not in d:
            raise ModelFormatError(f'{source} is incomplete: no "{key}" section')
    try:
        est = codec.cls(**_params_from_dict(codec.cls, d["params"]))
        _check_params_of(est)
    except ModelFormatError as exc:
        raise ModelFormatError(f"{source}: {exc}") from None
    section = d["model"]
    if not isinstance(section, dict):
        raise ModelFormatError(f'{source}: "model" must be a JSON object')
    try:
        codec.load(est, section)
        _load_private_bounds(est, section)
    except (KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
        raise ModelFormatError(
            f'{source}: the "model" section is malformed: {_describe(exc)}'
        ) from None
    try:
        est.privacy_report_ = privacy_report_from_dict(d["privacy_report"])
        _check_loaded(est)
    except ModelFormatError as exc:
        raise ModelFormatError(f"{source}: {exc}") from None
    if not est.privacy_report_.private:
        warnings.warn(
            f"{source} was fitted by a variant that is NOT differentially private (its privacy "
            "report lists exact publications); do not publish what it outputs",
            PrivacyLeakWarning,
            stacklevel=3,
        )
    return est


def _with_private_bounds(model, section: dict) -> dict:
    """The bounds the fit clipped to, beside the release: with ``bounds="private"`` the
    estimated bounds (part of the release), else the public ones as ``"bounds"`` where the
    codec did not write them (a step of a pipeline takes its bounds from the step before and
    keeps ``bounds=None`` among its parameters; the loader checks the centres against them)."""
    if is_private_bounds(getattr(model, "bounds", None)):
        if "private_bounds" not in section:
            section = dict(section, private_bounds=jsonable(np.asarray(model.bounds_), "bounds_"))
        return section
    fitted = getattr(model, "bounds_", None)
    if fitted is not None and "bounds" not in section:
        section = dict(section, bounds=jsonable(np.asarray(fitted, dtype=float), "bounds_"))
    return section


def _load_private_bounds(est, section: dict) -> None:
    """``bounds_``: the released private bounds, or the public ones the fit used (those the
    model section stores, which must agree with ``params.bounds`` where both are given)."""
    bounds = getattr(est, "bounds", None)
    d = getattr(est, "n_features_in_", None)
    if is_private_bounds(bounds):
        est.bounds_ = check_bounds(section["private_bounds"], int(d), rows=True)
        return
    if d is None:
        return
    if getattr(est, "bounds_", None) is None and section.get("bounds") is not None:
        est.bounds_ = check_bounds(section["bounds"], int(d), rows=True)
    if bounds is None:
        return
    given = check_bounds(bounds, int(d))
    if getattr(est, "bounds_", None) is None:
        est.bounds_ = given
    elif not np.array_equal(np.asarray(est.bounds_, dtype=float), given):
        raise ValueError("params.bounds and the bounds in the model section differ; the file "
                         "was edited or is corrupt")


def _check_loaded(est) -> None:
    """The loaded model against its own invariants: finite centres inside the bounds the fit
    used (the parameters and the bounds are checked before)."""
    d = getattr(est, "n_features_in_", None)
    centres = getattr(est, "cluster_centers_", None)
    if d is None or centres is None or not np.size(centres):
        return
    bounds = getattr(est, "bounds_", None)
    try:
        check_inside(centres, None if bounds is None else check_bounds(bounds, int(d), rows=True),
                     "cluster_centers")
    except ValueError as exc:
        raise ModelFormatError(str(exc)) from None


def save_model(model, path: str | os.PathLike[str]) -> Path:
    """Write a fitted model to ``path`` as JSON; returns the path.

    Only the private release is written (see the module docstring): no labels, no data, no seed.
    """
    path = Path(path)
    text = dumps(model_to_dict(model))
    if not path.parent.is_dir():
        raise FileNotFoundError(
            f"cannot write {path}: the folder {path.parent} does not exist; create it first"
        )
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def load_model(path: str | os.PathLike[str]):
    """Read a model written by :func:`save_model`; returns a fitted estimator."""
    path = Path(path)
    if not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else "does not exist"
        raise FileNotFoundError(f"model file {path} {what}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ModelFormatError(
            f"{path} is not a privclust model (not UTF-8 text; model files are JSON)"
        ) from None
    if not text.strip():
        raise ModelFormatError(f"{path} is empty; expected a privclust model (JSON)")
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelFormatError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
            "a model file is the JSON written by `privclust cluster --out` or save_model; if "
            "this is one, it is truncated or corrupted: save the model again"
        ) from None
    return model_from_dict(d, source=str(path))
