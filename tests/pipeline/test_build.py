"""Builds in the shared build directory: what a guest module is built against, and a build
expected to fail."""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from lab import ROOT
from lab.command import StageError
from lab.pipeline import build
from lab.pipeline.experiment import KernelJob


def test_what_a_guest_module_builds_against_is_kept_with_the_build(
        tmp_path: Path, monkeypatch) -> None:
    """The build keeps the kernel's own external-module tree (install-extmod-build, run in
    the build directory by make) with its .config among its artifacts: the tools stage builds
    a module against it and never makes a kernel."""
    build_dir = tmp_path / "b"
    build_dir.mkdir()
    (build_dir / ".config").write_text("CONFIG_MODULES=y\n")
    ran: list[list[str]] = []

    def run(argv: list[str], **kw: object) -> None:
        ran.append(argv)
        (build_dir / ".kb-extmod" / "scripts").mkdir(parents=True)
        (build_dir / ".kb-extmod" / "Module.symvers").write_text("")
    monkeypatch.setattr(build, "run", run)
    (build_dir / ".kb-extmod").mkdir()
    (build_dir / ".kb-extmod" / "stale").write_text("from a failed run")
    box = build.Toolbox(tmp_path / "root", tmp_path / "src", "gcc")
    build.install_extmod(box, build_dir, tmp_path / "artifacts" / build.EXTMOD, tmp_path / "log")
    (argv,) = ran
    assert "run-command" in argv
    assert "KBUILD_RUN_COMMAND=/src/scripts/package/install-extmod-build /build/.kb-extmod" in argv
    kept = tmp_path / "artifacts" / build.EXTMOD
    assert sorted(p.name for p in kept.iterdir()) == [".config", "Module.symvers", "scripts"]
    assert not (build_dir / ".kb-extmod").exists()
    assert build.targets_for(build_dir / ".config") == ["bzImage", "modules"]


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


def test_only_a_chapter_with_guest_modules_keeps_the_external_module_tree(tmp_path: Path) -> None:
    """The build job asks for the external-module tree exactly where the chapter's tools build
    out-of-tree modules (qpw: tools: {kbuild: true}), so no other chapter's cached build is made
    again."""
    dag = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"),
         "--directory", str(tmp_path / "work"), "-n", "-p", "--forceall", "--cores", "1",
         "--config", "chapters=qpw,smoke", f"python={sys.executable}"],
        cwd=ROOT, text=True, capture_output=True, check=False)
    assert dag.returncode == 0, dag.stdout[-2000:] + dag.stderr[-2000:]
    builds = []
    for line in dag.stdout.splitlines():
        if " build --job " in line:
            argv = shlex.split(line)
            builds.append(KernelJob.from_json(argv[argv.index("--job") + 1]))
    qpw = [job for job in builds if job.chapter == "qpw"]
    smoke = [job for job in builds if job.chapter == "smoke"]
    assert qpw and all(job.extmod for job in qpw)
    assert smoke and not any(job.extmod for job in smoke)
