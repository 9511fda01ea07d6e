"""Reading measured runs: sha256 verification, and the scorecard join."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from lab import cited, runs, scorecard

ENV = ("TCG on AMD EPYC (2 host cores), QEMU 7.2.22, gcc, "
       "Linux 7.2.13 (debian-linux-source:7.2.13-1), config 833ba6bd4e67")


def make_run(base: Path, chapter: str = "workqueue", run_id: str = "20261122T0000Z-x") -> Path:
    run = base / chapter / run_id
    run.mkdir(parents=True)
    (run / "results.csv").write_text(
        "variant,rep,metric,value,cited_id,verdict\n"
        "baseline,1,throughput,100,workqueue-tput-cache-baseline,\n"
        "baseline,2,throughput,130,workqueue-tput-cache-baseline,direction only\n"
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
        "verdict": "direction only",
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
    assert (row["ours"], row["verdict"]) == ("1,234,567", runs.UNJUDGED)


def test_a_chapter_without_runs_is_empty(tmp_path: Path) -> None:
    assert runs.load_chapter_runs("qpw", tmp_path) == []
    assert runs.measured_for_cited(tmp_path).empty


def test_scorecard_lists_every_cited_entry(tmp_path: Path) -> None:
    frame = cited.to_frame(cited.load_all())
    make_run(tmp_path)
    card = scorecard.build(frame, runs.measured_for_cited(tmp_path))
    assert len(card) == len(frame)
    row = card.set_index("id").loc["workqueue-tput-cache-baseline"]
    assert (row["ours"], row["verdict"]) == ("mean 115 (n=2, 100 to 130)", "direction only")
    others = card[card["id"] != "workqueue-tput-cache-baseline"]
    assert set(others["verdict"]) == {scorecard.NOT_YET}
    assert set(others["ours"]) == {"—"}
    assert isinstance(card, pd.DataFrame)
