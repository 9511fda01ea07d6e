"""The one helper every chapter notebook starts with: lab.book.notebook.cited_section."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import pytest

from lab import chapters
from lab.analysis import cited
from lab.book import figures, notebook


@pytest.fixture
def glued(monkeypatch) -> dict[str, Any]:
    """Record what the helper glues instead of handing it to a notebook kernel."""
    store: dict[str, Any] = {}
    monkeypatch.setattr(notebook, "glue", lambda key, value, display: store.update({key: value}))
    monkeypatch.setattr(notebook, "show", lambda frame: None)
    return store


@pytest.mark.parametrize("name", [c.name for c in chapters.book()])
def test_cited_section_glues_every_entry_table_figure_and_counts(name: str, glued) -> None:
    section = notebook.cited_section(name)
    frame = cited.to_frame([cited.load_chapter(cited.CITED_DIR / f"{name}.yaml")])
    assert section.frame.equals(frame)
    for entry in frame.itertuples():
        assert glued[entry.id] == entry.value
        assert glued[f"{entry.id}-row"] == entry.row
    assert glued[f"{name}-cited-count"] == str(len(frame))
    assert glued[f"{name}-run-count"] == str(len(section.runs))
    table = glued[f"{name}-cited-table"]
    assert isinstance(table, notebook.Table)
    assert table.frame.equals(figures.cited_table(frame))
    fig = glued[f"{name}-cited-fig"]
    title = fig.get_suptitle()
    assert title.startswith(f"{chapters.get(name).label}: numbers cited by the authors")
    assert title.endswith("(not yet reproduced)") == (not section.runs)
    plt.close("all")
