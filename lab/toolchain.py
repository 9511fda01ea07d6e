"""The toolchain root: one Debian sid tree that is both the build environment and the guest.

Linux 7.2 wants a newer compiler and pahole than the host's Debian release ships, and the
seed authors built with gcc 15 and clang 21; sid has those, and perf/bpftool matching 7.2.
Rather than install sid packages into the host (which would break it), the pipeline

* derives the Debian mirror from the machine's own apt configuration (so no mirror host name
  is written into the repository, and a reader behind a local mirror uses that mirror),
* talks to sid through a *private* apt configuration (own sources list, state and cache
  directories under the cache dir; the system's apt sources are never touched),
* creates the root with ``mmdebstrap`` (``--mode=unshare`` when not root, so no root is needed
  where user namespaces are allowed) and runs commands in it with ``bwrap``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lab import cachedir
from lab.command import StageError, require_tools, run

SUITE = "sid"
PACKAGES: tuple[str, ...] = (
    # compilers of the seed authors, and the kernel's build dependencies
    "gcc-15", "g++-15", "clang-21", "lld-21", "llvm-21", "pahole", "ccache",
    "make", "bc", "bison", "flex", "libelf-dev", "libssl-dev", "cpio", "kmod", "python3",
    "perl", "rsync", "xz-utils", "zstd", "libc6-dev",
    # tools the guest workloads use
    "linux-perf", "bpftool", "stress-ng", "bpftrace", "liburing-dev", "procps",
)
"""Packages of the root; changing this list makes a new root (its key hashes the list)."""

KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")


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


def private_apt(mirror: str | None = None) -> PrivateApt:
    """Return the private sid apt configuration under the cache directory."""
    return PrivateApt(cachedir.sub("apt"), mirror or debian_mirror())


def root_key(packages: tuple[str, ...] = PACKAGES, suite: str = SUITE) -> str:
    """Name a root by its suite and package list, so a changed list makes a fresh root."""
    digest = hashlib.sha256("\n".join((suite, *sorted(packages))).encode()).hexdigest()
    return f"{suite}-{digest[:12]}"


def root_dir(key: str | None = None) -> Path:
    """Return where the root with ``key`` (default: the current package list) lives."""
    return cachedir.cache_root() / "roots" / (key or root_key())


def create_root(log: Path, mirror: str | None = None, packages: tuple[str, ...] = PACKAGES,
                suite: str = SUITE) -> Path:
    """Create the toolchain root (once) and record its package versions.

    mmdebstrap writes into a temporary directory that is renamed into place only on success,
    so an interrupted creation leaves nothing that looks finished. Needs root, or a host that
    allows unprivileged user namespaces (``--mode=unshare``, with subuids for the user).
    """
    target = root_dir(root_key(packages, suite))
    if (target / "etc" / "kernel-book-packages.json").is_file():
        return target
    require_tools(["mmdebstrap"])
    mirror = mirror or debian_mirror()
    tmp = target.with_name(target.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = "root" if os.geteuid() == 0 else "unshare"
    keyring = [f"--keyring={KEYRING}"] if KEYRING.is_file() else []
    run(["mmdebstrap", f"--mode={mode}", "--variant=minbase", *keyring,
         f"--include={','.join(packages)}",
         "--aptopt=Acquire::Languages \"none\"",
         # a frozen (snapshot) mirror serves a Release file past its Valid-Until date;
         # the signature is still checked, only the date is not
         "--aptopt=Acquire::Check-Valid-Until \"false\"",
         "--dpkgopt=path-exclude=/usr/share/{doc,man,locale}/*",
         # mount points for the build's bind mounts (the root is bound read-only)
         "--customize-hook=mkdir -p \"$1/src\" \"$1/build\" \"$1/ccache\" \"$1/kb\"",
         "--customize-hook=chroot \"$1\" dpkg-query -W -f='${Package}\\t${Version}\\n'"
         " > \"$1/etc/kernel-book-packages.tsv\"",
         suite, str(tmp), f"{mirror}"], log=log, what="mmdebstrap (toolchain root)")
    versions = dict(
        line.split("\t", 1)
        for line in (tmp / "etc" / "kernel-book-packages.tsv").read_text().splitlines()
        if "\t" in line
    )
    (tmp / "etc" / "kernel-book-packages.json").write_text(
        json.dumps({"suite": suite, "mirror_suite": suite, "packages": versions},
                   indent=1, sort_keys=True)
    )
    tmp.rename(target)
    return target


def root_packages(root: Path) -> dict[str, str]:
    """Return ``{package: version}`` of a finished root, for the run manifest."""
    path = root / "etc" / "kernel-book-packages.json"
    if not path.is_file():
        raise StageError(f"{root} is not a finished toolchain root (no {path.name}); "
                         "run `make reproduce` again to create it")
    return json.loads(path.read_text())["packages"]


def in_root(root: Path, argv: list[str], binds: dict[Path, str], *, cwd: str = "/",
            env: dict[str, str] | None = None) -> list[str]:
    """Return a ``bwrap`` command line that runs ``argv`` with ``root`` as ``/``.

    ``binds`` maps host directories to their path inside (source, build dir, ccache), bound
    read-write; the root itself is read-only so a build can never change the toolchain.
    """
    cmd = ["bwrap", "--ro-bind", str(root), "/", "--dev", "/dev", "--proc", "/proc",
           "--tmpfs", "/tmp", "--unshare-ipc", "--unshare-pid", "--unshare-uts",
           "--die-with-parent"]
    for host, inside in binds.items():
        cmd += ["--bind", str(host), inside]
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
