"""The key=value parser on the smoke workload's real output."""

from __future__ import annotations

import pytest

from lab.command import StageError
from lab.parse import PARSERS, keyvalue

from .conftest import FIXTURES


def test_real_output_parses_into_numbers() -> None:
    rows = dict(keyvalue.parse((FIXTURES / "getpid.out").read_text(), "getpid.out"))
    assert rows["iterations"] == 100000 and rows["marker"] == 1
    assert rows["ns_per_call"] == pytest.approx(rows["ns_total"] / rows["iterations"], 1e-3)
    assert PARSERS["keyvalue"] is keyvalue.parse


def test_output_without_its_end_line_is_truncated() -> None:
    text = (FIXTURES / "getpid.out").read_text().replace("end=ok\n", "")
    with pytest.raises(StageError, match=r"getpid.out: truncated guest output: the last line"):
        keyvalue.parse(text, "getpid.out")
    with pytest.raises(StageError, match=r"the last line is '\(empty\)'"):
        keyvalue.parse("", "getpid.out")


def test_non_numeric_value_is_refused() -> None:
    with pytest.raises(StageError, match="'fast' is not a number"):
        keyvalue.parse("speed=fast\nend=ok\n", "x")


def test_guest_info_fields_are_strings() -> None:
    info = keyvalue.fields((FIXTURES / "guest-info.txt").read_text())
    assert info["uname"] == "7.2.13" and info["nproc"] == "1"
    assert "rootfstype=9p" in info["cmdline"]
