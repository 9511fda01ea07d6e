"""The built book as a reader meets it: every page loaded from disk in headless Chromium.

Each page of the HTML book is opened over ``file://`` at a desktop width (1400 px) and a phone
width (420 px). The test fails on console errors and uncaught exceptions, images that did not
load, links to files or anchors that do not exist, tables wider than the main column at the
desktop width or clipped on the phone, figures whose text a phone would shrink below legibility,
and any request that would leave the machine (such requests are blocked, and counted). It
writes a screenshot of each chapter at both widths to ``_build/screenshots/<page>-<width>-<n>.png``
(or ``$KERNEL_BOOK_SCREENSHOTS``; a long page in tiles of 12000 px) for a person to look at.

Chromium is Debian's package: ``make browser-deps`` installs it (as root); ``make test`` runs
that first.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from lab import ROOT, chapters
from lab.book.figures import FONT_SIZE, LEGEND_SIZE
from tests.book import chromium, unavailable

DESKTOP, PHONE = 1400, 420
SCREENSHOTS = Path(os.environ.get("KERNEL_BOOK_SCREENSHOTS", ROOT / "_build" / "screenshots"))

IMAGES = """(async () => {
  const images = [...document.images];
  await Promise.all(images.map(i => { i.loading = 'eager'; return i.decode().catch(() => 0); }));
  return images.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.currentSrc || i.src);
})()"""

LINKS = """(() => ({
  ids: [...document.querySelectorAll('[id]')].map(e => e.id)
       .concat([...document.querySelectorAll('a[name]')].map(e => e.name)),
  hrefs: [...document.querySelectorAll('a[href]')].map(a => a.href),
  sources: [...document.querySelectorAll('link[href], script[src], img[src]')]
       .map(e => e.href || e.src),
}))()"""

# A table "overflows" when it is wider than the box it sits in; at the desktop width none may,
# on the phone a table may be wider than the screen only inside a box that scrolls, and that
# box must itself fit on the screen. The page as a whole never scrolls sideways.
LAYOUT = """((STRICT) => {
  const page = document.documentElement;
  const scrolls = e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX);
  const tables = [...document.querySelectorAll('article table')].map(t => {
    let box = t.parentElement;
    while (box && box !== document.body && !scrolls(box)) box = box.parentElement;
    const holder = box && box !== document.body ? box : null;
    const r = t.getBoundingClientRect();
    const article = t.closest('article').getBoundingClientRect();
    const caption = t.querySelector('caption');
    return {
      name: t.id || (caption ? caption.textContent.trim().slice(0, 50) : t.className),
      strict: t.matches(STRICT),
      width: Math.round(r.width),
      room: Math.round(holder ? holder.clientWidth : article.width),
      scrolls: holder !== null,
      holderRight: holder ? Math.round(holder.getBoundingClientRect().right) : null,
    };
  });
  return {pageWidth: page.scrollWidth, viewport: page.clientWidth, tables};
})"""


FIGURES = """[...document.querySelectorAll('article figure img')].map(i => ({
  id: i.closest('figure').id,
  scale: i.getBoundingClientRect().width / i.naturalWidth,
  fits: i.closest('figure').getBoundingClientRect().right <= innerWidth + 1,
}))"""
"""How much each figure is scaled down on the page (1: shown at its own size), and whether its
box (which may scroll) fits the screen."""

SMALLEST_TEXT_PX = 10
"""The smallest text, in CSS pixels, a figure may show on a phone."""

OVERVIEW = "fig-overview"
"""The scorecard page's figure of every row: drawn to fit a phone, with no text under
lab.book.figures.FONT_SIZE; every other figure's smallest text is a legend at
lab.book.figures.LEGEND_SIZE."""

SCREEN = (1400, 1000)
"""The desktop screen the landing page's panels and tallies must fit on, in CSS pixels."""

LANDING = """(() => {
  const grid = document.querySelector('div.kb-overview div.kb-panels');
  if (!grid) return null;
  const box = grid.getBoundingClientRect();
  const shown = [...grid.querySelectorAll('div.kb-panel img')]
      .filter(i => getComputedStyle(i).display !== 'none')
      .map(i => ({src: i.currentSrc || i.src,
                  scale: i.getBoundingClientRect().width / i.naturalWidth}));
  return {top: box.top + scrollY, width: box.width, height: box.height,
          panels: grid.querySelectorAll('div.kb-panel').length, shown,
          tallies: [...grid.querySelectorAll('div.kb-tally')].map(t => t.innerText)};
})()"""
"""Where the landing page's panels stand, how large they are, which panel images show (one of
each panel's two renderings) at what scale, and the text of each panel's tallies."""


LOCAL = ("file", "data", "blob", "about")
"""URL schemes that stay on the machine; a request to any other is a failure."""

STRICT = "table.kb-table, table.docutils"
"""The book's own tables, which must fit the main column at the desktop width (a notebook's
DataFrame output may scroll, as in Jupyter)."""

