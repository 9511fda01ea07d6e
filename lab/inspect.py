"""Evidence from a built kernel that does not depend on timing: which functions exist out of
line, who calls them, whether they sit in ``.sched.text``, and how long the code between two
probe instructions is.

A timed number from an emulator says little about a real CPU, but whether the compiler left
``finish_task_switch()`` as a separate function called from ``__schedule()``, and how many
instructions sit between the probe's two ``rdtsc``, is a property of the image and carries over
to any machine that runs it. Read with the toolchain root's ``nm`` and ``objdump``; the
functions to look for come from the series itself (every function a patch makes
``__always_inline``), so adding a patch needs no list kept by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.command import StageError

_ALWAYS_INLINE = re.compile(r"__always_inline\s+[\w\s\*]*?\b(\w+)\s*\(")
_NM = re.compile(r"^([0-9a-f]+) ([0-9a-f]+) [tTwW] (\S+)$")
_NM_ANY = re.compile(r"^([0-9a-f]+) (?:[0-9a-f]+ )?[A-Za-z] (\S+)$")
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
_TARGET = re.compile(r"<([^>+]+)(?:\+0x[0-9a-f]+)?>")


@dataclass(frozen=True)
class Insn:
    """One disassembled instruction: address, mnemonic, operands (objdump's text)."""

    address: int
    mnemonic: str
    operands: str

    @property
    def target(self) -> str | None:
        """The symbol a direct call or jump goes to (``<foo+0x10>`` -> ``foo``)."""
        m = _TARGET.search(self.operands)
        return m[1] if m else None


def forced_inline(patches: list[Path]) -> list[str]:
    """Functions the patches' added lines declare ``__always_inline``, in order, once each.

    A declaration may continue on an unchanged context line (``static __always_inline
    struct balance_callback *`` then the name), so each added ``__always_inline`` line is
    read together with the next line of the patched file."""
    names: list[str] = []
    for patch in patches:
        after = [(line[0], line[1:]) for line in patch.read_text().splitlines()
                 if line[:1] in ("+", " ") and not line.startswith("+++")]
        for k, (kind, text) in enumerate(after):
            if kind != "+" or "__always_inline" not in text:
                continue
            joined = text + (" " + after[k + 1][1] if "(" not in text and k + 1 < len(after)
                             else "")
            m = _ALWAYS_INLINE.search(joined)
            if m and m[1] not in names:
                names.append(m[1])
    return names


def symbols(nm_text: str) -> dict[str, int]:
    """Text symbols and their sizes from ``nm -S --defined-only`` output."""
    out: dict[str, int] = {}
    for line in nm_text.splitlines():
        if m := _NM.match(line.strip()):
            out[m[3]] = int(m[2], 16)
    return out


def addresses(nm_text: str) -> dict[str, int]:
    """Every defined symbol's address, sized or not (section markers such as
    ``__sched_text_start`` have no size)."""
    out: dict[str, int] = {}
    for line in nm_text.splitlines():
        if m := _NM_ANY.match(line.strip()):
            out.setdefault(m[2], int(m[1], 16))
    return out


def layout(addrs: dict[str, int]) -> dict[str, Any]:
    """Sizes of the kernel's ``.text`` and of its ``.sched.text`` part, from the linker's
    marker symbols; ``.sched.text`` is where ``__sched`` functions go, and a function outside
    it shows up in the wchan of every task it blocks (and in a different cache region)."""
    need = ("_stext", "_etext", "__sched_text_start", "__sched_text_end")
    missing = [n for n in need if n not in addrs]
    if missing:
        raise StageError(f"inspect: the vmlinux symbol table lacks {', '.join(missing)}; "
                         "is this an x86 vmlinux read with nm --defined-only?")
    return {"text_bytes": addrs["_etext"] - addrs["_stext"],
            "sched_text_bytes": addrs["__sched_text_end"] - addrs["__sched_text_start"]}


def in_sched_text(symbol: str, addrs: dict[str, int]) -> bool:
    """Whether ``symbol`` starts inside ``.sched.text``."""
    return addrs["__sched_text_start"] <= addrs[symbol] < addrs["__sched_text_end"]


def copies(function: str, syms: dict[str, int]) -> dict[str, int]:
    """Out-of-line copies of ``function``: its own symbol and compiler clones
    (``.isra.0``, ``.constprop.0``, ``.part.0``, ``.cold``)."""
    return {s: n for s, n in syms.items() if s == function or s.startswith(function + ".")}


def disassembly(objdump_text: str) -> list[Insn]:
    """Instructions of an ``objdump -d --no-show-raw-insn`` listing (one function)."""
    out = []
    for line in objdump_text.splitlines():
        m = _INSN.match(line)
        if m and not line.rstrip().endswith(">:"):
            out.append(Insn(int(m[1], 16), m[2], m[3].strip()))
    return out


def calls(insns: list[Insn]) -> list[str]:
    """Direct call targets in order (indirect calls appear as ``*indirect``)."""
    return [i.target or "*indirect" for i in insns if i.mnemonic.startswith("call")]


def probe_region(insns: list[Insn], marker: str = "rdtsc") -> dict[str, Any]:
    """The code between the first two ``marker`` instructions: what the probe times.

    Counted: instructions after the first marker up to and including the second, their
    bytes (address difference) and the calls among them. The instrument patch puts exactly
    two ``rdtsc`` in ``__schedule()``; another number is reported, and the region is then
    not the probe's, which the caller must treat as a failed inspection.
    """
    at = [k for k, i in enumerate(insns) if i.mnemonic == marker]
    if len(at) < 2:
        return {"markers": len(at)}
    first, second = at[0], at[1]
    region = insns[first + 1:second + 1]
    return {"markers": len(at), "instructions": len(region),
            "bytes": insns[second].address - insns[first].address,
            "calls": calls(region)}


_FUNCTION = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")


def call_sites(objdump_text: str, targets: list[str]) -> dict[str, dict[str, int]]:
    """Per target, the functions of the image that call it or tail-jump to it, and how often:
    ``{target: {caller: n}}`` from an ``objdump -d`` listing of the whole image (or of just
    its function headers and the lines naming a target). A change that swaps one callee for
    another shows here as counts that move between targets, whatever the compiler inlined."""
    out: dict[str, dict[str, int]] = {t: {} for t in targets}
    caller = ""
    for line in objdump_text.splitlines():
        if m := _FUNCTION.match(line):
            caller = m[1]
            continue
        m = _INSN.match(line)
        if not m or not (m[2].startswith("call") or m[2].startswith("jmp")):
            continue
        target = Insn(int(m[1], 16), m[2], m[3].strip()).target
        if target in out and "+0x" not in m[3]:
            out[target][caller] = out[target].get(caller, 0) + 1
    return out


def probe_targets(nm_text: str, functions: list[str]) -> dict[str, list[str]]:
    """Each function a chapter's probes attach to, with its out-of-line copies in the image.
    A probe by name sees every call only when the list is exactly ``[name]``: no copy means it
    was inlined, a clone (``.isra.0``) means some callers call something else."""
    syms = symbols(nm_text)
    return {fn: sorted(copies(fn, syms)) for fn in functions}


def evidence(nm_text: str, listings: dict[str, str], functions: list[str]) -> dict[str, Any]:
    """Combine symbols and caller listings into the JSON the manifest records."""
    syms = symbols(nm_text)
    addrs = addresses(nm_text)
    callers = {name: disassembly(text) for name, text in listings.items()}
    for name, insns in callers.items():
        if not insns:
            raise StageError(f"inspect: no instructions for {name} in the vmlinux; is the "
                             "symbol spelled as nm shows it?")
    out: dict[str, Any] = {"layout": layout(addrs), "functions": {}, "callers": {}}
    for fn in functions:
        found = copies(fn, syms)
        out["functions"][fn] = {
            "out_of_line": sorted(found),
            "bytes": sum(found.values()),
            "in_sched_text": sorted(c for c in found if in_sched_text(c, addrs)),
            "called_from": {c: sum(1 for t in calls(insns) if t in found)
                            for c, insns in callers.items()},
        }
    for name, insns in callers.items():
        out["callers"][name] = {"bytes": syms.get(name, 0), "instructions": len(insns),
                                "in_sched_text": in_sched_text(name, addrs),
                                "calls": len(calls(insns)),
                                "probe_region": probe_region(insns)}
    return out


_ABSOLUTE = re.compile(r"\b[0-9a-f]{8,16} (<[^>]+>)")


def listing(insns: list[Insn]) -> list[str]:
    """A function's instructions as text that compares across kernels: each line is the offset
    from the function's start, the mnemonic and the operands, with the absolute address before
    a ``<symbol+offset>`` dropped (it moves whenever anything earlier in the image grows)."""
    if not insns:
        return []
    start = insns[0].address
    return [f"{i.address - start:5x}: {i.mnemonic} {_ABSOLUTE.sub(_symbol, i.operands)}".rstrip()
            for i in insns]


def _symbol(m: re.Match[str]) -> str:
    return m[1]


def listings(nm_text: str, objdump: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """Listings of the functions a chapter names (``inspect: listings``), each from its own
    ``objdump --disassemble=<name>`` text: the listing file (``== name`` then its lines, per
    function; a function with no out-of-line copy is listed as inlined) and, for the manifest,
    each function's instruction and byte counts or ``inlined``."""
    syms = symbols(nm_text)
    text: list[str] = []
    summary: dict[str, Any] = {}
    for name, dump in objdump.items():
        if name not in syms:
            text.append(f"== {name}: inlined (no symbol of its own)")
            summary[name] = "inlined"
            continue
        lines = listing(disassembly(dump))
        text += [f"== {name}: {len(lines)} instructions, {syms[name]} bytes", *lines]
        summary[name] = {"instructions": len(lines), "bytes": syms[name]}
    return "".join(f"{line}\n" for line in text), summary
