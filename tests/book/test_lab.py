"""``make lab``: the MyST notebooks open in JupyterLab as notebooks, through jupytext."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jupytext
import pytest

from lab import ROOT
from tests.book import unavailable


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.md")), ids=lambda p: p.stem)
def test_notebook_opens_as_a_notebook(path: Path) -> None:
    notebook = jupytext.read(path)
    assert notebook.metadata["kernelspec"]["name"] == "python3", path
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code, f"{path}: jupytext finds no code cell"
    assert all("```{code-cell}" not in c.source for c in notebook.cells), path


def test_lab_opens_markdown_with_the_jupytext_viewer() -> None:
    """The viewer ``make lab`` makes the default is the one jupytext's extension registers."""
    makefile = (ROOT / "Makefile").read_text()
    assert '"markdown": "Jupytext Notebook"' in makefile
    extension = Path(sys.prefix) / "share" / "jupyter" / "labextensions"
    package = extension / "jupyterlab-jupytext" / "package.json"
    if not package.is_file():
        unavailable(f"{package}: jupytext's JupyterLab extension is not installed here; "
                    "make venv installs it (requirements.txt)")
    assert json.loads(package.read_text())["jupyterlab"]
    assert any("Jupytext Notebook" in p.read_text(errors="ignore")
               for p in (extension / "jupyterlab-jupytext" / "static").glob("*.js"))
