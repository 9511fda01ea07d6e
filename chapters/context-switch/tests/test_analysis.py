"""The context-switch chapter's analysis on synthetic runs with known answers."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest

from lab import chapters
from lab.analysis import verdicts
from lab.analysis.runs import Run

cs = chapters.get("context-switch").module("analysis")


def variant(tree: str, compiler: str = "gcc", cmdline: str = "isolcpus=1",
            accel: str = "tcg", build: str | None = None, bz: int = 123,
            **extra: object) -> dict:
    return {"tree": tree, "compiler": compiler, "cmdline": cmdline, "accel_used": [accel],
            "build": {"variant": build, "bzImage_bytes": bz},
            "fragments": ["boot", "context-switch"], **extra}


def probe_rows(name: str, avgs: list[float], ibpb: float = 1) -> list[dict]:
    rows = []
    for rep, avg in enumerate(avgs, 1):
        for metric, value in (("probe.avg_cycles", avg), ("probe.min_avg_cycles", avg - 1),
                              ("probe.max_avg_cycles", avg + 1), ("spectre_v2.ibpb", ibpb)):
            rows.append({"variant": name, "rep": rep, "metric": metric, "value": value})
    return rows


def make(run_id: str, variants: dict, rows: list[dict], base: Path | None = None,
         timeouts: tuple[tuple[str, int], ...] = ()) -> Run:
    """A run of ``variants``; with ``base``, each boot's console is written under it, healthy
    except for a watchdog timeout inside the measured window in the (variant, rep) of
    ``timeouts``, as the committed consoles of TCG boots show them."""
    frame = pd.DataFrame(rows, columns=["variant", "rep", "metric", "value"])
    if base is None:
        return Run("context-switch", run_id, Path("/nonexistent"), {"variants": variants}, frame)
    for name, rep in frame[["variant", "rep"]].drop_duplicates().itertuples(index=False):
        lines = ["[    1.473806] clocksource: Switched to clocksource tsc-early",
                 "[    3.071786] Run /bin/sh as init process"]
        if (name, rep) in timeouts:
            lines.append("[    4.761411] clocksource: Watchdog remote CPU 1 read timed out")
        boot = base / run_id / "raw" / name / f"rep{rep}"
        boot.mkdir(parents=True)
        (boot / "console.log.gz").write_bytes(
            gzip.compress(("\n".join([*lines, "KB-DONE rc=0"]) + "\n").encode()))
    return Run("context-switch", run_id, base / run_id, {"variants": variants}, frame)


def test_cells_and_changes_have_known_values() -> None:
    old = make("20261122T0100Z-a", {
        "gcc-v2base": variant("v2-thread-baseline", build="gcc-v2base"),
        "gcc-patched": variant("patched", build="gcc-patched"),
    }, probe_rows("gcc-v2base", [100, 110, 120]) + probe_rows("gcc-patched", [1, 1, 1]))
    new = make("20261122T0200Z-b", {
        "gcc-patched": variant("patched", build="gcc-patched"),
        "gcc-patched-icount": variant("patched", accel="icount", build="gcc-patched"),
    }, probe_rows("gcc-patched", [88, 88, 88]) + probe_rows("gcc-patched-icount", [50, 50]))
    probe = cs.probe_frame([old, new])
    assert set(probe.groupby("variant")["run_id"].first()) == {"20261122T0100Z-a",
                                                               "20261122T0200Z-b"}
    assert probe[probe["variant"] == "gcc-patched"]["avg"].tolist() == [88, 88, 88]
    cell = cs.cells(probe).set_index(["clock", "tree"])
    v2 = cell.loc[("TSC (tcg)", "v2-thread-baseline")]
    assert (v2["boots"], v2["mean"], v2["spread"], v2["lo"], v2["hi"]) == (3, 110, 20, 99, 121)
    assert cell.loc[("icount", "patched")]["spread"] == 0
    change = cs.changes(cs.cells(probe))
    (row,) = change.to_dict("records")
    assert row["clock"] == "TSC (tcg)" and row["change_pct"] == pytest.approx(-20.0)


def test_evidence_comes_from_the_build_variant_only() -> None:
    ev = {"functions": {"finish_task_switch": {"out_of_line": ["finish_task_switch.isra.0"],
                                               "bytes": 10, "called_from": {"__schedule": 1}},
                        "mmdrop": {"out_of_line": [], "bytes": 0,
                                   "called_from": {"__schedule": 0}}},
          "callers": {"__schedule": {"bytes": 900, "instructions": 300, "calls": 20,
                                     "probe_region": {"markers": 2, "instructions": 4,
                                                      "calls": ["finish_task_switch.isra.0"]}}}}
    run = make("20261122T0100Z-a", {
        "gcc-baseline": variant("baseline", build="gcc-baseline",
                                inspect={"evidence": ev}),
        "gcc-baseline-icount": variant("baseline", build="gcc-baseline", accel="icount",
                                       inspect={"evidence": ev}),
        "gcc-size-baseline": variant("baseline", build="gcc-size-baseline", boot=False,
                                     fragments=["boot", "context-switch-size"],
                                     bz=77, inspect={"evidence": ev}),
    }, [])
    frame = cs.evidence_frame([run]).set_index("build")
    assert list(frame.index) == ["gcc-baseline", "gcc-size-baseline"]
    assert frame.loc["gcc-baseline", "fts_copies"] == "finish_task_switch.isra.0"
    assert frame.loc["gcc-baseline", "outlined"] == "finish_task_switch"
    assert frame.loc["gcc-baseline", "region_insns"] == 4
    assert frame.loc["gcc-size-baseline", "config"] == "size"
    assert cs.sizes(frame.reset_index()).set_index("compiler").loc["gcc", "baseline"] == 77


def test_judge_gives_every_measured_cited_entry_a_verdict_from_icount(tmp_path: Path) -> None:
    from lab.analysis import cited

    variants = {
        "gcc-v2base": variant("v2-thread-baseline", build="gcc-v2base"),
        "gcc-patched": variant("patched", build="gcc-patched"),
        "gcc-v2base-icount": variant("v2-thread-baseline", accel="icount", build="gcc-v2base"),
        "gcc-patched-icount": variant("patched", accel="icount", build="gcc-patched"),
        "gcc-v2base-spectre-icount": variant("v2-thread-baseline", accel="icount",
                                             cmdline="spectre_v2_user=on", build="gcc-v2base"),
        "gcc-patched-spectre-icount": variant("patched", accel="icount",
                                              cmdline="spectre_v2_user=on", build="gcc-patched"),
    }
    rows = (probe_rows("gcc-v2base", [900, 1000]) + probe_rows("gcc-patched", [800, 850])
            + probe_rows("gcc-v2base-icount", [200, 200]) + probe_rows("gcc-patched-icount",
                                                                        [180, 180])
            + probe_rows("gcc-v2base-spectre-icount", [210, 210], ibpb=1)
            + probe_rows("gcc-patched-spectre-icount", [190, 190], ibpb=1))
    run = make("20261122T0100Z-a", variants, rows, tmp_path, timeouts=(("gcc-patched", 2),))
    run.manifest.update({"host": {"cores": 2}, "base": {"version": "7.2.13"}})
    frame = cited.to_frame(cited.load_all())
    out = cs.judge(frame, [run]).set_index("id")
    default = out.loc["context-switch-rdtsc-gcc-spectre-default-baseline"]
    assert default["verdict"] == "absolute value not comparable"
    assert "TSC ticks" in default["reason"] and "-10.9 %" in default["reason"]
    assert default["ours"].startswith("wall-clock TSC (emulated) mean 950 (n=2, 900 to 1,000)")
    assert out.loc["context-switch-rdtsc-p4-gcc-spectre-default-patched", "ours"].endswith(
        "icount 180.00 (n=2, 180.00 to 180.00)")
    # the derived change of the pair, under the wall clock: 2 boots each, a wide interval
    tsc = out.loc["context-switch-rdtsc-gcc-spectre-default-change"]
    assert tsc["cited"] == "-10.9 % (implied)" and tsc["column"].startswith("change (derived")
    assert tsc["row_kind"] == verdicts.CLAIM and tsc["verdict"] == verdicts.INCONCLUSIVE
    # TCG's wall clock is the emulator's time: it judges no claim about a real CPU's time
    assert "this environment cannot show the cited -10.9 %" in tsc["reason"]
    assert "how long QEMU took to emulate the region, not the time of the author's i5" in tsc[
        "reason"]
    # the boot whose watchdog timed out is counted, and the verdict given without it
    assert tsc["reason"].endswith("1 of 4 boots had clock trouble (1 watchdog timeout); too "
                                  "few boots are left to judge without them")
    # the mechanism row: exactly 10 % fewer instructions, judged for the direction of the
    # author's explanation (a shorter path), never for the size of his change in TSC ticks
    icount = out.loc["context-switch-rdtsc-gcc-spectre-default-icount"]
    assert icount["row_kind"] == verdicts.MECHANISM and not icount["ours_reading"]
    assert icount["verdict"] == verdicts.DIRECTION
    assert icount["ours"] == "instructions -10.0 % (95 % CI -10.0 to -10.0 %, n=2+2)"
    assert "as predicted: a shorter timed path" in icount["reason"]
    assert "clock trouble" not in icount["reason"]  # the icount boots were healthy
    instructions = out[out.index.str.endswith("-icount")]
    assert (instructions["row_kind"] == verdicts.MECHANISM).all()
    assert not instructions["verdict"].isin([verdicts.REPRODUCED, verdicts.CONTRADICTED]).any()
    assert "context-switch-rdtsc-p4-gcc-spectre-default-icount" not in out.index
    on = out.loc["context-switch-rdtsc-gcc-spectre-on-icount"]
    assert on["verdict"] == "inconclusive here" and "left IBPB off" in on["reason"]
    assert out.loc["context-switch-rdtsc-gcc-spectre-on-patched", "ours"].startswith(
        "wall-clock TSC (emulated): not")
    assert not [i for i in out.index if "clang" in i or "bzimage" in i]
    # the same cells against the v5 cover letter's written changes: the i5's -7.5 % ...
    v5 = out.loc["context-switch-v5-i5-gcc-spectre-default-icount"]
    assert v5["verdict"] == verdicts.DIRECTION and v5["cited"] == "-7.5 %"
    assert "behind the cited -7.5 %" in v5["reason"]
    assert out.loc["context-switch-v5-i5-gcc-spectre-default-change", "ours"].startswith("-")
    assert "i5-8300H" in out.loc["context-switch-v5-i5-gcc-spectre-default-patched", "reason"]
    # ... and the Ryzen's 0 %, which fewer instructions can neither confirm nor contradict:
    # neither its wall-clock row nor its mechanism row (the i5 row's count again) can test it
    ryzen = out.loc["context-switch-v5-ryzen-gcc-spectre-default-change"]
    assert ryzen["verdict"] == verdicts.INCONCLUSIVE
    assert "no change on this CPU" in ryzen["reason"]
    mechanism = out.loc["context-switch-v5-ryzen-gcc-spectre-default-icount"]
    assert mechanism["verdict"] == verdicts.INCONCLUSIVE
    assert "which no instruction count can test" in mechanism["reason"]
    assert "Ryzen 9600X" in out.loc["context-switch-v5-ryzen-gcc-spectre-default-baseline",
                                    "reason"]


def test_arm_cells_are_judged_in_counter_ticks_apart_from_the_x86_cells(tmp_path: Path) -> None:
    from lab.analysis import cited

    arm64 = {"arch": "arm64", "machine": {"cpus": 2, "cpu_model": "cortex-a53"}}
    variants = {
        "gcc-arm64-v2base": variant("v2-thread-baseline", build="gcc-arm64-v2base", **arm64),
        "gcc-arm64-patched": variant("patched", build="gcc-arm64-patched", **arm64),
        "gcc-arm64-v2base-icount": variant("v2-thread-baseline", accel="icount",
                                           build="gcc-arm64-v2base", **arm64),
        "gcc-arm64-patched-icount": variant("patched", accel="icount",
                                            build="gcc-arm64-patched", **arm64),
        # an x86 cell with the same compiler, tree and clock must not mix into the Arm one
        "gcc-v2base-icount": variant("v2-thread-baseline", accel="icount", build="gcc-v2base"),
    }
    rows = (probe_rows("gcc-arm64-v2base", [10, 11, 12]) + probe_rows("gcc-arm64-patched",
                                                                       [8, 9, 10])
            + probe_rows("gcc-arm64-v2base-icount", [4.0, 4.0]) + probe_rows(
                "gcc-arm64-patched-icount", [3.0, 3.0]) + probe_rows("gcc-v2base-icount", [200]))
    run = make("20261207T0100Z-arm", variants, rows, tmp_path)
    run.manifest.update({"host": {"cores": 2}, "base": {"version": "7.2.13"}})
    probe = cs.probe_frame([run])
    assert set(probe[probe["variant"] == "gcc-arm64-v2base"]["arch"]) == {"arm64"}
    cell = cs.cells(probe)
    icount = cell[(cell["clock"] == "icount") & (cell["tree"] == "v2-thread-baseline")]
    assert sorted(zip(icount["arch"], icount["mean"], strict=True)) == [
        ("arm64", 4.0), ("x86_64", 200.0)]
    out = cs.judge(cited.to_frame(cited.load_all()), [run]).set_index("id")
    base = out.loc["context-switch-v5-arm64-gcc-baseline"]
    assert base["verdict"] == "absolute value not comparable"
    assert "cntvct_el0 ticks of the author's Raspberry Pi 3b" in base["reason"]
    assert base["ours"].startswith("wall-clock cntvct_el0 (emulated) mean 11")
    assert set(cell[cell["arch"] == "arm64"]["clock"]) == {"CNTVCT_EL0 (tcg)", "icount"}
    change = out.loc["context-switch-v5-arm64-gcc-change"]
    assert change["row_kind"] == verdicts.CLAIM and change["verdict"] == verdicts.INCONCLUSIVE
    assert "under TCG the CNTVCT_EL0 measures how long QEMU took" in change["reason"]
    mechanism = out.loc["context-switch-v5-arm64-gcc-icount"]
    assert mechanism["row_kind"] == verdicts.MECHANISM
    assert mechanism["cited"] == "-23.3 % (-23.4 to -23.2 % as printed)"
    assert mechanism["verdict"] == verdicts.DIRECTION
    assert mechanism["ours"].startswith("instructions -25.0 %")
    # no arm32 boot, no Clang boot: those rows stay unmeasured rather than borrow a cell
    assert not [i for i in out.index if "arm32" in i or "arm64-clang" in i]


def test_a_wall_clock_cell_off_tcg_is_judged_not_ruled_out(tmp_path: Path) -> None:
    """The emulated-time rule is TCG's: the same cells booted under KVM (a real core's clock)
    are judged as a claim, not set aside."""
    from lab.analysis import cited
    arm64 = {"arch": "arm64", "machine": {"cpus": 2, "cpu_model": "host"}}
    variants = {"gcc-arm64-v2base": variant("v2-thread-baseline", accel="kvm",
                                            build="gcc-arm64-v2base", **arm64),
                "gcc-arm64-patched": variant("patched", accel="kvm",
                                             build="gcc-arm64-patched", **arm64)}
    rows = (probe_rows("gcc-arm64-v2base", [10.0, 10.1, 9.9])
            + probe_rows("gcc-arm64-patched", [7.7, 7.6, 7.8]))
    run = make("20261207T0200Z-kvm", variants, rows, tmp_path)
    run.manifest.update({"host": {"cores": 2}, "base": {"version": "7.2.13"}})
    change = cs.judge(cited.to_frame(cited.load_all()), [run]).set_index("id").loc[
        "context-switch-v5-arm64-gcc-change"]
    assert "QEMU took" not in change["reason"] and change["verdict"] in verdicts.SUPPORT


def _size_run(sizes: dict[str, int], fragment: str = "context-switch-size",
              text: dict[str, int] | None = None) -> Run:
    """A build-only run with one GCC kernel of the configuration ``fragment`` per tree in
    ``sizes``, its ``.text`` bytes from ``text`` where given."""
    ev = {"functions": {"finish_task_switch": {"out_of_line": [], "bytes": 0,
                                               "called_from": {"__schedule": 0}}},
          "callers": {"__schedule": {"bytes": 900, "instructions": 300, "calls": 20,
                                     "probe_region": {"markers": 2, "instructions": 40,
                                                      "calls": []}}}}
    prefix = {"context-switch-size": "gcc-size", "context-switch-size-o2": "gcc-size-o2",
              "context-switch": "gcc"}[fragment]
    names = {t: f"{prefix}-{s}" for t, s in (("v2-thread-baseline", "v2base"),
                                               ("baseline", "baseline"), ("patched", "patched"))}
    text = text or {}
    run = make("20261122T0300Z-size", {
        names[tree]: variant(tree, build=names[tree], boot=False, bz=bz,
                             fragments=["boot", fragment], inspect={"evidence": {
                                 **ev, **({"layout": {"text_bytes": text[tree],
                                                      "sched_text_bytes": 64}}
                                          if tree in text else {})}})
        for tree, bz in sizes.items()}, [])
    run.manifest.update({"host": {"cores": 2}, "base": {"version": "7.2.13"}})
    return run


def test_v5_o2_rows_are_judged_only_from_the_size_configuration_at_o2() -> None:
    """The author's -O2 size builds are his size options without -Os: our timing builds, -O2
    too but without SCHED_CORE and NO_HZ_FULL, never stand in for them."""
    from lab.analysis import cited
    frame = cited.to_frame(cited.load_all())
    ends = {"v2-thread-baseline": 4096, "patched": 8192}
    timing = _size_run(ends, "context-switch", {"v2-thread-baseline": 1_000, "patched": 9_000})
    assert not [i for i in cs.judge(frame, [timing])["id"] if "-o2-" in i]
    o2 = _size_run(ends, "context-switch-size-o2", {"v2-thread-baseline": 1_000,
                                                    "patched": 1_700})
    assert set(cs.evidence_frame([o2])["config"]) == {"size-o2"}
    out = cs.judge(frame, [timing, o2]).set_index("id")
    text = out.loc["context-switch-v5-text-gcc-o2-change"]
    assert text["ours"] == "+700 bytes (+70.000 %)"  # the timing builds' .text grew by 8,000
    assert text["verdict"] == "direction confirmed"
    assert "size configuration at -O2" in text["reason"]
    assert out.loc["context-switch-v5-bzimage-gcc-o2-change", "ours"].startswith("+4,096 bytes")
    assert not [i for i in out.index if "-os-" in i]


@pytest.mark.parametrize(("sizes", "verdict", "says"), [
    ({"v2-thread-baseline": 4096, "patched": 4096}, "reproduced", "+0 bytes"),
    # judged exactly: a bzImage grows in whole pages, and one page is a growth where the author
    # saw none
    ({"v2-thread-baseline": 4096, "patched": 8192}, "contradicted", "+4,096 bytes"),
    ({"v2-thread-baseline": 4096}, "measured, not yet judged", None),
    # 7.2.13 as released is not the cited "without patches": it must not stand in for it.
    ({"baseline": 4096, "patched": 4096}, None, None),
])
def test_bzimage_verdict_compares_the_v2_base_with_the_patched_tree(
        sizes: dict[str, int], verdict: str | None, says: str | None) -> None:
    from lab.analysis import cited
    frame = cited.to_frame(cited.load_all())
    out = cs.judge(frame, [_size_run(sizes)]).set_index("id")
    key = "context-switch-bzimage-gcc-baseline"
    if verdict is None:
        assert key not in out.index
        return
    assert out.loc[key, "verdict"] == "absolute value not comparable"
    assert out.loc[key, "reason"].endswith(f"judged in its own row: {verdict}")
    assert out.loc[key, "ours"] == "4,096 bytes"
    change = "context-switch-bzimage-gcc-change"
    if says is None:
        assert change not in out.index
    else:
        assert out.loc[change, "verdict"] == verdict
        assert out.loc[change, "ours"].startswith(says)
        assert out.loc[change, "cited"] == "+0 bytes (implied)"
    assert not [i for i in out.index if "clang" in i or "rdtsc" in i]


def test_v5_text_rows_and_the_function_sizes_behind_them() -> None:
    """.text from the layout, judged in bytes against the cited delta; beside it the two
    callers' sizes and the out-of-line copy, judged for the direction inlining predicts."""
    from lab.analysis import cited
    run = _size_run({"v2-thread-baseline": 4096, "patched": 4096})
    for name, text, tail, schedule, fts in (("gcc-size-v2base", 10_000, 82, 900, 501),
                                            ("gcc-size-patched", 10_500, 721, 1_000, 0)):
        ev = run.manifest["variants"][name]["inspect"]["evidence"]
        ev = {**ev, "layout": {"text_bytes": text, "sched_text_bytes": 64},
              "functions": {"finish_task_switch": {
                  "out_of_line": ["finish_task_switch.isra.0"] if fts else [], "bytes": fts,
                  "called_from": {"__schedule": int(bool(fts)), "schedule_tail": int(bool(fts))}}},
              "callers": {**ev["callers"], "__schedule": {**ev["callers"]["__schedule"],
                                                          "bytes": schedule},
                          "schedule_tail": {"bytes": tail, "instructions": 20, "calls": 5,
                                            "probe_region": {"markers": 0}}}}
        run.manifest["variants"][name]["inspect"] = {"evidence": ev}
    frame = cs.evidence_frame([run]).set_index("build")
    assert frame.loc["gcc-size-v2base", "fts_tail_calls"] == 1
    assert frame.loc["gcc-size-patched", "schedule_tail_bytes"] == 721
    out = cs.judge(cited.to_frame(cited.load_all()), [run]).set_index("id")
    text = out.loc["context-switch-v5-text-gcc-os-change"]
    assert text["ours"] == "+500 bytes (+5.000 %)" and text["verdict"] == "direction confirmed"
    assert "lies beyond the margin on the author's side but below the cited +576 bytes" in (
        text["reason"])
    tail = out.loc["context-switch-v5-text-gcc-os-schedule-tail"]
    assert tail["ours"] == "schedule_tail() bytes: 82 → 721 (+779.3 %)"
    assert tail["verdict"] == "direction confirmed" and tail["cited"] == "+576 bytes"
    copy = out.loc["context-switch-v5-text-gcc-os-fts-out-of-line"]
    # no copy left is true by construction (__always_inline): a check, never support
    assert copy["verdict"] == "check passed" and "(-100.0 %)" in copy["ours"]
    assert copy["row_kind"] == "check" and "true by construction" in copy["reason"]
    assert out.loc["context-switch-v5-bzimage-gcc-os-change", "verdict"] == "reproduced"
    # the -O2 rows need the size configuration at -O2, which this run does not have
    assert not [i for i in out.index if "-o2-" in i]


