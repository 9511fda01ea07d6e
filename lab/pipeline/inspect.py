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

import argparse
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import from_repo
from lab.command import StageError, run
from lab.pipeline import arch as arches
from lab.pipeline import build, crosslayer, jumptable, series, toolchain
from lab.pipeline.experiment import KernelJob
from lab.pipeline.jumptable import StaticBranch
from lab.pipeline.stamps import BuildStamp, InspectStamp, stage

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


_ARM_CALLS = ("bl", "blx", "blr")
"""Arm's calls: branch with link (``blr``: through a register, so indirect)."""


def is_call(insn: Insn) -> bool:
    """Whether an instruction is a call, on x86 (``call``) or Arm (``bl``, ``blx``,
    ``blr``; objdump may add a condition or width suffix on arm32, ``bl.w``)."""
    return insn.mnemonic.startswith("call") or insn.mnemonic.split(".")[0] in _ARM_CALLS


def calls(insns: list[Insn]) -> list[str]:
    """Direct call targets in order (indirect calls appear as ``*indirect``)."""
    return [i.target or "*indirect" for i in insns if is_call(i)]


def counter_read(insn: Insn) -> bool:
    """Whether an instruction reads the probe's counter: ``rdtsc`` on x86, a read of the
    virtual counter on arm64 (``mrs <reg>, cntvct_el0``) and on arm (``mrrc p15, 1, ...,
    c14``: CNTVCT)."""
    ops = insn.operands.replace(" ", "").lower().split(",")
    # GNU objdump writes the arm read "15, 1, r2, r3, cr14", LLVM's "p15, #0x1, r2, r3, c14"
    return (insn.mnemonic == "rdtsc"
            or (insn.mnemonic == "mrs" and ops[-1] == "cntvct_el0")
            or (insn.mnemonic.startswith("mrrc") and len(ops) == 5
                and ops[0].lstrip("p") == "15" and ops[1].lstrip("#") in ("1", "0x1")
                and ops[4] in ("c14", "cr14")))


def probe_region(insns: list[Insn]) -> dict[str, Any]:
    """The code between the first two counter reads (:func:`counter_read`): what the probe
    times.

    Counted: instructions after the first read up to and including the second, their bytes
    (address difference) and the calls among them. The instrument patch puts exactly two
    reads in ``__schedule()``; another number is reported, and the region is then not the
    probe's, which the caller must treat as a failed inspection.
    """
    at = [k for k, i in enumerate(insns) if counter_read(i)]
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


def listing(insns: list[Insn], branches: dict[int, StaticBranch] | None = None) -> list[str]:
    """A function's instructions as text that compares across kernels: each line is the offset
    from the function's start, the mnemonic and the operands, with the absolute address before
    a ``<symbol+offset>`` dropped (it moves whenever anything earlier in the image grows).
    A static-branch site carries a comment naming its key and where it jumps (an offset in
    the function, or ``<symbol+offset>`` outside it) and whether the key on or off makes it a
    jump."""
    if not insns:
        return []
    start, end = insns[0].address, insns[-1].address
    lines = []
    for i in insns:
        line = f"{i.address - start:5x}: {i.mnemonic} {_ABSOLUTE.sub(_symbol, i.operands)}".rstrip()
        if branches and (b := branches.get(i.address)):
            where = (f"+{b.target - start:#x}" if start <= b.target <= end
                     else f"outside, {b.target - i.address:+#x}")
            line += (f"  # static branch {b.key}: jmp {where} when "
                     f"{'on' if b.jumps_when_on else 'off'}")
        lines.append(line)
    return lines


def _symbol(m: re.Match[str]) -> str:
    return m[1]


def listings(nm_text: str, objdump: dict[str, str],
             branches: dict[int, StaticBranch] | None = None) -> tuple[str, dict[str, Any]]:
    """Listings of the functions a chapter names (``inspect: listings``), each from its own
    ``objdump --disassemble=<name>`` text, with their static-branch sites annotated
    (:func:`static_branches`): the listing file (``== name`` then its lines, per function; a
    function without a symbol is listed as such: inlined everywhere, or not in this kernel) and,
    for the manifest, each function's instruction and byte counts and static-branch sites, or
    ``no symbol``."""
    syms = symbols(nm_text)
    text: list[str] = []
    summary: dict[str, Any] = {}
    for name, dump in objdump.items():
        if name not in syms:
            text.append(f"== {name}: no symbol of its own (inlined, or not in this kernel)")
            summary[name] = "no symbol"
            continue
        insns = disassembly(dump)
        lines = listing(insns, branches)
        text += [f"== {name}: {len(lines)} instructions, {syms[name]} bytes", *lines]
        summary[name] = {"instructions": len(lines), "bytes": syms[name]}
        if branches is not None:
            summary[name]["static_branches"] = sum(i.address in branches for i in insns)
    return "".join(f"{line}\n" for line in text), summary


