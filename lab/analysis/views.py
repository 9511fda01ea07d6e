"""The scorecard as the book shows it: the tables (a chapter's rows, or all), the lines of the
overview figure, and the tallies of each kind of row that the pages state.

:mod:`lab.analysis.scorecard` builds the card; this module only reads it.
"""

from __future__ import annotations

import pandas as pd

from lab.analysis import verdicts
from lab.analysis.scorecard import KINDS, NOT_YET


def counts(card: pd.DataFrame, cited: pd.DataFrame) -> dict[str, int]:
    """What the scorecard page states about a card: cited numbers, how many of them are
    measured and judged, how many derived, mechanism and check rows stand beside them, and how
    many rows of each kind support the author (:data:`lab.analysis.verdicts.SUPPORT`; a check
    or a row of our own reading never does)."""
    own = card["id"].isin(cited["id"])
    support = pd.Series([verdicts.supporting(v, k, bool(o)) for v, k, o in zip(
        card["verdict"], card["row_kind"], card["ours_reading"], strict=True)], index=card.index)
    found = {"cited": int(own.sum()), "measured": int((own & (card["ours"] != "—")).sum()),
             "judged": int((own & card["verdict"].isin(verdicts.JUDGED)).sum()),
             "derived": int((~own).sum()),
             "derived-judged": int((~own & card["verdict"].isin(verdicts.JUDGED)).sum()),
             "ours": int(card["ours_reading"].sum())}
    for kind in verdicts.ROW_KINDS:
        mine = card["row_kind"] == kind
        found[kind] = int(mine.sum())
        found[f"{kind}-support"] = int((mine & support).sum())
    return found


def row_kinds(card: pd.DataFrame) -> pd.Series:
    """Each row's kind as a table prints it: "claim", "mechanism", "check", or "mechanism,
    ours" for a row that tests the book's own reading (:data:`lab.analysis.verdicts.ROW_KINDS`)."""
    return pd.Series([f"{kind}, ours" if ours else str(kind) for kind, ours in
                      zip(card["row_kind"], card["ours_reading"], strict=True)],
                     index=card.index, dtype=object)


VIEW_COLUMNS = ["chapter", "id", "measurement", "row", "column", "kind", "cited", "ours",
                "environment", "verdict", "reason"]
"""What a scorecard table shows: :data:`CARD_COLUMNS` with each row's kind (:func:`row_kinds`)
beside the cited value."""


KIND_COLUMNS = ["row_kind", "ours_reading"]
"""The row kind as data, for the published tables (CSV) beside the printed ``kind``."""


def table_view(card: pd.DataFrame, data: bool = False) -> pd.DataFrame:
    """The card as a table shows it: :data:`VIEW_COLUMNS` (the numbers stay in the data); with
    ``data`` also :data:`KIND_COLUMNS`, which a published table carries for a program to read."""
    view = card.assign(kind=row_kinds(card))
    return view[VIEW_COLUMNS + (KIND_COLUMNS if data else [])]


def chapter_view(card: pd.DataFrame, chapter: str, data: bool = False) -> pd.DataFrame:
    """One chapter's rows as the page shows them: ids stay in the notebook, not the table."""
    part = table_view(card[card["chapter"] == chapter], data=data)
    return part.drop(columns=["chapter", "id"]).reset_index(drop=True)


OVERVIEW_COLUMNS = ["chapter", "measurement", "row", "column", "kind", "cited", "ours",
                    "verdict", "reason", *verdicts.NUMBER_COLUMNS, "rows"]
"""One line of the overview figure; ``rows`` counts the card rows it stands for."""


