"""Boot a variant's kernel under QEMU with the toolchain root as the guest's root.

Plain QEMU rather than a wrapper, because the run's identity is its command line: the
accelerator (KVM, multi-threaded TCG, or single-threaded TCG with ``-icount``), the CPU model,
the vCPU topology and NUMA nodes, and the kernel command line all come from the experiment and
all go into the manifest. Three 9p shares connect guest and host: the root (read-only), the
boot's job directory (read-only: guest init, workload scripts, programs) and the results
directory (the only thing the guest writes).

A machine may also have a disk: a raw image formatted ext2 on the host before each boot (the
toolchain root has no mkfs) and attached as a single-queue virtio-blk device, ``/dev/vda`` in the
guest, for workloads that need a block-backed filesystem (buffer heads, writeback).

Which accelerator a boot uses is :mod:`lab.pipeline.accel`'s decision.
"""

from __future__ import annotations

import hashlib
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from lab.command import StageError, die_with_parent, require_tools
from lab.parse.clock import DONE
from lab.pipeline.arch import ARCHES, HOST, Arch

QEMU = "qemu-system-x86_64"
SPLATS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("panic", re.compile(r"Kernel panic - not syncing")),
    ("oops", re.compile(r"\bOops:|general protection fault|BUG: unable to handle")),
    ("lockdep", re.compile(r"possible circular locking dependency|possible recursive locking"
                           r"|inconsistent lock state|suspicious RCU usage")),
    ("bug", re.compile(r"\bBUG: |kernel BUG at")),
    # the report line of a WARN(): "WARNING: CPU: <n> PID: <pid> at <file:line>" in older
    # kernels, "WARNING: [<file:line> ]at <function>, CPU#<n>: <comm>/<pid>" in 7.2.13
    # (__warn() in kernel/panic.c)
    ("warning", re.compile(r"WARNING: CPU: \d+ PID: \d+|WARNING: (?:\S+:\d+ )?at \S+, CPU#\d+")),
)
"""Console lines that make a run invalid, by kind (checked in this order)."""

@dataclass(frozen=True)
class Machine:
    """The guest's hardware as the experiment states it."""

    memory: str = "512M"
    cpus: int = 1
    sockets: int = 1
    threads: int = 1
    numa: tuple[dict[str, str], ...] = ()
    cpu_model: str = "max"
    disk: str = ""
    """Size of the ext2 scratch disk (``64M``), or empty for none."""

    @property
    def memory_mb(self) -> int:
        """The guest's memory in MiB (QEMU's ``-m`` suffixes M, G, T; a bare number is MiB),
        for the memory a cluster job that boots it asks for."""
        number, unit = (self.memory[:-1], self.memory[-1].upper()) \
            if self.memory[-1:].isalpha() else (self.memory, "M")
        scale = {"M": 1, "G": 1024, "T": 1024 * 1024}
        if unit not in scale or not number.replace(".", "", 1).isdigit():
            raise StageError(f"guest memory {self.memory!r} is not a size QEMU reads (512M, "
                             "2G); fix the experiment's machine section")
        return round(float(number) * scale[unit])

    def args(self) -> list[str]:
        """QEMU memory, CPU, topology and NUMA options."""
        if self.cpus % (self.sockets * self.threads):
            raise StageError(f"{self.cpus} vCPUs do not divide into {self.sockets} sockets x "
                             f"{self.threads} threads; fix the experiment's machine section")
        cores = self.cpus // (self.sockets * self.threads)
        out = ["-m", self.memory, "-smp",
               f"cpus={self.cpus},sockets={self.sockets},cores={cores},threads={self.threads}"]
        for i, node in enumerate(self.numa):
            out += ["-object", f"memory-backend-ram,id=kbmem{i},size={node['memory']}",
                    "-numa", f"node,nodeid={i},cpus={node['cpus']},memdev=kbmem{i}"]
        return out


def accel_args(accel: str, machine: Machine) -> list[str]:
    """Accelerator options, with TCG's thread mode spelled out so the manifest's ``qemu_argv``
    records it: plain TCG runs one host thread per vCPU (MTTCG, QEMU's default for an x86
    guest on an x86 host), icount needs single-threaded TCG (QEMU refuses it with MTTCG)."""
    if accel == "kvm":
        return ["-accel", "kvm", "-cpu", "host"]
    if accel == "icount":
        return ["-accel", "tcg,thread=single", "-icount", "shift=0,sleep=off",
                "-cpu", machine.cpu_model]
    return ["-accel", "tcg,thread=multi", "-cpu", machine.cpu_model]


