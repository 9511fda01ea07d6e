"""The book's Sphinx extension: registers its parts and the events that tie them together.

* :mod:`lab.book.freshness`: notebooks re-execute when the data they read changes, notebooks
  are read before pages, and a page re-reads when a notebook it pastes from does;
* :mod:`lab.book.paste`: ``kb-figure``, ``kb-table`` and the cross-document ``{glue:text}``;
* :mod:`lab.book.pages`: ``kb-chapters``, ``kb-scorecard`` and ``kb-overview``, the shared
  pages made from the chapters found;
* here: the ``claim`` role, the marker that says what backs a directional sentence
  (:mod:`lab.book.claims`), checked as the page is read and rendered as nothing; each notebook
  page's executed ``.ipynb`` in the theme's download menu; one progress line per notebook
  (executed, with its time, or taken from the cache); the figures' stable paths.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

from lab.book import claims
from lab.book.freshness import before_read, citation, doctree_read, get_outdated, purge_doc
from lab.book.pages import KbChapters, KbOverview, KbScorecard
from lab.book.paste import CrossDocTextRole, KbFigure, KbTable


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
    """``{claim}`...```, what backs a directional sentence (:mod:`lab.book.claims`): renders as
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
