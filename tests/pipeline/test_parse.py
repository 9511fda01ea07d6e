"""The shared parsers: key=value on the smoke workload's real output, and sectioned output."""

from __future__ import annotations

import pytest

from lab.command import StageError
from lab.parse import PARSERS, keyvalue, sections, units

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


CLOSED = """role=timed
ran=1
== control
ops=5
== end control
== report nop.data
 12.5%  nop  [kernel]  io_wq_submit_work
== end report nop.data
end=ok
"""


def test_sections_split_head_and_named_sections() -> None:
    split = sections.split(CLOSED, "nop.out")
    assert split.head == ["role=timed", "ran=1"]
    assert split.body == {"control": ["ops=5"],
                          "report nop.data": [" 12.5%  nop  [kernel]  io_wq_submit_work"]}
    split.require(("control",), "nop.out")
    with pytest.raises(StageError, match=r"nop.out: sections \['lock'\] missing"):
        split.require(("control", "lock"), "nop.out")
    opened = sections.split("== environment\ncpus=2\n== stress-ng a\nx\nend=ok\n", "o", False)
    assert opened.body == {"environment": ["cpus=2"], "stress-ng a": ["x"]}


@pytest.mark.parametrize(("text", "closed", "message"), [
    (CLOSED.replace("== end control\n", ""), True,
     r"nop.out:5: section 'control' is not closed before '== report nop.data'"),
    (CLOSED.replace("== end report nop.data\n", ""), True,
     r"section 'report nop.data' is not closed before end=ok"),
    (CLOSED.replace("== end control", "== end lock"), True,
     r"nop.out:5: '== end lock' closes a section that is not open \(open: 'control'\)"),
    (CLOSED.replace("== report nop.data", "== control"), True, r"'control' appears twice"),
    (CLOSED.replace("end=ok", "error=perf record failed"), True,
     r"the guest script failed: perf record failed"),
    (CLOSED.replace("end=ok\n", ""), True, r"truncated guest output"),
    ("cpus=2\n== environment\nend=ok\n", False, r"nop.out:1: text before the first section"),
])
def test_broken_sections_fail_naming_file_and_line(text: str, closed: bool,
                                                  message: str) -> None:
    with pytest.raises(StageError, match=message):
        sections.split(text, "nop.out", closed)


def test_the_sections_parser_gives_each_section_s_numbers_under_its_name() -> None:
    rows = PARSERS["sections"]("cpus=2\nmode=async\n== clock\ntsc=1\nuptime_s=1.25\n"
                               "== end clock\nend=ok\n", "clock.out")
    assert rows == [("cpus", 2.0), ("clock.tsc", 1.0), ("clock.uptime_s", 1.25)]
    with pytest.raises(StageError, match=r"clock.out: section 'clock' has no key=value numbers"):
        sections.parse("== clock\nsource=tsc\n== end clock\nend=ok\n", "clock.out")


def test_a_metric_takes_the_unit_of_the_first_pattern_that_matches() -> None:
    declared = {"*.ops_per_second": "1/s", "*.seconds": "s", "async.*": "count"}
    assert units.unit_of(declared, "async.ops_per_second") == "1/s"
    assert units.unit_of(declared, "async.seconds") == "s"
    assert units.unit_of(declared, "async.peak_workers") == "count"
    assert units.unit_of(declared, "share.io_wq_submit_work") is None
    units.check([("async.ops", 5.0)], declared, "nop.out")
    with pytest.raises(StageError, match=r"nop.out: no unit for 1 metric\(s\), e.g. "
                                         r"\['share.x'\]\. Fix: add a pattern"):
        units.check([("async.ops", 5.0), ("share.x", 1.0)], declared, "nop.out")
