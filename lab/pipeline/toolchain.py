"""The toolchain root: one Debian sid tree that is both the build environment and the guest.

Linux 7.2 wants a newer compiler and pahole than the host's Debian release ships, and the
seed authors built with gcc 15 and clang 21; sid has those, and perf/bpftool matching 7.2.
Rather than install sid packages into the host (which would break it), the pipeline

* talks to sid through a private apt configuration (:mod:`lab.pipeline.apt`),
* pins the root in time with a lock of every package at its exact version
  (:mod:`lab.pipeline.lock`); the root's directory name hashes the lock,
* creates the root here with ``mmdebstrap`` (``--mode=unshare`` when not root, so no root is
  needed where user namespaces are allowed) and runs commands in it with ``bwrap``.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

from lab import ROOT
from lab.command import StageError, quote, require_tools, run
from lab.pipeline import cachedir
from lab.pipeline.apt import KEYRING, SUITE, archive_versions, private_apt
from lab.pipeline.lock import (
    LOCK_FILE,
    PACKAGES,
    Lock,
    check_archive,
    check_requested,
    load_lock,
    pin_preferences,
)
from lab.pipeline.stamps import RootStamp, fresh_log, stage

SUBID_FILES = (Path("/etc/subuid"), Path("/etc/subgid"))


def root_key(lock: Lock | None = None) -> str:
    """Name a root by its suite and the lock's digest, so a refreshed lock makes a fresh root."""
    lock = lock or load_lock()
    return f"{lock.suite}-{lock.digest()[:12]}"


def root_dir(key: str | None = None) -> Path:
    """Return where the root with ``key`` (default: the committed lock's) lives."""
    return cachedir.cache_root() / "roots" / (key or root_key())


def host_architecture() -> str:
    """The host's Debian architecture: the root is made for it, and the lock names it."""
    return run(["dpkg", "--print-architecture"], what="dpkg --print-architecture").stdout.strip()


def check_subordinate_ids(user: str | None = None, files: tuple[Path, ...] = SUBID_FILES
                          ) -> None:
    """Fail early, with the command that fixes it, when the user has no subordinate ids.

    ``mmdebstrap --mode=unshare`` maps the root's users (root, _apt, ...) onto the user's
    subordinate uid and gid ranges; without them it fails deep inside with a newuidmap error.
    """
    user = user or pwd.getpwuid(os.geteuid()).pw_name
    uid = str(os.geteuid())
    for path in files:
        entries = [line.split(":", 1)[0] for line in
                   (path.read_text().splitlines() if path.is_file() else [])]
        if user not in entries and uid not in entries:
            raise StageError(
                f"{path} gives user {user} no subordinate ids, which `mmdebstrap --mode=unshare` "
                f"needs to create the toolchain root without root; as root run "
                f"`usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {user}` "
                f"(any free range of 65536 works)"
            )


