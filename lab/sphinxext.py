"""Sphinx extension that ties pages to notebooks and notebooks to the data they read.

MyST-NB caches executed notebooks with jupyter-cache, which keys on code only: a changed file
under ``data/`` would otherwise leave a stale result in the book. This extension

* reads each notebook's ``kernelbook.reads`` front matter (glob patterns relative to the
  repository root), digests the files it names, and marks the notebook outdated and drops its
  cache record when the digest changes, so exactly the notebooks that read a changed file
  re-execute;
* reads notebooks before pages, so a page's figures exist when the page is read;
* marks a page outdated when a notebook it pastes from is re-read, so glued numbers are never
  stale in an incrementally built page;
* adds ``kb-figure`` and ``kb-table``: numbered, captioned figures and tables pasted from another
  document's glue data (MyST-NB's own ``glue:figure`` works only within one notebook). Figures
  are written as SVG, PDF and PNG (tables as CSV) under ``_build/figures/<docname>/`` and copied
  to stable paths of the HTML book, ``figures/<label>.<ext>`` and ``tables/<label>.csv``, that a
  talk or a kernel document can link; the HTML page shows the SVG, the PDF book the PDF. Where
  the notebook declared the runs (``<key>-provenance``, :func:`lab.notebook.glue_provenance`),
  the caption names the run ids and a "cite / reproduce" box follows: the ``make reproduce``
  command, each manifest's sha256, the downloads, and the book's citation at its commit;
* offers each notebook page's executed ``.ipynb`` in the theme's download menu, and prints one
  progress line per notebook (executed, with its time, or taken from the cache);
* adds the ``claim`` role, the marker that says what backs a directional sentence
  (:mod:`lab.claims`), checked as the page is read and rendered as nothing;
* adds ``kb-chapters`` (a toctree of the book's chapters, or of their notebooks, in the order
  :mod:`lab.chapters` finds them), ``kb-scorecard`` (a section with the scorecard table of
  each chapter) and ``kb-overview`` (the landing page's panel of each chapter, linked, with
  its headline rows and the tallies of each kind of row), so a new chapter appears in the book
  without an edit to a shared page.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import yaml
from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from myst_nb.ext.glue.roles import PasteTextRole
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.directives.other import TocTree
from sphinx.environment import BuildEnvironment
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from lab import chapters, claims, provenance
from lab.notebook import TABLE_MIME

LOGGER = logging.getLogger(__name__)
STAMP_FILE = "kernelbook-data-digests.json"
FIGURE_MIMES = {"image/svg+xml": "svg", "application/pdf": "pdf", "image/png": "png"}
WIDE_COLUMNS = 8
"""A pasted table of more columns than this is set in smaller type (class ``kb-wide``)."""
LONG_TOKEN = 14
"""A cell with a word longer than this (a symbol name) may break inside it (``kb-long``)."""
PROSE_CHARS = 60
"""A cell longer than this is prose (a verdict's reason): on a phone it keeps a readable
width (``kb-prose``) rather than being squeezed into a column of a few words."""


def declared_reads(source: Path) -> list[str]:
    """The glob patterns a notebook declares in ``kernelbook: {reads: [...]}`` front matter."""
    text = source.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return []
    front = yaml.safe_load(text.split("---", 2)[1]) or {}
    reads = (front.get("kernelbook") or {}).get("reads") or []
    if not isinstance(reads, list) or not all(isinstance(r, str) for r in reads):
        raise ValueError(
            f"{source}: kernelbook.reads must be a list of glob patterns relative to the "
            "repository root, e.g. ['data/cited/workqueue.yaml', 'data/runs/workqueue/**/*']"
        )
    return reads


def data_digest(root: Path, patterns: list[str]) -> str:
    """sha256 over the names and contents of every file the patterns match, in sorted order."""
    digest = hashlib.sha256()
    files = sorted({p for pattern in patterns for p in root.glob(pattern) if p.is_file()})
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


CODE_READS = ["lab/**/*.py"]
"""Every notebook imports lab: its code is read like data, since jupyter-cache ignores it."""


def _reads_of(env: BuildEnvironment, docname: str) -> list[str]:
    """A document's declared reads plus the lab code, or nothing if it declares no reads."""
    patterns = declared_reads(Path(env.doc2path(docname)))
    return patterns + CODE_READS if patterns else []


def _notebook_reads(env: BuildEnvironment) -> dict[str, list[str]]:
    """Docname -> its reads, for every document that declares any."""
    reads = {docname: _reads_of(env, docname) for docname in sorted(env.found_docs)}
    return {docname: patterns for docname, patterns in reads.items() if patterns}


def _stamps_path(app: Sphinx) -> Path:
    return Path(app.env.mystnb_config.execution_cache_path) / STAMP_FILE


def _load_stamps(app: Sphinx) -> dict[str, str]:
    path = _stamps_path(app)
    return json.loads(path.read_text()) if path.exists() else {}


def _save_stamps(app: Sphinx, stamps: dict[str, str]) -> None:
    path = _stamps_path(app)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stamps, indent=1, sort_keys=True))


