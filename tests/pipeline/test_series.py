"""Series in apply and revert mode on a small git tree, and a conflict's message."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lab import ROOT
from lab.command import StageError
from lab.pipeline import series, source

ORIGINAL = "".join(f"line {i}\n" for i in range(1, 21))


def _repo(tmp_path: Path) -> tuple[Path, str]:
    tree = tmp_path / "tree"
    (tree / "init").mkdir(parents=True)
    (tree / "init" / "main.c").write_text(ORIGINAL)
    env = source.git_env()
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run(["git", "-C", str(tree), *args], env=env, check=True)
    return tree, source.head(tree)


def _patch(path: Path, old: str, new: str, at: int = 5) -> Path:
    path.write_text(
        "Subject: [PATCH] test\n\n---\ndiff --git a/init/main.c b/init/main.c\n"
        "--- a/init/main.c\n+++ b/init/main.c\n"
        f"@@ -{at},3 +{at},3 @@\n line {at}\n-{old}\n+{new}\n line {at + 2}\n"
    )
    return path


def _series(tmp_path: Path, mode: str, patches: list[Path]) -> series.Series:
    d = patches[0].parent
    (d / "series").write_text("# test\n" + "".join(f"{p.name}\n" for p in patches))
    (d / "meta.yaml").write_text(f"mode: {mode}\n")
    return series.load(d)


def _file_at(tree: Path, commit: str) -> str:
    return subprocess.run(["git", "-C", str(tree), "show", f"{commit}:init/main.c"],
                          text=True, capture_output=True, check=True).stdout


def test_apply_mode_patches_only_the_patched_tree(tmp_path) -> None:
    tree, base = _repo(tmp_path)
    d = tmp_path / "patches"
    d.mkdir()
    ser = _series(tmp_path, "apply", [_patch(d / "0001.patch", "line 6", "line six")])
    assert series.commit_for(tree, base, ser, "baseline") == base
    patched = series.commit_for(tree, base, ser, "patched")
    assert "line six\n" in _file_at(tree, patched)
    assert series.commit_for(tree, base, ser, "patched") == patched  # reused, same id
    # the working tree was never touched
    assert (tree / "init" / "main.c").read_text() == ORIGINAL


def test_revert_mode_removes_a_merged_change_from_the_baseline(tmp_path) -> None:
    tree, _ = _repo(tmp_path)
    (tree / "init" / "main.c").write_text(ORIGINAL.replace("line 6\n", "line six\n"))
    subprocess.run(["git", "-C", str(tree), "commit", "-qam", "merged"], env=source.git_env(),
                   check=True)
    merged = source.head(tree)
    d = tmp_path / "patches"
    d.mkdir()
    ser = _series(tmp_path, "revert", [_patch(d / "0001.patch", "line 6", "line six")])
    assert series.commit_for(tree, merged, ser, "patched") == merged
    baseline = series.commit_for(tree, merged, ser, "baseline")
    assert _file_at(tree, baseline) == ORIGINAL


def test_conflict_names_patch_file_hunk_and_a_working_reproduction(tmp_path) -> None:
    tree, base = _repo(tmp_path)
    d = tmp_path / "patches"
    d.mkdir()
    good = _patch(d / "0001-good.patch", "line 6", "line six")
    bad = _patch(d / "0002-bad.patch", "line 12", "line twelve", at=11)
    bad.write_text(bad.read_text().replace(" line 13\n", " line 13 (not in the base)\n"))
    ser = _series(tmp_path, "apply", [good, bad])
    with pytest.raises(StageError) as err:
        series.commit_for(tree, base, ser, "patched")
    msg = str(err.value)
    assert f"{bad} does not apply" in msg
    assert "file init/main.c, hunk #1 (@@ -11,3 +11,3 @@)" in msg
    line = next(x for x in msg.splitlines() if x.startswith("reproduce: "))
    assert "0001-good.patch" in line  # earlier patches are replayed first
    replay = subprocess.run(["bash", "-c", line.removeprefix("reproduce: ")], text=True,
                            capture_output=True, check=False)
    assert "patch failed: init/main.c:11" in replay.stderr


def test_hunks_of_the_smoke_patch() -> None:
    (patch,) = series.load(ROOT / "patches" / "smoke").patches
    (hunk,) = series.hunks(patch)
    assert (hunk.path, hunk.number, hunk.old_start) == ("init/main.c", 1, 996)


def test_series_file_naming_a_missing_patch_is_refused(tmp_path) -> None:
    (tmp_path / "series").write_text("0001-missing.patch\n")
    with pytest.raises(StageError, match=r"names 0001-missing.patch, which is not in"):
        series.load(tmp_path)


def test_unknown_mode_is_refused(tmp_path) -> None:
    (tmp_path / "series").write_text("")
    (tmp_path / "meta.yaml").write_text("mode: cherry-pick\n")
    with pytest.raises(StageError, match="mode must be 'apply' or 'revert'"):
        series.load(tmp_path)


def test_smoke_series_applies_to_the_pinned_base(tmp_path) -> None:
    base = source.prepare(tmp_path / "source.log")
    ser = series.load(ROOT / "patches" / "smoke")
    patched = series.commit_for(base.tree, base.commit, ser, "patched")
    assert "kernel-book smoke: patched kernel" in subprocess.run(
        ["git", "-C", str(base.tree), "show", f"{patched}:init/main.c"], text=True,
        capture_output=True, check=True).stdout


def test_instrument_goes_on_both_trees_and_named_trees_are_explicit(tmp_path) -> None:
    tree, base = _repo(tmp_path)
    d = tmp_path / "patches"
    (d / "instrument").mkdir(parents=True)
    change = _patch(d / "0001.patch", "line 6", "line six")
    probe = _patch(d / "instrument" / "0001-probe.patch", "line 16", "line 16 probed", at=15)
    (d / "series").write_text("0001.patch\n")
    (d / "meta.yaml").write_text("mode: apply\ninstrument: [instrument/0001-probe.patch]\n"
                                 "trees:\n  probe-only: [instrument/0001-probe.patch]\n")
    ser = series.load(d)
    assert ser.files == sorted([change, probe])
    baseline = _file_at(tree, series.commit_for(tree, base, ser, "baseline"))
    patched = _file_at(tree, series.commit_for(tree, base, ser, "patched"))
    assert "line 16 probed" in baseline and "line six" not in baseline
    assert "line 16 probed" in patched and "line six" in patched
    assert _file_at(tree, series.commit_for(tree, base, ser, "probe-only")) == baseline
    with pytest.raises(StageError, match=r"tree 'nope' is not defined .*have: baseline, "
                                         r"patched, probe-only"):
        series.commit_for(tree, base, ser, "nope")


@pytest.mark.parametrize("chapter", sorted(p.name for p in (ROOT / "patches").iterdir()
                                           if (p / "series").is_file()))
def test_every_chapter_tree_applies_to_the_pinned_base(chapter: str, tmp_path) -> None:
    base = source.prepare(tmp_path / "source.log")
    ser = series.load(ROOT / "patches" / chapter)
    commits = {t: series.commit_for(base.tree, base.commit, ser, t)
               for t in ["baseline", "patched", *ser.trees]}
    assert commits["patched"] != base.commit or ser.mode == "revert"
