"""The book builds with warnings as errors, pastes real numbers, and re-executes on data change.

One scratch copy of the sources is built three times: cold, warm with no change, and after a
cited value changed; the jupyter-cache records show which notebooks executed each time.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit
from xml.etree import ElementTree

import yaml
from jupyter_cache import get_cache

from lab import chapters
from lab.analysis import cited
from lab.book.figures import LEGEND_SIZE
from lab.book.freshness import declared_reads
from tests.book.conftest import sphinx

BOOK = [c.name for c in chapters.book()]


def executions(src: Path) -> dict[str, str]:
    """Notebook file name -> creation time of its jupyter-cache record."""
    cache = get_cache(src / "_build" / ".jupyter_cache")
    return {Path(r.uri).name: r.created.isoformat() for r in cache.list_cache_records()}


def page(src: Path, name: str) -> str:
    return (src / "_build" / "html" / "book" / f"{name}.html").read_text(encoding="utf-8")


def test_every_chapter_shows_cited_figure_and_table(built: Path) -> None:
    for chapter in BOOK:
        html = page(built, chapter)
        assert f'id="fig-{chapter}-cited"' in html, chapter
        assert f'id="tab-{chapter}-cited"' in html, chapter
        figures = built / "_build" / "figures" / "notebooks" / chapter
        for ext in ("svg", "pdf", "png"):
            figure = figures / f"{chapter}-cited-fig.{ext}"
            assert figure.stat().st_size > 1000, figure
        assert (figure.parent / f"{chapter}-cited-fig.pdf").read_bytes().startswith(b"%PDF")
        frame = cited.to_frame([cited.load_chapter(cited.CITED_DIR / f"{chapter}.yaml")])
        table = html[html.index(f'id="tab-{chapter}-cited"'):]
        for value in frame["value"]:
            assert value.replace("~", "") in table.replace("~", ""), (chapter, value)


def glued_texts(src: Path, notebook: str) -> set[str]:
    """Every text a notebook glued with ``notebook.glue_text``, as the page pastes it."""
    path = src / "_build" / "jupyter_execute" / "notebooks" / f"{notebook}.glue.json"
    outputs = json.loads(path.read_text(encoding="utf-8")).values()
    texts = (ast.literal_eval(o["data"]["text/plain"]) for o in outputs
             if set(o.get("data", {})) == {"text/plain"})
    return {t for t in texts if isinstance(t, str)}


def test_pasted_numbers_are_the_data(built: Path) -> None:
    pasted = re.compile(r'<span class="pasted-text">([^<]*)</span>')
    total = len(cited.to_frame(cited.load_all()))
    assert str(total) in pasted.findall(page(built, "index"))
    for chapter in BOOK:
        values = [unescape(v) for v in pasted.findall(page(built, chapter))]
        assert all(v.strip() for v in values), f"{chapter}: an empty pasted number"
        chapter_file = cited.CITED_DIR / f"{chapter}.yaml"
        frame = cited.to_frame([cited.load_chapter(chapter_file)])
        known = set(frame["value"]) | set(frame["row"])
        # Measured numbers, verdicts and environment facts come from the chapter's notebook,
        # which reads only data/; a pasted text must be one of the texts it glued.
        known |= glued_texts(built, chapter)
        assert set(values) <= known | {str(total)}, f"{chapter}: pasted text not from data"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"] or "")
        if tag == "a" and values.get("href"):
            self.hrefs.append(values["href"] or "")


def test_internal_links_and_references_resolve(built: Path) -> None:
    html_dir = built / "_build" / "html"
    parsed: dict[Path, _Links] = {}
    for path in html_dir.rglob("*.html"):
        links = _Links()
        links.feed(path.read_text(encoding="utf-8"))
        parsed[path] = links
    broken = []
    for path, links in parsed.items():
        for href in links.hrefs:
            parts = urlsplit(href)
            if parts.scheme or href.startswith(("mailto:", "javascript:")):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if not target.exists():
                broken.append(f"{path.name}: {href}")
            elif parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else set()
                if parts.fragment not in ids:
                    broken.append(f"{path.name}: {href}")
    assert not broken, broken[:20]
    numrefs = [p for p in parsed if "std-numref" in p.read_text(encoding="utf-8")]
    assert len(numrefs) >= len(BOOK)


NO_MEASUREMENT = ("scorecard-margins-table", "pipeline-rulegraph")
"""Figures and tables of a notebook that reads runs but show none of them: the verdict rule's
margins, the pipeline's rule graph."""


def test_every_measured_figure_and_table_declares_its_runs(built: Path) -> None:
    """A figure or table pasted from a notebook that reads committed runs has a provenance
    record (so a caption with run ids and a cite / reproduce box), except the cited-numbers
    figure and table every chapter starts with, which show no measurement."""
    pasted = re.compile(r"\{kb-(?:figure|table)\}\s+/notebooks/([\w-]+)\.md::([\w-]+)")
    missing = []
    for md in sorted((built / "book").glob("*.md")):
        for notebook, key in pasted.findall(md.read_text(encoding="utf-8")):
            reads = declared_reads(built / "notebooks" / f"{notebook}.md")
            if not any(r.startswith("data/runs") for r in reads) or key in (
                    f"{notebook}-cited-fig", f"{notebook}-cited-table", *NO_MEASUREMENT):
                continue
            glue = json.loads((built / "_build" / "jupyter_execute" / "notebooks"
                               / f"{notebook}.glue.json").read_text())
            if f"{key}-provenance" not in glue:
                missing.append(f"{md.name}: {key}")
    assert not missing


