"""Where a measured figure or table comes from, and how to cite and re-measure it.

A notebook declares the runs a figure or table draws on (:func:`lab.book.notebook.glue_provenance`);
this module turns them into a provenance record: per chapter, the exact ``make reproduce``
command and every run id with the sha256 of its ``manifest.json`` (which holds the sha256 of
every file of the run, so the record pins the data byte for byte). The Sphinx extension renders
the record as a caption suffix and a "cite / reproduce" box, with the book's citation at the
commit it was built from (:func:`book_citation`).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import ROOT, chapters, yamlfile
from lab.analysis.runs import RUNS_DIR, Run, machine_label

MIME = "application/vnd.kernelbook.provenance+json"
"""The mime type under which :func:`lab.book.notebook.glue_provenance` glues a record."""

RUN_ID = re.compile(r"\d{8}T\d{6}Z[\w.-]*")
"""A run id as the pipeline names it (``20261122T054812Z-auto-icount``, ``...-reparse1``)."""


def run_ids(texts: Iterable[Any]) -> list[str]:
    """Every run id named in ``texts`` (a pooled run is named ``a + b``; a judged row may name
    several), sorted and without repeats; non-strings are skipped."""
    return sorted({m for t in texts if isinstance(t, str) for m in RUN_ID.findall(t)})


def manifest_sha256(chapter: str, run_id: str, runs_dir: Path = RUNS_DIR) -> str:
    """sha256 of ``data/runs/<chapter>/<run_id>/manifest.json``."""
    path = runs_dir / chapter / run_id / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such run. Fix: name a committed run of {chapter} "
                                f"(ls {runs_dir / chapter})")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _declared(chapter: str) -> tuple[list[str], int, dict[str, str]]:
    """A chapter's variants in file order, its repetitions and each variant's accelerator."""
    ch = chapters.get(chapter)
    meta, raw = ch.meta, ch.variants
    accel = {name: str(v.get("accel") or meta.get("accel", "auto")) for name, v in raw.items()}
    return list(raw), int(meta.get("reps", 3)), accel


def reproduce_command(chapter: str, variants: Iterable[str], manifests: Iterable[dict]) -> str:
    """The ``make reproduce`` line that re-measures ``variants`` as the runs did.

    ``VARIANTS=`` is left out when the variants are the chapter's whole matrix, ``REPS=`` when
    the runs used the repetitions ``chapter.yaml`` declares today, and ``ACCEL=`` when every
    variant ran on the accelerator its ``chapter.yaml`` names.
    """
    declared, reps, accel = _declared(chapter)
    wanted = set(variants)
    manifests = list(manifests)
    parts = [f"make reproduce CHAPTER={chapter}"]
    if wanted and not set(declared) <= wanted:
        ordered = [v for v in declared if v in wanted] + sorted(wanted - set(declared))
        parts.append("VARIANTS=" + ",".join(ordered))
    used_reps = {int(m.get("experiment", {}).get("reps", reps)) for m in manifests}
    if used_reps and max(used_reps) != reps:
        parts.append(f"REPS={max(used_reps)}")
    overridden = {v.get("accel_requested") for m in manifests
                  for name, v in m.get("variants", {}).items()
                  if name in wanted and name in accel
                  and v.get("accel_requested") not in (None, accel[name])}
    if len(overridden) == 1:
        parts.append(f"ACCEL={overridden.pop()}")
    return " ".join(parts)


def record(used: Mapping[str, Run] | Iterable[Run | str], variants: Iterable[str] | None = None,
           chapter: str | None = None, runs_dir: Path = RUNS_DIR) -> dict[str, Any]:
    """The provenance record of a figure or table, JSON-ready.

    ``used`` is what the figure draws on: a mapping variant -> run (as
    :func:`lab.analysis.runs.latest_per_variant` or :func:`lab.analysis.runs.pooled_per_variant`
    return it), or
    runs, or run ids (strings, with ``chapter``). ``variants`` narrows it to the variants the
    figure shows; by default a mapping contributes its keys and a run all its variants.

    Returns ``{"sources": [{"chapter", "command", "runs": [{"id", "manifest", "sha256",
    "variants", "date", "book_commit", "book_dirty", "machine"}]}]}``, one source per chapter.
    """
    only = None if variants is None else {str(v) for v in variants}
    pairs: list[tuple[str, str, str | None]] = []  # (chapter, run id, variant or None: all)
    items = used.items() if isinstance(used, Mapping) else ((None, u) for u in used)
    for variant, item in items:
        if isinstance(item, Run):
            owner, ids = item.chapter, run_ids([item.run_id]) or [item.run_id]
        else:
            if chapter is None:
                raise ValueError(f"run id {item!r} given without chapter=")
            owner, ids = chapter, run_ids([item]) or [str(item)]
        pairs += [(owner, run_id, variant) for run_id in ids]
    sources = []
    for owner in sorted({p[0] for p in pairs}):
        runs = []
        shown: set[str] = set()
        manifests = []
        for run_id in sorted({p[1] for p in pairs if p[0] == owner}):
            path = runs_dir / owner / run_id / "manifest.json"
            sha = manifest_sha256(owner, run_id, runs_dir)
            manifest = json.loads(path.read_text())
            mapped = {p[2] for p in pairs if p[0] == owner and p[1] == run_id}
            names = set(manifest.get("variants", {})) if None in mapped else mapped
            names = names if only is None else names & only
            if not names:
                continue
            shown |= names
            manifests.append(manifest)
            book = manifest.get("book", {})
            runs.append({
                "id": run_id, "manifest": f"data/runs/{owner}/{run_id}/manifest.json",
                "sha256": sha, "variants": sorted(names), "date": manifest.get("date", ""),
                "book_commit": book.get("commit", ""), "book_dirty": bool(book.get("dirty")),
                "machine": machine_label(manifest.get("host", {})),
            })
        if runs:
            sources.append({"chapter": owner,
                            "command": reproduce_command(owner, shown, manifests),
                            "runs": runs})
    return {"sources": sources}


def summary(rec: dict[str, Any]) -> str:
    """One line naming the runs of a record, as a caption ends: ``Runs: a, b (chapter).``"""
    ids = [r["id"] for s in rec.get("sources", []) for r in s["runs"]]
    return "Runs: " + ", ".join(ids) + "." if ids else ""


@dataclass(frozen=True)
class Citation:
    """The book as one citable thing: ``CITATION.cff`` and the commit it was built from."""

    title: str
    authors: tuple[str, ...]
    commit: str
    """The full commit id, or "" when the book was not built from a git checkout."""
    dirty: bool
    year: str

    @property
    def state(self) -> str:
        """The commit as a sentence names it; a change to it makes pages re-render."""
        if not self.commit:
            return "not built from a git checkout"
        return f"commit {self.commit}" + (" with uncommitted changes" if self.dirty else "")

    def bibtex(self, label: str, runs: list[str]) -> str:
        """A BibTeX entry for the book at this commit, naming the figure and its runs."""
        key = "kernelbook-" + (self.commit[:12] if self.commit else "uncommitted")
        note = [f"{label}", self.state]
        if runs:
            note.append("runs " + ", ".join(runs))
        authors = " and ".join("{" + a + "}" for a in self.authors)
        return "\n".join([
            f"@misc{{{key},",
            f"  title  = {{{self.title}}},",
            f"  author = {{{authors}}},",
            *([f"  year   = {{{self.year}}},"] if self.year else []),
            f"  note   = {{{'; '.join(note)}}},",
            "}",
        ])

    def cff(self, label: str, runs: list[str]) -> str:
        """A ``CITATION.cff`` reference for the book at this commit, naming the figure."""
        lines = ["cff-version: 1.2.0", f"title: {json.dumps(self.title)}", "type: software",
                 "authors:", *(f"  - name: {json.dumps(a)}" for a in self.authors)]
        if self.commit:
            lines.append(f"commit: {self.commit}")
        lines.append(f"# {label}" + ("; runs " + ", ".join(runs) if runs else ""))
        return "\n".join(lines)


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=30, check=False)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def book_citation(root: Path = ROOT) -> Citation:
    """The book's citation from ``root/CITATION.cff`` and ``git rev-parse HEAD`` in ``root``.

    A checkout with uncommitted changes to tracked files says so, since the commit alone
    would then not rebuild the same book; a copy outside git cites no commit.
    """
    cff_path = root / "CITATION.cff"
    cff = yamlfile.load(cff_path.read_text()) if cff_path.is_file() else {}
    title = str(cff.get("title", "The reproducible kernel-performance book"))
    authors = tuple(str(a.get("name") or " ".join(filter(None, (a.get("given-names"),
                                                               a.get("family-names")))))
                    for a in cff.get("authors", [])) or ("The kernel-performance book authors",)
    inside = _git(root, "rev-parse", "--show-toplevel")
    if inside is None or Path(inside).resolve() != root.resolve():
        return Citation(title, authors, "", False, "")
    commit = _git(root, "rev-parse", "HEAD") or ""
    dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no"))
    year = _git(root, "log", "-1", "--format=%cd", "--date=format:%Y") or ""
    return Citation(title, authors, commit, dirty, year)
