"""The workqueue chapter's experiment: variants, cited ids per variant, modules in the guest."""

from __future__ import annotations

from pathlib import Path

from lab import chapters
from lab.pipeline import boot, experiment, kconfig, publish

CH = chapters.get("workqueue")


def test_lock_statistics_variants_differ_from_the_timed_ones_by_their_fragment() -> None:
    exp = experiment.load(CH)
    for name, v in exp.variants.items():
        assert ("workqueue-lockstat" in v.fragments) == name.startswith("lockstat-")
        assert "-numa" in v.machine.args()
    assert exp.build_name("lockstat-baseline") != exp.build_name("baseline")


def test_fragments_ask_for_the_module_and_lock_stat() -> None:
    frag = kconfig.parse(CH.fragment("workqueue").read_text())
    assert frag["CONFIG_TEST_WORKQUEUE"] == "m" and frag["CONFIG_MODULES"] == "y"
    assert frag["CONFIG_NUMA"] == "y" and int(frag["CONFIG_NR_CPUS"]) >= 8
    assert "CONFIG_LOCK_STAT" not in frag
    lock = kconfig.parse(CH.fragment("workqueue-lockstat").read_text())
    assert lock["CONFIG_LOCK_STAT"] == "y"


def test_only_timed_variants_carry_a_cited_id() -> None:
    exp = experiment.load(CH)
    cited = exp.cited()
    for variant in exp.variants:
        got = publish.cited_id(cited, "batch", "cache.items_per_sec", variant)
        want = {"baseline": "workqueue-tput-cache-baseline",
                "patched": "workqueue-tput-cache-patched"}.get(variant, "")
        assert got == want
    assert publish.cited_id(cited, "batch", "cache.enq_p99_ns", "baseline") == ""


def test_tidy_rows_take_a_per_variant_cited_id() -> None:
    records = [{"variant": v, "rep": 1, "accel": "tcg",
                "rows": {"batch": [["cpu.items_per_sec", 1.0]]}}
               for v in ("baseline", "lockstat-baseline")]
    cited = {("batch", "cpu.items_per_sec"): {"baseline": "workqueue-tput-cpu-baseline"}}
    rows = publish.tidy_rows("workqueue", records, cited)
    assert [r["cited_id"] for r in rows] == ["workqueue-tput-cpu-baseline", ""]
    plain = publish.tidy_rows("workqueue", records, {("batch", "cpu.items_per_sec"): "c-1"})
    assert [r["cited_id"] for r in plain] == ["c-1", "c-1"]


def test_job_dir_carries_the_variants_modules(tmp_path: Path) -> None:
    exp = experiment.load(CH)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ko = tmp_path / "modules" / "lib" / "modules" / "7.2.13" / "kernel" / "lib"
    ko.mkdir(parents=True)
    (ko / "test_workqueue.ko").write_bytes(b"\x7fELF")
    variant = next(iter(exp.variants))
    boot.job_dir(tmp_path / "job", exp, variant, bin_dir, tmp_path / "modules")
    assert (tmp_path / "job" / "modules" / "lib" / "modules" / "7.2.13" / "kernel" / "lib"
            / "test_workqueue.ko").read_bytes() == b"\x7fELF"
    assert sorted(p.name for p in (tmp_path / "job" / "workloads").iterdir()) == [
        "batch.sh", "topology.sh", "wait.sh"]
    assert (tmp_path / "job" / "lib.sh").is_file()  # the guest library, beside guest-init.sh
    boot.job_dir(tmp_path / "job2", exp, variant, bin_dir, tmp_path / "absent")
    assert not (tmp_path / "job2" / "modules").exists()
