"""The smoke chapter end to end: `make reproduce CHAPTER=smoke` builds, boots, collects.

This is the test CI relies on to show that the whole pipeline works on a fresh machine:
toolchain root, pinned base, series, config, build, TCG and icount boots, and a published
run whose manifest and files check out.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from lab import collect

from .conftest import make_reproduce


def test_smoke_chapter_end_to_end(runs_tmp: dict[str, str], data_unchanged) -> None:
    proc = make_reproduce("CHAPTER=smoke", "REPS=1", "ACCEL=tcg", env=runs_tmp)
    assert proc.returncode == 0, proc.stdout[-4000:]
    # stages that run every time print progress lines; cached ones appear in the summary
    for stage in ("accel", "run", "collect"):
        assert f"ok {stage:<8} smoke" in proc.stdout, f"no progress line for stage {stage}"
    summary = proc.stdout.split("summary of smoke run")[1]
    # patched-icount boots the patched build: one build per tree, inspected per variant
    assert "build patched-icount" not in summary
    for row in ("root", "source", "build baseline", "build patched", "inspect patched-icount",
                "run patched-icount rep1", "collect"):
        assert row in summary and "not done" not in summary, summary

    runs = sorted((Path(runs_tmp["KERNEL_BOOK_RUNS"]) / "smoke").iterdir())
    assert len(runs) == 1 and not runs[0].name.startswith(".")
    run = runs[0]
    collect.verify_run(run)
    manifest = json.loads((run / "manifest.json").read_text())
    for key in ("base", "series", "compilers", "qemu", "host", "toolchain_root", "book",
                "date", "experiment", "variants", "files"):
        assert manifest[key], key
    assert manifest["base"]["version"] == "7.2.13"
    assert manifest["toolchain_root"]["packages"]["gcc-15"].startswith("15.")
    variants = manifest["variants"]
    assert variants["baseline"]["accel_used"] == ["tcg"]
    assert variants["patched-icount"]["accel_used"] == ["icount"]
    assert variants["baseline"]["commit"] != variants["patched"]["commit"]
    assert variants["baseline"]["config_sha256"] == variants["patched"]["config_sha256"]
    assert variants["patched-icount"]["build"]["variant"] == "patched"
    assert variants["patched-icount"]["build"] == variants["patched"]["build"]
    # boot-to-result under TCG, the bound
    assert max(variants["baseline"]["boot_to_result_seconds"]) <= 10.0

    with (run / "results.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    value = {(r["variant"], r["metric"]): float(r["value"]) for r in rows}
    # the patched kernel printed its marker; the baseline did not
    assert value[("baseline", "marker")] == 0
    assert value[("patched", "marker")] == 1
    assert value[("patched-icount", "marker")] == 1
    # under -icount shift=0 the guest's clock and TSC both count instructions
    tsc, ns = value[("patched-icount", "tsc_total")], value[("patched-icount", "ns_total")]
    assert abs(tsc - ns) / ns < 0.01
    data_unchanged()
