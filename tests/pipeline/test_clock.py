"""Clock health from real serial consoles: the parser on excerpts of committed consoles, and
:func:`lab.analysis.runs.clock_health` on the committed io-wq and workqueue runs.

Each fixture in ``fixtures/clock/`` is an excerpt of one committed console (the first line,
the clock lines before init, and every line from init on) that parses exactly as the whole
console does:

- ``iowq-lockstat-tsc-unstable-in-window.log``: io-wq 20261123T135853Z-auto lockstat-k0 rep5
- ``workqueue-tsc-unstable-at-boot.log``: workqueue 20261123T080654Z-auto baseline rep1
- ``qpw-watchdog-timeout-before-init.log``: qpw 20261125T170713Z-auto-icount dyn-pw-0 rep1
- ``schedext-watchdog-timeout-in-window.log``: sched-ext 20261123T113836Z-auto baseline rep1
- ``contextswitch-healthy-tsc-handover-in-window.log``: context-switch
  20261122T054812Z-auto-icount gcc-baseline-icount rep1
- ``contextswitch-watchdog-timeout-after-done.log``: context-switch
  20261122T081045Z-auto-icount clang-patched rep3
- ``qpw-quiet-console.log``: qpw 20261125T172242Z-auto lockdep-fixed rep1, whole (booted
  ``quiet``)
"""

from __future__ import annotations

import dataclasses
import gzip
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from lab import ROOT
from lab.analysis import runs
from lab.parse.clock import ClockHealth, parse_console

from .conftest import FIXTURES

CLOCK = FIXTURES / "clock"


def parse(name: str) -> ClockHealth:
    """The clock health of fixture ``name`` (without ``.log``)."""
    return parse_console((CLOCK / f"{name}.log").read_text(), name)


def test_tsc_marked_unstable_inside_the_window() -> None:
    health = parse("iowq-lockstat-tsc-unstable-in-window")
    assert health == ClockHealth(window_start=7.323066, boot_clocksource="tsc",
                                 tsc_unstable=True, switches=("hpet",), watchdog_timeouts=0,
                                 unstable_before_window=False)
    assert health.flags() == ("TSC marked unstable", "clocksource switched to hpet")
    assert health.flagged


def test_tsc_unstable_at_boot_is_a_fact_not_a_flag() -> None:
    health = parse("workqueue-tsc-unstable-at-boot")
    assert health == ClockHealth(window_start=4.290652, boot_clocksource="hpet",
                                 tsc_unstable=False, switches=(), watchdog_timeouts=0,
                                 unstable_before_window=True)
    assert health.flags() == () and not health.flagged


def test_watchdog_timeout_before_init_is_outside_the_window() -> None:
    health = parse("qpw-watchdog-timeout-before-init")
    assert health == ClockHealth(window_start=1.635142, boot_clocksource="tsc-early",
                                 tsc_unstable=False, switches=("tsc",), watchdog_timeouts=0,
                                 unstable_before_window=False, timeout_before_window=True)
    # not a flag, but the once-per-boot line is spent: the window could not show another
    assert not health.flagged


def test_watchdog_timeout_inside_the_window_is_flagged() -> None:
    health = parse("schedext-watchdog-timeout-in-window")
    assert health == ClockHealth(window_start=2.551833, boot_clocksource="tsc",
                                 tsc_unstable=False, switches=(), watchdog_timeouts=1,
                                 unstable_before_window=False)
    assert health.flags() == ("1 watchdog timeout",)
    doubled = (CLOCK / "schedext-watchdog-timeout-in-window.log").read_text().replace(
        "KB-DONE", "[   28.000000] clocksource: Watchdog remote CPU 1 read timed out\nKB-DONE")
    assert parse_console(doubled).flags() == ("2 watchdog timeouts",)


def test_tsc_early_to_tsc_handover_is_healthy() -> None:
    health = parse("contextswitch-healthy-tsc-handover-in-window")
    assert health == ClockHealth(window_start=2.57869, boot_clocksource="tsc-early",
                                 tsc_unstable=False, switches=("tsc",), watchdog_timeouts=0,
                                 unstable_before_window=False)
    assert health.flags() == ()


def test_watchdog_timeout_after_kb_done_is_outside_the_window() -> None:
    health = parse("contextswitch-watchdog-timeout-after-done")
    assert health == ClockHealth(window_start=2.554177, boot_clocksource="tsc",
                                 tsc_unstable=False, switches=(), watchdog_timeouts=0,
                                 unstable_before_window=False)
    assert not health.flagged


def test_quiet_console_is_not_reported_healthy() -> None:
    health = parse("qpw-quiet-console")
    assert health == ClockHealth(window_start=None, boot_clocksource="", tsc_unstable=False,
                                 switches=(), watchdog_timeouts=0, unstable_before_window=False)
    assert health.flags() == ("clock not checked: no init line on the console",)


def test_a_silent_kernel_console_with_its_end_marker_is_not_checked() -> None:
    # a loglevel=0 debug boot of the qpw chapter: the kernel printed nothing to the console
    silent = gzip.decompress((ROOT / "data" / "runs" / "qpw" / "20261126T074638Z-auto" / "raw"
                              / "debug-rt-flush" / "rep1" / "console.log.gz").read_bytes())
    health = parse_console(silent.decode(), "silent")
    assert health.window_start is None and not health.switches
    assert health.flags() == ("clock not checked: no init line on the console",)


