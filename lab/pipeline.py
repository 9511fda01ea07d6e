"""Command-line entry of every pipeline stage; the Snakefile's rules call it.

``python -m lab.pipeline <stage> ...`` runs one stage for one target and writes one small
JSON stamp (what was made and where). Snakemake decides what runs, in which order, what is up
to date and what to rerun after an interruption, and records each job's log and time
(``log:``, ``benchmark:``); this module does the work of one step, prints a progress line, and
turns a :class:`StageError` into a message without a traceback.

Three commands are for people rather than rules: ``reproduce`` (``make reproduce``) drives
Snakemake, ``reparse`` (``make reparse``) derives a new run from a committed run's raw output
with today's parsers, and ``check`` validates chapters without building anything.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab import (
    ROOT,
    build,
    cachedir,
    collect,
    experiment,
    guestlayer,
    inspect,
    series,
    source,
    toolchain,
    vm,
)
from lab.command import StageError, require_tools, run
from lab.parse import keyvalue


@contextmanager
def stage(name: str, target: str, log: Path | None) -> Iterator[dict[str, Any]]:
    """Print start and end lines with elapsed time and log (Snakemake's benchmark files keep
    the times; these lines are for the person watching)."""
    stamp: dict[str, Any] = {}
    start = time.monotonic()
    where = f" (log: {log})" if log else ""
    print(f"[{time.strftime('%H:%M:%S')}] >> {name:<8} {target}{where}", file=sys.stderr,
          flush=True)
    try:
        yield stamp
    except StageError:
        print(f"[{time.strftime('%H:%M:%S')}] !! {name:<8} {target} failed after "
              f"{time.monotonic() - start:.1f} s{where}", file=sys.stderr, flush=True)
        raise
    print(f"[{time.strftime('%H:%M:%S')}] ok {name:<8} {target} "
          f"{time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write a stamp atomically (Snakemake sees it only when complete)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.rename(path)


def read_json(path: str | Path) -> dict[str, Any]:
    """Read a stamp written by an earlier stage."""
    return json.loads(Path(path).read_text())


def fresh_log(a: argparse.Namespace) -> Path:
    """The job's log file (Snakemake's ``log:``), emptied: a rerun does not append."""
    log = Path(a.log).resolve()
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    return log


def load_experiment(a: argparse.Namespace) -> experiment.Experiment:
    """The chapter's experiment with make's ACCEL=, REPS= and VARIANTS= applied."""
    only = [v for v in (a.variants or "").split(",") if v] or None
    return experiment.load(a.chapter, accel=a.accel or None,
                           reps=int(a.reps) if a.reps else None, only=only)


def cmd_root(a: argparse.Namespace) -> None:
    """Create (once) the toolchain root; record its packages and compiler versions."""
    log = fresh_log(a)
    with stage("root", toolchain.root_key(), log) as stamp:
        require_tools(["mmdebstrap", "bwrap"])
        root = toolchain.create_root(log)
        stamp.update(root=str(root), key=root.name, suite=toolchain.SUITE,
                     packages=toolchain.root_packages(root),
                     tools=toolchain.tool_versions(root))
    write_json(Path(a.out), stamp)


def cmd_layer(a: argparse.Namespace) -> None:
    """The guest's root for a chapter's boots: the toolchain root itself, or, when the chapter
    lists ``guest_packages``, the layer its guest lock describes (made once,
    :mod:`lab.guestlayer`)."""
    exp = load_experiment(a)
    log = fresh_log(a)
    root = read_json(a.root)
    with stage("layer", exp.name, log) as stamp:
        if not guestlayer.requested(exp.chapter):
            stamp.update(root=root["root"], key=root["key"], packages={})
        else:
            lock = guestlayer.load_lock(exp.chapter, root["key"])
            tree = guestlayer.create_layer(Path(root["root"]), lock, log)
            stamp.update(root=str(tree), key=tree.name, packages=dict(lock.packages),
                         lock=in_repo(guestlayer.lock_path(exp.chapter)))
    write_json(Path(a.out), stamp)


def cmd_source(a: argparse.Namespace) -> None:
    """Fetch, verify and unpack the base tree (or take KERNEL_SRC / KERNEL_TARBALL)."""
    log = fresh_log(a)
    with stage("source", "base tree", log) as stamp:
        require_tools(["git", "apt-get", "dpkg-deb"])
        stamp.update(source.prepare(log).to_json())
    write_json(Path(a.out), stamp)


def cmd_series(a: argparse.Namespace) -> None:
    """Make the commit of one tree (baseline, patched or a named one) of the chapter's series."""
    exp = load_experiment(a)
    base = read_json(a.base)
    ser = series.load(exp.series)
    with stage("series", f"{exp.name}/{a.tree}", None) as stamp:
        commit = series.commit_for(Path(base["tree"]), base["commit"], ser, a.tree)
        stamp.update(tree=a.tree, commit=commit, mode=ser.mode, sha256=ser.sha256,
                     patches={str(p.relative_to(ser.directory)): source.sha256_file(p)
                              for p in ser.files},
                     steps=[{"patch": str(p.relative_to(ser.directory)), "reverse": rev}
                            for p, rev in ser.steps(a.tree)])
    write_json(Path(a.out), stamp)


