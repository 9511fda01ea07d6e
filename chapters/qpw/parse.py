"""What the qpw chapter's guest scripts (``chapters/qpw/guest/*.sh``) print for one boot.

Every output is sections, each opened by ``== <name>`` and closed by ``== end <name>``, and
ends with ``end=ok``; a failed step prints ``error=<reason>`` instead (the boot already failed
then; a re-parse says the same). A boot runs only its variant's workloads; in the runs made
before variants listed them, a workload of another role printed ``role=``, ``ran=0`` and
``end=ok`` only, and gave the row ``ran`` = 0. The rows:

* ``environment`` (every role): ``CONFIG_PREEMPT_RT``, ``CONFIG_PWLOCKS``, ... as 0/1,
  ``pwlocks`` (-1 when the command line has none), ``tsc_khz``, and
  ``env.preempt.<model>`` = 1 (strings cannot be rows; ``unknown`` when the kernel log had
  wrapped and lost the boot's lines); runs before the shared console parser
  also carry ``tsc_unstable``, from a grep for wording 7.2.13 never prints (the clock's health
  is now read from the console by :mod:`lab.parse.clock` for every chapter);
* ``kmalloc``: per load ``load<n>.alloc_cycles``, ``load<n>.free_cycles``, ``load<n>.iterations``
  and the averages ``load<n>.alloc_cycles_per_op`` and ``load<n>.free_cycles_per_op``; a
  discarded load gives ``load<n>.discarded`` = 1. Over the boot's kept loads after the first:
  ``alloc_cycles_per_op`` and ``free_cycles_per_op`` (total ticks over total allocations, so
  every allocation weighs the same); ``loads_kept`` and ``loads_discarded``. The first load is,
  under TCG, the first to touch the guest memory behind the slab pages, which costs the host its
  page faults (every load takes nearly all its slab pages from the page allocator again, since
  the load before freed all its objects): it is a warm-up, kept as its own rows only. Under
  icount the ticks are guest instructions;
* ``victim`` and ``trace`` (isolation): per round ``r<n>.trigger_ns`` (the drain request's
  latency on CPU 0), the victim's ``r<n>.max_gap_ns``, ``r<n>.gaps`` (gaps over its threshold),
  ``r<n>.nvcsw`` and ``r<n>.nivcsw``, and from the trace events inside the round's markers
  ``r<n>.work_on_victim`` (work items that started on CPU 1), ``r<n>.work_queued_to_victim``,
  ``r<n>.ipis_to_victim`` (IPIs sent to CPU 1), ``r<n>.ipi_handlers_on_victim`` and
  ``r<n>.switches_on_victim``, and with the LRU probe ``r<n>.lru_adds_on_victim`` and
  ``r<n>.lru_adds_on_other_cpu`` (folios that entered the LRU on CPU 1, and elsewhere);
  their sums over the rounds without the prefix (``work_on_victim``,
  ...) and ``rounds``; ``work.<function>`` per work function that started on CPU 1 inside a
  round, and ``outside.work_on_victim`` for the work that ran there between rounds;
  ``victim_on_disk`` (1: the victim's file is on the ext2 disk, 0: on tmpfs) when the script
  says which (``victim_fs=``);
* ``warnings`` (``lockdep.sh`` of the runs before the debug kernels): ``warnings`` (every
  ``WARNING:`` line of the boot's log), ``pw_assert_warnings`` (those raised in SLUB's sheaf
  paths, syzbot's report);
* ``debug.sh``: see :func:`debug`.

A section missing or repeated, a round without both markers or without the victim's line, a
kmalloc line of another shape, or a boot without a kept load after the first fail the parse.
"""

from __future__ import annotations

import re
from collections import Counter

from lab.command import StageError
from lab.parse import keyvalue
from lab.parse import sections as lab_sections

_LOAD = re.compile(r"^load=(\d+) size=(\d+) iterations=(\d+) cpu=(\d+) alloc_cycles=(\d+) "
                   r"free_cycles=(\d+) failed=(\d+)\s*$")
_DISCARDED = re.compile(r"^load=(\d+) discarded=(\S+)")
_ROUND_TRIGGER = re.compile(r"^round=(\d+) trigger_ns=(\d+)\s*$")
_ROUND_VICTIM = re.compile(r"^round=(\d+) max_gap_ns=(\d+) gaps=(\d+) nvcsw=(\d+) "
                           r"nivcsw=(\d+)\s*$")