def _drop_cache_records(app: Sphinx, source: Path) -> None:
    """Remove the jupyter-cache records of one notebook so MyST-NB executes it again."""
    from jupyter_cache import get_cache

    cache = get_cache(app.env.mystnb_config.execution_cache_path)
    for record in cache.list_cache_records():
        if Path(record.uri).resolve() == source.resolve():
            cache.remove_cache(record.pk)
            LOGGER.info(f"[kernelbook] data changed: re-executing {source.name}")


def get_outdated(app: Sphinx, env: BuildEnvironment, added: set[str], changed: set[str],
                 removed: set[str]) -> list[str]:
    """Notebooks whose data changed, and pages that paste from any notebook to be re-read."""
    root = Path(app.srcdir)
    digests: dict[str, str] = getattr(env, "kb_digests", {})
    outdated = {
        doc for doc, patterns in _notebook_reads(env).items()
        if digests.get(doc) != data_digest(root, patterns)
    }
    # A page that cites the book names the commit it was built from: re-read it when that
    # commit (or whether the tree has uncommitted changes) differs from the last build's.
    state = citation(app).state
    outdated |= {doc for doc, was in getattr(env, "kb_cited_state", {}).items() if was != state}
    reread = outdated | added | changed
    pastes: dict[str, set[str]] = getattr(env, "kb_pastes", {})
    outdated |= {doc for doc, sources in pastes.items() if sources & reread}
    return sorted(outdated - added - changed - removed)


def before_read(app: Sphinx, env: BuildEnvironment, docnames: list[str]) -> None:
    """Read notebooks first, and drop cache records of notebooks whose data changed."""
    reads = _notebook_reads(env)
    stamps = _load_stamps(app)
    for doc in docnames:
        if doc in reads:
            source = Path(env.doc2path(doc))
            if stamps.get(doc) != data_digest(Path(app.srcdir), reads[doc]):
                _drop_cache_records(app, source)
    docnames.sort(key=lambda d: (d not in reads, d))


def doctree_read(app: Sphinx, doctree: nodes.document) -> None:
    """Record a notebook's data digest, and which notebooks a page pastes from."""
    env = app.env
    docname = env.docname
    patterns = _reads_of(env, docname)
    if patterns:
        digest = data_digest(Path(app.srcdir), patterns)
        if not hasattr(env, "kb_digests"):
            env.kb_digests = {}
        env.kb_digests[docname] = digest
        stamps = _load_stamps(app)
        stamps[docname] = digest
        _save_stamps(app, stamps)
    from myst_nb.ext.glue.utils import PendingGlueReference

    sources = {node.refdoc for node in doctree.findall(PendingGlueReference)}
    sources |= set(doctree.get("kb_paste_sources", []))
    if not hasattr(env, "kb_pastes"):
        env.kb_pastes = {}
    env.kb_pastes[docname] = sources


def purge_doc(app: Sphinx, env: BuildEnvironment, docname: str) -> None:
    """Forget what a removed or re-read document recorded."""
    for store in ("kb_digests", "kb_pastes", "kb_stable", "kb_cited_state"):
        getattr(env, store, {}).pop(docname, None)


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


def citation(app: Sphinx) -> provenance.Citation:
    """The book's citation for this build (``CITATION.cff`` and the commit), read once."""
    if not hasattr(app, "kb_citation"):
        app.kb_citation = provenance.book_citation(Path(app.srcdir))
    return app.kb_citation


def _store(env: BuildEnvironment, name: str) -> dict[str, Any]:
    """A per-document record this extension keeps in the environment (pickled with it)."""
    if not hasattr(env, name):
        setattr(env, name, {})
    return getattr(env, name)


def _page_relative(docname: str, target: str) -> str:
    """``target`` (a path in the HTML output) as a link from the page of ``docname``."""
    return "../" * docname.count("/") + target


class _PasteDirective(SphinxDirective):
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
                       f"(lab.notebook.glue_*), or correct the key")
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


class KbFigure(_PasteDirective):
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


class KbTable(_PasteDirective):
    """A numbered table from a notebook's glued :class:`lab.notebook.Table`.

    ``:csv-only: a, b`` names columns that the published CSV carries for a program to read
    (a row's kind as data) but the page leaves out, since another column prints them."""

    option_spec: ClassVar[dict[str, Any]] = {**_PasteDirective.option_spec,
                                             "csv-only": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        found = self.glue_data()
        if found is None:
            return []
        docname, key, bundle = found
        if TABLE_MIME not in bundle:
            self._warn(f"glue key {key!r} is not a table; glue it with lab.notebook.glue_table")
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


class KbOverview(_PasteDirective):
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


def builder_inited(app: Sphinx) -> None:
    """Note the build's start, read the citation, and give the notebooks a quiet kernel.

    The kernel spec ``python3`` under ``_build/.jupyter`` (put first on ``JUPYTER_PATH``, which
    the executor reads when it starts a kernel) is this interpreter's ipykernel with its own
    log at ERROR: ipykernel warns on every start that its loopback TCP sockets are unencrypted,
    several lines per notebook that say nothing about the book.
    """
    app.kb_started = time.time()
    citation(app)
    jupyter = Path(app.outdir).parent / ".jupyter"
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                     "--IPKernelApp.log_level=ERROR"],
            "display_name": "Python 3 (ipykernel)", "language": "python"}
    kernel = jupyter / "kernels" / "python3" / "kernel.json"
    kernel.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(spec, indent=1)
    if not kernel.exists() or kernel.read_text() != text:
        kernel.write_text(text)
    paths = [str(jupyter), *filter(None, os.environ.get("JUPYTER_PATH", "").split(os.pathsep))]
    os.environ["JUPYTER_PATH"] = os.pathsep.join(dict.fromkeys(paths))


