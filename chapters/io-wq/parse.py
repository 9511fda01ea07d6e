"""What the io-wq chapter's workload scripts (``chapters/io-wq/guest/*.sh``) print for one boot.

Every output starts with ``role=<timed|race>`` and ``ran=<0|1>``, then sections opened by
``== <name>`` and closed by ``== end <name>``, and ends with ``end=ok``; a failed step prints
``error=<reason>`` instead. A workload outside the kernel's role gives the one row ``ran`` = 0.
The rows:

* ``nop.sh``: ``control.<key>`` and ``async.<key>`` from the benchmark's ``key=value`` lines
  (``ops_per_second``, ``seconds``, ``peak_workers``, ...), the flat profile of the ASYNC run
  (below), ``lock.<key>`` of the flood under ``perf lock record``, and its contention table
  (below);
* ``http.sh``: ``wrk.requests_per_second`` and ``wrk.requests`` from wrk's summary,
  ``server.<key>`` from the server's lines, and the server's flat profile;
* ``race.sh``: ``race.<key>`` (``trials``, ``lost``, ``bound_ms``, ``seconds``).

A flat profile is ``perf report --stdio -q -g none --no-children -n --sort dso,sym -t ';'``:
one line per (shared object, symbol) with its overhead, its sample count, the object and
``[k] name`` (kernel) or ``[.] name`` (user). It gives ``profile.samples`` (the total) and,
per kernel symbol name, ``share.<symbol>`` in percent of all samples (two static functions of
one name in different files are two lines of the report and one row; what a ``perf diff`` row's
baseline column is; the delta column is the difference of two kernels' shares, formed by the
analysis); user-space rows are summed into ``share.user``. The contention table is
``perf lock contention -x ';' -F contended,wait_total,wait_max,avg_wait`` (its header is
``# output: contended; total wait; ...``, waits in nanoseconds): per caller,
``contended.<caller>`` (a count: no clock involved) and ``wait_ns.<caller>`` (emulated time).

A missing or repeated section, a profile line of another layout, a profile whose overheads do
not sum to 100 % or whose sample column disagrees with them, and a table without its header
fail the parse, naming the file, the line and what was expected.
"""

from __future__ import annotations

import re

from lab.command import StageError
from lab.parse import keyvalue, lock_stat

PROFILE_LINE = re.compile(
    r"^\s*(?P<overhead>\d+(?:\.\d+)?)%\s*;\s*(?P<samples>\d+)\s*;(?P<dso>[^;]+);"
    r"\[(?P<kind>[k.])\] (?P<symbol>\S+)\s*$")
CONTENTION_HEADER = ("contended", "total wait", "max wait", "avg wait", "type", "caller")
WAIT_UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
DIFF_LINE = re.compile(
    r"^(?P<baseline>\s*(?:\d+(?:\.\d+)?)?)\s*;\s*(?:(?P<delta>[+-]\d+(?:\.\d+)?)%)?\s*;"
    r"(?P<dso>[^;]+);\[(?P<kind>[k.])\] (?P<symbol>\S+)\s*$")
DIFF_HEADER = ("Baseline", "Delta Abs", "Shared Object", "Symbol")
CALLERS_ENTRY = re.compile(
    r"^\s*(?P<overhead>\d+(?:\.\d+)?)%\s*;\s*(?P<samples>\d+)\s*;\[(?P<kind>[k.])\] "
    r"(?P<symbol>\S+)\s*$")
CALLERS_CHAIN = re.compile(r"^(?P<count>\d+) (?P<chain>\S.*)$")
LOCK_PRIMITIVES = ("queued_spin_lock_slowpath", "native_queued_spin_lock_slowpath",
                   "_raw_spin_", "__raw_spin_", "do_raw_spin_")
"""Frame prefixes of the spinlock code itself: a call chain's *caller* is its first frame
after the sampled one that is none of these (whose lock it is, or whose unlock)."""
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


