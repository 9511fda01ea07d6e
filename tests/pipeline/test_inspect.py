"""lab.pipeline.inspect's whole-image call sites and probe targets, on listings captured from the
sched-ext chapter's baseline and patched vmlinux (2026-11-23; gcc-15, tinyconfig + sched-ext):
``objdump -d --no-show-raw-insn vmlinux`` filtered as the inspect stage filters it, cut to a
few functions, and ``nm -S --defined-only`` lines of the probed functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.command import StageError
from lab.pipeline import inspect, jumptable

FIXTURES = Path(__file__).parent / "fixtures"
TARGETS = ["irq_work_queue", "irq_work_queue_on"]


def test_the_patched_call_site_moves_between_targets() -> None:
    base = inspect.call_sites((FIXTURES / "callsites-baseline.txt").read_text(), TARGETS)
    patched = inspect.call_sites((FIXTURES / "callsites-patched.txt").read_text(), TARGETS)
    assert base["irq_work_queue"].get("schedule_deferred") == 1
    assert "schedule_deferred" not in base["irq_work_queue_on"]
    assert patched["irq_work_queue_on"].get("schedule_deferred") == 1
    assert "schedule_deferred" not in patched["irq_work_queue"]
    rest = {t: {f: n for f, n in c.items() if f != "schedule_deferred"} for t, c in base.items()}
    assert rest == {t: {f: n for f, n in c.items() if f != "schedule_deferred"}
                    for t, c in patched.items()}
    assert base["irq_work_queue"]  # other callers were found too


def test_calls_into_the_middle_of_a_target_do_not_count() -> None:
    listing = ("ffffffff81000000 <caller>:\n"
               "ffffffff81000010:\tcall   ffffffff81200010 <irq_work_queue+0x10>\n"
               "ffffffff81000020:\tjmp    ffffffff81200000 <irq_work_queue>\n")
    assert inspect.call_sites(listing, TARGETS) == {"irq_work_queue": {"caller": 1},
                                                   "irq_work_queue_on": {}}


def test_probe_targets_name_their_copies_and_clones() -> None:
    nm = (FIXTURES / "probe-targets-nm.txt").read_text()
    found = inspect.probe_targets(nm + "ffffffff81234560 0000000000000040 t foo.isra.0\n",
                                  ["dsq_inc_nr", "schedule_deferred", "foo", "bar"])
    assert found["dsq_inc_nr"] == ["dsq_inc_nr"]
    assert found["schedule_deferred"] == ["schedule_deferred"]
    assert found["foo"] == ["foo.isra.0"] and found["bar"] == []


def test_a_listing_compares_across_images_whatever_the_addresses() -> None:
    def dump(base: int) -> str:
        return (f"{base:016x} <free_to_pcs>:\n"
                f"{base:016x}:\tpush   %rbx\n"
                f"{base + 1:016x}:\tnopl   0x0(%rax,%rax,1)\n"
                f"{base + 6:016x}:\tcall   {base + 0x9000:016x} <migrate_disable+0x4>\n"
                f"{base + 11:016x}:\tret\n")
    nm = "ffffffff81000000 0000000000000010 t free_to_pcs\n"
    one, summary = inspect.listings(nm, {"free_to_pcs": dump(0xFFFFFFFF81000000),
                                         "alloc_from_pcs": ""})
    other, _ = inspect.listings(nm, {"free_to_pcs": dump(0xFFFFFFFF81234000),
                                     "alloc_from_pcs": ""})
    assert one == other
    assert one.splitlines() == ["== free_to_pcs: 4 instructions, 16 bytes", "    0: push %rbx",
                                "    1: nopl 0x0(%rax,%rax,1)", "    6: call <migrate_disable+0x4>",
                                "    b: ret",
                                "== alloc_from_pcs: no symbol of its own (inlined, or not in "
                                "this kernel)"]
    assert summary == {"free_to_pcs": {"instructions": 4, "bytes": 16},
                       "alloc_from_pcs": "no symbol"}


def _entry(at: int, code: int, target: int, key: int, branch: int) -> str:
    """One x86-64 jump entry at ``at`` as ``objdump -s`` prints 16 bytes: the three fields
    relative to their own addresses, the branch bit in the key's lowest bit."""
    raw = ((code - at).to_bytes(4, "little", signed=True)
           + (target - at - 4).to_bytes(4, "little", signed=True)
           + (key - at - 8 + branch).to_bytes(8, "little", signed=True))
    words = " ".join(raw[k:k + 4].hex() for k in range(0, 16, 4))
    return f" {at:016x} {words}  ................\n"


def test_static_branch_sites_name_their_key_and_where_they_jump() -> None:
    fn, table, key = 0xFFFFFFFF81000000, 0xFFFFFFFF82000000, 0xFFFFFFFF83000010
    addrs = {"free_to_pcs": fn, "pw_sl": key, "__tracepoint_kfree": key + 0x100}
    dump = ("vmlinux:     file format elf64-x86-64\n\nContents of section .data:\n"
            + _entry(table, fn + 1, fn + 11, key, 0)
            + _entry(table + 16, fn + 6, fn - 0x40, key + 0x108, 1))
    branches = jumptable.static_branches(dump, addrs)
    assert branches == {
        fn + 1: jumptable.StaticBranch(fn + 1, fn + 11, "pw_sl", True),
        fn + 6: jumptable.StaticBranch(fn + 6, fn - 0x40, "__tracepoint_kfree+0x8", False)}
    nm = f"{fn:016x} 0000000000000010 t free_to_pcs\n"
    listing = (f"{fn:016x} <free_to_pcs>:\n{fn:016x}:\tpush   %rbx\n"
               f"{fn + 1:016x}:\tnopl   0x0(%rax,%rax,1)\n{fn + 6:016x}:\txchg   %ax,%ax\n"
               f"{fn + 8:016x}:\tpop    %rbx\n{fn + 11:016x}:\tret\n")
    text, summary = inspect.listings(nm, {"free_to_pcs": listing}, branches)
    assert text.splitlines()[2:4] == [
        "    1: nopl 0x0(%rax,%rax,1)  # static branch pw_sl: jmp +0xb when on",
        "    6: xchg %ax,%ax  # static branch __tracepoint_kfree+0x8: jmp outside, -0x46 when off"]
    assert summary["free_to_pcs"]["static_branches"] == 2


def test_a_torn_jump_table_is_refused() -> None:
    at, fn = 0xFFFFFFFF82000000, 0xFFFFFFFF81000000
    one = _entry(at, fn, fn, fn, 0)
    with pytest.raises(StageError, match="not whole"):
        jumptable.static_branches(one[:len(" ffffffff82000000 00000000")] + "\n", {})
    with pytest.raises(StageError, match="gap"):
        jumptable.static_branches(one + _entry(at + 32, fn, fn, fn, 0), {})