# "<task>-<pid> [001] d..2. 123456789: <event>: <details>" (irq-info columns optional)
_EVENT = re.compile(r"^\s*.+?-\d+\s+\[(\d{3})\]\s+(?:\S+\s+)?(\d+(?:\.\d+)?):\s+(\w+):\s*(.*)$")
_MARK = re.compile(r"^kb-round (\d+) (begin|end)\s*$")
_WORK_FN = re.compile(r"function (\S+)")
_SHEAF_WARNING = re.compile(r"\b(sheaf_try_flush_main|__pcs_replace_empty_main|"
                            r"__pcs_install_empty_sheaf|__pcs_replace_full_main)\+0x")
"""A WARNING raised in one of the four SLUB functions whose lockdep assertion v4 4/4 converts."""
PER_ROUND = ("work_on_victim", "work_queued_to_victim", "ipis_to_victim",
             "ipi_handlers_on_victim", "switches_on_victim")
"""Counts of kernel events concerning CPU 1 inside one round (the trace's part of a row)."""
VICTIM_FS = ("tmpfs", "ext2")
"""Where the victim's file lives (``victim_fs=``): tmpfs, or the ext2 disk (``victim_on_disk``
1), whose writes leave a buffer head in the victim CPU's buffer-head LRU unless that CPU is
domain-isolated."""
LRU_PROBE = ("lru_adds_on_victim", "lru_adds_on_other_cpu")
"""Folios that entered the LRU inside one round, on CPU 1 and on another CPU (the
``mm_lru_insertion`` probe of the runs from 2026-11-26 on, announced by ``lru_probe=1``)."""
_EVENT_METRIC = {
    "workqueue_execute_start": "work_on_victim",
    "workqueue_queue_work": "work_queued_to_victim",
    "ipi_send_cpu": "ipis_to_victim",
    "ipi_send_cpumask": "ipis_to_victim",
    "reschedule_entry": "ipi_handlers_on_victim",
    "call_function_single_entry": "ipi_handlers_on_victim",
    "call_function_entry": "ipi_handlers_on_victim",
    "sched_switch": "switches_on_victim",
}


def _sections(text: str, source: str) -> tuple[list[str], dict[str, list[str]]]:
    """The lines outside any section, and each section's lines (:mod:`lab.parse.sections`)."""
    split = lab_sections.split(text, source)
    return split.head, split.body


def _role(text: str, source: str, want: str, *sections: str) -> tuple[
        list[tuple[str, float]], dict[str, list[str]] | None]:
    """(rows so far, sections) of a workload that ran, or ([('ran', 0)], None) if it did not;
    a workload that ran must have the environment and every one of ``sections``. The runs
    made before each variant listed its workloads begin with ``role=`` and ``ran=`` (and give a
    ``ran`` row); a later output has neither, as it ran."""
    top, found = _sections(text, source)
    head = keyvalue.fields("\n".join(top))
    if head.get("ran") == "0":
        return [("ran", 0.0)], None
    marked = "role" in head or "ran" in head
    if marked and (head.get("ran") != "1" or head.get("role") != want):
        raise StageError(f"{source}: expected role={want} and ran=1, got role="
                         f"{head.get('role')!r} ran={head.get('ran')!r}")
    for name in ("environment", *sections):
        if name not in found:
            raise StageError(f"{source}: no '== {name}' section")
    return [*([("ran", 1.0)] if marked else []),
            *_environment(found["environment"], source)], found


def _environment(lines: list[str], source: str) -> list[tuple[str, float]]:
    rows = []
    for key, value in keyvalue.fields("\n".join(lines)).items():
        if key == "preempt_model":
            rows.append((f"env.preempt.{value}", 1.0))
        elif key == "isolated":
            rows.append(("env.isolated_cpus", float(len(value.split(","))) if value else 0.0))
        elif value == "":
            continue
        else:
            try:
                rows.append((key, float(value)))
            except ValueError:
                raise StageError(f"{source}: environment {key}={value!r} is not a number") \
                    from None
    return rows


