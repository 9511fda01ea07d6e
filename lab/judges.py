"""Which chapters judge their cited numbers, and the scorecard rows they produce.

A judge takes the cited frame and the chapter's committed runs (oldest first) and returns
scorecard rows (:data:`lab.runs.MEASURED_COLUMNS`). Chapters without one keep "measured, not
yet judged". The registry sits apart from :mod:`lab.scorecard` because the judges build on it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from lab import context_switch, runs, workqueue

JUDGES: dict[str, Callable[[pd.DataFrame, list[runs.Run]], pd.DataFrame]] = {
    "workqueue": workqueue.judge,
    "context-switch": context_switch.judge,
}


def judged(cited: pd.DataFrame, runs_dir: Path = runs.RUNS_DIR) -> pd.DataFrame:
    """The judged rows of every chapter that has a judge, for :func:`lab.scorecard.build`."""
    frames = [judge(cited, runs.load_chapter_runs(chapter, runs_dir))
              for chapter, judge in JUDGES.items()]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=runs.MEASURED_COLUMNS)
    return pd.concat(frames, ignore_index=True)
