"""The digest `make html` compares before it starts Sphinx: it follows every byte of every file
git lists, ignores what git ignores and modification times, and is absent outside a checkout
(which then always builds)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from lab.book import uptodate


def test_the_digest_follows_content_and_listed_files_only(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("_build/\n")
    (tmp_path / "page.md").write_text("# A page\n")
    first = uptodate.digest(tmp_path)
    assert first and first == uptodate.digest(tmp_path)
    (tmp_path / "page.md").touch()
    (tmp_path / "_build").mkdir()
    (tmp_path / "_build" / "index.html").write_text("built\n")
    assert uptodate.digest(tmp_path) == first  # a touch or an ignored output is no input
    (tmp_path / "page.md").write_text("# A page, edited\n")
    edited = uptodate.digest(tmp_path)
    assert edited != first
    (tmp_path / "data.csv").write_text("x\n")  # a new file, not yet committed, is an input
    assert uptodate.digest(tmp_path) != edited


def test_outside_a_checkout_there_is_no_digest(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text("# A page\n")
    assert uptodate.digest(tmp_path) is None
