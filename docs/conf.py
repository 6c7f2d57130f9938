"""Sphinx configuration for the privclust documentation.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html``.
Figures and ``--help`` texts are generated at build time into ``docs/_generated/``.
"""

from __future__ import annotations

import re
import sys
import warnings
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


# ---------------------------------------------------------------- docstring sections
#: The sections numpydoc knows (its ``NumpyDocString.sections``); it drops any other one.
NUMPYDOC_SECTIONS = {
    "Parameters", "Attributes", "Methods", "Returns", "Yields", "Receives", "Other Parameters",
    "Raises", "Warns", "Warnings", "See Also", "Notes", "References", "Examples", "Index",
}
_UNDERLINE = re.compile(r"-{3,}\s*")


def _numpydoc_name(title: str) -> str:
    """A section title as numpydoc compares it ("see also" -> "See Also")."""
    return " ".join(word.capitalize() for word in title.strip().split(" "))


def _split_sections(lines: list[str]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The lines before the first section, and every ``(title, body)`` after it.

    A section is a title of one or more unindented lines that follow a blank line, underlined
    with dashes (a long title may wrap onto a second line)."""
    heads = []  # (first title line, underline line)
    for i, line in enumerate(lines):
        if i == 0 or not _UNDERLINE.fullmatch(line):
            continue
        start = i
        while start > 0 and lines[start - 1].strip() and not lines[start - 1][:1].isspace():
            start -= 1
        if start < i and (start == 0 or not lines[start - 1].strip()) and i - start <= 3 \
                and (not heads or start > heads[-1][1]):
            heads.append((start, i))
    if not heads:
        return lines, []
    sections = []
    for n, (start, underline) in enumerate(heads):
        end = heads[n + 1][0] if n + 1 < len(heads) else len(lines)
        title = " ".join(line.strip() for line in lines[start:underline])
        sections.append((title, lines[underline + 1:end]))
    return lines[:heads[0][0]], sections


#: ``|X|`` in prose (the size of a set) reads as a reStructuredText substitution, and none is
#: defined; inline literals and roles (``...``, `...`) are kept as they are.
_SUBSTITUTION = re.compile(r"(``.*?``|`[^`]*`)|(?<![\\\w])\|(?=\S)([^|`]*?\S)\|(?!\w)")


def _plain_bars(line: str) -> str:
    return _SUBSTITUTION.sub(lambda m: m.group(1) or rf"\|{m.group(2)}\|", line)


def _trimmed(body: list[str]) -> list[str]:
    while body and not body[0].strip():
        body = body[1:]
    while body and not body[-1].strip():
        body = body[:-1]
    return body


def show_custom_sections(app, what, name, obj, options, lines) -> None:
    """Keep the sections numpydoc does not know ("Privacy guarantee", "Choices where the paper
    is ...", "Departures from the paper", ...): numpydoc would drop them with a warning.

    Runs before numpydoc (``autodoc-process-docstring`` at priority 400; numpydoc's handler has
    the default 500). Every unknown section becomes a ``.. rubric::`` with its title, followed by
    its text, at the end of the extended summary (the text before the first section), in the
    order of the docstring: on the page it follows the description, before "Parameters", where
    the docstrings put it. The known sections are kept as they are, their underlines set to
    their titles' length (numpydoc warns otherwise)."""
    head, sections = _split_sections(list(lines))
    if not sections:
        return
    out = _trimmed(list(head))
    known = []
    for title, body in sections:
        if _numpydoc_name(title) in NUMPYDOC_SECTIONS:
            known.append((title, body))
        else:
            out += ["", f".. rubric:: {title}", ""] + [_plain_bars(x) for x in _trimmed(body)]
    out.append("")
    for title, body in known:
        out += [title, "-" * len(title), *body]
        if out[-1].strip():
            out.append("")
    lines[:] = out


# numpydoc also reads each raw docstring for its signature alone (``autodoc-process-signature``)
# and warns there about the sections that ``show_custom_sections`` has already moved for the
# rendered page: those warnings repeat what is handled, so they are not shown.
warnings.filterwarnings("ignore", message=r"(Unknown section|potentially wrong underline length)",
                        category=UserWarning, module=r"numpydoc\.docscrape")


def setup(app):
    app.connect("builder-inited", _generate)
    app.connect("autodoc-process-docstring", show_custom_sections, priority=400)
    return {"parallel_read_safe": True}
