"""What every stage shares: its progress lines, its JSON stamp (what it made and where), its log,
the experiment with make's overrides, and the paths a manifest may name.

A stage reads the stamps of the stages before it (Snakemake passes their paths) and writes one
of its own; nothing else passes between stages.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lab import ROOT
from lab.command import StageError
from lab.pipeline import cachedir, experiment


@contextmanager
def stage(name: str, target: str, log: Path | None) -> Iterator[dict[str, Any]]:
    """Print start and end lines with elapsed time and log (Snakemake's benchmark files keep
    the times; these lines are for the person watching)."""
    stamp: dict[str, Any] = {}
    start = time.monotonic()
    where = f" (log: {log})" if log else ""
    print(f"[{time.strftime('%H:%M:%S')}] >> {name:<8} {target}{where}", file=sys.stderr,
          flush=True)
    try:
        yield stamp
    except StageError:
        print(f"[{time.strftime('%H:%M:%S')}] !! {name:<8} {target} failed after "
              f"{time.monotonic() - start:.1f} s{where}", file=sys.stderr, flush=True)
        raise
    print(f"[{time.strftime('%H:%M:%S')}] ok {name:<8} {target} "
          f"{time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write a stamp atomically (Snakemake sees it only when complete)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.rename(path)


def read_json(path: str | Path) -> dict[str, Any]:
    """Read a stamp written by an earlier stage."""
    return json.loads(Path(path).read_text())


def fresh_log(a: argparse.Namespace) -> Path:
    """The job's log file (Snakemake's ``log:``), emptied: a rerun does not append."""
    log = Path(a.log).resolve()
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    return log


def load_experiment(a: argparse.Namespace) -> experiment.Experiment:
    """The chapter's experiment with make's ACCEL=, REPS= and VARIANTS= applied."""
    only = [v for v in (a.variants or "").split(",") if v] or None
    return experiment.load(a.chapter, accel=a.accel or None,
                           reps=int(a.reps) if a.reps else None, only=only)




def in_repo(path: Path) -> str:
    """A path relative to the repository when it is inside it (chapters, series), else as
    given (a test chapter in a temporary directory)."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def portable(arg: str) -> str:
    """Write the cache location as ``$KB_CACHE`` so a manifest names no one's home."""
    return arg.replace(str(cachedir.cache_root()), "$KB_CACHE")


def benchmark_seconds(path: str | Path) -> float:
    """Wall-clock seconds of a job from its Snakemake ``benchmark:`` file (column ``s``)."""
    lines = Path(path).read_text().splitlines()
    header, values = lines[0].split("\t"), lines[-1].split("\t")
    return round(float(values[header.index("s")]), 1)
