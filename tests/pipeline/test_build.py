"""The shared build directory: a guest module is built against the variant's own objects."""

from __future__ import annotations

from pathlib import Path

from lab import build, kconfig


def test_ensure_built_rebuilds_only_when_another_variant_was_built_there(
        tmp_path: Path, monkeypatch) -> None:
    config = tmp_path / "config"
    config.write_text("CONFIG_MODULES=y\n")
    made: list[str] = []
    checked_out: list[str] = []
    monkeypatch.setattr(build, "make_kernel",
                        lambda box, d, commit, cfg, targets, log: made.append(commit))
    monkeypatch.setattr(build.series, "checkout", lambda tree, commit: checked_out.append(commit))
    box = build.Toolbox(tmp_path / "root", tmp_path / "src", "gcc")
    mark = tmp_path / build.BUILT_MARK
    log = tmp_path / "log"

    build.ensure_built(box, tmp_path, "aaa", config, log)  # no mark yet: build
    assert made == ["aaa"]
    mark.write_text(f"aaa {kconfig.sha256(config)}\n")
    build.ensure_built(box, tmp_path, "aaa", config, log)  # it holds aaa: only check out
    assert made == ["aaa"] and checked_out == ["aaa"]
    build.ensure_built(box, tmp_path, "bbb", config, log)  # another variant: build
    assert made == ["aaa", "bbb"]
    config.write_text("CONFIG_MODULES=y\nCONFIG_X=y\n")
    build.ensure_built(box, tmp_path, "aaa", config, log)  # same commit, other config: build
    assert made == ["aaa", "bbb", "aaa"]
    assert build.targets_for(config) == ["bzImage", "modules"]
