"""Find the book's chapters: one directory each, ``chapters/<name>/``, found, never listed.

A chapter directory holds everything of a chapter that is not a page, a notebook, a patch or
data (the shape of LKP-tests' ``programs/<name>/``): ``chapter.yaml`` (title, place in the book,
and the experiment: variants x workloads x repetitions), ``configs/`` (its config fragments),
``guest/`` (workloads and the Makefile of its guest programs), ``parse.py`` (``PARSERS``: its
output parsers), ``analysis.py`` (its analysis and ``judge``), and ``tests/``. Shared code asks
this module for chapters and names none, so adding a chapter touches only its own files.

``KERNEL_BOOK_CHAPTERS`` (colon-separated directories) adds further places to look, after
``chapters/``: the pipeline tests keep their failure chapters there.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from lab import ROOT, yamlfile
from lab.command import StageError

CHAPTERS_DIR = ROOT / "chapters"
SCHEMA_FILE = ROOT / "workflow" / "schemas" / "chapter.schema.yaml"
SHARED_CONFIGS = ROOT / "configs"
CITED_DIR = ROOT / "data" / "cited"

Parser = Callable[[str, str], list[tuple[str, float]]]
"""A parser takes a workload's output text and a label for errors, returns (metric, value)."""


@cache
def load_schema(path: Path) -> dict[str, Any]:
    """A JSON Schema of the project's (YAML under ``workflow/schemas/``), read once."""
    return yamlfile.load(path.read_text())


def schema() -> dict[str, Any]:
    """The chapter schema (``workflow/schemas/chapter.schema.yaml``)."""
    return load_schema(SCHEMA_FILE)


@cache
def _validator(schema_file: Path) -> Any:
    """A validator of ``schema_file``, made once per process.

    jsonschema offers an ``iri`` format check through ``rfc3987_syntax`` when that is installed
    (JupyterLab's server brings it), and importing it compiles 39 grammars: 1.2 s in every
    pipeline stage, notebook and test worker. No validator here checks formats, so that optional
    import is declined while this is the process's first import of jsonschema, and only then."""
    declined = "jsonschema" not in sys.modules and "rfc3987_syntax" not in sys.modules
    if declined:
        sys.modules["rfc3987_syntax"] = None  # an import of it raises ImportError
    import jsonschema
    if declined:
        del sys.modules["rfc3987_syntax"]  # whoever imports it later gets it
    return jsonschema.Draft202012Validator(load_schema(schema_file))


def check_schema(data: Any, schema_file: Path, where: Path, most: int, fix: str = "") -> None:
    """Refuse ``data`` that ``schema_file`` does not describe: one line per key at fault (the
    first ``most``), naming ``where`` and the schema, then ``fix`` when given. One message for
    a chapter.yaml and a run's manifest alike."""
    errors = sorted(_validator(schema_file).iter_errors(data),
                    key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"  {'.'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}"
                 for e in errors[:most]]
        raise StageError(f"{where}: does not match {schema_file.relative_to(ROOT)}:\n"
                         + "\n".join(lines) + (f"\n{fix}" if fix else ""))


