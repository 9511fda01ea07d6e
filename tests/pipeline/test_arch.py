"""Cross-architecture variants (lab/pipeline/arch.py, lab/pipeline/crosslayer.py): how their
kernels are built, what boots them, and what a chapter writes for them. The context-switch
chapter's Arm run (data/runs/context-switch/) boots them for real."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import chapters
from lab.command import StageError
from lab.pipeline import accel, arch, crosslayer, experiment, inspect, vm
from lab.pipeline.guestlayer import GuestLock


def test_the_host_builds_with_the_make_variables_every_x86_kernel_was_built_with() -> None:
    host = arch.get("x86_64")
    assert not host.cross
    assert host.make_vars("gcc") == ["CC=ccache gcc-15", "HOSTCC=gcc-15", "LD=ld"]
    assert host.make_vars("clang") == ["LLVM=-21", "CC=ccache clang-21", "HOSTCC=clang-21"]
    assert host.tools_cc("gcc-15") == "gcc-15"


@pytest.mark.parametrize("name, triplet, kernel_arch", [
    ("arm64", "aarch64-linux-gnu", "arm64"), ("arm", "arm-linux-gnueabihf", "arm")])
def test_a_cross_build_names_its_architecture_and_gcc_its_cross_compiler(
        name: str, triplet: str, kernel_arch: str) -> None:
    a = arch.get(name)
    assert a.cross
    assert a.make_vars("gcc") == [f"ARCH={kernel_arch}", f"CROSS_COMPILE={triplet}-",
                                  f"CC=ccache {triplet}-gcc-15", "HOSTCC=gcc-15"]
    # clang takes its target from ARCH=; the host compiler builds the host programs
    assert a.make_vars("clang") == [f"ARCH={kernel_arch}", "LLVM=-21", "CC=ccache clang-21",
                                    "HOSTCC=clang-21"]
    assert a.tools_cc("gcc-15") == f"{triplet}-gcc-15"
    with pytest.raises(StageError, match="leave tools: cc: unset"):
        a.tools_cc("clang-21")


def test_an_unknown_architecture_or_compiler_is_refused_by_name() -> None:
    with pytest.raises(StageError, match="use one of"):
        arch.get("riscv64")
    with pytest.raises(StageError, match="use gcc or clang"):
        arch.get("arm64").make_vars("icc")


def test_a_cross_guest_runs_on_tcg_and_kvm_is_refused_rather_than_probed() -> None:
    arm64 = arch.get("arm64")
    used, why = accel.cross_accel("auto", arm64)
    assert used == "tcg" and "without a probe" in why
    assert accel.cross_accel("icount", arm64) == ("icount", "requested")
    with pytest.raises(StageError, match="KVM cannot run an arm64 guest"):
        accel.cross_accel("kvm", arm64)


def test_an_arm_boot_uses_its_qemu_machine_and_console(tmp_path: Path) -> None:
    a = arch.get("arm")
    argv = vm.qemu_command(tmp_path / "zImage", tmp_path / "root", tmp_path / "job",
                           tmp_path / "out", "icount", vm.Machine(cpu_model="cortex-a15"),
                           vm.kernel_cmdline("isolcpus=1", a.console), arch=a)
    assert argv[0] == "qemu-system-arm"
    assert argv[argv.index("-machine") + 1] == "virt,highmem=off"
    assert argv[argv.index("-cpu") + 1] == "cortex-a15"
    assert "console=ttyAMA0 " in argv[argv.index("-append") + 1]
    assert "virtio-9p-pci,fsdev=kbroot,mount_tag=kbroot" in argv
    x86 = vm.qemu_command(tmp_path / "bzImage", tmp_path / "root", tmp_path / "job",
                          tmp_path / "out", "tcg", vm.Machine(), vm.kernel_cmdline())
    assert x86[0] == "qemu-system-x86_64" and x86[x86.index("-machine") + 1] == "pc"


def _chapter(tmp_path: Path, extra: dict) -> chapters.Chapter:
    d = tmp_path / "toy"
    (d / "guest").mkdir(parents=True)
    (d / "guest" / "w.sh").write_text("echo x=1\n")
    meta = {"title": "toy", "kconfig_start": "defconfig", "fragments": ["boot"],
            "machine": {"memory": "512M", "cpus": 2},
            "workloads": [
                {"name": "tsc", "script": "guest/w.sh", "units": {"x": "TSC ticks"},
                 "arch": ["x86_64"]},
                {"name": "counter", "script": "guest/w.sh", "units": {"x": "counter ticks"},
                 "arch": ["arm64", "arm"]}],
            "variants": {"host": {}, "a64": {"arch": "arm64", "compiler": "clang"}},
            **extra}
    return chapters.Chapter("toy", d, meta)


def test_a_cross_variant_takes_its_architectures_start_fragments_machine_and_workloads(
        tmp_path: Path) -> None:
    ch = _chapter(tmp_path, {"arches": {"arm64": {
        "kconfig_start": "tinyconfig", "fragments": ["boot-arm64"],
        "machine": {"cpu_model": "cortex-a53"}}}})
    exp = experiment.load(ch)
    host, a64 = exp.variants["host"], exp.variants["a64"]
    assert (host.arch, host.kconfig_start, host.fragments, host.workloads) == (
        "x86_64", "defconfig", ("boot",), ("tsc",))
    assert (a64.arch, a64.kconfig_start, a64.fragments, a64.workloads) == (
        "arm64", "tinyconfig", ("boot-arm64",), ("counter",))
    assert a64.machine.cpu_model == "cortex-a53" and a64.machine.cpus == 2
    assert exp.cross and exp.build_name("a64") == "a64"


def test_a_cross_variant_without_its_architectures_entry_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StageError, match=r"has no arches: \{arm64"):
        experiment.load(_chapter(tmp_path, {}))


def test_the_context_switch_chapter_builds_each_arm_kernel_once_for_both_clocks() -> None:
    exp = experiment.load("context-switch")
    arm = {n: v for n, v in exp.variants.items() if v.arch != "x86_64"}
    assert len(arm) == 16 and {v.arch for v in arm.values()} == {"arm64", "arm"}
    counted = {n: v for n, v in arm.items() if v.accel == "icount"}
    # arm32's icount cells boot one vCPU (two hang at boot under icount: chapter.yaml)
    assert {(v.arch, v.machine.cpus) for v in counted.values()} == {("arm64", 2), ("arm", 1)}
    assert all(v.machine.cpus == 2 for n, v in arm.items() if n not in counted)
    assert {exp.build_name(n) for n in arm} == set(arm) - set(counted)
    assert all(v.workloads == ("pingpong-arm",) for v in arm.values())
    assert all(v.workloads == ("pingpong",) for n, v in exp.variants.items() if n not in arm)


def test_the_applet_table_is_read_from_a_busybox_binary(tmp_path: Path) -> None:
    names = ["[", "[[", "acpid", "ash", "cat", *(f"tool{i}" for i in range(60)), "sh", "zcat"]
    binary = tmp_path / "busybox"
    binary.write_bytes(b"\x7fELF\x00[\x00junk \x00" + b"\x00".join(n.encode() for n in names)
                       + b"\x00\x01\x02\x00")
    assert crosslayer.applets(binary) == names
    (tmp_path / "other").write_bytes(b"\x7fELF no table here")
    with pytest.raises(StageError, match="no applet table"):
        crosslayer.applets(tmp_path / "other")


def test_a_cross_lock_is_checked_against_what_the_pipeline_asks_and_the_root(
        tmp_path: Path) -> None:
    path = tmp_path / "guest-arm64.lock.yaml"
    lock = GuestLock("sid-aaaaaaaaaaaa", ("busybox-static:arm64",),
                     (("busybox-static:arm64", "1:1.38.0-3+b1"),))
    path.write_text(lock.render(crosslayer.LOCK_HEADER))
    wanted = crosslayer.guest_packages(arch.get("arm64"))
    assert crosslayer.read(path, wanted, "sid-aaaaaaaaaaaa") == lock
    with pytest.raises(StageError, match=r"toolchain lock makes sid-bbbbbbbbbbbb.*make cross-lock"):
        crosslayer.read(path, wanted, "sid-bbbbbbbbbbbb")
    with pytest.raises(StageError, match="the pipeline asks for"):
        crosslayer.read(path, ("busybox-static:armhf",), "sid-aaaaaaaaaaaa")


def test_the_committed_cross_locks_pin_every_architectures_compiler_and_guest() -> None:
    from lab.pipeline import toolchain
    build, guests = crosslayer.locks(toolchain.root_key())
    names = dict(build.packages)
    for a in arch.cross():
        assert f"gcc-15-{a.triplet}" in names and f"libc6-dev-{a.debian}-cross" in names
        assert dict(guests[a.name].packages) == {
            f"busybox-static:{a.debian}": dict(guests[a.name].packages)[
                f"busybox-static:{a.debian}"]}


@pytest.mark.parametrize("line, reads", [
    ("  ffff800080f1c2a4:\tmrs\tx1, cntvct_el0", True),
    ("  c0a1b2c4:\tmrrc\t15, 1, r2, r3, cr14", True),
    ("  c0a1b2c4:\tmrrc\tp15, #0x1, r2, r3, c14", True),
    ("  ffffffff81e2a0b1:\trdtsc", True),
    ("  ffff800080f1c2a8:\tmrs\tx1, cntfrq_el0", False),
    ("  c0a1b2c8:\tmrrc\t15, 0, r2, r3, cr14", False),  # CNTPCT, not the virtual counter
])
def test_the_probes_counter_read_is_found_on_each_architecture(line: str, reads: bool) -> None:
    assert inspect.counter_read(inspect.disassembly(line)[0]) is reads


def test_an_arm64_probe_region_counts_the_instructions_and_calls_between_the_reads() -> None:
    listing = "\n".join([
        "ffff800080f1c000 <__schedule>:",
        "ffff800080f1c2a4:\tmrs\tx20, cntvct_el0",
        "ffff800080f1c2a8:\tmov\tx0, x19",
        "ffff800080f1c2ac:\tbl\tffff800080f10000 <finish_task_switch>",
        "ffff800080f1c2b0:\tblr\tx3",
        "ffff800080f1c2b4:\tmrs\tx1, cntvct_el0",
    ])
    region = inspect.probe_region(inspect.disassembly(listing))
    assert region == {"markers": 2, "instructions": 4, "bytes": 16,
                      "calls": ["finish_task_switch", "*indirect"]}
