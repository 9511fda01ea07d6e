"""Python is pinned in time: a hashed lock made from requirements*.txt, and a stated floor."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from lab import ROOT

LOCK = ROOT / "requirements.lock"
FLOOR = "3.11.2"
"""Debian 12's python3: the oldest interpreter the book and the pipeline run on."""


def _pins(text: str) -> dict[str, str]:
    return {m[1].lower().replace("_", "-"): m[2]
            for m in re.finditer(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)", text, re.M)}


def test_lock_holds_every_pinned_requirement_at_its_version() -> None:
    locked = _pins(LOCK.read_text())
    for req in ("requirements.txt", "requirements-pipeline.txt"):
        for name, version in _pins((ROOT / req).read_text()).items():
            assert locked.get(name) == version, \
                f"{req} pins {name}=={version}, requirements.lock has {locked.get(name)}; " \
                "run `make python-lock`"


def test_every_locked_package_has_a_hash() -> None:
    entries = re.split(r"\n(?=[A-Za-z0-9])", LOCK.read_text().split("\n", 2)[2])
    assert len(entries) > 50
    for entry in entries:
        assert "--hash=sha256:" in entry, entry.splitlines()[0]


def test_floor_is_stated_in_pyproject_and_readme() -> None:
    assert f'requires-python = ">={FLOOR}"' in (ROOT / "pyproject.toml").read_text()
    assert FLOOR in (ROOT / "README.md").read_text()


def test_makefile_refuses_an_interpreter_below_the_floor(tmp_path: Path) -> None:
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\n"
                    "case \"$*\" in *version_info*) exit 1;; esac\n"
                    "echo 'Python 3.11.1'\n")
    fake.chmod(0o755)
    proc = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "venv",
                           f"PYTHON={fake}", f"VENV={tmp_path / 'venv'}"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert f"the book needs Python {FLOOR} or newer" in proc.stdout + proc.stderr
    assert not (tmp_path / "venv").exists()
