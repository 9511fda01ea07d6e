"""Reading measured runs: sha256 verification, and the scorecard join."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from lab import chapters
from lab.analysis import cited, headlines, judges, runs, scorecard, verdicts, views
from lab.book import figures, panels

ENV = ("TCG on AMD EPYC (2 host cores), QEMU 7.2.22, gcc, "
       "Linux 7.2.13 (debian-linux-source:7.2.13-1), config 833ba6bd4e67")


def make_run(base: Path, chapter: str = "workqueue", run_id: str = "20261122T0000Z-x") -> Path:
    run = base / chapter / run_id
    run.mkdir(parents=True)
    (run / "results.csv").write_text(
        "variant,rep,metric,value,cited_id,verdict\n"
        "baseline,1,throughput,100,workqueue-tput-cache-baseline,\n"
        "baseline,2,throughput,130,workqueue-tput-cache-baseline,direction confirmed\n"
        "patched,1,throughput,110,,\n")
    files = {"results.csv": hashlib.sha256((run / "results.csv").read_bytes()).hexdigest()}
    manifest = {
        "files": files, "qemu": "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7)",
        "host": {"cpu_model": "AMD EPYC", "cores": 2},
        "base": {"version": "7.2.13", "origin": "debian-linux-source:7.2.13-1"},
        "variants": {"baseline": {"accel_used": ["tcg"], "compiler": "gcc",
                                  "config_sha256": "833ba6bd4e67a661"}},
    }
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def test_a_complete_run_loads(tmp_path: Path) -> None:
    make_run(tmp_path)
    [run] = runs.load_chapter_runs("workqueue", tmp_path)
    assert list(run.results["value"]) == [100, 130, 110]
    measured = runs.measured_for_cited(tmp_path)
    assert measured.to_dict("records") == [{
        "id": "workqueue-tput-cache-baseline", "ours": "mean 115 (n=2, 100 to 130)",
        "verdict": "direction confirmed", "reason": runs.RECORDED_REASON,
        "run_id": "20261122T0000Z-x", "environment": ENV}]


def test_an_edited_measurement_is_refused(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    (run / "results.csv").write_text((run / "results.csv").read_text().replace("110", "120"))
    with pytest.raises(runs.RunDataError, match=r"results.csv: sha256 differs.*Fix"):
        runs.load_chapter_runs("workqueue", tmp_path)


def test_a_run_without_manifest_is_refused(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    (run / "manifest.json").unlink()
    with pytest.raises(runs.RunDataError, match=r"no manifest\.json"):
        runs.load_chapter_runs("workqueue", tmp_path)


def test_one_repetition_is_shown_alone_and_unjudged(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    (run / "results.csv").write_text("variant,rep,metric,value,cited_id\n"
                                     "baseline,1,throughput,1234567,workqueue-tput-cache-baseline\n")
    manifest = json.loads((run / "manifest.json").read_text())
    digest = hashlib.sha256((run / "results.csv").read_bytes()).hexdigest()
    manifest["files"]["results.csv"] = digest
    (run / "manifest.json").write_text(json.dumps(manifest))
    [row] = runs.measured_for_cited(tmp_path).to_dict("records")
    assert (row["ours"], row["verdict"], row["reason"]) == ("1,234,567", runs.UNJUDGED,
                                                            runs.UNJUDGED_REASON)


def test_a_chapter_without_runs_is_empty(tmp_path: Path) -> None:
    assert runs.load_chapter_runs("qpw", tmp_path) == []
    assert runs.measured_for_cited(tmp_path).empty


def test_scorecard_lists_every_cited_entry(tmp_path: Path) -> None:
    frame = cited.to_frame(cited.load_all())
    make_run(tmp_path)
    card = scorecard.build(frame, runs.measured_for_cited(tmp_path))
    assert len(card) == len(frame)
    row = card.set_index("id").loc["workqueue-tput-cache-baseline"]
    assert (row["ours"], row["verdict"]) == ("mean 115 (n=2, 100 to 130)", "direction confirmed")
    others = card[card["id"] != "workqueue-tput-cache-baseline"]
    assert set(others["verdict"]) == {scorecard.NOT_YET}
    assert set(others["reason"]) == {scorecard.NOT_YET_REASON}
    assert set(others["ours"]) == {"—"}
    assert isinstance(card, pd.DataFrame)


CONSOLE = ("[    0.266047] tsc: Marking TSC unstable due to TSCs unsynchronized\n"
           "[    1.681911] clocksource: Switched to clocksource hpet\n"
           "[    4.290652] Run /bin/sh as init process\n"
           "KB-DONE rc=0\n")
"""A workqueue boot's console as the committed ones read: the TSC given up during boot, the
HPET the clocksource throughout the measured window, so the judges flag no boot."""


def write_run(base: Path, run_id: str, rows: list[tuple[str, int, str, str, float, str]]) -> Path:
    """A workqueue run whose manifest declares the cache scope's throughput as cited, with a
    console per boot (the judges read each boot's clock health from it)."""
    run = base / "workqueue" / run_id
    run.mkdir(parents=True)
    lines = ["chapter,variant,rep,workload,metric,value,accel,cited_id"]
    lines += [f"workqueue,{v},{rep},{w},{m},{value},tcg,{c}" for v, rep, w, m, value, c in rows]
    (run / "results.csv").write_text("\n".join(lines) + "\n")
    for variant, rep in {(v, r) for v, r, *_ in rows}:
        boot = run / "raw" / variant / f"rep{rep}"
        boot.mkdir(parents=True)
        (boot / "console.log.gz").write_bytes(gzip.compress(CONSOLE.encode()))
    files = {"results.csv": hashlib.sha256((run / "results.csv").read_bytes()).hexdigest()}
    cited_map = {"cache.items_per_sec": {"baseline": "workqueue-tput-cache-baseline",
                                         "patched": "workqueue-tput-cache-patched"}}
    variant = {"accel_used": ["tcg"], "compiler": "gcc", "config_sha256": "833ba6bd4e67",
               "machine": {"cpus": 8}}
    manifest = {
        "files": files, "qemu": "QEMU emulator version 7.2.22", "host": {"cpu_model": "AMD EPYC",
                                                                          "cores": 2},
        "base": {"version": "7.2.13", "origin": "debian-linux-source:7.2.13-1"},
        "variants": {"baseline": variant, "patched": variant},
        "experiment": {"workloads": [{"name": "batch", "cited": cited_map}]},
    }
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def throughput(variant: str, values: list[float]) -> list[tuple[str, int, str, str, float, str]]:
    return [(variant, rep, "batch", "cache.items_per_sec", value,
             f"workqueue-tput-cache-{variant}") for rep, value in enumerate(values, 1)]


def test_the_newest_run_of_each_variant_is_used(tmp_path: Path) -> None:
    write_run(tmp_path, "20261122T0000Z-a", throughput("baseline", [1, 2])
              + throughput("patched", [1, 2])
              + [("lockstat-baseline", 1, "batch", "cache.pool_lock.contentions", 5, "")])
    write_run(tmp_path, "20261123T0000Z-b", throughput("baseline", [3, 4])
              + throughput("patched", [3, 4]))
    chosen = runs.latest_per_variant(runs.load_chapter_runs("workqueue", tmp_path))
    assert {v: r.run_id for v, r in chosen.items()} == {
        "baseline": "20261123T0000Z-b", "patched": "20261123T0000Z-b",
        "lockstat-baseline": "20261122T0000Z-a"}


def test_a_judged_chapter_gives_its_cited_entries_verdicts(tmp_path: Path) -> None:
    write_run(tmp_path, "20261122T0000Z-a", throughput("baseline", [100, 101, 99])
              + throughput("patched", [108, 109, 110]))
    frame = cited.to_frame(cited.load_all())
    card = scorecard.build(frame, runs.measured_for_cited(tmp_path),
                           judges.judged(frame, tmp_path)).set_index("id")
    gain = card.loc["workqueue-tput-cache-gain"]
    assert gain["verdict"] == verdicts.REPRODUCED
    assert gain["ours"].startswith("+9.0 % (95 % CI +")
    assert "meets the cited +8.9 % (+8.8 to +9.0 % as printed)" in gain["reason"]
    # three steady boots a kernel: refitted at the full sample's degrees of freedom, no single
    # boot decides the verdict, so the reason names none
    assert "rests on one" not in gain["reason"]
    for role in ("baseline", "patched"):
        row = card.loc[f"workqueue-tput-cache-{role}"]
        assert row["verdict"] == verdicts.NOT_COMPARABLE
        assert "the cited change is judged instead: reproduced" in row["reason"]
    assert card.loc["workqueue-tput-cache-baseline", "ours"] == "mean 100 (n=3, 99 to 101)"
    # Scopes the run did not measure keep their verdict.
    assert card.loc["workqueue-tput-numa-gain", "verdict"] == scorecard.NOT_YET


def test_one_repetition_is_measured_but_not_judged(tmp_path: Path) -> None:
    write_run(tmp_path, "20261122T0000Z-a", throughput("baseline", [100])
              + throughput("patched", [108, 109]))
    frame = cited.to_frame(cited.load_all())
    card = scorecard.build(frame, runs.measured_for_cited(tmp_path),
                           judges.judged(frame, tmp_path)).set_index("id")
    gain = card.loc["workqueue-tput-cache-gain"]
    assert (gain["ours"], gain["verdict"]) == ("—", runs.UNJUDGED)
    assert "baseline: 1 repetition" in gain["reason"]


def test_every_cited_workqueue_number_is_judged_from_the_committed_runs() -> None:
    frame = cited.to_frame(cited.load_all())
    card = scorecard.build(frame, runs.measured_for_cited(), judges.judged(frame))
    ours = card[card["chapter"] == "workqueue"]
    cited_rows = ours[ours["id"].isin(frame["id"])]
    assert len(cited_rows) == len(frame[frame["chapter"] == "workqueue"])
    assert set(ours["verdict"]) <= set(verdicts.JUDGED)
    assert ours["reason"].str.len().min() > 20
    assert (ours["ours"] != "—").all()
    # every cited pair without a written change has a derived change row beside it
    assert {"workqueue-enqueue-lat-p50-change", "workqueue-enqueue-lat-p99-change"} <= set(
        ours["id"])
    # and the clock-free mechanism rows stand beside the throughput of their scope
    mechanism = ours[ours["column"].str.startswith("mechanism")]
    wq = chapters.get("workqueue").module("analysis")
    assert sorted(mechanism["column"].str.extract(r"pool->lock (\w+)")[0].value_counts()
                  .items()) == [("acquisitions", len(wq.CONTENDED)),
                                ("contentions", len(wq.CONTENDED))]
    assert (mechanism["measurement"] == "throughput-by-scope").all()
    # both counts test the book's own reading (the author's explanation is the hold time)
    assert (mechanism["row_kind"] == verdicts.MECHANISM).all()
    assert mechanism["ours_reading"].all()
    assert mechanism["verdict"].isin([verdicts.HOLDS, verdicts.FAILS,
                                      verdicts.INCONCLUSIVE]).all()
    # the later postings' in-tree tables are judged from our in-tree mode, and say whose code
    later = cited_rows[cited_rows["id"].str.match(r"workqueue-v[35]-")]
    assert len(later) and later["reason"].str.contains("our patched kernel carries v1's code").all()
    others = card[~card["chapter"].isin(judges.judges())]
    assert set(others["verdict"]) <= {runs.UNJUDGED, scorecard.NOT_YET}


def test_context_switch_entries_are_judged_where_a_run_measures_them() -> None:
    frame = cited.to_frame(cited.load_all())
    card = scorecard.build(frame, runs.measured_for_cited(), judges.judged(frame))
    ours = card[card["chapter"] == "context-switch"].set_index("id")
    measured = ours[ours["verdict"] != scorecard.NOT_YET]
    assert set(measured["verdict"]) <= set(verdicts.JUDGED)
    entries = measured[measured.index.isin(frame["id"])]
    v2 = entries[~entries.index.str.contains("-v5-")]
    # both compilers' cells (cover letter and patch 4/4 tables): 16 readings, 4 sizes
    assert len([i for i in v2.index if "rdtsc" in i]) == 16
    assert (v2["verdict"] == verdicts.NOT_COMPARABLE).all()
    rdtsc = v2[v2.index.str.contains("rdtsc")]
    assert rdtsc["ours"].str.contains("icount").all()
    sizes = v2[v2.index.str.contains("bzimage")]
    assert len(rdtsc) + len(sizes) == len(v2)
    assert sizes["ours"].str.fullmatch(r"[\d,]+ bytes").all()
    # the v5 cover letter: its readings and sizes are levels, its written changes are judged,
    # its arm tables from the Arm run (each cell also under icount, arm32's on one vCPU)
    v5 = entries[entries.index.str.contains("-v5-")]
    levels = frame.set_index("id").loc[v5.index, "variant"] != "change"
    assert (v5.loc[levels, "verdict"] == verdicts.NOT_COMPARABLE).all()
    assert (v5.loc[~levels, "verdict"] != verdicts.NOT_COMPARABLE).all()
    arm = ours[ours.index.str.contains("-v5-arm")]
    assert len(arm) == 12 + 4 and not (arm["verdict"] == scorecard.NOT_YET).any()
    assert {i for i in arm.index if i.endswith("-icount")} == {
        f"context-switch-v5-{a}-{c}-icount" for a in ("arm64", "arm32") for c in ("gcc", "clang")}
    # an emulator's wall clock judges no claim about the Pi's time (nor the i5's)
    wall = ours[ours.index.str.endswith("-change") & (ours["our_unit"] == "%")]
    assert len(wall) == 8 + 8 + 4 and (wall["verdict"] == verdicts.INCONCLUSIVE).all()
    assert wall["reason"].str.contains("this environment cannot show").all()
    # each v2 pair has its derived change row; the cover letters' cells their icount rows,
    # the v5 .text rows the function sizes behind them
    derived = measured[~measured.index.isin(frame["id"])]
    assert len(derived[derived.index.str.endswith("-change")]) == 8 + 2
    icount = derived[derived.index.str.endswith("-icount")]
    assert len(icount) == 4 + 8 + 4 and icount["ours"].str.startswith("instructions").all()
    # instructions are a mechanism, never a reproduction of a time
    assert (icount["row_kind"] == verdicts.MECHANISM).all()
    assert not icount["verdict"].isin([verdicts.REPRODUCED, verdicts.CONTRADICTED]).any()
    # image sizes are judged exactly, in bytes: the Clang -Os image grew by one page where the
    # author's did not; at -O2 by one page where the author's grew by two
    assert ours.loc["context-switch-bzimage-clang-change", "verdict"] == verdicts.CONTRADICTED
    assert ours.loc["context-switch-bzimage-clang-change", "ours"].startswith("+4,096 bytes")
    # the -O2 size rows come from the author's size configuration built without -Os, never
    # from the timing configuration (-O2 too, but without SCHED_CORE and NO_HZ_FULL)
    o2 = ours.loc[[f"context-switch-v5-{k}-{c}-o2-change" for k in ("bzimage", "text")
                   for c in ("gcc", "clang")]]
    configs = {v["config_sha256"][:12] for run in runs.load_chapter_runs("context-switch")
               for name, v in run.manifest["variants"].items() if "-size-o2-" in name}
    assert len(configs) == 2  # one per compiler
    assert all(any(c in env for c in configs) for env in o2["environment"])
    assert o2.drop(["context-switch-v5-bzimage-gcc-o2-change"])["reason"].str.contains(
        "size configuration at -O2").all()  # a bzImage inside the margin names no setting
    assert ours.loc["context-switch-v5-text-gcc-o2-change", "ours"].startswith("+5,440 bytes")
    assert ours.loc["context-switch-v5-bzimage-gcc-o2-change", "verdict"] == verdicts.REPRODUCED
    assert ours.loc["context-switch-v5-text-gcc-os-change", "verdict"] == verdicts.DIRECTION
    # the function sizes behind each .text row show the inlining in the same configuration
    tail = derived[derived.index.str.endswith("-schedule-tail")]
    assert len(tail) == 4 and (tail["verdict"] == verdicts.DIRECTION).all()


def test_the_card_keeps_the_kinds_of_the_sched_ext_qpw_and_io_wq_rows() -> None:
    frame = cited.to_frame(cited.load_all())
    card = scorecard.build(frame, runs.measured_for_cited(), judges.judged(frame)).set_index("id")
    # checks are true by construction or pass/fail, and never support
    for rid in ("sched-ext-check-owner-cpu", "sched-ext-check-call-sites",
                "sched-ext-check-remote-path-ran", "qpw-lockdep-v4", "qpw-lockdep-syzbot",
                "io-wq-check-lost-wakeups", "io-wq-check-hash-wait-acquisitions"):
        assert card.loc[rid, "row_kind"] == verdicts.CHECK
        assert card.loc[rid, "verdict"] in (verdicts.PASSED, verdicts.FAILED)
    # instructions under icount are mechanism rows beside a claim in TSC ticks, except with
    # CONFIG_PWLOCKS=n, whose code is the unpatched kernel's: the same count is a check
    qpw_icount = card[card.index.str.startswith("qpw-") & card.index.str.endswith("-icount")]
    same_code = "qpw-kmalloc-dynamic-qpw-n-icount"
    assert len(qpw_icount) == 5 and card.loc[same_code, "row_kind"] == verdicts.CHECK
    assert (qpw_icount.drop([same_code])["row_kind"] == verdicts.MECHANISM).all()
    assert (qpw_icount["verdict"] != verdicts.CONTRADICTED).all()
    # a row of our own reading is never judged against the author
    for rid in ("io-wq-mechanism-acct-lock-contentions",
                "io-wq-mechanism-acct-lock-contentions-5of8"):
        assert card.loc[rid, "ours_reading"]
        assert card.loc[rid, "verdict"] in (verdicts.HOLDS, verdicts.FAILS,
                                            verdicts.INCONCLUSIVE)
    mine = card[card["chapter"].isin(["sched-ext", "qpw", "io-wq"])]
    counted = views.counts(mine.reset_index(), frame)
    # sched-ext 3, io-wq 2 (lost wakeups, 5/8's wait-queue lock), qpw 5 (0006 per model,
    # syzbot's report before and after, PWLOCKS=n's instruction count)
    assert counted["check"] == (mine["row_kind"] == verdicts.CHECK).sum() == 10
    assert counted["check-support"] == 0


@pytest.mark.parametrize(("variants", "accelerator"), [
    ({"a": {"accel_used": ["tcg"]}, "b": {"accel_used": ["icount"], "boot": True}}, "ICOUNT/TCG"),
    ({"size": {"boot": False}}, "built only (not booted)"),
    ({"a": {"boot": True}}, "unknown accelerator"),
])
def test_environment_names_the_accelerator_or_says_nothing_was_booted(
        variants: dict, accelerator: str) -> None:
    assert runs.environment_facts({"variants": variants})["accelerator"] == accelerator


def test_environment_limits_name_the_variants_own_accelerator_and_vcpus() -> None:
    """A run whose variants boot on different machines (arm32's icount cells on one vCPU beside
    two-vCPU wall-clock ones) states each variant's own limits, not both joined."""
    manifest = {"host": {"cores": 2}, "variants": {
        "wall": {"accel_used": ["tcg"], "arch": "arm", "machine": {"cpus": 2}},
        "count": {"accel_used": ["icount"], "arch": "arm", "machine": {"cpus": 1}}}}
    assert runs.environment_limits(manifest, "count") == (
        "ICOUNT, 1 vCPU of an emulated arm on 2 host cores")
    assert runs.environment_limits(manifest, "wall") == (
        "TCG, 2 vCPUs of an emulated arm on 2 host cores")
    assert runs.environment_limits(manifest) == "ICOUNT/TCG, 1, 2 vCPUs on 2 host cores"


def _pool_run(base: Path, run_id: str, variants: dict, reps: int, value: float,
              parent: str | None = None, host: dict | None = None) -> None:
    run = base / "workqueue" / run_id
    run.mkdir(parents=True)
    lines = ["chapter,variant,rep,workload,metric,value,accel"]
    lines += [f"workqueue,baseline,{r},batch,m,{value + r},tcg" for r in range(1, reps + 1)]
    (run / "results.csv").write_text("\n".join(lines) + "\n")
    manifest = {"variants": variants, "compilers": {"gcc-15": "15.3"}, "qemu": "7.2",
                "experiment": {"workloads": [{"name": "batch", "script": "x/batch.sh"}]},
                "files": {"results.csv": hashlib.sha256(
                    (run / "results.csv").read_bytes()).hexdigest()}}
    if parent:
        manifest["parent"] = {"run_id": parent}
    if host:
        manifest["host"] = host
    (run / "manifest.json").write_text(json.dumps(manifest))


def test_runs_of_the_same_binaries_pool_and_other_binaries_replace(tmp_path: Path) -> None:
    same = {"baseline": {"commit": "c1", "config_sha256": "k", "build": {"bzImage_bytes": 1}}}
    other = {"baseline": {"commit": "c2", "config_sha256": "k", "build": {"bzImage_bytes": 1}}}
    _pool_run(tmp_path, "20260101T000000Z-a", same, 3, 100)
    _pool_run(tmp_path, "20260102T000000Z-a", same, 2, 200)
    pooled = runs.pooled_per_variant(runs.load_chapter_runs("workqueue", tmp_path))["baseline"]
    assert pooled.run_id == "20260101T000000Z-a + 20260102T000000Z-a"
    assert list(pooled.results["rep"]) == [1, 2, 3, 4, 5]
    assert list(pooled.results["value"]) == [101, 102, 103, 201, 202]
    assert list(pooled.results["run_rep"]) == [1, 2, 3, 1, 2]
    # a re-parse stands for its parent: its boots are not counted twice
    _pool_run(tmp_path, "20260102T000000Z-a-reparse1", same, 2, 200,
              parent="20260102T000000Z-a")
    pooled = runs.pooled_per_variant(runs.load_chapter_runs("workqueue", tmp_path))["baseline"]
    assert pooled.run_id == "20260101T000000Z-a + 20260102T000000Z-a-reparse1"
    assert len(pooled.results) == 5
    # other binaries: the newest run alone
    _pool_run(tmp_path, "20260103T000000Z-a", other, 2, 300)
    pooled = runs.pooled_per_variant(runs.load_chapter_runs("workqueue", tmp_path))["baseline"]
    assert pooled.run_id == "20260103T000000Z-a" and list(pooled.results["value"]) == [301, 302]


def test_runs_with_other_guest_programs_do_not_pool(tmp_path: Path) -> None:
    """The same kernel with a guest module rebuilt from changed source is another experiment;
    a manifest that records no programs (older runs) still pools."""
    built = {"commit": "c1", "config_sha256": "k", "build": {"bzImage_bytes": 1}}
    _pool_run(tmp_path, "20260101T000000Z-a", {"baseline": built}, 2, 100)
    _pool_run(tmp_path, "20260102T000000Z-a",
              {"baseline": {**built, "tools": {"programs": {"m.ko": "1"}}}}, 2, 200)
    pooled = runs.pooled_per_variant(runs.load_chapter_runs("workqueue", tmp_path))["baseline"]
    assert pooled.run_id == "20260101T000000Z-a + 20260102T000000Z-a"
    _pool_run(tmp_path, "20260103T000000Z-a",
              {"baseline": {**built, "tools": {"programs": {"m.ko": "2"}}}}, 2, 300)
    pooled = runs.pooled_per_variant(runs.load_chapter_runs("workqueue", tmp_path))["baseline"]
    assert pooled.run_id == "20260101T000000Z-a + 20260103T000000Z-a"
    assert list(pooled.results["value"]) == [101, 102, 301, 302]


def test_runs_of_two_machines_do_not_pool(tmp_path: Path) -> None:
    """The same binaries booted on another CPU, or on another named node of the same CPU, are
    another experiment; a manifest without a node name (older runs) pools by CPU alone."""
    built = {"baseline": {"commit": "c1", "config_sha256": "k", "build": {"bzImage_bytes": 1}}}
    amd = {"cpu_model": "AMD EPYC", "cores": 2, "kernel": "6.18", "machine": "x86_64"}
    _pool_run(tmp_path, "20260101T000000Z-a", built, 2, 100, host=amd)
    _pool_run(tmp_path, "20260102T000000Z-a-n1", built, 2, 200,
              host={**amd, "kernel": "6.19", "name": "n1"})
    pooled = runs.pooled_per_variant(runs.load_chapter_runs("workqueue", tmp_path))["baseline"]
    assert pooled.run_id == "20260101T000000Z-a + 20260102T000000Z-a-n1"
    _pool_run(tmp_path, "20260103T000000Z-a-n2", built, 2, 300, host={**amd, "name": "n2"})
    pooled = runs.pooled_per_variant(runs.load_chapter_runs("workqueue", tmp_path))["baseline"]
    assert pooled.run_id == "20260101T000000Z-a + 20260103T000000Z-a-n2"
    _pool_run(tmp_path, "20260104T000000Z-a", built, 2, 400,
              host={**amd, "cpu_model": "Intel(R) Xeon(R) Processor"})
    pooled = runs.pooled_per_variant(runs.load_chapter_runs("workqueue", tmp_path))["baseline"]
    assert pooled.run_id == "20260104T000000Z-a"
    assert runs.machine_label({**amd, "name": "n1"}) == "n1: AMD EPYC, 2 cores"


def test_the_judged_numbers_reach_the_card(tmp_path: Path) -> None:
    write_run(tmp_path, "20261122T0000Z-a", throughput("baseline", [100, 101, 99])
              + throughput("patched", [108, 109, 110]))
    frame = cited.to_frame(cited.load_all())
    card = scorecard.build(frame, runs.measured_for_cited(tmp_path),
                           judges.judged(frame, tmp_path)).set_index("id")
    gain = card.loc["workqueue-tput-cache-gain"]
    assert gain["kind"] == "cited change"
    assert gain["our_low"] < gain["our_change"] < gain["our_high"]
    assert gain["ours"].startswith(f"{gain['our_change']:+.1f} %")
    assert gain["cited_change"] == pytest.approx(8.9)
    assert card.loc["workqueue-tput-cache-baseline", "kind"] == "cited value"
    assert card.loc["workqueue-tput-numa-gain", "our_unit"] == ""
    view = views.chapter_view(card.reset_index(), "workqueue")
    assert set(view.columns).isdisjoint(set(scorecard.DATA_COLUMNS) - {"kind"})
    assert set(view["kind"]) == {"claim"}  # the printed row kind, not where the row comes from


@pytest.fixture(scope="module")
def book_card() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The committed card, once for the module: (cited frame, judged rows, card)."""
    frame = cited.to_frame(cited.load_all())
    judged = judges.judged(frame)
    return frame, judged, scorecard.build(frame, runs.measured_for_cited(), judged)


def test_the_overview_draws_or_counts_every_row_of_the_card(
        book_card: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]) -> None:
    """Every row a judge emits is a line of the overview figure (or counted in one), in book
    order, and a chapter that no run measures shows its cited values as not yet measured."""
    frame, judged, card = book_card
    order = [c.name for c in chapters.book()]
    lines = views.overview(card, order)
    assert lines["rows"].sum() == len(card)
    assert list(dict.fromkeys(lines["chapter"])) == [c for c in order if c in set(card["chapter"])]
    changes = card[card["kind"] != "cited value"]
    assert len(lines[lines["kind"] != "cited value"]) == len(changes)
    drawn = lines[lines["our_change"].notna()]
    assert (drawn["our_low"] <= drawn["our_high"]).all()
    assert drawn["cited_change"].notna().sum() + drawn["expected_sign"].notna().sum() == len(
        drawn)
    for chapter in set(order) - set(judges.judges()):
        alone = card[card["chapter"] == chapter]
        assert set(alone["verdict"]) <= {scorecard.NOT_YET, runs.UNJUDGED}
    # a row another branch's judge adds appears without a change to the overview
    extra = judged.iloc[[-1]].assign(id="x-mechanism-new", column="mechanism: a new count",
                                     verdict=verdicts.CONTRADICTED)
    more = views.overview(scorecard.build(frame, runs.measured_for_cited(),
                                              pd.concat([judged, extra])), order)
    assert len(more) == len(lines) + 1
    assert (more["column"] == "mechanism: a new count").sum() == 1


def test_the_full_figure_shows_each_rows_kind_and_sets_checks_apart(
        book_card: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]) -> None:
    """The scorecard page's figure: a verdict per line, every check and row of our own reading
    under its chapter's headings for them (never among the claims), short verdict words, and no
    text under lab.book.figures.FONT_SIZE."""
    _, _, card = book_card
    titles = {c.name: c.label for c in chapters.book()}
    lines = views.overview(card, list(titles))
    fig = figures.overview_figure(lines, titles)
    texts = fig.axes[0].texts
    words = [t.get_text() for t in texts]
    for title in titles.values():
        assert title in words
    right = max(t.get_position()[0] for t in texts)  # the verdict column
    shown = [t.get_text() for t in texts if t.get_position()[0] == right]
    assert sorted(shown) == sorted(figures.VERDICT_WORDS[v] for v in lines["verdict"])
    assert set(shown) <= set(figures.VERDICT_WORDS.values())
    headings = dict(figures.APART)
    for name, part in lines.groupby("chapter", sort=False):
        own = [t.get_text() for t in texts]
        start = own.index(titles[name])
        stop = min([own.index(titles[c]) for c in titles if own.index(titles[c]) > start],
                   default=len(own))
        chapter = own[start:stop]
        for kind, rows in (("check", part[part["row_kind"] == verdicts.CHECK]),
                           ("ours", part[part["ours_reading"].astype(bool)])):
            if len(rows):
                head = chapter.index(headings[kind])
                after = chapter[head:]
                passed = {figures.VERDICT_WORDS[v] for v in rows["verdict"]}
                assert passed <= set(after), (name, kind)
    checks = lines[lines["row_kind"] == verdicts.CHECK]
    assert set(checks["verdict"]) <= {verdicts.PASSED, verdicts.FAILED}
    assert not any("+ NA" in w for w in words)
    legend = fig.axes[0].get_legend().get_texts()
    assert min(t.get_fontsize() for t in [*texts, *legend]) >= figures.FONT_SIZE


def test_the_scorecard_tables_print_each_rows_kind(
        book_card: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]) -> None:
    """A scorecard table prints every row's kind beside the cited value, and its published
    form (data=True) carries the kind as data: row_kind and ours_reading."""
    _, _, card = book_card
    for c in chapters.book():
        view = views.chapter_view(card, c.name)
        assert view.columns[view.columns.get_loc("cited") - 1] == "kind"
        assert set(view["kind"]) <= {"claim", "mechanism", "check", "mechanism, ours"}
        data = views.chapter_view(card, c.name, data=True)
        assert list(data.columns[-2:]) == views.KIND_COLUMNS
        mine = card[card["chapter"] == c.name].reset_index(drop=True)
        assert list(data["row_kind"]) == list(mine["row_kind"])
        assert list(data["ours_reading"]) == list(mine["ours_reading"])
        checks = data[data["row_kind"] == verdicts.CHECK]
        assert set(checks["kind"]) <= {"check"}
        assert set(data.loc[data["ours_reading"], "kind"]) <= {"mechanism, ours"}
    everything = views.table_view(card, data=True)
    assert (everything["kind"] == "check").sum() == (card["row_kind"] == verdicts.CHECK).sum()


def _row(**given: object) -> dict[str, object]:
    """A card row for the rules below: a claim of chapter x with no numbers unless given."""
    nan = float("nan")
    row: dict[str, object] = {
        "chapter": "x", "id": "r", "measurement": "t", "row": "a", "column": "change",
        "cited": "-10 %", "ours": "—", "environment": "", "verdict": verdicts.INCONCLUSIVE,
        "reason": "", "kind": "cited change", "row_kind": verdicts.CLAIM,
        "ours_reading": False, "our_change": nan, "our_low": nan, "our_high": nan,
        "our_unit": "%", "cited_change": nan, "expected_sign": nan, "detectable": nan,
        "detectable_side": 0, "margin": 0.2, "bound": nan}
    row.update(given)
    return row


def test_tallies_keep_the_three_kinds_apart_and_never_count_a_check_as_support() -> None:
    """A check that passes, or a reading of ours that holds, is counted in its own group, in
    its own words; claims and mechanism rows are counted apart; absolute values are not."""
    card = pd.DataFrame([
        _row(verdict=verdicts.DIRECTION),
        _row(verdict=verdicts.INCONCLUSIVE),
        _row(kind="cited value", verdict=verdicts.NOT_COMPARABLE),
        _row(kind="mechanism", row_kind=verdicts.MECHANISM, verdict=verdicts.DIRECTION),
        _row(kind="mechanism", row_kind=verdicts.MECHANISM, ours_reading=True,
             verdict=verdicts.HOLDS),
        _row(kind="check", row_kind=verdicts.CHECK, verdict=verdicts.PASSED),
        _row(kind="check", row_kind=verdicts.CHECK, verdict=verdicts.PASSED),
    ])
    found = views.tally(card)
    assert found == {"claims": {verdicts.DIRECTION: 1, verdicts.INCONCLUSIVE: 1},
                     "mechanism rows": {verdicts.DIRECTION: 1},
                     "our readings": {verdicts.HOLDS: 1},
                     "checks": {verdicts.PASSED: 2}}
    assert views.verdict_summary(card) == (
        "claims: 1 direction confirmed, 1 inconclusive here; mechanism rows: 1 direction "
        "confirmed; our readings: 1 holds; checks: 2 passed")
    two = pd.concat([card, pd.DataFrame([_row(kind="mechanism", row_kind=verdicts.MECHANISM,
                                              ours_reading=True, verdict=verdicts.HOLDS)])])
    assert "our readings: 2 hold;" in views.verdict_summary(two)
    counted = views.counts(card.assign(id=[f"r{i}" for i in range(len(card))]),
                               pd.DataFrame({"id": []}))
    assert (counted["check"], counted["check-support"]) == (2, 0)
    assert (counted["mechanism"], counted["mechanism-support"], counted["ours"]) == (2, 1, 1)


def test_the_book_tallies_count_every_change_row_once(
        book_card: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]) -> None:
    _, _, card = book_card
    found = views.tally(card)
    changes = card[card["kind"] != "cited value"]
    assert sum(sum(g.values()) for g in found.values()) == len(changes)
    assert set(found["checks"]) <= {verdicts.PASSED, verdicts.FAILED}
    # a reading of ours holds, fails, or is left open; it never confirms or contradicts anyone
    assert set(found["our readings"]) <= {verdicts.HOLDS, verdicts.FAILS, verdicts.INCONCLUSIVE,
                                          verdicts.NO_CHANGE}
    for group in ("claims", "mechanism rows"):
        assert not set(found[group]) & {verdicts.PASSED, verdicts.FAILED, verdicts.HOLDS,
                                        verdicts.FAILS}


def test_headlines_take_the_largest_cited_changes_judged_from_an_interval() -> None:
    """Claims: judged from an interval (not exact), the largest cited change in margins first,
    each interval of ours once, at most three; a check or a reading of ours never stands
    there. Mechanism rows: the one beside a chosen claim first, then another quantity."""
    card = pd.DataFrame([
        _row(row="small", cited_change=-5.0, our_change=-4, our_low=-9, our_high=1),
        _row(row="big", cited_change=-40.0, our_change=-20, our_low=-50, our_high=10),
        _row(row="twice", measurement="t2", cited_change=-30.0, our_change=-20, our_low=-50,
             our_high=10),  # the same interval judged against another posting
        _row(row="exact", cited_change=-80.0, our_change=-80, our_low=-80, our_high=-80,
             our_unit="bytes", margin=0.0),
        _row(row="mid", cited_change=12.0, our_change=3, our_low=-2, our_high=8),
        _row(row="next", cited_change=-8.0, our_change=3, our_low=-2, our_high=8.5),
        _row(row="big", kind="mechanism", row_kind=verdicts.MECHANISM, expected_sign=-1,
             column="mechanism: instructions (icount)", our_change=-3, our_low=-3.1,
             our_high=-2.9, margin=0.5, verdict=verdicts.DIRECTION),
        _row(row="other", kind="mechanism", row_kind=verdicts.MECHANISM, expected_sign=-1,
             column="mechanism: contentions", our_change=-60, our_low=-70, our_high=-50,
             margin=1.0, verdict=verdicts.DIRECTION),
        _row(row="other", kind="mechanism", row_kind=verdicts.MECHANISM, expected_sign=-1,
             column="mechanism: instructions (icount)", our_change=-9, our_low=-9.1,
             our_high=-8.9, margin=0.5, verdict=verdicts.DIRECTION),
        _row(row="big", kind="mechanism", row_kind=verdicts.MECHANISM, ours_reading=True,
             expected_sign=0, column="mechanism: acquisitions", our_change=0, our_low=-1,
             our_high=1, verdict=verdicts.HOLDS),
        _row(row="big", kind="check", row_kind=verdicts.CHECK, column="check: call sites",
             verdict=verdicts.PASSED),
    ])
    rows = headlines.headlines(card, "x", {("x", "t"): "time", ("x", "t2"): "time, v2"})
    claims = rows[rows["row_kind"] == verdicts.CLAIM]
    assert list(claims["row"]) == ["big", "mid", "next"]
    mechanisms = rows[rows["row_kind"] == verdicts.MECHANISM]
    assert list(zip(mechanisms["row"], mechanisms["column"], strict=True)) == [
        ("big", "mechanism: instructions (icount)"), ("other", "mechanism: contentions")]
    assert list(claims["label"]) == ["time: big", "time: mid", "time: next"]
    assert claims["detail"].iloc[0] == "cited -40.0 % · ours -20.0 % (-50.0 to +10.0)"
    assert mechanisms["label"].iloc[0] == "instructions (icount): big"
    assert mechanisms["detail"].iloc[0] == "should fall · ours -3.0 % (-3.1 to -2.9)"
    assert headlines.headlines(card, "x", {}, claims=1, mechanisms=1)["row"].tolist() == [
        "big", "big"]


def test_a_caveat_says_what_a_verdict_rests_on() -> None:
    reason = ("our 95 % CI +18.4 to +91.4 % (n=4+4) lies beyond the margin; 3 of 8 boots had "
              "clock trouble (1 watchdog timeout); without them inconclusive here (-5.7 to "
              "+170.6 %, n=3+2); it rests on one boot: without baseline boot 1 it is "
              "inconclusive here (-4.3 to +126.2 %)")
    assert headlines.caveat(reason, verdicts.DIRECTION) == (
        "it rests on one boot; without the boots whose clock was in doubt: inconclusive here")
    same = ("x; 2 of 10 boots had clock trouble (TSC marked unstable); without them direction "
            "confirmed (1 to 2 %)")
    assert headlines.caveat(same, verdicts.DIRECTION) == ""
    assert headlines.caveat("x; 3 of 6 boots had clock trouble (1 watchdog timeout); too few "
                            "boots are left to judge without them", verdicts.DIRECTION) == ""


def test_every_chapter_has_a_panel_of_readable_headlines(
        book_card: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]) -> None:
    """On the committed card: each chapter's panel holds claims judged from an interval and
    mechanism rows of the author's explanation, labelled in words (no "+ NA", no perf
    prefix), and its figure is PANEL_WIDTH wide with no text under FONT_SIZE or beyond it."""
    frame, _, card = book_card
    names = headlines.quantity_names(frame)
    for c in chapters.book():
        rows = headlines.headlines(card, c.name, names)
        claims = rows[rows["row_kind"] == verdicts.CLAIM]
        mechanisms = rows[rows["row_kind"] == verdicts.MECHANISM]
        assert 0 < len(claims) <= headlines.HEADLINE_CLAIMS, c.name
        assert len(mechanisms) <= headlines.HEADLINE_MECHANISMS, c.name
        assert set(rows["row_kind"]) <= {verdicts.CLAIM, verdicts.MECHANISM}
        assert not rows["ours_reading"].astype(bool).any()
        for label in rows["label"]:
            assert "+ NA" not in label and "[k]" not in label and "CONFIG_" not in label
        assert all(d.startswith("cited ") for d in claims["detail"])
        assert all(d.startswith("should ") for d in mechanisms["detail"])
        for width in (panels.PANEL_WIDTH, panels.PHONE_PANEL_WIDTH):
            fig = panels.headline_panel(rows, width)
            assert fig.get_size_inches()[0] == pytest.approx(width)
            fig.set_dpi(300)  # text as a browser sets it: hinting at 100 dpi widens it
            renderer = fig.canvas.get_renderer()
            for text in fig.axes[0].texts:
                assert text.get_fontsize() >= figures.FONT_SIZE
                box = text.get_window_extent(renderer)
                assert box.x0 >= -1 and box.x1 <= width * fig.dpi + 1, text.get_text()
            verdict_texts = [t.get_text() for t in fig.axes[0].texts]
            for verdict in rows["verdict"]:
                assert any(t.startswith(verdict) for t in verdict_texts)
