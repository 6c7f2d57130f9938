"""The documentation site builds without warnings, every departure the code cites exists, and
the estimators' own docstring sections ("Privacy guarantee", ...) reach the API page."""

import html
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: How the code cites the departures page: "Departures 8", "Departures 10b", "Departures, items
#: 17-18" (a range cites both ends), "(Dep. 6)".
CITATION = re.compile(r"(?:Departures,?|Dep\.) (?:items? )?(\d+[ab]?)(?:-(\d+))?")


def cited_departures() -> set[str]:
    cited = set()
    for path in (ROOT / "src" / "privclust").rglob("*.py"):
        for match in CITATION.finditer(path.read_text(encoding="utf-8")):
            cited.update(g for g in match.groups() if g)
    return cited


def test_the_code_cites_departures_by_number_only():
    text = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "src").rglob("*.py"))
    assert "NOTES" not in text and "shared/papers" not in text
    assert {"1", "8", "10b", "14", "23"} <= cited_departures()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The HTML site, built once for this module with warnings as errors."""
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    pytest.importorskip("numpydoc")
    pytest.importorskip("matplotlib")
    tmp = tmp_path_factory.mktemp("site")
    out = tmp / "html"
    res = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp / "doctrees"), str(DOCS), str(out)],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return out


@pytest.mark.slow
def test_docs_build_and_cover_every_cited_departure(site):
    page = (site / "departures.html").read_text(encoding="utf-8")
    cited = cited_departures()
    assert cited, "no departure citations found in src/privclust"
    missing = sorted(n for n in cited if f'id="departure-{n}"' not in page)
    assert not missing, f"departures.html lacks the anchors of items {missing}"


#: The docstring sections numpydoc renders itself; ``docs/conf.py`` turns every other one into a
#: rubric of the extended summary, where numpydoc keeps it.
NUMPYDOC_SECTIONS = {"Parameters", "Attributes", "Methods", "Returns", "Yields", "Receives",
                     "Other Parameters", "Raises", "Warns", "Warnings", "See Also", "Notes",
                     "References", "Examples"}


def _plain(text: str) -> str:
    """Text without reST or HTML markup, typographic quotes or line breaks, for comparing."""
    text = html.unescape(re.sub(r"<[^>]+>", "", text))
    text = re.sub(r":\w+:`~?([^`]*)`", r"\1", text).replace("`", "").replace("*", "")
    return " ".join(text.replace("\u2019", "'").replace("\u2018", "'").split())


def _custom_sections(cls) -> dict[str, str]:
    """The sections of ``cls``'s docstring that numpydoc does not know: title -> first line."""
    lines = inspect.getdoc(cls).splitlines()
    found = {}
    for i in range(1, len(lines) - 1):
        if re.fullmatch(r"-{3,}", lines[i].strip()) and lines[i - 1].strip() \
                and lines[i - 1].strip() not in NUMPYDOC_SECTIONS:
            found[lines[i - 1].strip()] = lines[i + 1]
    return found


@pytest.mark.slow
def test_api_page_shows_every_estimators_privacy_guarantee(site):
    """numpydoc drops sections it does not know; the site shows them (as rubrics)."""
    from sklearn.base import ClusterMixin

    import privclust

    page = (site / "api.html").read_text(encoding="utf-8")
    estimators = [name for name in privclust.__all__
                  if isinstance(getattr(privclust, name), type)
                  and issubclass(getattr(privclust, name), ClusterMixin)]
    with_guarantee = []
    for name in estimators:
        anchor = f'id="privclust.{name}"'
        assert anchor in page, f"{name} is not on the API page"
        body = page.split(anchor, 1)[1].split('<dl class="py class">', 1)[0]
        text = _plain(body)
        for title, first_line in _custom_sections(getattr(privclust, name)).items():
            if title == "Privacy guarantee":
                with_guarantee.append(name)
            # a title wrapped onto two lines in the docstring: its last line is what we found
            assert _plain(title) in text, f"{name}: section {title!r} is not on the API page"
            assert _plain(first_line) in text, f"{name}: the text of {title!r} is missing"
    assert {"DPM", "DPLloyd", "DPDBSCAN", "DPGaussianMixture", "MorseMerging"} <= set(
        with_guarantee), with_guarantee


@pytest.mark.slow
def test_every_example_on_the_pages_runs(tmp_path):
    """The pages' ``testcode`` blocks run and print what the pages say (Sphinx's doctest)."""
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    pytest.importorskip("numpydoc")
    pytest.importorskip("matplotlib")
    out = tmp_path / "doctest"
    res = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "doctest", "-d", str(tmp_path / "dt"),
         str(DOCS), str(out)],
        cwd=ROOT, capture_output=True, text=True,
    )
    output = out / "output.txt"
    report = output.read_text(encoding="utf-8") if output.exists() else ""
    assert res.returncode == 0, res.stdout + res.stderr + report
    assert " 0 failures in tests" in report and "tests" in report, report