def test_every_legend_is_legible(built: Path) -> None:
    """Every legend of every figure the book shows is set at least at lab.book.figures.LEGEND_SIZE
    (in an SVG of the book, points are SVG units)."""
    small = []
    svgs = sorted((built / "_build" / "figures").rglob("*.svg"))
    assert svgs
    for svg in svgs:
        root = ElementTree.parse(svg).getroot()
        for group in root.iter("{http://www.w3.org/2000/svg}g"):
            if not group.get("id", "").startswith("legend_"):
                continue
            for text in group.iter("{http://www.w3.org/2000/svg}text"):
                size = re.search(r"font-size: ([\d.]+)px", text.get("style", ""))
                if size and float(size[1]) < LEGEND_SIZE:
                    small.append(f"{svg.name}: {text.text!r} at {size[1]}")
    assert not small, small[:10]


def test_the_landing_page_shows_every_chapter_at_a_glance(built: Path) -> None:
    """The index carries one panel per chapter, in book order: a link to the chapter and to its
    scorecard section, its headline figure (drawn for a desktop and for a phone) and the tallies
    of each kind of row, checks counted only as passed or failed; then a short cite / reproduce
    box with one make reproduce line per chapter. The every-row figure is on the scorecard
    page, with its full box."""
    html_dir = built / "_build" / "html"
    html = (html_dir / "book" / "index.html").read_text(encoding="utf-8")
    overview = html[html.index('class="kb-overview'):]
    panels = overview.split('class="kb-panel docutils container"')[1:]
    assert len(panels) == len(BOOK)
    for chapter, panel in zip(chapters.book(), panels, strict=True):
        assert f'href="{chapter.name}.html"' in panel, chapter.name
        assert f'href="scorecard.html#scorecard-{chapter.name}"' in panel, chapter.name
        assert f"scorecard-{chapter.name}-panel.svg" in panel, chapter.name
        assert f"scorecard-{chapter.name}-panel-phone.svg" in panel, chapter.name
        tally = unescape(re.sub(r"<[^>]+>", "", panel[panel.index("kb-tally"):]))
        assert "Claims: " in tally, chapter.name
        checks = re.search(r"Checks: ([^\n]*)", tally)
        if checks:
            assert re.fullmatch(r"\d+ (passed|failed)(, \d+ (passed|failed))?",
                                checks[1].strip()), checks[1]
        assert "direction confirmed" not in (checks[1] if checks else "")
    box = overview[overview.index('class="kb-provenance'):]
    box = unescape(re.sub(r"<[^>]+>", "", box[:box.index("</details>")]))
    commands = re.findall(r"make reproduce CHAPTER=([\w-]+)(.*)", box)
    assert [c for c, _ in commands] == BOOK
    assert all(not rest.strip().startswith(("VARIANTS", "REPS", "ACCEL")) for _, rest in commands)
    assert "VARIANTS=" not in box and not re.search(r"[0-9a-f]{64}", box)
    assert re.search(r"\(runs \d{8}T", box)
    scorecard = page(built, "scorecard")
    assert 'id="fig-overview"' in scorecard and "kb-provenance" in scorecard
    assert 'id="fig-overview"' not in html
    for ext in ("svg", "pdf", "png"):
        assert (html_dir / "figures" / f"fig-overview.{ext}").stat().st_size > 1000


