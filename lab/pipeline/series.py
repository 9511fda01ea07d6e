"""Patch series: turn ``patches/<chapter>/`` into a baseline commit and a patched commit.

A chapter either *applies* a series that is not upstream (baseline = base, patched = base +
series) or *reverts* one that 7.2.13 already contains (baseline = base - series, patched =
base). ``patches/<chapter>/meta.yaml`` says which (``mode: apply`` or ``mode: revert``); its
``instrument:`` patches go on both trees, and ``trees:`` names further trees as patch lists.

The commits are built with ``git apply --cached`` into a private index, never touching the
working tree, so the files' modification times only change when a build checks a commit out;
that is what lets one build directory serve both variants with an incremental rebuild. The
commit identity and date are fixed, so the same base and series give the same commit ids.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lab import from_repo, yamlfile
from lab.command import StageError, quote, run
from lab.pipeline import nodecache, source
from lab.pipeline.experiment import KernelJob
from lab.pipeline.source import git_env
from lab.pipeline.stamps import SeriesStamp, SourceStamp, stage

TREES = ("baseline", "patched")


@dataclass(frozen=True)
class Series:
    """A chapter's patches: the series in order, how it is used, and the optional extras.

    ``instrument`` patches (measurement-only, e.g. a TSC probe) go on top of both baseline and
    patched; ``trees`` names further trees as explicit patch lists (e.g. a baseline without
    changes that were merged before the series), which a variant selects with ``tree:``.
    """

    directory: Path
    patches: tuple[Path, ...]
    mode: str
    instrument: tuple[Path, ...] = ()
    trees: dict[str, tuple[Path, ...]] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        """One hash over the mode and every patch's name and bytes, series, extras and trees."""
        h = hashlib.sha256(self.mode.encode())
        named = [("series", p) for p in self.patches]
        named += [("instrument", p) for p in self.instrument]
        named += [(t, p) for t, ps in sorted(self.trees.items()) for p in ps]
        for group, p in named:
            h.update(f"{group}:{p.relative_to(self.directory)}".encode() + b"\0" + p.read_bytes())
        return h.hexdigest()

    @property
    def files(self) -> list[Path]:
        """Every patch file the chapter uses (the workflow's inputs)."""
        every = [*self.patches, *self.instrument, *(p for ps in self.trees.values() for p in ps)]
        return sorted(set(every))

    def steps(self, tree: str) -> list[tuple[Path, bool]]:
        """The patches that make ``tree`` from the base, in order, with ``reverse`` flags."""
        if tree in self.trees:
            return [(p, False) for p in self.trees[tree]]
        extra = [(p, False) for p in self.instrument]
        if tree == "baseline":
            reverted = [(p, True) for p in reversed(self.patches)] if self.mode == "revert" else []
            return reverted + extra
        if tree == "patched":
            applied = [(p, False) for p in self.patches] if self.mode == "apply" else []
            return applied + [x for x in extra if x not in applied]
        have = ", ".join([*TREES, *sorted(self.trees)])
        raise StageError(f"tree {tree!r} is not defined for {self.directory} (have: {have}); "
                         f"name it under trees: in {self.directory / 'meta.yaml'}")


def _listed(directory: Path, names: list[str], where: Path) -> tuple[Path, ...]:
    paths = []
    for name in names:
        path = directory / name
        if not path.is_file():
            raise StageError(f"{where} names {name}, which is not in {directory}")
        paths.append(path)
    return tuple(paths)


