"""What the io-wq chapter's scripts (``chapters/io-wq/guest/*.sh``, ``host/perf-diff.sh``)
print for one boot, or for one pair of boots.

Every guest output starts with ``role=<timed|race|lockstat>`` and ``ran=<0|1>``, then sections
opened by ``== <name>`` and closed by ``== end <name>``, and ends with ``end=ok``; a failed step
prints ``error=<reason>`` instead. A workload outside the kernel's role gives the one row
``ran`` = 0. perf's own formats are read by :mod:`lab.parse.perf`. The rows:

* ``nop.sh``: ``control.<key>`` and ``async.<key>`` from the benchmark's ``key=value`` lines
  (``ops_per_second``, ``seconds``, ``peak_workers``, ...), the ASYNC run's flat profile
  (``profile.samples``, ``share.<symbol>``) and the callers of its spin and unlock symbols
  (``callers.<symbol>.samples``, ``caller.<symbol>.<caller>``), ``stat.<key>`` and
  ``stat.<event>`` of the flood under ``perf stat``, ``lock.<key>`` of the flood under
  ``perf lock record`` and its contention table (``contended.<caller>``, a count, and
  ``wait_ns.<caller>``, emulated time); runs made before the callers and stat sections existed
  have neither;
* ``http.sh``: ``wrk.requests_per_second`` and ``wrk.requests`` from wrk's summary,
  ``server.<key>`` from the server's lines, and the server's flat profile;
* ``race.sh``: ``race.<key>`` (``trials``, ``lost``, ``bound_ms``, ``seconds``);
* ``lockstat.sh``: ``flood.<key>`` and ``lockstat.<class>.<column>``;
* ``host/perf-diff.sh`` (the compare stage, rows of the patched boot): per recording,
  ``<recording>.rank|baseline|delta.<symbol>`` of ``perf diff``.

A missing or repeated section, a line of another layout and a table without its header fail
the parse, naming the file, the line and what was expected.
"""

from __future__ import annotations

import re

from lab.command import StageError
from lab.parse import keyvalue, lock_stat, perf

KEYS = {
    "nop": ("control", "async", "report nop.data", "lock", "contention"),
    "http": ("wrk", "server", "report http.data"),
    "race": ("lostwake",),
    "lockstat": ("flood", "lock_stat"),
}
"""The sections each workload prints, in order."""
OPTIONAL = {"nop": ("callers nop.data", "stat")}
"""Sections a newer script prints and an older committed run's output lacks."""


def sections(text: str, source: str, names: tuple[str, ...]) -> tuple[dict[str, str],
                                                                       dict[str, list[str]]]:
    """The head's ``key=value`` lines and each section's lines; checks the markers."""
    lines = keyvalue.complete(text, source)
    head: list[str] = []
    found: dict[str, list[str]] = {}
    current: str | None = None
    for number, line in enumerate(lines, 1):
        if line.startswith("== end "):
            if current is None or line[len("== end "):].strip() != current:
                raise StageError(f"{source}:{number}: {line!r} closes a section that is not "
                                 f"open (open: {current!r})")
            current = None
        elif line.startswith("== "):
            if current is not None:
                raise StageError(f"{source}:{number}: section {current!r} is not closed "
                                 f"before {line!r}: the output is cut or interleaved")
            current = line[3:].strip()
            if current in found:
                raise StageError(f"{source}:{number}: section {current!r} appears twice")
            found[current] = []
        elif current is not None:
            found[current].append(line)
        elif line.strip():
            head.append(line)
    if current is not None:
        raise StageError(f"{source}: section {current!r} is not closed before end=ok")
    pairs = keyvalue.fields("\n".join(head))
    if pairs.get("ran") not in ("0", "1") or "role" not in pairs:
        raise StageError(f"{source}: no role= and ran= lines before the sections (have "
                         f"{head[:3]})")
    if pairs["ran"] == "1":
        missing = [s for s in names if s not in found]
        if missing:
            raise StageError(f"{source}: sections {missing} missing (have {sorted(found)}); "
                             "was the guest script changed?")
    return pairs, found


def numbers(lines: list[str], prefix: str, source: str) -> list[tuple[str, float]]:
    """``<prefix>.<key>`` rows of a program's ``key=value`` lines (non-numbers left out:
    ``mode=async`` is a label); at least one number is required."""
    rows = []
    for key, value in keyvalue.fields("\n".join(lines)).items():
        try:
            rows.append((f"{prefix}.{key}", float(value)))
        except ValueError:
            continue
    if not rows:
        raise StageError(f"{source}: section {prefix!r} has no key=value numbers: {lines[:3]}")
    return rows


