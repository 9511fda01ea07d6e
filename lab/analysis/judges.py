"""The chapters' judges and the scorecard rows they produce.

A judge is ``judge(cited, runs)`` in a chapter's ``analysis.py``: it takes the cited frame and
the chapter's committed runs (oldest first) and returns scorecard rows
(:data:`lab.analysis.runs.MEASURED_COLUMNS`). Chapters without one keep "measured, not yet judged".
Judges are found through :mod:`lab.chapters`, so a new chapter's judge needs no registration.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from lab import chapters
from lab.analysis import runs


def judges() -> dict[str, Callable[[pd.DataFrame, list[runs.Run]], pd.DataFrame]]:
    """Chapter name -> its judge, for every chapter whose ``analysis.py`` defines one."""
    found = {name: ch.judge() for name, ch in chapters.discover().items()}
    return {name: judge for name, judge in found.items() if judge is not None}


def judged(cited: pd.DataFrame, runs_dir: Path = runs.RUNS_DIR) -> pd.DataFrame:
    """The judged rows of every chapter that has a judge, for
    :func:`lab.analysis.scorecard.build`."""
    frames = [judge(cited, runs.load_chapter_runs(chapter, runs_dir))
              for chapter, judge in judges().items()]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=runs.MEASURED_COLUMNS)
    return pd.concat(frames, ignore_index=True)
