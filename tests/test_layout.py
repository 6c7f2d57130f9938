"""The shape of the code: layer contracts (import-linter) and lint (ruff)."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name):
    exe = shutil.which(name)
    if exe is None:
        pytest.skip(f"{name} is not installed (pip install '.[test]')")
    return exe


def test_import_contracts_hold():
    exe = _tool("lint-imports")
    res = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_ruff_is_clean():
    exe = _tool("ruff")
    res = subprocess.run([exe, "check", "src", "tests", "benchmarks", "docs"], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_noise_is_drawn_only_in_privacy():
    """No algorithm or engine module calls a NumPy noise sampler; releases go through the
    ledger-bound ``Mechanisms`` object (``mech.laplace(...)`` etc.). Data generators for demos and
    benchmarks live elsewhere and are not releases."""
    import re

    sampler = re.compile(
        r"(?<!mech)\.(laplace|normal|gumbel|geometric|standard_normal|exponential|binomial)\("
    )
    pkg = ROOT / "src" / "privclust"
    offenders = []
    for path in [*(pkg / "cluster").rglob("*.py"), *(pkg / "engine").rglob("*.py")]:
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if sampler.search(line):
                offenders.append(f"{path.name}:{lineno}: {line.strip()}")
    assert not offenders, offenders


def test_every_fit_draws_from_its_plan():
    """Estimators bind ``Mechanisms`` to their privacy plan (the plan-less form is for audits
    of one mechanism): every ``Mechanisms(...)`` call in ``cluster/`` passes three arguments."""
    import ast

    offenders = []
    for path in (ROOT / "src" / "privclust" / "cluster").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Mechanisms"
                    and len(node.args) + len(node.keywords) < 3):
                offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, offenders
    assert list((ROOT / "src" / "privclust" / "cluster").rglob("*.py"))


def test_privacy_exports_no_sampler_outside_the_ledger():
    """What ``privclust.privacy`` exports draws noise only through the ledger: no exported
    function takes a bare generator ``rng`` (the raw samplers stay in the submodules, for
    audits). ``public_*`` helpers draw public randomness, not noise."""
    import inspect

    import privclust.privacy as privacy

    raw = []
    for name in privacy.__all__:
        obj = getattr(privacy, name)
        if inspect.isfunction(obj) and not name.startswith("public_"):
            params = list(inspect.signature(obj).parameters)
            if params and params[0] in ("rng", "generator"):
                raw.append(name)
    assert raw == [], raw
    assert "Mechanisms" in privacy.__all__


MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 80


def test_files_and_functions_stay_short():
    """No source file over 800 lines, no function over 80 (docstring included): a module has
    one job and a function fits on a screen."""
    import ast

    long_files, long_functions = [], []
    for path in sorted((ROOT / "src" / "privclust").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT)
        if len(text.splitlines()) > MAX_FILE_LINES:
            long_files.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    assert not long_files, long_files
    assert not long_functions, long_functions


def test_adding_an_estimator_needs_only_its_module_and_its_entry():
    """Nothing outside the registry names an estimator class to dispatch on it: the command
    line, the model files and the plots read the registry."""
    import re

    dispatch = re.compile(r"name == \"(dpm|dbscan|lloyd|mixture|kmeans-guarantee|subclustering)\"")
    for rel in ("src/privclust/cli.py", "src/privclust/_cli_parser.py",
                "src/privclust/io/__init__.py"):
        text = (ROOT / rel).read_text(encoding="utf-8")
        assert not dispatch.search(text), rel
