"""Publishing a run: atomic, never overwriting, every file hashed in the manifest."""

from __future__ import annotations

import gzip
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lab.command import StageError
from lab.pipeline import node, publish

from .conftest import FIXTURES

SMOKE = sorted(p for p in (publish.RUNS / "smoke").iterdir() if (p / "manifest.json").is_file())
COMMITTED = sorted(publish.RUNS.glob("*/*/manifest.json"))


def _manifest() -> dict:
    """A manifest as the pipeline writes one (the newest committed smoke run's), without its
    file list, which publishing writes."""
    manifest = json.loads((SMOKE[-1] / "manifest.json").read_text())
    del manifest["files"]
    return {**manifest, "chapter": "smoketest"}


def _records(tmp_path: Path) -> list[dict]:
    rep = tmp_path / "rep1"
    (rep / "out").mkdir(parents=True)
    (rep / "console.log").write_text((FIXTURES / "console-ok.log").read_text())
    (rep / "out" / "getpid.out").write_text((FIXTURES / "getpid.out").read_text())
    return [{"dir": str(rep), "variant": "patched", "rep": 1, "accel": "tcg",
             "rows": {"getpid": [["marker", 1.0], ["ns_total", 5.0]]}}]


def _fill(tmp_path: Path):
    cfg = tmp_path / "cfg"
    cfg.write_text("CONFIG_A=y\n")
    return lambda d: publish.assemble(d, "smoketest", _records(tmp_path), {"patched": cfg},
                                      _manifest())