def report_notebook(app: Sphinx, doctree: nodes.document) -> None:
    """One progress line per notebook read: executed now (with its time) or from the cache."""
    from myst_nb.sphinx_ import NbMetadataCollector

    docname = app.env.docname
    data = NbMetadataCollector.get_doc_data(app.env).get(docname, {}).get("exec_data")
    if not data:
        return
    runtime = data.get("runtime")
    took = f"{runtime:.1f} s" if isinstance(runtime, int | float) else "? s"
    if not data.get("succeeded", True):
        how = f"FAILED after {took}"
    elif data.get("mtime", 0) >= getattr(app, "kb_started", 0):
        how = f"executed in {took}"
    else:
        how = f"from the execution cache (ran {took})"
    print(f"    notebook {docname}: {how}", file=sys.stderr, flush=True)


def _executed_notebook(app: Sphinx, docname: str) -> Path | None:
    """The executed ``.ipynb`` MyST-NB wrote for a notebook document, if it is one."""
    folder = Path(app.env.mystnb_config.output_folder)
    path = folder.joinpath(*docname.split("/")).with_suffix(".ipynb")
    if not path.is_file():
        return None
    # MyST-NB writes one for every page it parses; a notebook is a page with a kernelspec
    source = Path(app.env.doc2path(docname))
    front = source.read_text(encoding="utf-8").split("\n---", 1)[0]
    return path if source.suffix == ".ipynb" or "kernelspec:" in front else None


def page_context(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any],
                 doctree: nodes.document | None) -> None:
    """Offer a notebook page's executed ``.ipynb`` in the theme's download menu.

    sphinx-book-theme lists ``_sources/<ipynb_source>`` when the context names one; the
    executed notebook is copied there, beside the page's Markdown source.
    """
    if doctree is None or pagename not in app.env.found_docs:
        return
    executed = _executed_notebook(app, pagename)
    if executed is None:
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def copy_stable(app: Sphinx, exception: Exception | None) -> None:
    """Copy every figure and table file to its stable path in the HTML output."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    for files in getattr(app.env, "kb_stable", {}).values():
        for target, source in files.items():
            src, dst = Path(source), out / target
            if not src.is_file():
                continue
            if not dst.exists() or dst.read_bytes() != src.read_bytes():
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)


def claim_role(name: str, rawtext: str, text: str, lineno: int, inliner: Any,
               options: dict | None = None, content: list | None = None) -> tuple[list, list]:
    """``{claim}`...```, what backs a directional sentence (:mod:`lab.claims`): renders as
    nothing, and is an error when its text names no backing or its notebook makes no such
    assertion, so a page cannot cite a check that does not exist."""
    try:
        backing = claims.parse(text)
    except claims.BadClaim as err:
        return [], [inliner.reporter.error(str(err), line=lineno)]
    srcdir = Path(inliner.document.settings.env.srcdir)
    if backing.asserted and not claims.asserted_in(srcdir, backing):
        return [], [inliner.reporter.error(
            f"{{claim}}`{text}`: {backing.notebook} makes no notebook.claim({backing.key!r}, ...). "
            "Fix: assert the sentence in that notebook, or name the claim it makes",
            line=lineno)]
    return [], []


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the events and directives."""
    app.connect("builder-inited", builder_inited)
    app.connect("env-get-outdated", get_outdated)
    app.connect("env-before-read-docs", before_read)
    app.connect("doctree-read", doctree_read)
    app.connect("doctree-read", report_notebook)
    app.connect("env-purge-doc", purge_doc)
    # before sphinx-book-theme's header buttons (priority 501), which read ipynb_source
    app.connect("html-page-context", page_context, priority=400)
    app.connect("build-finished", copy_stable)
    app.add_role_to_domain("glue", "text", CrossDocTextRole(), override=True)
    app.add_role("claim", claim_role)
    app.add_directive("kb-figure", KbFigure)
    app.add_directive("kb-table", KbTable)
    app.add_directive("kb-chapters", KbChapters)
    app.add_directive("kb-scorecard", KbScorecard)
    app.add_directive("kb-overview", KbOverview)
    return {"parallel_read_safe": False, "parallel_write_safe": True, "env_version": 2}