def kmalloc(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of ``kmalloc.sh`` (see the module docstring)."""
    rows, found = _role(text, source, "kmalloc", "kmalloc")
    if found is None:
        return rows
    ticks = {"alloc": 0, "free": 0}
    ops = kept = warm = discarded = 0
    for line in found["kmalloc"]:
        if m := _DISCARDED.match(line):
            rows.append((f"load{m[1]}.discarded", 1.0))
            discarded += 1
        elif m := _LOAD.match(line):
            n, iterations, alloc, free = m[1], int(m[3]), int(m[5]), int(m[6])
            rows += [(f"load{n}.iterations", float(iterations)),
                     (f"load{n}.alloc_cycles", float(alloc)),
                     (f"load{n}.free_cycles", float(free)),
                     (f"load{n}.alloc_cycles_per_op", alloc / iterations),
                     (f"load{n}.free_cycles_per_op", free / iterations),
                     (f"load{n}.cpu", float(m[4]))]
            kept += 1
            if n == "1":
                continue
            ticks["alloc"] += alloc
            ticks["free"] += free
            ops += iterations
            warm += 1
        else:
            raise StageError(f"{source}: kmalloc line {line!r} is neither a result nor a "
                             "discarded load")
    if not warm:
        raise StageError(f"{source}: no load after the first was kept ({kept} kept, "
                         f"{discarded} discarded); nothing to report")
    return [*rows, ("alloc_cycles_per_op", ticks["alloc"] / ops),
            ("free_cycles_per_op", ticks["free"] / ops),
            ("loads_kept", float(kept)), ("loads_discarded", float(discarded))]


def isolation(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of ``isolation.sh`` (see the module docstring)."""
    rows, found = _role(text, source, "isolation", "victim", "trace")
    if found is None:
        return rows
    top = keyvalue.fields("\n".join(_sections(text, source)[0]))
    probe = top.get("lru_probe") == "1"
    head = keyvalue.fields("\n".join(found["victim"]))
    rounds = int(head.get("rounds", "0"))
    if rounds < 1:
        raise StageError(f"{source}: drainvictim reported no rounds")
    counted = PER_ROUND + (LRU_PROBE if probe else ())
    per: dict[int, dict[str, float]] = {n: dict.fromkeys(counted, 0.0) for n in range(rounds)}
    for line in found["victim"]:
        if m := _ROUND_TRIGGER.match(line):
            per[int(m[1])]["trigger_ns"] = float(m[2])
        elif m := _ROUND_VICTIM.match(line):
            r = per[int(m[1])]
            r.update(max_gap_ns=float(m[2]), gaps=float(m[3]), nvcsw=float(m[4]),
                     nivcsw=float(m[5]))
    marks: dict[tuple[int, str], float] = {}
    events: list[tuple[float, str, str]] = []
    for line in found["trace"]:
        m = _EVENT.match(line)
        if not m:
            raise StageError(f"{source}: trace line {line!r} is not an event line")
        ts, event, detail = float(m[2]), m[3], m[4]
        if event == "tracing_mark_write":
            if mk := _MARK.match(detail):
                marks[(int(mk[1]), mk[2])] = ts
            continue
        if event == "mm_lru_insertion" and probe:
            event = LRU_PROBE[0] if m[1] == "001" else LRU_PROBE[1]
        elif event not in _EVENT_METRIC:
            raise StageError(f"{source}: unexpected trace event {event!r}")
        events.append((ts, event, detail))
    windows = []
    for n in range(rounds):
        if (n, "begin") not in marks or (n, "end") not in marks:
            raise StageError(f"{source}: round {n} lacks its begin or end trace marker")
        if "trigger_ns" not in per[n] or "max_gap_ns" not in per[n]:
            raise StageError(f"{source}: round {n} lacks drainvictim's trigger or victim line")
        windows.append((marks[(n, "begin")], marks[(n, "end")], n))
    functions: Counter[str] = Counter()
    outside = 0
    for ts, event, detail in events:
        inside = next((n for lo, hi, n in windows if lo <= ts <= hi), None)
        if inside is None:
            outside += event == "workqueue_execute_start"
            continue
        per[inside][_EVENT_METRIC.get(event, event)] += 1
        if event == "workqueue_execute_start" and (fn := _WORK_FN.search(detail)):
            functions[fn[1]] += 1
    rows.append(("rounds", float(rounds)))
    if "victim_fs" in top:  # runs before 20261126T192503Z wrote to tmpfs only
        if top["victim_fs"] not in VICTIM_FS:
            raise StageError(f"{source}: victim_fs={top['victim_fs']!r} is not one of "
                             f"{', '.join(VICTIM_FS)}")
        rows.append(("victim_on_disk", float(top["victim_fs"] == "ext2")))
    if "pause_ms" in head:  # runs before 2026-11-26 had back-to-back requests only
        rows.append(("pause_ms", float(head["pause_ms"])))
    for n, r in per.items():
        rows += [(f"r{n}.{k}", v) for k, v in sorted(r.items())]
    for k in (*counted, "gaps", "nvcsw", "nivcsw"):
        rows.append((k, sum(r[k] for r in per.values())))
    rows += [(f"work.{fn}", float(c)) for fn, c in sorted(functions.items())]
    rows.append(("outside.work_on_victim", float(outside)))
    return rows


def lockdep(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of ``lockdep.sh`` (see the module docstring)."""
    rows, found = _role(text, source, "lockdep", "warnings")
    if found is None:
        return rows
    warnings = [line for line in found["warnings"] if "WARNING:" in line]
    return [*rows, ("warnings", float(len(warnings))),
            ("pw_assert_warnings", float(sum(bool(_SHEAF_WARNING.search(w)) for w in warnings)))]


_EXERCISE_LINE = re.compile(r"^test=(flush|irq) (.*)$")
REPORT_KINDS = (
    ("invalid_wait_context", re.compile(r"Invalid wait context")),
    ("bad_magic", re.compile(r"spinlock bad magic")),
    ("preemption_imbalance", re.compile(r"returned with preemption imbalance")),
    ("inconsistent_lock_state", re.compile(r"inconsistent lock state")),
    ("circular_locking", re.compile(r"circular locking dependency")),
    ("recursive_locking", re.compile(r"recursive locking")),
    ("sleep_in_atomic", re.compile(r"sleeping function called from invalid context")),
    ("scheduling_while_atomic", re.compile(r"scheduling while atomic")),
    ("warning", re.compile(r"^WARNING: ")),
    ("bug", re.compile(r"BUG: ")),
    ("info", re.compile(r"INFO: ")),
)
"""Kinds of kernel report by their header line, first match wins: lockdep's and the spinlock
and preemption checks' own wordings before the generic WARNING:/BUG: of a WARN() or BUG();
``info`` lines (lockdep is turned off, and the like) say what a report did, not a new one."""


def debug(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of ``debug.sh``: ``test.<name>`` = 1; the exercise's numbers (``flush.objects``,
    ``flush.preempt_leak`` and ``flush.migrate_leak`` = the counter after the free loop less
    before it, ``failslab_failures`` = slab allocations failslab failed, ``irq.objects``,
    ``irq.freed_in_hardirq``, ``initrd_kb`` = the initramfs the kernel unpacked and freed,
    ``warn_before`` and ``warn_count`` = the kernel's WARNING count before and after the test,
    ``debug_locks`` = lockdep still on at the end, where the kernel has lockdep);
    ``report.<kind>`` per kind of :data:`REPORT_KINDS` (0 when absent) and
    ``pw_assert_warnings``, the WARNING lines raised in SLUB's sheaf paths."""
    rows, found = _role(text, source, "debug", "exercise", "report", "first")
    if found is None:
        return rows
    head = keyvalue.fields("\n".join(_sections(text, source)[0]))
    rows.append((f"test.{head.get('test')}", 1.0))
    for line in found["exercise"]:
        if m := _EXERCISE_LINE.match(line):
            f = {k: int(v) for k, v in keyvalue.fields(m[2].replace(" ", "\n")).items()}
            rows.append((f"{m[1]}.objects", float(f["objects"])))
            if m[1] == "flush":
                rows += [("flush.preempt_leak", float(f["preempt_after"] - f["preempt_before"])),
                         ("flush.migrate_leak", float(f["migrate_after"] - f["migrate_before"]))]
            else:
                rows.append(("irq.freed_in_hardirq", float(f["freed_in_hardirq"])))
        elif "=" in line:
            key, value = line.split("=", 1)
            try:
                rows.append((key, float(value)))
            except ValueError:
                raise StageError(f"{source}: exercise line {line!r} is not key=number") from None
    kinds = Counter(next((k for k, rx in REPORT_KINDS if rx.search(line)), "other")
                    for line in found["report"])
    rows += [(f"report.{k}", float(kinds.get(k, 0))) for k, _ in REPORT_KINDS]
    rows += [("report.other", float(kinds.get("other", 0))),
             ("pw_assert_warnings", float(sum(
                 line.startswith("WARNING:") and bool(_SHEAF_WARNING.search(line))
                 for line in found["report"])))]
    return rows


PARSERS = {"kmalloc": kmalloc, "isolation": isolation, "lockdep": lockdep, "debug": debug}