@dataclass(frozen=True)
class Chapter:
    """One chapter directory and its ``chapter.yaml``."""

    name: str
    dir: Path
    meta: dict[str, Any] = field(compare=False)

    @property
    def file(self) -> Path:
        """``chapter.yaml``: the chapter's definition."""
        return self.dir / "chapter.yaml"

    @property
    def title(self) -> str:
        """The chapter's title as the book and the scorecard show it."""
        return str(self.meta["title"])

    @property
    def label(self) -> str:
        """The short name figures and the scorecard use (``label:``, else the title)."""
        return str(self.meta.get("label", self.title))

    @property
    def order(self) -> int:
        """Position in the book (chapters without one come last, by name)."""
        return int(self.meta.get("order", 1000))

    @property
    def in_book(self) -> bool:
        """False for the pipeline's own chapters (smoke), which have no page."""
        return bool(self.meta.get("book", True))

    @property
    def has_experiment(self) -> bool:
        """Whether ``chapter.yaml`` declares variants to build and boot."""
        return bool(self.meta.get("variants"))

    @property
    def variants(self) -> dict[str, dict[str, Any]]:
        """Every variant, those its ``matrix:`` makes included (:func:`expand`)."""
        return expand(self.meta)[0]

    def path(self, rel: str) -> Path:
        """A path named in ``chapter.yaml``: relative to the chapter directory, or to the
        repository when it starts with ``/`` (a test chapter may use the smoke workload)."""
        return (ROOT / rel.lstrip("/")) if rel.startswith("/") else (self.dir / rel)

    def fragment(self, name: str) -> Path:
        """A config fragment: ``<chapter>/configs/<name>.config``, else the shared
        ``configs/<name>.config``; a name ending in ``.config`` is a path (:meth:`path`)."""
        if name.endswith(".config"):
            return self.path(name)
        for where in (self.dir / "configs", SHARED_CONFIGS):
            if (where / f"{name}.config").is_file():
                return where / f"{name}.config"
        return self.dir / "configs" / f"{name}.config"

    @property
    def series(self) -> Path:
        """The chapter's quilt series directory (``patches/<chapter>`` unless it says)."""
        return ROOT / self.meta.get("series", f"patches/{self.name}")

    def module(self, stem: str) -> ModuleType | None:
        """The chapter's ``<stem>.py`` (``parse``, ``analysis``) as a module, or None."""
        return _module(self.dir, self.name, stem)

    def parsers(self) -> dict[str, Parser]:
        """Parser name -> function: the chapter's ``PARSERS`` over the shared ones."""
        from lab.parse import PARSERS
        mod = self.module("parse")
        return {**PARSERS, **(getattr(mod, "PARSERS", {}) if mod else {})}

    def judge(self) -> Callable[..., Any] | None:
        """``analysis.judge(cited, runs)`` when the chapter compares its numbers, else None."""
        mod = self.module("analysis")
        return getattr(mod, "judge", None) if mod else None

    def cited_ids(self) -> set[str]:
        """The ids of ``data/cited/<chapter>.yaml`` (empty when the chapter cites nothing)."""
        path = CITED_DIR / f"{self.name}.yaml"
        if not path.is_file():
            return set()
        raw = yamlfile.load(path.read_text()) or {}
        return {str(e.get("id")) for e in raw.get("entries", []) if isinstance(e, dict)}


