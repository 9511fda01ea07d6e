"""Parsing is a stage of its own: committed raw output parses again into the same rows.

``make reparse`` derives a new run from a committed one with today's parsers; these tests run
it over every committed run (into a temporary results directory, never data/) and check that it
reproduces each run's results.csv byte for byte, names its parent, and refuses an edited run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lab.analysis import runs
from lab.command import StageError
from lab.pipeline import cli, publish, reparse

COMMITTED = sorted(p for p in runs.RUNS_DIR.glob("*/*") if (p / "manifest.json").is_file())


@pytest.mark.parametrize("run_dir", COMMITTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_committed_run_reparses_to_its_own_results(run_dir: Path, tmp_path: Path,
                                                         data_unchanged) -> None:
    new = reparse.reparse(run_dir, tmp_path)
    assert new == tmp_path / run_dir.parent.name / f"{run_dir.name}-reparse1"
    assert (new / "results.csv").read_bytes() == (run_dir / "results.csv").read_bytes()
    publish.verify_run(new)
    manifest = json.loads((new / "manifest.json").read_text())
    parent = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["parent"] == {"run_id": run_dir.name,
                                  "results_sha256": parent["files"]["results.csv"]}
    assert manifest["run_id"] == new.name and manifest["reparsed"]["parsers"]
    for rel, digest in parent["files"].items():
        assert manifest["files"][rel] == digest, f"{rel} was not carried over byte for byte"
    data_unchanged()


def test_a_second_reparse_is_a_new_run_beside_the_first(tmp_path: Path) -> None:
    """Neither re-parse replaces anything (shown on the smoke chapter's run, the smallest: the
    parametrized test above re-parses every committed run once)."""
    smoke = next(p for p in COMMITTED if p.parent.name == "smoke")
    first = reparse.reparse(smoke, tmp_path)
    results = (first / "results.csv").read_bytes()
    second = reparse.reparse(smoke, tmp_path)
    assert (first.name, second.name) == (f"{smoke.name}-reparse1", f"{smoke.name}-reparse2")
    assert (first / "results.csv").read_bytes() == results == (second / "results.csv").read_bytes()


def test_the_reparsed_run_takes_its_parents_place_in_time(tmp_path: Path) -> None:
    names = sorted([COMMITTED[0].name, f"{COMMITTED[0].name}-reparse1", "29991231T000000Z-x"])
    assert names[1] == f"{COMMITTED[0].name}-reparse1"


def test_an_edited_run_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "runs" / "smoke" / "edited"
    smoke = next(p for p in COMMITTED if p.parent.name == "smoke")
    shutil.copytree(smoke, copy)
    (copy / "results.csv").write_text((copy / "results.csv").read_text().replace("1.0", "2.0"))
    with pytest.raises(runs.RunDataError, match=r"sha256 differs from manifest\.json"):
        reparse.reparse(copy, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_make_reparse_names_a_missing_run(capsys) -> None:
    status = cli.main(["reparse", "--run", "smoke/no-such-run"])
    err = capsys.readouterr().err
    assert status == 1 and "RUN=smoke/no-such-run: no run directory" in err
    assert "Traceback" not in err


def test_a_parser_that_rejects_raw_output_fails_the_reparse(tmp_path: Path) -> None:
    smoke = next(p for p in COMMITTED if p.parent.name == "smoke")
    copy = tmp_path / "runs" / "smoke" / smoke.name
    shutil.copytree(smoke, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    raw = next(r for r in manifest["files"] if r.endswith("getpid.out.gz"))
    cut = publish.gzip_bytes(b"iterations=100000\n")
    (copy / raw).write_bytes(cut)
    manifest["files"][raw] = publish.sha256_bytes(cut)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(StageError, match="truncated"):
        reparse.reparse(copy, tmp_path / "out")
