"""The workqueue chapter's experiment: variants, cited ids per variant, modules in the guest."""

from __future__ import annotations

from pathlib import Path

import yaml

from lab import ROOT, collect, experiment, kconfig, pipeline

EXP = ROOT / "experiments" / "workqueue.yaml"


def test_experiment_loads_with_timed_and_lock_statistics_variants() -> None:
    exp = experiment.load(EXP)
    assert set(exp.variants) == {"baseline", "patched", "lockstat-baseline",
                                 "lockstat-patched"}
    for name, v in exp.variants.items():
        assert v.machine.cpus == 8 and v.machine.sockets == 2 and v.machine.threads == 2
        assert ("workqueue-lockstat" in v.fragments) == name.startswith("lockstat-")
    assert exp.variants["lockstat-baseline"].tree == "baseline"
    assert "-numa" in exp.variants["baseline"].machine.args()


def test_fragments_ask_for_the_module_and_lock_stat() -> None:
    frag = kconfig.parse(kconfig.fragment_path("workqueue").read_text())
    assert frag["CONFIG_TEST_WORKQUEUE"] == "m" and frag["CONFIG_MODULES"] == "y"
    assert frag["CONFIG_NUMA"] == "y" and int(frag["CONFIG_NR_CPUS"]) >= 8
    assert "CONFIG_LOCK_STAT" not in frag
    lock = kconfig.parse(kconfig.fragment_path("workqueue-lockstat").read_text())
    assert lock["CONFIG_LOCK_STAT"] == "y"


def test_every_cited_id_exists_and_only_timed_variants_carry_one() -> None:
    exp = experiment.load(EXP)
    known = {e["id"] for e in yaml.safe_load(
        (ROOT / "data" / "cited" / "workqueue.yaml").read_text())["entries"]}
    cited = {(w["name"], m): cid for w in exp.workloads for m, cid in
             (w.get("cited") or {}).items()}
    ids = {i for c in cited.values() for i in (c.values() if isinstance(c, dict) else [c])}
    assert ids <= known and len(ids) == 12
    for variant in exp.variants:
        got = collect.cited_id(cited, "batch", "cache.items_per_sec", variant)
        want = {"baseline": "workqueue-tput-cache-baseline",
                "patched": "workqueue-tput-cache-patched"}.get(variant, "")
        assert got == want
    assert collect.cited_id(cited, "batch", "cache.enq_p99_ns", "baseline") == ""


def test_tidy_rows_take_a_per_variant_cited_id() -> None:
    records = [{"variant": v, "rep": 1, "accel": "tcg",
                "rows": {"batch": [["cpu.items_per_sec", 1.0]]}}
               for v in ("baseline", "lockstat-baseline")]
    cited = {("batch", "cpu.items_per_sec"): {"baseline": "workqueue-tput-cpu-baseline"}}
    rows = collect.tidy_rows("workqueue", records, cited)
    assert [r["cited_id"] for r in rows] == ["workqueue-tput-cpu-baseline", ""]
    plain = collect.tidy_rows("workqueue", records, {("batch", "cpu.items_per_sec"): "c-1"})
    assert [r["cited_id"] for r in plain] == ["c-1", "c-1"]


def test_job_dir_carries_the_variants_modules(tmp_path: Path) -> None:
    exp = experiment.load(EXP)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ko = tmp_path / "modules" / "lib" / "modules" / "7.2.13" / "kernel" / "lib"
    ko.mkdir(parents=True)
    (ko / "test_workqueue.ko").write_bytes(b"\x7fELF")
    pipeline._job_dir(tmp_path / "job", exp, bin_dir, tmp_path / "modules")
    assert (tmp_path / "job" / "modules" / "lib" / "modules" / "7.2.13" / "kernel" / "lib"
            / "test_workqueue.ko").read_bytes() == b"\x7fELF"
    assert sorted(p.name for p in (tmp_path / "job" / "workloads").iterdir()) == [
        "batch.sh", "topology.sh", "wait.sh"]
    pipeline._job_dir(tmp_path / "job2", exp, bin_dir, tmp_path / "absent")
    assert not (tmp_path / "job2" / "modules").exists()
