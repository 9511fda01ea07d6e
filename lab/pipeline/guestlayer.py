"""A chapter's guest packages: Debian packages its workloads run and no build needs.

They do not go into the toolchain root. The root's key is the digest of its package lock, and
every kernel build of every chapter is keyed by it, so one added interpreter would rebuild the
whole book. Instead a chapter lists them (``guest_packages:`` in ``chapter.yaml``) and pins them
against the root in its own lock (``chapters/<ch>/guest.lock.yaml``, written by
``make guest-lock CHAPTER=<ch>``): the packages apt would add to that root, at exact versions.

The layer stage then makes the guest's root: a copy of the toolchain root made of hard links
(inodes only; about 0.3 s for its 20,000 files) with the locked packages' files unpacked over
it. ``tar`` replaces an existing file by unlinking it first, so a hard-linked file of the
toolchain root is never written through. Maintainer scripts do not run (nothing is configured:
no ``update-alternatives`` links, no ``ldconfig``); a workload calls a program by the name its
package installs, and the loader finds new libraries in the default directories. Kernels and
guest programs keep building in the toolchain root; only the boots see the layer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lab import chapters, in_repo
from lab.command import StageError, quote, require_tools, run
from lab.pipeline import cachedir, nodecache, toolchain
from lab.pipeline.apt import PrivateApt, archive_versions, private_apt
from lab.pipeline.lock import read_lock_file
from lab.pipeline.stamps import LayerStamp, RootStamp, fresh_log, load_experiment, stage

LOCK_NAME = "guest.lock.yaml"
RECORD = Path("etc") / "kernel-book-guest-layer.json"
"""The layer's record inside its tree: written last, so a tree without it is unfinished."""

LOCK_HEADER = """\
# This chapter's guest packages (guest_packages: in chapter.yaml) at exact versions: what apt
# adds to the toolchain root named below, dependencies included (lab/pipeline/guestlayer.py). Boots
# of
# this chapter see them; builds do not. `make guest-lock CHAPTER=<chapter>` writes it anew from
# what the archive serves today, and must be run again when the toolchain lock changes.
"""

# apt-get --simulate: "Inst pkg (ver ...)" for a new package, "Inst pkg [old] (ver ...)" for an
# upgrade, "Remv pkg [old]" for a removal
_INST = re.compile(r"^Inst (\S+) (?:\[(\S+)\] )?\((\S+) ")
_REMV = re.compile(r"^Remv (\S+)")


@dataclass(frozen=True)
class GuestLock:
    """What ``guest.lock.yaml`` pins: the root it was resolved against and the packages."""

    root: str
    requested: tuple[str, ...]
    packages: tuple[tuple[str, str], ...]

    def digest(self) -> str:
        """sha256 of the root key and the pinned packages: the layer's directory name."""
        lines = [f"root {self.root}", *(f"{p}={v}" for p, v in self.packages)]
        return hashlib.sha256("\n".join(lines).encode()).hexdigest()

    def render(self, header: str = LOCK_HEADER) -> str:
        """The lock file's text (versions quoted: ``2:8.4`` is a number to YAML 1.1)."""
        out = [header.rstrip("\n"), f"root: {self.root}", "requested:",
               *(f"  - {p}" for p in self.requested), "packages:",
               *(f'  {p}: "{v}"' for p, v in self.packages)]
        return "\n".join(out) + "\n"


def lock_path(ch: chapters.Chapter) -> Path:
    """Where a chapter's guest lock lives."""
    return ch.dir / LOCK_NAME


def requested(ch: chapters.Chapter) -> tuple[str, ...]:
    """The chapter's ``guest_packages``, sorted (empty: the guest's root is the toolchain's)."""
    return tuple(sorted(ch.meta.get("guest_packages") or ()))


def load_lock(ch: chapters.Chapter, root_key: str) -> GuestLock:
    """Read a chapter's guest lock and check it against ``chapter.yaml`` and the toolchain
    root; every problem names the file and the command that fixes it."""
    path = lock_path(ch)
    fix = f"run `make guest-lock CHAPTER={ch.name}` and commit {LOCK_NAME}"
    data = read_lock_file(
        path, (("root", str), ("requested", list), ("packages", dict)), fix,
        missing=f": {ch.file} lists guest_packages")
    lock = GuestLock(data["root"], tuple(sorted(data["requested"])),
                     tuple(sorted(data["packages"].items())))
    if lock.requested != requested(ch):
        raise StageError(f"{path} was made for guest_packages {list(lock.requested)}, "
                         f"{ch.file} lists {list(requested(ch))}; {fix}")
    if lock.root != root_key:
        raise StageError(f"{path} was resolved against toolchain root {lock.root}, the "
                         f"toolchain lock makes {root_key} (configs/toolchain.lock.yaml "
                         f"changed); {fix}")
    return lock


