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
  are written as SVG, PDF and PNG, and the page links the SVG and PDF for slides and papers;
* adds ``kb-chapters`` (a toctree of the book's chapters, or of their notebooks, in the order
  :mod:`lab.chapters` finds them) and ``kb-scorecard`` (a section with the scorecard table of
  each chapter), so a new chapter appears in the book without an edit to a shared page.
"""

from __future__ import annotations

import base64
import hashlib
import json
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

from lab import chapters
from lab.notebook import TABLE_MIME

LOGGER = logging.getLogger(__name__)
STAMP_FILE = "kernelbook-data-digests.json"
FIGURE_MIMES = {"image/svg+xml": "svg", "application/pdf": "pdf", "image/png": "png"}


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
    getattr(env, "kb_digests", {}).pop(docname, None)
    getattr(env, "kb_pastes", {}).pop(docname, None)


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


class _PasteDirective(SphinxDirective):
    """Common part of kb-figure and kb-table: resolve ``/path/doc.md::key`` to glue data."""

    required_arguments = 1
    final_argument_whitespace = False
    has_content = True
    option_spec: ClassVar[dict[str, Any]] = {"name": lambda arg: arg.strip()}

    def glue_data(self) -> tuple[str, str, dict[str, Any]] | None:
        """(docname, key, mime bundle) of the argument, or ``None`` after a warning."""
        ref, sep, key = self.arguments[0].partition("::")
        if not sep:
            self._warn(f"'{self.arguments[0]}' is not of the form /notebooks/<doc>.md::<key>")
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
        if key not in data:
            self._warn(f"glue key {key!r} not found in {docname}: glue it in that notebook "
                       f"(lab.notebook.glue_*), or correct the key")
            return None
        return docname, key, data[key]["data"]

    def caption_nodes(self) -> list[nodes.Node]:
        """The directive's content parsed as the caption's inline nodes."""
        holder = nodes.Element()
        self.state.nested_parse(self.content, self.content_offset, holder)
        if not holder.children or not isinstance(holder[0], nodes.paragraph):
            self._warn("give the figure or table a caption paragraph as content")
            return []
        return list(holder[0].children)

    def _warn(self, message: str) -> None:
        LOGGER.warning(f"{self.name}: {message}", location=self.get_location())


class KbFigure(_PasteDirective):
    """A numbered figure from a notebook's glued matplotlib figure."""

    def run(self) -> list[nodes.Node]:
        found = self.glue_data()
        if found is None:
            return []
        docname, key, bundle = found
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
            return []
        srcdir = Path(self.env.srcdir)
        shown = written.get("svg") or written["png"]
        image = nodes.image(uri="/" + shown.relative_to(srcdir).as_posix(), alt=key)
        figure = nodes.figure("", image)
        figure += nodes.caption("", "", *self.caption_nodes())
        legend = nodes.paragraph(classes=["kb-downloads"])
        for ext in ("svg", "pdf"):
            if ext in written:
                target = "/" + written[ext].relative_to(srcdir).as_posix()
                ref = addnodes.download_reference("", "", reftarget=target, refdoc=self.env.docname)
                ref += nodes.literal(ext.upper(), ext.upper())
                legend += [ref, nodes.Text(" ")]
        figure += nodes.legend("", legend)
        self.add_name(figure)
        self.set_source_info(figure)
        return [figure]


class KbTable(_PasteDirective):
    """A numbered table from a notebook's glued :class:`lab.notebook.Table`."""

    def run(self) -> list[nodes.Node]:
        found = self.glue_data()
        if found is None:
            return []
        _, key, bundle = found
        if TABLE_MIME not in bundle:
            self._warn(f"glue key {key!r} is not a table; glue it with lab.notebook.glue_table")
            return []
        columns, rows = bundle[TABLE_MIME]["columns"], bundle[TABLE_MIME]["rows"]
        table = nodes.table(classes=["kb-table"])
        table += nodes.title("", "", *self.caption_nodes())
        group = nodes.tgroup(cols=len(columns))
        table += group
        group += [nodes.colspec(colwidth=1) for _ in columns]
        group += nodes.thead("", self._row(columns))
        group += nodes.tbody("", *(self._row(r) for r in rows))
        self.add_name(table)
        self.set_source_info(table)
        return [table]

    @staticmethod
    def _row(cells: list[str]) -> nodes.row:
        return nodes.row("", *(nodes.entry("", nodes.paragraph(text=str(c))) for c in cells))


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
    notebook under ``scorecard-<chapter>-table`` and ``-count``)."""

    required_arguments = 1  # the notebook that glues the tables, e.g. /notebooks/scorecard.md

    def run(self) -> list[nodes.Node]:
        """Render each chapter's section as MyST and parse it in place."""
        nb = self.arguments[0]
        lines: list[str] = []
        for c in chapters.book():
            lines += [f"(scorecard-{c.name})=", f"## {c.label}", "",
                      f":::{{kb-table}} {nb}::scorecard-{c.name}-table",
                      f":name: tab-scorecard-{c.name}",
                      f"{c.label}: the {{glue:text}}`{nb}::scorecard-{c.name}-count` rows of "
                      f"{{doc}}`/book/{c.name}`: every number cited there, the change each cited "
                      "pair implies and the mechanism rows, with ours where measured.", ":::",
                      ""]
        holder = nodes.section()
        self.state.nested_parse(StringList(lines, source="lab.chapters"), self.content_offset,
                                holder, match_titles=True)
        return list(holder.children)


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the events and directives."""
    app.connect("env-get-outdated", get_outdated)
    app.connect("env-before-read-docs", before_read)
    app.connect("doctree-read", doctree_read)
    app.connect("env-purge-doc", purge_doc)
    app.add_role_to_domain("glue", "text", CrossDocTextRole(), override=True)
    app.add_directive("kb-figure", KbFigure)
    app.add_directive("kb-table", KbTable)
    app.add_directive("kb-chapters", KbChapters)
    app.add_directive("kb-scorecard", KbScorecard)
    return {"parallel_read_safe": False, "parallel_write_safe": True, "env_version": 1}
