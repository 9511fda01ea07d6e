"""The sched-ext parser on what residence.sh really printed, and on broken variants of it.

Fixture ``residence-baseline.out``: the first baseline boot of the committed scx_remote run
(TCG, 2 vCPUs, 30 s load), its raw ``residence.out`` as the guest wrote it.
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


def _hist_sum(r: dict[str, float], name: str, at_least: float = 0) -> float:
    return sum(v for k, v in r.items() if k.startswith(f"{name}.hist.")
               and float(k.rsplit(".", 1)[1]) >= at_least)


def test_counts_rates_and_histograms_come_from_the_bpftrace_json() -> None:
    r = rows()
    assert r["residences"] > 0 and r["inserts"] >= r["residences"]
    assert r["over_128us_per_million"] == pytest.approx(r["over_128us"] / r["residences"] * 1e6)
    assert _hist_sum(r, "residence_us") == r["residences"]
    # the histogram's buckets from 256 us hold the counted outliers but for those at 256 us
    # exactly (hist of us is floor-divided; the counters compare nanoseconds)
    assert _hist_sum(r, "residence_us", 256) <= r["over_256us"] <= _hist_sum(r, "residence_us",
                                                                             128)
    assert r["unmatched_late"] == 0 and r["recursion_misses"] == 0


def test_fallbacks_handlers_and_ended_residences_are_split_by_origin() -> None:
    r = rows()
    # a baseline boot: the changed call ran thousands of times, the handler of each remote
    # fallback ran on the calling CPU
    assert r["fallbacks.remote"] >= 1000 and r["ran_elsewhere"] > 0
    for origin in ("remote", "local"):
        assert _hist_sum(r, f"deferral_us.{origin}") == r[f"handlers.{origin}"]
    for origin in ("remote", "local", "unattributed"):
        assert _hist_sum(r, f"handler_residence_us.{origin}") == r[
            f"handler_residences.{origin}"]
        assert r[f"handler_over_256us.{origin}"] <= r[f"handler_over_128us.{origin}"]
    callers = {k: v for k, v in r.items() if k.startswith("fallback_callers.")}
    assert sum(v for k, v in callers.items() if ".remote." in k) == r["fallbacks.remote"]
    assert sum(v for k, v in callers.items() if ".local." in k) == r["fallbacks.local"]
    assert not any("schedule_deferred" in k or ".bpf_" in k for k in callers)


def test_work_census_scheduler_environment_and_events_are_rows() -> None:
    r = rows()
    assert r["env.nproc"] == 2 and r["env.CONFIG_HZ"] == 1000 and r["env.remote_nth"] > 0
    assert r["env.ftrace_irq_work_queue"] == 0 and r["env.ftrace_irq_work_queue_on"] == 0
    assert r["bogo_ops.cpu"] == sum(r[f"stress.{n}.bogo_ops"] for n in
                                    ("cpu-nice-10", "cpu-nice0", "cpu-nice10", "cpu-nice19"))
    assert r["census.stress-ng-cpu"] >= 4 and r["census.tasks"] >= r["census.running"] > 0
    assert r["sched.remote"] > 0 and r["sched.dispatch"] > r["sched.remote"]
    assert r["events.REENQ_IMMED"] > 0


@pytest.mark.parametrize("broken, message", [
    (TEXT.replace("end=ok", ""), "truncated"),
    (TEXT.replace('{"type": "printf", "data": "end\\n"}', ""), "END"),
    (TEXT.replace("== events.after", "== events.later"), "missing"),
    (TEXT.replace('"@inserts": ', '"@inserts": "x", "@y": '), "not a number"),
    (TEXT.replace('"@inserts"', '"@insertz"'), "does not know"),
    (TEXT.replace('"@fallbacks": {"1"', '"@fallbacks": {"7"'), "not an origin"),
    (TEXT.replace("== scheduler", "error=probe target dsq_inc_nr is not in "
                  "available_filter_functions\n== scheduler"), "dsq_inc_nr"),
    (TEXT.replace("== stress-ng yield", "== stress-ng cpu-nice0"), "twice"),
    (TEXT.replace("recursion_misses=0", "recursion_misses="), "recursion_misses"),
    (TEXT.replace("\ndispatch=", "\nxdispatch="), "no dispatch= line"),
    (TEXT.replace("== scheduler", '{"type": "lost_events", "data": {"events": 3}}\n'
                  "== scheduler"), "lost"),
])
def test_broken_output_fails_with_a_reason(broken: str, message: str) -> None:
    assert broken != TEXT
    with pytest.raises(StageError, match=message):
        parse.residence(broken, "fixture")
