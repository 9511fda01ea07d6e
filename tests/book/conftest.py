"""Shared fixtures of the book tests: the seed mails, a scratch copy of the book sources, and
one build of that copy that the build and browser tests share."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab import ROOT
from tests.book import unavailable

BOOK_SOURCES = ("book", "notebooks", "data", "lab", "conf.py", "chapters", "configs", "workflow",
                "patches", "CITATION.cff")


ARCHIVE_VARIABLES = {"seeds": "KERNEL_BOOK_SEEDS", "upstream": "KERNEL_BOOK_UPSTREAM"}
"""The environment variable that names each archive of cited sources
(``lab.analysis.cited.ARCHIVES``)."""


def archive_dir(archive: str) -> Path | None:
    """An archive of cited sources: ``$KERNEL_BOOK_SEEDS`` / ``$KERNEL_BOOK_UPSTREAM``, or
    ``shared/<archive>`` beside the repository."""
    candidates = [os.environ.get(ARCHIVE_VARIABLES[archive]), ROOT.parent / "shared" / archive]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


@pytest.fixture(scope="session")
def archives() -> dict[str, Path]:
    """Every archive the cited sources name (seed mails, upstream postings); CI always has
    them, a reader's clone may not."""
    found = {name: archive_dir(name) for name in ARCHIVE_VARIABLES}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        unavailable(f"cited sources not found ({', '.join(missing)}): set "
                    + " and ".join(ARCHIVE_VARIABLES[m] for m in missing)
                    + " to the directories holding them (CI has them in ../shared/seeds and "
                    "../shared/upstream)")
    return {name: path for name, path in found.items() if path is not None}


def copy_book(target: Path) -> Path:
    """Copy what the book is built from into ``target`` so a test may change its data."""
    for name in BOOK_SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name,
                            ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
        else:
            shutil.copy2(source, target / name)
    return target


def sphinx(src: Path, builder: str = "html") -> subprocess.CompletedProcess[str]:
    """Build ``src`` as make html and make pdf do, with its own cache and output under
    src/_build: one environment for every builder, so the PDF's build reads nothing again."""
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", builder,
         "-d", str(src / "_build" / "doctrees"), str(src), str(src / "_build" / builder)],
        cwd=src, capture_output=True, text=True, timeout=900,
    )


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the book built once (cold) for the session; tests that change its data run
    last in their module and leave a book that still builds."""
    src = copy_book(tmp_path_factory.mktemp("book"))
    result = sphinx(src)
    assert result.returncode == 0, result.stdout + result.stderr
    return src
