"""Read what the pipeline measured: ``data/runs/<chapter>/<run-id>/{manifest.json,results.csv}``.

Only the pipeline writes these directories (``lab.collect``); this module only reads them, and
checks each file against the sha256 its manifest records, so an edited measurement is refused
rather than plotted.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lab import DATA

RUNS_DIR = DATA / "runs"
TEXT_COLUMNS = {"cited_id": str, "verdict": str, "variant": str}


class RunDataError(ValueError):
    """A run directory is incomplete or was edited after the pipeline wrote it."""


@dataclass(frozen=True)
class Run:
    """One pipeline run: its manifest and its tidy results."""

    chapter: str
    run_id: str
    path: Path
    manifest: dict
    results: pd.DataFrame


def _verify(run_dir: Path, manifest: dict) -> None:
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise RunDataError(f"{run_dir}/manifest.json lists no files with sha256. Fix: re-run "
                           "the pipeline for this chapter; never edit run directories by hand.")
    for name, expected in files.items():
        path = run_dir / name
        if not path.is_file():
            raise RunDataError(f"{path}: listed in manifest.json but missing. Fix: restore it "
                               "from git (git checkout -- data/runs) or re-run the pipeline.")
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != expected:
            raise RunDataError(f"{path}: sha256 differs from manifest.json; measured data must "
                               "not be edited. Fix: git checkout -- that file, or re-run.")


def load_run(run_dir: Path) -> Run:
    """Load and verify one run directory."""
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.is_file():
        raise RunDataError(f"{run_dir}: no manifest.json, so this is not a complete run. Fix: "
                           "remove the directory or re-run the pipeline.")
    manifest = json.loads(manifest_path.read_text())
    _verify(run_dir, manifest)
    # Text columns stay text: "100" as measured must not come back as "100.0".
    results = pd.read_csv(run_dir / "results.csv", dtype=TEXT_COLUMNS)
    return Run(chapter=run_dir.parent.name, run_id=run_dir.name, path=run_dir,
               manifest=manifest, results=results)


def load_chapter_runs(chapter: str, runs_dir: Path = RUNS_DIR) -> list[Run]:
    """Every complete run of a chapter, oldest first (run ids sort by date)."""
    base = runs_dir / chapter
    if not base.is_dir():
        return []
    return [load_run(d) for d in sorted(base.iterdir()) if d.is_dir()]


def environment_summary(manifest: dict) -> str:
    """One line naming where a run was measured: accelerator, host CPU, QEMU, compiler, kernel.

    Every figure that shows a measured number shows this line, because a number from TCG and
    a number from bare metal are different claims.
    """
    variants = manifest.get("variants", {})
    accels = sorted({a for v in variants.values() for a in v.get("accel_used", [])})
    compilers = sorted({v.get("compiler", "") for v in variants.values()} - {""})
    configs = sorted({v.get("config_sha256", "")[:12] for v in variants.values()} - {""})
    host = manifest.get("host", {})
    qemu = str(manifest.get("qemu", "")).split(" (")[0].replace("QEMU emulator version ", "")
    base = manifest.get("base", {})
    return (f"{'/'.join(a.upper() for a in accels) or 'unknown accelerator'} on "
            f"{host.get('cpu_model', 'unknown CPU')} ({host.get('cores', '?')} host cores), "
            f"QEMU {qemu or '?'}, {', '.join(compilers) or '?'}, "
            f"Linux {base.get('version', '?')} ({base.get('origin', '?')}), "
            f"config {', '.join(configs) or '?'}")


UNJUDGED = "measured, not yet judged"
"""Verdict of a measured number whose experiment has not yet compared it with the cited one."""


def describe(values: pd.Series) -> str:
    """Our value as the scorecard shows it: the mean, and the spread across repetitions.

    A single repetition is shown alone; several show their count and range, because under
    emulation the run-to-run spread is often as large as the effect.
    """
    if len(values) == 1:
        return _number(values.iloc[0])
    return (f"mean {_number(values.mean())} (n={len(values)}, "
            f"{_number(values.min())} to {_number(values.max())})")


def _number(value: float) -> str:
    """Thousands separators for large or whole numbers, four significant digits otherwise."""
    return f"{value:,.0f}" if abs(value) >= 1000 or float(value).is_integer() else f"{value:.4g}"


def measured_for_cited(runs_dir: Path = RUNS_DIR) -> pd.DataFrame:
    """Measured values that a run marks as re-measuring a cited entry (``cited_id`` column).

    Returns one row per cited id: our value over the run's repetitions, the run's verdict if it
    gives one, and its environment; the newest run wins where several measure the same entry.
    """
    rows = []
    for chapter_dir in sorted(p for p in runs_dir.glob("*") if p.is_dir()):
        for run in load_chapter_runs(chapter_dir.name, runs_dir):
            if "cited_id" not in run.results.columns:
                continue
            env = environment_summary(run.manifest)
            measured = run.results.dropna(subset=["cited_id"])
            for cited_id, group in measured.groupby("cited_id", sort=False):
                verdicts = group["verdict"].dropna() if "verdict" in group else pd.Series()
                rows.append({
                    "id": cited_id, "ours": describe(group["value"].astype(float)),
                    "verdict": verdicts.iloc[-1] if len(verdicts) else UNJUDGED,
                    "run_id": run.run_id, "environment": env,
                })
    frame = pd.DataFrame(rows, columns=["id", "ours", "verdict", "run_id", "environment"])
    return frame.drop_duplicates("id", keep="last")