def cmd_inspect(a: argparse.Namespace) -> None:
    """Clock-free evidence from the variant's vmlinux (:mod:`lab.pipeline.inspect`, the root's
    binutils),
    as the experiment's ``inspect:`` asks: ``callers`` records the out-of-line copies of every
    function the series forces inline and the callers' probe region; ``calls`` every call site
    of the named functions; ``probes`` the out-of-line copies of each probe target. Image
    sizes are the build's."""
    job: KernelJob = a.job
    artifacts = Path(BuildStamp.read(a.build).artifacts)
    root = crosslayer.tree_of(a.root)
    # binutils of the image's architecture: the cross layer's <triplet>-nm on Arm
    prefix = f"{arches.get(job.arch).triplet}-" if arches.get(job.arch).cross else ""
    wanted = job.inspect
    callers = list(wanted.get("callers", []))
    found: dict[str, Any] = {}
    listing_file: Path | None = None
    with stage("inspect", f"{job.chapter}/{job.variant}", None):

        def tool(*argv: str) -> str:
            program = prefix + argv[0] if argv[0] in ("nm", "objdump") else argv[0]
            return run(toolchain.in_root(root, [program, *argv[1:]], {artifacts: build.BUILD}),
                       what=f"{program} of {job.variant}'s vmlinux").stdout
        nm = (tool("nm", "-S", "--defined-only", f"{build.BUILD}/vmlinux")
              if callers or wanted.get("probes") or wanted.get("listings") else "")
        if callers:
            ser = series.load(from_repo(job.series))
            functions = forced_inline([p for p in ser.patches
                                               if p not in ser.instrument])
            objdumps = {c: tool("objdump", "-d", "--no-show-raw-insn", f"--disassemble={c}",
                                f"{build.BUILD}/vmlinux") for c in callers}
            found = evidence(nm, objdumps, functions)
        if wanted.get("calls"):
            # the whole image's listing is large: keep function headers and lines naming a target
            names = "|".join(re.escape(t) for t in wanted["calls"])
            listing = tool("sh", "-c", f"{prefix}objdump -d --no-show-raw-insn "
                           f"{build.BUILD}/vmlinux | "
                           f"grep -E '^[0-9a-f]+ <|<({names})>$' || true")
            found["call_sites"] = call_sites(
                listing, list(wanted["calls"]))
        if wanted.get("probes"):
            targets = probe_targets(nm, list(wanted["probes"]))
            bad = {fn: found for fn, found in targets.items() if found != [fn]}
            if bad:
                raise StageError(
                    f"{job.chapter}/{job.variant}: probe targets not out of line under their own "
                    f"name in the vmlinux: {bad} ([] = inlined everywhere, a .isra/.constprop name "
                    f"= a clone the probe would miss). Fix: mark them noinline in the "
                    f"chapter's instrument patch, or probe their callers")
            found["probe_targets"] = targets
        if wanted.get("listings"):
            # the listing itself is raw output of the run (publish keeps it per build); the
            # manifest records each function's size
            # static-branch sites: the jump table lies between two linker symbols, which a
            # kernel without CONFIG_JUMP_LABEL does not have (its branches are plain tests)
            addrs = addresses(nm)
            start, stop = (addrs.get(f"__{e}___jump_table", 0) for e in ("start", "stop"))
            branches = jumptable.static_branches(tool(
                "objdump", "-s", f"--start-address={start:#x}", f"--stop-address={stop:#x}",
                f"{build.BUILD}/vmlinux"), addrs) if start < stop else {}
            text, summary = listings(nm, {
                fn: tool("objdump", "-d", "--no-show-raw-insn", f"--disassemble={fn}",
                         f"{build.BUILD}/vmlinux") for fn in wanted["listings"]}, branches)
            listing_file = Path(a.out).with_suffix(".s")
            listing_file.write_text(text)
            found["listings"] = summary
    InspectStamp(variant=job.variant, build=job.build, evidence=found or None,
                 listing=str(listing_file) if listing_file else None).write(a.out)
