"""Parsers of guest outputs: each turns one raw output file into tidy rows.

A parser takes the text a workload printed and returns ``(metric, value)`` pairs; it fails
with :class:`lab.command.StageError` when the text is incomplete, because a truncated output
silently parsed would put a wrong number into the book.
"""

from __future__ import annotations

from collections.abc import Callable

from lab.parse import keyvalue, sched_test, workqueue_bench

PARSERS: dict[str, Callable[[str, str], list[tuple[str, float]]]] = {
    "keyvalue": keyvalue.parse,
    "test_workqueue": workqueue_bench.parse,
    "sched_test": sched_test.parse,
}
"""Parser name (as the experiment's ``parser:`` says) to function(text, source name)."""
