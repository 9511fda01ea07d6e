"""The scorecard: every cited number beside our value, the environment and a verdict.

A cited entry with no committed measurement is "not yet reproduced"; the verdict of a measured
entry comes from the run's results (the experiment that measured it decides what agreement
means for that quantity), never from this table.
"""

from __future__ import annotations

import pandas as pd

NOT_YET = "not yet reproduced"


def build(cited: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Join cited entries (``lab.cited.to_frame``) with measured ones (``lab.runs``)."""
    card = cited.merge(measured, on="id", how="left")
    card["ours"] = card["ours"].fillna("—").astype(str)
    card["environment"] = card["environment"].fillna("—").astype(str)
    card["verdict"] = card["verdict"].fillna(NOT_YET).astype(str)
    return card[["chapter", "id", "table", "row", "column", "cited", "ours",
                 "environment", "verdict"]].rename(columns={"table": "measurement"})


def chapter_view(card: pd.DataFrame, chapter: str) -> pd.DataFrame:
    """One chapter's rows as the page shows them: ids stay in the notebook, not the table."""
    part = card[card["chapter"] == chapter]
    return part.drop(columns=["chapter", "id"]).reset_index(drop=True)
