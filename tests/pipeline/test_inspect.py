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
