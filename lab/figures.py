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
from matplotlib.ticker import EngFormatter

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
"""One style for every figure of the book (:func:`lab.notebook.setup` applies it): a fixed SVG
hash salt and no ids or dates keep a figure's files identical on the same data, and legends
take :data:`LEGEND_SIZE` unless a figure asks for larger."""


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
    """Draw a chapter's cited entries (rows of :func:`lab.cited.to_frame`), one panel per table.

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
