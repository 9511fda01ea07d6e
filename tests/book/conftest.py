"""Shared fixtures of the book tests: the seed mails and a scratch copy of the book sources."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lab import ROOT

BOOK_SOURCES = ("book", "notebooks", "data", "lab", "conf.py", "chapters", "configs", "workflow",
                "patches")


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
        message = ("seed mails not found: set KERNEL_BOOK_SEEDS to the directory holding "
                   "000_*.txt ... 004_*.txt (CI has them in ../shared/seeds)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
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
