"""lab.pipeline.guestlayer: a chapter's guest packages, locked against the toolchain root and
unpacked
into a layer only its boots see (the smoke chapter's end-to-end test boots one: test_smoke)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lab import chapters
from lab.command import StageError
from lab.pipeline import guestlayer

# apt-get install --simulate --no-install-recommends php-cgi against the toolchain root's
# dpkg status (sid, 2026-11-27), shortened
SIMULATION = """\
Reading package lists...
The following NEW packages will be installed:
  libargon2-1 php-cgi php8.4-cgi
0 upgraded, 3 newly installed, 0 to remove and 0 not upgraded.
Inst libargon2-1 (0~20190702+dfsg-6 Debian:unstable [amd64])
Inst php8.4-cgi (8.4.27-1 Debian:unstable [amd64])
Inst php-cgi (2:8.4+101 Debian:unstable [all])
Conf libargon2-1 (0~20190702+dfsg-6 Debian:unstable [amd64])
Conf php8.4-cgi (8.4.27-1 Debian:unstable [amd64])
Conf php-cgi (2:8.4+101 Debian:unstable [all])
"""


def test_the_simulation_gives_what_apt_would_add_at_exact_versions() -> None:
    assert guestlayer.parse_simulation(SIMULATION, "sim") == {
        "libargon2-1": "0~20190702+dfsg-6", "php-cgi": "2:8.4+101", "php8.4-cgi": "8.4.27-1"}


@pytest.mark.parametrize("line, named", [
    ("Inst libc6 [2.43-6] (2.43-7 Debian:unstable [amd64])", "upgrade libc6 2.43-6 -> 2.43-7"),
    ("Remv libfoo1 [1.0-1]", "remove libfoo1"),
])
def test_a_package_that_would_change_the_root_is_refused(line: str, named: str) -> None:
    with pytest.raises(StageError, match=f"sim: .*{named}.*toolchain-lock"):
        guestlayer.parse_simulation(SIMULATION + line + "\n", "sim")


def _chapter(tmp_path: Path, packages: list[str]) -> chapters.Chapter:
    return chapters.Chapter("demo", tmp_path, {"title": "demo", "guest_packages": packages})


def _write_lock(tmp_path: Path, root: str, requested: list[str], version: str) -> None:
    (tmp_path / guestlayer.LOCK_NAME).write_text(guestlayer.GuestLock(
        root, tuple(requested), (("hello", version),)).render())


def test_a_lock_round_trips_and_names_its_layer_by_root_and_versions(tmp_path: Path) -> None:
    ch = _chapter(tmp_path, ["hello"])
    _write_lock(tmp_path, "sid-aaaaaaaaaaaa", ["hello"], "2.12.3-1")
    lock = guestlayer.load_lock(ch, "sid-aaaaaaaaaaaa")
    assert lock.packages == (("hello", "2.12.3-1"),)
    first = guestlayer.layer_dir(lock).name
    _write_lock(tmp_path, "sid-aaaaaaaaaaaa", ["hello"], "2.12.3-2")
    assert first.startswith("sid-aaaaaaaaaaaa-")
    assert guestlayer.layer_dir(guestlayer.load_lock(ch, "sid-aaaaaaaaaaaa")).name != first


def test_a_missing_or_stale_lock_names_the_file_and_the_command(tmp_path: Path) -> None:
    ch = _chapter(tmp_path, ["hello"])
    fix = r"make guest-lock CHAPTER=demo"
    with pytest.raises(StageError, match=f"guest.lock.yaml is missing.*{fix}"):
        guestlayer.load_lock(ch, "sid-aaaaaaaaaaaa")
    _write_lock(tmp_path, "sid-aaaaaaaaaaaa", ["hello"], "2.12.3-1")
    with pytest.raises(StageError, match=f"resolved against toolchain root sid-aaaaaaaaaaaa, "
                                         f"the toolchain lock makes sid-bbbbbbbbbbbb.*{fix}"):
        guestlayer.load_lock(ch, "sid-bbbbbbbbbbbb")
    with pytest.raises(StageError, match=rf"made for guest_packages \['hello'\], .* lists "
                                         rf"\['hello', 'php-cgi'\].*{fix}"):
        guestlayer.load_lock(_chapter(tmp_path, ["hello", "php-cgi"]), "sid-aaaaaaaaaaaa")
    (tmp_path / guestlayer.LOCK_NAME).write_text(
        "root: sid-aaaaaaaaaaaa\nrequested: [hello]\npackages: {hello: 2.12}\n")
    with pytest.raises(StageError, match=f"versions of hello are not quoted.*{fix}"):
        guestlayer.load_lock(ch, "sid-aaaaaaaaaaaa")


def test_unpacking_over_hard_links_never_writes_through_to_the_root(tmp_path: Path) -> None:
    # a root with a file the package also ships, and a merged-/usr symlink
    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "tool").write_text("the root's tool\n")
    (root / "bin").symlink_to("usr/bin")
    pkg = tmp_path / "pkg"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN" / "control").write_text(
        "Package: demo\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t>\n"
        "Description: d\n")
    (pkg / "usr" / "bin").mkdir(parents=True)
    (pkg / "usr" / "bin" / "tool").write_text("the package's tool\n")
    (pkg / "bin").mkdir()
    (pkg / "bin" / "extra").write_text("through the symlink\n")
    deb = tmp_path / "demo.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(pkg), str(deb)],
                   check=True, capture_output=True)
    layer = tmp_path / "layer"
    subprocess.run(["cp", "-al", str(root), str(layer)], check=True)
    guestlayer._unpack(deb, layer, tmp_path / "log")
    assert (layer / "usr" / "bin" / "tool").read_text() == "the package's tool\n"
    assert (root / "usr" / "bin" / "tool").read_text() == "the root's tool\n"
    assert (layer / "bin").is_symlink() and (layer / "usr" / "bin" / "extra").is_file()
    assert not (root / "usr" / "bin" / "extra").exists()
