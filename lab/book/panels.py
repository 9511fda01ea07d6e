"""The landing page's panel of each chapter: its headline rows (:mod:`lab.analysis.headlines`)
drawn as label, change glyph and verdict, in widths for a desktop page and a phone.

Text is measured with the renderer the figure is saved with, so wrapped labels fit the width
they are drawn in; the colours and fonts are :mod:`lab.book.figures`' own.
"""

from __future__ import annotations

import re
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.font_manager import FontProperties

from lab.analysis import verdicts
from lab.book.figures import BASELINE_COLOR, FONT_SIZE, VERDICT_COLORS, change_glyph

PANEL_WIDTH = 5.55
"""A landing-page panel's width in inches on a desktop: two stand side by side in the page's
column at their own size (96 CSS px per inch), each row in two lines."""


PHONE_PANEL_WIDTH = 4.3
"""A landing-page panel's width in inches on a phone, which shows it alone across the screen:
at most 420 px less the page's margins, so that its text stays at least 10 px high; its rows
wrap to more lines."""


CAVEAT_MARK = "†"
"""Marks a verdict that rests on one boot or changes without the clock-flagged boots."""


_MEASURE_DPI = 300


_MEASURE = RendererAgg(100, 100, _MEASURE_DPI)
"""A renderer only to measure text, at a resolution where hinting barely widens it (as a
browser sets an SVG's text)."""


def _inches(text: str, size: float = FONT_SIZE, weight: str = "normal") -> float:
    """The width of ``text`` as matplotlib sets it in the book's font at ``size`` points, in
    inches."""
    prop = FontProperties(size=size, weight=weight)
    return _MEASURE.get_text_width_height_descent(text, prop, ismath=False)[0] / _MEASURE_DPI


def _wrap(text: str, width: float, size: float = FONT_SIZE) -> list[str]:
    """``text`` broken between words into lines no wider than ``width`` inches."""
    lines: list[str] = []
    for word in text.split():
        if lines and _inches(f"{lines[-1]} {word}", size) <= width:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return lines or [""]


def _minus(text: str) -> str:
    """A typeset minus sign for a hyphen that starts a number."""
    return re.sub(r"(?<![\w)])-(?=\d)", "\u2212", text)


KIND_TAG = 0.82
"""Inches before the glyph of a wide panel's row, where the row's kind ("claim", "mechanism")
stands; a narrower panel (a phone's) heads each group of rows with its kind instead."""


def headline_panel(rows: pd.DataFrame, width: float = PANEL_WIDTH) -> plt.Figure:
    """One chapter's panel on the landing page: the rows of
    :func:`lab.analysis.headlines.headlines`,
    claims then mechanism rows, each row's kind named (before its glyph when the panel is
    :data:`PANEL_WIDTH` wide or more, else in a heading above each group).

    A row is its label (and on the right its verdict, coloured, marked with
    :data:`CAVEAT_MARK` when it rests on one boot or on boots whose clock was in doubt), then a
    glyph on the row's own scale (our change as a dot with its interval, the cited change as a
    diamond, hollow when a cited pair implies it, or for a mechanism row an arrowhead on the
    side it should move; 0 on the grey tick) and its numbers in words. The figure is ``width``
    inches wide (:data:`PANEL_WIDTH` on a desktop, :data:`PHONE_PANEL_WIDTH` on a phone), its
    text wrapped to it, and no text is smaller than :data:`FONT_SIZE`.
    """
    line, gap, glyph = 0.16, 0.05, 0.85
    tag = KIND_TAG if width >= PANEL_WIDTH else 0.0
    groups = [(kind, rows[rows["row_kind"] == kind]) for kind in
              (verdicts.CLAIM, verdicts.MECHANISM)]
    blocks: list[tuple[str, Any, list[str], list[str]]] = []
    for kind, group in [(k, g) for k, g in groups if len(g)]:
        blocks.append(("head" if not tag else "rule", PANEL_GROUPS[kind], [], []))
        for _, row in group.iterrows():
            verdict = str(row["verdict"]) + (f" {CAVEAT_MARK}" if row["caveat"] else "")
            detail = _wrap(_minus(str(row["detail"])), width - tag - glyph - 0.08)
            label = _wrap(str(row["label"]), width - _inches(verdict) - 0.1)
            blocks.append(("row", row, label, detail))
    if tag:
        blocks = [b for i, b in enumerate(blocks) if b[0] != "rule" or i > 0]
    heights = [{"head": line, "rule": gap}.get(kind, line * (len(label) + len(detail)) + gap)
               for kind, _, label, detail in blocks]
    total = sum(heights) + 0.02 if blocks else line
    fig = plt.figure(figsize=(width, total))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(total, 0)
    ax.axis("off")
    if not blocks:
        ax.text(0, line / 2, "no cited changes yet", fontsize=FONT_SIZE, style="italic",
                va="center")
    y = 0.0
    for (kind, what, label, detail), h in zip(blocks, heights, strict=True):
        if kind == "head":
            ax.text(0, y + line * 0.55, what, fontsize=FONT_SIZE, fontweight="bold",
                    color=BASELINE_COLOR, va="center")
            ax.plot([_inches(what, weight="bold") + 0.08, width], [y + line * 0.55] * 2,
                    color=BASELINE_COLOR, lw=0.5, alpha=0.6)
        elif kind == "rule":
            ax.plot([0, width], [y + h / 2] * 2, color=BASELINE_COLOR, lw=0.5, alpha=0.6)
        else:
            _panel_row(ax, what, label, detail, y, line, width, glyph, tag)
        y += h
    return fig


PANEL_GROUPS = {verdicts.CLAIM: "Claims", verdicts.MECHANISM: "Mechanism rows"}
"""The heading of each group of a narrow panel's rows."""


def _panel_row(ax: plt.Axes, row: pd.Series, label: list[str], detail: list[str], y: float,
               line: float, width: float, glyph: float, tag: float) -> None:
    """One row of :func:`headline_panel` from its top ``y``; with a ``tag`` column, the row's
    kind stands in it before the glyph."""
    verdict = str(row["verdict"])
    color = VERDICT_COLORS.get(verdict, BASELINE_COLOR)
    for i, text in enumerate(label):
        ax.text(0, y + line * (i + 0.5), text, fontsize=FONT_SIZE, va="center")
    ax.text(width, y + line * 0.5, verdict + (f" {CAVEAT_MARK}" if row["caveat"] else ""),
            fontsize=FONT_SIZE, va="center", ha="right", color=color,
            fontweight="bold" if verdict in (verdicts.REPRODUCED, verdicts.CONTRADICTED)
            else "normal")
    top = y + line * len(label)
    if tag:
        ax.text(0, top + line * 0.5, str(row["row_kind"]), fontsize=FONT_SIZE, va="center",
                color=BASELINE_COLOR, style="italic")
    for i, text in enumerate(detail):
        ax.text(tag + glyph + 0.08, top + line * (i + 0.5), text, fontsize=FONT_SIZE,
                va="center", color="#3a3a3a")
    mid = top + line * 0.5
    centre, half = tag + glyph / 2, glyph / 2 - 0.12
    ax.plot([centre, centre], [mid - line * 0.4, mid + line * 0.4], color=BASELINE_COLOR,
            lw=0.8)
    if pd.isna(row["our_change"]):
        return
    known = [abs(v) for v in (row["our_low"], row["our_high"], row["cited_change"])
             if pd.notna(v)]
    change_glyph(ax, row, mid, centre, half, max(known, default=0) * 1.08 or 1.0, color, 0.07)

