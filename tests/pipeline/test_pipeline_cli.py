"""The stage entry point: run-ids that resume, and errors without tracebacks."""

from __future__ import annotations

import json

from lab import pipeline

from .conftest import EXPERIMENTS


def _run_id(capsys, *extra: str) -> str:
    assert pipeline.main(["run-id", "--experiment", str(EXPERIMENTS / "ok.yaml"), *extra]) == 0
    return capsys.readouterr().out.strip()


def test_unfinished_run_is_resumed_and_a_changed_one_is_not(tmp_path, monkeypatch,
                                                            capsys) -> None:
    monkeypatch.setenv("KERNEL_BOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KERNEL_BOOK_RUNS", str(tmp_path / "runs"))
    first = _run_id(capsys)
    assert _run_id(capsys) == first
    pending = json.loads(pipeline.pending_file("smoketest").read_text())
    assert pending["run_id"] == first
    (tmp_path / "runs" / "smoketest" / first).mkdir(parents=True)
    assert _run_id(capsys) != first  # published: the next run is a new one


def test_stage_error_is_a_message_and_exit_status(tmp_path, capsys) -> None:
    status = pipeline.main(["run-id", "--experiment", str(tmp_path / "none.yaml")])
    err = capsys.readouterr().err
    assert status == 1 and err.startswith("error: no experiment file") and "Traceback" not in err
