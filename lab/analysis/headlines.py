"""The landing page's panel of each chapter: which few rows a reader needs first, and how they
read in words.

The scorecard (:mod:`lab.analysis.scorecard`) holds every row; a panel shows a chapter's largest
cited
changes that we judged from an interval and the mechanism rows of the author's explanation
beside them, each as a label, a line of numbers and its verdict, with what the verdict rests on
(one boot, boots with clock trouble). :mod:`lab.book.figures` draws the panels.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from lab.analysis import quantities, stats, verdicts
from lab.analysis.scorecard import DERIVED_COLUMN, KINDS

HEADLINE_CLAIMS = 3
"""At most this many claims stand in a chapter's panel on the landing page."""
HEADLINE_MECHANISMS = 2
"""At most this many mechanism rows stand in a chapter's panel on the landing page."""

HEADLINE_COLUMNS = ["chapter", "measurement", "row", "column", "kind", "verdict", "label",
                    "detail", "caveat", *verdicts.NUMBER_COLUMNS]
"""A row of :func:`headlines`: where it stands, its verdict, a label, a line of numbers in
words, what the verdict rests on (:func:`caveat`), and the numbers a figure draws."""


def caveat(reason: str, verdict: str) -> str:
    """What a verdict rests on, when a reader must know it
    (:func:`lab.analysis.verdicts.judge_boots`
    says it in the reason): "it rests on one boot", or the verdict without the boots whose
    clock was in doubt when that differs; "" otherwise."""
    found = []
    one = re.search(r"it rests on one ([\w ]+?):", reason)
    if one:
        found.append(f"it rests on one {one[1]}")
    clock = re.search(r"boots had clock trouble \([^)]*\); without them ([a-z ]+?)(?: \(|;|$)",
                      reason)
    if clock and clock[1] != verdict:
        found.append(f"without the boots whose clock was in doubt: {clock[1]}")
    return "; ".join(found)


def plain(text: str) -> str:
    """A row or column of the card in a reader's words: perf's ``[kernel.kallsyms] [k]``
    prefix, quotes, an empty ``+ NA``, ``CONFIG_`` and a compiler's version left out."""
    text = re.sub(r"\[[^\]]*\] \[k\] ", "", str(text))
    text = re.sub(r"\b(gcc|clang) \d+(\.\d+)*", r"\1", text)
    text = text.replace('"', "").replace(" + NA", "").replace("CONFIG_", "")
    return " ".join(text.replace("->", "→").split())


def quantity_names(cited: pd.DataFrame, given: dict[tuple[str, str], str] | None = None
                   ) -> dict[tuple[str, str], str]:
    """(chapter, cited table) -> what the table measures, short: the name ``given`` for it,
    else the quantity of its first entry without parentheses, a leading "change of the" or a
    trailing clause."""
    names = dict(given or {})
    for (chapter, table), part in cited.groupby(["chapter", "table"], sort=False):
        text = re.sub(r"\s+\([^)]*\)", "", str(part["quantity"].iloc[0]))
        names.setdefault((chapter, table),
                         text.removeprefix("change of the ").split(",")[0].strip())
    return names


def _number(value: float, suffix: str, digits: int) -> str:
    """A signed number as :func:`lab.analysis.quantities.number` prints it, with ``digits``
    decimals."""
    if suffix.strip() == "bytes":
        return quantities.number(value, suffix)
    return f"{value:+,.{digits}f}{suffix}"


def _detail(row: pd.Series) -> str:
    """Numbers in words: "cited -34.8 % · ours +4.0 % (-18.9 to +33.4, n=5+5)"; for a
    mechanism row the direction it should take instead of a cited change; without numbers,
    what stands there."""
    suffix = stats.suffix(str(row["our_unit"]))
    shown = [row[c] for c in ("cited_change", "our_change", "our_low", "our_high")]
    # small differences (shares in points) get two decimals: never "-0.0 to +0.2 points"
    digits = 2 if suffix.strip() != "%" and max(
        (abs(v) for v in shown if pd.notna(v)), default=0) < 10 else 1
    if row["row_kind"] == verdicts.MECHANISM:
        sign = row["expected_sign"]
        head = "" if pd.isna(sign) else (
            "should not move" if sign == 0 else "should rise" if sign > 0 else "should fall")
    elif pd.notna(row["cited_change"]):
        head = f"cited {_number(row['cited_change'], suffix, digits)}"
        if suffix != " %":  # a unit in words is said once, after the cited number
            suffix = ""
    else:
        head = f"cited {row['cited']}"
    if pd.isna(row["our_change"]):
        ours = "" if row["ours"] == "—" else f"ours {row['ours']}"
    elif row["our_low"] == row["our_high"]:
        ours = f"ours {_number(row['our_change'], suffix, digits)} (exact)"
    else:
        n = re.search(r"n=\d+\+\d+", str(row["ours"]))
        ours = (f"ours {_number(row['our_change'], suffix, digits)} "
                f"({_number(row['our_low'], '', digits)} to "
                f"{_number(row['our_high'], '', digits)}" + (f", {n[0]})" if n else ")"))
    return " · ".join(p for p in (head, ours) if p)


def _mechanism_base(column: str) -> tuple[str, str]:
    """A mechanism row's column as (the variant it names before the colon, the quantity)."""
    before, _, after = str(column).rpartition("mechanism")
    return plain(before.strip(" :,")), after.strip(" :,")


