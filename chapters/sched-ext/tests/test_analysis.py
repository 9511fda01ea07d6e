"""The sched-ext judge on the committed run: the outlier claims are inconclusive because the
changed path runs too rarely to move them, and the rows true by construction are checks."""

from __future__ import annotations

import pandas as pd

from lab import chapters, cited, runs, scorecard, verdicts

scx = chapters.get("sched-ext").module("analysis")
FRAME = cited.to_frame(cited.load_all())
ROWS = scx.judge(FRAME, runs.load_chapter_runs("sched-ext")).set_index("id")


def test_the_outlier_claims_are_inconclusive_because_the_design_cannot_move_them() -> None:
    for rid in scx.CHANGES:
        row = ROWS.loc[rid]
        assert row["row_kind"] == verdicts.CLAIM and row["verdict"] == verdicts.INCONCLUSIVE
        assert "this design cannot move the metric" in row["reason"]
        assert "spread between boots" not in row["reason"]
        assert 0 < row["bound"] < row["detectable"]


def test_where_the_handler_ran_and_the_call_sites_are_checks_not_support() -> None:
    for rid in ("sched-ext-check-owner-cpu", "sched-ext-check-call-sites"):
        row = ROWS.loc[rid]
        assert row["row_kind"] == verdicts.CHECK and row["verdict"] == verdicts.PASSED
    assert "off the owner's CPU 0 of" in ROWS.loc["sched-ext-check-owner-cpu", "ours"]
    card = scorecard.build(FRAME[FRAME["chapter"] == "sched-ext"],
                           pd.DataFrame(columns=runs.MEASURED_COLUMNS), ROWS.reset_index())
    counted = scorecard.counts(card, FRAME[FRAME["chapter"] == "sched-ext"])
    assert counted["check"] == 2 and counted["check-support"] == 0
    assert counted["claim-support"] == 0


def test_the_deferral_delay_row_says_its_fallbacks_are_mostly_local() -> None:
    row = ROWS.loc["sched-ext-mechanism-deferral-delay"]
    assert row["row_kind"] == verdicts.MECHANISM and row["bound"] > 0
    assert "% of the averaged fallbacks were remote" in row["reason"]
