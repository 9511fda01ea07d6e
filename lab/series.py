"""Patch series: turn ``patches/<chapter>/`` into a baseline commit and a patched commit.

A chapter either *applies* a series that is not upstream (baseline = base, patched = base +
series) or *reverts* one that 7.2.13 already contains (baseline = base - series, patched =
base). ``patches/<chapter>/meta.yaml`` says which (``mode: apply`` or ``mode: revert``).

The commits are built with ``git apply --cached`` into a private index, never touching the
working tree, so the files' modification times only change when a build checks a commit out;
that is what lets one build directory serve both variants with an incremental rebuild. The
commit identity and date are fixed, so the same base and series give the same commit ids.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from lab.command import StageError, quote, run
from lab.source import git_env

TREES = ("baseline", "patched")


@dataclass(frozen=True)
class Series:
    """A chapter's patches in order, and whether they are applied or reverted."""

    directory: Path
    patches: tuple[Path, ...]
    mode: str

    @property
    def sha256(self) -> str:
        """One hash over the series file, the mode and every patch's bytes, in order."""
        h = hashlib.sha256(self.mode.encode())
        for p in self.patches:
            h.update(p.name.encode() + b"\0" + p.read_bytes())
        return h.hexdigest()


def load(directory: Path) -> Series:
    """Read ``series`` (quilt style: one patch per line, ``#`` comments) and ``meta.yaml``."""
    series_file = directory / "series"
    if not series_file.is_file():
        raise StageError(f"{series_file} is missing; list the chapter's patches in it, one a line")
    meta_file = directory / "meta.yaml"
    meta = yaml.safe_load(meta_file.read_text()) if meta_file.is_file() else {}
    mode = (meta or {}).get("mode", "apply")
    if mode not in ("apply", "revert"):
        raise StageError(f"{meta_file}: mode must be 'apply' or 'revert', not {mode!r}")
    patches = []
    for line in series_file.read_text().splitlines():
        name = line.split("#", 1)[0].split()
        if not name:
            continue
        path = directory / name[0]
        if not path.is_file():
            raise StageError(f"{series_file} names {name[0]}, which is not in {directory}")
        patches.append(path)
    return Series(directory, tuple(patches), mode)


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
    """Return the commit of ``variant`` (baseline or patched), creating it once.

    Fails with the patch, the file, the hunk and the command that reproduces the failure.
    """
    if variant not in TREES:
        raise StageError(f"unknown tree {variant!r}; a variant's tree is one of {TREES}")
    untouched = "baseline" if series.mode == "apply" else "patched"
    if variant == untouched or not series.patches:
        return base_commit
    ref = f"refs/kb/{series.directory.name}/{variant}-{base_commit[:12]}-{series.sha256[:16]}"
    existing = run(["git", "-C", tree, "rev-parse", "--verify", "-q", ref], check=False)
    if existing.returncode == 0 and existing.stdout.strip():
        return existing.stdout.strip()
    reverse = series.mode == "revert"
    patches = list(reversed(series.patches)) if reverse else list(series.patches)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**git_env(), "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(tree, "read-tree", base_commit, env=env)
        for patch in patches:
            argv = ["git", "-C", str(tree), "apply", "--cached", "-v",
                    *(["-R"] if reverse else []), str(patch.resolve())]
            try:
                run(argv, env=env, what="git apply")
            except StageError as exc:
                verb = "revert" if reverse else "apply"
                repro = quote(["git", "-C", str(tree), "checkout", "--detach", base_commit]) + \
                    " && " + quote(["git", "-C", str(tree), "apply", "--check", "-v",
                                    *(["-R"] if reverse else []), str(patch.resolve())])
                raise StageError(
                    f"{patch} does not {verb} to {base_commit[:12]}: "
                    f"{explain_failure(patch, str(exc), reverse)}\n"
                    f"reproduce: {repro}\n{exc}"
                ) from None
        tree_id = _git(tree, "write-tree", env=env)
    message = f"kb: {series.directory.name} {variant} ({series.mode} {len(patches)} patches)"
    commit = _git(tree, "commit-tree", tree_id, "-p", base_commit, "-m", message, env=git_env())
    _git(tree, "update-ref", ref, commit)
    return commit


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
