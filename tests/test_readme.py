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
    assert "Privacy report for CoresetKMeans" in capsys.readouterr().out


def test_every_python_block_of_the_readme_runs():
    """Every example a user may copy runs, each on its own."""
    import matplotlib

    matplotlib.use("Agg")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 4, "the README lost its examples"
    for i, code in enumerate(blocks):
        namespace: dict = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(code, f"README block {i + 1}", "exec"), namespace)
