"""Where the pipeline keeps what is expensive to make and cheap to throw away.

Everything here lives under ``${XDG_CACHE_HOME:-~/.cache}/kernel-book/`` and never in the
repository: a toolchain root is about 1.5 GB and a build directory several hundred MB, and
neither belongs in git. ``KERNEL_BOOK_CACHE`` overrides the location, which the tests use to
keep their throw-away caches apart from the real one.

Snakemake's work directory (stamps, build artifacts, guest programs, boots until published) is
``work/`` in the cache, or ``KERNEL_BOOK_WORK``: on a cluster it is the one directory every
machine shares, while each machine keeps the rest of its cache at the same local path
(:mod:`lab.pipeline.nodecache`).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Return the pipeline's cache directory (not created here: callers create what they use)."""
    override = os.environ.get("KERNEL_BOOK_CACHE")
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kernel-book"


def sub(*parts: str) -> Path:
    """Return ``cache_root()/parts...``, created, so every stage finds its directory."""
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def work() -> Path:
    """Snakemake's work directory, created: ``KERNEL_BOOK_WORK``, or ``work/`` in the cache."""
    override = os.environ.get("KERNEL_BOOK_WORK")
    if not override:
        return sub("work")
    path = Path(override)
    path.mkdir(parents=True, exist_ok=True)
    return path
