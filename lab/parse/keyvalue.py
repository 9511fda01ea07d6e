"""``key=value`` lines ending with ``end=ok``: the smoke workload's and guest-info's format.

The closing ``end=ok`` line is how a complete output is told from one cut off mid-write.
"""

from __future__ import annotations

import re

from lab.command import StageError

_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)=(.*)$")


def fields(text: str) -> dict[str, str]:
    """All ``key=value`` lines as strings (later lines win); other lines are ignored."""
    out = {}
    for line in text.splitlines():
        if m := _LINE.match(line.strip()):
            out[m[1]] = m[2]
    return out


def complete(text: str, source: str) -> list[str]:
    """The lines of a sectioned guest output before its closing ``end=ok`` (trailing blanks
    dropped), after checking that no line reports ``error=`` and that the marker is last: a
    failed or cut-off script never reaches a chapter's section parser."""
    lines = [line.rstrip("\n") for line in text.splitlines()]
    for line in lines:
        if line.startswith("error="):
            raise StageError(f"{source}: the guest script failed: {line[len('error='):]}")
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if not filled or lines[filled[-1]].strip() != "end=ok":
        last = lines[filled[-1]] if filled else "(empty)"
        raise StageError(f"{source}: truncated guest output: the last line is {last!r}, "
                         "not 'end=ok'")
    return lines[:filled[-1]]


def parse(text: str, source: str) -> list[tuple[str, float]]:
    """Numeric ``key=value`` pairs of a complete output, in order; ``end=ok`` must be last."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines or lines[-1] != "end=ok":
        last = lines[-1] if lines else "(empty)"
        raise StageError(f"{source}: truncated guest output: the last line is {last!r}, "
                         "not 'end=ok'")
    rows = []
    for line in lines[:-1]:
        m = _LINE.match(line)
        if not m:
            raise StageError(f"{source}: line {line!r} is not key=value")
        try:
            rows.append((m[1], float(m[2])))
        except ValueError:
            raise StageError(f"{source}: {m[1]}={m[2]!r} is not a number") from None
    return rows
