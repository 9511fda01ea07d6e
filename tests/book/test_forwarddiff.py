"""lab.book.forwarddiff: a revert turned round is a diff that patch(1) applies forwards."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lab import ROOT
from lab.book.forwarddiff import diff_part, reverse

OLD = "int a;\n-- a line that starts like a file header\nint b;\nint c;\n"
NEW = "int a;\n+++ another one\nint b;\nint d;\nint e;\n"


def _git_diff(tmp_path: Path, before: str, after: str) -> str:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "f.c").write_text(before)
    (tmp_path / "b" / "f.c").write_text(after)
    proc = subprocess.run(["git", "diff", "--no-index", "a/f.c", "b/f.c"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stderr
    return proc.stdout


def test_the_reversed_diff_applies_to_the_new_file_and_gives_the_old(tmp_path: Path) -> None:
    diff = _git_diff(tmp_path, OLD, NEW)
    forward = reverse(diff)
    target = tmp_path / "f.c"
    target.write_text(NEW)
    subprocess.run(["patch", "-s", str(target)], input=forward, text=True, check=True)
    assert target.read_text() == OLD
    assert reverse(forward) == diff


@pytest.mark.parametrize("revert", sorted((ROOT / "patches").glob("*/revert/*.patch")),
                         ids=lambda p: p.name)
def test_every_revert_of_the_book_turns_round_and_back(revert: Path) -> None:
    diff = diff_part(revert.read_text(), revert.name)
    forward = reverse(diff)
    assert forward != diff and reverse(forward) == diff
    # what the revert removes, the forward diff adds
    removed = sorted(line[1:] for line in diff.splitlines()
                     if line.startswith("-") and not line.startswith("--- "))
    added = sorted(line[1:] for line in forward.splitlines()
                   if line.startswith("+") and not line.startswith("+++ "))
    assert removed == added


def test_a_file_that_is_not_a_patch_is_named() -> None:
    with pytest.raises(ValueError, match=r"notes\.txt: no 'diff --git' line"):
        diff_part("just words\n", "notes.txt")
