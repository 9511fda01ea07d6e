"""Experiment files: variants, overrides from make's variables, and mistakes caught early."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import experiment
from lab.command import StageError

SMOKE = experiment.EXPERIMENTS / "smoke.yaml"


def test_smoke_experiment() -> None:
    exp = experiment.load(SMOKE)
    assert exp.chapter == "smoke" and exp.kconfig_start == "tinyconfig"
    assert set(exp.variants) == {"baseline", "patched", "patched-icount"}
    assert exp.variants["baseline"].tree == "baseline"
    assert exp.variants["patched"].fragments == ("boot", "smoke")


def test_accel_override_keeps_a_variant_own_accelerator() -> None:
    exp = experiment.load(SMOKE, accel="tcg", reps=1)
    assert exp.reps == 1
    assert exp.variants["patched"].accel == "tcg"
    assert exp.variants["patched-icount"].accel == "icount"


def test_variants_filter_and_unknown_variant() -> None:
    assert set(experiment.load(SMOKE, only=["patched"]).variants) == {"patched"}
    with pytest.raises(StageError, match=r"has no variant\(s\) \['nope'\]"):
        experiment.load(SMOKE, only=["nope"])


def test_unknown_keys_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(SMOKE.read_text() + "repetitions: 3\n")
    with pytest.raises(StageError, match=r"unknown key\(s\) \['repetitions'\]"):
        experiment.load(bad)


def test_missing_experiment_lists_the_chapters(tmp_path: Path) -> None:
    with pytest.raises(StageError, match=r"chapters with one: .*smoke"):
        experiment.load(tmp_path / "nope.yaml")


def test_variant_settings_extend_the_chapter(tmp_path: Path) -> None:
    f = tmp_path / "x.yaml"
    f.write_text("chapter: x\nseries: patches/smoke\nfragments: [boot]\ncmdline: quiet\n"
                 "machine: {cpus: 2, memory: 1G}\nvariants:\n"
                 "  iso: {fragments: [smoke], cmdline: isolcpus=1, machine: {cpus: 4}}\n")
    v = experiment.load(f).variants["iso"]
    assert v.fragments == ("boot", "smoke") and v.cmdline == "quiet isolcpus=1"
    assert (v.machine.cpus, v.machine.memory) == (4, "1G") and v.tree == "patched"
