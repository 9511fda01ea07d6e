"""Every sentence of book/ that states a direction or a size is computed, asserted or marked.

A sentence with a direction word (any comparative, "falls", "rises", "no change", "does not
follow", "tens of percent", ...) must either paste a phrase the notebook computes (a
``{glue:text}`` role in the same sentence) or carry a ``{claim}`` marker saying what backs it
(:mod:`lab.book.claims`): the notebook's assertion (``notebook.claim``, which fails the build when
the data disagree), or why the sentence states no result of ours. The markers sit in the pages,
beside their sentences, so no shared file lists a chapter's sentences.

The tests fail on a directional sentence with neither, on a marker that names no backing or an
assertion its notebook does not make, and on a marker left on a sentence that no longer states
a direction.
"""

from __future__ import annotations

import re

import pytest

from lab import ROOT
from lab.book import claims

WORDS = re.compile(
    r"\b((?:larg|small|few|high|low|fast|slow|(?<!no )long|short|bigg|great|wid|narrow|steadi|"
    r"cheap|quick|rar)er|(?<!once )(?<!one )more(?! importantly)|less|worse|better|"
    r"falls?|falling|fell|rises?|rising|rose|drops?|dropped|grows?|grew|grown|growing|"
    r"shrinks?|shrank|shrunk|shrinking|halves|halved|halving|doubles?|doubled|doubling|"
    r"triples?|tripled|increases?|increased|increasing|decreases?|decreased|decreasing|"
    r"reduces?|reduced|reducing|no change|unchanged|does not follow|follows it|"
    r"tens of percent|hundreds of percent|hundreds of times|few percent|byte-for-byte|"
    r"stays? flat)\b",
    re.IGNORECASE)
"""Words and phrases that state a direction or a size: every comparative ("larger", "fewer",
"more", "less", "slower", ...) and every verb of change ("rises", "drops", "halves", ...), so a
sentence that compares cannot slip through for want of a listed word. Idioms that compare
nothing ("no longer", "one more", "once more", "more importantly") are left out."""

GLUE = "{glue:text}`"


def sentences(text: str) -> list[str]:
    """The prose sentences of a MyST page: code blocks, directive blocks, tables and labels
    are left out, paragraphs joined and split after a full stop."""
    paragraphs, lines, fenced, directive = [], [], False, False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            continue
        if stripped.startswith(":::"):
            directive = stripped.startswith(":::{")
            continue
        skip = (fenced or directive or stripped.startswith(("|", "%", "#"))
                or re.fullmatch(r"\(.*\)=", stripped) is not None)
        if skip or not stripped:
            if lines:
                paragraphs.append(" ".join(lines))
                lines = []
            continue
        lines.append(stripped)
    if lines:
        paragraphs.append(" ".join(lines))
    return [s for p in paragraphs for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*{`(])", p)]


def pages() -> list[tuple[str, str]]:
    """(name, source) of every page of book/."""
    return [(page.name, page.read_text(encoding="utf-8"))
            for page in sorted((ROOT / "book").glob("*.md"))]


def typed_directional_sentences() -> list[tuple[str, str]]:
    """(page, sentence) of every sentence of book/ with a direction word and no glued phrase."""
    return [(name, sentence) for name, text in pages() for sentence in sentences(text)
            if WORDS.search(sentence) and GLUE not in sentence]


def test_every_typed_directional_sentence_is_backed() -> None:
    unbacked = [f"book/{page}: {sentence}" for page, sentence in typed_directional_sentences()
                if claims.MARKER not in sentence]
    assert not unbacked, (
        "directional sentences typed without a glued phrase or a {claim} marker. Fix: glue the "
        "phrase the notebook computes, or put {claim}`/notebooks/<chapter>.md::<key>` (with "
        "notebook.claim(\"<key>\", ...) in that notebook) or {claim}`<kind>` before the "
        "sentence's full stop (lab/book/claims.py):\n" + "\n".join(unbacked))


def test_every_marker_names_a_backing_that_exists() -> None:
    bad = []
    for name, text in pages():
        for marker in claims.markers(text):
            try:
                backing = claims.parse(marker)
            except claims.BadClaim as err:
                bad.append(f"book/{name}: {err}")
                continue
            if backing.asserted and not claims.asserted_in(ROOT, backing):
                bad.append(f"book/{name}: {backing.notebook} makes no "
                           f"notebook.claim({backing.key!r}, ...)")
    assert not bad, "\n".join(bad)


def test_every_marker_marks_a_directional_sentence() -> None:
    """A marker left behind when its sentence was rewritten without a direction would vouch
    for nothing."""
    stale = [f"book/{name}: {sentence}" for name, text in pages() for sentence in sentences(text)
             if claims.MARKER in sentence and not WORDS.search(sentence)]
    assert not stale, "{claim} markers on sentences that state no direction; drop them:\n" + (
        "\n".join(stale))


@pytest.mark.parametrize("text", [
    "code", "not ours: what a median is", "/notebooks/qpw.md::qpw-init-rt-wait-lock"])
def test_a_marker_of_each_form_parses(text: str) -> None:
    assert claims.parse(text).why


@pytest.mark.parametrize("text", ["", "ours", "not ours:", "/notebooks/qpw.md", "notebooks/x::k"])
def test_a_marker_of_no_form_is_refused_with_the_forms(text: str) -> None:
    with pytest.raises(claims.BadClaim, match="Fix: write"):
        claims.parse(text)


def test_an_asserted_marker_needs_the_claim_in_its_notebook(tmp_path) -> None:
    notebook = tmp_path / "notebooks" / "x.md"
    notebook.parent.mkdir()
    notebook.write_text('notebook.claim(\n    "x-falls", holds, "it falls")\n')
    assert claims.asserted_in(tmp_path, claims.parse("/notebooks/x.md::x-falls"))
    assert not claims.asserted_in(tmp_path, claims.parse("/notebooks/x.md::x-rises"))
    assert not claims.asserted_in(tmp_path, claims.parse("/notebooks/y.md::x-falls"))


@pytest.mark.parametrize(("text", "flagged"), [
    ("The average wait time does not follow: under emulation a waiter waits.", True),
    ("The hold time falls by {glue:text}`/notebooks/x.md::k`.", False),
    ("```text\nthe value falls\n```", False),
    ("an interval tens of percent wide cannot tell", True),
    ("The patched kernel takes the lock fewer times.", True),
    ("Its hold time is larger with the series.", True),
    ("The two classes no longer serialise on one lock.", False),
    ("This is one more reason, and more importantly a rule.", False),
    ("The lock is taken less often{claim}`code`. It falls.", True),
])
def test_the_scan_flags_typed_directions_only(text: str, flagged: bool) -> None:
    hits = [s for s in sentences(text)
            if WORDS.search(s) and GLUE not in s and claims.MARKER not in s]
    assert bool(hits) == flagged
