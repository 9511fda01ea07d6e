"""The qpw judge on the committed runs: every cited cell gets a verdict, every patched cell a
change row and an icount mechanism row beside it, and the isolation and lockdep rows stand at
the chapter's end."""

from __future__ import annotations

import pandas as pd
import pytest

from lab import chapters
from lab.analysis import cited, runs, scorecard, verdicts

qpw = chapters.get("qpw").module("analysis")
FRAME = cited.to_frame(cited.load_all())
OLD_LOCKDEP_RUN = "20261126T074638Z-auto"


def judged() -> pd.DataFrame:
    return qpw.judge(FRAME, runs.load_chapter_runs("qpw")).set_index("id")


def test_the_cells_come_from_the_chapter_s_cited_declaration() -> None:
    cells = qpw.cells(FRAME)
    assert len(cells) == 7 == len(FRAME[FRAME["chapter"] == "qpw"])
    references = [c for c in cells if c.is_reference]
    assert [c.variant for c in references] == ["dyn-unpatched", "rt-unpatched"]
    assert all(c.reference_id in {r.cited_id for r in references} for c in cells)
    assert qpw.cited_change(FRAME, cells[3]).value == (75 / 60 - 1) * 100


def test_every_cited_cell_is_judged_and_every_patched_cell_has_two_change_rows() -> None:
    rows = judged()
    ids = FRAME.loc[FRAME["chapter"] == "qpw", "id"]
    assert set(ids) <= set(rows.index)
    assert (rows.loc[ids, "verdict"] == verdicts.NOT_COMPARABLE).all()
    for cell in qpw.cells(FRAME):
        if cell.is_reference:
            continue
        change, mechanism = rows.loc[f"{cell.cited_id}-change"], rows.loc[f"{cell.cited_id}-icount"]
        assert change["verdict"] in verdicts.JUDGED and change["cited"].endswith(")")
        assert mechanism["verdict"] in verdicts.JUDGED
        assert "instructions" in mechanism["ours"]
    assert set(rows.columns) >= set(scorecard.DERIVED_COLUMNS) - {"id"}


def test_the_isolation_rows_are_judged_for_direction_and_lockdep_is_a_check() -> None:
    rows = judged()
    isolation = rows[rows["table"] == qpw.ISOLATION_TABLE]
    # the four counts per request; the longest request and the loop's longest gap, each with
    # and without the first request (which waits for the fair server); the median request of
    # the boots whose requests are spaced past the server's period; the work items per request
    # of the disk victim on a CPU isolated with nohz_full= alone
    assert len(isolation) == len(qpw.PER_TRIGGER) + 7
    assert (isolation["row_kind"] == verdicts.MECHANISM).all()
    assert set(isolation["verdict"]) <= {verdicts.DIRECTION, verdicts.INCONCLUSIVE,
                                         verdicts.CONTRADICTED, verdicts.HOLDS, verdicts.FAILS}
    ours = isolation.index.str.endswith("-disk")
    assert (isolation.loc[~ours, "expected_sign"] == -1).all()
    assert (isolation.loc[ours, "expected_sign"] == 0).all() and isolation["our_low"].notna().all()
    work = rows.loc["qpw-isolation-work-on-victim"]
    assert work["verdict"] == verdicts.DIRECTION and work["our_high"] < 0
    # the headline rests on the first request: without it the 3-vs-3 times are inconclusive
    assert rows.loc["qpw-isolation-latency", "verdict"] == verdicts.DIRECTION
    assert rows.loc["qpw-isolation-latency-later", "verdict"] == verdicts.INCONCLUSIVE
    assert "n=3+3" in rows.loc["qpw-isolation-latency-later", "reason"]
    # spaced, every request of the kernels that queue the drain waits: a decrease in every boot
    spaced = rows.loc["qpw-isolation-latency-spaced"]
    assert spaced["verdict"] == verdicts.DIRECTION and spaced["our_high"] < 0
    # the disk victim on a nohz_full-only CPU: our reading that 2/4's buffer-head drain stays
    # a work item there; the drains per request are exact counts (2 and 2 in every boot)
    disk = rows.loc["qpw-isolation-work-on-victim-disk"]
    assert disk["verdict"] == verdicts.HOLDS and disk["our_low"] == disk["our_high"] == 0
    assert rows.loc["qpw-isolation-latency-disk", "verdict"] in (verdicts.HOLDS,
                                                                verdicts.INCONCLUSIVE)
    # syzbot's report before and after: two checks, each passed or failed
    for rid in ("qpw-lockdep-v4", "qpw-lockdep-syzbot"):
        assert rows.loc[rid, "row_kind"] == verdicts.CHECK
        assert rows.loc[rid, "verdict"] in (verdicts.PASSED, verdicts.FAILED)


