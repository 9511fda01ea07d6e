"""Provenance records of measured figures: the runs, their manifests' sha256, the command that
re-measures them, and the book's citation."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from lab import ROOT, chapters
from lab.analysis import runs
from lab.book import provenance
from tests.book import unavailable


@pytest.fixture(scope="module")
def chapter() -> str:
    """The first chapter of the book with a committed run: the tests read its real manifests."""
    for ch in chapters.book():
        if (ROOT / "data" / "runs" / ch.name).is_dir():
            return ch.name
    unavailable("no chapter of the book has a committed run under data/runs/")


@pytest.fixture(scope="module")
def measured(chapter: str) -> list[runs.Run]:
    return runs.load_chapter_runs(chapter)


def test_run_ids_are_found_in_joined_text() -> None:
    assert provenance.run_ids(["20261122T062338Z-auto + 20261122T040243Z-auto", None,
                               "20261122T062338Z-auto", "x 20261122T033812Z-auto-icount-reparse1"
                               ]) == ["20261122T033812Z-auto-icount-reparse1",
                                      "20261122T040243Z-auto", "20261122T062338Z-auto"]


def test_record_names_each_run_with_its_manifest_digest(chapter: str,
                                                        measured: list[runs.Run]) -> None:
    latest = runs.latest_per_variant(measured)
    shown = sorted(latest)[:2]
    record = provenance.record(latest, variants=shown)
    (source,) = record["sources"]
    assert source["chapter"] == chapter
    assert {v for r in source["runs"] for v in r["variants"]} == set(shown)
    for run in source["runs"]:
        manifest = ROOT / run["manifest"]
        assert hashlib.sha256(manifest.read_bytes()).hexdigest() == run["sha256"]
        host = next(r for r in measured if r.run_id == run["id"]).manifest["host"]
        assert run["machine"] == runs.machine_label(host)
        assert run["id"] in provenance.summary(record)
    assert source["command"].startswith(f"make reproduce CHAPTER={chapter} VARIANTS=")
    assert set(source["command"].split("VARIANTS=")[1].split()[0].split(",")) == set(shown)


def test_whole_matrix_needs_no_variants(chapter: str, measured: list[runs.Run]) -> None:
    manifests = [r.manifest for r in measured]
    declared = provenance._declared(chapter)[0]
    assert provenance.reproduce_command(chapter, declared, manifests) == \
        f"make reproduce CHAPTER={chapter}"


def test_other_repetitions_and_accelerator_are_spelled_out(chapter: str,
                                                          measured: list[runs.Run]) -> None:
    declared, reps, accel = provenance._declared(chapter)
    name = next(n for n in declared if accel[n] == "auto")
    manifest = {"experiment": {"reps": reps + 2},
                "variants": {name: {"accel_requested": "tcg"}}}
    assert provenance.reproduce_command(chapter, [name], [manifest]) == \
        f"make reproduce CHAPTER={chapter} VARIANTS={name} REPS={reps + 2} ACCEL=tcg"


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
        unavailable(f"{ROOT} is not a git checkout: clone the repository to test its citation")
    cite = provenance.book_citation(ROOT)
    assert len(cite.commit) == 40 and cite.commit in cite.bibtex("fig-x", [])
    assert f"commit: {cite.commit}" in cite.cff("fig-x", [])
