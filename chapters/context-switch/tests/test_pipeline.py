"""The context-switch chapter: experiment matrix, the probe's parser, the image inspector."""

from __future__ import annotations

import pytest

from lab import ROOT, chapters
from lab.command import StageError
from lab.pipeline import experiment, inspect, series

CH = chapters.get("context-switch")
PARSERS = CH.parsers()
SERIES = ROOT / "patches" / "context-switch"

GOOD = """\
text.isolated=1
text.spectre_v2=Mitigation: Retpolines; IBPB: always-on; STIBP: forced; RSB filling
cpu_flag.ibpb=1
cpu_flag.stibp=0
cpu=1
rounds=4
switches=8
ns_per_switch=1500.000
shift=1
[   10.000001] sched_test: start shift=1
[   10.000002] sched_test: cpu=1 switches=2 cycles=20 avg_x100=1000
[   10.000003] sched_test: cpu=0 switches=2 cycles=999 avg_x100=49950
[   10.000004] sched_test: cpu=1 switches=2 cycles=30 avg_x100=1500
[   10.000005] sched_test: cpu=1 switches=1 cycles=7 avg_x100=700
[   10.000006] sched_test: stop
end=ok
"""


def test_cells_differing_only_in_cmdline_or_accel_share_one_build() -> None:
    exp = experiment.load(CH)
    assert exp.build_name("gcc-patched-spectre-icount") == "gcc-patched"
    assert exp.build_name("clang-baseline-spectre") == "clang-baseline"
    assert exp.build_name("gcc-size-patched") == "gcc-size-patched"
    assert len(exp.builds) < len(exp.variants)
    assert "gcc-size-v2base" not in exp.booted and "gcc-baseline-icount" in exp.booted


def test_cited_cycles_map_to_wall_clock_variants_of_their_counters_architecture() -> None:
    exp = experiment.load(CH)
    mappings = {w["name"]: w["cited"]["probe.avg_cycles"] for w in exp.workloads}
    assert set(mappings) == {"pingpong", "pingpong-arm"}
    for workload, mapping in mappings.items():
        assert set(mapping) <= set(exp.variants)
        assert not any("icount" in v for v in mapping), "icount counts instructions, not ticks"
        # the TSC's readings are x86's, the virtual counter's Arm's
        assert all(workload in exp.variants[v].workloads for v in mapping)


def test_parser_keeps_full_intervals_of_the_measured_cpu() -> None:
    rows = dict(PARSERS["sched_test"](GOOD, "pingpong.out"))
    assert rows["probe.intervals"] == 2 and rows["probe.switches"] == 4
    assert rows["probe.avg_cycles"] == pytest.approx(12.5)
    assert (rows["probe.min_avg_cycles"], rows["probe.max_avg_cycles"]) == (10.0, 15.0)
    assert rows["spectre_v2.ibpb"] == 2 and rows["spectre_v2.stibp"] == 2
    assert rows["isolated_cpu"] == 1 and rows["cpu_flag.ibpb"] == 1
    assert rows["prog.ns_per_switch"] == 1500.0


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.replace("[   10.000006] sched_test: stop\n", ""), "no 'sched_test: stop'"),
    (lambda t: t.replace("start shift=1", "start shift=20"), "start shift=1"),
    (lambda t: t.replace("switches=2 cycles=20", "switches=3 cycles=20")
     .replace("switches=2 cycles=30", "switches=3 cycles=30"), "no full interval"),
    (lambda t: t.replace("end=ok\n", ""), "truncated"),
    (lambda t: t.replace("IBPB: always-on", "IBPB: sometimes"), "unknown IBPB state"),
    (lambda t: t.replace("rounds=4", "rounds=four"), "not a number"),
])
def test_parser_rejects_runs_that_did_not_measure(edit, message: str) -> None:
    with pytest.raises(StageError, match=message):
        PARSERS["sched_test"](edit(GOOD), "pingpong.out")


def test_forced_inline_functions_come_from_the_series_not_the_probe() -> None:
    ser = series.load(SERIES)
    names = inspect.forced_inline([p for p in ser.patches if p not in ser.instrument])
    assert {"finish_task_switch", "finish_lock_switch", "__splice_balance_callbacks",
            "raw_spin_rq_unlock", "vtime_task_switch"} <= set(names)
    assert not [n for n in names if n.startswith("sched_test")]
    assert len(names) == len(set(names))


NM = """\
ffffffff81000000 T _stext
ffffffff81001000 T __sched_text_start
ffffffff81001000 0000000000000200 T __schedule
ffffffff81001800 T __sched_text_end
ffffffff81002000 0000000000000080 t finish_task_switch.isra.0
ffffffff81003000 0000000000000010 T _raw_spin_unlock
ffffffff81004000 0000000000000040 T mmdrop_sched_helper
ffffffff81005000 0000000000000020 d finish_task_switch_data
ffffffff81006000 T _etext
"""
LISTING = """\
vmlinux:     file format elf64-x86-64


Disassembly of section .text:

ffffffff81001000 <__schedule>:
ffffffff81001000:\tpush   %rbp
ffffffff81001001:\trdtsc
ffffffff81001003:\tmov    %rax,%gs:0x1234
ffffffff8100100b:\tcall   ffffffff81002000 <finish_task_switch.isra.0>
ffffffff81001010:\trdtsc
ffffffff81001012:\tcall   *%rax
ffffffff81001014:\tcall   ffffffff81003000 <_raw_spin_unlock>
ffffffff81001019:\tret
"""


def test_evidence_counts_copies_calls_and_the_probe_region() -> None:
    ev = inspect.evidence(NM, {"__schedule": LISTING}, ["finish_task_switch", "mmdrop"])
    fts = ev["functions"]["finish_task_switch"]
    assert fts["out_of_line"] == ["finish_task_switch.isra.0"] and fts["bytes"] == 0x80
    assert fts["called_from"] == {"__schedule": 1}
    assert ev["functions"]["mmdrop"] == {"out_of_line": [], "bytes": 0, "in_sched_text": [],
                                         "called_from": {"__schedule": 0}}
    # __schedule is a __sched function; the clone it calls lies outside .sched.text.
    assert fts["in_sched_text"] == [] and ev["callers"]["__schedule"]["in_sched_text"]
    assert ev["layout"] == {"text_bytes": 0x6000, "sched_text_bytes": 0x800}
    sched = ev["callers"]["__schedule"]
    assert (sched["bytes"], sched["instructions"], sched["calls"]) == (0x200, 8, 3)
    assert sched["probe_region"] == {"markers": 2, "instructions": 3, "bytes": 0xf,
                                     "calls": ["finish_task_switch.isra.0"]}


def test_evidence_fails_without_the_linker_section_markers() -> None:
    nm = "\n".join(line for line in NM.splitlines() if "__sched_text_end" not in line)
    with pytest.raises(StageError, match="lacks __sched_text_end"):
        inspect.evidence(nm, {"__schedule": LISTING}, ["finish_task_switch"])


def test_evidence_fails_for_a_caller_nm_does_not_know() -> None:
    with pytest.raises(StageError, match="no instructions for context_switch"):
        inspect.evidence(NM, {"context_switch": "vmlinux: file format elf64-x86-64\n"},
                         ["finish_task_switch"])


def test_a_selected_variant_boots_the_build_of_an_unselected_one() -> None:
    exp = experiment.load(CH, only=["gcc-patched-icount", "clang-size-v2base"])
    assert list(exp.variants) == ["gcc-patched-icount", "clang-size-v2base"]
    assert exp.builds == ["clang-size-v2base", "gcc-patched"]
    assert exp.booted == ["gcc-patched-icount"]
