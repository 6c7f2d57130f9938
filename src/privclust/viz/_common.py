"""The one place privclust imports matplotlib: lazily, with the Agg backend when there is no
display, and a clear error when it is not installed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

_INSTALL_HINT = 'plotting needs matplotlib: pip install "privclust[plot]"'
#: File extensions :func:`save_figure` accepts (the formats of matplotlib's Agg-based backends).
FIGURE_FORMATS = (".png", ".pdf", ".svg", ".svgz", ".jpg", ".jpeg", ".eps", ".ps", ".tif",
                  ".tiff", ".webp")


def require_matplotlib():
    """Import matplotlib (Agg backend when there is no display) or raise a clear ImportError."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(_INSTALL_HINT) from None
    headless = (
        sys.platform.startswith("linux")
        and not os.environ.get("DISPLAY")
        and not os.environ.get("WAYLAND_DISPLAY")
    )
    if headless and "matplotlib.pyplot" not in sys.modules and not os.environ.get("MPLBACKEND"):
        matplotlib.use("Agg")
    return matplotlib


def pyplot():
    require_matplotlib()
    import matplotlib.pyplot as plt

    return plt


def check_figure_path(path: str | os.PathLike[str]) -> Path:
    """Check (before any work is done) that a figure can be written to ``path``."""
    path = Path(path)
    if path.suffix.lower() not in FIGURE_FORMATS:
        raise ValueError(
            f"cannot write a figure to {path}: unknown image type {path.suffix or '(none)'!r}; "
            f"use one of {', '.join(FIGURE_FORMATS)}"
        )
    if not path.parent.is_dir():
        raise FileNotFoundError(
            f"cannot write {path}: the folder {path.parent} does not exist; create it first"
        )
    return path


def save_figure(fig, path: str | os.PathLike[str], *, dpi: int = 150, close: bool = False) -> Path:
    """Write ``fig`` to ``path`` (format from the extension); ``close=True`` frees it after."""
    path = check_figure_path(path)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    if close:
        pyplot().close(fig)
    return path


def new_axes(ax, figsize):
    """``ax``, or the axes of a new figure of ``figsize`` when it is None."""
    if ax is None:
        _, ax = pyplot().subplots(figsize=figsize)
    return ax


def raw_data_note(ax, shown: int, total: int) -> None:
    """The note every plot that draws data points carries: they are raw data, not private."""
    what = f"{shown:,} of {total:,} points" if total > shown else f"{total:,} points"
    ax.text(0.01, 0.01, f"{what}: raw data, not private", transform=ax.transAxes,
            fontsize=7, color="0.35", va="bottom")


def axis_names(feature_names) -> list:
    """The two axis labels: ``feature_names`` (exactly two) or ``x0``, ``x1``."""
    names = list(feature_names) if feature_names is not None else ["x0", "x1"]
    if len(names) != 2:
        raise ValueError(f"feature_names has {len(names)} names for 2 features")
    return names


def scatter_raw(ax, X, max_points: int) -> None:
    """``X`` as small grey points under a model's cells (at most ``max_points``, a fixed
    subsample), with :func:`raw_data_note`."""
    from ..cluster._base import check_data

    pts = check_data(X)
    n = pts.shape[0]
    if n > max_points:
        pts = pts[np.linspace(0, n - 1, max_points).astype(np.int64)]
    ax.scatter(pts[:, 0], pts[:, 1], s=2, c="0.45", linewidths=0, zorder=1)
    raw_data_note(ax, pts.shape[0], n)


def padded_limits(ax, lo, hi, share: float = 0.04) -> None:
    """x and y limits ``[lo, hi]`` widened by ``share`` of their width on each side, so that
    a marker on the edge (a centre on the public bounds) is drawn whole."""
    lo, hi = [float(v) for v in lo], [float(v) for v in hi]
    for lim, a, b in ((ax.set_xlim, lo[0], hi[0]), (ax.set_ylim, lo[1], hi[1])):
        pad = share * (b - a) if b > a else 1.0
        lim(a - pad, b + pad)
