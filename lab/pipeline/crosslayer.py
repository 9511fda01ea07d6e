"""What a cross architecture's kernels are built with and its guests boot into.

Two kinds of lock, both in :mod:`lab.pipeline.guestlayer`'s format and resolved against the
toolchain root the same way:

* ``configs/cross.lock.yaml``: gcc-15's cross compilers, binutils and C libraries of every
  cross architecture (:func:`lab.pipeline.arch.cross`), a layer over the toolchain root as a
  chapter's guest packages are. Builds of a cross variant run in it. The root's own lock does
  not change, so no x86 kernel is rebuilt when an architecture is added.
* ``configs/guest-<arch>.lock.yaml``: that architecture's statically linked busybox, unpacked
  into an otherwise empty tree with its applets linked by name: the guest's ``/`` (the 9p
  root, as the toolchain root is an x86 guest's). The workloads' shell scripts and the static
  programs the tools stage cross-compiles are all a guest runs.

``make cross-lock`` writes all of them from what the archive serves today. The cross stage
(``toolchain/cross.json``) makes the layer and the guest trees once per lock and names them.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from lab import ROOT
from lab.command import StageError
from lab.pipeline import arch as arches
from lab.pipeline import cachedir, experiment, nodecache, toolchain, vm
from lab.pipeline.apt import SUITE
from lab.pipeline.guestlayer import GuestLock, create_layer, resolve
from lab.pipeline.lock import read_lock_file
from lab.pipeline.stamps import CrossStamp, RootStamp, fresh_log, read_json, stage

BUILD_LOCK = ROOT / "configs" / "cross.lock.yaml"
LOCK_HEADER = """\
# Packages of cross-architecture builds and guests (lab/pipeline/crosslayer.py) at exact
# versions: what apt adds to the toolchain root named below, dependencies included.
# cross.lock.yaml: gcc-15's cross compilers and C libraries, a layer cross builds run in;
# guest-<arch>.lock.yaml: that architecture's static busybox, its guests' /. No x86 kernel
# sees them. `make cross-lock` writes them anew from what the archive serves today, and must
# be run again when the toolchain lock changes.
"""
FIX = "run `make cross-lock` and commit configs/cross.lock.yaml and configs/guest-*.lock.yaml"


def guest_lock_path(a: arches.Arch) -> Path:
    """Where the lock of an architecture's guest tree lives."""
    return ROOT / "configs" / f"guest-{a.name}.lock.yaml"


def build_packages() -> tuple[str, ...]:
    """What the cross layer asks for: gcc-15's cross compiler (with its binutils) and the C
    library (static, for the guest's programs) of each cross architecture."""
    return tuple(sorted(p for a in arches.cross()
                        for p in (f"gcc-15-{a.triplet}", f"libc6-dev-{a.debian}-cross")))


def guest_packages(a: arches.Arch) -> tuple[str, ...]:
    """What an architecture's guest tree holds: its static busybox."""
    return (f"busybox-static:{a.debian}",)


def read(path: Path, wanted: tuple[str, ...], root_key: str) -> GuestLock:
    """A cross lock, checked against what it must pin and the toolchain root's key; every
    problem names the file and the fix."""
    data = read_lock_file(path, (("root", str), ("requested", list), ("packages", dict)), FIX)
    lock = GuestLock(data["root"], tuple(sorted(data["requested"])),
                     tuple(sorted(data["packages"].items())))
    if lock.requested != tuple(sorted(wanted)):
        raise StageError(f"{path} pins {list(lock.requested)}, the pipeline asks for "
                         f"{sorted(wanted)} (lab/pipeline/crosslayer.py); {FIX}")
    if lock.root != root_key:
        raise StageError(f"{path} was resolved against toolchain root {lock.root}, the "
                         f"toolchain lock makes {root_key}; {FIX}")
    return lock


def locks(root_key: str) -> tuple[GuestLock, dict[str, GuestLock]]:
    """The build layer's lock and each cross architecture's guest lock."""
    return (read(BUILD_LOCK, build_packages(), root_key),
            {a.name: read(guest_lock_path(a), guest_packages(a), root_key)
             for a in arches.cross()})


def lock_files() -> list[Path]:
    """Every cross lock file (inputs of the cross stage)."""
    return [BUILD_LOCK, *(guest_lock_path(a) for a in arches.cross())]


_APPLET = re.compile(rb"[a-z0-9_.\[-]+")


def applets(busybox: Path) -> list[str]:
    """The applet names compiled into a busybox binary, read from its name table (a sorted
    run of NUL-terminated names that begins ``[``, ``[[``). The guest's binary cannot run
    here, so ``busybox --list`` is not an option."""
    data = busybox.read_bytes()
    at = data.find(b"[\0[[\0")
    while at >= 0:
        names = []
        for token in data[at:].split(b"\0"):
            if not _APPLET.fullmatch(token):
                break
            names.append(token.decode())
        if "sh" in names and len(names) >= 50:
            return names
        at = data.find(b"[\0[[\0", at + 1)
    raise StageError(f"{busybox}: no applet table (a run of names from [ and [[ to sh) found; "
                     "is it a busybox binary?")


