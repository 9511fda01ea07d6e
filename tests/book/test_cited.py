"""The cited-number files: schema, value parsing, and faithfulness to the seed mails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from lab import chapters
from lab.analysis import cited
from tests.book.conftest import ARCHIVE_VARIABLES

BOOK = [c.name for c in chapters.book()]

GOOD_ENTRY = {
    "id": "workqueue-x-baseline", "table": "t", "row": "r", "column": "before",
    "variant": "baseline", "quantity": "throughput", "unit": "items/s",
    "condition": {"workload": "w"}, "value": "1,234", "source": "s1",
    "quote": "cache 1,234 items/s",
}
GOOD_SOURCE = {"id": "s1", "file": "000_x.txt", "message_id": "a@b", "url": "https://x/a@b/",
               "author": "A", "date": "2026-05-26", "subject": "[PATCH] x"}


def write(tmp_path: Path, entries: list[dict], name: str = "workqueue") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"chapter": name, "sources": [GOOD_SOURCE],
                                    "entries": entries}))
    return path


@pytest.mark.parametrize(("text", "low", "high", "approx", "percent"), [
    ("1,419,973", 1419973, 1419973, False, False),
    ("~2875", 2875, 2875, True, False),
    ("13.89 - 13.90", 13.89, 13.90, False, False),
    ("-45%", -45, -45, False, True),
    ("+10.5 %", 10.5, 10.5, False, True),
    ("42.25%", 42.25, 42.25, False, True),
    ("1.2M", 1.2e6, 1.2e6, False, False),
    ("-3 - -1", -3, -1, False, False),
])
def test_parse_value(text: str, low: float, high: float, approx: bool, percent: bool) -> None:
    value = cited.parse_value(text)
    assert (value.low, value.high, value.approximate, value.percent) == pytest.approx(
        (low, high, approx, percent))
    assert value.text == text


@pytest.mark.parametrize("text", ["", "n/a", "12 apples", "1,23", "~", "3 - "])
def test_parse_value_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="cannot parse"):
        cited.parse_value(text)


def test_committed_files_validate() -> None:
    loaded = cited.load_all()
    assert [c.name for c in loaded] == BOOK
    ids = [e.id for c in loaded for e in c.entries]
    assert len(ids) == len(set(ids)), "ids must be unique across the book"
    for chapter in loaded:
        assert chapter.entries, f"{chapter.path} has no entries"


def source_text(archives: dict[str, Path], source: cited.Source) -> str:
    """The named file of a source, read from its archive."""
    return (archives[source.archive] / source.file).read_text(encoding="utf-8")


def test_every_archive_has_its_directory() -> None:
    assert tuple(ARCHIVE_VARIABLES) == cited.ARCHIVES


def test_every_entry_has_a_source_that_quotes_it(archives: dict[str, Path]) -> None:
    for chapter in cited.load_all():
        for entry in chapter.entries:
            mail = cited.fold(source_text(archives, entry.source))
            assert cited.fold(entry.quote) in mail, f"{chapter.path}: {entry.id}: quote not in mail"
            assert cited.fold(entry.reads_as_quote) in mail, (
                f"{chapter.path}: {entry.id}: reads_as_quote not in mail")


def test_every_source_names_its_address(archives: dict[str, Path]) -> None:
    """A message-id is part of its lore address; an upstream file's first line names where it
    was taken from, which must be the source's url."""
    for chapter in cited.load_all():
        for source in chapter.sources.values():
            if source.message_id != cited.NO_MESSAGE_ID:
                assert source.message_id in source.url, f"{chapter.path}: {source.id}"
            if source.archive == "upstream":
                first = source_text(archives, source).splitlines()[0]
                assert first == f"Source: {source.url}", f"{chapter.path}: {source.id}: {first}"


# Result-shaped tokens that must all be recorded: percentages, "a - b" ranges and "a -> b".
RESULT_PATTERNS = {
    "percentage": re.compile(r"(?<![\w.])[+-]?\d+(?:\.\d+)? ?%"),
    "range": re.compile(r"(?<![\w.])\d+\.\d+ - \d+\.\d+(?![\w.])"),
    "before/after": re.compile(r"(?<![\w.])(\d[\d,.]*) -> (\d[\d,.]*)(?![\w.])"),
}


