"""Figures and tables of cited numbers, shared by every chapter notebook.

One panel per table of the mail, rows as the author ordered them: baseline and patched values as
bars (a range as a whisker from low to high, an approximate value hatched), and the author's
%change written beside the row, so the figure says no more and no less than the mail.
"""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import EngFormatter

from lab.analysis import headlines, stats, verdicts

BASELINE_COLOR = "#7f7f7f"
CHANGE_COLOR = "#d62728"
PALETTE = ("#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")

FONT_SIZE = 9
"""The book's figure text, in points (a figure is shown at about its own size on a desktop)."""
LEGEND_SIZE = 8
"""The smallest text a figure of the book uses: legends, annotations. Below it a legend in a
figure scaled to a phone's width is no longer readable; ``tests/book`` checks every figure."""

STYLE = {
    "svg.hashsalt": "kernel-book",
    "svg.fonttype": "none",
    "svg.id": None,
    "pdf.compression": 9,
    "figure.dpi": 110,
    "savefig.bbox": "tight",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "font.size": FONT_SIZE,
    "legend.fontsize": LEGEND_SIZE,
    "legend.title_fontsize": LEGEND_SIZE,
    "legend.frameon": False,
}
"""One style for every figure of the book (:func:`lab.book.notebook.setup` applies it): a fixed SVG
hash salt and no ids or dates keep a figure's files identical on the same data, and legends
take :data:`LEGEND_SIZE` unless a figure asks for larger."""

VERDICT_COLORS = {
    verdicts.REPRODUCED: "#1a7f37",
    verdicts.DIRECTION: "#1f5fa8",
    verdicts.NO_CHANGE: "#00695c",
    verdicts.INCONCLUSIVE: "#6b6b6b",
    verdicts.CONTRADICTED: "#c62828",
    verdicts.NOT_COMPARABLE: "#7b4fa0",
    verdicts.HOLDS: "#37474f",
    verdicts.FAILS: "#a0522d",
    verdicts.PASSED: "#4e4e4e",
    verdicts.FAILED: "#c62828",
    verdicts.UNJUDGED: "#8a6d00",
    verdicts.NOT_YET: "#6b6b6b",
}
"""A colour per verdict, dark enough for text on white."""


def _bar_columns(part: pd.DataFrame) -> list[str]:
    """The author's columns drawn as bars: the measured ones, or the changes if that is all."""
    measured = part[part["variant"] != "change"]
    return list(dict.fromkeys((measured if len(measured) else part)["column"]))


def _colors(part: pd.DataFrame, columns: list[str]) -> list[str]:
    """Baseline columns grey; the others take the palette in order."""
    variants = [part.loc[part["column"] == c, "variant"].iloc[0] for c in columns]
    others = iter(PALETTE * len(columns))
    return [BASELINE_COLOR if v == "baseline" else next(others) for v in variants]


