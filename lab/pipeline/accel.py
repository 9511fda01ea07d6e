"""Which accelerator a boot uses: KVM only after a real probe, else TCG, or TCG with icount.

KVM is chosen only after a real probe: a 512-byte boot sector that writes one byte to the
serial port and exits through isa-debug-exit must finish within a timeout, then the variant's
kernel must reach a shell. ``/dev/kvm`` can exist while KVM guests hang, and a file-existence
test would then hang every run. Another architecture's guests never use KVM here.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from lab.command import StageError, die_with_parent
from lab.pipeline.arch import HOST, Arch
from lab.pipeline.vm import QEMU, Machine, accel_args

ACCELS = ("auto", "kvm", "tcg", "icount")


def probe_timeout() -> float:
    """Seconds a KVM probe guest may take (``KERNEL_BOOK_PROBE_TIMEOUT``, default 30): a
    working KVM boots the probe kernel in a few seconds."""
    return float(os.environ.get("KERNEL_BOOK_PROBE_TIMEOUT", "30"))


def kvm_device() -> str:
    """The KVM device the probe checks first (``KERNEL_BOOK_KVM_DEVICE``, default /dev/kvm):
    the tests point it at a file to play a host whose device is present but whose guests hang."""
    return os.environ.get("KERNEL_BOOK_KVM_DEVICE", "/dev/kvm")


def _probe_image(path: Path) -> Path:
    """Write the probe boot sector: out 'K' to COM1, then exit QEMU via isa-debug-exit."""
    code = bytes([0xBA, 0xF8, 0x03, 0xB0, 0x4B, 0xEE, 0xB0, 0x0A, 0xEE,
                  0xB0, 0x00, 0xE6, 0xF4, 0xF4, 0xEB, 0xFD])
    path.write_bytes(code + bytes(510 - len(code)) + b"\x55\xaa")
    return path


PROBE_SHIM = ("mount -t devtmpfs dev /dev; exec </dev/console >/dev/console 2>&1; "
              "echo KB-PROBE-OK; mount -t proc proc /proc; echo b > /proc/sysrq-trigger")


def probe(accel: str, workdir: Path, timeout: float = 30.0, qemu: str = QEMU,
          kernel: Path | None = None, root: Path | None = None) -> tuple[bool, str]:
    """Boot a real guest with ``accel``; return (works, what happened).

    Two steps, both with the CPU model the runs use: a boot sector that must exit through
    isa-debug-exit (catches a QEMU that aborts, in well under a second), then, given a
    ``kernel`` and ``root``, that kernel up to a shell that prints a marker and reboots
    (catches a KVM on which Linux hangs early, which the boot sector does not show).
    """
    device = kvm_device()
    if accel == "kvm" and not os.access(device, os.R_OK | os.W_OK):
        return False, f"{device} is missing or not accessible to this user"
    workdir.mkdir(parents=True, exist_ok=True)
    image = _probe_image(workdir / "kvm-probe.img")
    common = [qemu, *accel_args(accel, Machine()), "-nodefaults", "-no-user-config",
              "-display", "none", "-serial", "stdio", "-no-reboot"]
    steps = [("boot sector", [*common, "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04",
                              "-drive", f"file={image},format=raw,if=ide"], 1, b"K")]
    if kernel is not None and root is not None:
        cmdline = ("console=ttyS0 root=kbroot rootfstype=9p rootflags=trans=virtio,"
                   f"version=9p2000.L ro panic=-1 init=/bin/sh -- -c \"{PROBE_SHIM}\"")
        steps.append(("Linux boot", [*common, "-m", "256M", "-kernel", str(kernel),
                                     "-append", cmdline, "-fsdev",
                                     f"local,id=kbroot,path={root},security_model=none,"
                                     "readonly=on", "-device",
                                     "virtio-9p-pci,fsdev=kbroot,mount_tag=kbroot"],
                      0, b"KB-PROBE-OK"))
    for name, argv, want_rc, want_out in steps:
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=timeout, check=False, start_new_session=True,
                                  preexec_fn=die_with_parent)
        except subprocess.TimeoutExpired:
            return False, (f"{name} probe guest hung: no exit within {timeout:g} s "
                           f"({accel} is present but broken)")
        except FileNotFoundError:
            return False, f"{qemu} not found"
        if proc.returncode != want_rc or want_out not in proc.stdout:
            err = (proc.stderr + proc.stdout).decode(errors="replace").strip().splitlines()
            return False, (f"{name} probe exited {proc.returncode}: "
                           f"{err[-1] if err else 'no output'}")
    return True, f"{' and '.join(s[0] for s in steps)} probe guests ran and exited"


def cross_accel(requested: str, arch: Arch) -> tuple[str, str]:
    """The accelerator of a cross architecture's boots: TCG (``icount`` stays icount), since
    KVM runs only guests of the host's own architecture; ``kvm`` asked for is an error."""
    if requested not in ACCELS:
        raise StageError(f"ACCEL={requested} is not one of {', '.join(ACCELS)}")
    if requested == "kvm":
        raise StageError(f"ACCEL=kvm, but KVM cannot run an {arch.name} guest on this "
                         f"{HOST} host; run with ACCEL=tcg (or auto)")
    if requested in ("tcg", "icount"):
        return requested, "requested"
    return "tcg", f"no KVM for an {arch.name} guest on an {HOST} host: TCG, without a probe"


def choose_accel(requested: str, workdir: Path, timeout: float = 30.0, qemu: str = QEMU,
                 kernel: Path | None = None, root: Path | None = None) -> tuple[str, str]:
    """Resolve ``auto``/``kvm``/``tcg``/``icount`` to the accelerator used, and why.

    ``kvm`` that fails the probe is an error (the reader asked for it); ``auto`` falls back to
    TCG and says so.
    """
    if requested not in ACCELS:
        raise StageError(f"ACCEL={requested} is not one of {', '.join(ACCELS)}")
    if requested in ("tcg", "icount"):
        return requested, "requested"
    ok, why = probe("kvm", workdir, timeout, qemu, kernel, root)
    if ok:
        return "kvm", why
    if requested == "kvm":
        raise StageError(f"ACCEL=kvm but KVM does not work here: {why}; "
                         "run with ACCEL=tcg (or ACCEL=auto to fall back by itself)")
    return "tcg", f"KVM unusable ({why}); fell back to TCG"
