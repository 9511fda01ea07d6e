"""``kb-figure``, ``kb-table`` and the cross-document ``{glue:text}`` role: glue data pasted
from another document.

MyST-NB's own ``glue:figure`` works only within one notebook; these paste a notebook's glued
figure or table into a chapter page as a numbered, captioned figure or table. Figures are
written as SVG, PDF and PNG (tables as CSV) under ``_build/figures/<docname>/`` and copied to
stable paths of the HTML book, ``figures/<label>.<ext>`` and ``tables/<label>.csv``, that a talk
or a kernel document can link; the HTML page shows the SVG, the PDF book the PDF. Where the
notebook declared the runs (``<key>-provenance``, :func:`lab.book.notebook.glue_provenance`), the
caption names the run ids and a "cite / reproduce" box follows: the ``make reproduce`` command,
each manifest's sha256, the downloads, and the book's citation at its commit.
"""

from __future__ import annotations

import base64
import csv
import io
import json
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from myst_nb.ext.glue.roles import PasteTextRole
from sphinx import addnodes
from sphinx.environment import BuildEnvironment
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from lab import chapters
from lab.book import provenance
from lab.book.freshness import citation
from lab.book.notebook import TABLE_MIME

LOGGER = logging.getLogger(__name__)


FIGURE_MIMES = {"image/svg+xml": "svg", "application/pdf": "pdf", "image/png": "png"}


WIDE_COLUMNS = 8
"""A pasted table of more columns than this is set in smaller type (class ``kb-wide``)."""


LONG_TOKEN = 14
"""A cell with a word longer than this (a symbol name) may break inside it (``kb-long``)."""


PROSE_CHARS = 60
"""A cell longer than this is prose (a verdict's reason): on a phone it keeps a readable
width (``kb-prose``) rather than being squeezed into a column of a few words."""


class CrossDocTextRole(PasteTextRole):
    """``{glue:text}`` that accepts ``/path/doc.md::key`` without a format specifier.

    MyST-NB splits the format off at the last colon, so ``doc.md::key`` would lose its key
    to the format; a reference of that form gets the neutral ``s`` format appended instead.
    """

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        """Append ``:s`` where the key after ``::`` carries no format of its own."""
        doc, sep, key = self.text.partition("::")
        if sep and ":" not in key:
            self.text = f"{doc}::{key}:s"
        return super().run()




def _store(env: BuildEnvironment, name: str) -> dict[str, Any]:
    """A per-document record this extension keeps in the environment (pickled with it)."""
    if not hasattr(env, name):
        setattr(env, name, {})
    return getattr(env, name)


def _page_relative(docname: str, target: str) -> str:
    """``target`` (a path in the HTML output) as a link from the page of ``docname``."""
    return "../" * docname.count("/") + target


