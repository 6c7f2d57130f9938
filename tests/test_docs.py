"""The documentation site builds without warnings, and every departure the code cites exists."""

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


@pytest.mark.slow
def test_docs_build_and_cover_every_cited_departure(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    pytest.importorskip("numpydoc")
    pytest.importorskip("matplotlib")
    out = tmp_path / "html"
    res = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(DOCS), str(out)],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    page = (out / "departures.html").read_text(encoding="utf-8")
    cited = cited_departures()
    assert cited, "no departure citations found in src/privclust"
    missing = sorted(n for n in cited if f'id="departure-{n}"' not in page)
    assert not missing, f"departures.html lacks the anchors of items {missing}"


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
