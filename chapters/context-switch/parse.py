"""What the context-switch workload (``chapters/context-switch/guest/pingpong.sh``) prints.

Four kinds of line, ``end=ok`` last:

* ``text.<name>=<words>``: the guest's state as the kernel words it. ``text.spectre_v2`` (the
  sysfs vulnerability line) becomes numeric codes, because whether ``spectre_v2_user=on``
  actually turned IBPB on is what decides a cell's meaning (an emulated CPU may lack it):
  ``spectre_v2.ibpb`` / ``spectre_v2.stibp`` = 0 disabled, 1 conditional, 2 always-on or
  forced; ``text.isolated`` becomes ``isolated_cpu``;
* ``<key>=<number>``: the user program's summary and the CPU flags -> ``prog.<key>`` /
  ``cpu_flag.<flag>``, ``shift``, and on Arm ``counter_hz``, the frequency of the counter the
  probe reads;
* the instrument patch's kernel lines, one per 2^shift switches of a CPU::

    sched_test: start shift=17
    sched_test: cpu=1 switches=131072 cycles=3612345 avg_x100=2756
    sched_test: stop

  Of the measured CPU (the program's ``cpu=``), the full intervals give ``probe.avg_cycles``
  (all their cycles over all their switches), ``probe.min_avg_cycles`` /
  ``probe.max_avg_cycles`` (the range of the per-line averages, which is what the postings'
  "low - high" tables show) and ``probe.intervals``; the closing partial line is not used.

A missing start or stop line, a start whose shift differs from the one asked for, or no full
interval on the measured CPU fails the parse: those are runs whose probe did not measure what
the chapter says.
"""

from __future__ import annotations

import re

from lab.command import StageError

_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)=(.*)$")
_KERNEL = re.compile(r"^(?:\[\s*\d+\.\d+\]\s*)?sched_test: (.*)$")
_SAMPLE = re.compile(r"cpu=(\d+) switches=(\d+) cycles=(\d+) avg_x100=(\d+)")
_MODES = {"disabled": 0, "conditional": 1, "always-on": 2, "forced": 2}


def _mode(text: str, feature: str, source: str) -> list[tuple[str, float]]:
    """``IBPB: always-on`` -> ``spectre_v2.ibpb = 2``; absent -> no row."""
    m = re.search(rf"\b{feature}: ([a-z-]+)", text)
    if not m:
        return []
    if m[1] not in _MODES:
        raise StageError(f"{source}: unknown {feature} state {m[1]!r} in {text!r}; "
                         f"known: {sorted(_MODES)} (extend chapters/context-switch/parse.py)")
    return [(f"spectre_v2.{feature.lower()}", float(_MODES[m[1]]))]


def parse(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot's pingpong output (see the module docstring)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines or lines[-1] != "end=ok":
        raise StageError(f"{source}: truncated guest output: the last line is "
                         f"{lines[-1] if lines else '(empty)'!r}, not 'end=ok'")
    rows: list[tuple[str, float]] = []
    values: dict[str, float] = {}
    kernel: list[str] = []
    for line in lines[:-1]:
        if k := _KERNEL.match(line):
            kernel.append(k[1])
            continue
        m = _LINE.match(line)
        if not m:
            raise StageError(f"{source}: unexpected line {line!r}")
        key, value = m[1], m[2]
        if key == "text.spectre_v2":
            rows += _mode(value, "IBPB", source) + _mode(value, "STIBP", source)
        elif key == "text.isolated":
            if value.isdigit():
                rows.append(("isolated_cpu", float(value)))
        elif key.startswith("text."):
            continue
        else:
            try:
                number = float(value)
            except ValueError:
                raise StageError(f"{source}: {key}={value!r} is not a number") from None
            name = (key if key.startswith("cpu_flag.") or key in ("shift", "counter_hz")
                    else f"prog.{key}")
            values[name] = number
            rows.append((name, number))
    for need in ("shift", "prog.cpu"):
        if need not in values:
            raise StageError(f"{source}: no {need.removeprefix('prog.')}= line")
    shift, cpu = int(values["shift"]), int(values["prog.cpu"])
    starts = [line for line in kernel if line.startswith("start")]
    if starts != [f"start shift={shift}"]:
        raise StageError(f"{source}: expected one 'sched_test: start shift={shift}' line, "
                         f"found {starts or 'none'}: the probe was not started as asked")
    if "stop" not in kernel:
        raise StageError(f"{source}: no 'sched_test: stop' line: the probe was not stopped "
                         "(the program died or the kernel log was cut)")
    full = []
    for line in kernel:
        if (s := _SAMPLE.fullmatch(line)) and int(s[1]) == cpu and int(s[2]) == 1 << shift:
            full.append((int(s[2]), int(s[3])))
    if not full:
        raise StageError(f"{source}: no full interval of 2^{shift} switches on CPU {cpu}; "
                         "raise CS_SWITCHES or lower CS_SHIFT in the workload")
    averages = [cycles / switches for switches, cycles in full]
    rows += [
        ("probe.intervals", float(len(full))),
        ("probe.switches", float(sum(s for s, _ in full))),
        ("probe.avg_cycles", sum(c for _, c in full) / sum(s for s, _ in full)),
        ("probe.min_avg_cycles", min(averages)),
        ("probe.max_avg_cycles", max(averages)),
    ]
    return rows


PARSERS = {"sched_test": parse}
"""This chapter's parsers by the name its ``chapter.yaml`` workloads use."""