class PasteDirective(SphinxDirective):
    """Common part of kb-figure and kb-table: resolve ``/path/doc.md::key`` to glue data, and
    the caption suffix and "cite / reproduce" box of a provenance the notebook glued."""

    required_arguments = 1
    final_argument_whitespace = False
    has_content = True
    option_spec: ClassVar[dict[str, Any]] = {"name": lambda arg: arg.strip()}
    provenance: dict[str, Any] | None = None
    label = ""
    glued: frozenset[str] = frozenset()
    glue: ClassVar[dict[str, Any]] = {}

    def glue_data(self, reference: str | None = None) -> tuple[str, str, dict[str, Any]] | None:
        """(docname, key, mime bundle) of ``reference`` (by default the argument), or ``None``
        after a warning.

        Also keeps the key's provenance record, if the notebook glued one, in ``provenance``,
        and every key the notebook glued in ``glued``.
        """
        reference = reference or self.arguments[0]
        ref, sep, key = reference.partition("::")
        if not sep:
            self._warn(f"'{reference}' is not of the form /notebooks/<doc>.md::<key>")
            return None
        _, path = self.env.relfn2path(ref, self.env.docname)
        docname = self.env.path2doc(path)
        if docname is None:
            self._warn(f"no document at {ref!r}")
            return None
        self.state.document.setdefault("kb_paste_sources", []).append(docname)
        folder = Path(self.env.mystnb_config.output_folder)
        glue_file = folder.joinpath(*docname.split("/")).with_suffix(".glue.json")
        data = json.loads(glue_file.read_text()) if glue_file.exists() else {}
        self.glue = data
        self.glued = frozenset(data)
        if key not in data:
            self._warn(f"glue key {key!r} not found in {docname}: glue it in that notebook "
                       f"(lab.book.notebook.glue_*), or correct the key")
            return None
        self.provenance = data.get(f"{key}-provenance", {}).get("data", {}).get(provenance.MIME)
        # the stable name of the figure or table (add_name later pops the option)
        self.label = self.options.get("name") or key
        return docname, key, data[key]["data"]

    def caption_nodes(self) -> list[nodes.Node]:
        """The directive's content parsed as the caption's inline nodes, followed by the run
        ids when the notebook declared them."""
        holder = nodes.Element()
        self.state.nested_parse(self.content, self.content_offset, holder)
        if not holder.children or not isinstance(holder[0], nodes.paragraph):
            self._warn("give the figure or table a caption paragraph as content")
            return []
        caption = list(holder[0].children)
        if self.provenance:
            ids = [r["id"] for s in self.provenance["sources"] for r in s["runs"]]
            caption.append(nodes.Text(" Runs: " if len(ids) > 1 else " Run: "))
            for i, run_id in enumerate(ids):
                caption += [nodes.Text(", ")] if i else []
                caption.append(nodes.literal(run_id, run_id, classes=["kb-run-id"]))
            caption.append(nodes.Text("."))
        return caption

    def stable(self, source: Path, folder: str, ext: str) -> nodes.reference:
        """Register ``source`` for copying to ``<folder>/<label>.<ext>`` of the HTML output
        and return a link to it from this page."""
        target = f"{folder}/{self.label}.{ext}"
        _store(self.env, "kb_stable").setdefault(self.env.docname, {})[target] = str(source)
        uri = _page_relative(self.env.docname, target)
        return nodes.reference(ext.upper(), ext.upper(), refuri=uri, classes=["kb-stable"])

    def downloads(self, folder: str, links: list[nodes.reference]) -> nodes.paragraph:
        """A "Download:" line of stable links, with the stable path spelled out."""
        line = nodes.paragraph(classes=["kb-downloads"])
        line += nodes.Text("Download: ")
        for i, link in enumerate(links):
            line += [nodes.Text(" · ")] if i else []
            line += link
        line += [nodes.Text(" (stable path "),
                 nodes.literal("", f"{folder}/{self.label}.*"), nodes.Text(")")]
        return line

    def box(self, folder: str, links: list[nodes.reference], short: bool = False
            ) -> nodes.container:
        """The "cite / reproduce" box under a figure or table with a provenance record.

        ``short`` (the landing page): one ``make reproduce CHAPTER=<name>`` line per chapter
        with its run ids, and where the manifests' sha256 stand, instead of each run's
        manifest and the exact variants."""
        box = nodes.container(classes=["kb-provenance"])
        box += nodes.paragraph("", "", nodes.strong("", "Cite / reproduce"),
                               classes=["kb-provenance-title"])
        order = {c.name: i for i, c in enumerate(chapters.book())}
        sources = sorted(self.provenance["sources"],
                         key=lambda s: order.get(s["chapter"], len(order)))
        for source in sources if short else self.provenance["sources"]:
            if short:
                command = f"make reproduce CHAPTER={source['chapter']}"
                item = nodes.paragraph("", "", nodes.literal("", command, classes=["kb-command"]),
                                       nodes.Text(" (runs "))
                for i, run in enumerate(source["runs"]):
                    item += [nodes.Text(", ")] if i else []
                    item += nodes.literal("", run["id"], classes=["kb-run-id"])
                item += nodes.Text(")")
                box += item
                continue
            box += nodes.paragraph("", "", nodes.Text("Re-measure: "),
                                   nodes.literal("", source["command"],
                                                 classes=["kb-command"]))
            runs = nodes.bullet_list(classes=["kb-runs"])
            # the machine of each run, where the runs of one source come from more than one
            several = len({run.get("machine") for run in source["runs"]}) > 1
            for run in source["runs"]:
                made = f"{run['book_commit'][:12]}" + (" with uncommitted changes"
                                                        if run["book_dirty"] else "")
                item = nodes.paragraph("", "", nodes.literal("", run["id"]),
                                       nodes.Text(": manifest "),
                                       nodes.literal("", run["manifest"]),
                                       nodes.Text(" sha256 "),
                                       nodes.literal("", run["sha256"], classes=["kb-sha"]))
                if run["book_commit"]:
                    item += nodes.Text(f"; measured from book commit {made}")
                if several:
                    item += nodes.Text(f"; on {run['machine']}")
                runs += nodes.list_item("", item)
            box += runs
        cite = citation(self.env.app)
        ids = [r["id"] for s in self.provenance["sources"] for r in s["runs"]]
        html_only = addnodes.only(expr="html")
        if links:
            html_only += self.downloads(folder, links)
        html_only += nodes.raw("", "<details class=\"kb-cite\"><summary>Cite the book, "
                               f"{cite.state} (BibTeX, CFF)</summary>", format="html")
        bibtex, cff = cite.bibtex(self.label, ids), cite.cff(self.label, ids)
        html_only += nodes.literal_block(bibtex, bibtex, language="bibtex")
        html_only += nodes.literal_block(cff, cff, language="yaml")
        html_only += nodes.raw("", "</details>", format="html")
        box += html_only
        _store(self.env, "kb_cited_state")[self.env.docname] = cite.state
        return box


    def write_figure(self, docname: str, key: str, bundle: dict[str, Any]
                     ) -> tuple[dict[str, Path], str] | None:
        """Write a glued figure's SVG, PDF and PNG under ``_build/figures/<docname>/`` and
        return them with the URI an image node takes, or ``None`` after a warning."""
        outdir = Path(self.env.app.outdir).parent / "figures" / docname
        outdir.mkdir(parents=True, exist_ok=True)
        written = {}
        for mime, ext in FIGURE_MIMES.items():
            if mime in bundle:
                payload = bundle[mime]
                content = payload.encode() if mime == "image/svg+xml" else base64.b64decode(
                    payload)
                target = outdir / f"{key}.{ext}"
                if not target.exists() or target.read_bytes() != content:
                    target.write_bytes(content)
                written[ext] = target
        if "svg" not in written and "png" not in written:
            self._warn(f"glue key {key!r} holds no image; glue a matplotlib figure")
            return None
        # "key.*": each builder takes the best rendering it supports, the HTML book the SVG,
        # the LaTeX book the PDF, so the printed figures stay vector graphics.
        return written, "/" + (outdir / f"{key}.*").relative_to(Path(self.env.srcdir)).as_posix()

    def _warn(self, message: str) -> None:
        LOGGER.warning(f"{self.name}: {message}", location=self.get_location())


