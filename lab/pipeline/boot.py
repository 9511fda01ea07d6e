"""The boot stages: the accelerator probe, one boot of one variant with its workloads, and one
comparison of two boots (``compare:``); each keeps raw output only, for the parse stage."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

from lab import ROOT, in_repo
from lab.command import StageError, require_tools
from lab.pipeline import (
    accel,
    cachedir,
    crosslayer,
    experiment,
    guestlayer,
    node,
    nodecache,
    source,
    toolchain,
    vm,
)
from lab.pipeline import arch as arches
from lab.pipeline.stamps import (
    AccelStamp,
    BootStamp,
    BuildStamp,
    CompareStamp,
    CrossStamp,
    LayerStamp,
    ToolsStamp,
    load_experiment,
    stage,
)


def cmd_accel(a: argparse.Namespace) -> None:
    """Resolve each requested accelerator once per run (the KVM probe happens here).

    The probe boots the first variant's kernel, so it runs after that build."""
    exp = load_experiment(a)
    with stage("accel", exp.name, None):
        chosen = {}
        for key in sorted({accel_key(v) for v in exp.variants.values()}):
            target, _, req = key.rpartition(":")
            if target:
                used, why = accel.cross_accel(req, arches.get(target))
            else:
                require_tools([vm.QEMU])
                used, why = accel.choose_accel(
                    req, cachedir.sub("probe"), timeout=a.probe_timeout,
                    kernel=BuildStamp.read(a.build).boot_image if a.build else None,
                    root=nodecache.root_of(a.root))
            chosen[key] = {"used": used, "why": why}
            print(f"           accel {key} -> {used}: {why}", file=sys.stderr)
    AccelStamp(accel=chosen, node=node.identity()).write(a.out)


def accel_key(v: experiment.Variant) -> str:
    """Where the accel stamp keeps a variant's accelerator: the one asked for, prefixed with
    the architecture when it is a cross one (``arm64:auto``), since only the host's own can
    use KVM and only its answer comes from the probe."""
    return v.accel if not arches.get(v.arch).cross else f"{v.arch}:{v.accel}"


def job_dir(job: Path, exp: experiment.Experiment, variant: str, programs: Path,
            modules: Path | None = None) -> None:
    """Fill a boot's job directory: guest init, the guest library (``lib.sh``), the
    variant's workloads, programs and, when the variant's build made modules, its
    ``modules_install`` tree as ``modules/`` (a workload insmods from it, so the guest always
    loads the modules of the kernel it booted)."""
    shutil.rmtree(job, ignore_errors=True)
    (job / "workloads").mkdir(parents=True)
    for name in ("guest-init.sh", "lib.sh"):
        shutil.copyfile(ROOT / "lab" / "pipeline" / "guest" / name, job / name)
    shutil.copytree(programs, job / "bin")
    if modules is not None and modules.is_dir():
        shutil.copytree(modules, job / "modules", symlinks=True)
    names = []
    for w in exp.workloads_of(variant):
        shutil.copyfile(exp.chapter.path(w["script"]), job / "workloads" / f"{w['name']}.sh")
        names.append(w["name"])
    (job / "job.env").write_text(
        f"KB_WORKLOADS='{' '.join(names)}'\nKB_WORKLOAD_TIMEOUT={int(exp.workload_timeout)}\n"
    )


