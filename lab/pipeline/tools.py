"""The tools stage: a chapter's guest programs (a module, a BPF program, a load generator),
built inside the toolchain root against exactly the kernel they will run on."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from lab.command import StageError, run
from lab.pipeline import build, series, source, toolchain
from lab.pipeline.stamps import BuildStamp, ToolsStamp, fresh_log, load_experiment, stage

TOOLS_CC = "gcc-15"
"""The compiler of guest programs unless the chapter's ``tools: {cc: ...}`` says otherwise."""


def cmd_tools(a: argparse.Namespace) -> None:
    """Build the chapter's guest programs for one built variant, inside the toolchain root.

    Runs ``make -C <tools dir> OUT=... CC=... KSRC=/src VMLINUX=...`` with the variant's source
    tree checked out at its commit (``/src``) and its artifacts (``vmlinux`` with BTF,
    ``.config``, ``System.map``); with ``tools: {kbuild: true}`` also ``KBUILD=/build``, its
    build directory holding its objects (headers, ``Module.symvers`` for out-of-tree modules),
    and ``KMAKE``, the compiler variables the kernel was built with (a module for a clang
    kernel is built with clang).
    A module or a BPF program is so built against exactly the kernel it will run on."""
    exp = load_experiment(a)
    v = exp.all_variants[a.variant]
    tools = exp.raw.get("tools") or {}
    log = fresh_log(a)
    out = Path(a.out).resolve().parent / "bin"
    built = BuildStamp.read(a.build)
    compilers: dict[str, str | None] = {}
    with stage("tools", f"{exp.name}/{v.name}", log):
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        programs: dict[str, str] = {}
        if tools:
            box = build.toolbox(a, v, exp.series)
            artifacts = Path(built.artifacts)
            build_dir = Path(built.build_dir)
            cc = tools.get("cc", TOOLS_CC)
            # the root is read-only; bwrap can make mount points only in its /tmp tmpfs
            argv = ["make", "-C", "/tmp/chapter", "OUT=/tmp/out", f"CC={cc}",
                    f"KSRC={build.SRC}", "VMLINUX=/tmp/artifacts/vmlinux"]
            if tools.get("bpf_cc"):
                argv.append(f"CLANG={tools['bpf_cc']}")
            binds = {box.tree: build.SRC, artifacts: "/tmp/artifacts",
                     exp.chapter.path(tools["dir"]): "/tmp/chapter", out: "/tmp/out"}
            with series.tree_lock(box.tree):
                if tools.get("kbuild"):
                    # variants share a build directory: it must hold this one's objects
                    build.ensure_built(box, build_dir, built.commit, artifacts / ".config",
                                       log)
                    argv += [f"KBUILD={build.BUILD}",
                             f"KMAKE={' '.join(build.kernel_make_vars(box.compiler))}"]
                    binds[build_dir] = build.BUILD
                else:
                    series.checkout(box.tree, built.commit)
                run(toolchain.in_root(box.root, argv, binds), log=log,
                    what=f"make -C {tools['dir']} (guest programs of {v.name})")
            for name in tools["programs"]:
                if not (out / name).is_file():
                    raise StageError(f"{exp.path}: tools.programs names {name}, but make -C "
                                     f"{tools['dir']} left no {name} in OUT; see {log}")
                programs[name] = source.sha256_file(out / name)
            compilers = {"cc": cc, "bpf_cc": tools.get("bpf_cc")}
    ToolsStamp(variant=v.name, bin=str(out), programs=programs, commit=built.commit,
               **compilers).write(a.out)
