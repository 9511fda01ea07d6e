"""Fixtures of the pipeline tests: a way to run ``make reproduce`` and a fingerprint of data/.

Pipeline-level tests run the real workflow (real toolchain root, real 7.2.13 tree, real
QEMU) against the caches in ``${XDG_CACHE_HOME:-~/.cache}/kernel-book``, so only the first
run on a machine pays for the root and the cold build. Successful test runs publish into a
temporary results directory (``KERNEL_BOOK_RUNS``); failing ones target the real ``data/``,
which each of them checks is left exactly as it was.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from lab import DATA, ROOT

FIXTURES = Path(__file__).parent / "fixtures"
EXPERIMENTS = Path(__file__).parent / "experiments"


def data_fingerprint() -> dict[str, str]:
    """Every file under data/ with its sha256: equal fingerprints mean data/ is unchanged."""
    return {str(p.relative_to(DATA)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(DATA.rglob("*")) if p.is_file()}


def make_reproduce(*args: str, env: dict[str, str] | None = None,
                   timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    """Run ``make reproduce ARGS`` in the repository; output is stdout+stderr combined."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("MAKEFLAGS", None)
    return subprocess.run(["make", "--no-print-directory", "reproduce", *args], cwd=ROOT,
                          env=full_env, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=timeout, check=False)


@pytest.fixture
def data_unchanged() -> Callable[[], None]:
    """Call the returned function at the end of a test to assert data/ was not touched."""
    before = data_fingerprint()

    def check() -> None:
        assert data_fingerprint() == before, "data/ changed during a failing run"
    return check


@pytest.fixture
def runs_tmp(tmp_path: Path) -> dict[str, str]:
    """Environment that sends published runs to a temporary directory."""
    return {"KERNEL_BOOK_RUNS": str(tmp_path / "runs")}
