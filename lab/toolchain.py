"""The toolchain root: one Debian sid tree that is both the build environment and the guest.

Linux 7.2 wants a newer compiler and pahole than the host's Debian release ships, and the
seed authors built with gcc 15 and clang 21; sid has those, and perf/bpftool matching 7.2.
Rather than install sid packages into the host (which would break it), the pipeline

* derives the Debian mirror from the machine's own apt configuration (so no mirror host name
  is written into the repository, and a reader behind a local mirror uses that mirror),
* talks to sid through a *private* apt configuration (own sources list, state and cache
  directories under the cache dir; the system's apt sources are never touched),
* creates the root with ``mmdebstrap`` (``--mode=unshare`` when not root, so no root is needed
  where user namespaces are allowed) and runs commands in it with ``bwrap``,
* pins the root in time: ``configs/toolchain.lock.yaml`` names every package of the root at its
  exact version, the root is made from those versions only, and its directory name hashes the
  lock. sid moves daily, so a lock outlives the archive's versions; then the pipeline says
  which package is gone and how to refresh the lock, rather than build with something else.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lab import ROOT, cachedir
from lab.command import StageError, quote, require_tools, run

SUITE = "sid"
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
    # (lab/guestlayer.py), and wrk leaves this list at the next lock refresh, which makes a new
    # root (and new kernel builds) anyway
    "wrk",
)
"""Packages the root is asked for; the lock (``LOCK_FILE``) holds them and their dependencies
at exact versions, and must be refreshed (``make toolchain-lock``) when this list changes."""

LOCK_FILE = ROOT / "configs" / "toolchain.lock.yaml"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
SUBID_FILES = (Path("/etc/subuid"), Path("/etc/subgid"))


@dataclass(frozen=True)
class AptSource:
    """One ``deb`` line of the machine's apt configuration."""

    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]
    signed_by: str | None


def _parse_deb822(text: str) -> list[AptSource]:
    sources = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled") == "no":
            continue
        for uri in fields.get("uris", "").split():
            sources.append(AptSource(
                uri, tuple(fields.get("suites", "").split()),
                tuple(fields.get("components", "").split()), fields.get("signed-by"),
            ))
    return sources


def _parse_one_line(text: str) -> list[AptSource]:
    sources = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.match(r"^deb\s+(?:\[(?P<opts>[^\]]*)\]\s+)?(?P<uri>\S+)\s+(?P<suite>\S+)(?P<c>.*)$",
                     line)
        if not m:
            continue
        opts = dict(o.split("=", 1) for o in (m["opts"] or "").split() if "=" in o)
        sources.append(AptSource(m["uri"], (m["suite"],), tuple(m["c"].split()),
                                 opts.get("signed-by")))
    return sources


def host_sources(etc_apt: Path = Path("/etc/apt")) -> list[AptSource]:
    """Read every enabled ``deb`` source of the machine (deb822 and one-line style)."""
    found: list[AptSource] = []
    one_line = [etc_apt / "sources.list", *sorted((etc_apt / "sources.list.d").glob("*.list"))]
    for path in one_line:
        if path.is_file():
            found += _parse_one_line(path.read_text())
    for path in sorted((etc_apt / "sources.list.d").glob("*.sources")):
        found += _parse_deb822(path.read_text())
    return found


def host_codename(os_release: Path = Path("/etc/os-release")) -> str | None:
    """Return the host's Debian codename (``bookworm``), or None on a non-Debian host."""
    if not os_release.is_file():
        return None
    m = re.search(r"^VERSION_CODENAME=\"?([a-z]+)\"?$", os_release.read_text(), re.M)
    return m[1] if m else None


def debian_mirror(etc_apt: Path = Path("/etc/apt"),
                  os_release: Path = Path("/etc/os-release")) -> str:
    """Derive the Debian archive mirror from the machine's apt configuration.

    The main archive is the source that carries the host's own codename (``bookworm``, not
    ``bookworm-security``) with component ``main``. ``DEBIAN_MIRROR`` overrides it for hosts
    that are not Debian.
    """
    if os.environ.get("DEBIAN_MIRROR"):
        return os.environ["DEBIAN_MIRROR"].rstrip("/")
    codename = host_codename(os_release)
    sources = host_sources(etc_apt)
    for src in sources:
        if codename and codename in src.suites and "main" in src.components:
            return src.uri.rstrip("/")
    for src in sources:
        if any(s in ("sid", "unstable", "testing", "stable") for s in src.suites):
            return src.uri.rstrip("/")
    raise StageError(
        f"no Debian archive found in {etc_apt}/sources.list or {etc_apt}/sources.list.d/*.sources"
        f" (looked for suite {codename!r}, component main); set DEBIAN_MIRROR=<archive URI>"
    )