@cache
def _module(directory: Path, name: str, stem: str) -> ModuleType | None:
    path = directory / f"{stem}.py"
    if not path.is_file():
        return None
    qualified = f"kb_chapters.{name.replace('-', '_')}.{stem}"
    spec = importlib.util.spec_from_file_location(qualified, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = mod
    spec.loader.exec_module(mod)
    return mod


def search_path() -> list[Path]:
    """Where chapters are looked for: ``chapters/``, then ``KERNEL_BOOK_CHAPTERS``."""
    extra = [Path(p).resolve() for p in os.environ.get("KERNEL_BOOK_CHAPTERS", "").split(os.pathsep)
             if p]
    return [CHAPTERS_DIR, *extra]


def _read(directory: Path) -> Chapter:
    """Read and validate one chapter directory (schema and every file it names)."""
    file = directory / "chapter.yaml"
    try:
        meta = yamlfile.load(file.read_text())
    except yamlfile.YAMLError as exc:
        raise StageError(f"{file}: not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise StageError(f"{file}: must be a mapping (title:, variants:, ...)")
    check_schema(meta, SCHEMA_FILE, file, 8)
    chapter = Chapter(directory.name, directory, meta)
    check_references(chapter)
    return chapter


def expand(meta: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The variants of ``variants:`` and those ``matrix:`` makes from them, and what is wrong
    with the matrix. Each family (a key of ``matrix:``) makes ``<variant>-<key>`` of every
    variant in its ``of``, with its ``with`` over the variant's own settings, and follows the
    last variant it is made from, so the boots keep the order the file reads in."""
    written = {name: dict(v or {}) for name, v in (meta.get("variants") or {}).items()}
    made: dict[str, dict[str, dict[str, Any]]] = {}
    problems = []
    for key, family in (meta.get("matrix") or {}).items():
        for name in family["of"]:
            if name not in written:
                problems.append(f"matrix.{key}.of: {name!r} is not a variant")
            elif f"{name}-{key}" in written:
                problems.append(f"matrix.{key}: {name}-{key} is a variant already")
            else:
                last = max(family["of"], key=lambda n: list(written).index(n)
                           if n in written else -1)
                made.setdefault(last, {})[f"{name}-{key}"] = {**written[name],
                                                              **(family["with"] or {})}
    out: dict[str, dict[str, Any]] = {}
    for name, v in written.items():
        out[name] = v
        out.update(made.get(name, {}))
    return out, problems


def check_references(ch: Chapter) -> None:
    """Every file, parser and cited id ``chapter.yaml`` names exists; fail naming file and key.

    Runs before any build or boot, so a typo costs seconds, not a 15-minute boot."""
    m, where = ch.meta, ch.file
    if not ch.has_experiment:
        return
    variants, problems = expand(m)
    if not (ch.series / "series").is_file():
        problems.append(f"series: {ch.series.relative_to(ROOT)}/series does not exist")
    frags = list(m.get("fragments", []))
    for name, v in variants.items():
        frags += [(f, f"variants.{name}.fragments") for f in (v or {}).get("fragments", [])]
    for item in frags:
        frag, key = item if isinstance(item, tuple) else (item, "fragments")
        if not ch.fragment(frag).is_file():
            problems.append(f"{key}: config fragment {frag!r} not found (looked in "
                            f"{ch.dir.relative_to(ROOT) if ch.dir.is_relative_to(ROOT) else ch.dir}"
                            "/configs/ and configs/)")
    tools = m.get("tools")
    if tools and not (ch.path(tools["dir"]) / "Makefile").is_file():
        problems.append(f"tools.dir: {ch.path(tools['dir'])}/Makefile does not exist")
    programs = (tools or {}).get("programs", [])
    problems += [f"variants.{name}.initrd: {v['initrd']!r} is not one of tools.programs "
                 f"{programs}" for name, v in variants.items()
                 if (v or {}).get("initrd") and v["initrd"] not in programs]
    problems += [f"variants.{name}: a build expected to fail (build_fails) cannot boot; drop "
                 "boot: true" for name, v in variants.items()
                 if (v or {}).get("build_fails") and (v or {}).get("boot")]
    names = [w["name"] for w in m["workloads"]]
    problems += [f"variants.{name}.workloads: {w!r} is not one of workloads {names}"
                 for name, v in variants.items() for w in v.get("workloads", [])
                 if w not in names]
    parsers = ch.parsers()
    cited = ch.cited_ids()
    for i, w in enumerate(m["workloads"]):
        if not ch.path(w["script"]).is_file():
            problems.append(f"workloads[{i}].script: {ch.path(w['script'])} does not exist")
        parser = w.get("parser", "keyvalue")
        if parser not in parsers:
            problems.append(f"workloads[{i}].parser: unknown parser {parser!r}; this chapter "
                            f"has {sorted(parsers)} (add it to {ch.dir.name}/parse.py PARSERS)")
        for metric, ids in (w.get("cited") or {}).items():
            for cid in ([ids] if isinstance(ids, str) else ids.values()):
                if cid not in cited:
                    problems.append(f"workloads[{i}].cited.{metric}: {cid!r} is not an id of "
                                    f"data/cited/{ch.name}.yaml")
    problems += _compare_problems(ch, parsers)
    if problems:
        raise StageError(f"{where}:\n  " + "\n  ".join(problems))


def _compare_problems(ch: Chapter, parsers: dict[str, Parser]) -> list[str]:
    """What is wrong with ``compare:``: a missing script or parser, a pair naming a variant
    that does not exist or never boots, or a workload name it would produce twice."""
    m = ch.meta
    problems = []
    workloads = {w["name"] for w in m["workloads"]}
    taken: set[tuple[str, str]] = set()
    for i, c in enumerate(m.get("compare", [])):
        if not ch.path(c["script"]).is_file():
            problems.append(f"compare[{i}].script: {ch.path(c['script'])} does not exist")
        if c.get("parser", "keyvalue") not in parsers:
            problems.append(f"compare[{i}].parser: unknown parser {c.get('parser')!r}; this "
                            f"chapter has {sorted(parsers)}")
        for j, pair in enumerate(c["pairs"]):
            for side in pair:
                if side not in ch.variants:
                    problems.append(f"compare[{i}].pairs[{j}]: no variant {side!r}")
                    continue
                v = ch.variants[side]
                if v.get("build_fails") or v.get("boot") is False:
                    problems.append(f"compare[{i}].pairs[{j}]: variant {side!r} never boots")
            name = f"{c['name']}-vs-{pair[0]}"
            if name in workloads or (pair[1], name) in taken:
                problems.append(f"compare[{i}].pairs[{j}]: {pair[1]}'s workload {name!r} is "
                                "taken (by a workload, or by this pair listed twice)")
            if pair[0] == pair[1]:
                problems.append(f"compare[{i}].pairs[{j}]: compares {pair[0]} with itself")
            taken.add((pair[1], name))
    return problems


def _inputs() -> str:
    """A digest of the path and bytes of every file :func:`discover` reads or checks: the
    chapter directories on the search path, the shared configs, the cited files, the series
    and the schema (about 1.5 MB, a few milliseconds; contents rather than modification times,
    which two writes within one clock tick can share)."""
    digest = hashlib.sha256()
    for base in [*search_path(), SHARED_CONFIGS, CITED_DIR, ROOT / "patches"]:
        for top, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                path = Path(top) / name
                try:
                    data = path.read_bytes()
                except FileNotFoundError:  # removed while we walked: the next call sees it
                    continue
                digest.update(f"{path}\0{len(data)}\0".encode())
                digest.update(data)
    digest.update(SCHEMA_FILE.read_bytes())
    return digest.hexdigest()


_discovered: tuple[str, dict[str, Chapter]] | None = None
"""The last :func:`discover` result and the inputs it was read from."""


def discover() -> dict[str, Chapter]:
    """Every chapter on :func:`search_path`, validated, in book order (``order``, then name).

    Read again only when a file it depends on changed (:func:`_inputs`): a reparse or a
    notebook asks for its chapter once per boot, and validating every chapter (the schema, the
    cited files' YAML) each time cost most of their run time."""
    global _discovered
    inputs = _inputs()
    if _discovered is None or _discovered[0] != inputs:
        _discovered = (inputs, _discover())
    return dict(_discovered[1])


def _discover() -> dict[str, Chapter]:
    found: dict[str, Chapter] = {}
    for base in search_path():
        if not base.is_dir():
            continue
        for directory in sorted(p for p in base.iterdir() if p.is_dir()):
            if not (directory / "chapter.yaml").is_file():
                if any(directory.glob("*.py")) or (directory / "configs").is_dir():
                    raise StageError(f"{directory}: a chapter directory needs chapter.yaml "
                                     "(copy one from chapters/ and edit it)")
                continue
            if directory.name in found:
                raise StageError(f"{directory}: chapter {directory.name!r} is also "
                                 f"{found[directory.name].dir}")
            found[directory.name] = _read(directory)
    return dict(sorted(found.items(), key=lambda kv: (kv[1].order, kv[0])))


def get(name: str) -> Chapter:
    """One chapter by name; the error lists the chapters that exist."""
    every = discover()
    if name not in every:
        raise StageError(f"no chapter {name!r}: chapters are {', '.join(every)} "
                         f"(directories with a chapter.yaml under {CHAPTERS_DIR})")
    return every[name]


def book() -> list[Chapter]:
    """The chapters with a page in the book, in book order."""
    return [c for c in discover().values() if c.in_book]


def select(spec: str) -> list[Chapter]:
    """``CHAPTER=a,b`` or ``CHAPTER=all`` (every book chapter that has an experiment)."""
    if spec.strip() == "all":
        return [c for c in book() if c.has_experiment]
    chosen = [get(n.strip()) for n in spec.split(",") if n.strip()]
    if not chosen:
        raise StageError("CHAPTER= is empty; name a chapter, several (a,b) or all")
    for c in chosen:
        if not c.has_experiment:
            raise StageError(f"{c.file}: chapter {c.name} has no experiment yet (no variants:)")
    return chosen
