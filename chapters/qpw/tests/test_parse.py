"""The qpw parsers on what the guest scripts really printed, and on broken variants of it.

Fixtures: ``kmalloc-dyn-pw-1-tcg.out``, a PWLOCKS=y pwlocks=1 boot under TCG captured on
2026-11-25 (three loads then; the committed runs have four); ``kmalloc-not-this-role.out``, the
kmalloc script on a kernel of another role; ``isolation-*.out`` and ``lockdep-*.out``, boots of
the isolation and lockdep kernels captured the same day (``lockdep-fixed.out`` is the
committed lockdep run's); ``debug-flush-no0006.out``, the flush test without 0006 of run
20261126T074638Z-auto.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab import chapters
from lab.command import StageError

parse = chapters.get("qpw").module("parse")
FIXTURES = Path(__file__).parent / "fixtures"
KMALLOC = (FIXTURES / "kmalloc-dyn-pw-1-tcg.out").read_text()


def test_kmalloc_averages_the_loads_after_the_first_over_all_their_allocations() -> None:
    r = dict(parse.kmalloc(KMALLOC, "fixture"))
    assert r["ran"] == 1 and r["loads_kept"] == 3 and r["loads_discarded"] == 0
    assert r["alloc_cycles_per_op"] == pytest.approx((3437963425 + 3377103145) / 18e6)
    assert r["free_cycles_per_op"] == pytest.approx((3828791928 + 3707231762) / 18e6)
    assert r["load1.alloc_cycles_per_op"] == pytest.approx(7285521360 / 9e6)
    assert r["load1.iterations"] == 9e6 and r["load3.cpu"] == 0


def test_the_environment_says_which_cell_booted() -> None:
    r = dict(parse.kmalloc(KMALLOC, "fixture"))
    assert r["CONFIG_PWLOCKS"] == 1 and r["CONFIG_PREEMPT_RT"] == 0 and r["pwlocks"] == 1
    assert r["env.preempt.lazy"] == 1 and r["tsc_khz"] == 2596119
    assert r["env.isolated_cpus"] == 0


def test_a_kernel_of_another_role_gives_ran_0_only() -> None:
    text = (FIXTURES / "kmalloc-not-this-role.out").read_text()
    assert parse.kmalloc(text, "fixture") == [("ran", 0.0)]


@pytest.mark.parametrize(("name", "parser"), [
    ("kmalloc-dyn-pw-1-tcg.out", "kmalloc"), ("isolation-pw-1.out", "isolation"),
    ("lockdep-fixed.out", "lockdep"), ("debug-flush-no0006.out", "debug")])
def test_an_output_of_a_variant_that_lists_its_workloads_has_no_role(name: str,
                                                                     parser: str) -> None:
    """Since each variant lists its workloads, a script prints no role= and ran= head: the
    rows are those of the earlier output, less its ``ran`` row."""
    text = (FIXTURES / name).read_text()
    earlier = parse.PARSERS[parser](text, name)
    head = re.sub(r"^(role|ran)=.*\n", "", text, flags=re.M)
    assert head != text
    assert parse.PARSERS[parser](head, name) == [r for r in earlier if r[0] != "ran"]


def test_a_discarded_load_is_counted_and_left_out() -> None:
    text = "\n".join("load=2 discarded=rcu:_INFO:_rcu_preempt_self-detected_stall_on_CPU"
                     if line.startswith("load=2 ") else line
                     for line in KMALLOC.splitlines()) + "\n"
    r = dict(parse.kmalloc(text, "fixture"))
    assert r["loads_discarded"] == 1 and r["loads_kept"] == 2 and r["load2.discarded"] == 1
    assert r["alloc_cycles_per_op"] == pytest.approx(3377103145 / 9e6)


@pytest.mark.parametrize("broken, message", [
    (KMALLOC.replace("end=ok", ""), "truncated"),
    (KMALLOC.replace("== kmalloc\n", "error=kernel warning during load 1: WARNING: x\n"),
     "kernel warning during load 1"),
    (KMALLOC.replace("alloc_cycles=3377103145", "alloc_cycles=lots"), "neither a result"),
    (KMALLOC.replace("== end kmalloc\n", ""), "not closed"),
    (KMALLOC.replace("== end environment", "== end kmalloc"),
     r"closes a section that is not open \(open: 'environment'\)"),
    (KMALLOC.replace("ran=1", "ran=1\n== kmalloc\n== end kmalloc"), "twice"),
    (KMALLOC.replace("role=kmalloc", "role=isolation"), "expected role=kmalloc"),
    ("\n".join(line for line in KMALLOC.splitlines() if not line.startswith("load=")
               or line.startswith("load=1 ")) + "\n", "no load after the first"),
])
def test_broken_kmalloc_outputs_fail_naming_the_problem(broken: str, message: str) -> None:
    with pytest.raises(StageError, match=message):
        parse.kmalloc(broken, "fixture")


ISO = (FIXTURES / "isolation-unpatched.out").read_text()
ISO_PW1 = (FIXTURES / "isolation-pw-1.out").read_text()


def test_isolation_attributes_cpu1_events_to_the_requests_by_their_markers() -> None:
    r = dict(parse.isolation(ISO, "fixture"))
    assert r["rounds"] == 20 and r["env.isolated_cpus"] == 1
    # one lru_add_drain_per_cpu per request, and the barrier flush_work() queued behind it
    # when it found the item still pending (19 of 20 times)
    assert r["work.lru_add_drain_per_cpu"] == 20 and r["work.wq_barrier_func"] == 19
    assert r["work_on_victim"] == 39 == sum(r[f"r{n}.work_on_victim"] for n in range(20))
    assert r["work_queued_to_victim"] == 20 and r["switches_on_victim"] == 40
    assert r["ipis_to_victim"] == 21 and r["ipi_handlers_on_victim"] == 21
    assert r["nivcsw"] == 20 and r["outside.work_on_victim"] == 0
    assert r["r0.trigger_ns"] == 841213079 and r["r0.max_gap_ns"] == 6295845


def test_with_pwlocks_1_nothing_reaches_the_isolated_cpu_inside_a_request() -> None:
    r = dict(parse.isolation(ISO_PW1, "fixture"))
    assert r["pwlocks"] == 1 and r["rounds"] == 20
    for metric in parse.PER_ROUND:
        assert r[metric] == 0, metric
    assert not any(k.startswith("work.") for k in r)
    # the IPI before the first request is counted nowhere in the requests
    assert "generic_exec_single" in ISO_PW1.split("kb-round 0 begin")[0]


def test_the_lru_probe_counts_insertions_by_cpu_only_where_the_script_announced_it() -> None:
    # two insertions inside round 0 in the format of 7.2.13's mm_lru_insertion event, one on
    # CPU 1 (a kworker draining there) and one on CPU 0 (a remote drain), one outside the rounds
    event = ("     {comm}-{pid}     [{cpu}] d..1.  {ts}: mm_lru_insertion: folio=000000005f1c2a3b "
             "pfn=0x1234{n} lru=0 flags=M\n")
    lines = (event.format(comm="kworker/1:1", pid=22, cpu="001", ts=35000000000, n=1)
             + event.format(comm="drainvictim", pid=109, cpu="000", ts=35000000001, n=2))
    outside = event.format(comm="sh", pid=90, cpu="000", ts=34000000000, n=3)
    marker = ("     drainvictim-109     [000] ...1.  37044687056: tracing_mark_write: "
              "kb-round 0 end\n")
    probed = ISO.replace("== victim\n", "lru_probe=1\n== victim\n").replace(
        marker, lines + marker).replace("== trace\n", "== trace\n" + outside)
    r = dict(parse.isolation(probed, "fixture"))
    assert r["r0.lru_adds_on_victim"] == 1 and r["r0.lru_adds_on_other_cpu"] == 1
    assert r["lru_adds_on_victim"] == 1 and r["lru_adds_on_other_cpu"] == 1
    assert r["r1.lru_adds_on_victim"] == 0
    assert dict(parse.isolation(ISO, "fixture")).keys() == {
        k for k in r if "lru_adds" not in k}
    with pytest.raises(StageError, match="unexpected trace event 'mm_lru_insertion'"):
        parse.isolation(probed.replace("lru_probe=1\n", ""), "fixture")


def test_the_victims_file_system_is_a_row_only_where_the_script_named_it() -> None:
    on_disk = dict(parse.isolation(ISO.replace("== victim\n", "victim_fs=ext2\n== victim\n"),
                                   "fixture"))
    on_tmpfs = dict(parse.isolation(ISO.replace("== victim\n", "victim_fs=tmpfs\n== victim\n"),
                                    "fixture"))
    assert on_disk["victim_on_disk"] == 1 and on_tmpfs["victim_on_disk"] == 0
    assert "victim_on_disk" not in dict(parse.isolation(ISO, "fixture"))
    with pytest.raises(StageError, match="victim_fs='xfs' is not one of tmpfs, ext2"):
        parse.isolation(ISO.replace("== victim\n", "victim_fs=xfs\n== victim\n"), "fixture")


@pytest.mark.parametrize("broken, message", [
    (ISO.replace("kb-round 7 end", "kb-round 7 ended"), "round 7 lacks its begin or end"),
    (ISO.replace("round=3 max_gap_ns", "round=3 max_gapx"), "round 3 lacks"),
    (ISO.replace("workqueue_execute_start:", "workqueue_execute_end:", 1),
     "unexpected trace event 'workqueue_execute_end'"),
    (ISO.replace("== trace\n", "== trace\nnot an event\n"), "is not an event line"),
    (ISO.replace("rounds=20", "rounds=0"), "no rounds"),
    (ISO.replace("== victim", "error=drainvictim exited 1: error=write trace_marker\n== victim"),
     "drainvictim exited 1"),
])
def test_broken_isolation_outputs_fail_naming_the_problem(broken: str, message: str) -> None:
    with pytest.raises(StageError, match=message):
        parse.isolation(broken, "fixture")


LOCKDEP = (FIXTURES / "lockdep-fixed.out").read_text()


def test_the_fixed_lockdep_kernel_reports_no_warning() -> None:
    r = dict(parse.lockdep(LOCKDEP, "fixture"))
    assert r["ran"] == 1 and r["CONFIG_PROVE_LOCKING"] == 1 and r["CONFIG_PWLOCKS"] == 0
    assert r["warnings"] == 0 and r["pw_assert_warnings"] == 0


def test_a_warning_in_the_sheaf_paths_is_counted_apart_from_others() -> None:
    lines = ("WARNING: CPU: 0 PID: 0 at mm/slub.c:4641 __pcs_replace_empty_main+0x1b3/0x2d0\n"
             "WARNING: CPU: 1 PID: 7 at kernel/workqueue.c:2300 __queue_work+0x2e/0x4c0\n")
    r = dict(parse.lockdep(LOCKDEP.replace("== warnings\n", "== warnings\n" + lines), "fixture"))
    assert r["warnings"] == 2 and r["pw_assert_warnings"] == 1
    with pytest.raises(StageError, match="no '== warnings' section"):
        parse.lockdep(LOCKDEP.replace("== warnings\n", "").replace("== end warnings\n", ""),
                      "fixture")


DEBUG = (FIXTURES / "debug-flush-no0006.out").read_text()


def test_the_flush_test_without_0006_leaks_the_preempt_count_and_its_reports_are_counted() -> None:
    r = dict(parse.debug(DEBUG, "fixture"))
    assert r["test.flush"] == 1 and r["failslab_failures"] == 127
    assert r["flush.objects"] == 20000 and r["flush.preempt_leak"] == 256
    assert r["flush.migrate_leak"] == 0
    assert r["report.sleep_in_atomic"] == 1 and r["report.scheduling_while_atomic"] == 1
    assert r["report.info"] == 2 and r["pw_assert_warnings"] == 0


def test_only_the_four_converted_assertions_count_as_sheaf_warnings() -> None:
    """Both WARNING formats (7.2.13's and the older "CPU: n PID: n at" one) name the function;
    another WARNING in mm/slub.c is not one of v4's assertions."""
    lines = ("WARNING: ../src/mm/slub.c:4641 at __pcs_replace_empty_main+0x3cf/0x4c0, CPU#1: sh/1\n"
             "WARNING: CPU: 0 PID: 0 at mm/slub.c:2905 sheaf_try_flush_main+0x1b/0x2d0\n"
             "WARNING: ../src/mm/slub.c:3100 at kmem_cache_free+0x2e/0x4c0, CPU#0: sh/1\n")
    r = dict(parse.debug(DEBUG.replace("== report\n", "== report\n" + lines), "fixture"))
    assert r["report.warning"] == 3 and r["pw_assert_warnings"] == 2
    with pytest.raises(StageError, match="no '== report' section"):
        parse.debug(DEBUG.replace("== report\n", "").replace("== end report\n", ""), "fixture")