MEASURE = f"{LAYOUT}({json.dumps(STRICT)})"


def _messages(events: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(console errors and failed loads, requests that would leave the machine)."""
    errors, network = [], []
    for event in events:
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                   for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            errors.append(details.get("exception", {}).get("description") or details["text"])
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            if "ERR_BLOCKED_BY_CLIENT" not in entry["text"]:  # counted below as network
                errors.append(f"{entry['text']} {entry.get('url', '')}".strip())
        elif method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if urlsplit(url).scheme not in LOCAL:
                network.append(url)
    return errors, network


def _layout_problems(layout: dict[str, Any], strict: bool) -> list[str]:
    """Tables that overflow: any, if ``strict``; else those not inside a scrolling box that
    fits the screen. The page itself must never scroll sideways."""
    found = []
    if layout["pageWidth"] > layout["viewport"] + 1:
        found.append(f"the page is {layout['pageWidth']} px wide in a {layout['viewport']} px "
                     "viewport")
    for t in layout["tables"]:
        too_wide = t["width"] > t["room"] + 1
        if strict and t["strict"] and too_wide:
            found.append(f"table {t['name']!r} is {t['width']} px wide in {t['room']} px")
        elif too_wide and not (t["scrolls"] and t["holderRight"] <= layout["viewport"] + 1):
            found.append(f"table {t['name']!r} ({t['width']} px) is clipped, not scrolled")
    return found


def _pages(html: Path) -> list[Path]:
    """Every page of the book, without the top-level redirect to the index."""
    return [p for p in sorted(html.rglob("*.html"))
            if not p.relative_to(html).parts[0].startswith("_")  # the theme's own files
            and 'http-equiv="refresh"' not in p.read_text(encoding="utf-8")[:2000]]


def _screenshot_names() -> dict[str, str]:
    """Page path (relative to the HTML root) -> screenshot name, for each chapter and the
    pages around them."""
    names = {f"book/{c.name}.html": c.name for c in chapters.book()}
    return {"book/index.html": "index", "book/scorecard.html": "scorecard", **names}


@pytest.fixture(scope="module")
def html(request: pytest.FixtureRequest) -> Path:
    """The HTML book to load: ``$KERNEL_BOOK_HTML`` (e.g. ``_build/html`` after ``make html``),
    else the session's scratch build."""
    chosen = os.environ.get("KERNEL_BOOK_HTML")
    if chosen:
        return Path(chosen).resolve()
    return request.getfixturevalue("built") / "_build" / "html"


@pytest.fixture(scope="module")
def report(html: Path) -> Iterator[dict[str, Any]]:
    """Load every page at both widths once; the tests below read what went wrong."""
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)  # no tile of an older, longer page stays
    executable = chromium.find()
    if executable is None:
        unavailable("Chromium not found: install Debian's chromium (as root: make browser-deps)"
                    " or set KERNEL_BOOK_CHROMIUM")
    found: dict[str, list[Any]] = {k: [] for k in
                                   ("console", "images", "links", "desktop", "phone",
                                    "network", "screenshots", "pages", "figures", "landing")}
    ids: dict[Path, set[str]] = {}
    hrefs: dict[Path, list[str]] = {}
    shots = _screenshot_names()
    with chromium.Chromium(executable) as browser:
        page = browser.open(DESKTOP)
        for path in _pages(html):
            rel = path.relative_to(html).as_posix()
            found["pages"].append(rel)
            page.events.clear()
            page.resize(*SCREEN)
            page.navigate(path.as_uri())
            found["images"] += [f"{rel}: {src}" for src in page.evaluate(IMAGES)]
            links = page.evaluate(LINKS)
            ids[path.resolve()] = set(links["ids"])
            hrefs[path] = links["hrefs"]
            found["desktop"] += [f"{rel}: {p}" for p in
                                 _layout_problems(page.evaluate(MEASURE), strict=True)]
            if rel == "book/index.html":
                page.evaluate(IMAGES)
                found["landing"].append({"viewport": DESKTOP, **(page.evaluate(LANDING) or {})})
                shot = page.send("Page.captureScreenshot", format="png")["data"]
                first = SCREENSHOTS / f"index-{SCREEN[0]}x{SCREEN[1]}.png"
                first.parent.mkdir(parents=True, exist_ok=True)
                first.write_bytes(base64.b64decode(shot))
                found["screenshots"].append(first)
            if rel in shots:
                found["screenshots"] += page.screenshot(SCREENSHOTS / f"{shots[rel]}-{DESKTOP}")
            page.resize(PHONE)
            browser.settle(0.3)
            if rel == "book/index.html":
                found["landing"].append({"viewport": PHONE, **(page.evaluate(LANDING) or {})})
            found["phone"] += [f"{rel}: {p}" for p in
                               _layout_problems(page.evaluate(MEASURE), strict=False)]
            found["figures"] += [{"page": rel, **f} for f in page.evaluate(FIGURES)]
            if rel in shots:
                found["screenshots"] += page.screenshot(SCREENSHOTS / f"{shots[rel]}-{PHONE}")
            errors, network = _messages(page.events)
            found["console"] += [f"{rel}: {e}" for e in errors]
            found["network"] += [f"{rel}: {u}" for u in network]
        page.close()
    for path, links in hrefs.items():
        rel = path.relative_to(html).as_posix()
        for href in links:
            parts = urlsplit(href)
            if parts.scheme != "file":
                continue
            target = Path(unquote(parts.path)).resolve()
            if not target.exists():
                found["links"].append(f"{rel}: {href} (no such file)")
            elif parts.fragment and target in ids and unquote(parts.fragment) not in ids[target]:
                found["links"].append(f"{rel}: {href} (no such anchor)")
    yield found


