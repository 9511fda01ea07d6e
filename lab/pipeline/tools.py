"""The tools stage: a chapter's guest programs (a module, a BPF program, a load generator),
built inside the toolchain root against exactly the kernel they will run on."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from lab import from_repo
from lab.command import StageError, run
from lab.pipeline import arch as arches
from lab.pipeline import build, series, source, toolchain
from lab.pipeline.experiment import KernelJob
from lab.pipeline.stamps import BuildStamp, ToolsStamp, fresh_log, stage

TOOLS_CC = "gcc-15"
"""The compiler of guest programs unless the chapter's ``tools: {cc: ...}`` says otherwise."""


def cmd_tools(a: argparse.Namespace) -> None:
    """Build the chapter's guest programs for one built variant, inside the toolchain root.

    Runs ``make -C <tools dir> OUT=... CC=... KSRC=/src VMLINUX=...`` with the variant's source
    tree checked out at its commit (``/src``) and its artifacts (``vmlinux`` with BTF,
    ``.config``, ``System.map``); with ``tools: {kbuild: true}`` also ``KBUILD=/build``, what
    the build stage kept for out-of-tree modules (headers, generated files, ``Module.symvers``:
    :func:`lab.pipeline.build.install_extmod`), and ``KMAKE``, the compiler variables the
    kernel was built with (a module for a clang kernel is built with clang).
    A module or a BPF program is so built against exactly the kernel it will run on, and no
    kernel is built here."""
    job: KernelJob = a.job
    tools = job.tools
    log = fresh_log(a)
    out = Path(a.out).resolve().parent / "bin"
    built = BuildStamp.read(a.build)
    compilers: dict[str, str | None] = {}
    with stage("tools", f"{job.chapter}/{job.variant}", log):
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        programs: dict[str, str] = {}
        if tools:
            box = build.toolbox(a, job)
            artifacts = Path(built.artifacts)
            target = arches.get(job.arch)
            cc = target.tools_cc(tools.get("cc", TOOLS_CC))
            # the root is read-only; bwrap can make mount points only in its /tmp tmpfs
            argv = ["make", "-C", "/tmp/chapter", "OUT=/tmp/out", f"CC={cc}",
                    f"KSRC={build.SRC}", "VMLINUX=/tmp/artifacts/vmlinux"]
            if target.cross:
                # a cross architecture's guest is a static busybox: no C library to load
                argv.append("LDFLAGS=-static")
            if tools.get("bpf_cc"):
                argv.append(f"CLANG={tools['bpf_cc']}")
            binds = {box.tree: build.SRC, artifacts: "/tmp/artifacts",
                     from_repo(job.tools_dir): "/tmp/chapter", out: "/tmp/out"}
            read_only: dict[Path, str] = {}
            if tools.get("kbuild"):
                extmod = artifacts / build.EXTMOD
                if not extmod.is_dir():
                    raise StageError(f"{a.build}: the build kept no {build.EXTMOD}/ for "
                                     "out-of-tree modules, which its job asks for (extmod) "
                                     f"for a chapter with tools: {{kbuild: true}} ({job.file}). "
                                     "Fix: let make reproduce build it again")
                argv += [f"KBUILD={build.BUILD}",
                         f"KMAKE={' '.join(build.kernel_make_vars(box.compiler, job.arch))}"]
                read_only[extmod] = build.BUILD  # a module build writes only its own M=
            with series.tree_lock(box.tree):
                series.checkout(box.tree, built.commit)
                run(toolchain.in_root(box.root, argv, binds, read_only=read_only), log=log,
                    what=f"make -C {tools['dir']} (guest programs of {job.variant})")
            for name in tools["programs"]:
                if not (out / name).is_file():
                    raise StageError(f"{job.file}: tools.programs names {name}, but make -C "
                                     f"{tools['dir']} left no {name} in OUT; see {log}")
                programs[name] = source.sha256_file(out / name)
            compilers = {"cc": cc, "bpf_cc": tools.get("bpf_cc")}
    ToolsStamp(variant=job.variant, bin=str(out), programs=programs, commit=built.commit,
               **compilers).write(a.out)
