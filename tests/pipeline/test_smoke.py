"""The smoke chapter end to end: `make reproduce CHAPTER=smoke` builds, boots, publishes.

This is the test CI relies on to show that the whole pipeline works on a fresh machine:
toolchain root, pinned base, series, config, build, tools, a guest package in a layer over the
root, TCG and icount boots, a host-side comparison of two boots, parse, and a published run
whose manifest and files check out.
"""

from __future__ import annotations

import csv
import json

from lab.pipeline import publish

from .conftest import make_reproduce, planned_rules


def test_smoke_chapter_end_to_end(runs_tmp, data_unchanged) -> None:
    proc = make_reproduce(runs_tmp, "CHAPTER=smoke", "REPS=1", "ACCEL=tcg")
    assert proc.returncode == 0, proc.stdout[-4000:]
    # stages that run every time print progress lines; cached ones appear in the summary
    for stage in ("accel", "boot", "parse", "publish"):
        assert f"ok {stage:<8} smoke" in proc.stdout, f"no progress line for stage {stage}"
    summary = proc.stdout.split("summary of smoke")[1]
    # patched-icount boots the patched build: one build per tree
    assert "build patched-icount" not in summary
    for row in ("root", "source", "build baseline", "build patched", "tools patched",
                "boot patched-icount rep1"):
        assert row in summary, summary
    assert "not done" not in summary, summary

    (run,) = sorted((runs_tmp / "smoke").iterdir())
    assert f"published: {run}" in summary
    publish.verify_run(run)
    manifest = json.loads((run / "manifest.json").read_text())
    for key in ("base", "series", "compilers", "qemu", "host", "toolchain_root", "book",
                "date", "experiment", "variants", "files", "parsers", "python"):
        assert manifest[key], key
    assert manifest["base"]["version"] == "7.2.13"
    assert manifest["experiment"]["file"] == "chapters/smoke/chapter.yaml"
    assert "chapters/smoke/parse.py" not in manifest["parsers"]
    assert "lab/parse/keyvalue.py" in manifest["parsers"]
    assert manifest["toolchain_root"]["packages"]["gcc-15"].startswith("15.")
    assert manifest["book"]["dirty"] == ("book.diff.gz" in manifest["files"])
    variants = manifest["variants"]
    assert variants["baseline"]["accel_used"] == ["tcg"]
    assert variants["patched-icount"]["accel_used"] == ["icount"]
    assert variants["baseline"]["commit"] != variants["patched"]["commit"]
    assert variants["baseline"]["config_sha256"] == variants["patched"]["config_sha256"]
    assert variants["patched-icount"]["build"] == variants["patched"]["build"]
    assert variants["patched"]["build"]["build_seconds"] > 0
    assert len(variants["patched"]["build"]["bzImage_sha256"]) == 64
    assert variants["baseline"]["build"]["bzImage_sha256"] != \
        variants["patched"]["build"]["bzImage_sha256"]
    # the guest program is built per variant by the chapter's guest/Makefile, and hashed
    assert variants["patched"]["tools"]["cc"] == "gcc-15"
    assert len(variants["patched"]["tools"]["programs"]["getpid"]) == 64

    with (run / "results.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    value = {(r["variant"], r["metric"]): float(r["value"]) for r in rows}
    # every row carries the unit its workload declares (chapter.yaml units:)
    unit = {(r["workload"], r["metric"]): r["unit"] for r in rows}
    assert unit[("getpid", "ns_per_call")] == "ns" and unit[("getpid", "marker")] == "flag"
    assert unit[("marker-vs-baseline", "outputs_differ")] == "flag"
    # the patched kernel printed its marker; the baseline did not
    assert value[("baseline", "marker")] == 0
    assert value[("patched", "marker")] == 1
    assert value[("patched-icount", "marker")] == 1
    # the guests ran the chapter's guest package from the layer, which the manifest names
    assert {value[(v, "layer")] for v in ("baseline", "patched", "patched-icount")} == {1}
    assert manifest["guest_layer"]["packages"] == {"hello": "2.12.3-1"}
    assert manifest["guest_layer"]["lock"] == "chapters/smoke/guest.lock.yaml"
    assert manifest["guest_layer"]["key"].startswith(manifest["toolchain_root"]["key"] + "-")
    # the host-side comparison read both boots' kept files; its output is the patched boot's
    assert value[("patched", "baseline_marker")] == 0
    assert value[("patched", "patched_marker")] == 1
    assert value[("patched", "outputs_differ")] == 1
    assert "ok compare  smoke/patched/rep1/marker-vs-baseline" in proc.stdout
    assert "raw/patched/rep1/marker-vs-baseline.out.gz" in manifest["files"]
    assert manifest["experiment"]["compare"][0]["workload"] == "marker-vs-baseline"
    # what a guest kept for the comparison is never published
    assert not [f for f in manifest["files"] if "/keep/" in f]
    # a boot runs its variant's workloads alone: only the icount variant lists the clock
    # workload, which prints through the guest library and is read by the sections parser
    assert manifest["variants"]["baseline"]["workloads"] == ["getpid"]
    assert manifest["variants"]["patched-icount"]["workloads"] == ["getpid", "clock"]
    assert {m for v, m in value if m.startswith("clock.")} == {"clock.tsc", "clock.uptime_s"}
    assert {v for v, m in value if m.startswith("clock.")} == {"patched-icount"}
    assert not [f for f in manifest["files"] if "/clock." in f and "patched-icount" not in f]
    assert "raw/patched-icount/rep1/clock.out.gz" in manifest["files"]
    # the inspect stage kept the listing it was asked for, once per kernel
    listed = variants["patched"]["inspect"]["evidence"]["listings"]["__x64_sys_getpid"]
    assert listed["instructions"] > 0
    assert "raw/patched/disassembly.txt.gz" in manifest["files"]
    # under -icount shift=0 the guest's clock and TSC both count instructions
    tsc, ns = value[("patched-icount", "tsc_total")], value[("patched-icount", "ns_total")]
    assert abs(tsc - ns) / ns < 0.01
    # the DAG is keyed on what each stage reads: asking for a second repetition of the same
    # experiment plans boots, parses, comparisons and a publish, and no kernel stage
    planned = planned_rules(runs_tmp, chapters="smoke", reps="2", accel="tcg")
    assert {"boot", "parse", "publish"} <= planned, planned
    assert not planned & {"root", "source", "series", "config", "build", "inspect", "tools",
                          "layer"}, planned
    data_unchanged()