SHIM = ("mount -t devtmpfs dev /dev; exec </dev/console >/dev/console 2>&1; "
        "mount -t tmpfs kbtmp /tmp && mkdir /tmp/kb && "
        "mount -t 9p -o trans=virtio,version=9p2000.L,ro kbjob /tmp/kb && "
        "exec /bin/sh /tmp/kb/guest-init.sh")
"""Runs before the job's init: the root is read-only 9p, so tmpfs and the job share go on
/tmp (virtme-ng starts its guests the same way)."""


def kernel_cmdline(extra: str = "", console: str = "ttyS0") -> str:
    """The guest's command line: 9p root, serial ``console`` (the architecture's), reboot on
    panic, then ``extra``."""
    base = (f"console={console} root=kbroot rootfstype=9p "
            "rootflags=trans=virtio,version=9p2000.L,msize=262144 ro panic=-1 oops=panic")
    tail = f" {extra.strip()}" if extra.strip() else ""
    return f"{base}{tail} init=/bin/sh -- -c \"{SHIM}\""


DISK_UUID = "6b62646b-0000-4000-8000-000000000001"
"""Fixed file-system UUID and directory hash seed: with the creation time pinned too
(``E2FSPROGS_FAKE_TIME``) and mke2fs's built-in defaults instead of the host's
``/etc/mke2fs.conf``, one mke2fs version writes the same image on every machine."""


def mke2fs() -> str:
    """The host's mke2fs: Debian puts it in /usr/sbin, which an ordinary user's PATH lacks."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    found = shutil.which("mke2fs", path=path)
    if found is None:
        raise StageError("missing host tool: mke2fs (a machine with a disk: formats it before "
                         "each boot); install it with `apt-get install e2fsprogs` (as root), "
                         "or run `make pipeline-deps`")
    return found


def make_disk(image: Path, size: str) -> dict[str, Any]:
    """Write a fresh ext2 image of ``size`` at ``image`` (replacing any file there); return
    what the run records of it: the command, the mke2fs version and the image's sha256. Every
    boot starts from the same empty disk."""
    image.unlink(missing_ok=True)
    tool = mke2fs()
    argv = [tool, "-q", "-F", "-t", "ext2", "-b", "4096", "-L", "kbdisk", "-U", DISK_UUID,
            "-E", f"hash_seed={DISK_UUID},root_owner=0:0", str(image), size]
    env = {**os.environ, "E2FSPROGS_FAKE_TIME": "1",
           "MKE2FS_CONFIG": str(image.with_name("no-mke2fs.conf"))}
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise StageError(f"mke2fs could not format {image}: "
                         f"{(proc.stderr or proc.stdout).strip()}\n  command: "
                         + " ".join(argv))
    version = subprocess.run([tool, "-V"], capture_output=True, text=True, check=False)
    with image.open("rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    return {"argv": argv, "mke2fs": (version.stderr or version.stdout).splitlines()[0].strip(),
            "sha256": digest}


@contextmanager
def scratch_disk(image: Path, size: str) -> Iterator[dict[str, Any]]:
    """:func:`make_disk`, then delete the image when the boot is over, also when it failed:
    the guest's results are in its output share, and a 64 MiB image per boot would pile up."""
    record = make_disk(image, size)
    try:
        yield record
    finally:
        image.unlink(missing_ok=True)


def qemu_command(kernel: Path, root: Path, job: Path, out: Path, accel: str, machine: Machine,
                 cmdline: str, initrd: Path | None = None,
                 disk: Path | None = None, arch: Arch = ARCHES[HOST]) -> list[str]:
    """The full QEMU command line of one boot; ``initrd``, if given, is unpacked into the
    kernel's rootfs before the 9p root is mounted (an archive without ``/init`` does not
    replace the root: it only puts files into the page cache early in boot). ``disk`` (the
    image :func:`make_disk` wrote) becomes a virtio-blk device with one queue, so its
    interrupt is a single vector that ``irqaffinity=`` can keep off an isolated CPU. ``arch``
    picks QEMU's binary and machine (``pc``, or ``virt`` on Arm)."""
    shares = []
    for tag, path, ro in (("kbroot", root, True), ("kbjob", job, True), ("kbout", out, False)):
        shares += ["-fsdev", f"local,id={tag},path={path},security_model=none"
                   + (",readonly=on" if ro else ""),
                   "-device", f"virtio-9p-pci,fsdev={tag},mount_tag={tag}"]
    drive = ["-drive", f"file={disk},if=none,id=kbdisk,format=raw",
             "-device", "virtio-blk-pci,drive=kbdisk,num-queues=1"] if disk else []
    return [arch.qemu, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-machine", arch.machine, *accel_args(accel, machine), *machine.args(),
            "-kernel", str(kernel), *(["-initrd", str(initrd)] if initrd else []),
            "-append", cmdline, *shares, *drive, "-serial", "stdio"]