def test_lockdep_kernels_built_without_config_bug_are_refused() -> None:
    """The lockdep kernels of run 20261126T074638Z-auto lack CONFIG_BUG, so their quiet boots
    cannot show a WARN_ON(): judged alone, that run is refused with the fix named."""
    older = [r for r in runs.load_chapter_runs("qpw") if r.path.name <= OLD_LOCKDEP_RUN]
    assert OLD_LOCKDEP_RUN in {r.path.name for r in older}
    with pytest.raises(ValueError, match=f"lockdep-v4 \\({OLD_LOCKDEP_RUN}\\).*CONFIG_BUG"):
        qpw.judge(FRAME, older)


def test_0006_is_a_check_per_model_that_rests_on_the_path_having_run() -> None:
    rows = judged()
    for model in ("dyn", "rt"):
        row = rows.loc[f"qpw-0006-flush-{model}"]
        assert row["row_kind"] == verdicts.CHECK and row["verdict"] == verdicts.PASSED
        assert "failed allocations" in row["reason"]


def test_instruction_counts_are_judged_by_their_prediction_and_never_contradict_cycles() -> None:
    rows = judged()
    icount = rows[rows.index.str.endswith("-icount")]
    assert len(icount) == 5 and verdicts.CONTRADICTED not in set(icount["verdict"])
    off, rt_on = "qpw-kmalloc-dynamic-qpw-n-icount", "qpw-kmalloc-rt-qpw-y-1-icount"
    assert (icount.drop([off])["row_kind"] == verdicts.MECHANISM).all()
    # -0.06 % (RT, pwlocks=1): judged against no change, our sharpening of the cover's
    # explanation (a reading of ours, never support), shown in the cited column, never beside
    # the cited +2.1 % cycles
    assert rows.loc[rt_on, "verdict"] == verdicts.HOLDS and rows.loc[rt_on, "ours_reading"]
    assert "lies inside the margin" in rows.loc[rt_on, "reason"]
    assert rows.loc[rt_on, "cited"].startswith("no change, our sharpening")
    # 0.00 % (PWLOCKS=n): the unpatched kernel's code, so the same instructions by
    # construction: a check, which never counts as support
    assert rows.loc[off, "row_kind"] == verdicts.CHECK
    assert rows.loc[off, "verdict"] == verdicts.PASSED
    assert "lies inside the margin" in rows.loc[off, "reason"]
    assert rows.loc[off, "cited"].startswith("no change, by construction")
    assert not verdicts.supporting(rows.loc[off, "verdict"], verdicts.CHECK, False)
    # the rows that predict a change still show the cited cycles they are read against
    assert "implied" in rows.loc["qpw-kmalloc-dynamic-qpw-y-1-icount", "cited"]


def test_tcg_cells_are_claims_in_tsc_ticks_judged_with_the_truncation_interval() -> None:
    rows = judged()
    changes = rows[rows.index.str.endswith("-change")]
    assert len(changes) == 5 and (changes["row_kind"] == verdicts.CLAIM).all()
    # 95 -> 97 ticks, each truncated by an integer division: +1.0 ... +3.2 %
    assert "+1.0 to +3.2 % as printed" in rows.loc["qpw-kmalloc-rt-qpw-y-1-change", "cited"]
    implied = scorecard.cited_change(FRAME[FRAME["id"].isin(["qpw-kmalloc-rt-unpatched",
                                                              "qpw-kmalloc-rt-qpw-y-1"])])
    assert round(implied.low, 1) == 1.0 and round(implied.high, 1) == 3.2


def test_a_pooled_debug_variant_has_a_row_per_boot_and_each_boot_reads_its_own_run() -> None:
    """debug-dyn-init pools one boot of run 20261126T124405Z-auto (no report) with five of
    20261126T125045Z-auto: the table has a row per boot, and a boot's kept report comes from the
    run and repetition it was made in, not from the newest run's rep1. (Those two runs alone:
    a later run with another guest module replaces them in the book.)"""
    pooled = {"20261126T124405Z-auto", "20261126T125045Z-auto"}
    chosen = runs.pooled_per_variant([r for r in runs.load_chapter_runs("qpw")
                                      if r.run_id in pooled])
    table = qpw.debug_table(chosen)
    init = table[table["variant"] == "debug-dyn-init"].set_index("boot")
    assert list(init.index) == [1, 2, 3, 4, 5, 6]
    assert chosen["debug-dyn-init"].run_id == "20261126T124405Z-auto + 20261126T125045Z-auto"
    for boot in init.index:
        first = qpw.debug_first_report(chosen, "debug-dyn-init", boot)
        assert any("bad magic" in line for line in first) == bool(init.loc[boot, "bad_magic"])
    assert qpw.debug_first_report(chosen, "debug-dyn-init", 1) == []
    assert (table["CONFIG_BUG"]).all()
