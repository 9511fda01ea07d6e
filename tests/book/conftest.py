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


def seeds_dir() -> Path | None:
    """The seed mails: ``$KERNEL_BOOK_SEEDS``, or ``shared/seeds`` beside the repository."""
    candidates = [os.environ.get("KERNEL_BOOK_SEEDS"), ROOT.parent / "shared" / "seeds"]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


@pytest.fixture(scope="session")
def seeds() -> Path:
    """The seed directory; CI always has it, a reader's clone may not."""
    found = seeds_dir()
    if found is None:
        unavailable("seed mails not found: set KERNEL_BOOK_SEEDS to the directory holding "
                    "000_*.txt ... 004_*.txt (CI has them in ../shared/seeds)")
    return found


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
    """Build ``src`` as make html does, with its own cache and output under src/_build."""
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", builder,
         str(src), str(src / "_build" / builder)],
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