def _label(row: pd.Series, names: dict[tuple[str, str], str], shared: set[str]) -> str:
    """A claim: what it measures, where (its row) and in which configuration (a derived
    row's variant). A mechanism row: its quantity, with the row and variant when several
    mechanism rows of the chapter measure the same quantity (``shared``)."""
    if row["row_kind"] == verdicts.MECHANISM:
        variant, base = _mechanism_base(row["column"])
        if base not in shared:
            return base
        return f"{base}: " + ", ".join(p for p in (plain(row["row"]), variant) if p)
    what = names.get((row["chapter"], row["measurement"]), plain(row["measurement"]))
    column = str(row["column"])
    variant = plain(column.partition(DERIVED_COLUMN)[0].strip(" :,")) if (
        DERIVED_COLUMN in column) else ""
    return f"{what}: " + ", ".join(p for p in (plain(row["row"]), variant) if p)


def _resolved(value: pd.Series, rows: pd.DataFrame) -> pd.Series:
    """``value`` in units of what each row resolves: its interval's half-width, never less
    than its margin (infinite for a non-zero exact change with no margin)."""
    half = (rows["our_high"] - rows["our_low"]) / 2
    scale = np.fmax(half.fillna(0), rows["margin"].fillna(0))
    with np.errstate(divide="ignore", invalid="ignore"):
        size = value.abs() / scale
    return size.where(scale > 0, np.where(value.abs() > 0, np.inf, 0.0)).fillna(0)


def _distinct(ordered: pd.DataFrame, cap: int, key: str) -> pd.DataFrame:
    """The first ``cap`` rows of ``ordered``, one per value of ``key`` while others are left."""
    picked: list[int] = []
    for spread in (True, False):
        for index, row in ordered.iterrows():
            taken = {ordered.loc[i, key] for i in picked}
            if len(picked) < cap and index not in picked and not (spread and row[key] in taken):
                picked.append(index)
    return ordered.loc[picked]


def headlines(card: pd.DataFrame, chapter: str, names: dict[tuple[str, str], str],
              claims: int = HEADLINE_CLAIMS, mechanisms: int = HEADLINE_MECHANISMS
              ) -> pd.DataFrame:
    """The few rows of a chapter a reader needs first, for its panel on the landing page.

    Claims: the author's changes judged from an interval of ours (not an exact size), the
    largest cited change first (in margins of its metric, so units compare), each of our
    intervals once (the same boots judged against several postings stand for all of them),
    at most ``claims``; a chapter with none shows its first cited changes as they stand (not
    yet measured). Mechanism rows of the author's explanation (never a check or our own
    reading): those beside a chosen claim first, then the others; within each, a verdict that
    rests on no single boot before one that does (:func:`caveat`), then by how clearly our
    change shows (in half-widths of its interval, never less than the margin); one per
    quantity while other quantities are left, at most ``mechanisms``. ``names`` gives each cited
    table's quantity in words (:func:`quantity_names`). Returns :data:`HEADLINE_COLUMNS`,
    claims first.
    """
    part = card[(card["chapter"] == chapter) & (card["kind"] != KINDS[1])]
    part = part[~part["ours_reading"].astype(bool)]
    own = part[part["row_kind"] == verdicts.CLAIM]
    timed = own[own["our_low"].notna() & (own["our_low"] != own["our_high"])
                & own["cited_change"].notna()]
    if timed.empty:
        chosen = own.head(claims)
    else:
        # the author's headline first: the cited change in margins (a zero half-width leaves
        # the margin as the unit), so that a change in points and one in percent compare
        size = _resolved(timed["cited_change"], timed.assign(our_low=0.0, our_high=0.0))
        timed = timed.assign(size=size).sort_values("size", ascending=False, kind="stable")
        chosen = timed.drop_duplicates(["our_change", "our_low", "our_high"]).head(claims)
    keys = set(zip(chosen["measurement"], chosen["row"], strict=True))
    mech = part[(part["row_kind"] == verdicts.MECHANISM) & part["our_change"].notna()]
    mech = mech.assign(
        beside=[(m, r) in keys for m, r in zip(mech["measurement"], mech["row"], strict=True)],
        sound=[not caveat(r, v) for r, v in zip(mech["reason"], mech["verdict"], strict=True)],
        size=_resolved(mech["our_change"], mech),
        base=[_mechanism_base(c)[1] for c in mech["column"]])
    mech = mech.sort_values(["beside", "sound", "size"], ascending=False, kind="stable")
    mech = _distinct(mech.drop_duplicates(["base", "our_change", "our_low", "our_high"]),
                     mechanisms, "base")
    shared = {b for b, n in pd.Series([_mechanism_base(c)[1] for c in part.loc[
        part["row_kind"] == verdicts.MECHANISM, "column"]]).value_counts().items() if n > 1}
    rows = pd.concat([chosen, mech])
    labels = [_label(row, names, shared) for _, row in rows.iterrows()]
    details = [_detail(row) for _, row in rows.iterrows()]
    caveats = [caveat(r, v) for r, v in zip(rows["reason"], rows["verdict"], strict=True)]
    return rows.assign(label=labels, detail=details, caveat=caveats).reindex(
        columns=HEADLINE_COLUMNS).reset_index(drop=True)