def _box(a: argparse.Namespace, variant: experiment.Variant) -> build.Toolbox:
    return build.Toolbox(Path(read_json(a.root)["root"]), Path(read_json(a.base)["tree"]),
                         variant.compiler)


def cmd_config(a: argparse.Namespace) -> None:
    """Configure one variant: start config + fragments, olddefconfig, check nothing dropped."""
    exp = load_experiment(a)
    v = exp.all_variants[a.variant]
    log = fresh_log(a)
    with stage("config", f"{exp.name}/{v.name}", log):
        build.configure(_box(a, v), read_json(a.series)["commit"], exp.kconfig_start,
                        exp.fragment_paths(v.name), Path(a.out), log)


def cmd_build(a: argparse.Namespace) -> None:
    """Build one variant's kernel; keep image, vmlinux, System.map, modules and log in the
    stamp's directory (in the cache's work tree, where Snakemake sees the image)."""
    exp = load_experiment(a)
    v = exp.all_variants[a.variant]
    log = fresh_log(a)
    dest = Path(a.out).resolve().parent
    with stage("build", f"{exp.name}/{v.name}", log) as stamp:
        make = (functools.partial(build.build_failure, expected=v.build_fails)
                if v.build_fails else build.build)
        info = make(_box(a, v), read_json(a.series)["commit"], Path(a.config),
                    read_json(a.base)["commit"], dest, log)
        stamp.update(info, artifacts=str(dest), variant=v.name)
    write_json(Path(a.out), stamp)


