"""Fragments, their merge order, and the check that nothing requested was dropped."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from lab import DATA, chapters
from lab.command import StageError
from lab.pipeline import kconfig

SMOKE = chapters.get("smoke")


def _frag(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_parse_reads_set_and_unset_options() -> None:
    parsed = kconfig.parse('CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C="x y"\n# comment\n'
                           "CONFIG_D=0x10\n")
    assert parsed == {"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_C": '"x y"', "CONFIG_D": "0x10"}


def test_later_fragment_overrides_earlier(tmp_path) -> None:
    a = _frag(tmp_path / "a.config", "CONFIG_X=y\nCONFIG_Y=y\n")
    b = _frag(tmp_path / "b.config", "# CONFIG_X is not set\n")
    req = kconfig.requests([a, b])
    assert req["CONFIG_X"].value == "n" and req["CONFIG_X"].fragment == b
    assert req["CONFIG_Y"].fragment == a


def test_check_lists_every_dropped_option_with_its_fragment(tmp_path) -> None:
    frag = _frag(tmp_path / "chapter.config", "CONFIG_A=y\nCONFIG_B=m\nCONFIG_C=y\n"
                                              "# CONFIG_D is not set\n")
    final = _frag(tmp_path / ".config", "CONFIG_A=y\nCONFIG_B=y\n# CONFIG_C is not set\n")
    with pytest.raises(StageError) as err:
        kconfig.check(final, kconfig.requests([frag]))
    msg = str(err.value)
    assert "dropped or changed 2 requested option(s)" in msg
    assert "CONFIG_B=m (from chapter.config) is now y" in msg
    assert "CONFIG_C=y (from chapter.config) is now not set" in msg
    assert "CONFIG_A" not in msg and "CONFIG_D" not in msg


def test_boot_needs_survive_in_the_committed_smoke_config() -> None:
    configs = sorted((DATA / "runs" / "smoke").glob("*/config/baseline.config.gz"))
    assert configs, "no committed smoke run in data/runs/smoke"
    final = kconfig.parse(gzip.decompress(configs[-1].read_bytes()).decode())
    wanted = kconfig.requests([SMOKE.fragment("boot"), SMOKE.fragment("smoke")])
    assert kconfig.dropped(final, wanted) == []
    assert final["CONFIG_9P_FS"] == "y" and final["CONFIG_OVERLAY_FS"] == "y"


def test_install_leaves_an_identical_config_untouched(tmp_path) -> None:
    cfg = _frag(tmp_path / "new.config", "CONFIG_A=y\n")
    build = tmp_path / "build"
    kconfig.install(cfg, build)
    before = (build / ".config").stat().st_mtime_ns
    kconfig.install(cfg, build)
    assert (build / ".config").stat().st_mtime_ns == before
