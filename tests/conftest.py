"""Test tiers, assigned by what a test needs rather than by a list of names, so a new test lands
in its tier by the fixtures it takes. ``make test-fast`` runs everything outside them; ``make
test`` runs all.

* ``boot``: runs ``make reproduce``, which builds and boots real kernels or fails on its way
  there (``runs_tmp``, a results directory of its own; ``developer``, the unprivileged user's
  checkout; ``slurm``, a one-node SLURM cluster);
* ``book``: executes every notebook and builds the whole book (``built``);
* ``browser``: loads that book in Chromium (``report``);
* ``pdf``: builds the PDF with TeX (its module's ``pytestmark``).
"""

from __future__ import annotations

import pytest

TIERS = {"runs_tmp": "boot", "developer": "boot", "slurm": "boot", "built": "book",
         "report": "browser"}
"""Fixture -> the tier of every test that uses it, directly or through another fixture."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture, tier in TIERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(tier)
