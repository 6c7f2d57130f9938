"""The one place privclust imports matplotlib: lazily, with the Agg backend when there is no
display, and a clear error when it is not installed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

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