def cmd_inspect(a: argparse.Namespace) -> None:
    """Clock-free evidence from the variant's vmlinux (:mod:`lab.inspect`, the root's binutils),
    as the experiment's ``inspect:`` asks: ``callers`` records the out-of-line copies of every
    function the series forces inline and the callers' probe region; ``calls`` every call site
    of the named functions; ``probes`` the out-of-line copies of each probe target. Image
    sizes are the build's."""
    exp = load_experiment(a)
    v = exp.variants[a.variant]
    artifacts = Path(read_json(a.build)["artifacts"])
    root = Path(read_json(a.root)["root"])
    wanted = exp.raw.get("inspect") or {}
    callers = list(wanted.get("callers", []))
    with stage("inspect", f"{exp.name}/{v.name}", None) as stamp:
        stamp.update(variant=v.name, build=exp.build_name(v.name))

        def tool(*argv: str) -> str:
            return run(toolchain.in_root(root, list(argv), {artifacts: build.BUILD}),
                       what=f"{argv[0]} of {v.name}'s vmlinux").stdout
        nm = (tool("nm", "-S", "--defined-only", f"{build.BUILD}/vmlinux")
              if callers or wanted.get("probes") or wanted.get("listings") else "")
        if callers:
            ser = series.load(exp.series)
            functions = inspect.forced_inline([p for p in ser.patches
                                               if p not in ser.instrument])
            listings = {c: tool("objdump", "-d", "--no-show-raw-insn", f"--disassemble={c}",
                                f"{build.BUILD}/vmlinux") for c in callers}
            stamp["evidence"] = inspect.evidence(nm, listings, functions)
        if wanted.get("calls"):
            # the whole image's listing is large: keep function headers and lines naming a target
            names = "|".join(re.escape(t) for t in wanted["calls"])
            listing = tool("sh", "-c", f"objdump -d --no-show-raw-insn {build.BUILD}/vmlinux | "
                           f"grep -E '^[0-9a-f]+ <|<({names})>$' || true")
            stamp.setdefault("evidence", {})["call_sites"] = inspect.call_sites(
                listing, list(wanted["calls"]))
        if wanted.get("probes"):
            targets = inspect.probe_targets(nm, list(wanted["probes"]))
            bad = {fn: found for fn, found in targets.items() if found != [fn]}
            if bad:
                raise StageError(
                    f"{exp.name}/{v.name}: probe targets not out of line under their own name "
                    f"in the vmlinux: {bad} ([] = inlined everywhere, a .isra/.constprop name "
                    f"= a clone the probe would miss). Fix: mark them noinline in the "
                    f"chapter's instrument patch, or probe their callers")
            stamp.setdefault("evidence", {})["probe_targets"] = targets
        if wanted.get("listings"):
            # the listing itself is raw output of the run (publish keeps it per build); the
            # manifest records each function's size
            # static-branch sites: the jump table lies between two linker symbols, which a
            # kernel without CONFIG_JUMP_LABEL does not have (its branches are plain tests)
            addrs = inspect.addresses(nm)
            start, stop = (addrs.get(f"__{e}___jump_table", 0) for e in ("start", "stop"))
            branches = inspect.static_branches(tool(
                "objdump", "-s", f"--start-address={start:#x}", f"--stop-address={stop:#x}",
                f"{build.BUILD}/vmlinux"), addrs) if start < stop else {}
            text, summary = inspect.listings(nm, {
                fn: tool("objdump", "-d", "--no-show-raw-insn", f"--disassemble={fn}",
                         f"{build.BUILD}/vmlinux") for fn in wanted["listings"]}, branches)
            listing_file = Path(a.out).with_suffix(".s")
            listing_file.write_text(text)
            stamp["listing"] = str(listing_file)
            stamp.setdefault("evidence", {})["listings"] = summary
    write_json(Path(a.out), stamp)


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
    built = read_json(a.build)
    with stage("tools", f"{exp.name}/{v.name}", log) as stamp:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        programs: dict[str, str] = {}
        if tools:
            box = _box(a, v)
            artifacts = Path(built["artifacts"])
            build_dir = Path(built["build_dir"])
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
                    build.ensure_built(box, build_dir, built["commit"], artifacts / ".config",
                                       log)
                    argv += [f"KBUILD={build.BUILD}",
                             f"KMAKE={' '.join(build.kernel_make_vars(box.compiler))}"]
                    binds[build_dir] = build.BUILD
                else:
                    series.checkout(box.tree, built["commit"])
                run(toolchain.in_root(box.root, argv, binds), log=log,
                    what=f"make -C {tools['dir']} (guest programs of {v.name})")
            for name in tools["programs"]:
                if not (out / name).is_file():
                    raise StageError(f"{exp.path}: tools.programs names {name}, but make -C "
                                     f"{tools['dir']} left no {name} in OUT; see {log}")
                programs[name] = source.sha256_file(out / name)
            stamp["cc"] = cc
            stamp["bpf_cc"] = tools.get("bpf_cc")
        stamp.update(bin=str(out), programs=programs, variant=v.name, commit=built["commit"])
    write_json(Path(a.out), stamp)


def cmd_accel(a: argparse.Namespace) -> None:
    """Resolve each requested accelerator once per run (the KVM probe happens here).

    The probe boots the first variant's kernel, so it runs after that build."""
    exp = load_experiment(a)
    with stage("accel", exp.name, None) as stamp:
        require_tools([vm.QEMU])
        chosen = {}
        for req in sorted({v.accel for v in exp.variants.values()}):
            used, why = vm.choose_accel(
                req, cachedir.sub("probe"), timeout=a.probe_timeout,
                kernel=Path(read_json(a.build)["artifacts"]) / "bzImage" if a.build else None,
                root=Path(read_json(a.root)["root"]))
            chosen[req] = {"used": used, "why": why}
            print(f"           accel {req} -> {used}: {why}", file=sys.stderr)
        stamp["accel"] = chosen
    write_json(Path(a.out), stamp)


