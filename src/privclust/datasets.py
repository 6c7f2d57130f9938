"""Benchmark data sets: stored ``.npz`` + ``.json`` pairs and the papers' synthetic generators.

Stored sets live in a data folder *outside* the package (nothing is downloaded). Each set is

* ``NAME.npz`` with arrays ``X`` (float32, n x d) and ``y`` (int32, -1 = noise or unlabelled);
* ``NAME.json``, the sidecar: ``n``, ``d``, ``n_classes``, public ``bounds`` per dimension,
  ``literature_params``, ``sha256_X`` / ``sha256_y`` (SHA-256 of the raw C-order array bytes,
  ``hashlib.sha256(X.tobytes())``) and provenance.

The folder is found by :func:`default_data_dir`: the environment variable ``PRIVCLUST_DATA``, else
``../shared/data`` next to the repository checkout, else ``../shared/data`` relative to the current
working directory. On a fresh clone none of these exists; then :func:`default_data_dir` returns
``None``, :func:`list_datasets` lists only the generated sets and :func:`load` raises
:class:`DatasetNotFoundError` explaining how to point to a data folder. The generated sets
(:func:`synth_10d`, :func:`synth_100d`, :func:`make_synth`) need no files at all.

Public bounds
-------------
``Dataset.bounds`` are the *public* per-dimension bounds from the sidecar (for stored sets: the
observed range rounded outward, published with the data) or, for the generated sets, the
generator's ``center_box``. They are data-independent inputs for private algorithms; points may
lie outside them (e.g. make_blobs points scatter around centres drawn in the box), so algorithms
must clip. Literature-specific bounds (e.g. DPM's ``(-100, 100)`` for Synth-10d) are in
``meta["literature_params"]``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DATA_ENV_VAR",
    "GENERATED",
    "Dataset",
    "DatasetIntegrityError",
    "DatasetNotFoundError",
    "default_data_dir",
    "list_datasets",
    "load",
    "load_or_generate",
    "make_synth",
    "synth_100d",
    "synth_10d",
]

#: Environment variable naming the data folder (overrides every other location).
DATA_ENV_VAR = "PRIVCLUST_DATA"

# src/privclust/datasets.py -> parents[2] is the repository root.
_REPO_ROOT = Path(__file__).resolve().parents[2]
_SHARED_REL = Path("..") / "shared" / "data"


class DatasetNotFoundError(FileNotFoundError):
    """A data set (or the data folder itself) could not be found."""


class DatasetIntegrityError(ValueError):
    """A stored data set does not match its sidecar (hash, shape or bounds)."""


# --------------------------------------------------------------------------------------------
# Dataset container
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Dataset:
    """A data set with its public bounds.

    Attributes
    ----------
    name:
        Data set name (file stem for stored sets, e.g. ``"flame"``; ``"synth_10d"`` etc. for
        generated ones).
    X:
        Points, shape ``(n, d)``. Kept in the dtype it comes in, without a copy: **float32** for
        stored sets (as in the ``.npz``), **float64** for generated sets (as make_blobs returns
        it, unless ``dtype`` is given). Cast with ``X.astype(np.float64)`` if needed.
    y:
        Integer labels, shape ``(n,)``, ``-1`` = noise; ``None`` when the set is unlabelled (no
        ``y`` stored, or every label is ``-1``).
    bounds:
        Public bounds, float64 array of shape ``(d, 2)``: ``bounds[j] = (lo_j, hi_j)``. Read-only.
    meta:
        The sidecar dictionary (for generated sets, an equivalent description).
    """

    name: str
    X: np.ndarray = field(repr=False)
    y: np.ndarray | None = field(repr=False)
    bounds: np.ndarray = field(repr=False)
    meta: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        X = np.asarray(self.X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-d (n, d), got shape {X.shape}")
        bounds = np.array(self.bounds, dtype=np.float64)
        if bounds.shape != (X.shape[1], 2):
            raise ValueError(
                f"bounds must have shape (d, 2) = ({X.shape[1]}, 2), got {bounds.shape}"
            )
        if not np.all(np.isfinite(bounds)) or np.any(bounds[:, 0] > bounds[:, 1]):
            raise ValueError("bounds must be finite with lo <= hi in every dimension")
        bounds.setflags(write=False)
        y = self.y
        if y is not None:
            y = np.asarray(y)
            if y.shape != (X.shape[0],):
                raise ValueError(f"y must have shape ({X.shape[0]},), got {y.shape}")
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "bounds", bounds)

    @property
    def n(self) -> int:
        """Number of points."""
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        """Number of dimensions."""
        return int(self.X.shape[1])

    @property
    def bounds_pair(self) -> tuple[float, float] | np.ndarray:
        """``(lo, hi)`` as Python floats when every dimension shares them, else the ``(d, 2)``
        bounds array."""
        b = self.bounds
        if np.all(b[:, 0] == b[0, 0]) and np.all(b[:, 1] == b[0, 1]):
            return float(b[0, 0]), float(b[0, 1])
        return b

    def __repr__(self) -> str:
        labels = "unlabelled" if self.y is None else f"y={self.y.dtype}"
        return f"Dataset(name={self.name!r}, n={self.n}, d={self.d}, X={self.X.dtype}, {labels})"


# --------------------------------------------------------------------------------------------
# Locating the data folder
# --------------------------------------------------------------------------------------------


def _candidate_dirs() -> list[tuple[str, Path]]:
    """Locations searched when ``PRIVCLUST_DATA`` is unset, in order."""
    return [
        ("repository", (_REPO_ROOT / _SHARED_REL).resolve()),
        ("working directory", (Path.cwd() / _SHARED_REL).resolve()),
    ]


def default_data_dir() -> Path | None:
    """The benchmark data folder, or ``None`` if there is none.

    Order: ``$PRIVCLUST_DATA`` if set (and non-empty) — then *only* that folder is considered,
    so a wrong setting is never silently replaced by another folder; else ``../shared/data``
    relative to the repository root (found from this file's location); else ``../shared/data``
    relative to the current working directory.
    """
    env = os.environ.get(DATA_ENV_VAR, "").strip()
    if env:
        p = Path(env).expanduser()
        return p.resolve() if p.is_dir() else None
    for _, p in _candidate_dirs():
        if p.is_dir():
            return p
    return None


def _searched_description() -> str:
    env = os.environ.get(DATA_ENV_VAR, "").strip()
    if env:
        return f"{DATA_ENV_VAR}={env!r} (not a directory)"
    return ", ".join(f"{p} ({what})" for what, p in _candidate_dirs())


def _resolve_dir(data_dir: str | os.PathLike[str] | None) -> Path | None:
    if data_dir is None:
        return default_data_dir()
    p = Path(data_dir).expanduser()
    return p if p.is_dir() else None


def _how_to_point() -> str:
    return (
        f"Set the environment variable {DATA_ENV_VAR} to the folder holding NAME.npz + NAME.json, "
        "or pass data_dir=... ."
    )


# --------------------------------------------------------------------------------------------
# Listing
# --------------------------------------------------------------------------------------------


def _fmt_num(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _summarize_literature(params: Any) -> str:
    """One-line summary of a sidecar's ``literature_params`` (like the data README's column)."""
    if not isinstance(params, dict) or not params:
        return "-"
    parts: list[str] = []
    db = params.get("dbscan")
    if isinstance(db, dict):
        unit = f" {db['alpha_unit']}" if "alpha_unit" in db else ""
        parts.append(f"DBSCAN alpha={db.get('alpha_eps')}{unit}, MinPts={db.get('min_pts')}")
    dpm = params.get("dpm")
    if isinstance(dpm, dict):
        s = f"DPM k={dpm.get('k')}"
        if isinstance(dpm.get("bounds"), list | tuple) and len(dpm["bounds"]) == 2:
            lo, hi = dpm["bounds"]
            s += f", bounds=({_fmt_num(lo)}, {_fmt_num(hi)})"
        if "epsilon" in dpm:
            s += f", eps={dpm['epsilon']}"
        parts.append(s)
    if "k" in params and not isinstance(params.get("dpm"), dict):
        parts.append(f"k={params['k']}")
    return "; ".join(parts) if parts else "-"


_SYNTH_LITERATURE = {
    "dpm": {
        "k": 64,
        "bounds": [-100, 100],
        "epsilon": 1.0,
        "delta": "1/(n*sqrt(n))",
        "from": "UzL-PrivSec/clustering-evaluation:datasets.py",
    }
}


def list_datasets(data_dir: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Describe the available data sets without loading any array.

    Stored sets are read from the ``*.json`` sidecars that have a matching ``.npz`` in
    ``data_dir`` (default: :func:`default_data_dir`; none if there is no folder), followed by the
    generated sets. Each entry has ``name``, ``n``, ``d``, ``n_classes``, ``literature`` (a
    one-line summary), ``literature_params`` (the dict), ``generated`` and ``path`` (the ``.npz``,
    ``None`` for generated sets).
    """
    out: list[dict[str, Any]] = []
    folder = _resolve_dir(data_dir)
    if folder is not None:
        for side in sorted(folder.glob("*.json")):
            npz = side.with_suffix(".npz")
            if not npz.is_file():
                continue
            try:
                meta = json.loads(side.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                continue
            if not isinstance(meta, dict):
                continue
            lit = meta.get("literature_params") or {}
            out.append(
                {
                    "name": side.stem,
                    "n": meta.get("n"),
                    "d": meta.get("d"),
                    "n_classes": meta.get("n_classes"),
                    "literature": _summarize_literature(lit),
                    "literature_params": lit,
                    "generated": False,
                    "path": npz,
                }
            )
    for name, (n, d) in _GENERATED_SHAPES.items():
        out.append(
            {
                "name": name,
                "n": n,
                "d": d,
                "n_classes": 64,
                "literature": _summarize_literature(_SYNTH_LITERATURE),
                "literature_params": _SYNTH_LITERATURE,
                "generated": True,
                "path": None,
            }
        )
    return out


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def _sha256(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _stored_names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.npz") if p.with_suffix(".json").is_file())


def _not_found(name: str, folder: Path | None) -> DatasetNotFoundError:
    generated = list(_GENERATED_SHAPES)
    if folder is None:
        msg = f"no data folder found for data set {name!r}; searched {_searched_description()}. "
        msg += _how_to_point()
        names = generated
    else:
        msg = f"data set {name!r} not found in {folder} (expected {name}.npz and {name}.json). "
        names = _stored_names(folder) + generated
        msg += _how_to_point()
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if not close:
        close = [c for c in names if name.lower() in c.lower()][:3]
    if close:
        msg += f" Did you mean: {', '.join(repr(c) for c in close)}?"
    if name in generated or any(c in generated for c in close):
        msg += f" Generated sets ({', '.join(generated)}) need no files: use load_or_generate()."
    return DatasetNotFoundError(msg)


def load(
    name: str, data_dir: str | os.PathLike[str] | None = None, verify: bool = False
) -> Dataset:
    """Load the stored data set ``name`` (``NAME.npz`` + ``NAME.json``).

    ``X`` is returned as stored (float32), ``y`` as stored (int32) or ``None`` if unlabelled,
    ``bounds`` from the sidecar. With ``verify=True`` the SHA-256 of the raw bytes of ``X`` and
    ``y`` is checked against the sidecar's ``sha256_X`` / ``sha256_y``.

    Raises
    ------
    DatasetNotFoundError
        No data folder, or no such set in it (the message names the folder, how to set
        ``PRIVCLUST_DATA`` and close names).
    DatasetIntegrityError
        Shapes disagree with the sidecar, or (``verify=True``) a hash does not match.
    ValueError
        ``name`` is not a plain name (contains a path separator).
    """
    name = str(name)
    if name.endswith(".npz") or name.endswith(".json"):
        name = name.rsplit(".", 1)[0]
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"data set name must be a plain name like 'flame', got {name!r}")
    folder = _resolve_dir(data_dir)
    if folder is None and data_dir is not None:
        raise DatasetNotFoundError(f"data_dir {str(data_dir)!r} is not a directory")
    if folder is None:
        raise _not_found(name, None)
    npz_path = folder / f"{name}.npz"
    side_path = folder / f"{name}.json"
    if not npz_path.is_file() or not side_path.is_file():
        raise _not_found(name, folder)

    meta = json.loads(side_path.read_text(encoding="utf-8"))
    with np.load(npz_path, allow_pickle=False) as f:
        if "X" not in f.files:
            raise DatasetIntegrityError(f"{npz_path} has no array 'X' (has {f.files})")
        X = f["X"]
        y_raw = f["y"] if "y" in f.files else None

    if X.ndim != 2:
        raise DatasetIntegrityError(f"{npz_path}: X must be 2-d, got shape {X.shape}")
    n, d = X.shape
    if ("n" in meta and meta["n"] != n) or ("d" in meta and meta["d"] != d):
        raise DatasetIntegrityError(
            f"{name}: X has shape {X.shape} but the sidecar says n={meta.get('n')}, "
            f"d={meta.get('d')}"
        )
    if y_raw is not None and y_raw.shape != (n,):
        raise DatasetIntegrityError(f"{name}: y has shape {y_raw.shape}, expected ({n},)")
    if "bounds" not in meta:
        raise DatasetIntegrityError(f"{side_path} has no public 'bounds'")
    bounds = np.asarray(meta["bounds"], dtype=np.float64)
    if bounds.shape != (d, 2):
        raise DatasetIntegrityError(
            f"{side_path}: bounds have shape {bounds.shape}, expected ({d}, 2)"
        )

    if verify:
        checks = [("X", X)] + ([("y", y_raw)] if y_raw is not None else [])
        for key, arr in checks:
            want = meta.get(f"sha256_{key}")
            if not want:
                raise DatasetIntegrityError(f"{side_path} has no sha256_{key}; cannot verify")
            got = _sha256(arr)
            if got != want:
                raise DatasetIntegrityError(
                    f"{name}: SHA-256 of {key} is {got}, sidecar says {want}"
                )

    y = None if y_raw is None or (y_raw.size and np.all(y_raw == -1)) else y_raw
    return Dataset(name=name, X=X, y=y, bounds=bounds, meta=meta)


# --------------------------------------------------------------------------------------------
# Generated sets
# --------------------------------------------------------------------------------------------


def make_synth(
    n_samples: int = 100_000,
    n_features: int = 10,
    n_centers: int = 64,
    center_box: tuple[float, float] = (-100, 100),
    random_state: int | None = 42,
    *,
    dtype: Any = np.float64,
) -> Dataset:
    """The DPM paper's synthetic blobs.

    Exactly ``sklearn.datasets.make_blobs(n_samples, n_features, centers=n_centers,
    center_box=center_box, random_state=random_state)`` (cluster_std 1, shuffled), with public
    bounds ``[center_box] * n_features``. ``X`` is float64 (make_blobs' output) unless ``dtype``
    is given; ``y`` is int32. The defaults are DPM's Synth-10d; with scikit-learn 1.9 they
    reproduce the stored ``dpm_synth_10d`` exactly once X is cast to float32. Note that points
    scatter (std 1) around centres drawn in the box, so a few lie slightly outside the bounds.
    """
    from sklearn import __version__ as sklearn_version
    from sklearn.datasets import make_blobs

    lo, hi = float(center_box[0]), float(center_box[1])
    X, y = make_blobs(
        n_samples,
        n_features,
        centers=n_centers,
        center_box=(center_box[0], center_box[1]),
        random_state=random_state,
    )
    X = np.asarray(X, dtype=dtype)
    y = np.asarray(y, dtype=np.int32)
    defaults = n_centers == 64 and (lo, hi) == (-100.0, 100.0)
    if defaults:
        name = f"synth_{n_features}d"
    else:
        name = f"synth_{n_features}d_{n_centers}c"
    call = (
        f"make_blobs({n_samples}, {n_features}, centers={n_centers}, "
        f"center_box=({center_box[0]}, {center_box[1]}), random_state={random_state})"
    )
    meta: dict[str, Any] = {
        "name": name,
        "n": int(n_samples),
        "d": int(n_features),
        "n_classes": int(np.unique(y).size),
        "dtype": np.dtype(dtype).name,
        "bounds": [[lo, hi]] * int(n_features),
        "generated": True,
        "generator": f"sklearn.datasets.{call}",
        "sklearn_version": sklearn_version,
        "source": "sklearn generator (as in UzL-PrivSec/clustering-evaluation:datasets.py)",
        "literature_params": _SYNTH_LITERATURE if defaults else {},
    }
    bounds = np.tile(np.array([lo, hi], dtype=np.float64), (int(n_features), 1))
    return Dataset(name=name, X=X, y=y, bounds=bounds, meta=meta)


def synth_10d(n_samples: int = 100_000, random_state: int | None = 42) -> Dataset:
    """DPM's Synth-10d: 100,000 points, 10-d, 64 blobs in ``[-100, 100]^10``."""
    return make_synth(n_samples=n_samples, n_features=10, random_state=random_state)


def synth_100d(n_samples: int = 100_000, random_state: int | None = 42) -> Dataset:
    """DPM's 100-d variant (``synth_big1``): the Synth-10d call with ``n_features=100``."""
    return make_synth(n_samples=n_samples, n_features=100, random_state=random_state)


_GENERATED_SHAPES: dict[str, tuple[int, int]] = {
    "synth_10d": (100_000, 10),
    "synth_100d": (100_000, 100),
}

#: Generated data sets by name (need no files).
GENERATED: dict[str, Callable[[], Dataset]] = {
    "synth_10d": synth_10d,
    "synth_100d": synth_100d,
}


def load_or_generate(
    name: str, data_dir: str | os.PathLike[str] | None = None, verify: bool = False
) -> Dataset:
    """``synth_10d`` / ``synth_100d`` are generated; any other name goes to :func:`load`."""
    if name in GENERATED:
        return GENERATED[name]()
    return load(name, data_dir=data_dir, verify=verify)
