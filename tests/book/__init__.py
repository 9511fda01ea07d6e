"""Tests of the book: its build, its pages in a browser, its PDF, its claims and verdicts."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(message: str) -> NoReturn:
    """Stop a test whose prerequisite (seed mails, Chromium, LaTeX) is missing: a failure in CI,
    which must have them all, and a skip with ``message`` (what to install) elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