def overview(card: pd.DataFrame, chapter_order: list[str]) -> pd.DataFrame:
    """The card's rows as the book's overview figure draws them, chapter by chapter in
    ``chapter_order`` (then any other chapter of the card).

    Every change row (cited, derived, mechanism) is one line. The values of the author's machine
    are not drawn one by one: where a change row stands for them they are its context, and a
    (measurement, row) of values alone (a chapter not yet measured, a share shown for scale)
    becomes one line per verdict, counting its values. So every row a judge emitted is drawn or
    counted, and the ``rows`` of the overview add up to the card's length.
    """
    order = {c: i for i, c in enumerate(dict.fromkeys([*chapter_order, *card["chapter"]]))}
    card = card.iloc[card["chapter"].map(order).argsort(kind="stable")]
    fields = OVERVIEW_COLUMNS[:-1]
    lines = []
    for _, part in card.groupby(["chapter", "measurement", "row"], sort=False):
        changes = part[part["kind"] != KINDS[1]]
        values = part[part["kind"] == KINDS[1]]
        for i, (_, row) in enumerate(changes.iterrows()):
            lines.append({**row[fields].to_dict(), "rows": 1 + (len(values) if i == 0 else 0)})
        if len(changes):
            continue
        for verdict, same in values.groupby("verdict", sort=False):
            lines.append({**same.iloc[0][fields].to_dict(),
                          "column": f"{len(same)} cited value{'s' * (len(same) > 1)}",
                          "ours": "" if verdict == NOT_YET else same.iloc[0]["ours"],
                          "rows": len(same)})
    return pd.DataFrame(lines, columns=OVERVIEW_COLUMNS)


TALLIES = {
    "claims": "the author's changes, cited or implied by a cited pair (the absolute values of "
              "the author's machine are never compared, so not counted)",
    "mechanism rows": "counterparts of the author's explanation in another unit, judged for "
                      "direction",
    "our readings": "mechanism rows that test the book's own reading, never the author's",
    "checks": "pass/fail or true by construction, never support",
}
"""The groups a tally counts apart (:func:`tally`), and what each holds."""


TALLY_WORDS = {verdicts.PASSED: ("passed", "passed"), verdicts.FAILED: ("failed", "failed"),
               verdicts.HOLDS: ("holds", "hold"), verdicts.FAILS: ("fails", "fail")}
"""Verdicts a tally shortens, since its group already names them ("checks: 2 passed",
"our readings: 1 holds, 2 fail"), as (one, several)."""


def tally(card: pd.DataFrame) -> dict[str, dict[str, int]]:
    """How many rows of ``card`` (the whole card or one chapter's part) got each verdict, group
    by group (:data:`TALLIES`), verdicts in the order of :data:`lab.analysis.verdicts.VERDICTS`. The
    groups never mix: a check or a row of our own reading is never in a support count."""
    changes = card[card["kind"] != KINDS[1]]
    ours = changes["ours_reading"].astype(bool)
    groups = {
        "claims": changes[(changes["row_kind"] == verdicts.CLAIM) & ~ours],
        "mechanism rows": changes[(changes["row_kind"] == verdicts.MECHANISM) & ~ours],
        "our readings": changes[(changes["row_kind"] != verdicts.CHECK) & ours],
        "checks": changes[changes["row_kind"] == verdicts.CHECK],
    }
    found = {}
    for name, part in groups.items():
        counted = part["verdict"].value_counts()
        found[name] = {v: int(counted[v]) for v in verdicts.VERDICTS if v in counted}
    return found


def tally_text(counts: dict[str, int]) -> str:
    """One group of :func:`tally` in words: "1 reproduced, 3 inconclusive here"; "none"."""
    return ", ".join(f"{n} {TALLY_WORDS.get(v, (v, v))[n != 1]}"
                     for v, n in counts.items()) or "none"


def verdict_summary(card: pd.DataFrame) -> str:
    """What a chapter's rows found, group by group (:func:`tally`), e.g. "claims: 1
    reproduced, 3 inconclusive here; mechanism rows: 2 direction confirmed; checks: 2
    passed"; a group without rows is left out."""
    parts = [f"{name}: {tally_text(counts)}" for name, counts in tally(card).items() if counts]
    return "; ".join(parts) or "no cited changes"