def _job_dir(job: Path, exp: experiment.Experiment, programs: Path,
             modules: Path | None = None) -> None:
    """Fill a boot's job directory: guest init, workloads, programs and, when the variant's
    build made modules, its ``modules_install`` tree as ``modules/`` (a workload insmods from
    it, so the guest always loads the modules of the kernel it booted)."""
    shutil.rmtree(job, ignore_errors=True)
    (job / "workloads").mkdir(parents=True)
    shutil.copyfile(ROOT / "lab" / "guest-init.sh", job / "guest-init.sh")
    shutil.copytree(programs, job / "bin")
    if modules is not None and modules.is_dir():
        shutil.copytree(modules, job / "modules", symlinks=True)
    names = []
    for w in exp.workloads:
        shutil.copyfile(exp.chapter.path(w["script"]), job / "workloads" / f"{w['name']}.sh")
        names.append(w["name"])
    (job / "job.env").write_text(
        f"KB_WORKLOADS='{' '.join(names)}'\nKB_WORKLOAD_TIMEOUT={int(exp.workload_timeout)}\n"
    )


def cmd_boot(a: argparse.Namespace) -> None:
    """Boot one variant once and run its workloads; keep the raw output (console and what the
    guest wrote), checked against the guest's own sha256 sums. Parsing is the next stage."""
    exp = load_experiment(a)
    v = exp.variants[a.variant]
    label = f"{exp.name}/{v.name}/rep{a.rep}"
    final = Path(a.out).resolve()
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "out").mkdir(parents=True)
    console = tmp / "console.log"
    accel = read_json(a.accel_json)["accel"][v.accel]
    with stage("boot", label, console) as stamp:
        artifacts = Path(read_json(a.build)["artifacts"])
        tools_bin = Path(read_json(a.tools)["bin"])
        _job_dir(tmp / "job", exp, tools_bin, artifacts / "modules")
        initrd = tools_bin / v.initrd if v.initrd else None
        if initrd and not initrd.is_file():
            raise StageError(f"{label}: initrd {v.initrd!r} is not a program the tools stage "
                             f"built ({tools_bin}); list it under tools: programs in "
                             f"{exp.path}")
        cmdline = vm.kernel_cmdline(v.cmdline)
        disk = tmp / "disk.img" if v.machine.disk else None
        with ExitStack() as scratch:
            made = scratch.enter_context(vm.scratch_disk(disk, v.machine.disk)) if disk else {}
            argv = vm.qemu_command(artifacts / "bzImage",
                                   Path(read_json(a.layer)["root"]), tmp / "job", tmp / "out",
                                   accel["used"], v.machine, cmdline, initrd, disk)
            result = vm.boot(argv, console, exp.boot_timeout, label)
        sums = vm.verify_output(tmp / "out", label)
        status = dict(line.split() for line in (tmp / "out" / "status.txt").read_text()
                      .splitlines() if line.strip())
        for w in exp.workloads:
            if status.get(w["name"]) != "0":
                rc = status.get(w["name"], "missing")
                err = (tmp / "out" / f"{w['name']}.err").read_text(errors="replace")[-500:]
                raise StageError(f"{label}: workload {w['name']} exited {rc}"
                                 f"{' (killed by its timeout)' if rc == '137' else ''}; "
                                 f"stderr: {err.strip() or '(empty)'}; console: {console}")
        stamp.update(variant=v.name, rep=int(a.rep), accel=accel["used"],
                     accel_requested=v.accel, accel_why=accel["why"], qemu_argv=argv,
                     **({"disk_mkfs": made["argv"], "disk_mke2fs": made["mke2fs"],
                         "disk_sha256": made["sha256"]} if made else {}),
                     cmdline=cmdline, boot_to_result_seconds=result.seconds_to_done,
                     output_sha256=sums)
    shutil.rmtree(tmp / "job")
    write_json(tmp / "boot.json", stamp)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)


