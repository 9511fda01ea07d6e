"""Reading the lock sites of the PW locks from a kernel's listing (qpw.pw_sites,
qpw.site_table's counting), on excerpts of the listings lab.inspect wrote for the dyn-pw-0 and
rt-pw-0 kernels of 2026-11-26 (gcc 15, tinyconfig + qpw): __kmalloc_noprof, kfree and the
callees of their sites."""

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
    assert lock.calls == ["_raw_spin_trylock"] and unlock.calls == ["_raw_spin_unlock"]
    # the block replaces local_trylock(): preempt_disable() and the acquired flag set to 1
    assert lock.skipped[0].mnemonic == "incl"
    assert any(x.text.endswith("movb $0x1,(%rax)") for x in lock.skipped)
    assert any(x.text.endswith("movb $0x0,(%rdi)") for x in unlock.skipped)
    trylock = qpw.straight_path(functions["_raw_spin_trylock"])
    assert sum(x.mnemonic == "lock" for x in trylock) == 1  # one locked cmpxchg
    counted = [1 + len(s.block) + len(qpw.straight_path(functions[s.calls[0]])) - len(s.skipped)
               for s in (lock, unlock)]
    assert counted == [10, 8]


def test_a_block_that_rejoins_through_the_inline_path_s_own_jump_counts_that_jump() -> None:
    _, (_, unlock) = _sites("dyn-pw-0", "kfree")
    assert [x.mnemonic for x in unlock.skipped] == ["add", "movb", "decl", "jne"]


def test_an_rt_lock_site_jumps_over_the_hardirq_and_nmi_test() -> None:
    _, (lock, unlock) = _sites("rt-pw-0", "__kmalloc_noprof")
    assert lock.block == []
    assert [x.mnemonic for x in lock.skipped] == ["testb", "jne"]
    assert "<__preempt_count+0x2>" in lock.skipped[0].operands
    assert unlock.calls == ["rt_spin_unlock"]
    assert any(x.operands == "<__migrate_enable>" for x in unlock.skipped)
    _, (free_lock, free_unlock) = _sites("rt-pw-0", "kfree")
    assert [x.mnemonic for x in free_lock.skipped] == ["testb", "je"]
    assert free_unlock.skipped == [] and free_unlock.block == []  # arms merged by gcc


def test_a_path_that_ends_in_a_tail_call_is_not_taken_for_straight() -> None:
    functions = qpw.listings(FIXTURES / "listing-rt-pw-0.s")
    with pytest.raises(ValueError, match="tail call"):
        qpw.straight_path(functions["rt_spin_unlock"])


def test_a_listing_in_another_format_is_refused_with_its_file(tmp_path: Path) -> None:
    bad = tmp_path / "disassembly.txt"
    bad.write_text("== kfree: 2 instructions, 8 bytes\n    0: endbr64\nffffffff81000000 <kfree>:\n")
    with pytest.raises(ValueError, match=str(bad)):
        qpw.listings(bad)