def test_every_page_was_loaded(report: dict[str, Any]) -> None:
    pages = set(report["pages"])
    assert "book/index.html" in pages
    assert {f"book/{c.name}.html" for c in chapters.book()} <= pages
    assert {f"notebooks/{c.name}.html" for c in chapters.book()} <= pages


def test_no_console_errors(report: dict[str, Any]) -> None:
    assert not report["console"], report["console"][:20]


def test_every_image_loads(report: dict[str, Any]) -> None:
    assert not report["images"], report["images"][:20]


def test_internal_links_and_anchors_resolve(report: dict[str, Any]) -> None:
    assert not report["links"], report["links"][:20]


def test_tables_fit_the_main_column_at_desktop_width(report: dict[str, Any]) -> None:
    assert not report["desktop"], report["desktop"][:20]


def test_tables_scroll_not_clip_on_a_phone(report: dict[str, Any]) -> None:
    assert not report["phone"], report["phone"][:20]


def test_nothing_leaves_the_machine(report: dict[str, Any]) -> None:
    assert not report["network"], report["network"][:20]


def test_screenshots_of_every_chapter(report: dict[str, Any]) -> None:
    for name in _screenshot_names().values():
        for width in (DESKTOP, PHONE):
            shot = SCREENSHOTS / f"{name}-{width}-1.png"
            assert shot in report["screenshots"], shot
            assert shot.stat().st_size > 10_000, shot
            assert shot.read_bytes().startswith(b"\x89PNG"), shot


def test_the_landing_panels_fit_one_screen(report: dict[str, Any]) -> None:
    """On a 1400 x 1000 screen the landing page's panels, with their tallies, are no larger
    than the screen and start on it; each chapter has one panel, and each shows one image."""
    desktop = next(m for m in report["landing"] if m["viewport"] == DESKTOP)
    assert desktop["panels"] == len(chapters.book()) + 1  # and the cell that says how to read
    assert desktop["width"] <= SCREEN[0] and desktop["height"] <= SCREEN[1], desktop
    assert desktop["top"] < SCREEN[1] / 2, desktop
    assert len(desktop["shown"]) == len(chapters.book())
    assert all("-panel.svg" in i["src"] and i["scale"] > 0.99 for i in desktop["shown"])


def test_the_landing_tallies_keep_the_kinds_apart(report: dict[str, Any]) -> None:
    """Each panel's tallies name the kinds of rows, and a check is only ever passed or failed,
    never in a count of support."""
    for measured in report["landing"]:
        assert len(measured["tallies"]) == len(chapters.book())
        for tally in measured["tallies"]:
            assert tally.startswith("Claims: "), tally
            for line in tally.splitlines():
                if line.startswith("Checks: "):
                    assert set(re.findall(r"\d+ ([a-z ]+?)(?:,|$)", line[8:])) <= {
                        "passed", "failed"}, line


def test_the_landing_panels_are_legible_on_a_phone(report: dict[str, Any]) -> None:
    """On a phone each panel shows its rendering for a phone's width, scaled so that its text
    stays at least SMALLEST_TEXT_PX high."""
    phone = next(m for m in report["landing"] if m["viewport"] == PHONE)
    assert len(phone["shown"]) == len(chapters.book())
    for image in phone["shown"]:
        assert "-panel-phone.svg" in image["src"], image
        assert FONT_SIZE * 4 / 3 * image["scale"] >= SMALLEST_TEXT_PX, image
    assert phone["width"] <= PHONE


def test_figures_are_legible_on_a_phone(report: dict[str, Any]) -> None:
    """On a phone no figure shrinks its smallest text below SMALLEST_TEXT_PX (a point is 4/3
    px): a wide figure keeps its size and scrolls inside its box, which fits the screen."""
    assert any(f["id"] == OVERVIEW for f in report["figures"]), "no landing-page figure"
    small = []
    for f in report["figures"]:
        points = FONT_SIZE if f["id"] == OVERVIEW else LEGEND_SIZE
        if points * 4 / 3 * f["scale"] < SMALLEST_TEXT_PX or not f["fits"]:
            small.append(f"{f['page']}: {f['id']} scaled to {f['scale']:.2f}"
                         + ("" if f["fits"] else ", its box wider than the screen"))
    assert not small, small[:10]