def cmd_compare(a: argparse.Namespace) -> None:
    """Run one comparison of two boots (``compare:``) in the toolchain root and keep what it
    prints: raw output of the patched boot, which the parse stage reads like a workload's. The
    script sees each boot's guest output (``$A``, ``$B``) and its kernel's build artifacts
    (``$A_BUILD``, ``$B_BUILD``: vmlinux, System.map, .config), all read-only."""
    exp = load_experiment(a)
    comp = exp.compare(a.workload, a.variant)
    label = f"{exp.name}/{comp.patched}/rep{a.rep}/{comp.workload}"
    final = Path(a.out).resolve()
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    out, err = tmp / f"{comp.workload}.out", tmp / f"{comp.workload}.err"
    with stage("compare", label, err) as stamp:
        sides = {}
        for side, variant, boot_dir, built in (
                ("a", comp.baseline, a.baseline_boot, a.baseline_build),
                ("b", comp.patched, a.patched_boot, a.patched_build)):
            booted = read_json(Path(boot_dir) / "boot.json")
            if (booted["variant"], int(booted["rep"])) != (variant, int(a.rep)):
                raise StageError(f"{label}: {boot_dir} is a boot of {booted['variant']} rep"
                                 f"{booted['rep']}, not of {variant} rep{a.rep}")
            sides[Path(boot_dir).resolve() / "out"] = f"/tmp/{side}"
            sides[Path(read_json(built)["artifacts"])] = f"/tmp/{side}-build"
        script = exp.chapter.path(comp.script)
        argv = toolchain.in_root(
            Path(read_json(a.root)["root"]), ["/bin/sh", "/tmp/compare.sh"], {},
            read_only={script: "/tmp/compare.sh", **sides},
            env={"A": "/tmp/a", "B": "/tmp/b", "A_BUILD": "/tmp/a-build",
                 "B_BUILD": "/tmp/b-build", "BASELINE": comp.baseline,
                 "PATCHED": comp.patched})
        with out.open("wb") as stdout, err.open("wb") as stderr:
            try:
                proc = subprocess.run(argv, stdout=stdout, stderr=stderr, check=False,
                                      timeout=exp.workload_timeout)
            except subprocess.TimeoutExpired:
                raise StageError(f"{label}: {comp.script} ran longer than the workload "
                                 f"timeout ({exp.workload_timeout:.0f} s); see {err}") from None
        if proc.returncode != 0:
            tail = err.read_text(errors="replace")[-500:].strip() or "(empty)"
            raise StageError(f"{label}: {comp.script} exited {proc.returncode}; stderr: {tail}")
        stamp.update(variant=comp.patched, rep=int(a.rep), workload=comp.workload,
                     baseline=comp.baseline, script=in_repo(script),
                     script_sha256=source.sha256_file(script), argv=argv)
    write_json(tmp / "compare.json", stamp)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)


def parse_boot(chapter: str, workloads: list[dict[str, Any]], outputs: dict[str, str],
               guest_info: str, label: str) -> dict[str, Any]:
    """Rows of one boot from its raw outputs (workload name -> text) with the chapter's
    parsers; shared by the parse stage and :mod:`lab.reparse`, so both parse alike."""
    from lab import chapters
    parsers = chapters.get(chapter).parsers()
    rows = {}
    for w in workloads:
        name = w.get("parser", "keyvalue")
        if name not in parsers:
            raise StageError(f"{label}: no parser {name!r} (chapter {chapter} has "
                             f"{sorted(parsers)})")
        rows[w["name"]] = parsers[name](outputs[w["name"]], f"{label}/{w['name']}")
    return {"rows": rows, "guest": keyvalue.fields(guest_info)}


