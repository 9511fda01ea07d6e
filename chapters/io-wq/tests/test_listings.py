"""The code facts the chapter's rows rest on, counted in the inspect stage's listings of the
kernels of run 20261127T054602Z-auto (fixtures ``listing-<variant>.s.gz``, made by ``python -m
lab.pipeline inspect`` from the images whose bzImage sha256 that run's manifest records: k2
129597db..., k1 d05d95d9..., lockstat-k2 7c783dc4..., lockstat-k1 0b9d82d3...; later runs keep
the same listings as ``raw/<variant>/disassembly.txt.gz``).

* The step of 4/8 and 1/8 (k2 to k1) makes the enqueue's acct->lock section, for an unhashed
  item, eight instructions shorter behind a non-empty work list and twelve into an empty one
  (the hold and contention rows).
* In the worker loop it changes only two reloads of work->flags, on the hashed path and in the
  exiting test, so no changed instruction runs there for the flood's NOPs (the contradicted
  row of 4/8's listing)."""

from __future__ import annotations

import gzip
import re
from collections import Counter
from pathlib import Path

import pytest

from lab import chapters

iowq = chapters.get("io-wq").module("analysis")
FIXTURES = Path(__file__).parent / "fixtures"
_LINE = re.compile(r"^\s*([0-9a-f]+): (.*)$")
_JUMP = re.compile(r"^(j\w+)\s+<\w+\+0x([0-9a-f]+)>")


def listing(variant: str, function: str) -> list[tuple[int, str]]:
    """(offset, instruction) of one function in a kept listing."""
    text = gzip.decompress((FIXTURES / f"listing-{variant}.s.gz").read_bytes()).decode()
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("== "):
            inside = line.startswith(f"== {function}:")
        elif inside and (m := _LINE.match(line)):
            lines.append((int(m[1], 16), m[2]))
    return lines


def locked_path(code: list[tuple[int, str]], taken: dict[int, bool]) -> list[str]:
    """The instructions run between the first ``_raw_spin_lock`` call and the unlock, with
    each conditional jump taken or not as ``taken`` says (a jump it does not name fails)."""
    at = {offset: i for i, (offset, _) in enumerate(code)}
    i = next(i for i, (_, text) in enumerate(code) if text == "call <_raw_spin_lock>") + 1
    path = []
    while not code[i][1].startswith("call <_raw_spin_unlock>"):
        offset, text = code[i]
        path.append(text)
        jump = _JUMP.match(text)
        if jump and (jump[1] == "jmp" or taken[offset]):
            i = at[int(jump[2], 16)]
        else:
            i += 1
    return path


# the jumps on the way: the hashed test (an unhashed item jumps), then the list's tail test
UNHASHED = {"lockstat-k2": (0xb5, 0x223), "lockstat-k1": (0xa7, 0x208)}


@pytest.mark.parametrize(("empty", "fewer"), [(False, 8), (True, 12)])
def test_the_step_of_4of8_and_1of8_takes_a_few_instructions_out_of_the_enqueue_section(
        empty: bool, fewer: int) -> None:
    paths = {}
    for variant, (hashed, tail) in UNHASHED.items():
        paths[variant] = locked_path(listing(variant, "io_wq_enqueue"),
                                     {hashed: True, tail: empty})
    # k2 (before the two patches) runs the longer section, as the chapter's analysis says
    assert len(paths["lockstat-k2"]) - len(paths["lockstat-k1"]) == fewer
    assert (len(paths["lockstat-k2"]), len(paths["lockstat-k1"])) == (
        iowq.SECTION["k2"][empty], iowq.SECTION["k1"][empty])
    # the two loads of work->flags the patches remove (one 1/8's, one 4/8's), and the class's
    # address that k2 computes again
    flags = [t for t in paths["lockstat-k2"] if t.startswith("mov 0x8(%rbx),")]
    assert len(flags) == 2 and not any(t.startswith("mov 0x8(%rbx),")
                                       for t in paths["lockstat-k1"])
    # the class's address (acct = wq->acct + class, 0xd0 bytes each) from those flags
    klass = ("imul $0xd0,", "and $0xd0,")
    assert any(t.startswith(klass) for t in paths["lockstat-k2"])
    assert not any(t.startswith(klass) for t in paths["lockstat-k1"])


def normalised(variant: str, function: str) -> list[str]:
    """A function's instructions without offsets, jump targets and rip-relative addresses, so
    two kernels' listings compare line by line."""
    out = []
    for _, text in listing(variant, function):
        text = re.sub(r"<[\w.]+\+0x[0-9a-f]+>", "<>", text)
        out.append(re.sub(r"0x[0-9a-f]+\(%rip\)", "X(%rip)", text))
    return out


def test_the_worker_loop_differs_by_two_reloads_off_the_path_of_an_unhashed_item() -> None:
    k2, k1 = (normalised(v, "io_worker_handle_work") for v in ("k2", "k1"))
    padding = ("nop", "data16 cs nopw")
    added = Counter(t for t in k2 if not t.startswith(padding)) - Counter(k1)
    removed = Counter(t for t in k1 if not t.startswith(padding)) - Counter(k2)
    assert added == {"mov 0x8(%r15),%eax": 2, "test $0x4,%al": 1}
    assert removed == {"and $0x4,%esi": 1}
    # where they are: one before the hash (flags >> 24: the hashed path), one before the test
    # of IO_WQ_WORK_UNBOUND (the do_kill path)
    after = [k2[i + 1:i + 3] for i, t in enumerate(k2) if t == "mov 0x8(%r15),%eax"]
    assert any("shr $0x18,%eax" in a for a in after)
    assert any(a[0] == "test $0x4,%al" for a in after)