def test_published_run_is_complete_and_verifies(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KERNEL_BOOK_RUNS", str(tmp_path / "runs"))
    run = publish.publish("smoketest", "20261122T000000Z-tcg", _fill(tmp_path))
    publish.verify_run(run)
    manifest = json.loads((run / "manifest.json").read_text())
    assert set(manifest["files"]) == {"results.csv", "config/patched.config.gz",
                                      "raw/patched/rep1/console.log.gz",
                                      "raw/patched/rep1/getpid.out.gz"}
    assert (run / "results.csv").read_text().splitlines() == [
        "chapter,variant,rep,workload,metric,value,accel",
        "smoketest,patched,1,getpid,marker,1.0,tcg",
        "smoketest,patched,1,getpid,ns_total,5.0,tcg",
    ]
    raw = gzip.decompress((run / "raw/patched/rep1/getpid.out.gz").read_bytes()).decode()
    assert raw == (FIXTURES / "getpid.out").read_text()


def test_existing_run_is_never_overwritten(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KERNEL_BOOK_RUNS", str(tmp_path / "runs"))
    run = publish.publish("smoketest", "r1", _fill(tmp_path))
    before = (run / "manifest.json").read_bytes()
    with pytest.raises(StageError, match="already exists; runs are never overwritten"):
        publish.publish("smoketest", "r1", _fill(tmp_path))
    assert (run / "manifest.json").read_bytes() == before


def test_failed_collect_leaves_no_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KERNEL_BOOK_RUNS", str(tmp_path / "runs"))

    def fail(d: Path) -> None:
        (d / "results.csv").write_text("half")
        raise StageError("interrupted")
    with pytest.raises(StageError, match="interrupted"):
        publish.publish("smoketest", "r2", fail)
    assert list((tmp_path / "runs" / "smoketest").iterdir()) == []


def test_tampered_file_fails_verification(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KERNEL_BOOK_RUNS", str(tmp_path / "runs"))
    run = publish.publish("smoketest", "r3", _fill(tmp_path))
    (run / "results.csv").write_text("chapter\n")
    with pytest.raises(StageError, match=r"results.csv: sha256 differs"):
        publish.verify_run(run)
    (run / "extra.txt").write_text("x")
    with pytest.raises(StageError, match=r"extra \['extra.txt'\]"):
        publish.verify_run(run)


def test_gzip_is_deterministic() -> None:
    assert publish.gzip_bytes(b"abc" * 100) == publish.gzip_bytes(b"abc" * 100)


def test_run_id_sorts_by_time_and_names_the_accelerator_and_machine() -> None:
    rid = publish.new_run_id("tcg", "node07", datetime(2026, 11, 22, 3, 4, 5, tzinfo=UTC))
    assert rid == "20261122T030405Z-tcg-node07"
    assert re.fullmatch(r"\d{8}T\d{6}Z-icount-vm", publish.new_run_id("icount", "vm"))


def test_the_run_host_is_the_boots_machine_and_two_machines_are_refused() -> None:
    amd = {"name": "n1", "cpu_model": "AMD EPYC", "cores": 2, "affinity": 1, "kernel": "6",
           "machine": "x86_64", "slurm_job": "7"}
    records = [{"node": amd}, {"node": {**amd, "affinity": 2}}]
    # the job's share of the machine is not the machine's
    assert node.of_boots(records) == {k: v for k, v in amd.items() if k != "affinity"}
    with pytest.raises(StageError, match=r"2 machines \(n1, n2\).*group job"):
        node.of_boots([*records, {"node": {**amd, "name": "n2"}}])
    # boots held by two SLURM jobs name both
    assert node.of_boots([*records, {"node": {**amd, "slurm_job": "8"}}])["slurm_job"] == "7,8"
    # a run that booted nothing (build-only variants) is this machine's, in the manifest's terms
    built_only = node.of_boots([])
    assert built_only["name"] == node.name() and "affinity" not in built_only
    manifest = json.loads((SMOKE[-1] / "manifest.json").read_text())
    publish.check_manifest({**manifest, "host": built_only}, SMOKE[-1] / "manifest.json")


def test_cited_ids_are_attached_to_their_metric(tmp_path) -> None:
    rows = publish.tidy_rows("smoketest", _records(tmp_path), {("getpid", "ns_total"): "c-1"})
    assert [(r["metric"], r["cited_id"]) for r in rows] == [("marker", ""), ("ns_total", "c-1")]


def test_declared_units_give_every_row_its_unit_and_a_missing_one_is_refused(tmp_path) -> None:
    declared = {"getpid": {"marker": "flag", "ns_*": "ns"}}
    records = _records(tmp_path)
    text = publish.results_csv("smoketest", records, None, declared).decode()
    assert text.splitlines() == ["chapter,variant,rep,workload,metric,value,unit,accel",
                                 "smoketest,patched,1,getpid,marker,1.0,flag,tcg",
                                 "smoketest,patched,1,getpid,ns_total,5.0,ns,tcg"]
    # a run published before units were declared keeps its columns (reparse compares bytes)
    assert "unit" not in publish.results_csv("smoketest", records).decode()
    with pytest.raises(StageError, match=r"smoketest/patched/rep1: no unit for getpid's "
                                         r"ns_total; declare it"):
        publish.results_csv("smoketest", records, None, {"getpid": {"marker": "flag"}})


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_committed_manifest_matches_the_schema(path: Path) -> None:
    publish.check_manifest(json.loads(path.read_text()), path)


def test_a_manifest_the_schema_does_not_describe_is_never_published(tmp_path,
                                                                     monkeypatch) -> None:
    monkeypatch.setenv("KERNEL_BOOK_RUNS", str(tmp_path / "runs"))
    cfg = tmp_path / "cfg"
    cfg.write_text("CONFIG_A=y\n")
    unknown = {**_manifest(), "colour": "blue"}
    missing = {k: v for k, v in _manifest().items() if k != "base"}
    records = _records(tmp_path)
    for manifest, said in ((unknown, r"\(top\): Additional properties .*'colour'"),
                           (missing, r"\(top\): 'base' is a required property")):
        with pytest.raises(StageError, match=r"manifest\.json: does not match "
                           r"workflow/schemas/manifest\.schema\.yaml:\n  " + said):
            publish.publish("smoketest", "r4", lambda d, m=manifest: publish.assemble(
                d, "smoketest", records, {"patched": cfg}, m))
    assert list((tmp_path / "runs" / "smoketest").iterdir()) == []