def test_every_result_token_of_every_source_is_recorded(archives: dict[str, Path]) -> None:
    for chapter in cited.load_all():
        for source in chapter.sources.values():
            mail = cited.fold(source_text(archives, source))
            values = {e.value.text for e in chapter.entries if e.source.id == source.id}
            for kind, pattern in RESULT_PATTERNS.items():
                for match in pattern.finditer(mail):
                    tokens = match.groups() or (match.group(0),)
                    missing = [t for t in tokens if t not in values]
                    assert not missing, f"{source.file}: {kind} {match.group(0)!r} not recorded"


@pytest.mark.parametrize(("change", "message"), [
    ({"value": "lots"}, "does not parse"),
    ({"variant": "faster"}, "variant 'faster' is unknown"),
    ({"source": "nowhere"}, "source 'nowhere' is not declared"),
    ({"quote": "something else"}, "does not occur in its quote"),
    ({"id": "Workqueue_X"}, "id is not lowercase-hyphenated"),
    ({"quote": None}, "missing quote"),
    ({"extra": 1}, "unknown fields extra"),
    ({"precision": "floored"}, "precision 'floored' is unknown"),
    ({"reads_as": "a gain"}, "reads_as 'a gain' is unknown"),
    ({"reads_as": "no change"}, "reads_as and reads_as_quote come together"),
])
def test_schema_errors_name_file_entry_and_fix(tmp_path: Path, change: dict,
                                               message: str) -> None:
    path = write(tmp_path, [{**GOOD_ENTRY, **change}])
    with pytest.raises(cited.CitedDataError, match=re.escape(message)) as error:
        cited.load_chapter(path)
    assert str(path) in str(error.value)
    assert "Fix:" in str(error.value)


@pytest.mark.parametrize(("change", "message"), [
    ({"archive": "attic"}, "archive 'attic' is unknown"),
    ({"message_id": cited.NO_MESSAGE_ID}, "message_id 'not available' in a seed source"),
    ({"Archive": "upstream"}, "unknown fields Archive"),
])
def test_source_errors_name_the_source_and_fix(tmp_path: Path, change: dict,
                                              message: str) -> None:
    path = tmp_path / "workqueue.yaml"
    path.write_text(yaml.safe_dump({"chapter": "workqueue", "sources": [{**GOOD_SOURCE, **change}],
                                    "entries": [GOOD_ENTRY]}))
    with pytest.raises(cited.CitedDataError, match=re.escape(message)) as error:
        cited.load_chapter(path)
    assert "sources[0]" in str(error.value) and "Fix:" in str(error.value)


def test_an_upstream_excerpt_may_lack_a_message_id(tmp_path: Path) -> None:
    path = tmp_path / "workqueue.yaml"
    source = {**GOOD_SOURCE, "archive": "upstream", "message_id": cited.NO_MESSAGE_ID}
    path.write_text(yaml.safe_dump({"chapter": "workqueue", "sources": [source],
                                    "entries": [GOOD_ENTRY]}))
    assert cited.load_chapter(path).sources["s1"].archive == "upstream"


def test_duplicate_ids_and_wrong_chapter_are_refused(tmp_path: Path) -> None:
    with pytest.raises(cited.CitedDataError, match="the id is used twice"):
        cited.load_chapter(write(tmp_path, [GOOD_ENTRY, GOOD_ENTRY]))
    path = write(tmp_path, [GOOD_ENTRY])
    path.rename(tmp_path / "qpw.yaml")
    with pytest.raises(cited.CitedDataError, match="set chapter: qpw"):
        cited.load_chapter(tmp_path / "qpw.yaml")


def test_good_entry_loads_and_frames(tmp_path: Path) -> None:
    chapter = cited.load_chapter(write(tmp_path, [GOOD_ENTRY]))
    frame = cited.to_frame([chapter])
    assert frame.loc[0, "cited"] == "1,234 items/s"
    assert frame.loc[0, "mid"] == 1234
    # printed to the unit and rounded, unless the entry says the printing truncated it
    assert (frame.loc[0, "true_low"], frame.loc[0, "true_high"]) == (1233.5, 1234.5)
    truncated = cited.load_chapter(write(tmp_path, [{**GOOD_ENTRY, "precision": "truncated"}]))
    assert truncated.entries[0].value.bounds(truncated.entries[0].precision) == (1234, 1235)


@pytest.mark.parametrize(("text", "step"), [("60", 1.0), ("-7.5%", 0.1), ("13.89 - 13.90", 0.01),
                                            ("2.5k", 100.0), ("~2,875", 1.0)])
def test_a_value_knows_its_last_printed_digit(text: str, step: float) -> None:
    assert cited.parse_value(text).resolution == pytest.approx(step)
