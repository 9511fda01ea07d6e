"""A machine with caches of its own makes the base tree and the series commits a stamp names
from the shared inputs, with the same ids as the machine that wrote the stamp, and refuses to
stand in something else (:mod:`lab.pipeline.nodecache`)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from lab.command import StageError
from lab.pipeline import cachedir, nodecache, series, source
from lab.pipeline.stamps import SeriesStamp, SourceStamp

from .test_series import ORIGINAL, _patch, _series
from .test_source import MAKEFILE


def _tarball(path: Path) -> Path:
    """A kernel tarball whose init/main.c is the series tests' file."""
    with tarfile.open(path, "w:xz") as tf:
        for name, text in (("Makefile", MAKEFILE), ("init/main.c", ORIGINAL)):
            data = text.encode()
            info = tarfile.TarInfo(f"linux-7.2.13/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_a_second_machine_makes_the_base_and_the_series_commit_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KERNEL_SRC", raising=False)
    monkeypatch.setenv("KERNEL_TARBALL", str(_tarball(tmp_path / "k.tar.xz")))
    monkeypatch.setenv("KERNEL_BOOK_CACHE", str(tmp_path / "cache"))
    d = tmp_path / "patches"
    d.mkdir()
    ser = _series(tmp_path, "apply", [_patch(d / "0001.patch", "line 6", "line six")])
    # machine A: the source and series stages write their stamps
    base = source.prepare(tmp_path / "log")
    base_stamp = SourceStamp(**base.to_json())
    commit = series.commit_for(base.tree, base.commit, ser, "patched")
    series_stamp = SeriesStamp(tree="patched", commit=commit, mode="apply", sha256=ser.sha256,
                               patches={}, steps=[])
    nodecache.base(base_stamp)  # all there: nothing is made
    series.ensure_commit(base_stamp, series_stamp, d)
    # machine B: the same cache path, empty; it makes the same tree, base commit and commit
    (tmp_path / "cache").rename(tmp_path / "cache-of-a")
    nodecache.base(base_stamp)
    assert source.head(Path(base_stamp.tree), "kb-base") == base_stamp.commit
    assert not nodecache.has_commit(Path(base_stamp.tree), commit)
    series.ensure_commit(base_stamp, series_stamp, d)
    assert nodecache.has_commit(Path(base_stamp.tree), commit)
    assert (cachedir.sub("locks") / "node-cache.log").exists()
    # what this machine cannot make as the stamp names it is refused, naming both
    with pytest.raises(StageError, match=f"made the patched commit {commit}, but the stamp"):
        series.ensure_commit(base_stamp, SeriesStamp(**{**series_stamp.to_json(),
                                                        "commit": "f" * 40}), d)
    with pytest.raises(StageError, match=r"made the base tree .* but the stamp names"):
        nodecache.base(SourceStamp(**{**base_stamp.to_json(), "commit": "0" * 40}))

