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
    res = subprocess.run([exe, "check", "src", "tests", "benchmarks"], cwd=ROOT,
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