def test_evidence_reads_the_layout_where_the_inspect_stage_recorded_it() -> None:
    run = _size_run({"v2-thread-baseline": 4096, "patched": 4096})
    ev = run.manifest["variants"]["gcc-size-patched"]["inspect"]["evidence"]
    run.manifest["variants"]["gcc-size-patched"]["inspect"] = {"evidence": {
        **ev, "layout": {"text_bytes": 1000, "sched_text_bytes": 64},
        "functions": {"finish_task_switch": {"out_of_line": ["finish_task_switch.isra.0"],
                                             "in_sched_text": [], "called_from": {}}}}}
    frame = cs.evidence_frame([run]).set_index("build")
    patched, v2base = frame.loc["gcc-size-patched"], frame.loc["gcc-size-v2base"]
    assert (patched["text_bytes"], patched["sched_text_bytes"]) == (1000, 64)
    assert patched["fts_sched_text"] == "none"
    # A run inspected before the layout existed says so instead of inventing a size.
    assert pd.isna(v2base["text_bytes"]) and pd.isna(v2base["fts_sched_text"])


def test_across_runs_compares_the_icount_means_of_variants_measured_twice() -> None:
    old = make("20261122T0100Z-a", {
        "gcc-v2base-icount": variant("v2-thread-baseline", accel="icount", build="gcc-v2base"),
        "gcc-v2base": variant("v2-thread-baseline", build="gcc-v2base"),
    }, probe_rows("gcc-v2base-icount", [200, 202]) + probe_rows("gcc-v2base", [900, 950]))
    new = make("20261122T0200Z-b", {
        "gcc-v2base-icount": variant("v2-thread-baseline", accel="icount", build="gcc-v2base"),
        "gcc-v2base": variant("v2-thread-baseline", build="gcc-v2base"),
        "gcc-patched-icount": variant("patched", accel="icount", build="gcc-patched"),
    }, probe_rows("gcc-v2base-icount", [203, 203]) + probe_rows("gcc-v2base", [1, 1])
        + probe_rows("gcc-patched-icount", [180, 180]))
    out = cs.across_runs([new, old]).set_index("variant")
    # only icount variants, only those in both runs; oldest run first
    assert list(out.index) == ["gcc-v2base-icount"]
    row = out.loc["gcc-v2base-icount"]
    assert (row["runs"], row["means"], row["spread"]) == (2, "201.00, 203.00", 2)
    assert row["spread_pct"] == pytest.approx(100 * 2 / 202)
