"""What the io-wq chapter's scripts (``chapters/io-wq/guest/*.sh``, ``host/perf-diff.sh``)
print for one boot, or for one pair of boots.

Every guest output is sections opened by ``== <name>`` and closed by ``== end <name>``
(:mod:`lab.parse.sections`), and ends with ``end=ok``; a failed step prints ``error=<reason>``
instead. A boot runs only its variant's workloads; in the runs made before variants listed
them, every output starts with ``role=<timed|race|lockstat>`` and ``ran=<0|1>``, and a workload
outside the kernel's role gives the one row ``ran`` = 0. perf's own formats are read by
:mod:`lab.parse.perf`. The rows:

* ``nop.sh``: ``control.<key>`` and ``async.<key>`` from the benchmark's ``key=value`` lines
  (``ops_per_second``, ``seconds``, ``peak_workers``, ...), the ASYNC run's flat profile
  (``profile.samples``, ``share.<symbol>``) and the callers of its spin and unlock symbols
  (``callers.<symbol>.samples``, ``caller.<symbol>.<caller>``), ``stat.<key>`` and
  ``stat.<event>`` of the flood under ``perf stat``, ``lock.<key>`` of the flood under
  ``perf lock record`` and its contention table (``contended.<caller>``, a count, and
  ``wait_ns.<caller>``, emulated time); runs made before the callers and stat sections existed
  have neither;
* ``http.sh`` and ``php.sh``: ``load.<key>`` from h2load's summary (``requests``,
  ``requests_per_second``, ``seconds``), ``server.<key>`` from the server's lines, and the
  server's flat profile and callers (runs before h2load: ``wrk.requests_per_second`` and
  ``wrk.requests`` from wrk's summary, and no callers);
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
from lab.parse import sections as lab_sections
from lab.parse.sections import numbers

KEYS = {
    "nop": ("control", "async", "report nop.data", "lock", "contention"),
    "http": ("load", "server", "report http.data", "callers http.data"),
    "php": ("load", "server", "report php.data", "callers php.data"),
    "race": ("lostwake",),
    "lockstat": ("flood", "lock_stat"),
}
"""The sections each workload prints, in order."""
OPTIONAL = {"nop": ("callers nop.data", "stat")}
"""Sections a newer script prints and an older committed run's output lacks."""
HTTP_WRK = ("wrk", "server", "report http.data")
"""The sections of http.sh before it drove a fixed number of requests with h2load (the
committed runs up to 20261127T021432Z-auto, which reparse with them)."""
DIFFED = ({"nop", "http"}, {"nop", "http", "php"})
"""The recordings host/perf-diff.sh compares: before the PHP workload, and since."""


def sections(text: str, source: str, names: tuple[str, ...]) -> tuple[dict[str, str],
                                                                       dict[str, list[str]]]:
    """The head's ``key=value`` lines and each section's lines (:mod:`lab.parse.sections`);
    a workload that ran must have every one of ``names``. The runs made before each variant
    listed its workloads begin with ``role=`` and ``ran=`` (``ran=0``: the workload was not of
    the kernel's role and printed nothing else); a later output has neither, as it ran."""
    split = lab_sections.split(text, source)
    pairs = keyvalue.fields("\n".join(split.head))
    if ("role" in pairs or "ran" in pairs) and (pairs.get("ran") not in ("0", "1")
                                               or "role" not in pairs):
        raise StageError(f"{source}: a role= line needs a ran= line of 0 or 1, and the other "
                         f"way round (have {split.head[:3]})")
    if pairs.get("ran") != "0":
        split.require(names, source)
    return pairs, split.body


def ran(pairs: dict[str, str]) -> list[tuple[str, float]]:
    """The ``ran`` row of an output that printed ``ran=1`` (the runs before each variant
    listed its workloads), so a re-parse of those runs gives their rows; none after."""
    return [("ran", 1.0)] if "ran" in pairs else []


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


