"""Sectioned guest output: the layout the chapters' guest library prints.

A workload that prints more than one program's output prints it in sections, each opened by a
``== <name>`` line and, in the closed layout, closed by ``== end <name>``; the whole output ends
with ``end=ok`` and a failed step prints ``error=<reason>`` (:func:`keyvalue.complete` checks
both). In the closed layout, lines outside every section are the output's head (``key=value``
lines about the run); in the open layout, a section runs to the next ``== `` line and nothing
may come before the first.

The markers are checked strictly, because a cut or interleaved output that still parsed would
put a wrong number into the book: a section opened twice, one not closed, or a close that does
not match the open section fails, naming the file and the line.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.command import StageError
from lab.parse import keyvalue

OPEN, END = "== ", "== end "


@dataclass(frozen=True)
class Sections:
    """An output's head lines (outside every section) and its sections' lines, by name."""

    head: list[str]
    body: dict[str, list[str]]

    def require(self, names: tuple[str, ...] | list[str], source: str) -> None:
        """Fail unless every one of ``names`` is a section of this output."""
        missing = [s for s in names if s not in self.body]
        if missing:
            raise StageError(f"{source}: sections {missing} missing (have {sorted(self.body)}); "
                             "was the guest script changed?")


def split(text: str, source: str, closed: bool = True) -> Sections:
    """Split a complete output into its head and sections (see the module docstring)."""
    head: list[str] = []
    body: dict[str, list[str]] = {}
    current: str | None = None
    for number, line in enumerate(keyvalue.complete(text, source), 1):
        if closed and line.startswith(END):
            if current is None or line[len(END):].strip() != current:
                raise StageError(f"{source}:{number}: {line!r} closes a section that is not "
                                 f"open (open: {current!r})")
            current = None
        elif line.startswith(OPEN):
            if closed and current is not None:
                raise StageError(f"{source}:{number}: section {current!r} is not closed "
                                 f"before {line!r}: the output is cut or interleaved")
            current = line[len(OPEN):].strip()
            if current in body:
                raise StageError(f"{source}:{number}: section {current!r} appears twice; the "
                                 "output mixes two runs")
            body[current] = []
        elif current is not None:
            body[current].append(line)
        elif line.strip():
            if not closed:
                raise StageError(f"{source}:{number}: text before the first section: "
                                 f"{line!r}")
            head.append(line)
    if closed and current is not None:
        raise StageError(f"{source}: section {current!r} is not closed before end=ok")
    return Sections(head, body)


def parse(text: str, source: str) -> list[tuple[str, float]]:
    """The numbers of a closed-layout output: ``<key>`` for each head line and
    ``<section>.<key>`` for each section's (:func:`numbers`); a section with no number fails:
    its program printed nothing the book could use."""
    out = split(text, source)
    rows = numbers(out.head, "", source, required=False)
    for name, lines in out.body.items():
        rows += numbers(lines, name, source)
    return rows


def numbers(lines: list[str], prefix: str, source: str,
            required: bool = True) -> list[tuple[str, float]]:
    """``<prefix>.<key>`` rows (``<key>`` without a prefix) of a program's ``key=value``
    lines whose value is a number (a label such as ``mode=async`` is left out); ``required``:
    at least one, else the section is named as empty."""
    rows = []
    for key, value in keyvalue.fields("\n".join(lines)).items():
        try:
            rows.append((f"{prefix}.{key}" if prefix else key, float(value)))
        except ValueError:
            continue
    if required and not rows:
        raise StageError(f"{source}: section {prefix!r} has no key=value numbers: {lines[:3]}")
    return rows
