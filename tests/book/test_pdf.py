"""The book as one PDF: Sphinx's LaTeX builder and XeLaTeX build it, it holds every chapter,
and its figures are vector graphics (the PDF renderings of the figures, not bitmaps).

The LaTeX build reuses the session's HTML build's Sphinx environment, as ``make pdf`` after
``make html`` does: it reads no page again. Reading does not depend on the builder (MyST-NB picks
each output's format after reading; the book's extension looks at the builder only when the
build has finished), so a PDF made without an HTML build first reads the same pages.

Needs Debian's TeX and poppler-utils (``make pdf-deps``, as root, which ``make test`` runs
first); ``make test-pdf`` runs only this.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest

from lab import ROOT, chapters
from tests.book import unavailable
from tests.book.conftest import sphinx

pytestmark = pytest.mark.pdf

TOOLS = ("latexmk", "xelatex", "pdftotext", "pdfimages")


def heading(name: str) -> str:
    """A chapter's title as its page's first heading gives it, as plain text."""
    text = (ROOT / "book" / f"{name}.md").read_text(encoding="utf-8")
    title = next(line[2:] for line in text.splitlines() if line.startswith("# "))
    return title.replace("`", "").strip()


def plain(text: str) -> str:
    """Text with ligatures undone and all runs of white space made one space."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text))


@pytest.fixture(scope="module")
def pdf(built: Path) -> Path:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        unavailable(f"{', '.join(missing)} not found: as root, make pdf-deps")
    result = sphinx(built, "latex")
    assert result.returncode == 0, result.stdout + result.stderr
    latex = built / "_build" / "latex"
    done = subprocess.run(["make", "-s", "-C", str(latex), "all-pdf", "LATEXMKOPTS=-silent"],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return latex / "kernel-book.pdf"


def test_pdf_has_every_chapter(pdf: Path) -> None:
    text = plain(subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True,
                                check=True).stdout)
    for chapter in chapters.book():
        assert plain(heading(chapter.name)) in text, chapter.name
    assert "Scorecard" in text


def test_pdf_figures_are_vector_graphics(pdf: Path) -> None:
    listing = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    bitmaps = listing[2:]  # two header lines, then one line per raster image
    assert not bitmaps, bitmaps[:10]
