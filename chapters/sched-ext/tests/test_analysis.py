"""The sched-ext judge on the committed run: the changed path ran often enough to judge the
outlier claims, the mechanism rows are the author's explanation timed in the guest's clock, and
the rows true by construction are checks that never count as support."""

from __future__ import annotations

import pandas as pd

from lab import chapters
from lab.analysis import cited, runs, scorecard, verdicts, views

scx = chapters.get("sched-ext").module("analysis")
FRAME = cited.to_frame(cited.load_all())
RUNS = runs.load_chapter_runs("sched-ext")
ROWS = scx.judge(FRAME, RUNS).set_index("id")
CHOSEN = runs.pooled_per_variant(RUNS)


def test_the_changed_path_ran_in_every_baseline_boot() -> None:
    boots = scx.per_boot(CHOSEN, ("fallbacks.remote", "handler_residences.remote"))
    base = boots[boots["kernel"] == "baseline"]
    assert (base["fallbacks.remote"] >= scx.PATH_RUNS).all()
    assert (base["handler_residences.remote"] > 0).all()
    row = ROWS.loc["sched-ext-check-remote-path-ran"]
    assert row["row_kind"] == verdicts.CHECK and row["verdict"] == verdicts.PASSED


def test_the_outlier_claims_carry_a_bound_the_design_can_reach() -> None:
    for rid in scx.CHANGES:
        row = ROWS.loc[rid]
        assert row["row_kind"] == verdicts.CLAIM
        assert "this design cannot move the metric" not in row["reason"]
        assert row["bound"] > row["detectable"]
        assert "this assumes" in row["reason"] and "scx_remote" in row["reason"]


def test_mechanism_rows_time_the_remote_fallbacks_only() -> None:
    for rid in ("sched-ext-mechanism-handler-residence", "sched-ext-mechanism-deferral-remote"):
        row = ROWS.loc[rid]
        assert row["row_kind"] == verdicts.MECHANISM
        assert row["verdict"] in (verdicts.DIRECTION, verdicts.CONTRADICTED,
                                  verdicts.INCONCLUSIVE, verdicts.NO_CHANGE)
        assert "guest clock" in row["column"]


def test_where_the_handler_ran_and_the_call_sites_are_checks_not_support() -> None:
    for rid in ("sched-ext-check-owner-cpu", "sched-ext-check-call-sites"):
        row = ROWS.loc[rid]
        assert row["row_kind"] == verdicts.CHECK and row["verdict"] == verdicts.PASSED
    assert "patched: handler ran off the runqueue's CPU 0 of" in ROWS.loc[
        "sched-ext-check-owner-cpu", "ours"]
    card = scorecard.build(FRAME[FRAME["chapter"] == "sched-ext"],
                           pd.DataFrame(columns=runs.MEASURED_COLUMNS), ROWS.reset_index())
    counted = views.counts(card, FRAME[FRAME["chapter"] == "sched-ext"])
    assert counted["check"] == 3 and counted["check-support"] == 0


def test_the_ccdf_starts_at_one_and_never_rises() -> None:
    curve = scx.ccdf(scx.histogram(CHOSEN, "handler_residence_us.remote"))
    for _, part in curve.groupby(["kernel", "rep"]):
        values = part.sort_values("low_us")["at_or_above"].to_numpy()
        assert abs(values[0] - 1) < 1e-9 and (values[1:] <= values[:-1] + 1e-12).all()
