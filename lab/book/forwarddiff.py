"""A revert shown the way it was posted: the ``kb-forward-diff`` directive.

A chapter whose baseline reverts merged commits keeps the reverts under ``patches/``, because
those are what the pipeline applies; a reader wants the change itself. The directive reads a
revert patch and shows its diff turned around (old and new sides swapped, removals before
additions in each run of changes), so the page shows the forward change from the very file
the kernels were built from, and never a second copy of it that could drift.

    ```{kb-forward-diff} ../patches/io-wq/revert/0003-Revert-....patch
    :caption: 4/8 forward (the revert read the other way round)
    ```
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.directives.code import container_wrapper
from sphinx.util.docutils import SphinxDirective

_HUNK = re.compile(r"^@@ -(\d+(?:,\d+)?) \+(\d+(?:,\d+)?) @@(.*)$")


def _length(spec: str) -> int:
    """The line count of a hunk range (``12,3`` is 3 lines, ``12`` one)."""
    return int(spec.split(",")[1]) if "," in spec else 1


def reverse(diff: str) -> str:
    """The unified diff ``diff`` (git's layout, from ``diff --git`` on) the other way round.

    File headers swap their ``a/``-``b/`` sides, hunk headers their ranges, and each run of
    ``-``/``+`` lines becomes the other's, removals first. Hunk lines are counted from their
    header, so a removed line that itself starts with ``--`` is never taken for a file header.
    Reversing twice gives the input back, up to the order inside a run, which a diff made by
    git already has."""
    out: list[str] = []
    minus: list[str] = []
    plus: list[str] = []
    old_left = new_left = 0
    old_header = ""

    def flush() -> None:
        out.extend(minus + plus)
        minus.clear()
        plus.clear()

    for line in diff.splitlines():
        if old_left or new_left:
            if line.startswith("-"):
                plus.append("+" + line[1:])
                old_left -= 1
            elif line.startswith("+"):
                minus.append("-" + line[1:])
                new_left -= 1
            else:
                flush()
                out.append(line)
                if not line.startswith("\\"):
                    old_left, new_left = old_left - 1, new_left - 1
            continue
        flush()
        if line.startswith("diff --git "):
            a, b = line[len("diff --git "):].split(" ", 1)
            out.append(f"diff --git a/{b[2:]} b/{a[2:]}")
        elif line.startswith("--- "):
            old_header = line[4:]
        elif line.startswith("+++ "):
            new_header = line[4:]
            out.append("--- " + (new_header if new_header == "/dev/null"
                                 else "a/" + new_header.removeprefix("b/")))
            out.append("+++ " + (old_header if old_header == "/dev/null"
                                 else "b/" + old_header.removeprefix("a/")))
        elif m := _HUNK.match(line):
            out.append(f"@@ -{m[2]} +{m[1]} @@{m[3]}")
            old_left, new_left = _length(m[1]), _length(m[2])
        elif line.startswith("new file mode "):
            out.append("deleted file mode " + line[len("new file mode "):])
        elif line.startswith("deleted file mode "):
            out.append("new file mode " + line[len("deleted file mode "):])
        elif line.startswith("index "):
            ids, _, mode = line[len("index "):].partition(" ")
            before, _, after = ids.partition("..")
            out.append(f"index {after}..{before}" + (f" {mode}" if mode else ""))
        else:
            out.append(line)
    flush()
    return "\n".join(out) + "\n"


def diff_part(patch: str, source: str) -> str:
    """The diff of a ``git format-patch`` file: from its first ``diff --git`` to the
    signature separator (``-- `` on a line of its own), without the message and stat."""
    start = patch.find("diff --git ")
    if start < 0:
        raise ValueError(f"{source}: no 'diff --git' line: not a patch")
    body = patch[start:]
    end = body.find("\n-- \n")
    return body if end < 0 else body[:end + 1]


class KbForwardDiff(SphinxDirective):
    """``kb-forward-diff <revert patch>``: the patch's diff reversed, as a diff code block."""

    required_arguments = 1
    option_spec: ClassVar[dict[str, Any]] = {"caption": directives.unchanged_required,
                                             "name": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        rel, path = self.env.relfn2path(self.arguments[0])
        self.env.note_dependency(rel)
        try:
            patch = Path(path).read_text()
            text = reverse(diff_part(patch, rel))
        except (OSError, ValueError) as exc:
            raise self.error(f"kb-forward-diff: {exc}") from exc
        literal = nodes.literal_block(text, text, language="diff")
        literal["classes"].append("kb-forward-diff")
        self.add_name(literal)
        if "caption" in self.options:
            literal = container_wrapper(self, literal, self.options["caption"])
        return [literal]


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the directive."""
    app.add_directive("kb-forward-diff", KbForwardDiff)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