def guest_tree(root: Path, a: arches.Arch, lock: GuestLock, log: Path) -> Path:
    """Make (once) an architecture's guest tree: busybox unpacked into an empty tree, each
    applet a link to it in /bin, and the directories the guest mounts on."""
    return create_layer(root, lock, log, foreign=(a.debian,), empty=True,
                        finish=_link_applets)


def _link_applets(tree: Path) -> None:
    """The merged-/usr links and mount points a busybox root needs, and every applet as a
    link to the binary (``init=/bin/sh``; the workloads call programs by name)."""
    busybox = tree / "usr" / "bin" / "busybox"
    for name in ("bin", "sbin"):
        (tree / name).symlink_to(f"usr/{name}")
    (tree / "usr" / "sbin").mkdir(exist_ok=True)
    for name in applets(busybox):
        link = tree / "usr" / "bin" / name
        if not link.exists():
            link.symlink_to("busybox")
    for name in ("proc", "sys", "dev", "tmp", "run", "etc"):
        (tree / name).mkdir(exist_ok=True)


def make_locks(log: Path) -> list[Path]:
    """Resolve the cross layer and every guest tree against the current toolchain root and
    write their locks (the root is made first if this machine has none)."""
    root = toolchain.create_root(log)
    key = toolchain.root_key()
    written = []
    wanted = [(BUILD_LOCK, build_packages(), ())]
    wanted += [(guest_lock_path(a), guest_packages(a), (a.debian,)) for a in arches.cross()]
    for path, packages, foreign in wanted:
        versions = resolve(root, packages, log, foreign)
        lock = GuestLock(key, tuple(sorted(packages)), tuple(versions.items()))
        path.write_text(lock.render(LOCK_HEADER))
        written.append(path)
    return written


def ensure(stamp: CrossStamp) -> None:
    """The layer and guest trees a cross stamp names, made where this machine lacks them."""
    if Path(stamp.root).is_dir() and all(Path(t).is_dir() for t in stamp.guests.values()):
        return
    with nodecache.held() as log:
        made = make(toolchain.create_root(log), toolchain.root_key(), log)
    nodecache.same("the cross layer", f"{stamp.root} {sorted(stamp.guests.items())}",
                   f"{made.root} {sorted(made.guests.items())}",
                   "a cross lock changed since the stamp was written; run `make reproduce` "
                   "again")


def make(root: Path, key: str, log: Path) -> CrossStamp:
    """Make the cross layer and every guest tree of the committed locks; their stamp."""
    build_lock, guest_locks = locks(key)
    layer = create_layer(root, build_lock, log)
    guests = {name: str(guest_tree(root, arches.get(name), lock, log))
              for name, lock in guest_locks.items()}
    compilers = tuple(f"{a.triplet}-gcc-15" for a in arches.cross())
    return CrossStamp(root=str(layer), key=layer.name, suite=SUITE,
                      packages=dict(build_lock.packages),
                      tools=toolchain.tool_versions(layer, compilers), base=key,
                      guests=guests,
                      guest_packages={n: dict(g.packages) for n, g in guest_locks.items()})


def record(stamp: CrossStamp, exp: experiment.Experiment) -> dict[str, Any]:
    """What the manifest records of the cross layer: its key, packages and compilers, and
    for each architecture the run boots, its guest tree's packages and QEMU's version."""
    used = sorted({v.arch for v in exp.variants.values() if v.arch != arches.HOST})
    return {"key": stamp.key, "base": stamp.base, "packages": stamp.packages,
            "compilers": stamp.tools,
            "guests": {a: {"packages": stamp.guest_packages[a],
                           "qemu": vm.qemu_version(arches.get(a).qemu)} for a in used}}


def tree_of(path: str | Path) -> Path:
    """The tree a build-side stage runs its commands in, from the stamp its rule passes as
    ``--root``: the toolchain root's (a host variant) or the cross layer's (a cross variant),
    made on this machine where it lacks it."""
    if read_json(path).get("guests") is None:
        return nodecache.root_of(path)
    stamp = CrossStamp.read(path)
    ensure(stamp)
    return Path(stamp.root)


def cmd_cross(a: argparse.Namespace) -> None:
    """The cross stage: the layer cross builds run in and the guest tree of each cross
    architecture, made once per lock (:func:`make`)."""
    log = fresh_log(a)
    root = RootStamp.read(a.root)
    nodecache.root(root)
    with stage("cross", "layer and guests", log):
        stamp = make(Path(root.root), root.key, log)
    stamp.write(a.out)


def main(argv: list[str]) -> int:
    """``python -m lab.pipeline.crosslayer lock``: write the cross locks
    (``make cross-lock``)."""
    if argv != ["lock"]:
        print("usage: python -m lab.pipeline.crosslayer lock", file=sys.stderr)
        return 2
    log = cachedir.sub("logs") / "cross-lock.log"
    try:
        paths = make_locks(log)
    except StageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {', '.join(str(p) for p in paths)} (log: {log}); commit them",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