@dataclass(frozen=True)
class PrivateApt:
    """An apt configuration of our own, so sid is reachable without touching the host's."""

    base: Path
    mirror: str
    suite: str = SUITE

    @property
    def options(self) -> list[str]:
        """``-o`` options that point apt at this configuration's files only."""
        b = self.base
        return [
            "-o", f"Dir::Etc::SourceList={b / 'sources.list'}",
            "-o", f"Dir::Etc::SourceParts={b / 'sources.list.d'}",
            "-o", f"Dir::Etc::Preferences={b / 'preferences'}",
            "-o", f"Dir::Etc::PreferencesParts={b / 'preferences.d'}",
            "-o", f"Dir::State={b / 'state'}",
            "-o", f"Dir::State::status={b / 'state' / 'status'}",
            "-o", f"Dir::Cache={b / 'cache'}",
            "-o", "APT::Sandbox::User=root" if os.geteuid() == 0 else "Debug::NoDropPrivs=true",
            "-o", "Acquire::Languages=none",
            # see create_root: a snapshot mirror's Release is past Valid-Until, still signed
            "-o", "Acquire::Check-Valid-Until=false",
        ]

    def write(self) -> None:
        """Create the private directories and a sources list naming sid (deb and deb-src)."""
        for d in ("sources.list.d", "preferences.d", "state/lists/partial",
                  "cache/archives/partial"):
            (self.base / d).mkdir(parents=True, exist_ok=True)
        (self.base / "state" / "status").touch()
        signed = f"[signed-by={KEYRING}] " if KEYRING.is_file() else ""
        (self.base / "sources.list").write_text(
            f"deb {signed}{self.mirror} {self.suite} main\n"
            f"deb-src {signed}{self.mirror} {self.suite} main\n"
        )

    def apt_get(self, *args: str, log: Path | None = None, cwd: Path | None = None) -> None:
        """Run ``apt-get`` with this configuration."""
        run(["apt-get", *self.options, *args], log=log, cwd=cwd, what=f"apt-get {args[0]}")

    def update(self, log: Path | None = None) -> None:
        """Refresh this configuration's package lists (never the system's)."""
        self.write()
        self.apt_get("update", log=log)


def private_apt(mirror: str | None = None, name: str = "apt") -> PrivateApt:
    """Return a private sid apt configuration under the cache directory.

    Stages that may run at the same time (root and source) use their own ``name``: apt locks
    its lists directory, and a second ``apt-get update`` on it fails rather than waits.
    """
    return PrivateApt(cachedir.sub(name), mirror or debian_mirror())


LOCK_HEADER = """\
# The toolchain root, package by package (lab/toolchain.py). The root is re-created from exactly
# these versions (apt pins them), and the pipeline stops before it starts when the archive no
# longer serves one of them. `make toolchain-lock` refreshes this file from what the archive
# serves today: that is a new root with new compilers, so re-measure what you compare.
# `requested` is the package list of lab/toolchain.py the lock was made from.
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
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
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


def archive_versions(apt: PrivateApt, packages: list[str]) -> dict[str, set[str]]:
    """``{package: versions}`` the archive serves for the host's architecture (binary only)."""
    proc = run(["apt-cache", *apt.options, "madison", *packages], what="apt-cache madison")
    served: dict[str, set[str]] = {p: set() for p in packages}
    for line in proc.stdout.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) == 3 and fields[2].endswith("Packages") and fields[0] in served:
            served[fields[0]].add(fields[1])
    return served


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
            f"{path} was made from another package list than lab/toolchain.py PACKAGES "
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


def tool_versions(root: Path) -> dict[str, str]:
    """First line of ``--version`` of each compiler in the root, for the manifest."""
    out = {}
    for tool in ("gcc-15", "clang-21", "ld.lld-21", "pahole"):
        try:
            proc = subprocess.run(in_root(root, [tool, "--version"], {}), capture_output=True,
                                  text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0 and proc.stdout:
            out[tool] = proc.stdout.splitlines()[0].strip()
    return out


def main(argv: list[str]) -> int:
    """``python -m lab.toolchain lock``: refresh the lock file (``make toolchain-lock``)."""
    if argv != ["lock"]:
        print("usage: python -m lab.toolchain lock", file=sys.stderr)
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
