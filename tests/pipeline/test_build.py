"""The shared build directory: a guest module is built against the variant's own objects."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from lab.command import StageError
from lab.pipeline import build, kconfig


def test_ensure_built_rebuilds_only_when_another_variant_was_built_there(
        tmp_path: Path, monkeypatch) -> None:
    config = tmp_path / "config"
    config.write_text("CONFIG_MODULES=y\n")
    made: list[str] = []
    checked_out: list[str] = []
    monkeypatch.setattr(build, "make_kernel",
                        lambda box, d, commit, cfg, targets, log: made.append(commit))
    monkeypatch.setattr(build.series, "checkout", lambda tree, commit: checked_out.append(commit))
    box = build.Toolbox(tmp_path / "root", tmp_path / "src", "gcc")
    mark = tmp_path / build.BUILT_MARK
    log = tmp_path / "log"

    build.ensure_built(box, tmp_path, "aaa", config, log)  # no mark yet: build
    assert made == ["aaa"]
    mark.write_text(f"aaa {kconfig.sha256(config)}\n")
    build.ensure_built(box, tmp_path, "aaa", config, log)  # it holds aaa: only check out
    assert made == ["aaa"] and checked_out == ["aaa"]
    build.ensure_built(box, tmp_path, "bbb", config, log)  # another variant: build
    assert made == ["aaa", "bbb"]
    config.write_text("CONFIG_MODULES=y\nCONFIG_X=y\n")
    build.ensure_built(box, tmp_path, "aaa", config, log)  # same commit, other config: build
    assert made == ["aaa", "bbb", "aaa"]
    assert build.targets_for(config) == ["bzImage", "modules"]


def test_a_build_expected_to_fail_keeps_its_errors_and_refuses_any_other_outcome(
        tmp_path: Path, monkeypatch) -> None:
    config = tmp_path / "config"
    config.write_text("CONFIG_MODULES=y\n")
    log = tmp_path / "build.log"
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / ".config").write_text("CONFIG_MODULES=y\n")
    monkeypatch.setattr(build, "build_dir_for", lambda base, cfg, cc: tmp_path / "b")
    monkeypatch.setattr(build.series, "tree_lock", lambda tree: contextlib.nullcontext())
    box = build.Toolbox(tmp_path / "root", tmp_path / "src", "gcc")
    expected = "from pointer to non-enclosed address space"
    output = ("  CC      mm/slub.o\n"
              "../src/mm/slub.c: In function '__pcs_replace_empty_main':\n"
              f"/src/mm/slub.c:4641:9: error: passing argument 1 of 'lock_is_held' {expected}\n"
              "/src/include/linux/lockdep.h:290:5: note: expected 'const struct lockdep_map *'\n"
              "make[4]: *** [scripts/Makefile.build:287: mm/slub.o] Error 1\n")

    def fails(*a: object) -> None:
        log.write_text(log.read_text() + output if log.exists() else output)
        raise StageError("kernel build failed")
    monkeypatch.setattr(build, "make_kernel", fails)
    info = build.build_failure(box, "c0ffee", config, "base", tmp_path / "out", log, expected)
    assert info["failed"] and info["error_lines"] == 1
    assert (tmp_path / "out" / ".config").read_text() == "CONFIG_MODULES=y\n"
    assert (tmp_path / "out" / "errors.txt").read_text().splitlines() == [
        "mm/slub.c: In function '__pcs_replace_empty_main':",
        f"mm/slub.c:4641:9: error: passing argument 1 of 'lock_is_held' {expected}",
        "include/linux/lockdep.h:290:5: note: expected 'const struct lockdep_map *'",
        "make[4]: *** [scripts/Makefile.build:287: mm/slub.o] Error 1"]
    with pytest.raises(StageError, match="failed, but not with 'some other error'"):
        build.build_failure(box, "c0ffee", config, "base", tmp_path / "out", log,
                            "some other error")
    monkeypatch.setattr(build, "make_kernel", lambda *a: None)
    with pytest.raises(StageError, match="the failure it documents is gone"):
        build.build_failure(box, "c0ffee", config, "base", tmp_path / "out", log, expected)
