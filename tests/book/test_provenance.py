"""Provenance records of measured figures: the runs, their manifests' sha256, the command that
re-measures them, and the book's citation."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from lab import ROOT, provenance, runs

CHAPTER = "context-switch"


@pytest.fixture(scope="module")
def measured() -> list[runs.Run]:
    found = runs.load_chapter_runs(CHAPTER)
    if not found:
        pytest.skip(f"no committed run of {CHAPTER}")
    return found


def test_run_ids_are_found_in_joined_text() -> None:
    assert provenance.run_ids(["20261122T062338Z-auto + 20261122T040243Z-auto", None,
                               "20261122T062338Z-auto", "x 20261122T033812Z-auto-icount-reparse1"
                               ]) == ["20261122T033812Z-auto-icount-reparse1",
                                      "20261122T040243Z-auto", "20261122T062338Z-auto"]


def test_record_names_each_run_with_its_manifest_digest(measured: list[runs.Run]) -> None:
    latest = runs.latest_per_variant(measured)
    shown = sorted(latest)[:2]
    record = provenance.record(latest, variants=shown)
    (source,) = record["sources"]
    assert source["chapter"] == CHAPTER
    assert {v for r in source["runs"] for v in r["variants"]} == set(shown)
    for run in source["runs"]:
        manifest = ROOT / run["manifest"]
        assert hashlib.sha256(manifest.read_bytes()).hexdigest() == run["sha256"]
        assert run["id"] in provenance.summary(record)
    assert source["command"].startswith(f"make reproduce CHAPTER={CHAPTER} VARIANTS=")
    assert set(source["command"].split("VARIANTS=")[1].split()[0].split(",")) == set(shown)


def test_whole_matrix_needs_no_variants(measured: list[runs.Run]) -> None:
    manifests = [r.manifest for r in measured]
    declared = provenance._declared(CHAPTER)[0]
    assert provenance.reproduce_command(CHAPTER, declared, manifests) == \
        f"make reproduce CHAPTER={CHAPTER}"


def test_other_repetitions_and_accelerator_are_spelled_out(measured: list[runs.Run]) -> None:
    declared, reps, accel = provenance._declared(CHAPTER)
    name = next(n for n in declared if accel[n] == "auto")
    manifest = {"experiment": {"reps": reps + 2},
                "variants": {name: {"accel_requested": "tcg"}}}
    assert provenance.reproduce_command(CHAPTER, [name], [manifest]) == \
        f"make reproduce CHAPTER={CHAPTER} VARIANTS={name} REPS={reps + 2} ACCEL=tcg"


def test_run_ids_without_chapter_are_refused() -> None:
    with pytest.raises(ValueError, match="chapter="):
        provenance.record(["20261122T062338Z-auto"])


def test_citation_outside_git_names_no_commit(tmp_path: Path) -> None:
    shutil.copy(ROOT / "CITATION.cff", tmp_path / "CITATION.cff")
    cite = provenance.book_citation(tmp_path)
    assert cite.commit == "" and cite.state == "not built from a git checkout"
    assert cite.title in cite.bibtex("fig-x", ["r1"]) and "runs r1" in cite.bibtex("fig-x", ["r1"])
    assert "commit:" not in cite.cff("fig-x", [])


def test_citation_in_this_checkout_names_its_commit() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    cite = provenance.book_citation(ROOT)
    assert len(cite.commit) == 40 and cite.commit in cite.bibtex("fig-x", [])
    assert f"commit: {cite.commit}" in cite.cff("fig-x", [])
