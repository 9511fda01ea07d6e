"""Load and validate the numbers the authors cited (``data/cited/<chapter>.yaml``).

The values stay strings exactly as the mails wrote them ("~2875", "13.89 - 13.90", "-45%"),
because a reader checking the book against the mail must find the same characters. Plotting and
comparison need numbers, so :func:`parse_value` turns the string into a :class:`Value` with a
low/high interval and an "approximate" flag; a value that does not parse is a schema error,
never a silent NaN.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lab import DATA, chapters, yamlfile

CITED_DIR = DATA / "cited"
VARIANTS = ("baseline", "patched", "change", "single")

SOURCE_FIELDS = ("id", "file", "message_id", "url", "author", "date", "subject")
ARCHIVES = ("seeds", "upstream")
"""Where a source's ``file`` lies: the seed mails (``../shared/seeds``) or the collected upstream
postings (``../shared/upstream``, one directory per series). Seeds are the default, because the
book's chapters start from them; a later posting (the v5 cover letter, a v3 table) is an
upstream file."""
NO_MESSAGE_ID = "not available"
"""The ``message_id`` of an upstream source whose only copy is an archive excerpt without one;
its ``url`` is then the archive page, which the file's own ``Source:`` line must name."""
ENTRY_FIELDS = (
    "id", "table", "row", "column", "variant", "quantity", "unit",
    "condition", "value", "source", "quote",
)
OPTIONAL_FIELDS = ("precision", "reads_as", "reads_as_quote")
READINGS = ("no change",)
"""What an author may say a printed change means, in his own words (``reads_as_quote``): a
printed -0.4 % that he calls unchanged is his claim of no change, and is judged as one."""
PRECISIONS = ("rounded", "truncated")
"""How a printed value relates to the true one: rounded to its last digit (the default, what a
mail's table or percentage usually is), or truncated there (an integer division, as in a
benchmark that prints ``total / iterations``; say why in the entry's condition)."""
ID_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

_NUMBER = r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_ONE = r"(?P<NAME>" + _NUMBER + r")\s*(?P<NAME_mult>[kKMG])?"
_UNIT_WORD = r"(?:\s*(?:us|µs|ns|ms|s|cycles|items/s))?"
VALUE_RE = re.compile(
    r"^(?P<approx>[~≈])?\s*"
    + _ONE.replace("NAME", "low")
    + r"(?:\s*(?:-|\u2013|to)\s*"
    + _ONE.replace("NAME", "high")
    + r")?\s*(?P<percent>%)?"
    + _UNIT_WORD
    + r"$"
)
MULTIPLIERS = {None: 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}


class CitedDataError(ValueError):
    """A cited-data file breaks the schema; the message names the file, the entry and the fix."""


@dataclass(frozen=True)
class Value:
    """A cited value as an interval: a single number has ``low == high``."""

    text: str
    low: float
    high: float
    approximate: bool
    percent: bool
    resolution: float = 0.0
    """The step of the last printed digit ("60" -> 1, "-7.5%" -> 0.1, "2.5k" -> 100)."""

    def bounds(self, precision: str = "rounded") -> tuple[float, float]:
        """The true values this printed value can stand for: half a last digit either side
        when rounded; up to one last digit further from zero when truncated."""
        step = self.resolution
        if precision == "truncated":
            return (self.low - step if self.low < 0 else self.low,
                    self.high + step if self.high >= 0 else self.high)
        return self.low - step / 2, self.high + step / 2

    @property
    def mid(self) -> float:
        """Midpoint of the interval, used where one number must stand for a range."""
        return (self.low + self.high) / 2

    @property
    def is_range(self) -> bool:
        """True when the author gave a range rather than one number."""
        return self.low != self.high


def parse_value(text: str) -> Value:
    """Parse a value exactly as written in a mail; raise ``ValueError`` if it is not a number.

    A leading minus belongs to the number ("-45%"); a hyphen between two numbers is a range
    ("13.89 - 13.90"), which the regular expression tells apart by requiring digits first.
    """
    match = VALUE_RE.match(text.strip())
    if not match:
        raise ValueError(f"cannot parse cited value {text!r}")

    def number(name: str) -> float:
        raw = match.group(name).replace(",", "")
        return float(raw) * MULTIPLIERS[match.group(f"{name}_mult")]

    def step(name: str) -> float:
        raw = match.group(name)
        decimals = len(raw.split(".")[1]) if "." in raw else 0
        return 10.0 ** -decimals * MULTIPLIERS[match.group(f"{name}_mult")]

    low = number("low")
    high = number("high") if match.group("high") else low
    return Value(
        text=text,
        low=min(low, high),
        high=max(low, high),
        approximate=bool(match.group("approx")),
        percent=bool(match.group("percent")),
        resolution=max(step("low"), step("high") if match.group("high") else 0.0),
    )