def cited_figure(frame: pd.DataFrame, title: str) -> plt.Figure:
    """Draw a chapter's cited entries (rows of :func:`lab.analysis.cited.to_frame`), one panel per
    table.

    Each of the author's columns is one bar series (baseline grey), so a table with several
    patched configurations keeps them apart; changes are annotated when values are drawn.
    """
    tables = list(dict.fromkeys(frame["table"]))
    heights = [max(1.2, 0.32 * len(frame[frame["table"] == t]) + 0.8) for t in tables]
    fig, axes = plt.subplots(len(tables), 1, figsize=(7.5, sum(heights)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, table in zip(axes[:, 0], tables, strict=True):
        part = frame[frame["table"] == table]
        rows = list(dict.fromkeys(part["row"]))
        columns = _bar_columns(part)
        width = 0.8 / len(columns)
        colors = _colors(part, columns)
        for i, column in enumerate(columns):
            sel = part[part["column"] == column].set_index("row").reindex(rows)
            y = np.arange(len(rows)) + (i - (len(columns) - 1) / 2) * width
            xerr = np.vstack([sel["mid"] - sel["low"], sel["high"] - sel["mid"]])
            drawn = ax.barh(y, sel["mid"], height=width, color=colors[i],
                            label=column, xerr=xerr if np.nansum(xerr) > 0 else None, capsize=2)
            for patch, approx in zip(drawn, sel["approximate"], strict=True):
                patch.set_hatch("//" if approx is True else "")
        changes = part[part["variant"] == "change"]
        if not changes.empty and set(changes["column"]).isdisjoint(columns):
            text = changes.groupby("row", sort=False)["value"].agg(" / ".join)
            for j, row in enumerate(rows):
                if row in text.index:
                    ax.annotate(text[row], xy=(1.0, j), xycoords=("axes fraction", "data"),
                                xytext=(4, 0), textcoords="offset points", va="center",
                                fontsize=LEGEND_SIZE, color=CHANGE_COLOR,
                                annotation_clip=False)
        ax.set_yticks(np.arange(len(rows)), rows)
        ax.invert_yaxis()
        shown = part[part["column"].isin(columns)]
        units = ", ".join(dict.fromkeys(shown["unit"]))
        quantity = ", ".join(dict.fromkeys(shown["quantity"]))
        ax.set_xlabel(f"{quantity} [{units}]")
        ax.set_title(table, loc="left", fontsize=9)
        ax.xaxis.set_major_formatter(EngFormatter(sep=" "))
        ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=min(len(columns), 3))
    if frame["approximate"].any():
        title += "\nhatched: approximate value (~); whiskers: a range as written"
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    fig.tight_layout()
    return fig


def cited_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The chapter's cited entries as the author laid them out: one row per table row."""
    order = list(dict.fromkeys(frame["column"]))
    wide = frame.pivot_table(index=["table", "row"], columns="column", values="cited",
                                 aggfunc="first", sort=False)
    wide = wide.reindex(columns=order).reset_index()
    wide.columns.name = None
    return wide.rename(columns={"table": "measurement"})


def rule_graph(dot: str) -> plt.Figure:
    """Draw Snakemake's ``--rulegraph`` (Graphviz text) as layers from sources to ``all``.

    A rule's layer is the length of the longest path to it from a rule with no inputs, so
    every edge points down, and an edge that another path already implies is left out (the
    root feeds every stage; drawn, it would hide the order). The book needs no Graphviz for a
    graph of a dozen rules."""
    labels = dict(re.findall(r'^\s*(\d+)\[label = "([^"]+)"', dot, re.M))
    every = set(re.findall(r"^\s*(\d+) -> (\d+)", dot, re.M))
    if not labels or not every:
        raise ValueError("no nodes or edges in the rule graph; is this `snakemake --rulegraph`?")

    def reaches(a: str, b: str, skip: tuple[str, str]) -> bool:
        todo, seen = [a], set()
        while todo:
            n = todo.pop()
            for x, y in every:
                if x == n and (x, y) != skip and y not in seen:
                    if y == b:
                        return True
                    seen.add(y)
                    todo.append(y)
        return False

    edges = sorted(e for e in every if not reaches(*e, skip=e))
    depth = dict.fromkeys(labels, 0)
    for _ in labels:  # longest path by relaxation; the graph is acyclic
        for a, b in edges:
            depth[b] = max(depth[b], depth[a] + 1)
    layers: dict[int, list[str]] = {}
    for node in sorted(labels, key=lambda n: labels[n]):
        layers.setdefault(depth[node], []).append(node)
    pos = {n: (i - (len(row) - 1) / 2, -d) for d, row in layers.items()
           for i, n in enumerate(row)}
    width = max(len(r) for r in layers.values())
    fig, ax = plt.subplots(figsize=(1.6 * width + 1, 0.75 * len(layers) + 0.5))
    for a, b in edges:
        # an edge that skips layers bows out, so it does not run behind the rules between
        bend = 0.0 if depth[b] - depth[a] == 1 else 0.45
        ax.annotate("", xy=pos[b], xytext=pos[a],
                    arrowprops={"arrowstyle": "-|>", "color": BASELINE_COLOR, "lw": 1,
                                "shrinkA": 11, "shrinkB": 11,
                                "connectionstyle": f"arc3,rad={bend}"})
    for node, (x, y) in pos.items():
        ax.text(x, y, labels[node], ha="center", va="center", fontsize=9,
                bbox={"boxstyle": "round,pad=0.35", "fc": "white", "ec": PALETTE[0]})
    ax.set_xlim(-width / 2 - 0.2, width / 2 + 0.2)
    ax.set_ylim(-len(layers) + 0.5, 0.5)
    ax.axis("off")
    return fig


VERDICT_WORDS = {
    verdicts.REPRODUCED: "reproduced",
    verdicts.DIRECTION: "direction",
    verdicts.NO_CHANGE: "no change",
    verdicts.INCONCLUSIVE: "inconclusive",
    verdicts.CONTRADICTED: "contradicted",
    verdicts.NOT_COMPARABLE: "not comparable",
    verdicts.HOLDS: "holds",
    verdicts.FAILS: "fails",
    verdicts.PASSED: "passed",
    verdicts.FAILED: "failed",
    verdicts.UNJUDGED: "not judged",
    verdicts.NOT_YET: "not measured",
}
"""The verdicts as the overview figure prints them, short enough for a phone's width; the
caption names each in full."""

LABEL_CHARS = 30
"""Characters of a row label in the overview figure: at :data:`FONT_SIZE` its label column."""
SHORT_OURS = 16
"""A line without numbers shows our value in its glyph's place when it is this short ("not
measured"); a longer description is left to the chapter."""


def _clip(text: str, chars: int = LABEL_CHARS, keep_end: bool = False) -> str:
    """``text`` cut to whole words within ``chars``, marked with an ellipsis: the last words
    when ``keep_end`` (a symbol name ends a perf row), else the first (a quantity's noun)."""
    text = " ".join(str(text).split())
    if len(text) <= chars:
        return text
    words = text.split()
    if keep_end:
        words.reverse()
    kept: list[str] = []
    for word in words:
        if len(" ".join([*kept, word])) > chars - 1:
            break
        kept.append(word)
    if not kept:
        return "…" + text[-(chars - 1):] if keep_end else text[:chars - 1] + "…"
    return "…" + " ".join(reversed(kept)) if keep_end else " ".join(kept) + "…"


def _row_label(line: pd.Series, same_group: bool) -> str:
    """A change row is named by its row in a reader's words (a scope, a symbol, a
    configuration); a mechanism row under it by its quantity, indented; a check, or a row of
    our own reading, which stand apart, by its row and quantity."""
    if line["kind"] not in ("mechanism", "check"):
        return _clip(headlines.plain(line["row"]), keep_end=True)
    quantity = re.sub(r"^.*?\b(mechanism|check)\b[:,]?\s*", "", str(line["column"]))
    if same_group:
        return "  └ " + _clip(quantity, LABEL_CHARS - 4)
    if line["kind"] == "check":
        return _clip(quantity)
    return _clip(f"{headlines.plain(line['row'])}: {quantity}")


APART = (("check", "checks: pass/fail, never support"),
         ("ours", "our own reading, not the author's"))
"""The rows the overview figure draws apart under each chapter, and their headings."""


def overview_figure(lines: pd.DataFrame, titles: dict[str, str]) -> plt.Figure:
    """Every row of the scorecard: every cited change of every chapter beside ours, and the
    verdict, each row's kind visible.

    ``lines`` is :func:`lab.analysis.views.overview`; ``titles`` maps a chapter to the heading
    of its
    panel, in book order (a chapter with no lines says so). Each line draws, on its own scale
    with no change in the middle, our change as a dot with its interval, the cited change as a
    diamond (hollow when the cited pair implies it: a claim) or, for a mechanism row, indented
    under the claim it stands beside, an arrowhead on the side its direction should take; then
    the verdict, coloured. A chapter's checks and rows of our own reading stand apart at its end,
    under headings of their own (:data:`APART`). Lines without numbers (values of
    the author's machine, a count judged without an interval) print what stands there instead.
    The figure is narrow, and no text of it is smaller than :data:`FONT_SIZE`, so that a phone,
    which shows it nearly at its own width, keeps it readable (``tests/book/test_browser.py``).
    """
    width, row_h, head_h, sub_h = 4.4, 0.21, 0.36, 0.21
    centre, half = 2.78, 0.44
    verdict_x = centre + half + 0.16
    # (kind, text, line, whether the line's row is the previous line's), top to bottom
    entries: list[tuple[str, str, pd.Series | None, bool]] = []
    for chapter, title in titles.items():
        part = lines[lines["chapter"] == chapter]
        entries.append(("chapter", title, None, False))
        if part.empty:
            entries.append(("note", "no cited numbers yet", None, False))
        ours = part["ours_reading"].fillna(False).astype(bool)
        check = part["row_kind"] == verdicts.CHECK
        previous: tuple[str, str] | None = None
        for _, line in part[~ours & ~check].iterrows():
            if previous is None or previous[0] != line["measurement"]:
                entries.append(("measurement", str(line["measurement"]), None, False))
            group = (str(line["measurement"]), str(line["row"]))
            entries.append(("line", "", line, group == previous))
            previous = group
        for name, heading in APART:
            apart = part[check if name == "check" else ours & ~check]
            if len(apart):
                entries.append(("measurement", heading, None, False))
                entries += [("line", "", line, False) for _, line in apart.iterrows()]
    heights = {"chapter": head_h, "measurement": sub_h, "line": row_h, "note": row_h}
    key_h = 0.55
    total = key_h + sum(heights[kind] for kind, *_ in entries)
    fig = plt.figure(figsize=(width, total))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(total, 0)
    ax.axis("off")
    y = key_h
    spans: list[tuple[float, float]] = []  # the zero line runs down each chapter's lines
    for kind, text, line, same in entries:
        h = heights[kind]
        mid = y + h / 2
        if kind == "chapter":
            ax.text(0, y + h * 0.62, text, fontsize=FONT_SIZE + 1, fontweight="bold",
                    va="center")
            ax.plot([0, width], [y + h - 0.02] * 2, color=BASELINE_COLOR, lw=0.6)
            spans.append((y + h, y + h))
        elif kind == "measurement":
            ax.text(0, mid, text, fontsize=FONT_SIZE, style="italic", color=BASELINE_COLOR,
                    va="center")
        elif kind == "note":
            ax.text(0, mid, text, fontsize=FONT_SIZE, style="italic", va="center")
        elif line is not None:
            _overview_line(ax, line, same, mid, centre, half, verdict_x)
            spans[-1] = (spans[-1][0], y + h)
        y += h
    for top, bottom in spans:
        if bottom > top:
            ax.plot([centre, centre], [top, bottom], color=BASELINE_COLOR, lw=0.6, zorder=0)
    handles = [
        Line2D([], [], marker="D", ls="", color="black", markersize=5, label="cited change"),
        Line2D([], [], marker="D", ls="", mfc="white", color="black", markersize=5,
               label="implied by a cited pair"),
        Line2D([], [], marker="o", color=VERDICT_COLORS[verdicts.INCONCLUSIVE], markersize=4,
               label=f"ours, {stats.LEVEL} CI"),
        Line2D([], [], marker=">", ls="", color="black", markersize=5,
               label="direction a mechanism should take"),
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0, 1), ncol=2,
              fontsize=FONT_SIZE, handletextpad=0.3, columnspacing=0.8, borderaxespad=0.1)
    return fig


