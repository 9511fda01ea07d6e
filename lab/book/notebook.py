"""What a chapter notebook calls: consistent figures and MyST-NB glue of numbers, tables, figures.

Every number a page quotes is glued here under a stable key, and pages paste it with
``{glue:text}`/notebooks/<chapter>.md::<key>``; figures and tables are pasted with the book's
``kb-figure`` and ``kb-table`` directives (see :mod:`lab.book.sphinxext`). Keeping the glue in one
module means a figure always carries SVG, PDF and PNG renderings, and a table always carries the
structured form the numbered-table directive needs.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display as show
from matplotlib_inline.backend_inline import set_matplotlib_formats
from myst_nb import glue

from lab import chapters
from lab.analysis import cited as cited_data
from lab.analysis import runs as runs_data
from lab.book import figures, provenance

TABLE_MIME = "application/vnd.kernelbook.table+json"
"""The mime type under which :func:`glue_table` stores a table's structure for ``kb-table``."""


def setup() -> None:
    """Render figures as SVG, PDF and PNG in the book's one style (:data:`lab.book.figures.STYLE`),
    which also keeps a figure's files identical across runs on the same data, so re-executing
    a notebook does not produce a spurious diff.
    """
    set_matplotlib_formats("svg", "pdf", "png")
    mpl.rcParams.update(figures.STYLE)


class Table:
    """A table that renders as HTML in the notebook and carries its cells for ``kb-table``."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame

    def _repr_html_(self) -> str:
        return self.frame.to_html(index=False, escape=True, na_rep="—")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        cells = self.frame.astype(object).where(self.frame.notna(), "—").astype(str)
        payload = {"columns": [str(c) for c in cells.columns], "rows": cells.values.tolist()}
        return {
            TABLE_MIME: json.loads(json.dumps(payload)),
            "text/html": self._repr_html_(),
            "text/plain": html.unescape(cells.to_string(index=False)),
        }


def glue_text(key: str, text: str) -> None:
    """Glue a number or phrase, as a string, for inline pasting with ``{glue:text}``.

    MyST-NB turns the pasted text/plain back into a value with ``ast.literal_eval``; a string's
    repr round-trips exactly, whereas bare text such as "1,234,567" would become a tuple.
    """
    glue(key, str(text), display=False)


def glue_table(key: str, frame: pd.DataFrame, display: bool = True) -> None:
    """Glue a table for the numbered ``kb-table`` directive, and show it as a plain DataFrame.

    The glued bundle carries a custom mime type that only ``kb-table`` reads; it is glued
    without display so MyST-NB never tries to render that type in the notebook page.
    """
    glue(key, Table(frame), display=False)
    if display:
        show(frame)


def glue_figure(key: str, fig: plt.Figure) -> None:
    """Glue a figure (SVG, PDF, PNG) for ``kb-figure`` and close it so it is shown only once."""
    glue(key, fig, display=True)
    plt.close(fig)


class Provenance:
    """A provenance record (:func:`lab.book.provenance.record`) as a glue-able output."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        lines = [provenance.summary(self.record)]
        lines += [s["command"] for s in self.record["sources"]]
        return {provenance.MIME: self.record, "text/plain": "\n".join(lines)}


def glue_provenance(keys: str | Iterable[str],
                    used: Mapping[str, runs_data.Run] | Iterable[runs_data.Run | str],
                    variants: Iterable[str] | None = None, chapter: str | None = None) -> None:
    """Declare the runs a glued figure or table (or several) comes from.

    Glues :func:`lab.book.provenance.record` under ``<key>-provenance`` for each key; ``kb-figure``
    and ``kb-table`` then name the run ids in the caption and add a "cite / reproduce" box (the
    ``make reproduce`` command, each manifest's sha256, stable download links, a citation).
    ``used``: a mapping variant -> run (``runs.latest_per_variant``, ``pooled_per_variant``),
    runs, or run ids with ``chapter``; ``variants`` narrows it to the variants shown. Nothing is
    glued when no run is left, so a chapter without runs shows no box.
    """
    record = provenance.record(used, variants, chapter=chapter)
    if not record["sources"]:
        return
    for key in [keys] if isinstance(keys, str) else keys:
        glue(f"{key}-provenance", Provenance(record), display=False)


@dataclass(frozen=True)
class CitedSection:
    """What :func:`cited_section` loaded, for the rest of a chapter's notebook."""

    cited: cited_data.Chapter
    frame: pd.DataFrame
    runs: list[runs_data.Run]


def cited_section(name: str) -> CitedSection:
    """The cited-numbers part every chapter notebook starts with, in one call.

    Glues each cited value under its id and its row label under ``<id>-row`` (so a page can
    quote both), ``<chapter>-cited-count``, the table ``<chapter>-cited-table``, the figure
    ``<chapter>-cited-fig`` (marked "not yet reproduced" while no run is committed) and
    ``<chapter>-run-count``; returns the cited data and the chapter's committed runs."""
    label = chapters.get(name).label
    chapter = cited_data.load_chapter(cited_data.CITED_DIR / f"{name}.yaml")
    frame = cited_data.to_frame([chapter])
    measured = runs_data.load_chapter_runs(name)
    for entry in frame.itertuples():
        glue_text(entry.id, entry.value)
        glue_text(f"{entry.id}-row", entry.row)
    glue_text(f"{name}-cited-count", str(len(frame)))
    glue_text(f"{name}-run-count", str(len(measured)))
    glue_table(f"{name}-cited-table", figures.cited_table(frame))
    title = f"{label}: numbers cited by the authors"
    glue_figure(f"{name}-cited-fig", figures.cited_figure(
        frame, title if measured else f"{title} (not yet reproduced)"))
    return CitedSection(chapter, frame, measured)


class ClaimFailed(AssertionError):
    """A directional sentence of a chapter no longer holds for the committed data."""


def claim(key: str, holds: bool, sentence: str) -> None:
    """Back a typed directional sentence of a chapter ("falls", "no change", "tens of percent")
    with the data: raise, and so fail the book's build, when ``holds`` is false.

    ``key`` names the claim; the sentence in ``book/`` carries a marker naming it,
    ``{claim}`/notebooks/<chapter>.md::<key>``` (:mod:`lab.book.claims`), which the book's build
    checks against this notebook's source.
    """
    if not holds:
        raise ClaimFailed(f"claim {key!r} does not hold for the committed data: {sentence!r}. "
                          "Fix: rewrite the sentence in book/ (or glue a computed phrase) so "
                          "that it says what the data say")
    print(f"claim {key}: holds")
