"""apt of our own: the Debian archive reached through a private configuration.

The mirror is derived from the machine's own apt configuration (so no mirror host name is
written into the repository, and a reader behind a local mirror uses that mirror); sid is
reached through a *private* apt configuration (own sources list, state and cache directories
under the cache dir), so the system's apt sources are never touched. The toolchain root
(:mod:`lab.pipeline.toolchain`), the source stage and guest layers all fetch through it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lab.command import StageError, run
from lab.pipeline import cachedir

SUITE = "sid"


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

    def update(self, log: Path | None = None, extra: Sequence[str] = ()) -> None:
        """Refresh this configuration's package lists (never the system's); ``extra``: apt
        options of the refresh (another architecture's lists)."""
        self.write()
        run(["apt-get", *self.options, *extra, "update"], log=log, what="apt-get update")


def private_apt(mirror: str | None = None, name: str = "apt") -> PrivateApt:
    """Return a private sid apt configuration under the cache directory.

    Stages that may run at the same time (root and source) use their own ``name``: apt locks
    its lists directory, and a second ``apt-get update`` on it fails rather than waits.
    """
    return PrivateApt(cachedir.sub(name), mirror or debian_mirror())


def archive_versions(apt: PrivateApt, packages: list[str],
                     options: list[str] | None = None) -> dict[str, set[str]]:
    """``{package: versions}`` the archive serves (binary only) for the host's architecture,
    or for the one a name qualifies (``busybox-static:arm64``, with ``options`` that add
    that architecture to apt's)."""
    proc = run(["apt-cache", *(options or apt.options), "madison", *packages],
               what="apt-cache madison")
    served: dict[str, set[str]] = {p: set() for p in packages}
    for line in proc.stdout.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) != 3 or not fields[2].endswith("Packages"):
            continue
        arch = fields[2].split()[-2]  # "<mirror> sid/main arm64 Packages"
        for name in (fields[0], f"{fields[0]}:{arch}"):
            if name in served:
                served[name].add(fields[1])
    return served
