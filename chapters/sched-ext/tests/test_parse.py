"""The sched-ext parser on what residence.sh really printed, and on broken variants of it.

Fixture ``residence-baseline.out``: a baseline boot captured under TCG on 2026-11-23 (2 vCPUs,
30 s load, scx_qmap built with clang 22), before the first committed run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import chapters
from lab.command import StageError

parse = chapters.get("sched-ext").module("parse")
TEXT = (Path(__file__).parent / "fixtures" / "residence-baseline.out").read_text()


def rows(text: str = TEXT) -> dict[str, float]:
    return dict(parse.residence(text, "fixture"))


def test_counts_rates_and_histograms_come_from_the_bpftrace_json() -> None:
    r = rows()
    assert r["residences"] == 99160 and r["over_128us"] == 431 and r["over_256us"] == 67
    assert r["over_128us_per_million"] == pytest.approx(431 / 99160 * 1e6)
    assert r["ran_on_owner"] + r["ran_elsewhere"] == 3587
    assert r["fallback_local"] + r["fallback_remote"] == 3586
    # the histogram's buckets above 128 us hold the counted outliers but for those at 128 us
    # exactly (hist of us is floor-divided; the counters compare nanoseconds)
    above = sum(v for k, v in r.items() if k.startswith("residence_us.hist.")
                and float(k.rsplit(".", 1)[1]) >= 256)
    assert above == 67
    assert sum(v for k, v in r.items() if k.startswith("residence_us.hist.")) == r["residences"]


def test_work_environment_and_events_are_rows() -> None:
    r = rows()
    assert r["env.nproc"] == 2 and r["env.CONFIG_HZ"] == 1000 and r["env.clocksource.tsc"] == 1
    assert r["env.ftrace_irq_work_queue"] == 0 and r["env.ftrace_irq_work_queue_on"] == 0
    assert r["bogo_ops.cpu"] == sum(r[f"stress.{n}.bogo_ops"] for n in
                                    ("cpu-nice-10", "cpu-nice0", "cpu-nice10", "cpu-nice19"))
    assert r["events.REENQ_IMMED"] == 1385
    assert r["fork_storms"] >= 1


@pytest.mark.parametrize("broken, message", [
    (TEXT.replace("end=ok", ""), "truncated"),
    (TEXT.replace('{"type": "printf", "data": "end\\n"}', ""), "END"),
    (TEXT.replace("== events.after", "== events.later"), "missing"),
    (TEXT.replace('"@over_128us": 431', '"@over_128us": "x"'), "not a number"),
    (TEXT.replace('"@inserts"', '"@insertz"'), "does not know"),
    (TEXT.replace("== qmap", "error=probe target dsq_inc_nr is not in available_filter_functions"
                  "\n== qmap"), "dsq_inc_nr"),
    (TEXT.replace("== stress-ng yield", "== stress-ng cpu-nice0"), "twice"),
    (TEXT.replace('{"type": "map", "data": {"@inserts"', '{"type": "map", "data": {"@inserts"'
                  ).replace("== qmap", '{"type": "lost_events", "data": {"events": 3}}\n== qmap'),
     "lost"),
])
def test_broken_output_fails_with_a_reason(broken: str, message: str) -> None:
    with pytest.raises(StageError, match=message):
        parse.residence(broken, "fixture")