def parse_simulation(text: str, source: str) -> dict[str, str]:
    """``{package: version}`` that ``apt-get install --simulate`` would add; a package it
    would upgrade or remove is refused, because the layer would then change what the
    toolchain root's own programs run on."""
    added: dict[str, str] = {}
    changed: list[str] = []
    for line in text.splitlines():
        if m := _INST.match(line):
            name, old, new = m.groups()
            if old:
                changed.append(f"upgrade {name} {old} -> {new}")
            else:
                added[name] = new
        elif m := _REMV.match(line):
            changed.append(f"remove {m[1]}")
    if changed:
        raise StageError(f"{source}: the guest packages would change the toolchain root's own "
                         f"packages ({'; '.join(changed)}); pick packages that only add "
                         "files, or refresh the toolchain lock (`make toolchain-lock`)")
    return dict(sorted(added.items()))


def _root_apt(root: Path, name: str) -> tuple[PrivateApt, list[str]]:
    """A private apt configuration whose dpkg status is the root's: apt then plans against
    what the root holds, not against an empty system."""
    apt = private_apt(None, name)
    status = f"Dir::State::status={apt.base / 'state' / 'status'}"
    options = [f"Dir::State::status={root / 'var' / 'lib' / 'dpkg' / 'status'}"
               if o == status else o for o in apt.options]
    return apt, options


def architectures(foreign: tuple[str, ...]) -> list[str]:
    """apt options that add ``foreign`` Debian architectures to the host's, so a package of
    another architecture (``busybox-static:arm64``) resolves and downloads."""
    if not foreign:
        return []
    return [x for a in ("amd64", *foreign) for x in ("-o", f"APT::Architectures::={a}")]


def _refreshed_apt(root: Path, log: Path, foreign: tuple[str, ...]
                   ) -> tuple[PrivateApt, list[str]]:
    """The layers' private apt with its lists refreshed for the host's and ``foreign``
    architectures, and the apt options every later call needs to see those lists."""
    apt, options = _root_apt(root, "apt-layer")
    extra = architectures(foreign)
    apt.update(log=log, extra=extra)
    return apt, [*options, *extra]


def resolve(root: Path, packages: tuple[str, ...], log: Path,
            foreign: tuple[str, ...] = ()) -> dict[str, str]:
    """What apt would add to ``root`` for ``packages`` today (no recommends, as the root);
    ``foreign``: Debian architectures besides the host's that ``packages`` name."""
    _, options = _refreshed_apt(root, log, foreign)
    argv = ["apt-get", *options, "install", "--simulate", "--no-install-recommends",
            *packages]
    proc = run(argv, what="apt-get install --simulate")
    with log.open("a") as fh:
        fh.write(f"$ {quote(argv)}\n{proc.stdout}")
    return parse_simulation(proc.stdout, quote(argv))


def make_lock(ch: chapters.Chapter, log: Path) -> Path:
    """Resolve the chapter's guest packages against the current toolchain root and write its
    lock (the root is made first if this machine has none)."""
    if not requested(ch):
        raise StageError(f"{ch.file} lists no guest_packages; there is nothing to lock")
    root = toolchain.create_root(log)
    versions = resolve(root, requested(ch), log)
    lock = GuestLock(toolchain.root_key(), requested(ch), tuple(versions.items()))
    lock_path(ch).write_text(lock.render())
    return lock_path(ch)


def layer_dir(lock: GuestLock) -> Path:
    """Where the layer a lock describes lives (a new lock, a new directory)."""
    return cachedir.cache_root() / "layers" / f"{lock.root}-{lock.digest()[:12]}"


def _download(root: Path, lock: GuestLock, into: Path, log: Path,
              foreign: tuple[str, ...] = ()) -> list[Path]:
    """Fetch exactly the locked versions; a version the archive no longer serves fails
    before anything is unpacked, naming the lock."""
    apt, options = _refreshed_apt(root, log, foreign)
    served = archive_versions(apt, [p for p, _ in lock.packages], options)
    gone = [f"{p} {v} (serves {', '.join(sorted(served.get(p, ()))) or 'none'})"
            for p, v in lock.packages if v not in served.get(p, ())]
    if gone:
        raise StageError(f"the archive no longer serves these guest-lock versions: "
                         f"{'; '.join(gone)}; run `make guest-lock CHAPTER=<chapter>` (it "
                         "resolves what is served now) and re-measure what you compare")
    into.mkdir(parents=True)
    run(["apt-get", *options, "download", *(f"{p}={v}" for p, v in lock.packages)],
        log=log, cwd=into, what="apt-get download")
    debs = sorted(into.glob("*.deb"))
    if len(debs) != len(lock.packages):
        raise StageError(f"apt-get download left {len(debs)} packages in {into}, the lock "
                         f"pins {len(lock.packages)}; see {log}")
    return debs