def cmd_parse(a: argparse.Namespace) -> None:
    """Turn one boot's raw output (or one comparison's, ``--boot`` naming its directory) into
    rows with the chapter's parsers."""
    exp = load_experiment(a)
    boot_dir = Path(a.boot)
    if (boot_dir / "compare.json").is_file():
        compared = read_json(boot_dir / "compare.json")
        comp = exp.compare(compared["workload"], compared["variant"])
        label = f"{exp.name}/{comp.patched}/rep{compared['rep']}"
        with stage("parse", f"{label}/{comp.workload}", None) as stamp:
            text = (boot_dir / f"{comp.workload}.out").read_text(errors="replace")
            stamp.update(parse_boot(exp.name, [{"name": comp.workload, "parser": comp.parser}],
                                    {comp.workload: text}, "", label),
                         variant=comp.patched, rep=compared["rep"], compare=str(boot_dir))
        write_json(Path(a.out), stamp)
        return
    booted = read_json(boot_dir / "boot.json")
    label = f"{exp.name}/{booted['variant']}/rep{booted['rep']}"
    with stage("parse", label, None) as stamp:
        out = boot_dir / "out"
        texts = {w["name"]: (out / f"{w['name']}.out").read_text(errors="replace")
                 for w in exp.workloads}
        stamp.update(parse_boot(exp.name, list(exp.workloads), texts,
                                (out / "guest-info.txt").read_text(), label),
                     variant=booted["variant"], rep=booted["rep"], boot=str(boot_dir))
    write_json(Path(a.out), stamp)


def in_repo(path: Path) -> str:
    """A path relative to the repository when it is inside it (chapters, series), else as
    given (a test chapter in a temporary directory)."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def portable(arg: str) -> str:
    """Write the cache location as ``$KB_CACHE`` so a manifest names no one's home."""
    return arg.replace(str(cachedir.cache_root()), "$KB_CACHE")


def benchmark_seconds(path: str | Path) -> float:
    """Wall-clock seconds of a job from its Snakemake ``benchmark:`` file (column ``s``)."""
    lines = Path(path).read_text().splitlines()
    header, values = lines[0].split("\t"), lines[-1].split("\t")
    return round(float(values[header.index("s")]), 1)


def _image_fields(built: dict[str, Any]) -> dict[str, Any]:
    """What the manifest records of a build: the image's size and sha256 (hashed here, from
    the image itself, so a build cached before the stamp knew the field still gets it), or,
    for a build the experiment expects to fail, the text it failed with."""
    if built.get("failed"):
        return {k: built[k] for k in ("failed", "expected", "error_lines", "targets")}
    return {"bzImage_sha256": source.sha256_file(Path(built["artifacts"]) / "bzImage"),
            **{k: built[k] for k in ("bzImage_bytes", "vmlinux_bytes", "targets")}}


