"""The directives that make the book's shared pages from the chapters it finds.

``kb-chapters`` (a toctree of the book's chapters, or of their notebooks, in the order
:mod:`lab.chapters` finds them), ``kb-scorecard`` (a section with the scorecard table of each
chapter) and ``kb-overview`` (the landing page's panel of each chapter, linked, with its
headline rows and the tallies of each kind of row), so a new chapter appears in the book
without an edit to a shared page.
"""

from __future__ import annotations

from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.directives.other import TocTree
from sphinx.util.docutils import SphinxDirective

from lab import chapters
from lab.book import provenance
from lab.book.paste import PasteDirective


class KbChapters(TocTree):
    """A toctree of the book's chapters (``book/<name>``), or with ``:notebooks:`` of their
    notebooks, in book order; the directive's own content is ignored."""

    option_spec: ClassVar[dict[str, Any]] = {**TocTree.option_spec,
                                             "notebooks": directives.flag}

    def run(self) -> list[nodes.Node]:
        """Fill the content with the discovered chapters, then build the toctree."""
        base = "/notebooks/" if "notebooks" in self.options else "/book/"
        names = [f"{base}{c.name}" for c in chapters.book()]
        self.content = StringList(names, source="lab.chapters")
        return super().run()


class KbScorecard(SphinxDirective):
    """One section per book chapter with its scorecard table (glued by the scorecard
    notebook under ``scorecard-<chapter>-table`` and ``-count``). The page prints each row's
    kind in ``kind``; the published CSV also carries it as data (``row_kind``,
    ``ours_reading``)."""

    required_arguments = 1  # the notebook that glues the tables, e.g. /notebooks/scorecard.md

    def run(self) -> list[nodes.Node]:
        """Render each chapter's section as MyST and parse it in place."""
        nb = self.arguments[0]
        lines: list[str] = []
        for c in chapters.book():
            lines += [f"(scorecard-{c.name})=", f"## {c.label}", "",
                      f":::{{kb-table}} {nb}::scorecard-{c.name}-table",
                      f":name: tab-scorecard-{c.name}",
                      ":csv-only: row_kind, ours_reading",
                      f"{c.label}: the {{glue:text}}`{nb}::scorecard-{c.name}-count` rows of "
                      f"{{doc}}`/book/{c.name}`: every number cited there, the change each cited "
                      "pair implies, the mechanism rows and the checks, each with its kind, "
                      "and ours where measured.", ":::", ""]
        holder = nodes.section()
        self.state.nested_parse(StringList(lines, source="lab.chapters"), self.content_offset,
                                holder, match_titles=True)
        return list(holder.children)


OVERVIEW_GROUPS = {"claims": "Claims", "mechanism": "Mechanism rows", "ours": "Our readings",
                   "checks": "Checks"}
"""The tallies under each landing-page panel, as the scorecard notebook glues them
(``scorecard-<chapter>-tally-<group>``), and how the panel names them."""


class KbOverview(PasteDirective):
    """The book at a glance, on the landing page: one panel per book chapter, in book order.

    A panel links to its chapter and to the chapter's section of the scorecard, shows the
    chapter's headline rows (the figure ``scorecard-<chapter>-panel`` the scorecard notebook
    glues, and in HTML ``-panel-phone``, drawn for a phone's width, which the stylesheet shows
    there instead) and, under it, how many rows of each kind got each verdict
    (``scorecard-<chapter>-tally-<group>``, :data:`OVERVIEW_GROUPS`). The directive's content
    is a last cell that says how to read them. When the notebook declared the runs
    (``scorecard-landing-provenance``) a short "cite / reproduce" box follows: one ``make
    reproduce CHAPTER=<name>`` per chapter. A new chapter appears without an edit here."""

    option_spec: ClassVar[dict[str, Any]] = {}

    def run(self) -> list[nodes.Node]:
        """Write the panels' figures, then render the grid as MyST and parse it in place."""
        nb = self.arguments[0]
        lines = [":::::{container} kb-panels", ""]
        for c in chapters.book():
            alt = (f":alt: {c.label}: its headline claims and mechanism rows, ours beside the "
                   "cited, with the verdicts")
            found = self.glue_data(f"{nb}::scorecard-{c.name}-panel")
            files = found and self.write_figure(*found)
            phone = self.glue_data(f"{nb}::scorecard-{c.name}-panel-phone")
            narrow = phone and self.write_figure(*phone)
            if not files or not narrow:
                continue
            lines += ["::::{container} kb-panel", "",
                      f"**{{doc}}`{c.label} </book/{c.name}>`** · "
                      f"{{ref}}`every row <scorecard-{c.name}>`", "",
                      f"```{{image}} {files[1]}", alt, ":class: kb-panel-figure kb-desktop",
                      "```", "", ":::{only} html", f"```{{image}} {narrow[1]}", alt,
                      ":class: kb-panel-figure kb-phone", "```", ":::", "",
                      ":::{container} kb-tally", ""]
            for group, name in OVERVIEW_GROUPS.items():
                key = f"scorecard-{c.name}-tally-{group}"
                if key in self.glued:
                    lines += [f"{name}: {{glue:text}}`{nb}::{key}`", ""]
            lines += [":::", "", "::::", ""]
        lines += ["::::{container} kb-panel kb-key", "", *self.content, "", "::::", "", ":::::"]
        holder = nodes.container(classes=["kb-overview"])
        self.state.nested_parse(StringList(lines, source="lab.chapters"), self.content_offset,
                                holder)
        record = self.glue.get("scorecard-landing-provenance", {}).get("data", {})
        self.provenance = record.get(provenance.MIME)
        if not self.provenance:
            return [holder]
        self.label = "book-at-a-glance"
        return [holder, self.box("figures", [], short=True)]
