"""Kernel configuration: fragments merged onto a starting config, then checked.

``olddefconfig`` silently drops an option whose dependencies are not met, and a chapter that
asked for ``CONFIG_LOCK_STAT=y`` and measured without it would be wrong without anyone
noticing. So after merging, every option a fragment requested is compared with the final
``.config`` and the stage fails listing each dropped option and the fragment that asked for it.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from lab.command import StageError

_SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


@dataclass(frozen=True)
class Request:
    """One option a fragment asks for."""

    option: str
    value: str
    fragment: Path


def parse(text: str) -> dict[str, str]:
    """Parse ``.config`` syntax into ``{CONFIG_X: value}``; ``is not set`` becomes ``n``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if m := _SET.match(line):
            out[m[1]] = m[2]
        elif m := _UNSET.match(line):
            out[m[1]] = "n"
    return out


def requests(fragments: list[Path]) -> dict[str, Request]:
    """Merge the fragments' options in order; a later fragment overrides an earlier one."""
    merged: dict[str, Request] = {}
    for frag in fragments:
        for option, value in parse(frag.read_text()).items():
            merged[option] = Request(option, value, frag)
    return merged


def merged_text(fragments: list[Path]) -> str:
    """The text appended to the starting config before ``olddefconfig``."""
    return "".join(f"# from {f.name}\n{f.read_text()}\n" for f in fragments)


def dropped(final: dict[str, str], wanted: dict[str, Request]) -> list[str]:
    """List the requested options whose final value differs, one readable line each."""
    lines = []
    for option, req in sorted(wanted.items()):
        got = final.get(option, "n")
        if got != req.value:
            shown = "not set" if got == "n" else got
            lines.append(f"{option}={req.value} (from {req.fragment.name}) is now {shown}")
    return lines


def check(config: Path, wanted: dict[str, Request], name: str = "") -> None:
    """Fail if ``olddefconfig`` changed any requested option, listing all of them."""
    lost = dropped(parse(config.read_text()), wanted)
    if lost:
        raise StageError(
            f"{name or config}: olddefconfig dropped or changed {len(lost)} requested "
            "option(s):\n  "
            + "\n  ".join(lost)
            + "\nfix: add the options they depend on to the fragment (see `depends on` in the"
            " option's Kconfig entry), or remove the request"
        )


def sha256(config: Path) -> str:
    """Hash a ``.config`` as bytes: it names the build directory and goes in the manifest."""
    return hashlib.sha256(config.read_bytes()).hexdigest()


def install(config: Path, build_dir: Path) -> None:
    """Put ``config`` into ``build_dir`` only if it differs, so make sees no needless change."""
    dest = build_dir / ".config"
    if dest.is_file() and dest.read_bytes() == config.read_bytes():
        return
    build_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(config, dest)
