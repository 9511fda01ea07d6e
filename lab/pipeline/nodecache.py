"""A machine's own caches, made on first use from what every machine can make alike.

On one machine the stamps' paths (the toolchain root, the base tree with its series commits, a
chapter's guest layer) always exist: the stage that wrote the stamp made them. On a cluster
(``make reproduce EXECUTOR=slurm``) the stamps live in the shared work directory
(``KERNEL_BOOK_WORK``) while each node keeps its caches at the same local path
(``KERNEL_BOOK_CACHE``), so a job can land on a node that has never made them. Before a stage
uses one, it calls :func:`ensure`, which makes what is missing with the stage's own code, from
the lock, the pinned tarball and the series, and checks the result is the one the stamp names:
the same root key, base commit and series commit (commits are deterministic: fixed author,
date and message). One lock per node's cache serialises two jobs of a node that would make the
same thing. The series commits and a chapter's guest layer are made by their own modules'
``ensure_*`` (:func:`lab.pipeline.series.ensure_commit`,
:func:`lab.pipeline.guestlayer.ensure_layer`) with the helpers here.
"""

from __future__ import annotations

import fcntl
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lab.command import StageError
from lab.pipeline import cachedir, source, toolchain
from lab.pipeline.stamps import RootStamp, SourceStamp


@contextmanager
def held() -> Iterator[Path]:
    """This machine's cache, locked for the making (its log beside the lock)."""
    locks = cachedir.sub("locks")
    with (locks / "node-cache.lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield locks / "node-cache.log"


def has_commit(tree: Path, commit: str) -> bool:
    """Whether ``tree`` is a git repository holding ``commit``."""
    return (tree / ".git").is_dir() and subprocess.run(
        ["git", "-C", str(tree), "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True, check=False).returncode == 0


def same(what: str, stamp: str, made: str, fix: str) -> None:
    """Refuse what this machine made where it is not what the stamp names."""
    if stamp != made:
        raise StageError(f"this machine made {what} {made}, but the stamp names {stamp}: {fix}")


def root(stamp: RootStamp) -> None:
    """The toolchain root the stamp names, made from the lock where this machine lacks it."""
    if Path(stamp.root).is_dir():
        return
    with held() as log:
        made = toolchain.create_root(log)
    same("the toolchain root", stamp.root, str(made),
          "the lock changed since the stamp was written, or KERNEL_BOOK_CACHE is not the same "
          "path on every machine")


def root_of(path: str | Path) -> Path:
    """The toolchain root the root stamp at ``path`` names, made here where it is missing:
    what a stage that runs a command in the root (inspect, accel, compare) needs."""
    stamp = RootStamp.read(path)
    root(stamp)
    return Path(stamp.root)


def base(stamp: SourceStamp) -> None:
    """The base tree and its base commit, unpacked where this machine lacks them (from the
    pinned tarball, ``KERNEL_TARBALL`` or ``KERNEL_SRC``, as the source stage does)."""
    if has_commit(Path(stamp.tree), stamp.commit):
        return
    with held() as log:
        made = source.prepare(log)
    same("the base tree", f"{stamp.tree} at {stamp.commit}", f"{made.tree} at {made.commit}",
          "every machine must see the same base (KERNEL_TARBALL or KERNEL_SRC, if set, at the "
          "same path) and KERNEL_BOOK_CACHE at the same path")