def profile(lines: list[str], source: str) -> list[tuple[str, float]]:
    """Rows of one flat profile (see the module docstring)."""
    kernel: dict[str, float] = {}
    user = 0.0
    total_pct = 0.0
    samples = 0
    checks: list[tuple[float, int]] = []
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = PROFILE_LINE.match(line)
        if not m:
            raise StageError(f"{source}: profile line {line!r} is not 'overhead%;samples;"
                             "object;[k|.] symbol' (perf report -n --sort dso,sym -t ';')")
        pct, n = float(m["overhead"]), int(m["samples"])
        total_pct += pct
        samples += n
        checks.append((pct, n))
        if m["kind"] == "k":
            kernel[m["symbol"].strip()] = kernel.get(m["symbol"].strip(), 0.0) + pct
        else:
            user += pct
    if not samples:
        raise StageError(f"{source}: the profile has no samples")
    # each printed overhead is rounded to 0.01 %, so n lines may sum to 100 +- n * 0.005 %
    # (a profile of many one-sample lines, each 0.008 % printed as 0.01 %, sums above 100)
    if abs(total_pct - 100) > max(0.5, 0.005 * len(checks)):
        raise StageError(f"{source}: the profile's overheads sum to {total_pct:.2f} %, not "
                         f"100 % within the rounding of {len(checks)} lines: lines are "
                         "missing (was --percent-limit changed?)")
    for pct, n in checks:
        if abs(100 * n / samples - pct) > 0.02 + 0.01 * pct:
            raise StageError(f"{source}: a profile line has {pct} % but {n} of {samples} "
                             "samples: the columns are not overhead and samples")
    rows = [("profile.samples", float(samples)), ("share.user", round(user, 2))]
    return rows + [(f"share.{sym}", round(pct, 2)) for sym, pct in sorted(kernel.items())]


def wait_ns(text: str, source: str) -> float:
    """A wait time of perf lock's table in nanoseconds: bare nanoseconds in its CSV layout
    (``-x``), ``1.23 ms`` in its human one."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ns|us|ms|s)?\s*", text)
    if not m:
        raise StageError(f"{source}: wait time {text!r} is not '<number> [ns|us|ms|s]'")
    return float(m[1]) * WAIT_UNITS[m[2] or "ns"]


def contention(lines: list[str], source: str) -> list[tuple[str, float]]:
    """Rows of ``perf lock contention -x ';'`` (see the module docstring); callers summed
    over lock types."""
    filled = [line for line in lines if line.strip()]
    header = filled[0].removeprefix("# output:") if filled else ""
    if tuple(c.strip() for c in header.split(";")) != CONTENTION_HEADER:
        raise StageError(f"{source}: the contention table's header is "
                         f"{filled[0] if filled else '(none)'!r}, not "
                         f"{';'.join(CONTENTION_HEADER)!r}")
    counts: dict[str, float] = {}
    waits: dict[str, float] = {}
    for line in filled[1:]:
        cells = [c.strip() for c in line.split(";")]
        if len(cells) != len(CONTENTION_HEADER) or not cells[0].isdigit():
            raise StageError(f"{source}: contention line {line!r} does not have the "
                             f"header's {len(CONTENTION_HEADER)} fields")
        caller = cells[5].split("+", 1)[0]
        counts[caller] = counts.get(caller, 0) + int(cells[0])
        waits[caller] = waits.get(caller, 0) + wait_ns(cells[1], source)
    rows = [("lock.contended_total", float(sum(counts.values())))]
    rows += [(f"contended.{c}", float(v)) for c, v in sorted(counts.items())]
    return rows + [(f"wait_ns.{c}", v) for c, v in sorted(waits.items())]


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


def callers(lines: list[str], source: str) -> list[tuple[str, float]]:
    """Rows of ``perf report --no-children -n --sort sym -t ';' -g folded,0,callee,function,
    count -S <symbols>``: per sampled symbol, ``callers.<symbol>.samples`` (its samples) and
    ``caller.<symbol>.<caller>`` (samples whose chain reaches that caller first, see
    :data:`LOCK_PRIMITIVES`; ``(none)`` when the chain ends in lock code). Each entry's folded
    chains must add up to its sample count."""
    rows: dict[str, float] = {}
    symbol: str | None = None
    expected = counted = 0

    def close() -> None:
        if symbol is not None and counted != expected:
            raise StageError(f"{source}: the call chains of {symbol} count {counted} samples, "
                             f"its line {expected}: was the folded layout or the threshold "
                             "changed (-g folded,0,...,count)?")
    for line in lines:
        if not line.strip():
            continue
        if entry := CALLERS_ENTRY.match(line):
            close()
            symbol, expected, counted = entry["symbol"], int(entry["samples"]), 0
            rows[f"callers.{symbol}.samples"] = rows.get(f"callers.{symbol}.samples", 0) + expected
        elif (chain := CALLERS_CHAIN.match(line)) and symbol is not None:
            frames = chain["chain"].split(";")
            caller = next((f for f in frames[1:] if not f.startswith(LOCK_PRIMITIVES)), "(none)")
            key = f"caller.{symbol}.{caller}"
            rows[key] = rows.get(key, 0) + int(chain["count"])
            counted += int(chain["count"])
        else:
            raise StageError(f"{source}: callers line {line!r} is neither 'overhead%;samples;"
                             "[k] symbol' nor '<count> frame;frame;...'")
    close()
    return sorted((k, float(v)) for k, v in rows.items())


def perf_stat(lines: list[str], source: str) -> list[tuple[str, float]]:
    """``stat.<key>`` of the flood's ``key=value`` lines and ``stat.<event>`` of ``perf stat
    -x ';'`` (value;unit;event;...); an event perf could not count fails the parse."""
    rows = numbers([line for line in lines if "=" in line], "stat", source)
    events = [line.split(";") for line in lines if ";" in line]
    for cells in events:
        if len(cells) < 3 or not re.fullmatch(r"\d+(?:\.\d+)?", cells[0].strip()):
            raise StageError(f"{source}: perf stat line {';'.join(cells)!r} has no count "
                             "(<not counted> or <not supported>?)")
        rows.append((f"stat.{cells[2].strip()}", float(cells[0])))
    if not events:
        raise StageError(f"{source}: the stat section has no perf stat -x ';' lines")
    return rows


def nop(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of nop.sh."""
    pairs, found = sections(text, source, KEYS["nop"])
    if pairs["ran"] == "0":
        return [("ran", 0.0)]
    rows = [("ran", 1.0), *numbers(found["control"], "control", source),
            *numbers(found["async"], "async", source),
            *profile(found["report nop.data"], source),
            *numbers(found["lock"], "lock", source),
            *contention(found["contention"], source)]
    present = [s for s in OPTIONAL["nop"] if s in found]
    if present and len(present) != len(OPTIONAL["nop"]):
        raise StageError(f"{source}: sections {present} without the rest of "
                         f"{list(OPTIONAL['nop'])}: was the guest script changed?")
    if present:
        rows += [*callers(found["callers nop.data"], source),
                 *perf_stat(found["stat"], source)]
    return rows