def fold(text: str) -> str:
    """Collapse whitespace runs, so quotes match flattened and line-wrapped mails alike."""
    return " ".join(text.split())


@dataclass(frozen=True)
class Source:
    """One mail that cited entries quote."""

    id: str
    file: str
    message_id: str
    url: str
    author: str
    date: str
    subject: str
    archive: str = "seeds"


@dataclass(frozen=True)
class Entry:
    """One cited number with everything needed to find it in the mail and to rerun it."""

    id: str
    chapter: str
    table: str
    row: str
    column: str
    variant: str
    quantity: str
    unit: str
    condition: dict[str, str]
    value: Value
    source: Source
    quote: str
    precision: str = "rounded"
    """:data:`PRECISIONS`."""
    reads_as: str = ""
    """:data:`READINGS`, or "" when the author let the number speak for itself."""
    reads_as_quote: str = ""
    """The author's words that say so, found in the same source."""


@dataclass
class Chapter:
    """All cited numbers of one chapter."""

    name: str
    path: Path
    sources: dict[str, Source] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)


def _require(cond: bool, path: Path, where: str, problem: str, fix: str) -> None:
    if not cond:
        raise CitedDataError(f"{path}: {where}: {problem}. Fix: {fix}.")


def _source(path: Path, index: int, raw: object) -> Source:
    where = f"sources[{index}]"
    _require(isinstance(raw, dict), path, where, "is not a mapping",
             f"write it with the keys {', '.join(SOURCE_FIELDS)}")
    assert isinstance(raw, dict)
    missing = [k for k in SOURCE_FIELDS if not str(raw.get(k, "")).strip()]
    _require(not missing, path, where, f"missing {', '.join(missing)}",
             "every source names its file, message-id, URL, author, date and subject")
    unknown = sorted(set(raw) - {*SOURCE_FIELDS, "archive"})
    _require(not unknown, path, where, f"unknown fields {', '.join(unknown)}",
             f"a source has the keys {', '.join(SOURCE_FIELDS)} and optionally archive")
    archive = str(raw.get("archive", "seeds"))
    _require(archive in ARCHIVES, path, where, f"archive {archive!r} is unknown",
             f"use one of {', '.join(ARCHIVES)}")
    _require(raw["message_id"] != NO_MESSAGE_ID or archive == "upstream", path, where,
             f"message_id {NO_MESSAGE_ID!r} in a seed source",
             "every seed mail has a message-id: copy it from the mail's headers")
    return Source(**{k: str(raw[k]) for k in SOURCE_FIELDS}, archive=archive)


def _entry(path: Path, chapter: str, raw: object, sources: dict[str, Source]) -> Entry:
    _require(isinstance(raw, dict), path, "entries", "an entry is not a mapping",
             f"write each entry with the keys {', '.join(ENTRY_FIELDS)}")
    assert isinstance(raw, dict)
    where = f"entry {raw.get('id', '<no id>')!r}"
    missing = [k for k in ENTRY_FIELDS if k not in raw or raw[k] in (None, "")]
    _require(not missing, path, where, f"missing {', '.join(missing)}",
             "add the missing fields (see data/cited/README.md)")
    unknown = sorted(set(raw) - {*ENTRY_FIELDS, *OPTIONAL_FIELDS})
    _require(not unknown, path, where, f"unknown fields {', '.join(unknown)}",
             "remove them or add them to the schema in lab/analysis/cited.py and the README")
    entry_id = str(raw["id"])
    _require(bool(ID_RE.match(entry_id)) and entry_id.startswith(chapter + "-"), path, where,
             "id is not lowercase-hyphenated or does not start with the chapter name",
             f"rename it to '{chapter}-...' using [a-z0-9-]")
    _require(raw["variant"] in VARIANTS, path, where, f"variant {raw['variant']!r} is unknown",
             f"use one of {', '.join(VARIANTS)}")
    _require(raw["source"] in sources, path, where, f"source {raw['source']!r} is not declared",
             "add it under sources: or correct the id")
    _require(isinstance(raw["condition"], dict), path, where, "condition is not a mapping",
             "write the conditions as key: value pairs")
    try:
        value = parse_value(str(raw["value"]))
    except ValueError:
        raise CitedDataError(
            f"{path}: {where}: value {raw['value']!r} does not parse. Fix: write the number "
            "exactly as the mail does, in a form listed in data/cited/README.md."
        ) from None
    precision = str(raw.get("precision", "rounded"))
    _require(precision in PRECISIONS, path, where, f"precision {precision!r} is unknown",
             f"use one of {', '.join(PRECISIONS)}")
    reads_as, reads_as_quote = str(raw.get("reads_as", "")), str(raw.get("reads_as_quote", ""))
    _require(reads_as in ("", *READINGS), path, where, f"reads_as {reads_as!r} is unknown",
             f"use one of {', '.join(READINGS)}")
    _require(bool(reads_as) == bool(reads_as_quote), path, where,
             "reads_as and reads_as_quote come together",
             "quote the author's words that say how he reads the number, or drop both")
    quote = str(raw["quote"])
    _require(fold(value.text) in fold(quote), path, where,
             f"value {value.text!r} does not occur in its quote",
             "quote the line of the mail that holds the value")
    return Entry(
        id=entry_id, chapter=chapter, table=str(raw["table"]), row=str(raw["row"]),
        column=str(raw["column"]), variant=str(raw["variant"]), quantity=str(raw["quantity"]),
        unit=str(raw["unit"]), condition={str(k): str(v) for k, v in raw["condition"].items()},
        value=value, source=sources[str(raw["source"])], quote=quote, precision=precision,
        reads_as=reads_as, reads_as_quote=reads_as_quote,
    )


