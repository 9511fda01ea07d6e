"""The isolation traces read again from the committed raw output: the fair server's wait, the
IPIs by the function that sent them, and the traced first request."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from lab import chapters
from lab.analysis import runs

qpw = chapters.get("qpw").module("analysis")
CHOSEN = runs.pooled_per_variant(runs.load_chapter_runs("qpw"))


def test_a_trace_has_its_rounds_and_the_victim_s_tsc_rate() -> None:
    (rep, path), *_ = qpw.isolation_outputs(CHOSEN, qpw.ISOLATED["unpatched"])
    trace, per_ns = qpw.isolation_trace(path)
    assert rep == 1 and 1 < per_ns < 5  # the guest TSC ticks at the host's GHz rate
    assert list(trace.columns) == qpw.TRACE_COLUMNS
    first = trace[trace["round"] == 0]
    queued = first[first["event"] == "workqueue_queue_work"]
    assert len(queued) == 1 and queued["detail"].iloc[0].endswith("cpu=1")
    assert set(trace["round"]) == {-1, *range(20)}


def test_the_first_request_waits_for_the_fair_server_s_zero_laxity_point() -> None:
    wait = qpw.fair_server_wait(CHOSEN).set_index("kernel")
    zero_laxity = qpw.FAIR_SERVER_PERIOD_MS - qpw.FAIR_SERVER_RUNTIME_MS
    queued = wait.loc[["unpatched", "pwlocks=0"]]
    assert (queued["victim_prio"] == 120).all()
    # late by the idle and fair time charged to the server, and by less than 10 ms more
    late = queued["to_kworker_ms"] - zero_laxity
    assert ((late >= queued["idle_or_fair_ms"]) & (late - queued["idle_or_fair_ms"] < 10)).all()
    assert ((queued["round0_latency_ms"] - queued["predicted_ms"]).abs() < 15).all()
    assert wait.loc["pwlocks=1", "to_kworker_ms"].isna().all()


def test_only_the_first_request_sees_an_ipi_the_drain_did_not_send() -> None:
    ipis = qpw.ipis_by_callsite(CHOSEN)
    assert "pwlocks=1" not in set(ipis["kernel"])
    stray = ipis[ipis["callsite"] != "ttwu_queue_wakelist"]
    assert set(stray["callsite"]) == {"generic_exec_single"} and set(stray["round"]) == {0}
    assert len(stray[["kernel", "rep"]].drop_duplicates()) == 5


def test_the_excerpt_starts_at_the_victim_s_switch_in_and_shows_the_barrier() -> None:
    excerpt = qpw.trace_excerpt(CHOSEN)
    assert excerpt.loc[0, "event"] == "sched_switch" and excerpt.loc[0, "CPU"] == 1
    assert "next_comm=drainvictim" in excerpt.loc[0, "detail"]
    started = excerpt.loc[excerpt["event"] == "workqueue_execute_start", "detail"]
    assert [d.rsplit(" ", 1)[-1] for d in started] == ["lru_add_drain_per_cpu",
                                                       "wq_barrier_func"]


def test_an_output_without_a_trace_is_refused(tmp_path: Path) -> None:
    path = tmp_path / qpw.ISOLATION_OUTPUT
    path.write_bytes(gzip.compress(b"role=kmalloc\nran=0\nend=ok\n"))
    with pytest.raises(ValueError, match="not an isolation boot"):
        qpw.isolation_trace(path)