def _overview_line(ax: plt.Axes, line: pd.Series, same_group: bool, y: float, centre: float,
                   half: float, verdict_x: float) -> None:
    """One line of :func:`overview_figure`: label, glyph on the line's own scale, verdict."""
    verdict = str(line["verdict"])
    color = VERDICT_COLORS.get(verdict, BASELINE_COLOR)
    ax.text(0, y, _row_label(line, same_group), fontsize=FONT_SIZE, va="center")
    ours = [line["our_change"], line["our_low"], line["our_high"]]
    cited = line["cited_change"]
    known = [abs(v) for v in [*ours, cited] if pd.notna(v)]
    if pd.notna(line["our_change"]):
        change_glyph(ax, line, y, centre, half, max(known) * 1.08 or 1.0, color, 0.06)
    else:
        shown = str(line["ours"]) if len(str(line["ours"])) <= SHORT_OURS else "see the chapter"
        ax.text(centre, y, shown or "—", fontsize=FONT_SIZE, style="italic", ha="center",
                va="center", color=BASELINE_COLOR,
                bbox={"fc": "white", "ec": "none", "pad": 0.5})
    ax.text(verdict_x, y, VERDICT_WORDS.get(verdict, verdict), fontsize=FONT_SIZE,
            color=color, va="center", fontweight="bold" if verdict in (
                verdicts.REPRODUCED, verdicts.CONTRADICTED) else "normal")


def change_glyph(ax: plt.Axes, row: pd.Series, y: float, centre: float, half: float,
                  scale: float, color: str, gap: float) -> None:
    """One row's change on its own scale (0 at ``centre``, ``scale`` at ``half`` away): the
    cited change (◆, ◇ when a cited pair implies it) or, for a mechanism row, the direction it
    should take (an arrowhead ``gap`` beyond the scale), and our change with its interval."""
    def at(v: float) -> float:
        return centre + half * v / scale

    if pd.notna(row["cited_change"]):
        ax.plot(at(row["cited_change"]), y, marker="D", markersize=5, color="black",
                mfc="white" if row["kind"] == "derived change" else "black", zorder=4)
    elif pd.notna(row["expected_sign"]) and row["expected_sign"] != 0:
        sign = int(row["expected_sign"])
        ax.plot(centre + sign * (half + gap), y, marker=">" if sign > 0 else "<",
                markersize=5, color="black", zorder=4)
    ax.plot([at(row["our_low"]), at(row["our_high"])], [y, y], color=color, lw=2.2,
            solid_capstyle="butt", zorder=3)
    ax.plot(at(row["our_change"]), y, marker="o", markersize=4, color=color, zorder=5)
