"""The io-wq judge on the committed run: the contentions row tests our reading, the wait-time
row stands for the author's claim, the lost-wakeup row is a check under a stated condition, and
no delta row calls an interval that excludes the cited delta too wide."""

from __future__ import annotations

from lab import chapters, cited, runs, verdicts

iowq = chapters.get("io-wq").module("analysis")
FRAME = cited.to_frame(cited.load_all())
ROWS = iowq.judge(FRAME, runs.load_chapter_runs("io-wq")).set_index("id")


def test_contentions_are_our_reading_and_wait_time_is_the_author_s() -> None:
    contentions = ROWS.loc["io-wq-mechanism-acct-lock-contentions"]
    assert contentions["ours_reading"] and contentions["verdict"] == verdicts.FAILS
    wait = ROWS.loc["io-wq-mechanism-acct-lock-wait"]
    assert not wait["ours_reading"] and wait["row_kind"] == verdicts.MECHANISM
    assert wait["verdict"] in verdicts.JUDGED


def test_the_lost_wakeups_are_a_check_with_its_condition() -> None:
    row = ROWS.loc["io-wq-check-lost-wakeups"]
    assert row["row_kind"] == verdicts.CHECK and row["verdict"] == verdicts.PASSED
    assert "second waiter" in row["reason"] and "not that the author's server" in row["reason"]


def test_no_delta_row_calls_an_interval_that_excludes_the_cited_delta_too_wide() -> None:
    deltas = ROWS[ROWS.index.str.endswith("-delta") & ROWS["our_low"].notna()]
    assert len(deltas) >= 12
    assert not deltas["reason"].str.contains("too wide").any()


def test_the_php_rows_are_not_yet_measured() -> None:
    php = ROWS[ROWS.index.str.startswith("io-wq-http-php-")]
    assert len(php) and (php["verdict"] == verdicts.NOT_YET).all()


def test_the_lock_statistics_boots_that_lost_the_tsc_are_flagged() -> None:
    chosen = runs.pooled_per_variant(runs.load_chapter_runs("io-wq"))
    switched = [(v, rep) for v in iowq.LOCKSTAT.values()
                for rep, flags in runs.clock_flags(chosen[v], v).items()
                if "switched to hpet" in flags]
    assert len(switched) == 2
    assert "clocksource switched to hpet" in ROWS.loc["io-wq-mechanism-acct-lock-wait", "reason"]
