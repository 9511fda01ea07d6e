"""QEMU command lines, the KVM probe, console scanning and the guest output check.

The console fixtures are real serial logs of the smoke kernel: a normal run, a guest that
panicked (sysrq crash) and one reset half-way through its workload.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

import pytest

from lab.command import StageError
from lab.pipeline import accel, vm

from .conftest import FIXTURES


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_topology_and_numa_come_from_the_machine() -> None:
    m = vm.Machine(memory="4G", cpus=4, sockets=2, threads=1,
                   numa=({"cpus": "0-1", "memory": "2G"}, {"cpus": "2-3", "memory": "2G"}))
    args = m.args()
    assert args[args.index("-smp") + 1] == "cpus=4,sockets=2,cores=2,threads=1"
    assert "node,nodeid=1,cpus=2-3,memdev=kbmem1" in args
    assert "memory-backend-ram,id=kbmem0,size=2G" in args


def test_topology_that_does_not_divide_is_refused() -> None:
    with pytest.raises(StageError, match="do not divide"):
        vm.Machine(cpus=3, sockets=2).args()


def test_tcg_thread_mode_is_spelled_out() -> None:
    args = vm.accel_args("icount", vm.Machine())
    assert args[:4] == ["-accel", "tcg,thread=single", "-icount", "shift=0,sleep=off"]
    assert vm.accel_args("kvm", vm.Machine())[:2] == ["-accel", "kvm"]
    assert vm.accel_args("tcg", vm.Machine())[:2] == ["-accel", "tcg,thread=multi"]


def test_cmdline_puts_the_variant_options_before_init() -> None:
    line = vm.kernel_cmdline("isolcpus=1 nohz_full=1")
    assert "rootfstype=9p" in line and "console=ttyS0" in line
    assert line.index("nohz_full=1") < line.index("init=/bin/sh -- -c \"")
    assert line.endswith('guest-init.sh"')


def test_qemu_command_shares_root_and_job_read_only(tmp_path) -> None:
    argv = vm.qemu_command(tmp_path / "bzImage", tmp_path / "root", tmp_path / "job",
                           tmp_path / "out", "tcg", vm.Machine(), "x")
    fsdevs = [argv[i + 1] for i, a in enumerate(argv) if a == "-fsdev"]
    assert fsdevs[0].endswith("readonly=on") and fsdevs[1].endswith("readonly=on")
    assert "readonly" not in fsdevs[2] and f"path={tmp_path / 'out'}" in fsdevs[2]
    assert "-no-reboot" in argv


def test_a_disk_is_one_virtio_blk_queue_and_absent_otherwise(tmp_path) -> None:
    without = vm.qemu_command(tmp_path / "bzImage", tmp_path / "root", tmp_path / "job",
                              tmp_path / "out", "tcg", vm.Machine(), "x")
    assert "-drive" not in without
    argv = vm.qemu_command(tmp_path / "bzImage", tmp_path / "root", tmp_path / "job",
                           tmp_path / "out", "tcg", vm.Machine(disk="64M"), "x",
                           disk=tmp_path / "disk.img")
    drive = argv[argv.index("-drive") + 1]
    assert drive.startswith(f"file={tmp_path / 'disk.img'},") and "format=raw" in drive
    assert "virtio-blk-pci,drive=kbdisk,num-queues=1" in argv


def test_the_disk_is_ext2_and_the_same_bytes_on_every_boot(tmp_path, monkeypatch) -> None:
    # the host's mke2fs.conf must not matter: one that would add a journal is not read
    conf = tmp_path / "mke2fs.conf"
    conf.write_text("[fs_types]\n ext2 = {\n  features = has_journal,extents\n }\n")
    monkeypatch.setenv("MKE2FS_CONFIG", str(conf))
    first, second = tmp_path / "a.img", tmp_path / "b.img"
    second.write_bytes(b"an earlier boot's disk")
    made = vm.make_disk(first, "8M")
    data = first.read_bytes()
    assert len(data) == 8 << 20
    sb = data[1024:2048]
    assert sb[56:58] == b"\x53\xef", "no ext2 superblock magic"
    assert int.from_bytes(sb[0x108:0x10C], "little") == 1, "creation time not pinned"
    compat, incompat = (int.from_bytes(sb[o:o + 4], "little") for o in (0x5C, 0x60))
    assert not compat & 0x4 and not incompat & 0x40, "a journal or extents: not plain ext2"
    assert "ext2" in made["argv"] and made["mke2fs"].startswith("mke2fs ")
    assert made["sha256"] == hashlib.sha256(data).hexdigest()
    time.sleep(1.1)  # another second: an unpinned creation time would differ
    assert vm.make_disk(second, "8M")["sha256"] == made["sha256"]


def test_mke2fs_is_found_outside_an_ordinary_users_path(monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert Path(vm.mke2fs()).parent.name == "sbin"


def test_the_disk_is_gone_after_a_boot_that_failed(tmp_path) -> None:
    image = tmp_path / "disk.img"
    with pytest.raises(StageError, match="guest hang"):
        with vm.scratch_disk(image, "8M") as made:
            assert image.is_file() and made["sha256"]
            raise StageError("rep1: guest hang: no KB-DONE marker within 20 s")
    assert not image.exists()


def test_a_disk_that_cannot_be_made_names_the_file(tmp_path) -> None:
    with pytest.raises(StageError, match=r"mke2fs could not format .*tiny\.img"):
        vm.make_disk(tmp_path / "tiny.img", "1M0")


def test_real_consoles_are_classified() -> None:
    def kinds(name: str) -> list[str]:
        text = (FIXTURES / name).read_text()
        return [k for line in text.splitlines() if (k := vm.scan(line))]
    assert kinds("console-ok.log") == []
    assert kinds("console-reset.log") == []
    assert kinds("console-panic.log") == ["panic"]


@pytest.mark.parametrize(("line", "kind"), [
    ("[  1.0] WARNING: possible circular locking dependency detected", "lockdep"),
    ("[  1.0] BUG: unable to handle page fault for address: 0000000000000008", "oops"),
    ("[  1.0] Oops: general protection fault, probably for non-canonical address", "oops"),
    ("[  1.0] WARNING: CPU: 0 PID: 1 at kernel/sched/core.c:123 foo+0x1/0x2", "warning"),
    ("[  9.1] WARNING: ../src/kernel/sched/core.c:6010 at preempt_count_add+0x93/0xc0, CPU#0: "
     "insmod/117", "warning"),
    ("[  9.1] WARNING: at foo+0x1/0x2, CPU#1: swapper/1/0", "warning"),
    ("[  9.1] Spectre V2 : WARNING: Unprivileged eBPF is enabled", None),
    ("[  1.0] BUG: sleeping function called from invalid context at mm/slub.c:1", "bug"),
    ("[  1.0] sysrq: Resetting", None),
])
def test_splat_lines(line: str, kind: str | None) -> None:
    assert vm.scan(line) == kind


def test_boot_fails_on_a_panic_in_the_console(tmp_path) -> None:
    fake = _script(tmp_path, "q", f"cat {FIXTURES / 'console-panic.log'}")
    with pytest.raises(StageError, match=r"x: guest kernel panic: .*sysrq triggered crash"):
        vm.boot([fake], tmp_path / "console.log", 20, "x")
    assert (tmp_path / "console.log").read_text() == (FIXTURES / "console-panic.log").read_text()


def test_boot_times_out_on_a_silent_guest(tmp_path) -> None:
    fake = _script(tmp_path, "q", "echo booting; exec sleep 60")
    with pytest.raises(StageError, match="guest hang: no KB-DONE marker within 1 s"):
        vm.boot([fake], tmp_path / "console.log", 1, "x")


def test_boot_reports_a_guest_that_ends_early(tmp_path) -> None:
    fake = _script(tmp_path, "q", f"cat {FIXTURES / 'console-reset.log'}")
    with pytest.raises(StageError, match=r"guest ended before it finished .* truncated"):
        vm.boot([fake], tmp_path / "console.log", 20, "x")


def test_boot_reports_a_qemu_error(tmp_path) -> None:
    fake = _script(tmp_path, "q", "echo 'qemu: could not open kernel file'; exit 1")
    with pytest.raises(StageError, match="QEMU exited with status 1"):
        vm.boot([fake], tmp_path / "console.log", 20, "x")


def test_boot_returns_the_done_marker(tmp_path) -> None:
    fake = _script(tmp_path, "q", f"cat {FIXTURES / 'console-ok.log'}")
    result = vm.boot([fake], tmp_path / "console.log", 20, "x")
    assert result.rc == 0 and result.seconds_to_done < 20


def _guest_out(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    shutil.copyfile(FIXTURES / "getpid.out", out / "getpid.out")
    shutil.copyfile(FIXTURES / "guest-info.txt", out / "guest-info.txt")
    sums = "".join(f"{hashlib.sha256((out / n).read_bytes()).hexdigest()}  {n}\n"
                   for n in ("getpid.out", "guest-info.txt"))
    (out / "SHA256SUMS").write_text(sums)
    return out


def test_complete_guest_output_verifies(tmp_path) -> None:
    assert set(vm.verify_output(_guest_out(tmp_path), "x")) == {"getpid.out", "guest-info.txt"}


def test_truncated_guest_file_is_detected(tmp_path) -> None:
    out = _guest_out(tmp_path)
    data = (out / "getpid.out").read_bytes()
    (out / "getpid.out").write_bytes(data[: len(data) // 2])
    with pytest.raises(StageError, match=r"truncated guest output: .*getpid.out does not match"):
        vm.verify_output(out, "x")


def test_missing_checksums_mean_truncated_output(tmp_path) -> None:
    out = _guest_out(tmp_path)
    (out / "SHA256SUMS").unlink()
    with pytest.raises(StageError, match=r"truncated guest output: .*SHA256SUMS is missing"):
        vm.verify_output(out, "x")


def test_probe_times_out_on_a_hanging_accelerator(tmp_path) -> None:
    fake = _script(tmp_path, "qemu", "exec sleep 60")
    ok, why = accel.probe("tcg", tmp_path, timeout=1, qemu=fake)
    assert not ok and "boot sector probe guest hung: no exit within 1 s" in why


def test_probe_passes_with_working_tcg(tmp_path) -> None:
    ok, why = accel.probe("tcg", tmp_path, timeout=30)
    assert ok, why


def test_kvm_request_on_broken_kvm_is_an_error_and_auto_falls_back(tmp_path, monkeypatch
                                                                   ) -> None:
    fake = _script(tmp_path, "qemu", "exec sleep 60")
    with pytest.raises(StageError, match="ACCEL=kvm but KVM does not work here"):
        accel.choose_accel("kvm", tmp_path, timeout=1, qemu=fake)
    used, why = accel.choose_accel("auto", tmp_path, timeout=1, qemu=fake)
    assert used == "tcg" and "fell back to TCG" in why
    if os.access("/dev/kvm", os.R_OK | os.W_OK):
        assert "present but broken" in why
    assert accel.choose_accel("icount", tmp_path) == ("icount", "requested")
