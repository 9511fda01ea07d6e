"""Reading the lock sites of the PW locks from a kernel's listing (qpw.pw_sites,
qpw.callee_path), on excerpts of the listings lab.pipeline.inspect wrote for the dyn-pw-0 and
rt-pw-0
kernels of 2026-11-26 (gcc 15, tinyconfig + qpw): __kmalloc_noprof, kfree and the functions
their sites call."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import chapters

qpw = chapters.get("qpw").module("analysis")
FIXTURES = Path(__file__).parent / "fixtures"


def _sites(kernel: str, function: str) -> tuple[dict, list]:
    functions = qpw.listings(FIXTURES / f"listing-{kernel}.s")
    return functions, qpw.pw_sites(functions, function)


def test_a_dynamic_kernel_s_sites_jump_out_of_line_to_the_spinlock_and_back() -> None:
    functions, (lock, unlock) = _sites("dyn-pw-0", "__kmalloc_noprof")
    assert (lock.site.mnemonic, unlock.site.mnemonic) == ("nopl", "nopl")
    assert lock.calls(lock.on) == ["_raw_spin_trylock"]
    assert unlock.calls(unlock.on) == ["_raw_spin_unlock"]
    # the key-off arm is local_trylock(): preempt_disable() and the acquired flag set to 1
    assert lock.off[1].mnemonic == "incl"
    assert any(x.text.endswith("movb $0x1,(%rax)") for x in lock.off)
    assert any(x.text.endswith("movb $0x0,(%rdi)") for x in unlock.off)
    trylock = qpw.callee_path(functions, "_raw_spin_trylock")
    assert sum(x.mnemonic == "lock" for x in trylock) == 1 and trylock[-1].mnemonic == "ret"
    assert [len(lock.on) + len(trylock) - len(lock.off),
            len(unlock.on) + len(qpw.callee_path(functions, "_raw_spin_unlock"))
            - len(unlock.off)] == [9, 7]


def test_an_arm_that_rejoins_through_the_inline_path_s_own_jump_counts_that_jump() -> None:
    _, (lock, unlock) = _sites("dyn-pw-0", "kfree")
    assert [x.mnemonic for x in unlock.off] == ["nopl", "add", "movb", "decl", "jne"]
    # the inline path loops back to the function's head later on: not a way to the target
    assert len(lock.on) > 1 and lock.calls(lock.on) == ["_raw_spin_trylock"]


def test_an_rt_lock_site_jumps_over_the_hardirq_and_nmi_test() -> None:
    _, (lock, _unlock) = _sites("rt-pw-0", "__kmalloc_noprof")
    assert len(lock.on) == 1
    assert [x.mnemonic for x in lock.off] == ["xchg", "testb", "jne"]
    assert lock.off[1].operands.startswith("$0xff,")
    assert "<__preempt_count+0x2>" in lock.off[1].operands
    _, (free_lock, free_unlock) = _sites("rt-pw-0", "kfree")
    assert [x.mnemonic for x in free_lock.off] == ["xchg", "testb", "je"]
    assert free_unlock.on == free_unlock.off == [free_unlock.site]  # arms merged by gcc


def test_an_rt_unlock_arm_follows_the_benchmark_s_nested_migrate_enable() -> None:
    functions, (_, unlock) = _sites("rt-pw-0", "__kmalloc_noprof")
    assert qpw.migration_field(functions) == "0x338("
    # key on: migrate_enable() inline, the nested branch taken (count above 1), back
    assert [x.mnemonic for x in unlock.on] == ["nopl", "add", "call", "movzwl", "cmp", "ja",
                                               "sub", "mov", "jmp"]
    assert unlock.calls(unlock.off) == ["rt_spin_unlock", "__migrate_enable"]
    enable = qpw.callee_path(functions, "__migrate_enable")
    assert [x.mnemonic for x in enable] == ["mov", "movzwl", "cmp", "ja", "sub", "mov", "ret"]


def test_a_path_that_ends_in_a_tail_call_has_no_count() -> None:
    functions = qpw.listings(FIXTURES / "listing-rt-pw-0.s")
    assert qpw.callee_path(functions, "rt_spin_unlock") is None
    assert qpw.callee_path(functions, "no_such_function") is None


def test_a_listing_in_another_format_is_refused_with_its_file(tmp_path: Path) -> None:
    bad = tmp_path / "disassembly.txt"
    bad.write_text("== kfree: 2 instructions, 8 bytes\n    0: endbr64\nffffffff81000000 <kfree>:\n")
    with pytest.raises(ValueError, match=str(bad)):
        qpw.listings(bad)