def guest_root(a: argparse.Namespace, exp: experiment.Experiment, target: arches.Arch) -> Path:
    """The guest's ``/``: the chapter's layer (the toolchain root, or its guest packages over
    it) on the host's architecture, the architecture's busybox tree on a cross one
    (``--cross``, the cross stage's stamp)."""
    if not target.cross:
        layer = LayerStamp.read(a.layer)
        guestlayer.ensure_layer(layer, exp.chapter)
        return Path(layer.root)
    if not a.cross:
        raise StageError(f"a boot of an {target.name} kernel needs the cross stage's stamp "
                         "(--cross toolchain/cross.json); the boot rule passes it")
    stamp = CrossStamp.read(a.cross)
    crosslayer.ensure(stamp)
    return Path(stamp.guests[target.name])


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
    probed = AccelStamp.read(a.accel_json)
    chosen = probed.accel[accel_key(v)]
    target = arches.get(v.arch)
    with stage("boot", label, console):
        if probed.node and probed.node["name"] != node.name():
            raise StageError(
                f"{label}: the accelerator probe ran on {probed.node['name']}, this boot on "
                f"{node.name()}; the probe's answer holds where it ran only. Under SLURM the "
                "profile keeps them in one group job (workflow/profiles/slurm, groups:)")
        built = BuildStamp.read(a.build)
        artifacts = Path(built.artifacts)
        tools_bin = Path(ToolsStamp.read(a.tools).bin)
        job_dir(tmp / "job", exp, v.name, tools_bin, artifacts / "modules")
        initrd = tools_bin / v.initrd if v.initrd else None
        if initrd and not initrd.is_file():
            raise StageError(f"{label}: initrd {v.initrd!r} is not a program the tools stage "
                             f"built ({tools_bin}); list it under tools: programs in "
                             f"{exp.path}")
        cmdline = vm.kernel_cmdline(v.cmdline, target.console)
        disk = tmp / "disk.img" if v.machine.disk else None
        with ExitStack() as scratch:
            made = scratch.enter_context(vm.scratch_disk(disk, v.machine.disk)) if disk else {}
            argv = vm.qemu_command(built.boot_image, guest_root(a, exp, target), tmp / "job",
                                   tmp / "out", chosen["used"], v.machine, cmdline, initrd, disk,
                                   target)
            result = vm.boot(argv, console, exp.boot_timeout, label)
        sums = vm.verify_output(tmp / "out", label)
        status = dict(line.split() for line in (tmp / "out" / "status.txt").read_text()
                      .splitlines() if line.strip())
        for w in exp.workloads_of(v.name):
            if status.get(w["name"]) != "0":
                rc = status.get(w["name"], "missing")
                err = (tmp / "out" / f"{w['name']}.err").read_text(errors="replace")[-500:]
                raise StageError(f"{label}: workload {w['name']} exited {rc}"
                                 f"{' (killed by its timeout)' if rc == '137' else ''}; "
                                 f"stderr: {err.strip() or '(empty)'}; console: {console}")
        stamp = BootStamp(variant=v.name, rep=int(a.rep), accel=chosen["used"],
                          accel_requested=v.accel, accel_why=chosen["why"], qemu_argv=argv,
                          **({"disk_mkfs": made["argv"], "disk_mke2fs": made["mke2fs"],
                              "disk_sha256": made["sha256"]} if made else {}),
                          cmdline=cmdline, boot_to_result_seconds=result.seconds_to_done,
                          output_sha256=sums, node=node.identity())
    shutil.rmtree(tmp / "job")
    stamp.write(tmp / "boot.json")
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
    with stage("compare", label, err):
        sides = {}
        for side, variant, boot_dir, built in (
                ("a", comp.baseline, a.baseline_boot, a.baseline_build),
                ("b", comp.patched, a.patched_boot, a.patched_build)):
            booted = BootStamp.read(Path(boot_dir) / "boot.json")
            if (booted.variant, booted.rep) != (variant, int(a.rep)):
                raise StageError(f"{label}: {boot_dir} is a boot of {booted.variant} rep"
                                 f"{booted.rep}, not of {variant} rep{a.rep}")
            sides[Path(boot_dir).resolve() / "out"] = f"/tmp/{side}"
            sides[Path(BuildStamp.read(built).artifacts)] = f"/tmp/{side}-build"
        script = exp.chapter.path(comp.script)
        argv = toolchain.in_root(
            nodecache.root_of(a.root), ["/bin/sh", "/tmp/compare.sh"], {},
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
        stamp = CompareStamp(variant=comp.patched, rep=int(a.rep), workload=comp.workload,
                             baseline=comp.baseline, script=in_repo(script),
                             script_sha256=source.sha256_file(script), argv=argv)
    stamp.write(tmp / "compare.json")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
