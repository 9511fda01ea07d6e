"""Fixtures of the pipeline tests: a way to run ``make reproduce`` and a fingerprint of data/.

Pipeline-level tests run the real workflow (real toolchain root, real 7.2.13 tree, real
QEMU) against the caches in ``${XDG_CACHE_HOME:-~/.cache}/kernel-book``, so only the first
run on a machine pays for the root and the cold build. Every run publishes into a temporary
results directory (``KERNEL_BOOK_RUNS``), never into the repository's ``data/``, which each
test still checks is left exactly as it was. The failure chapters live in ``chapters/`` beside
this file and are found through ``KERNEL_BOOK_CHAPTERS``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from lab import DATA, ROOT

FIXTURES = Path(__file__).parent / "fixtures"
TEST_CHAPTERS = Path(__file__).parent / "chapters"


def data_fingerprint() -> dict[str, str]:
    """Every file under data/ with its sha256: equal fingerprints mean data/ is unchanged."""
    return {str(p.relative_to(DATA)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(DATA.rglob("*")) if p.is_file()}


def reproduce_env(runs: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a test's ``make reproduce``: its own results directory and the
    failure chapters on the chapter search path."""
    full = {**os.environ, "KERNEL_BOOK_RUNS": str(runs),
            "KERNEL_BOOK_CHAPTERS": str(TEST_CHAPTERS), **(env or {})}
    full.pop("MAKEFLAGS", None)
    return full


def make_reproduce(runs: Path, *args: str, env: dict[str, str] | None = None,
                   timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    """Run ``make reproduce ARGS`` in the repository, publishing into ``runs``; output is
    stdout+stderr combined."""
    return subprocess.run(["make", "--no-print-directory", "reproduce", *args], cwd=ROOT,
                          env=reproduce_env(runs, env), text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=timeout, check=False)


def planned_rules(runs: Path, **config: str) -> set[str]:
    """The rules a ``make reproduce`` with ``config`` (chapters=, reps=, accel=, variants=)
    would run now: Snakemake's dry run on the pipeline's own work directory, read from the
    reasons it gives for each rule it would run."""
    from lab.pipeline import cachedir, reproduce
    a = argparse.Namespace(**{"chapters": "", "variants": "", "reps": "", "accel": "",
                              "python": sys.executable, "executor": "local", "profile": "",
                              **config})
    proc = subprocess.run(reproduce.snakemake(a, cachedir.work(), "--dry-run"), cwd=ROOT,
                          env=reproduce_env(runs), text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    if "Nothing to be done" in proc.stdout:
        return set()
    reasons = proc.stdout.split("Reasons:", 1)[1].split("This was a dry-run", 1)[0]
    return {rule.strip() for line in reasons.splitlines() if line.startswith(" " * 8)
            for rule in line.split(",")} - {""}


@pytest.fixture
def data_unchanged() -> Callable[[], None]:
    """Call the returned function at the end of a test to assert data/ was not touched."""
    before = data_fingerprint()

    def check() -> None:
        assert data_fingerprint() == before, "data/ changed during a pipeline test"
    return check


@pytest.fixture
def runs_tmp(tmp_path: Path) -> Path:
    """A temporary results directory for the runs a test publishes."""
    return tmp_path / "runs"
