"""The cost model of re-measuring the book (lab/analysis/costs.py) on runs made up for it, and
the view of one image on two machines (lab/analysis/machines.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from lab.analysis import costs, machines
from lab.analysis.runs import Run

AMD = {"cpu_model": "AMD EPYC", "cores": 2, "kernel": "6.18", "machine": "x86_64"}


def _run(chapter: str, run_id: str, variants: dict[str, tuple[str, float, list[float]]],
         setup: dict[str, float] | None = None, host: dict | None = None,
         rows: list[tuple[str, str, str, float]] = ()) -> Run:
    """A run whose variants are (commit, build seconds, boot seconds) on one configuration."""
    manifest = {"variants": {
        name: {"commit": commit * 40, "config_sha256": "c" * 64, "compiler": "gcc",
               "build": {"variant": name, "build_seconds": built, "bzImage_sha256": commit * 64},
               "boot_to_result_seconds": boots}
        for name, (commit, built, boots) in variants.items()},
        "experiment": {"scripts": {"w": "s" * 64}}, "host": host or AMD}
    if setup:
        manifest["setup_seconds"] = setup
    results = pd.DataFrame(rows, columns=["variant", "workload", "metric", "value"])
    return Run(chapter, run_id, Path("/nonexistent"), manifest, results)


@pytest.fixture
def jobs() -> costs.Jobs:
    """Two chapters: one directory with a cold (600 s) and a warm (20 s) build whose boots
    take 100 s; one with a single 300 s build and 50 s of boots; setup 60 s."""
    a = _run("a", "r1", {"base": ("1", 600.0, [40.0, 40.0]), "patch": ("2", 20.0, [10.0, 10.0])},
             setup={"root": 50.0, "source": 10.0})
    b = _run("b", "r2", {"base": ("3", 300.0, [50.0])})
    older = _run("b", "r0", {"base": ("3", 300.0, [1.0])})
    return costs.book_jobs({"a": [a], "b": [b]}, [older, a, b])


def test_one_machine_pays_each_directory_cold_once(jobs: costs.Jobs) -> None:
    assert len(jobs.builds) == 3 and jobs.setup == 60.0 and jobs.setup_from == "a/r1"
    # setup, 600 cold + 20 warm, 300 cold, boots 100 + 50
    assert costs.single_machine_seconds(jobs) == 60 + 620 + 300 + 150
    assert costs.simulate(jobs, 1) == costs.single_machine_seconds(jobs)


def test_machines_shorten_the_book_down_to_its_critical_path(jobs: costs.Jobs) -> None:
    length, path = costs.critical_path(jobs)
    # setup, the slowest cold build chapter a waits for, its boots
    assert length == 60 + 600 + 100
    assert path == ("setup", "build a/base", "4 boots of a/r1")
    two = costs.simulate(jobs, 2)
    assert length <= two < costs.single_machine_seconds(jobs)
    # on three machines a's second build is cold on its own machine (600, not 20): no better
    assert costs.simulate(jobs, 8) == length


def test_a_build_a_later_run_found_cached_keeps_its_cold_time() -> None:
    """A run that found its kernel built records the time of its last make; the directory's
    cold time is the longest any run recorded."""
    cold = _run("a", "r1", {"base": ("1", 900.0, [1.0])})
    cached = _run("a", "r2", {"base": ("1", 12.0, [1.0]), "patch": ("2", 11.0, [1.0])})
    jobs = costs.book_jobs({"a": [cached]}, [cold, cached])
    assert jobs.cold_and_warm() == {"a/" + "c" * 12 + "-gcc": (900.0, 11.0)}
    assert [jobs.seconds(k) for k in sorted(jobs.builds)] == [900.0, 11.0]


def test_one_image_on_two_machines_is_compared_metric_by_metric() -> None:
    rows_a = [("base", "w", "count", 10.0), ("base", "w", "count", 10.0),
              ("base", "w", "time", 100.0), ("base", "w", "ran", 1.0)]
    rows_b = [("base", "w", "count", 10.0), ("base", "w", "time", 150.0),
              ("base", "w", "ran", 1.0)]
    a = _run("a", "r1", {"base": ("1", 1.0, [1.0])}, rows=rows_a)
    b = _run("a", "r2", {"base": ("1", 1.0, [1.0])}, rows=rows_b,
             host={**AMD, "cpu_model": "Intel Xeon"})
    same_host = _run("a", "r3", {"base": ("1", 1.0, [1.0])}, rows=rows_b)
    frame = machines.across([a, b])
    assert set(frame["metric"]) == {"count", "time"}  # "ran" is bookkeeping
    assert frame.set_index("metric")["ratio"].to_dict() == {"count": 1.0, "time": 1.5}
    (row,) = machines.summary(frame).to_dict("records")
    assert (row["metrics"], row["unchanged"], row["within"]) == (2, 1, 1)
    assert row["largest move"] == pytest.approx(0.5)
    # runs of one machine are no pair; another image is no pair either
    assert machines.across([a, same_host]).empty
    other = _run("a", "r4", {"base": ("9", 1.0, [1.0])}, rows=rows_b,
                 host={**AMD, "cpu_model": "Intel Xeon"})
    assert machines.across([a, other]).empty
