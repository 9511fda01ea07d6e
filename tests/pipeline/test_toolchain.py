"""Mirror derivation, the private apt configuration and the root's command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.command import StageError
from lab.pipeline import toolchain
from lab.pipeline.apt import PrivateApt, debian_mirror, host_sources
from lab.pipeline.lock import (
    PACKAGES,
    Lock,
    check_archive,
    check_requested,
    load_lock,
    pin_preferences,
)

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
    assert debian_mirror(etc, _os_release(tmp_path)) == "http://mirror.example/debian"


def test_security_archive_is_never_taken(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("DEBIAN_MIRROR", raising=False)
    only_security = DEB822.split("\n\n")[1]
    with pytest.raises(StageError, match="no Debian archive found"):
        debian_mirror(_etc(tmp_path, only_security), _os_release(tmp_path))


def test_one_line_sources_with_options(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("DEBIAN_MIRROR", raising=False)
    etc = _etc(tmp_path, "", "# old style\ndeb [arch=amd64 signed-by=/k.gpg] "
                             "http://local.example/deb/ bookworm main contrib\n")
    (src,) = host_sources(etc)
    assert src.signed_by == "/k.gpg" and src.components == ("main", "contrib")
    assert debian_mirror(etc, _os_release(tmp_path)) == "http://local.example/deb"


def test_disabled_and_source_only_stanzas_are_skipped(tmp_path) -> None:
    text = DEB822.replace("Types: deb\n# a", "Types: deb-src\n# a", 1)
    text += "\nTypes: deb\nEnabled: no\nURIs: http://off.example/\nSuites: x\nComponents: main\n"
    uris = [s.uri for s in host_sources(_etc(tmp_path, text))]
    assert uris == ["http://mirror.example/debian-security"]


def test_environment_overrides_the_mirror(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEBIAN_MIRROR", "http://other.example/debian/")
    assert debian_mirror(_etc(tmp_path), _os_release(tmp_path)) == \
        "http://other.example/debian"


def test_private_apt_touches_only_its_own_directory(tmp_path) -> None:
    apt = PrivateApt(tmp_path / "apt", "http://mirror.example/debian")
    apt.write()
    text = (tmp_path / "apt" / "sources.list").read_text()
    assert "deb " in text and "deb-src " in text
    assert "http://mirror.example/debian sid main" in text
    paths = [o.split("=", 1)[1] for o in apt.options if o.startswith("Dir::")]
    assert paths and all(p.startswith(str(tmp_path)) for p in paths)
    assert "Acquire::Check-Valid-Until=false" in apt.options


def _lock(**packages: str) -> Lock:
    return Lock("sid", "amd64", ("gcc-15",), tuple(sorted(packages.items())))


def test_root_key_hashes_the_lock() -> None:
    a = _lock(**{"gcc-15": "15.3.0-5", "libc6": "2.42-1"})
    assert toolchain.root_key(a) == toolchain.root_key(_lock(**dict(a.packages)))
    assert toolchain.root_key(a) != toolchain.root_key(_lock(**{**dict(a.packages),
                                                                "libc6": "2.42-2"}))
    assert toolchain.root_key(a).startswith("sid-")


def test_committed_lock_holds_every_requested_package() -> None:
    lock = load_lock()
    versions = dict(lock.packages)
    check_requested(lock)
    assert set(PACKAGES) <= set(versions)
    assert versions["gcc-15"].startswith("15.") and "dpkg" in versions


def test_lock_round_trips_and_quotes_epochs(tmp_path) -> None:
    lock = _lock(**{"gcc-15": "15.3.0-5", "bison": "2:3.8.2+dfsg-1+b3"})
    path = tmp_path / "toolchain.lock.yaml"
    path.write_text(lock.render())
    assert load_lock(path) == lock
    path.write_text(lock.render().replace('"2:3.8.2+dfsg-1+b3"', "2:30"))
    with pytest.raises(StageError, match=r"versions of bison are not quoted.*toolchain-lock"):
        load_lock(path)


def test_missing_lock_names_the_fix(tmp_path) -> None:
    with pytest.raises(StageError, match=r"missing; run `make toolchain-lock`"):
        load_lock(tmp_path / "none.yaml")


def test_version_gone_from_the_archive_is_named_with_the_fix() -> None:
    lock = _lock(**{"gcc-15": "15.3.0-5", "libc6": "2.42-1", "gone": "1.0"})
    served = {"gcc-15": {"15.3.0-6"}, "libc6": {"2.42-1"}}
    with pytest.raises(StageError) as err:
        check_archive(lock, served)
    msg = str(err.value)
    assert "no longer serves 2 locked" in msg and "toolchain.lock.yaml" in msg
    assert "gcc-15 15.3.0-5: the archive serves 15.3.0-6" in msg
    assert "gone 1.0: the archive serves no version of it" in msg
    assert "libc6" not in msg and "make toolchain-lock" in msg
    check_archive(lock, {**served, "gcc-15": {"15.3.0-5"}, "gone": {"1.0"}})


def test_changed_package_list_asks_for_a_new_lock() -> None:
    with pytest.raises(StageError, match=r"added: clang-21; dropped: none.*toolchain-lock"):
        check_requested(_lock(), ("gcc-15", "clang-21"))


def test_pins_make_every_locked_version_the_candidate() -> None:
    prefs = pin_preferences(_lock(**{"gcc-15": "15.3.0-5", "bison": "2:3.8.2-1"}))
    stanzas = prefs.strip().split("\n\n")
    assert stanzas[0] == "Package: bison\nPin: version 2:3.8.2-1\nPin-Priority: 1001"
    assert len(stanzas) == 2


def test_missing_subordinate_ids_name_the_usermod_fix(tmp_path) -> None:
    subuid = tmp_path / "subuid"
    subuid.write_text("someone:100000:65536\n")
    with pytest.raises(StageError, match=r"no subordinate ids.*usermod --add-subuids"):
        toolchain.check_subordinate_ids("reader", (subuid,))
    subuid.write_text("reader:165536:65536\n")
    toolchain.check_subordinate_ids("reader", (subuid,))


def test_packages_cover_the_issue_list() -> None:
    for pkg in ("gcc-15", "clang-21", "lld-21", "llvm-21", "pahole", "linux-perf", "bpftool",
                "stress-ng", "bpftrace", "liburing-dev"):
        assert pkg in PACKAGES


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