def load_chapter(path: Path) -> Chapter:
    """Load one chapter file and validate it against the schema in ``data/cited/README.md``."""
    if not path.is_file():
        raise CitedDataError(f"{path}: no such file. Fix: create it (see data/cited/README.md).")
    try:
        raw = yamlfile.load(path.read_text(encoding="utf-8"))
    except yamlfile.YAMLError as exc:
        raise CitedDataError(f"{path}: not valid YAML ({exc}). Fix: correct the syntax.") from None
    _require(isinstance(raw, dict), path, "top level", "is not a mapping",
             "write chapter:, sources: and entries:")
    _require(raw.get("chapter") == path.stem, path, "chapter",
             f"says {raw.get('chapter')!r}", f"set chapter: {path.stem}")
    chapter = Chapter(name=path.stem, path=path)
    for index, item in enumerate(raw.get("sources") or []):
        src = _source(path, index, item)
        _require(src.id not in chapter.sources, path, f"source {src.id!r}", "is declared twice",
                 "give each source its own id")
        chapter.sources[src.id] = src
    entries = raw.get("entries") or []
    _require(bool(entries), path, "entries", "the file has no entries",
             "record every number the chapter's seed mail cites")
    seen: set[str] = set()
    for item in entries:
        entry = _entry(path, chapter.name, item, chapter.sources)
        _require(entry.id not in seen, path, f"entry {entry.id!r}", "the id is used twice",
                 "give each entry its own id")
        seen.add(entry.id)
        chapter.entries.append(entry)
    return chapter


def load_all(directory: Path = CITED_DIR) -> list[Chapter]:
    """Load every ``<chapter>.yaml`` of ``directory``, in the book's chapter order; each must
    belong to a chapter directory (:mod:`lab.chapters`), which says where it stands."""
    found = chapters.discover()
    files = sorted(directory.glob("*.yaml"))
    for path in files:
        _require(path.stem in found, path, "file name", f"there is no chapter {path.stem!r}",
                 f"name it after a directory of chapters/ ({', '.join(found)})")
    order = list(found)
    return [load_chapter(p) for p in sorted(files, key=lambda p: order.index(p.stem))]


def with_unit(value: str, unit: str) -> str:
    """A value as written followed by its unit, unless the text already carries it."""
    return value if unit == "%" or unit in value else f"{value} {unit}"


def to_frame(cited: list[Chapter]) -> pd.DataFrame:
    """One row per cited entry, with the parsed interval beside the text as written."""
    rows = [
        {
            "chapter": e.chapter, "id": e.id, "table": e.table, "row": e.row,
            "column": e.column, "variant": e.variant, "quantity": e.quantity, "unit": e.unit,
            "value": e.value.text, "cited": with_unit(e.value.text, e.unit),
            "low": e.value.low, "high": e.value.high, "mid": e.value.mid,
            "approximate": e.value.approximate, "precision": e.precision,
            "true_low": e.value.bounds(e.precision)[0],
            "true_high": e.value.bounds(e.precision)[1], "reads_as": e.reads_as,
            "source": e.source.id, "message_id": e.source.message_id, "url": e.source.url,
            "author": e.source.author, "date": e.source.date,
        }
        for chapter in cited
        for e in chapter.entries
    ]
    return pd.DataFrame(rows)


def main() -> int:
    """Validate every chapter's file; print a count per chapter, or the first error."""
    try:
        loaded = load_all()
    except CitedDataError as exc:
        print(exc)
        return 1
    for chapter in loaded:
        print(f"{chapter.path.relative_to(CITED_DIR.parent.parent)}: {len(chapter.entries)} "
              f"entries from {len(chapter.sources)} source(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