@dataclass
class BootResult:
    """What one boot produced, for the run record."""

    argv: list[str]
    console: Path
    seconds_to_done: float
    rc: int
    splats: list[str] = field(default_factory=list)


def scan(line: str) -> str | None:
    """Return the kind of kernel splat ``line`` shows, or None."""
    for kind, pattern in SPLATS:
        if pattern.search(line):
            return kind
    return None


def _reader(stream: IO[bytes], lines: queue.Queue[str | None]) -> None:
    """Move QEMU's output into ``lines`` (a thread, so the main loop can keep a deadline)."""
    for raw in iter(stream.readline, b""):
        lines.put(raw.decode(errors="replace").rstrip("\r\n"))
    lines.put(None)


def boot(argv: list[str], console: Path, timeout: float, label: str) -> BootResult:
    """Run QEMU, copy the serial console to ``console`` and watch it.

    Fails on a kernel splat (panic, oops, BUG, lockdep, WARNING), on a guest that does not
    print the done marker within ``timeout`` seconds (hang), and on a guest that ends without
    it (crash or reset mid-run).
    """
    require_tools([argv[0]])
    console.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=die_with_parent)
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    splats: list[str] = []
    done_rc: int | None = None
    done_at = 0.0
    ended = False
    grace_until: float | None = None
    try:
        with console.open("w") as log:
            while True:
                now = time.monotonic()
                limit = grace_until if grace_until is not None else start + timeout
                if now >= limit:
                    break
                try:
                    line = lines.get(timeout=max(0.05, limit - now))
                except queue.Empty:
                    continue
                if line is None:
                    ended = True
                    break
                log.write(line + "\n")
                if (kind := scan(line)) is not None:
                    splats.append(f"{kind}: {line.strip()}")
                    grace_until = grace_until or time.monotonic() + 3.0
                if (m := DONE.match(line)) and done_rc is None:
                    done_rc, done_at = int(m[1]), time.monotonic() - start
                    grace_until = grace_until or time.monotonic() + 15.0
    finally:
        # QEMU runs in its own session (a Ctrl-C must not reach the guest half-way through a
        # write), so it is ended here when this process is interrupted, and by the kernel
        # (die_with_parent) when this process is killed outright.
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    tail = "\n  ".join(console.read_text(errors="replace").splitlines()[-15:])
    if splats:
        raise StageError(f"{label}: guest kernel {splats[0]}\n  ({len(splats)} splat line(s); "
                         f"console: {console})\n  {tail}")
    if done_rc is None and ended and proc.returncode != 0:
        raise StageError(f"{label}: QEMU exited with status {proc.returncode} before the guest "
                         f"finished; console: {console}\n  {tail}")
    if done_rc is None:
        what = ("guest ended before it finished (no KB-DONE marker): its output is truncated"
                if ended else f"guest hang: no KB-DONE marker within {timeout:g} s")
        raise StageError(f"{label}: {what}; console: {console}\n  {tail}")
    return BootResult(argv, console, round(done_at, 2), done_rc, splats)


def verify_output(out: Path, label: str) -> dict[str, str]:
    """Check the guest's results against the SHA256SUMS it wrote last; return the sums.

    A file that is missing, shorter or different from what the guest hashed means the
    results were cut off on their way to the host.
    """
    sums_file = out / "SHA256SUMS"
    if not sums_file.is_file():
        raise StageError(f"{label}: truncated guest output: {sums_file} is missing "
                         "(the guest did not finish writing its results)")
    sums: dict[str, str] = {}
    for line in sums_file.read_text().splitlines():
        digest, _, name = line.partition("  ")
        sums[name] = digest
        path = out / name
        got = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"
        if got != digest:
            raise StageError(f"{label}: truncated guest output: {path} does not match the "
                             f"sha256 the guest wrote ({got[:12]} != {digest[:12]})")
    return sums


def qemu_version(qemu: str = QEMU) -> str:
    """First line of ``<qemu> --version`` (``qemu-system-x86_64`` unless named), for the
    manifest."""
    try:
        out = subprocess.run([qemu, "--version"], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return "missing"
    return out.stdout.splitlines()[0].strip() if out.stdout else "unknown"