_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def h2load(lines: list[str], source: str) -> list[tuple[str, float]]:
    """``load.requests``, ``load.requests_per_second`` and ``load.seconds`` from h2load's
    summary; a request that failed, errored or timed out, or any status but 2xx, fails the
    parse (the work of the boot would not be the fixed count)."""
    text = "\n".join(lines)
    done = re.search(r"^finished in (\d+(?:\.\d+)?)(us|ms|s), (\d+(?:\.\d+)?) req/s,", text, re.M)
    counts = re.search(r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                       r"(\d+) failed, (\d+) errored, (\d+) timeout$", text, re.M)
    codes = re.search(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx$", text, re.M)
    if not done or not counts or not codes:
        raise StageError(f"{source}: h2load's summary lacks its 'finished in', 'requests:' or "
                         "'status codes:' line")
    total, _, finished, succeeded, failed, errored, timeout = map(int, counts.groups())
    if failed or errored or timeout or finished != total or int(codes[1]) != succeeded:
        raise StageError(f"{source}: h2load: {total} requests, {finished} done, {failed} "
                         f"failed, {errored} errored, {timeout} timed out, status codes "
                         f"{codes.groups()} (2xx 3xx 4xx 5xx): the boot did not do the "
                         "fixed work")
    return [("load.requests", float(succeeded)),
            ("load.requests_per_second", float(done[3])),
            ("load.seconds", float(done[1]) * _UNITS[done[2]])]


def nop(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of nop.sh."""
    pairs, found = sections(text, source, KEYS["nop"])
    if pairs.get("ran") == "0":
        return [("ran", 0.0)]
    rows = [*ran(pairs), *numbers(found["control"], "control", source),
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
    if set(bodies) not in DIFFED:
        raise StageError(f"{source}: diffs of {sorted(bodies)}, not of the recordings "
                         f"{[sorted(d) for d in DIFFED]} (.data)")
    for name, body in bodies.items():
        rows += perf.diff(name, body, f"{source} ({name}.data)")
    return rows


def _server(kind: str, text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of http.sh or php.sh (``kind``), h2load-driven."""
    pairs, found = sections(text, source, KEYS[kind])
    if pairs.get("ran") == "0":
        return [("ran", 0.0)]
    return [*ran(pairs), *h2load(found["load"], source),
            *numbers(found["server"], "server", source),
            *perf.profile(found[f"report {kind}.data"], source),
            *perf.callers(found[f"callers {kind}.data"], source)]


def http(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of http.sh: the h2load-driven script, or the wrk-driven one of the
    earlier committed runs (``wrk.*`` rows, no callers)."""
    if "\n== wrk\n" not in text:
        return _server("http", text, source)
    pairs, found = sections(text, source, HTTP_WRK)
    if pairs.get("ran") == "0":
        return [("ran", 0.0)]
    return [*ran(pairs), *wrk(found["wrk"], source),
            *numbers(found["server"], "server", source),
            *perf.profile(found["report http.data"], source)]


def php(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of php.sh."""
    return _server("php", text, source)


def race(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of race.sh."""
    pairs, found = sections(text, source, KEYS["race"])
    if pairs.get("ran") == "0":
        return [("ran", 0.0)]
    rows = numbers(found["lostwake"], "race", source)
    if not {"race.trials", "race.lost"} <= {k for k, _ in rows}:
        raise StageError(f"{source}: lostwake printed no trials= or lost= line")
    return [*ran(pairs), *rows]


def lockstat(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of lockstat.sh: ``flood.<key>`` and, per lock class,
    ``lockstat.<class>.<column>`` (``contentions``, ``acquisitions``, ...; times in us)."""
    pairs, found = sections(text, source, KEYS["lockstat"])
    if pairs.get("ran") == "0":
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
    return [*ran(pairs), *numbers(found["flood"], "flood", source), *sorted(rows.items())]


PARSERS = {"nop": nop, "http": http, "php": php, "race": race, "lockstat": lockstat,
           "perfdiff": perfdiff}