class KbFigure(PasteDirective):
    """A numbered figure from a notebook's glued matplotlib figure."""

    def run(self) -> list[nodes.Node]:
        found = self.glue_data()
        if found is None:
            return []
        docname, key, bundle = found
        files = self.write_figure(docname, key, bundle)
        if files is None:
            return []
        written, uri = files
        figure = nodes.figure("", nodes.image(uri=uri, alt=key))
        figure += nodes.caption("", "", *self.caption_nodes())
        links = [self.stable(written[ext], "figures", ext)
                 for ext in ("svg", "pdf", "png") if ext in written]
        self.add_name(figure)
        self.set_source_info(figure)
        if self.provenance:
            return [figure, self.box("figures", links)]
        html_only = addnodes.only(expr="html")
        html_only += self.downloads("figures", links)
        figure += nodes.legend("", html_only)
        return [figure]


class KbTable(PasteDirective):
    """A numbered table from a notebook's glued :class:`lab.book.notebook.Table`.

    ``:csv-only: a, b`` names columns that the published CSV carries for a program to read
    (a row's kind as data) but the page leaves out, since another column prints them."""

    option_spec: ClassVar[dict[str, Any]] = {**PasteDirective.option_spec,
                                             "csv-only": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        found = self.glue_data()
        if found is None:
            return []
        docname, key, bundle = found
        if TABLE_MIME not in bundle:
            self._warn(f"glue key {key!r} is not a table; glue it with "
                       "lab.book.notebook.glue_table")
            return []
        every, data = bundle[TABLE_MIME]["columns"], bundle[TABLE_MIME]["rows"]
        hidden = {c.strip() for c in self.options.get("csv-only", "").split(",") if c.strip()}
        if hidden - set(every):
            self._warn(f"csv-only columns {sorted(hidden - set(every))} are not in {key!r}")
        kept = [i for i, c in enumerate(every) if c not in hidden]
        columns = [every[i] for i in kept]
        rows = [[r[i] for i in kept] for r in data]
        wide = ["kb-wide"] if len(columns) > WIDE_COLUMNS else []
        table = nodes.table(classes=["kb-table", *wide])
        table += nodes.title("", "", *self.caption_nodes())
        group = nodes.tgroup(cols=len(columns))
        table += group
        group += [nodes.colspec(colwidth=1) for _ in columns]
        group += nodes.thead("", self._row(columns))
        group += nodes.tbody("", *(self._row(r) for r in rows))
        self.add_name(table)
        self.set_source_info(table)
        if not self.provenance:
            return [table]
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([every, *data])
        target = Path(self.env.app.outdir).parent / "figures" / docname / f"{key}.csv"
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_text(encoding="utf-8") != out.getvalue():
            target.write_text(out.getvalue(), encoding="utf-8")
        return [table, self.box("tables", [self.stable(target, "tables", "csv")])]

    @staticmethod
    def _row(cells: list[str]) -> nodes.row:
        """A table row; a cell holding a long unbreakable token (a symbol name, a list of
        them) is marked ``kb-long``, the only kind the stylesheet lets break inside a word, and
        a cell of prose ``kb-prose``, which the stylesheet keeps wide on a phone."""
        def classes(text: str) -> list[str]:
            long = max(map(len, text.split()), default=0) > LONG_TOKEN
            return ["kb-long"] * long + ["kb-prose"] * (len(text) > PROSE_CHARS)

        return nodes.row("", *(nodes.entry("", nodes.paragraph(text=str(c)),
                                           classes=classes(str(c))) for c in cells))
