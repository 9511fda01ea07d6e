"""The kernel's jump table, read from a ``vmlinux`` with ``objdump -s``: every
``static_branch_*()`` site, the key that flips it and where it then jumps, for the listings
the inspect stage keeps (:func:`lab.pipeline.inspect.listings`)."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from lab.command import StageError


def symbol_at(address: int, named: list[tuple[int, str]]) -> str:
    """``symbol`` or ``symbol+0xoff`` for the nearest symbol at or below ``address``."""
    k = bisect.bisect_right(named, (address, chr(0x10FFFF))) - 1
    if k < 0:
        return f"{address:#x}"
    base, name = named[k]
    return name if base == address else f"{name}+{address - base:#x}"


@dataclass(frozen=True)
class StaticBranch:
    """One ``static_branch_*()`` site from the image's jump table: the 2- or 5-byte NOP or
    ``jmp`` at ``code`` that the kernel rewrites when ``key`` flips, the ``target`` it then
    jumps to, and which state of the key makes it a jump (``jumps_when_on``: the entry's
    branch bit clear, as for ``static_branch_unlikely()`` on a key that is off by default)."""

    code: int
    target: int
    key: str
    jumps_when_on: bool


_HEXDUMP = re.compile(r"^ ([0-9a-f]{16}) ((?:[0-9a-f]{2,8} ?){1,4})")
JUMP_ENTRY_BYTES = 16
"""x86-64's ``struct jump_entry`` with relative references: ``s32 code``, ``s32 target``,
``long key``, each an offset from its own field (include/linux/jump_label.h); the key's two
low bits are flags, bit 0 the branch direction."""


def static_branches(hexdump: str, addrs: dict[str, int]) -> dict[int, StaticBranch]:
    """The jump table from ``objdump -s`` between ``__start___jump_table`` and
    ``__stop___jump_table`` (x86-64), by code address. Listings show a disabled site as a NOP
    and nothing says where it would go: this is where a reader learns what ``pwlocks=1`` or a
    tracepoint turns on. Each key is named by the symbol it lies in (``__tracepoint_kfree+0x8``:
    the key inside a tracepoint)."""
    data = bytearray()
    start = None
    for line in hexdump.splitlines():
        if m := _HEXDUMP.match(line):
            if start is None:
                start = int(m[1], 16)
            elif int(m[1], 16) != start + len(data):
                raise StageError("inspect: the jump table dump has a gap at "
                                 f"{m[1]}; was it read with objdump -s?")
            data += bytes.fromhex(m[2].replace(" ", ""))
    if start is None or len(data) % JUMP_ENTRY_BYTES:
        raise StageError(f"inspect: a jump table of {len(data)} bytes is not whole "
                         f"{JUMP_ENTRY_BYTES}-byte entries; is this an x86-64 vmlinux?")
    named = sorted((a, n) for n, a in addrs.items())
    out: dict[int, StaticBranch] = {}
    for at in range(start, start + len(data), JUMP_ENTRY_BYTES):
        raw = data[at - start:at - start + JUMP_ENTRY_BYTES]
        code, target = (int.from_bytes(raw[k:k + 4], "little", signed=True) for k in (0, 4))
        key = int.from_bytes(raw[8:16], "little", signed=True)
        out[(at + code) % 2**64] = StaticBranch(
            (at + code) % 2**64, (at + 4 + target) % 2**64,
            symbol_at((at + 8 + (key & ~3)) % 2**64, named), not key & 1)
    return out
