"""Parsers of guest outputs that any chapter may use; a chapter adds its own in its
``parse.py`` (``PARSERS``), which :meth:`lab.chapters.Chapter.parsers` merges over these.

A parser takes the text a workload printed and returns ``(metric, value)`` pairs; it fails
with :class:`lab.command.StageError` when the text is incomplete, because a truncated output
silently parsed would put a wrong number into the book.
"""

from __future__ import annotations

from collections.abc import Callable

from lab.parse import keyvalue, sections

PARSERS: dict[str, Callable[[str, str], list[tuple[str, float]]]] = {
    "keyvalue": keyvalue.parse,
    "sections": sections.parse,
}
"""Parser name (as a workload's ``parser:`` says) to function(text, source name)."""