def _mmdebstrap(tree: Path, mirror: str, suite: str, include: list[str],
                hooks: list[str], log: Path) -> dict[str, str]:
    """Make a root in ``tree`` (which must not exist) and return its ``{package: version}``.

    mmdebstrap writes a tar stream that ``tar`` unpacks as the calling user, so as a plain
    user (``--mode=unshare``) every file ends up owned by that user: the pipeline can add its
    record, QEMU's 9p server can read every file for the guest, and deleting the cache needs
    no root. A directory made by ``--mode=unshare`` itself would belong to subordinate ids.
    Device nodes are left out: bwrap and the guest mount their own ``/dev``.
    """
    mode = "root" if os.geteuid() == 0 else "unshare"
    keyring = [f"--keyring={KEYRING}"] if KEYRING.is_file() else []
    mm = ["mmdebstrap", f"--mode={mode}", "--variant=minbase", "--format=tar", *keyring,
          f"--include={','.join(include)}",
          "--aptopt=Acquire::Languages \"none\"",
          # a frozen (snapshot) mirror serves a Release file past its Valid-Until date;
          # the signature is still checked, only the date is not
          "--aptopt=Acquire::Check-Valid-Until \"false\"",
          "--dpkgopt=path-exclude=/usr/share/{doc,man,locale}/*",
          *hooks,
          # mount points for the build's bind mounts (the root is bound read-only)
          "--customize-hook=mkdir -p \"$1/src\" \"$1/build\" \"$1/ccache\" \"$1/kb\"",
          "--customize-hook=chroot \"$1\" dpkg-query -W -f='${Package}\\t${Version}\\n'"
          " > \"$1/etc/kernel-book-packages.tsv\"",
          suite, "-", mirror]
    untar = ["tar", "-x", "-C", str(tree), "--numeric-owner", "--exclude=./dev/*"]
    tree.mkdir(parents=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as fh:
        fh.write(f"$ {quote(mm)} | {quote(untar)}\n")
        fh.flush()
        producer = subprocess.Popen(mm, stdout=subprocess.PIPE, stderr=fh)
        consumer = subprocess.Popen(untar, stdin=producer.stdout, stderr=fh)
        assert producer.stdout is not None
        producer.stdout.close()  # tar owns the pipe now: mmdebstrap sees it close if tar dies
        rc_tar, rc_mm = consumer.wait(), producer.wait()
    if rc_mm or rc_tar:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise StageError(f"mmdebstrap (toolchain root) failed (mmdebstrap exit {rc_mm}, tar "
                         f"exit {rc_tar}): {quote(mm)} | {quote(untar)}\n{tail}\n"
                         f"full log: {log}")
    return dict(line.split("\t", 1)
                for line in (tree / "etc" / "kernel-book-packages.tsv").read_text().splitlines()
                if "\t" in line)


def _finish(tmp: Path, target: Path, suite: str, versions: dict[str, str]) -> Path:
    """Write the root's record (what the manifest quotes) and rename it into place."""
    (tmp / "etc" / "kernel-book-packages.json").write_text(
        json.dumps({"suite": suite, "mirror_suite": suite, "packages": versions},
                   indent=1, sort_keys=True)
    )
    tmp.rename(target)
    return target


def _fresh_tmp(target: Path) -> Path:
    """The scratch directory a root is made in, emptied of an interrupted attempt."""
    tmp = target.with_name(target.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    target.parent.mkdir(parents=True, exist_ok=True)
    return tmp


def _prerequisites() -> None:
    """Host tools for making a root; as a plain user also the subordinate ids."""
    require_tools(["mmdebstrap", "tar", "apt-cache", "dpkg"])
    if os.geteuid() != 0:
        require_tools(["newuidmap", "newgidmap"])
        check_subordinate_ids()


def create_root(log: Path, mirror: str | None = None, lock_path: Path = LOCK_FILE) -> Path:
    """Create (once) the toolchain root the lock describes and record its package versions.

    Before anything is downloaded the archive is asked whether it still serves every locked
    version; afterwards the root is compared with the lock, so a root that is not the locked
    one is never used. The tree is made in a temporary directory that is renamed into place
    only on success, so an interrupted creation leaves nothing that looks finished. Runs as
    root or as a plain user (``--mode=unshare``: user namespaces and subordinate ids).
    """
    lock = load_lock(lock_path)
    check_requested(lock, path=lock_path)
    target = root_dir(root_key(lock))
    if (target / "etc" / "kernel-book-packages.json").is_file():
        return target
    _prerequisites()
    if lock.architecture != host_architecture():
        raise StageError(f"{lock_path} locks a root for {lock.architecture}, this host is "
                         f"{host_architecture()}; run `make toolchain-lock` on this host")
    apt = private_apt(mirror, "apt-root")
    apt.update(log=log)
    check_archive(lock, archive_versions(apt, [p for p, _ in lock.packages]), lock_path)
    tmp = _fresh_tmp(target)
    prefs = apt.base / "kernel-book-lock.pref"
    prefs.write_text(pin_preferences(lock))
    locked = dict(lock.packages)
    versions = _mmdebstrap(
        tmp, apt.mirror, lock.suite, [f"{p}={locked[p]}" for p in lock.requested],
        [f"--setup-hook=copy-in {prefs} /etc/apt/preferences.d"], log)
    if versions != locked:
        diff = sorted(f"{p}: locked {locked.get(p, '(absent)')}, got {versions.get(p, '(absent)')}"
                      for p in set(locked) | set(versions) if locked.get(p) != versions.get(p))
        raise StageError(f"the root made from {lock_path} differs from it ({tmp}):\n  "
                         + "\n  ".join(diff) + "\nrefresh the lock with `make toolchain-lock`")
    return _finish(tmp, target, lock.suite, versions)


def make_lock(log: Path, mirror: str | None = None, lock_path: Path = LOCK_FILE,
              packages: tuple[str, ...] = PACKAGES, suite: str = SUITE) -> Path:
    """Make a root from what the archive serves today and write its lock to ``lock_path``.

    The new root is kept (under the new lock's key), so the next run does not make it again.
    """
    _prerequisites()
    apt = private_apt(mirror, "apt-root")
    scratch = _fresh_tmp(cachedir.cache_root() / "roots" / "lock-new")
    versions = _mmdebstrap(scratch, apt.mirror, suite, list(packages), [], log)
    lock = Lock(suite, host_architecture(), tuple(sorted(packages)),
                tuple(sorted(versions.items())))
    target = root_dir(root_key(lock))
    if target.exists():
        shutil.rmtree(scratch)
    else:
        _finish(scratch, target, suite, versions)
    lock_path.write_text(lock.render())
    return target


def root_packages(root: Path) -> dict[str, str]:
    """Return ``{package: version}`` of a finished root, for the run manifest."""
    path = root / "etc" / "kernel-book-packages.json"
    if not path.is_file():
        raise StageError(f"{root} is not a finished toolchain root (no {path.name}); "
                         "run `make reproduce` again to create it")
    return json.loads(path.read_text())["packages"]


def in_root(root: Path, argv: list[str], binds: dict[Path, str], *, cwd: str = "/",
            env: dict[str, str] | None = None,
            read_only: dict[Path, str] | None = None) -> list[str]:
    """Return a ``bwrap`` command line that runs ``argv`` with ``root`` as ``/``.

    ``binds`` maps host directories to their path inside (source, build dir, ccache), bound
    read-write; ``read_only`` maps files and directories the command must not change (earlier
    results it reads). The root itself is read-only so a build can never change the toolchain.
    """
    cmd = ["bwrap", "--ro-bind", str(root), "/", "--dev", "/dev", "--proc", "/proc",
           "--tmpfs", "/tmp", "--unshare-ipc", "--unshare-pid", "--unshare-uts",
           "--die-with-parent"]
    for host, inside in binds.items():
        cmd += ["--bind", str(host), inside]
    for host, inside in (read_only or {}).items():
        cmd += ["--ro-bind", str(host), inside]
    cmd += ["--chdir", cwd, "--clearenv"]
    base_env = {"PATH": "/usr/lib/ccache:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp",
                "LANG": "C.UTF-8"}
    for k, v in {**base_env, **(env or {})}.items():
        cmd += ["--setenv", k, v]
    return cmd + argv


def tool_versions(root: Path, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """First line of ``--version`` of each compiler in the root (and of ``extra`` ones, a
    cross layer's), for the manifest."""
    out = {}
    for tool in ("gcc-15", "clang-21", "ld.lld-21", "pahole", *extra):
        try:
            proc = subprocess.run(in_root(root, [tool, "--version"], {}), capture_output=True,
                                  text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0 and proc.stdout:
            out[tool] = proc.stdout.splitlines()[0].strip()
    return out


def main(argv: list[str]) -> int:
    """``python -m lab.pipeline.toolchain lock``: refresh the lock file (``make
    toolchain-lock``)."""
    if argv != ["lock"]:
        print("usage: python -m lab.pipeline.toolchain lock", file=sys.stderr)
        return 2
    log = cachedir.sub("logs") / "toolchain-lock.log"
    print(f"making a root from what {SUITE} serves today (log: {log})", file=sys.stderr)
    try:
        root = make_lock(log)
    except StageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {LOCK_FILE.relative_to(ROOT)} ({len(load_lock().packages)} packages); "
          f"root: {root}; commit the lock", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def cmd_root(a: argparse.Namespace) -> None:
    """Create (once) the toolchain root; record its packages and compiler versions."""
    log = fresh_log(a)
    with stage("root", root_key(), log):
        require_tools(["mmdebstrap", "bwrap"])
        root = create_root(log)
        stamp = RootStamp(root=str(root), key=root.name, suite=SUITE,
                          packages=root_packages(root), tools=tool_versions(root))
    stamp.write(a.out)
