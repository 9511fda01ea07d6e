"""Which notebooks and pages a build must read again: the data they read, not only their code.

MyST-NB caches executed notebooks with jupyter-cache, which keys on code only: a changed file
under ``data/`` would otherwise leave a stale result in the book. Each notebook declares what
it reads (``kernelbook.reads`` front matter, glob patterns relative to the repository root);
the digest of those files is stamped per notebook, and a notebook whose digest changed is
marked outdated and its cache record dropped, so exactly the notebooks that read a changed file
re-execute. Notebooks are read before pages, and a page that pastes from a re-read notebook is
re-read too, so glued numbers are never stale in an incrementally built page.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.util import logging

from lab import yamlfile
from lab.book import provenance

LOGGER = logging.getLogger(__name__)


STAMP_FILE = "kernelbook-data-digests.json"


def declared_reads(source: Path) -> list[str]:
    """The glob patterns a notebook declares in ``kernelbook: {reads: [...]}`` front matter."""
    text = source.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return []
    front = yamlfile.load(text.split("---", 2)[1]) or {}
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


def citation(app: Sphinx) -> provenance.Citation:
    """The book's citation for this build (``CITATION.cff`` and the commit), read once."""
    if not hasattr(app, "kb_citation"):
        app.kb_citation = provenance.book_citation(Path(app.srcdir))
    return app.kb_citation
