"""perf's own machine formats, as the chapters' guest and host scripts print them.

* ``perf report -t ';'`` flat profiles (:func:`profile`) and folded call chains of chosen
  symbols (``-g folded,0,callee,function,count``, :func:`callers`);
* ``perf lock contention -x ';'`` tables (:func:`contention`);
* ``perf stat -x ';'`` counts (:func:`stat`);
* ``perf diff -t ';'`` listings (:func:`diff`).

Each parser takes a section's lines and a label for errors, and returns (metric, value) rows;
a line of another layout fails the parse, naming the file, the line and the layout expected.
"""

from __future__ import annotations

import re

from lab.command import StageError

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


def profile(lines: list[str], source: str) -> list[tuple[str, float]]:
    """Rows of one flat profile, ``perf report --stdio -q -g none --no-children -n --sort
    dso,sym -t ';'``: ``profile.samples`` (the total), ``share.<symbol>`` per kernel symbol in
    percent of all samples (two static functions of one name are two lines and one row) and
    ``share.user`` (user space summed). Lines missing (a ``--percent-limit``), or a sample column
    that disagrees with the overheads, fail the parse."""
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



def callers(lines: list[str], source: str) -> list[tuple[str, float]]:
    """Rows of ``perf report --no-children -n --sort sym -t ';' -g folded,0,callee,function,
    count -S <symbols>``: per sampled symbol, ``callers.<symbol>.samples`` (its samples) and
    ``caller.<symbol>.<caller>`` (samples whose chain reaches that caller first, see
    :data:`LOCK_PRIMITIVES`; ``(none)`` when the chain ends in lock code). Each entry's folded
    chains must add up to its sample count.

    With the frame-pointer unwinder a function that sets up no stack frame on its common path
    (``_raw_spin_unlock_irq``, ``_raw_spin_unlock_irqrestore``) loses its direct caller: the
    chain's next frame is then the caller's caller. A slowpath chain still names the function
    that took the lock, because ``_raw_spin_lock()`` builds a frame before it calls the
    slowpath (or is inlined into that function)."""
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



def stat(lines: list[str], source: str) -> list[tuple[str, float]]:
    """``stat.<event>`` of ``perf stat -x ';'`` (value;unit;event;...): the lines with a field
    separator (others, such as the measured program's own output, are left to the caller); an
    event perf could not count fails the parse."""
    rows: list[tuple[str, float]] = []
    events = [line.split(";") for line in lines if ";" in line]
    for cells in events:
        if len(cells) < 3 or not re.fullmatch(r"\d+(?:\.\d+)?", cells[0].strip()):
            raise StageError(f"{source}: perf stat line {';'.join(cells)!r} has no count "
                             "(<not counted> or <not supported>?)")
        rows.append((f"stat.{cells[2].strip()}", float(cells[0])))
    if not events:
        raise StageError(f"{source}: the stat section has no perf stat -x ';' lines")
    return rows



def diff(name: str, body: list[str], source: str) -> list[tuple[str, float]]:
    """Rows of one ``perf diff -t ';'`` (default compute, delta-abs) in perf's own order: per
    kernel symbol ``<name>.rank.<symbol>`` (its line, from 1), ``<name>.baseline.<symbol>``
    (percent of the baseline's samples; 0 when only the other recording has it) and
    ``<name>.delta.<symbol>`` (points), which perf prints only for a symbol both recordings
    sampled (a symbol only the baseline sampled comes after every row with a delta);
    ``<name>.lines`` counts every line, user space included. Two static functions of one name
    are two lines and one row, as in :func:`profile`."""
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
