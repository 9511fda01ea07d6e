"""Whether the built book is up to date with everything it reads, without starting Sphinx.

An unchanged ``make html`` spends most of its time importing Sphinx and MyST-NB only to find
nothing to do. The digest here covers every file git lists in the checkout (tracked, and
untracked but not ignored: pages, notebooks, data, the code the notebooks import, the lock of
the Python environment), so equal digests mean the build would read the same bytes. The
Makefile records the digest of the inputs a build started from only once that build succeeded,
and removes it before building, so a failed or interrupted build is never taken as current.

``python -m lab.book.uptodate digest`` prints the digest of the checkout (nothing outside a git
checkout, which then always builds).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from lab import ROOT

STAMP = ".kb-inputs"
"""The file in the HTML output directory holding the digest the build was made from."""


def digest(root: Path = ROOT) -> str | None:
    """sha256 over the path and bytes of every file git lists, or None outside a checkout."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard",
                             "-z"], capture_output=True, check=False)
    if listed.returncode != 0:
        return None
    h = hashlib.sha256()
    for rel in sorted(p for p in listed.stdout.decode().split("\0") if p):
        path = root / rel
        if path.is_file():
            h.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def main(argv: list[str]) -> int:
    """``digest``: print the checkout's digest (empty outside a checkout)."""
    if argv != ["digest"]:
        print("usage: python -m lab.book.uptodate digest", file=sys.stderr)
        return 2
    print(digest() or "")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