def load(directory: Path) -> Series:
    """Read ``series`` (quilt style: one patch per line, ``#`` comments) and ``meta.yaml``
    (``mode: apply|revert``, optional ``instrument:`` list and ``trees:`` mapping)."""
    series_file = directory / "series"
    if not series_file.is_file():
        raise StageError(f"{series_file} is missing; list the chapter's patches in it, one a line")
    meta_file = directory / "meta.yaml"
    meta = (yamlfile.load(meta_file.read_text()) if meta_file.is_file() else None) or {}
    mode = meta.get("mode", "apply")
    if mode not in ("apply", "revert"):
        raise StageError(f"{meta_file}: mode must be 'apply' or 'revert', not {mode!r}")
    names = [line.split("#", 1)[0].split()[0] for line in series_file.read_text().splitlines()
             if line.split("#", 1)[0].split()]
    trees = meta.get("trees") or {}
    if not isinstance(trees, dict) or not all(isinstance(v, list) for v in trees.values()):
        raise StageError(f"{meta_file}: trees must map a tree name to a list of patch files")
    return Series(
        directory, _listed(directory, names, series_file), mode,
        _listed(directory, list(meta.get("instrument") or []), meta_file),
        {name: _listed(directory, list(ps), meta_file) for name, ps in trees.items()},
    )


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` hunk of a patch: the file it changes and where."""

    path: str
    number: int
    old_start: int
    new_start: int
    header: str


def hunks(patch: Path) -> list[Hunk]:
    """List the hunks of a unified diff, numbered per file from 1 as ``patch`` reports them."""
    out: list[Hunk] = []
    path = ""
    count = 0
    for line in patch.read_text(errors="replace").splitlines():
        if line.startswith("+++ "):
            target = line[4:].split("\t")[0]
            path = target[2:] if target.startswith("b/") else target
            count = 0
        elif line.startswith("--- ") and not path:
            source = line[4:].split("\t")[0]
            path = source[2:] if source.startswith("a/") else source
        elif (m := re.match(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@", line)) and path:
            count += 1
            out.append(Hunk(path, count, int(m[1]), int(m[2]), line))
        elif line.startswith("diff --git "):
            path = ""
    return out


def explain_failure(patch: Path, stderr: str, reverse: bool) -> str:
    """Name the file and hunk that failed, from ``git apply``'s ``patch failed: F:L`` line."""
    m = re.search(r"patch failed: (\S+):(\d+)", stderr)
    if m:
        path, line = m[1], int(m[2])
        for h in hunks(patch):
            start = h.new_start if reverse else h.old_start
            if h.path == path and start == line:
                return f"file {path}, hunk #{h.number} ({h.header})"
        return f"file {path}, hunk at line {line}"
    m = re.search(r"error: (\S+): (does not exist in index|already exists in index|"
                  r"No such file or directory)", stderr)
    if m:
        return f"file {m[1]}: {m[2]}"
    return "see git's message below"


def _git(tree: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return run(["git", "-C", tree, *args], env=env, what=f"git {args[0]}").stdout.strip()


def commit_for(tree: Path, base_commit: str, series: Series, variant: str) -> str:
    """Return the commit of the named tree (baseline, patched, or one of meta.yaml's trees),
    creating it once.

    Fails with the patch, the file, the hunk and the command that reproduces the failure.
    """
    steps = series.steps(variant)
    if not steps:
        return base_commit
    ref = f"refs/kb/{series.directory.name}/{variant}-{base_commit[:12]}-{series.sha256[:16]}"
    existing = run(["git", "-C", tree, "rev-parse", "--verify", "-q", ref], check=False)
    if existing.returncode == 0 and existing.stdout.strip():
        return existing.stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**git_env(), "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(tree, "read-tree", base_commit, env=env)
        for i, (patch, reverse) in enumerate(steps):
            flags = ["-R"] if reverse else []
            argv = ["git", "-C", str(tree), "apply", "--cached", "-v", *flags,
                    str(patch.resolve())]
            try:
                run(argv, env=env, what="git apply")
            except StageError as exc:
                raise StageError(
                    f"{patch} does not {'revert' if reverse else 'apply'} to "
                    f"{base_commit[:12]}: {explain_failure(patch, str(exc), reverse)}\n"
                    f"reproduce: {reproduce(tree, base_commit, steps[:i], patch, flags)}\n"
                    f"{exc}"
                ) from None
        tree_id = _git(tree, "write-tree", env=env)
    message = f"kb: {series.directory.name} {variant} ({len(steps)} patches, {series.mode})"
    commit = _git(tree, "commit-tree", tree_id, "-p", base_commit, "-m", message, env=git_env())
    _git(tree, "update-ref", ref, commit)
    return commit


def reproduce(tree: Path, base_commit: str, before: list[tuple[Path, bool]], patch: Path,
              flags: list[str]) -> str:
    """A shell command that replays the series up to ``patch`` in a scratch index (the cached
    tree's files stay as they are) and shows git's complaint about ``patch``."""
    idx = "GIT_INDEX_FILE=$(mktemp -u)"
    git = quote(["git", "-C", str(tree)])
    steps = [f"export {idx}", f"{git} read-tree {base_commit}"]
    steps += [f"{git} apply --cached {quote([*(['-R'] if rev else []), str(p.resolve())])}"
              for p, rev in before]
    steps.append(f"{git} apply --cached --check -v {quote([*flags, str(patch.resolve())])}")
    return " && ".join(steps)


@contextmanager
def tree_lock(tree: Path) -> Iterator[None]:
    """Hold the source tree for one checkout+configure or checkout+build at a time."""
    lock = tree.with_name(tree.name + ".lock")
    with lock.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def checkout(tree: Path, commit: str) -> None:
    """Check ``commit`` out; git rewrites only files that differ, so make rebuilds only those."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    run(["git", "-C", tree, "checkout", "-q", "--force", "--detach", commit], env=env,
        what="git checkout")


def ensure_commit(base: SourceStamp, stamp: SeriesStamp, directory: Path) -> None:
    """A series commit, made again in this machine's base tree where it is missing (a cluster
    node with caches of its own, :mod:`lab.pipeline.nodecache`); commits are deterministic, so
    it must come out as the stamp's."""
    tree = Path(base.tree)
    if nodecache.has_commit(tree, stamp.commit):
        return
    with nodecache.held():
        made = commit_for(tree, base.commit, load(directory), stamp.tree)
    nodecache.same(f"the {stamp.tree} commit", stamp.commit, made,
                   "the series changed since the stamp was written; run `make reproduce` again")


def cmd_series(a: argparse.Namespace) -> None:
    """Make the commit of one tree (baseline, patched or a named one) of the chapter's series."""
    job: KernelJob = a.job
    base = SourceStamp.read(a.base)
    nodecache.base(base)
    ser = load(from_repo(job.series))
    with stage("series", f"{job.chapter}/{a.tree}", None):
        commit = commit_for(Path(base.tree), base.commit, ser, a.tree)
        stamp = SeriesStamp(
            tree=a.tree, commit=commit, mode=ser.mode, sha256=ser.sha256,
            patches={str(p.relative_to(ser.directory)): source.sha256_file(p)
                     for p in ser.files},
            steps=[{"patch": str(p.relative_to(ser.directory)), "reverse": rev}
                   for p, rev in ser.steps(a.tree)])
    stamp.write(a.out)