def test_the_scorecard_csvs_carry_the_row_kind(built: Path) -> None:
    """Each published scorecard table (tables/tab-scorecard-<chapter>.csv) carries every row's
    kind as data, beside the printed kind; the page shows the printed one only."""
    tables = built / "_build" / "html" / "tables"
    html = page(built, "scorecard")
    for chapter in BOOK:
        with (tables / f"tab-scorecard-{chapter}.csv").open(encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        assert rows, chapter
        assert {"kind", "row_kind", "ours_reading"} <= set(rows[0]), chapter
        for row in rows:
            assert row["row_kind"] in ("claim", "mechanism", "check"), row
            assert row["ours_reading"] in ("True", "False"), row
            ours = ", ours" if row["ours_reading"] == "True" else ""
            assert row["kind"] == row["row_kind"] + ours, row
            if row["row_kind"] == "check":
                assert row["verdict"] in ("check passed", "check failed"), row
        table = html[html.index(f'id="tab-scorecard-{chapter}"'):]
        head = table[:table.index("</thead>")]
        assert "<p>kind</p>" in head and "row_kind" not in head, chapter


def test_unchanged_rebuild_executes_nothing(built: Path) -> None:
    before = executions(built)
    result = sphinx(built)
    assert result.returncode == 0, result.stdout + result.stderr
    assert executions(built) == before


def test_changed_data_reexecutes_exactly_its_readers(built: Path) -> None:
    before = executions(built)
    path = built / "data" / "cited" / "sched-ext.yaml"
    data = yaml.safe_load(path.read_text())
    entry = next(e for e in data["entries"] if e["value"] == "71")
    entry["value"] = "7"  # a digit of the quoted "71", so the quote still holds the value
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    result = sphinx(built)
    assert result.returncode == 0, result.stdout + result.stderr
    after = executions(built)
    changed = {name for name in after if after[name] != before.get(name)}
    assert changed == {"sched-ext.md", "scorecard.md"}
    html = page(built, "sched-ext")
    if entry["id"] in (built / "book" / "sched-ext.md").read_text():
        assert '<span class="pasted-text">7</span>' in html
    table = html[html.index('id="tab-sched-ext-cited"'):]
    assert "<p>7 count</p>" in table or "<p>7</p>" in table


def test_measured_figures_and_tables_cite_their_runs(built: Path) -> None:
    """Each pasted figure or table whose notebook declared its runs names them in its caption
    and is followed by a cite / reproduce box: the command, each manifest's sha256 (as on
    disk), stable download links that resolve, and the book's citation."""
    html_dir = built / "_build" / "html"
    boxes = 0
    for chapter in ["context-switch", "scorecard"]:
        html = page(built, chapter)
        for match in re.finditer(r'<div class="kb-provenance[^"]*">(.*?)</details>', html, re.S):
            boxes += 1
            box = match.group(1)
            before = html[:match.start()]
            caption = before[max(before.rfind("<figcaption"), before.rfind("<caption")):]
            ids = re.findall(r"<code[^>]*kb-run-id[^>]*><span[^>]*>([^<]+)</span>", caption)
            assert ids, f"{chapter}: a box whose caption names no run"
            text = unescape(re.sub(r"<[^>]+>", "", box))
            command = re.search(r"make reproduce CHAPTER=([\w-]+)", text)
            assert command, text[:300]
            for owner, run_id, sha in re.findall(
                    r"data/runs/([\w-]+)/([\w.-]+)/manifest\.json.*?sha256 <code[^>]*>"
                    r"<span[^>]*>([0-9a-f]{64})</span>", box, re.S):
                assert run_id in ids
                manifest = built / "data" / "runs" / owner / run_id / "manifest.json"
                assert hashlib.sha256(manifest.read_bytes()).hexdigest() == sha
            for href in re.findall(r'href="(\.\./(?:figures|tables)/[^"]+)"', box):
                assert (html_dir / "book" / href).resolve().stat().st_size > 100, href
            assert "@misc{kernelbook-" in text
    assert boxes >= 5
    for name in ("fig-context-switch-cells", "fig-context-switch-cited"):
        for ext in ("svg", "pdf", "png"):
            assert (html_dir / "figures" / f"{name}.{ext}").stat().st_size > 1000
    assert (html_dir / "tables" / "tab-context-switch-cells.csv").read_text().startswith(
        "compiler,")


def test_the_pipeline_appendix_shows_machines_and_the_cost_model(built: Path) -> None:
    """Where one table's runs come from two machines, its box names each run's machine; the
    cost model's tables and its projection for 8 machines are on the page."""
    html = page(built, "pipeline")
    start = html.index('id="tab-pipeline-across-machines"')
    box = html[start:]
    box = unescape(re.sub(r"<[^>]+>", "", box[box.index('class="kb-provenance'):
                                             box.index("</details>")]))
    assert "; on AMD EPYC, 2 cores" in box and "; on Intel(R) Xeon(R) Processor, 2 cores" in box
    machines = html[html.index('id="tab-pipeline-machines"'):]
    box = machines[machines.index('class="kb-provenance'):machines.index("</details>")]
    assert "; on " in unescape(re.sub(r"<[^>]+>", "", box))
    for table in ("tab-pipeline-cost-chapters", "tab-pipeline-cost-projection"):
        assert f'id="{table}"' in html, table
    text = unescape(re.sub(r"<[^>]+>", "", html))
    assert re.search(r"on 8\s+machines the book takes [0-9.]+\s+hours", text)
    assert re.search(r"critical path, which no number of machines shortens, is\s+setup → build ",
                     text)
    # a box whose runs come from one machine names none (the Arm cells: one run)
    cells = page(built, "context-switch")
    cells = cells[cells.index('id="tab-context-switch-arm-cells"'):]
    box = cells[cells.index('class="kb-provenance'):cells.index("</details>")]
    assert "; on " not in unescape(re.sub(r"<[^>]+>", "", box))


def test_notebook_pages_offer_the_executed_notebook(built: Path) -> None:
    html_dir = built / "_build" / "html"
    for chapter in BOOK:
        html = (html_dir / "notebooks" / f"{chapter}.html").read_text(encoding="utf-8")
        assert f"_sources/notebooks/{chapter}.ipynb" in html, chapter
        executed = json.loads((html_dir / "_sources" / "notebooks" / f"{chapter}.ipynb")
                              .read_text(encoding="utf-8"))
        assert any(cell.get("outputs") for cell in executed["cells"]), chapter
