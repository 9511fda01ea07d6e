"""lab.inspect's whole-image call sites and probe targets, on listings captured from the
sched-ext chapter's baseline and patched vmlinux (2026-11-23; gcc-15, tinyconfig + sched-ext):
``objdump -d --no-show-raw-insn vmlinux`` filtered as the inspect stage filters it, cut to a
few functions, and ``nm -S --defined-only`` lines of the probed functions."""

from __future__ import annotations

from pathlib import Path

from lab import inspect

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
                                "    b: ret", "== alloc_from_pcs: inlined (no symbol of its own)"]
    assert summary == {"free_to_pcs": {"instructions": 4, "bytes": 16},
                       "alloc_from_pcs": "inlined"}
