"""The data-dependency bookkeeping of lab.book.freshness, without running Sphinx."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import ROOT, chapters
from lab.book import freshness


def test_chapter_notebooks_declare_their_data() -> None:
    for chapter in [*chapters.book(), "scorecard"]:
        notebook = ROOT / "notebooks" / f"{getattr(chapter, 'name', chapter)}.md"
        reads = freshness.declared_reads(notebook)
        assert any(r.startswith("data/cited/") for r in reads), notebook
        assert any(r.startswith("data/runs/") for r in reads), notebook


def test_the_pipeline_notebook_follows_the_workflow_the_runs_and_the_chapters() -> None:
    """Its rule graph is the workflow's, its machines and costs the runs' and chapters'."""
    assert freshness.declared_reads(ROOT / "notebooks" / "pipeline.md") == [
        "workflow/**/*", "data/runs/**/*", "chapters/*/chapter.yaml"]


def test_bad_declaration_names_the_file(tmp_path: Path) -> None:
    notebook = tmp_path / "x.md"
    notebook.write_text("---\nkernelbook:\n  reads: data/cited/x.yaml\n---\n# x\n")
    with pytest.raises(ValueError, match=r"x\.md: kernelbook.reads must be a list"):
        freshness.declared_reads(notebook)


def test_digest_follows_content_names_and_new_files(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.yaml").write_text("a: 1\n")
    patterns = ["data/*.yaml"]
    first = freshness.data_digest(tmp_path, patterns)
    assert freshness.data_digest(tmp_path, patterns) == first
    (tmp_path / "data" / "a.yaml").write_text("a: 2\n")
    second = freshness.data_digest(tmp_path, patterns)
    assert second != first
    (tmp_path / "data" / "b.yaml").write_text("a: 2\n")
    assert freshness.data_digest(tmp_path, patterns) != second
    (tmp_path / "data" / "notes.txt").write_text("ignored")
    assert freshness.data_digest(tmp_path, [*patterns, "data/*.md"]) == \
        freshness.data_digest(tmp_path, patterns)
