"""Mirror derivation, the private apt configuration and the root's command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import toolchain
from lab.command import StageError

DEB822 = """Types: deb
# a comment line
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""


def _etc(tmp_path: Path, deb822: str = DEB822, one_line: str = "") -> Path:
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list.d" / "debian.sources").write_text(deb822)
    (etc / "sources.list").write_text(one_line)
    return etc


def _os_release(tmp_path: Path, codename: str = "bookworm") -> Path:
    path = tmp_path / "os-release"
    path.write_text(f'PRETTY_NAME="Debian"\nVERSION_CODENAME={codename}\n')
    return path


def test_mirror_is_the_archive_of_the_host_codename(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("DEBIAN_MIRROR", raising=False)
    etc = _etc(tmp_path, DEB822.replace("bookworm bookworm-updates", "bookworm-updates bookworm"))
    assert toolchain.debian_mirror(etc, _os_release(tmp_path)) == "http://mirror.example/debian"


def test_security_archive_is_never_taken(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("DEBIAN_MIRROR", raising=False)
    only_security = DEB822.split("\n\n")[1]
    with pytest.raises(StageError, match="no Debian archive found"):
        toolchain.debian_mirror(_etc(tmp_path, only_security), _os_release(tmp_path))


def test_one_line_sources_with_options(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("DEBIAN_MIRROR", raising=False)
    etc = _etc(tmp_path, "", "# old style\ndeb [arch=amd64 signed-by=/k.gpg] "
                             "http://local.example/deb/ bookworm main contrib\n")
    (src,) = toolchain.host_sources(etc)
    assert src.signed_by == "/k.gpg" and src.components == ("main", "contrib")
    assert toolchain.debian_mirror(etc, _os_release(tmp_path)) == "http://local.example/deb"


def test_disabled_and_source_only_stanzas_are_skipped(tmp_path) -> None:
    text = DEB822.replace("Types: deb\n# a", "Types: deb-src\n# a", 1)
    text += "\nTypes: deb\nEnabled: no\nURIs: http://off.example/\nSuites: x\nComponents: main\n"
    uris = [s.uri for s in toolchain.host_sources(_etc(tmp_path, text))]
    assert uris == ["http://mirror.example/debian-security"]


def test_environment_overrides_the_mirror(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEBIAN_MIRROR", "http://other.example/debian/")
    assert toolchain.debian_mirror(_etc(tmp_path), _os_release(tmp_path)) == \
        "http://other.example/debian"


def test_private_apt_touches_only_its_own_directory(tmp_path) -> None:
    apt = toolchain.PrivateApt(tmp_path / "apt", "http://mirror.example/debian")
    apt.write()
    text = (tmp_path / "apt" / "sources.list").read_text()
    assert "deb " in text and "deb-src " in text
    assert "http://mirror.example/debian sid main" in text
    paths = [o.split("=", 1)[1] for o in apt.options if o.startswith("Dir::")]
    assert paths and all(p.startswith(str(tmp_path)) for p in paths)
    assert "Acquire::Check-Valid-Until=false" in apt.options


def test_root_key_follows_the_package_list() -> None:
    assert toolchain.root_key() == toolchain.root_key()
    assert toolchain.root_key(("gcc-15",)) != toolchain.root_key(("gcc-15", "clang-21"))
    assert toolchain.root_key().startswith("sid-")


def test_packages_cover_the_issue_list() -> None:
    for pkg in ("gcc-15", "clang-21", "lld-21", "llvm-21", "pahole", "linux-perf", "bpftool",
                "stress-ng", "bpftrace", "liburing-dev"):
        assert pkg in toolchain.PACKAGES


def test_in_root_binds_read_only_root_and_clears_environment(tmp_path) -> None:
    argv = toolchain.in_root(tmp_path / "root", ["make", "-j2"], {tmp_path / "src": "/src"},
                             cwd="/src", env={"X": "1"})
    assert argv[:4] == ["bwrap", "--ro-bind", str(tmp_path / "root"), "/"]
    assert ["--bind", str(tmp_path / "src"), "/src"] == argv[argv.index("--bind"):][:3]
    assert "--clearenv" in argv and argv[-2:] == ["make", "-j2"]
    assert argv[argv.index("X") - 1] == "--setenv"


def test_unfinished_root_is_refused(tmp_path) -> None:
    with pytest.raises(StageError, match="not a finished toolchain root"):
        toolchain.root_packages(tmp_path)
