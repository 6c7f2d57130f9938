"""Sphinx configuration for the privclust documentation.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html``.
Figures and ``--help`` texts are generated at build time into ``docs/_generated/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import privclust  # noqa: E402

project = "privclust"
author = "the privclust developers"
copyright = "the privclust developers"  # noqa: A001
release = privclust.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "numpydoc",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_generated", ".gitignore"]

myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3

numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
autodoc_member_order = "bysource"
autodoc_typehints = "none"

# The doctest builder runs every ``testcode`` block of the pages; the html builder only shows it.
doctest_global_setup = "import warnings\nwarnings.simplefilter('ignore')\n"

try:
    import furo  # noqa: F401

    html_theme = "furo"
except ImportError:  # pragma: no cover - fallback theme shipped with Sphinx
    html_theme = "alabaster"
html_title = f"privclust {release}"
html_static_path: list[str] = []


def _generate(app) -> None:
    """Write the figures and the command-line help texts into ``docs/_generated``."""
    import _figures

    out = HERE / "_generated"
    _figures.write_cli_help(out)
    _figures.make_all(out)


def setup(app):
    app.connect("builder-inited", _generate)
    return {"parallel_read_safe": True}
