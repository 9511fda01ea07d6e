"""What backs a sentence of the book that states a direction without pasting a computed phrase.

A sentence of ``book/`` that states a direction or a size ("falls", "fewer", "no change") either
pastes the phrase its notebook computes (``{glue:text}``) or carries a ``{claim}`` marker inline,
before its full stop, that says what backs it:

* ``{claim}`/notebooks/<chapter>.md::<key>``` -- the notebook asserts it with
  ``notebook.claim("<key>", ...)``, which fails the book's build when the data disagree;
* ``{claim}`<kind>``` with a kind of :data:`KINDS` -- the sentence states no result of ours;
* ``{claim}`not ours: <why>``` -- the same, with a reason of its own.

The marker lives beside the sentence it backs, so a chapter's page carries its own markers and
no shared file lists chapters' sentences. It renders as nothing; :mod:`lab.book.sphinxext` checks
each marker when the page is read, and ``tests/book/test_claims.py`` checks that every
directional sentence has one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MARKER = "{claim}`"

KINDS: dict[str, str] = {
    "author": "the author's or a reviewer's statement, not a result of ours",
    "code": "what the code or the toolchain does, not a measurement",
    "history": "the series' history",
    "rule": "states the verdict rule, not a result",
    "method": "what an emulator can show in general, stated before any data",
    "reading": ("our reading of the code, marked as such in the sentence; the counts it "
                "explains are glued"),
    "design": "a decision about the experiment, not a result",
}
"""The reasons a directional sentence states no result of ours, by the word its marker uses."""

NOT_OURS = "not ours:"
ASSERTED = re.compile(r"(/notebooks/[\w.-]+\.md)::([\w-]+)")


class BadClaim(ValueError):
    """A ``{claim}`` marker whose text is none of the three forms."""


@dataclass(frozen=True)
class Backing:
    """What one marker says backs its sentence: a notebook's assertion, or why the sentence
    states no result of ours."""

    why: str
    notebook: str | None = None
    key: str | None = None

    @property
    def asserted(self) -> bool:
        return self.key is not None


def parse(text: str) -> Backing:
    """The backing a marker's text names; :class:`BadClaim`, saying the three forms, if none."""
    text = " ".join(text.split())
    asserted = ASSERTED.fullmatch(text)
    if asserted:
        return Backing(f"asserted by {asserted[1]}", asserted[1], asserted[2])
    if text in KINDS:
        return Backing(KINDS[text])
    if text.startswith(NOT_OURS) and text[len(NOT_OURS):].strip():
        return Backing(text[len(NOT_OURS):].strip())
    raise BadClaim(
        f"{{claim}}`{text}` names no backing. Fix: write {{claim}}`/notebooks/<chapter>.md::<key>` "
        f"for a sentence its notebook asserts with notebook.claim(\"<key>\", ...), "
        f"{{claim}}`<kind>` with a kind of {', '.join(KINDS)}, or {{claim}}`not ours: <why>`")


def markers(text: str) -> list[str]:
    """The texts of every ``{claim}`` marker in a page's source."""
    return re.findall(r"\{claim\}`([^`]*)`", text)


def asserted_in(root: Path, backing: Backing) -> bool:
    """Whether the notebook a backing names (a path from ``root``) calls
    ``notebook.claim`` with its key."""
    source = root / backing.notebook.lstrip("/") if backing.notebook else None
    if source is None or not source.is_file():
        return False
    return re.search(rf"notebook\.claim\(\s*\"{re.escape(backing.key or '')}\"",
                     source.read_text(encoding="utf-8")) is not None
