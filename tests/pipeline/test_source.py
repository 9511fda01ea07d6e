"""The base tree: pin, verification, deterministic base commit, reader's own tree."""

from __future__ import annotations

import io
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from lab.command import StageError
from lab.pipeline import source

MAKEFILE = "# SPDX\nVERSION = 7\nPATCHLEVEL = 2\nSUBLEVEL = 13\nEXTRAVERSION =\n"


def _tarball(path: Path, top: str = "linux-7.2.13") -> Path:
    with tarfile.open(path, "w:xz") as tf:
        for name, text in (("Makefile", MAKEFILE), ("init/main.c", "int main;\n")):
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_pin_is_complete() -> None:
    pin = source.pin()
    assert pin["version"] == "7.2.13" and pin["suite"] == "sid"
    assert re.fullmatch(r"[0-9a-f]{64}", pin["sha256"])
    assert re.fullmatch(r"[0-9a-f]{64}", pin["linux_source"]["tarball_sha256"])


def test_verify_names_file_hashes_and_fix(tmp_path) -> None:
    f = tmp_path / "linux.tar.xz"
    f.write_bytes(b"not a kernel")
    with pytest.raises(StageError) as err:
        source.verify(f, "0" * 64)
    msg = str(err.value)
    assert str(f) in msg and "0" * 64 in msg and "configs/source.yaml" in msg
    assert "delete the file" in msg
    source.verify(f, source.sha256_file(f))


def test_base_commit_is_the_same_on_every_machine(tmp_path, monkeypatch) -> None:
    tarball = _tarball(tmp_path / "k.tar.xz")
    commits = []
    for cache in ("a", "b"):
        monkeypatch.setenv("KERNEL_BOOK_CACHE", str(tmp_path / cache))
        base = source.from_tarball(tarball, tmp_path / "log", "test")
        commits.append(base.commit)
        assert base.version == "7.2.13"
        assert (base.tree / "init/main.c").read_text() == "int main;\n"
    assert commits[0] == commits[1]
    assert base.sha256 == source.sha256_file(tarball)


def test_tarball_without_makefile_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KERNEL_BOOK_CACHE", str(tmp_path / "c"))
    bad = tmp_path / "bad.tar.xz"
    with tarfile.open(bad, "w:xz") as tf:
        info = tarfile.TarInfo("top/README")
        tf.addfile(info, io.BytesIO(b""))
    with pytest.raises(StageError, match="is this a Linux source tarball"):
        source.from_tarball(bad, tmp_path / "log", "test")


def test_reader_git_tree_is_imported_without_writing_to_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KERNEL_BOOK_CACHE", str(tmp_path / "c"))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "Makefile").write_text(MAKEFILE)
    env = source.git_env()
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(mine), *args], env=env, check=True)
    head_before = subprocess.run(["git", "-C", str(mine), "rev-parse", "HEAD"], text=True,
                                 capture_output=True, check=True).stdout
    monkeypatch.setenv("KERNEL_SRC", str(mine))
    base = source.prepare(tmp_path / "log")
    assert base.commit == head_before.strip()
    assert base.origin == f"git:{mine}" and base.tree != mine
    status = subprocess.run(["git", "-C", str(mine), "status", "--porcelain"], text=True,
                            capture_output=True, check=True).stdout
    assert status == ""


def test_reader_tarball_is_used_instead_of_the_pin(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KERNEL_BOOK_CACHE", str(tmp_path / "c"))
    monkeypatch.delenv("KERNEL_SRC", raising=False)
    monkeypatch.setenv("KERNEL_TARBALL", str(_tarball(tmp_path / "mine.tar.xz")))
    base = source.prepare(tmp_path / "log")
    assert base.origin == "tarball:mine.tar.xz" and base.version == "7.2.13"