def test_without_an_init_line_the_whole_console_is_the_window() -> None:
    text = (CLOCK / "iowq-lockstat-tsc-unstable-in-window.log").read_text()
    health = parse_console(text.replace("Run /bin/sh as init process", "Freeing memory"))
    assert (health.window_start, health.boot_clocksource) == (None, "")
    assert health.switches == ("tsc-early", "tsc", "hpet") and health.tsc_unstable
    assert not health.unstable_before_window


def test_mainline_wording_of_an_unstable_tsc_is_recognised() -> None:
    text = (CLOCK / "schedext-watchdog-timeout-in-window.log").read_text().replace(
        "KB-DONE", "[   30.000000] clocksource: timekeeping watchdog on CPU1: Marking "
        "clocksource 'tsc' as unstable because the skew is too large:\nKB-DONE")
    assert parse_console(text).tsc_unstable


def test_text_that_is_not_a_console_fails_loudly() -> None:
    with pytest.raises(ValueError, match=r"^getpid.out: no kernel log line"):
        parse_console((FIXTURES / "getpid.out").read_text(), "getpid.out")
    with pytest.raises(ValueError, match=r"^empty: no kernel log line"):
        parse_console("", "empty")


IOWQ = "20261123T135853Z-auto"


@pytest.mark.parametrize("pooled", [True, False], ids=["pooled", "plain"])
def test_committed_iowq_run(pooled: bool, data_unchanged: Callable[[], None]) -> None:
    plain = runs.load_run(runs.RUNS_DIR / "io-wq" / IOWQ)
    # this run's boots through the pooling code (a newer run measures the chapter now)
    per_variant = runs.pooled_per_variant([plain])

    def health(variant: str) -> pd.DataFrame:
        return runs.clock_health(per_variant[variant] if pooled else plain, variant)

    k0 = health("lockstat-k0")
    assert list(k0.columns) == runs.CLOCK_COLUMNS
    assert list(k0["rep"]) == list(k0["run_rep"]) == [1, 2, 3, 4, 5]
    assert set(k0["run_id"]) == {IOWQ}
    assert k0.iloc[4].to_dict() == {
        "rep": 5, "run_id": IOWQ, "run_rep": 5, "window_start": 7.323066,
        "boot_clocksource": "tsc", "tsc_unstable": True, "switches": "hpet",
        "watchdog_timeouts": 0, "unstable_before_window": False,
        "timeout_before_window": False,
        "flags": "TSC marked unstable; clocksource switched to hpet"}
    # rep4: one timeout at 11.5 s, after init (6.5 s) and before KB-DONE
    assert list(k0["watchdog_timeouts"]) == [0, 0, 0, 1, 0]
    assert list(k0["flags"])[:4] == ["", "", "", "1 watchdog timeout"]
    k2 = health("lockstat-k2")
    assert list(k2["tsc_unstable"]) == [False, False, False, False, True]
    assert k2.iloc[4]["window_start"] == 11.255575 and k2.iloc[4]["switches"] == "hpet"
    # rep2's only timeout comes after KB-DONE
    assert list(k2["watchdog_timeouts"]) == [0, 0, 0, 0, 0]
    # k0 rep3: one timeout at 55.6 s; k0-window rep2: its only one is before init
    assert list(health("k0")["watchdog_timeouts"]) == [1, 1, 1, 1, 1]
    assert list(health("k0-window")["watchdog_timeouts"]) == [0, 0, 0, 0, 1]
    # k0-window rep2 printed its one timeout line before init: its window's 0 says nothing
    assert list(health("k0-window")["timeout_before_window"]) == [False, True, False, False,
                                                                  False]
    data_unchanged()


def test_pooled_rows_read_each_boot_from_its_own_run() -> None:
    run = runs.pooled_per_variant(runs.load_chapter_runs("workqueue"))["baseline"]
    health = runs.clock_health(run, "baseline").set_index("rep")
    assert len(health) == 18 and health["unstable_before_window"].all()
    assert set(health["boot_clocksource"]) == {"hpet"} and set(health["flags"]) == {""}
    assert (health.loc[4, "run_id"], health.loc[4, "run_rep"]) == ("20261122T062338Z-auto", 1)
    assert health.loc[4, "window_start"] == 3.319844
    assert (health.loc[9, "run_id"], health.loc[9, "window_start"]) == (
        "20261123T080654Z-auto", 4.290652)


def test_a_missing_console_names_the_file_and_the_fix(tmp_path: Path) -> None:
    run = runs.load_run(runs.RUNS_DIR / "io-wq" / IOWQ)
    moved = dataclasses.replace(run, path=tmp_path / "io-wq" / IOWQ)
    expected = tmp_path / "io-wq" / IOWQ / "raw" / "k0" / "rep1" / "console.log.gz"
    with pytest.raises(runs.RunDataError, match=rf"^{expected}: missing.*"
                       r"git checkout -- data/runs"):
        runs.clock_health(moved, "k0")
