"""The toolchain root's lock: every package of the root at its exact version.

``configs/toolchain.lock.yaml`` pins the root in time: the root is made from those versions
only, and its directory name hashes the lock. sid moves daily, so a lock outlives the archive's
versions; then the pipeline says which package is gone and how to refresh the lock, rather
than build with something else. A chapter's guest lock (:mod:`lab.pipeline.guestlayer`) is read
by the same reader.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import ROOT, yamlfile
from lab.command import StageError

PACKAGES: tuple[str, ...] = (
    # compilers of the seed authors, and the kernel's build dependencies
    "gcc-15", "g++-15", "clang-21", "lld-21", "llvm-21", "pahole", "ccache",
    # BPF programs with arena pointers (scx_qmap): clang 21 drops address-space casts that
    # the verifier needs; 22 emits them
    "clang-22",
    "make", "bc", "bison", "flex", "libelf-dev", "libssl-dev", "cpio", "kmod", "python3",
    "perl", "rsync", "xz-utils", "zstd", "libc6-dev",
    # tools the guest workloads use
    "linux-perf", "bpftool", "stress-ng", "bpftrace", "liburing-dev", "procps",
    # HTTP load over loopback: the io-wq chapter's load generator up to its run
    # 20261127T021432Z-auto; a tool only guests run belongs in a chapter's guest_packages
    # (lab/pipeline/guestlayer.py), and wrk leaves this list at the next lock refresh, which
    # makes a new root (and new kernel builds) anyway
    "wrk",
)
"""Packages the root is asked for; the lock (``LOCK_FILE``) holds them and their dependencies
at exact versions, and must be refreshed (``make toolchain-lock``) when this list changes."""


LOCK_FILE = ROOT / "configs" / "toolchain.lock.yaml"


LOCK_HEADER = """\
# The toolchain root, package by package (made by lab/pipeline/toolchain.py). The root is
# re-created from exactly these versions (apt pins them), and the pipeline stops before it starts
# when the archive no longer serves one of them. `make toolchain-lock` refreshes this file from
# what the archive serves today: that is a new root with new compilers, so re-measure what you
# compare. `requested` is the package list (PACKAGES in lab/pipeline/lock.py) it was made from.
"""


@dataclass(frozen=True)
class Lock:
    """The toolchain root, package by package: what ``configs/toolchain.lock.yaml`` pins."""

    suite: str
    architecture: str
    requested: tuple[str, ...]
    packages: tuple[tuple[str, str], ...]
    """``(package, version)`` of every package of the root, sorted by package."""

    def digest(self) -> str:
        """sha256 of what the root is made of; the root's directory name carries it."""
        lines = [f"suite {self.suite}", f"architecture {self.architecture}",
                 *(f"{p}={v}" for p, v in self.packages)]
        return hashlib.sha256("\n".join(lines).encode()).hexdigest()

    def render(self) -> str:
        """The lock file's text (versions quoted: ``1:2.3`` is a number to YAML 1.1)."""
        out = [LOCK_HEADER.rstrip("\n"), f"suite: {self.suite}",
               f"architecture: {self.architecture}", "requested:",
               *(f"  - {p}" for p in self.requested), "packages:",
               *(f'  {p}: "{v}"' for p, v in self.packages)]
        return "\n".join(out) + "\n"


def read_lock_file(path: Path, keys: tuple[tuple[str, type], ...], fix: str,
                   missing: str = "") -> dict[str, Any]:
    """A package lock's YAML (this root's, or a chapter's guest lock), checked: the file, its
    keys and their types, and every version a quoted string; each problem names the file and
    ends with ``fix``."""
    if not path.is_file():
        raise StageError(f"{path} is missing{missing}; {fix}")
    try:
        data = yamlfile.load(path.read_text())
    except yamlfile.YAMLError as exc:
        raise StageError(f"{path} is not valid YAML ({exc}); {fix}") from exc
    if not isinstance(data, dict):
        raise StageError(f"{path} is not a mapping; {fix}")
    for key, kind in keys:
        if not isinstance(data.get(key), kind):
            raise StageError(f"{path}: key `{key}` is missing or not a {kind.__name__}; {fix}")
    bad = [p for p, v in data["packages"].items() if not isinstance(v, str)]
    if bad:
        raise StageError(f"{path}: the versions of {', '.join(bad)} are not quoted strings "
                         f"(YAML reads 1:2.3 as a number); quote them or {fix}")
    return data


def load_lock(path: Path = LOCK_FILE) -> Lock:
    """Read and check the lock file; every problem names the file, the key and the fix."""
    data = read_lock_file(path, (("suite", str), ("architecture", str), ("requested", list),
                                 ("packages", dict)), "run `make toolchain-lock` to write it anew")
    return Lock(data["suite"], data["architecture"], tuple(data["requested"]),
                tuple(sorted(data["packages"].items())))


def check_archive(lock: Lock, served: dict[str, set[str]], path: Path = LOCK_FILE) -> None:
    """Fail loudly, package by package, when the archive no longer serves a locked version."""
    gone = [(p, v, sorted(served.get(p, ()))) for p, v in lock.packages
            if v not in served.get(p, ())]
    if not gone:
        return
    lines = [f"  {p} {v}: the archive serves "
             f"{', '.join(now) if now else 'no version of it'}" for p, v, now in gone]
    raise StageError(
        f"{path}: the archive ({lock.suite}) no longer serves {len(gone)} locked package "
        f"version(s):\n" + "\n".join(lines) + "\n"
        "Refresh the lock with `make toolchain-lock` (it makes a root from what the archive "
        "serves now and rewrites the lock; commit it and re-measure what you compare), or set "
        "DEBIAN_MIRROR= to an archive snapshot that still serves the locked versions."
    )


def check_requested(lock: Lock, packages: tuple[str, ...] = PACKAGES,
                    path: Path = LOCK_FILE) -> None:
    """Fail when PACKAGES changed since the lock was made: the lock would not hold them."""
    if sorted(packages) != sorted(lock.requested):
        added = sorted(set(packages) - set(lock.requested))
        dropped = sorted(set(lock.requested) - set(packages))
        raise StageError(
            f"{path} was made from another package list than lab/pipeline/lock.py PACKAGES "
            f"(added: {', '.join(added) or 'none'}; dropped: {', '.join(dropped) or 'none'}); "
            "run `make toolchain-lock` and commit the new lock"
        )


def pin_preferences(lock: Lock) -> str:
    """apt preferences that make every locked version the candidate, even a downgrade.

    mmdebstrap chooses the Essential and Priority:required packages itself, from the archive;
    the pins reach those choices too, where ``--include=pkg=version`` would not.
    """
    return "\n".join(f"Package: {p}\nPin: version {v}\nPin-Priority: 1001\n"
                     for p, v in lock.packages)
