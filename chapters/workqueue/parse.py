"""What ``lib/test_workqueue.c`` (with the workqueue chapter's instrument patch) logs.

The guest scripts (``chapters/workqueue/guest/``) copy the module's kernel-log lines to their output
and end it with ``end=ok``. Three kinds of line become rows, each metric prefixed with the
affinity scope it was measured in:

* batched-submit mode (instrument patch), one line per scope::

    test_workqueue: mode=batch scope=cache producers=8 items=20000 elapsed_ns=... \
items_per_sec=... enq_p50_ns=... enq_p99_ns=... enq_max_ns=... queued_ns=... cpus=8 max_active=0

  -> ``cache.items_per_sec``, ``cache.enq_p99_ns``, ... (every field);
* the in-tree wait mode, one line per scope (tab-separated)::

    test_workqueue:   cache            123456 items/sec<TAB>p50=...<TAB>p90=...<TAB>p95=... ns

  -> ``cache.items_per_sec``, ``cache.p50_ns``, ``cache.p90_ns``, ``cache.p95_ns``, and the
  ``running <threads> threads, <items> items/thread`` line -> ``threads``, ``items``;
* on a CONFIG_LOCK_STAT kernel, after ``lock_stat scope=<scope>``, lock_stat's header and the
  ``&pool->lock`` class -> ``cache.pool_lock.contentions``, ``cache.pool_lock.waittime_max_us``
  ... (see :mod:`lab.parse.lock_stat`).

A module error line (``mode=... scope=... error=-12``) fails the parse, as does a scope that
appears twice or an output without any result.
"""

from __future__ import annotations

import re

from lab.command import StageError
from lab.parse import lock_stat

SCOPES = ("cpu", "smt", "cache_shard", "cache", "numa", "system", "default")
_PREFIX = r"^(?:\[\s*\d+\.\d+\]\s*)?test_workqueue: "
_ERROR = re.compile(_PREFIX + r"mode=(\S+) scope=(\S+) error=(-?\d+)\s*$")
_BATCH = re.compile(_PREFIX + r"mode=batch scope=(\S+) (.*)$")
_PAIR = re.compile(r"^([a-z_0-9]+)=(\d+)$")
_WAIT = re.compile(_PREFIX + r"\s+(\S+)\s+(\d+) items/sec\s+"
                   r"p50=(\d+)\s+p90=(\d+)\s+p95=(\d+) ns\s*$")
_RUNNING = re.compile(_PREFIX + r"running (\d+) threads, (\d+) items/thread\s*$")
_LOCK_SCOPE = re.compile(r"^lock_stat scope=(\S+)\s*$")
_POOL_LOCK = re.compile(r"^&pool->lock(#\d+)?(/\d+)?$")
BATCH_FIELDS = ("producers", "items", "elapsed_ns", "items_per_sec", "enq_p50_ns", "enq_p99_ns",
                "enq_max_ns", "queued_ns", "cpus", "max_active")


def _scope(scope: str, seen: set[tuple[str, str]], what: str, source: str) -> str:
    if scope not in SCOPES:
        raise StageError(f"{source}: {what} line for unknown scope {scope!r}")
    if (what, scope) in seen:
        raise StageError(f"{source}: two {what} results for scope {scope}; the output mixes "
                         "runs (was the kernel log marker missing?)")
    seen.add((what, scope))
    return scope


def _batch(scope: str, rest: str, source: str) -> list[tuple[str, float]]:
    pairs = {}
    for token in rest.split():
        m = _PAIR.match(token)
        if not m:
            raise StageError(f"{source}: batch line field {token!r} is not key=<integer>")
        pairs[m[1]] = float(m[2])
    if tuple(pairs) != BATCH_FIELDS:
        raise StageError(f"{source}: batch line for scope {scope} has fields {list(pairs)}, "
                         f"expected {list(BATCH_FIELDS)} (truncated, or the module changed)")
    return [(f"{scope}.{k}", v) for k, v in pairs.items()]


def parse(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of a complete test_workqueue output (see the module docstring)."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    if not lines or lines[-1].strip() != "end=ok":
        last = lines[-1] if lines else "(empty)"
        raise StageError(f"{source}: truncated guest output: the last line is {last!r}, "
                         "not 'end=ok'")
    if lines[:-1] == ["skipped=1"]:
        return [("skipped", 1.0)]
    rows: list[tuple[str, float]] = []
    seen: set[tuple[str, str]] = set()
    results = 0
    lock_scope = ""
    for i, line in enumerate(lines[:-1]):
        if m := _ERROR.match(line):
            raise StageError(f"{source}: test_workqueue failed in mode {m[1]}, scope {m[2]}: "
                             f"error {m[3]} (line {line.strip()!r})")
        if m := _BATCH.match(line):
            rows += _batch(_scope(m[1], seen, "batch", source), m[2], source)
            results += 1
        elif m := _WAIT.match(line):
            scope = _scope(m[1], seen, "wait", source)
            rows += [(f"{scope}.items_per_sec", float(m[2])), (f"{scope}.p50_ns", float(m[3])),
                     (f"{scope}.p90_ns", float(m[4])), (f"{scope}.p95_ns", float(m[5]))]
            results += 1
        elif m := _RUNNING.match(line):
            rows += [("threads", float(m[1])), ("items", float(m[2]))]
        elif m := _LOCK_SCOPE.match(line):
            lock_scope = _scope(m[1], seen, "lock_stat", source)
            if i + 1 >= len(lines) - 1:
                raise StageError(f"{source}: truncated guest output: lock_stat for scope "
                                 f"{lock_scope} has no header")
            lock_stat.check_header(lines[i + 1], source)
            found = 0
            for nxt in lines[i + 2:-1]:
                if _LOCK_SCOPE.match(nxt) or re.match(_PREFIX, nxt):
                    break
                if (stats := lock_stat.class_stats(nxt)) and _POOL_LOCK.match(stats[0]):
                    found += 1
                    name = "pool_lock" + (stats[0][len("&pool->lock"):]) + (
                        f".{found}" if found > 1 else "")
                    rows += [(f"{lock_scope}.{name}.{k}", v) for k, v in stats[1].items()]
            if not found:
                raise StageError(f"{source}: lock_stat for scope {lock_scope} has no "
                                 "&pool->lock class (is this a CONFIG_LOCK_STAT kernel?)")
    if not results:
        raise StageError(f"{source}: no test_workqueue result line in the output "
                         "(did the module load? see the run's dmesg.txt)")
    return rows


PARSERS = {"test_workqueue": parse}
"""This chapter's parsers by the name its ``chapter.yaml`` workloads use."""
