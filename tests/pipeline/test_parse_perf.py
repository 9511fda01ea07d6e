"""lab.parse.perf on perf's own layouts: lines as perf 7.2 prints them (the io-wq chapter's
tests read whole captured outputs; these pin each rule on a few lines)."""

from __future__ import annotations

import pytest

from lab.command import StageError
from lab.parse import perf

PROFILE = [" 60.00% ; 3 ;[kernel.kallsyms] ;[k] queued_spin_lock_slowpath",
           " 20.00% ; 1 ;[kernel.kallsyms] ;[k] io_run_task_work",
           " 20.00% ; 1 ;nop ;[.] main"]
DIFF = ["# Event 'cpu-clock'", "#",
        "# Baseline;Delta Abs;Shared Object       ;Symbol",
        "25.62   ;-11.57%  ;[kernel.kallsyms]   ;[k] _raw_spin_unlock_irqrestore",
        "        ;+2.09%   ;[kernel.kallsyms]   ;[k] format_decode",
        "0.66    ;+0.97%   ;nop                 ;[.] 0x0000000000001100",
        "4.19    ;         ;[kernel.kallsyms]   ;[k] vsnprintf"]


def test_a_flat_profile_gives_shares_and_the_user_sum() -> None:
    rows = dict(perf.profile(PROFILE, "p"))
    assert rows == {"profile.samples": 5, "share.user": 20.0,
                    "share.queued_spin_lock_slowpath": 60.0, "share.io_run_task_work": 20.0}


def test_a_profile_may_round_above_100_only_by_its_lines_rounding() -> None:
    # 300 one-sample lines of 0.33 % each print as 0.33 %: 99 %, inside 300 * 0.005
    lines = [f" 0.33% ; 1 ;[kernel.kallsyms] ;[k] f{i}" for i in range(300)]
    assert dict(perf.profile(lines, "p"))["profile.samples"] == 300
    with pytest.raises(StageError, match=r"sum to 66\.00 %"):
        perf.profile(lines[:200], "p")


def test_folded_chains_count_for_their_first_caller_outside_the_lock_code() -> None:
    lines = [" 8.64% ; 5 ;[k] queued_spin_lock_slowpath",
             "3 queued_spin_lock_slowpath;_raw_spin_lock;io_wq_enqueue;io_queue_iowq",
             "2 queued_spin_lock_slowpath;io_worker_handle_work;io_wq_worker"]
    rows = dict(perf.callers(lines, "c"))
    assert rows == {"callers.queued_spin_lock_slowpath.samples": 5,
                    "caller.queued_spin_lock_slowpath.io_wq_enqueue": 3,
                    "caller.queued_spin_lock_slowpath.io_worker_handle_work": 2}
    with pytest.raises(StageError, match="count 3 samples, its line 5"):
        perf.callers(lines[:2], "c")


def test_perf_stat_counts_and_refuses_what_it_could_not_count() -> None:
    assert dict(perf.stat(["60333;;context-switches;3095757515;100.00;;", "ops=1"], "s")) == {
        "stat.context-switches": 60333}
    with pytest.raises(StageError, match="has no count"):
        perf.stat(["<not counted>;;context-switches;0;0.00;;"], "s")


def test_perf_diff_keeps_perf_s_order_and_leaves_a_vanished_symbol_without_delta() -> None:
    rows = dict(perf.diff("nop", DIFF, "d"))
    assert rows["nop.lines"] == 4
    first = "_raw_spin_unlock_irqrestore"
    assert (rows[f"nop.rank.{first}"], rows[f"nop.baseline.{first}"],
            rows[f"nop.delta.{first}"]) == (1, 25.62, -11.57)
    # new in the second recording: no baseline printed, so 0
    assert rows["nop.baseline.format_decode"] == 0 and rows["nop.delta.format_decode"] == 2.09
    # only in the baseline: perf prints no delta, and lists it last
    assert rows["nop.rank.vsnprintf"] == 4 and "nop.delta.vsnprintf" not in rows
    with pytest.raises(StageError, match="perf diff's header"):
        perf.diff("nop", [line.replace("Delta Abs", "Ratio") for line in DIFF], "d")