def cmd_publish(a: argparse.Namespace) -> None:
    """Assemble the run directory and rename it into data/runs/<chapter>/<run-id>."""
    exp = load_experiment(a)
    records = []
    for p in a.parsed:
        parsed = read_json(p)
        boot_dir = Path(parsed["boot"])
        records.append({**read_json(boot_dir / "boot.json"), **parsed, "dir": str(boot_dir)})
    builds = {read_json(p)["variant"]: read_json(p) for p in a.builds}
    build_seconds = {Path(p).stem.removeprefix("build-"): benchmark_seconds(p)
                     for p in a.build_times}
    tools = {read_json(p)["variant"]: read_json(p) for p in a.tools}
    inspected = {read_json(p)["variant"]: read_json(p) for p in a.inspected}
    root = read_json(a.root)
    layer = read_json(a.layer)
    base = read_json(a.base)
    serieses = {read_json(p)["tree"]: read_json(p) for p in a.series}
    run_id = collect.new_run_id("-".join(sorted({v.accel for v in exp.variants.values()})))
    book, diff = collect.book_state()
    chapter = exp.chapter
    with stage("publish", f"{exp.name}/{run_id}", None) as stamp:
        variants = {}
        extra: dict[str, bytes] = {}  # raw files no boot wrote
        for p in a.compared:
            compared = read_json(p)
            rec = next((r for r in records if (r["variant"], int(r["rep"]))
                        == (compared["variant"], int(compared["rep"]))), None)
            if rec is None:
                raise StageError(f"{p}: a comparison for {compared['variant']} rep"
                                 f"{compared['rep']}, which this run did not boot")
            rec["rows"].update(compared["rows"])
            for path in sorted(Path(compared["compare"]).iterdir()):
                if path.name != "compare.json":
                    extra[f"raw/{rec['variant']}/rep{rec['rep']}/{path.name}.gz"] = (
                        collect.gzip_bytes(path.read_bytes()))
        listed: set[str] = set()
        for name, v in exp.variants.items():
            reps = [r for r in records if r["variant"] == name]
            bname = exp.build_name(name)
            built = builds[bname]
            variants[name] = {
                "tree": v.tree, "commit": built["commit"], "compiler": v.compiler,
                "reps": v.reps,
                "config_sha256": built["config_sha256"], "boot": v.boot,
                "fragments": list(v.fragments), "kconfig_start": exp.kconfig_start,
                "cmdline": reps[0]["cmdline"] if reps else vm.kernel_cmdline(v.cmdline),
                "accel_requested": v.accel,
                "accel_used": sorted({r["accel"] for r in reps}),
                "accel_why": sorted({r["accel_why"] for r in reps}),
                "machine": {"memory": v.machine.memory, "cpus": v.machine.cpus,
                            "sockets": v.machine.sockets, "threads": v.machine.threads,
                            "numa": list(v.machine.numa), "cpu_model": v.machine.cpu_model,
                            **({"disk": v.machine.disk} if v.machine.disk else {})},
                "guest": reps[0]["guest"] if reps else {},
                "qemu_argv": [portable(x) for x in reps[0]["qemu_argv"]] if reps else [],
                **({"disk_mkfs": [portable(x) for x in reps[0]["disk_mkfs"]],
                    "disk_mke2fs": reps[0]["disk_mke2fs"], "disk_sha256": reps[0]["disk_sha256"]}
                   if reps and "disk_mkfs" in reps[0] else {}),
                "boot_to_result_seconds": [r["boot_to_result_seconds"] for r in reps],
                "build": {"variant": bname, "build_seconds": build_seconds[bname],
                          **_image_fields(built)},
                "tools": {k: tools[bname].get(k) for k in ("programs", "cc", "bpf_cc")}
                if bname in tools else {},
                "inspect": {k: val for k, val in inspected.get(name, {}).items()
                            if k == "evidence"},
            }
            listing = inspected.get(name, {}).get("listing")
            if listing and bname not in listed:  # once per kernel, under its first variant
                listed.add(bname)
                extra[f"raw/{name}/disassembly.txt.gz"] = collect.gzip_bytes(
                    Path(listing).read_bytes())
            if built.get("failed"):
                extra[f"raw/{name}/build-errors.txt.gz"] = collect.gzip_bytes(
                    (Path(built["artifacts"]) / "errors.txt").read_bytes())
        ser = next(iter(serieses.values()))
        parser_files = sorted((ROOT / "lab" / "parse").glob("*.py")) + (
            [chapter.dir / "parse.py"] if (chapter.dir / "parse.py").is_file() else [])
        manifest = {
            "chapter": exp.name, "run_id": run_id,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "book": book,
            "experiment": {"file": in_repo(exp.path), "sha256": exp.sha256,
                           "reps": exp.reps, "workloads": list(exp.workloads),
                           "scripts": {w["name"]: source.sha256_file(chapter.path(w["script"]))
                                       for w in exp.workloads},
                           **({"compare": [
                               {"workload": c.workload, "baseline": c.baseline,
                                "patched": c.patched, "reps": c.reps, "parser": c.parser,
                                "script": c.script,
                                "sha256": source.sha256_file(chapter.path(c.script))}
                               for c in exp.compares]} if exp.compares else {})},
            "parsers": {in_repo(f): source.sha256_file(f) for f in parser_files},
            "base": {k: base[k] for k in ("version", "origin", "sha256", "commit")},
            "series": {"dir": in_repo(exp.series), "mode": ser["mode"],
                       "sha256": ser["sha256"], "patches": ser["patches"],
                       "commits": {t: s["commit"] for t, s in serieses.items()},
                       "trees": {t: s["steps"] for t, s in serieses.items()}},
            "compilers": root["tools"], "qemu": vm.qemu_version(),
            "python": sys.version.split()[0],
            "host": collect.host_info(),
            "toolchain_root": {"key": root["key"], "suite": root["suite"],
                               "packages": root["packages"]},
            **({"guest_layer": {"key": layer["key"], "lock": layer["lock"],
                                "packages": layer["packages"]}} if layer["packages"] else {}),
            "variants": variants,
        }
        configs = {name: Path(b["artifacts"]) / ".config" for name, b in builds.items()}
        final = collect.publish(exp.name, run_id,
                                lambda tmp: collect.assemble(tmp, exp.name, records, configs,
                                                             manifest, exp.cited(), diff,
                                                             extra))
        stamp.update(run_dir=str(final), rows=sum(
            len(p) for r in records for p in r["rows"].values()))
    write_json(Path(a.out), stamp)
    print(f"run published: {final}", file=sys.stderr)


