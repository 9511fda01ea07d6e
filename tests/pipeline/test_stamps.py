"""The typed stamps stages hand each other: what is written reads back as it was, unset
optional fields stay out of the file, and a stamp of another pipeline version is refused with
its path and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.command import StageError
from lab.pipeline.stamps import BuildStamp, ParsedStamp, ToolsStamp

BUILT = {"variant": "baseline", "artifacts": "/c/work/build/x/baseline", "commit": "c0ffee",
         "compiler": "gcc", "build_dir": "/c/build/k", "targets": ["bzImage"],
         "config_sha256": "ab" * 32, "bzImage_bytes": 1885184, "vmlinux_bytes": 13510928}


def test_a_stamp_reads_back_as_written_without_its_unset_fields(tmp_path: Path) -> None:
    path = tmp_path / "build.json"
    BuildStamp(**BUILT).write(path)
    assert json.loads(path.read_text()) == BUILT  # no failed/expected/error_lines: null
    assert BuildStamp.read(path) == BuildStamp(**BUILT)
    tools = ToolsStamp(variant="v", bin="/b", programs={}, commit="c")
    tools.write(tmp_path / "tools.json")
    assert set(json.loads((tmp_path / "tools.json").read_text())) == {
        "variant", "bin", "programs", "commit"}
    assert ToolsStamp.read(tmp_path / "tools.json").cc is None


def test_rows_survive_the_round_trip_as_pairs(tmp_path: Path) -> None:
    parsed = ParsedStamp(variant="v", rep=2, rows={"w": [["m", 1.5]]}, guest={"cpus": "2"},
                         boot="/c/boot/v/rep2")
    parsed.write(tmp_path / "rep2.json")
    back = ParsedStamp.read(tmp_path / "rep2.json")
    assert back.rows == {"w": [["m", 1.5]]} and back.compare is None and back.rep == 2


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.pop("commit"), r"missing \['commit'\], unknown \[\]"),
    (lambda d: d.update(cc="gcc-15"), r"missing \[\], unknown \['cc'\]"),
])
def test_a_stamp_of_another_pipeline_is_refused_with_its_path(tmp_path: Path, change,
                                                               message: str) -> None:
    data = dict(BUILT)
    change(data)
    path = tmp_path / "build.json"
    path.write_text(json.dumps(data))
    with pytest.raises(StageError, match=message) as err:
        BuildStamp.read(path)
    assert str(path) in str(err.value) and "not a build stamp" in str(err.value)
    assert "delete it" in str(err.value)