def wrk(lines: list[str], source: str) -> list[tuple[str, float]]:
    """``wrk.requests`` and ``wrk.requests_per_second`` from wrk's summary."""
    text = "\n".join(lines)
    done = re.search(r"^\s*(\d+) requests in ", text, re.M)
    rate = re.search(r"^Requests/sec:\s+(\d+(?:\.\d+)?)\s*$", text, re.M)
    if not done or not rate:
        raise StageError(f"{source}: wrk's summary has no 'N requests in' or 'Requests/sec:' "
                         "line")
    rows = [("wrk.requests", float(done[1])), ("wrk.requests_per_second", float(rate[1]))]
    if errors := re.search(r"^\s*Non-2xx or 3xx responses: (\d+)", text, re.M):
        raise StageError(f"{source}: wrk saw {errors[1]} error responses")
    return rows


def nop(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of nop.sh."""
    pairs, found = sections(text, source, KEYS["nop"])
    if pairs["ran"] == "0":
        return [("ran", 0.0)]
    rows = [("ran", 1.0), *numbers(found["control"], "control", source),
            *numbers(found["async"], "async", source),
            *perf.profile(found["report nop.data"], source),
            *numbers(found["lock"], "lock", source),
            *perf.contention(found["contention"], source)]
    present = [s for s in OPTIONAL["nop"] if s in found]
    if present and len(present) != len(OPTIONAL["nop"]):
        raise StageError(f"{source}: sections {present} without the rest of "
                         f"{list(OPTIONAL['nop'])}: was the guest script changed?")
    if present:
        rows += [*perf.callers(found["callers nop.data"], source),
                 *numbers([line for line in found["stat"] if "=" in line], "stat", source),
                 *perf.stat(found["stat"], source)]
    return rows


def perfdiff(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of host/perf-diff.sh: one ``perf diff -t ';'`` per recording (``nop``, ``http``),
    read by :func:`lab.parse.perf.diff`, each row named after its recording."""
    lines = keyvalue.complete(text, source)
    rows: list[tuple[str, float]] = []
    bodies: dict[str, list[str]] = {}
    current: str | None = None
    for line in lines:
        if line.startswith("== end diff "):
            current = None
        elif line.startswith("== diff "):
            current = line[len("== diff "):].strip().removesuffix(".data")
            bodies[current] = []
        elif current is not None:
            bodies[current].append(line)
    if set(bodies) != {"nop", "http"}:
        raise StageError(f"{source}: diffs of {sorted(bodies)}, not of nop.data and http.data")
    for name, body in bodies.items():
        rows += perf.diff(name, body, f"{source} ({name}.data)")
    return rows


def http(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of http.sh."""
    pairs, found = sections(text, source, KEYS["http"])
    if pairs["ran"] == "0":
        return [("ran", 0.0)]
    return [("ran", 1.0), *wrk(found["wrk"], source),
            *numbers(found["server"], "server", source),
            *perf.profile(found["report http.data"], source)]


def race(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of race.sh."""
    pairs, found = sections(text, source, KEYS["race"])
    if pairs["ran"] == "0":
        return [("ran", 0.0)]
    rows = numbers(found["lostwake"], "race", source)
    if not {"race.trials", "race.lost"} <= {k for k, _ in rows}:
        raise StageError(f"{source}: lostwake printed no trials= or lost= line")
    return [("ran", 1.0), *rows]


def lockstat(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of lockstat.sh: ``flood.<key>`` and, per lock class,
    ``lockstat.<class>.<column>`` (``contentions``, ``acquisitions``, ...; times in us)."""
    pairs, found = sections(text, source, KEYS["lockstat"])
    if pairs["ran"] == "0":
        return [("ran", 0.0)]
    lines = [line for line in found["lock_stat"] if line.strip()]
    if not lines:
        raise StageError(f"{source}: the lock_stat section is empty")
    lock_stat.check_header(lines[0], source)
    rows: dict[str, float] = {}
    for line in lines[1:]:
        parsed = lock_stat.class_stats(line)
        if parsed is None:
            raise StageError(f"{source}: lock_stat line {line!r} is not a class's statistics")
        name, values = parsed
        for column, value in values.items():
            key = f"lockstat.{name}.{column}"
            rows[key] = rows.get(key, 0.0) + value if "time" not in column else value
    if not any(k.startswith("lockstat.&acct->lock.") for k in rows):
        raise StageError(f"{source}: no &acct->lock class in lock_stat: the flood did not reach "
                         "io-wq, or the class is named differently in this kernel")
    return [("ran", 1.0), *numbers(found["flood"], "flood", source), *sorted(rows.items())]


PARSERS = {"nop": nop, "http": http, "race": race, "lockstat": lockstat, "perfdiff": perfdiff}