def cmd_check(a: argparse.Namespace) -> None:
    """Validate chapters (schema, files, parsers, cited ids, guest locks) and print what each
    would run."""
    from lab import chapters
    for ch in chapters.select(a.chapters) if a.chapters else chapters.discover().values():
        if ch.has_experiment:
            exp = experiment.load(ch)
            if guestlayer.requested(ch):
                guestlayer.load_lock(ch, toolchain.root_key())
            print(f"{ch.name}: {len(exp.variants)} variants, {len(exp.builds)} builds, "
                  f"{len(exp.boots)} boots")
        else:
            print(f"{ch.name}: no experiment yet")


def main(argv: list[str] | None = None) -> int:
    """Parse the stage and its arguments, run it, and map a StageError to exit status 1."""
    from lab import reparse, reproduce
    p = argparse.ArgumentParser(prog="python -m lab.pipeline", description=__doc__)
    sub = p.add_subparsers(dest="stage", required=True)

    def add(name: str, fn: Callable[[argparse.Namespace], None], *args: str,
            exp: bool = True, log: bool = True) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=fn.__doc__)
        sp.set_defaults(fn=fn)
        if exp:
            sp.add_argument("--chapter", required=True)
            sp.add_argument("--accel", default="")
            sp.add_argument("--reps", default="")
            sp.add_argument("--variants", default="")
        if log:
            sp.add_argument("--log", required=True)
        for arg in args:
            sp.add_argument(arg, required=True)
        return sp

    add("root", cmd_root, "--out", exp=False)
    add("source", cmd_source, "--out", exp=False)
    add("series", cmd_series, "--base", "--tree", "--out", log=False)
    add("config", cmd_config, "--base", "--root", "--series", "--variant", "--out")
    add("build", cmd_build, "--base", "--root", "--series", "--config", "--variant", "--out")
    add("tools", cmd_tools, "--root", "--base", "--series", "--build", "--variant", "--out")
    acc = add("accel", cmd_accel, "--root", "--out", log=False)
    acc.add_argument("--build", nargs="?", default="")  # none when no variant boots
    acc.add_argument("--probe-timeout", type=float, default=vm.probe_timeout())
    add("layer", cmd_layer, "--root", "--out")
    add("boot", cmd_boot, "--layer", "--build", "--tools", "--accel-json", "--variant", "--rep",
        "--out", log=False)
    add("compare", cmd_compare, "--root", "--baseline-boot", "--patched-boot",
        "--baseline-build", "--patched-build", "--workload", "--variant", "--rep", "--out",
        log=False)
    add("parse", cmd_parse, "--boot", "--out", log=False)
    add("inspect", cmd_inspect, "--root", "--build", "--variant", "--out", log=False)
    pub = add("publish", cmd_publish, "--root", "--layer", "--base", "--out", log=False)
    for many in ("--builds", "--build-times", "--series", "--inspected", "--tools"):
        pub.add_argument(many, nargs="+", required=True)
    pub.add_argument("--parsed", nargs="*", default=[])  # none when no variant boots
    pub.add_argument("--compared", nargs="*", default=[])  # parsed comparisons (compare:)
    chk = add("check", cmd_check, exp=False, log=False)
    chk.add_argument("--chapters", default="")
    reproduce.add_arguments(add("reproduce", reproduce.main, exp=False, log=False))
    reparse.add_arguments(add("reparse", reparse.main, exp=False, log=False))
    a = p.parse_args(argv)
    try:
        status = a.fn(a)
    except StageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
