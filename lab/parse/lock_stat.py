"""``/proc/lock_stat`` (CONFIG_LOCK_STAT): one lock class's contention and hold/wait times.

The file has a header naming its columns and, per lock class, a statistics line
``<class name>: <con-bounces> <contentions> <waittime-min> ...``; times are printed in
microseconds with two decimals. Only the statistics line is parsed here; the contention
points that follow it (callers, with addresses) are kept in the raw output for the reader.
"""

from __future__ import annotations

import re

from lab.command import StageError

COLUMNS = ("con-bounces", "contentions", "waittime-min", "waittime-max", "waittime-total",
           "waittime-avg", "acq-bounces", "acquisitions", "holdtime-min", "holdtime-max",
           "holdtime-total", "holdtime-avg")
"""The columns of lock_stat version 0.4, in order, as its header names them."""

_STATS = re.compile(r"^\s*(\S.*?):\s+((?:[\d.]+\s+){11}[\d.]+)\s*$")


def metric_name(column: str) -> str:
    """``waittime-max`` -> ``waittime_max_us`` (lock_stat prints times in microseconds)."""
    name = column.replace("-", "_")
    return f"{name}_us" if "time" in name else name


def check_header(line: str, source: str) -> None:
    """Fail unless ``line`` is the column header this parser knows (lock_stat version 0.4)."""
    got = tuple(line.split()[2:]) if "class name" in line else ()
    if got != COLUMNS:
        raise StageError(f"{source}: lock_stat header {line.strip()!r} does not name the "
                         f"columns {' '.join(COLUMNS)}; the kernel's lock_stat format changed")


def class_stats(line: str) -> tuple[str, dict[str, float]] | None:
    """The class name and its twelve statistics from a statistics line, or None for any other
    line (a contention point, a separator)."""
    m = _STATS.match(line)
    if not m:
        return None
    values = [float(v) for v in m[2].split()]
    return m[1], {metric_name(c): v for c, v in zip(COLUMNS, values, strict=True)}