def _unpack(deb: Path, tree: Path, log: Path) -> None:
    """Unpack one package's files over the tree: directory symlinks of the merged /usr are
    kept, documentation is left out as in the toolchain root."""
    untar = ["tar", "-x", "-C", str(tree), "--keep-directory-symlink", "--no-same-owner",
             "--exclude=./usr/share/doc/*", "--exclude=./usr/share/man/*",
             "--exclude=./usr/share/locale/*"]
    with log.open("a") as fh:
        fh.write(f"$ dpkg-deb --fsys-tarfile {deb} | {quote(untar)}\n")
        fh.flush()
        producer = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)],
                                    stdout=subprocess.PIPE, stderr=fh)
        consumer = subprocess.Popen(untar, stdin=producer.stdout, stderr=fh)
        assert producer.stdout is not None
        producer.stdout.close()
        rc_tar, rc_deb = consumer.wait(), producer.wait()
    if rc_deb or rc_tar:
        raise StageError(f"unpacking {deb.name} failed (dpkg-deb exit {rc_deb}, tar exit "
                         f"{rc_tar}); see {log}")


def create_layer(root: Path, lock: GuestLock, log: Path, foreign: tuple[str, ...] = (),
                 empty: bool = False, finish: Callable[[Path], None] | None = None) -> Path:
    """Make (once) the guest root a lock describes: the toolchain root as hard links (or,
    with ``empty``, nothing: a foreign architecture's guest, which can run none of the root's
    programs), the locked packages unpacked over it, ``finish`` run on the tree, and the
    record written last. Built aside and renamed into place, so an interrupted attempt never
    looks finished."""
    target = layer_dir(lock)
    if (target / RECORD).is_file():
        return target
    require_tools(["apt-get", "apt-cache", "dpkg-deb", "tar", "cp"])
    tmp = target.with_name(target.name + ".tmp")
    debs = target.with_name(target.name + ".debs")
    for scratch in (tmp, debs):
        if scratch.exists():
            shutil.rmtree(scratch)
    target.parent.mkdir(parents=True, exist_ok=True)
    files = _download(root, lock, debs, log, foreign)
    if empty:
        tmp.mkdir()
    else:
        run(["cp", "-al", str(root), str(tmp)], log=log, what="cp -al (the layer's base)")
    for deb in files:
        _unpack(deb, tmp, log)
    if finish is not None:
        finish(tmp)
    (tmp / RECORD).parent.mkdir(exist_ok=True)
    (tmp / RECORD).write_text(json.dumps(
        {"root": lock.root, "packages": dict(lock.packages)}, indent=1, sort_keys=True))
    shutil.rmtree(debs)
    tmp.rename(target)
    return target


def main(argv: list[str]) -> int:
    """``python -m lab.pipeline.guestlayer lock <chapter>``: write a chapter's guest lock
    (``make guest-lock CHAPTER=<chapter>``)."""
    if len(argv) != 2 or argv[0] != "lock":
        print("usage: python -m lab.pipeline.guestlayer lock <chapter>", file=sys.stderr)
        return 2
    log = cachedir.sub("logs") / f"guest-lock-{argv[1]}.log"
    try:
        ch = chapters.get(argv[1])
        path = make_lock(ch, log)
    except StageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {path} (log: {log}); commit it", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def ensure_layer(stamp: LayerStamp, ch: chapters.Chapter) -> None:
    """The guests' root a layer stamp names (the toolchain root, or its layer of the chapter's
    guest packages), made where this machine lacks it (:mod:`lab.pipeline.nodecache`)."""
    if Path(stamp.root).is_dir():
        return
    with nodecache.held() as log:
        made = toolchain.create_root(log)
        if stamp.packages:
            made = create_layer(made, load_lock(ch, made.name), log)
    nodecache.same("the guests' root", stamp.root, str(made),
                   "the guest lock changed since the stamp was written; run `make reproduce` "
                   "again")


def cmd_layer(a: argparse.Namespace) -> None:
    """The guest's root for a chapter's boots: the toolchain root itself, or, when the chapter
    lists ``guest_packages``, the layer its guest lock describes (made once,
    :mod:`lab.pipeline.guestlayer`)."""
    exp = load_experiment(a)
    log = fresh_log(a)
    root = RootStamp.read(a.root)
    nodecache.root(root)
    with stage("layer", exp.name, log):
        if not requested(exp.chapter):
            stamp = LayerStamp(root=root.root, key=root.key, packages={})
        else:
            lock = load_lock(exp.chapter, root.key)
            tree = create_layer(Path(root.root), lock, log)
            stamp = LayerStamp(root=str(tree), key=tree.name, packages=dict(lock.packages),
                               lock=in_repo(lock_path(exp.chapter)))
    stamp.write(a.out)
