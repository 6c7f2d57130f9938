"""The README's Python example runs as written (a user copies it first)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs_as_written(capsys):
    text = README.read_text()
    block = re.search(r"## Example\s+```python\n(.*?)```", text, re.S)
    assert block is not None, "the README lost its example"
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either: not even about clipped records
        exec(compile(block.group(1), "README example", "exec"), namespace)
    model = namespace["model"]
    assert 56 <= model.n_clusters_ <= 72
    assert model.predict(namespace["X_new"]).shape == (5,)
    assert "Privacy report for DPM" in capsys.readouterr().out