def perfdiff(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of host/perf-diff.sh: one ``perf diff -t ';'`` per recording (``nop``, ``http``),
    in perf's own order (delta-abs). Per recording and kernel symbol,
    ``<recording>.rank.<symbol>`` (its line in perf's output, from 1),
    ``<recording>.baseline.<symbol>`` (percent of the baseline's samples; 0 when only the
    patched recording has it) and ``<recording>.delta.<symbol>`` (points), which perf prints
    only for a symbol both recordings sampled; ``<recording>.lines`` counts every line, user
    space included. Two static functions of one name are two lines and one row, as in the
    flat profile."""
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
        rows += _diff_rows(name, body, f"{source} ({name}.data)")
    return rows


def _diff_rows(name: str, body: list[str], source: str) -> list[tuple[str, float]]:
    header = next((line for line in body if line.startswith("# Baseline")), None)
    if header is None or tuple(c.strip() for c in header[2:].split(";")) != DIFF_HEADER:
        raise StageError(f"{source}: perf diff's header is {header!r}, not "
                         f"'# {';'.join(DIFF_HEADER)}' (-t ';', compute delta-abs)")
    rows: dict[str, float] = {}
    rank = 0
    for line in body:
        if not line.strip() or line.startswith("#"):
            continue
        m = DIFF_LINE.match(line)
        if not m:
            raise StageError(f"{source}: perf diff line {line!r} is not 'baseline;delta%;"
                             "object;[k|.] symbol'")
        rank += 1
        if m["kind"] != "k":
            continue
        sym = m["symbol"]
        rows.setdefault(f"{name}.rank.{sym}", float(rank))
        rows[f"{name}.baseline.{sym}"] = (rows.get(f"{name}.baseline.{sym}", 0.0)
                                          + float(m["baseline"].strip() or 0.0))
        if m["delta"] is not None:
            rows[f"{name}.delta.{sym}"] = rows.get(f"{name}.delta.{sym}", 0.0) + float(m["delta"])
    if not rank:
        raise StageError(f"{source}: perf diff printed no lines")
    return [(f"{name}.lines", float(rank)), *((k, round(v, 2)) for k, v in rows.items())]


def http(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of http.sh."""
    pairs, found = sections(text, source, KEYS["http"])
    if pairs["ran"] == "0":
        return [("ran", 0.0)]
    return [("ran", 1.0), *wrk(found["wrk"], source),
            *numbers(found["server"], "server", source),
            *profile(found["report http.data"], source)]


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
