"""The test_workqueue parser on what the workqueue chapter's guest scripts really printed.

Fixtures, captured under TCG on 2026-11-22 (8 vCPUs, 2 sockets x 2 cores x 2 threads):
``workqueue-batch.out`` and ``workqueue-wait.out`` from a baseline boot of the sizing run,
``workqueue-batch-lockstat.out`` from lockstat-baseline rep1 of run 20261122T040243Z-auto.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import chapters
from lab.command import StageError
from lab.parse import lock_stat

CH = chapters.get("workqueue")
workqueue_bench = CH.module("parse")
FIXTURES = Path(__file__).parent / "fixtures"

SCOPES = ("cpu", "smt", "cache_shard", "cache", "numa", "system")


def _rows(name: str) -> dict[str, float]:
    text = (FIXTURES / name).read_text()
    return dict(workqueue_bench.parse(text, name))


def test_batch_output_gives_every_field_per_scope() -> None:
    rows = _rows("workqueue-batch.out")
    for scope in SCOPES:
        for field in workqueue_bench.BATCH_FIELDS:
            assert f"{scope}.{field}" in rows
        assert rows[f"{scope}.producers"] == 8
        assert rows[f"{scope}.cpus"] == 8
        # p50 may be 0: under TCG the guest marks its TSC unstable and local_clock() may
        # return the same value twice (the captured smt line shows it)
        assert 0 <= rows[f"{scope}.enq_p50_ns"] <= rows[f"{scope}.enq_p99_ns"]
        assert rows[f"{scope}.enq_p99_ns"] <= rows[f"{scope}.enq_max_ns"]
        # items_per_sec is producers * items over elapsed_ns, as the module computes it
        total = rows[f"{scope}.producers"] * rows[f"{scope}.items"]
        assert rows[f"{scope}.items_per_sec"] == pytest.approx(
            total * 1e9 / rows[f"{scope}.elapsed_ns"], abs=1)
    assert CH.parsers()["test_workqueue"] is workqueue_bench.parse


def test_wait_output_gives_rate_and_percentiles_per_scope() -> None:
    rows = _rows("workqueue-wait.out")
    assert rows["threads"] == 8
    for scope in SCOPES:
        assert rows[f"{scope}.items_per_sec"] > 0
        assert rows[f"{scope}.p50_ns"] <= rows[f"{scope}.p90_ns"] <= rows[f"{scope}.p95_ns"]


def test_lock_stat_output_gives_pool_lock_statistics_per_scope() -> None:
    rows = _rows("workqueue-batch-lockstat.out")
    for scope in SCOPES:
        assert rows[f"{scope}.items_per_sec"] > 0
        acq = rows[f"{scope}.pool_lock.acquisitions"]
        assert acq >= rows[f"{scope}.producers"] * rows[f"{scope}.items"]
        assert rows[f"{scope}.pool_lock.contentions"] <= acq
        assert rows[f"{scope}.pool_lock.holdtime_min_us"] <= rows[
            f"{scope}.pool_lock.holdtime_max_us"]


def test_skipped_output_is_one_row() -> None:
    assert workqueue_bench.parse("skipped=1\nend=ok\n", "wait.out") == [("skipped", 1.0)]


def test_truncated_output_is_refused() -> None:
    text = (FIXTURES / "workqueue-batch.out").read_text()
    with pytest.raises(StageError, match="truncated guest output: the last line"):
        workqueue_bench.parse(text.replace("end=ok\n", ""), "batch.out")
    lines = text.splitlines()
    cut = "\n".join([*lines[:1], lines[1].rsplit(" ", 3)[0], "end=ok"])
    with pytest.raises(StageError, match="truncated, or the module changed"):
        workqueue_bench.parse(cut, "batch.out")


def test_module_error_line_fails_with_scope_and_errno() -> None:
    text = ("[   20.1] test_workqueue: mode=batch scope=numa error=-12\nend=ok\n")
    with pytest.raises(StageError, match="mode batch, scope numa: error -12"):
        workqueue_bench.parse(text, "batch.out")


def test_output_without_results_or_with_a_repeated_scope_is_refused() -> None:
    with pytest.raises(StageError, match="no test_workqueue result line"):
        workqueue_bench.parse("end=ok\n", "batch.out")
    line = next(x for x in (FIXTURES / "workqueue-batch.out").read_text().splitlines()
                if "mode=batch" in x)
    with pytest.raises(StageError, match="two batch results for scope"):
        workqueue_bench.parse(f"{line}\n{line}\nend=ok\n", "batch.out")


def test_lock_stat_header_and_stats_line() -> None:
    header = next(x for x in (FIXTURES / "workqueue-batch-lockstat.out").read_text()
                  .splitlines() if "class name" in x)
    lock_stat.check_header(header, "lock_stat")
    with pytest.raises(StageError, match="lock_stat format changed"):
        lock_stat.check_header(header.replace("holdtime-avg", ""), "lock_stat")
    # the kernel's seq_stats() layout: "%40s:" then "%14lu " and " %14s" columns
    values = (3, 4, "0.10", "2.50", "5.00", "1.25", 7, 900, "0.05", "3.00", "90.00", "0.10")
    name, stats = lock_stat.class_stats(f"{'&pool->lock':>40}:" + " ".join(
        f"{v:>14}" for v in values))
    assert name == "&pool->lock"
    assert stats["contentions"] == 4 and stats["waittime_max_us"] == 2.5
    assert stats["acquisitions"] == 900 and stats["holdtime_total_us"] == 90.0
    assert lock_stat.class_stats("  &pool->lock   4   [<0000>] __queue_work+0x1/0x2") is None
