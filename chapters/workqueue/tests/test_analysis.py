"""The workqueue chapter's judge on synthetic runs with known answers: the mechanism rows of
pool->lock and the in-tree mode against the later postings' tables."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd

from lab import chapters
from lab.analysis import cited, verdicts
from lab.analysis.runs import Run

wq = chapters.get("workqueue").module("analysis")


RUN_ID = "20261124T0000Z-a"

CONSOLE = """\
[    0.266047] tsc: Marking TSC unstable due to TSCs unsynchronized
[    1.681911] clocksource: Switched to clocksource hpet
[    4.290652] Run /bin/sh as init process
KB-DONE rc=0
"""
"""A workqueue boot's console as the committed ones read: the TSC marked unstable during boot,
before the measured window, and the HPET the clocksource throughout the window."""


def run(rows: list[tuple[str, str, str, list[float]]], base: Path | None = None) -> Run:
    """One run of the variants ``rows`` name: (variant, workload, metric, one value per boot),
    with each boot's console under ``base`` when given."""
    tidy = [{"variant": variant, "rep": rep, "workload": workload, "metric": metric,
             "value": value}
            for variant, workload, metric, values in rows
            for rep, value in enumerate(values, 1)]
    variants = {v: {"accel_used": ["tcg"], "machine": {"cpus": 8}}
                for v in dict.fromkeys(variant for variant, *_ in rows)}
    manifest = {"variants": variants, "host": {"cores": 2}, "experiment": {"workloads": []}}
    if base is None:
        return Run("workqueue", RUN_ID, Path("/nonexistent"), manifest, pd.DataFrame(tidy))
    for boot in {(r["variant"], r["rep"]) for r in tidy}:
        where = base / RUN_ID / "raw" / boot[0] / f"rep{boot[1]}"
        where.mkdir(parents=True, exist_ok=True)
        (where / "console.log.gz").write_bytes(gzip.compress(CONSOLE.encode()))
    return Run("workqueue", RUN_ID, base / RUN_ID, manifest, pd.DataFrame(tidy))


def test_acquisitions_are_judged_against_no_change_and_contentions_for_their_direction() -> None:
    rows = []
    for scope in wq.CONTENDED:
        # equal acquisitions at cache_shard; 3 % fewer at system; contentions fall everywhere
        taken = [1000.0, 1000.0, 1000.0] if scope != "system" else [1000.0, 1001.0, 999.0]
        rows += [("lockstat-baseline", "batch", f"{scope}.pool_lock.acquisitions", taken),
                 ("lockstat-patched", "batch", f"{scope}.pool_lock.acquisitions",
                  taken if scope != "system" else [970.0, 971.0, 969.0]),
                 ("lockstat-baseline", "batch", f"{scope}.pool_lock.contentions",
                  [100.0, 110.0, 105.0]),
                 ("lockstat-patched", "batch", f"{scope}.pool_lock.contentions",
                  [50.0, 55.0, 52.0])]
    frame = cited.to_frame(cited.load_all())
    out = wq.mechanism_rows(frame, [run(rows)]).set_index("id")
    assert len(out) == 2 * len(wq.CONTENDED)
    assert (out["row_kind"] == verdicts.MECHANISM).all()
    # the acquisitions test the book's own reading of 2/2, never the author: inside the
    # margin of a count it holds, beyond it it fails
    same = out.loc["workqueue-mechanism-cache-shard-acquisitions"]
    assert same["ours_reading"] and same["verdict"] == verdicts.HOLDS
    assert same["cited"].startswith("our reading of 2/2's changelog")
    fewer = out.loc["workqueue-mechanism-system-acquisitions"]
    assert fewer["ours_reading"] and fewer["verdict"] == verdicts.FAILS
    assert fewer["ours"].startswith("acquisitions -3.0 %")
    # the contentions test our reading of the author's shorter hold time, for the direction of
    # his gain: they hold or fail, never confirm him
    contended = out.loc["workqueue-mechanism-system-contentions"]
    assert contended["ours_reading"]
    assert contended["verdict"] == verdicts.HOLDS and contended["cited"] == "+6.7 %"


def test_the_in_tree_mode_is_judged_against_v3_and_v5_naming_v1s_code(tmp_path: Path) -> None:
    rows = []
    for scope in wq.SCOPES:
        rows += [("baseline", "wait", f"{scope}.items_per_sec", [1000.0, 1100.0, 1050.0]),
                 ("patched", "wait", f"{scope}.items_per_sec", [1500.0, 1600.0, 1550.0]),
                 ("baseline", "wait", f"{scope}.p95_ns", [900.0, 1000.0, 950.0]),
                 ("patched", "wait", f"{scope}.p95_ns", [600.0, 650.0, 620.0])]
    frame = cited.to_frame(cited.load_all())
    out = wq.judge(frame, [run(rows, tmp_path)]).set_index("id")
    gain = out.loc["workqueue-v3-tput-cache-gain"]  # cited +34.7 %, ours about +47 %
    assert gain["verdict"] == verdicts.REPRODUCED
    assert gain["reason"].endswith("not the same patch") and "v3's (wake_q)" in gain["reason"]
    later = out.loc["workqueue-v5-tput-cache-gain"]  # cited +10.8 %
    assert later["verdict"] == verdicts.DIRECTION
    assert "on the author's side but above the cited +10.8 %" in later["reason"]
    assert out.loc["workqueue-v5-tput-cache-baseline", "verdict"] == verdicts.NOT_COMPARABLE
    # the p95 column has no before/after: its written change is judged from our p95 per boot
    p95 = out.loc["workqueue-v5-p95-cpu-change"]  # cited +3.5 %, ours about -35 %
    assert p95["verdict"] == verdicts.CONTRADICTED and p95["ours"].startswith("-3")
    assert out.loc["workqueue-v3-p95-cache-change", "verdict"] == verdicts.REPRODUCED
    # healthy clocks (the TSC marked unstable before the window only): no boot set aside
    assert not out["reason"].str.contains("clock trouble").any()
