"""What ``chapters/sched-ext/guest/residence.sh`` printed for one boot while the chapter ran
scx_qmap (runs up to 20261123T113836Z-auto), kept so that those committed runs re-parse to
their own results (``make reparse``); ``parse.residence`` hands such output here.

The output is sections, each opened by a ``== <name>`` line, and ends with ``end=ok``; a
failed step prints ``error=<reason>`` instead (the boot already failed then; a re-parse says
the same). The sections and the rows they give:

* ``environment``: ``key=value`` and ``CONFIG_*`` lines -> ``env.load_seconds``, ``env.nproc``,
  ``env.CONFIG_HZ``, ``env.clocksource.<name>`` = 1 (strings cannot be rows);
* ``stress-ng <name>``: ``elapsed_s=<s>`` and stress-ng's own ``--yaml`` report ->
  ``stress.<name>.bogo_ops``, ``stress.<name>.wall_s``, and per stressor kind summed over the
  instances of the boot ``bogo_ops.<stressor>`` (the work the load did, to compare variants);
* ``fork_storms``: ``storms=<n>`` -> ``fork_storms``;
* ``events.before`` / ``events.after``: sched_ext's ``root/events`` (``SCX_EV_<NAME> <n>``)
  -> ``events.<NAME>``, the increase over the load;
* ``bpftrace``: bpftrace's JSON lines (``-f json``) from ``residence.bt``: every count, max and avg
  map -> its name without ``@`` (``inserts``, ``residences``, ``over_128us``, ...; a counter the
  script never incremented is absent from the JSON and becomes 0), every histogram ->
  ``<name>.hist.<lower bound>`` per non-empty bucket, and the derived rates
  ``over_128us_per_million`` and ``over_256us_per_million`` (per million timed residences,
  because the author's 71 and 39 are counts over a sample of a different size);
* ``qmap``: scx_qmap's last stats lines, kept raw and not parsed.

A missing section, a histogram or counter of an unexpected shape, a bpftrace output without
its ``attached`` and ``end`` markers, or two sections of one name fail the parse.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from lab.command import StageError
from lab.parse import keyvalue

SECTION = re.compile(r"^== (\S+(?: \S+)?)\s*$")
COUNTERS = ("inserts", "immed_inserts", "residences", "unmatched", "over_128us", "over_256us",
            "fallback_local", "fallback_remote", "ran_on_owner", "ran_elsewhere")
"""Counters of residence.bt, 0 when bpftrace printed nothing for them."""
MAXIMA = ("residence_max_ns", "residence_avg_ns", "deferral_max_ns", "deferral_avg_ns")
"""max() and avg() maps: absent when nothing was timed."""
HISTOGRAMS = ("residence_us", "deferral_us")
REQUIRED = ("environment", "fork_storms", "events.before", "events.after", "bpftrace", "qmap")


def sections(text: str, source: str) -> dict[str, list[str]]:
    """Split the output into its sections; check the end marker and for an error line."""
    lines = keyvalue.complete(text, source)
    found: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if m := SECTION.match(line):
            current = m[1]
            if current in found:
                raise StageError(f"{source}: section {current!r} appears twice; the output "
                                 "mixes two runs")
            found[current] = []
        elif current is not None:
            found[current].append(line)
        elif line.strip():
            raise StageError(f"{source}: text before the first section: {line!r}")
    missing = [s for s in REQUIRED if s not in found]
    if missing:
        raise StageError(f"{source}: sections {missing} missing (have {sorted(found)}); was "
                         "the guest script changed?")
    if not any(s.startswith("stress-ng ") for s in found):
        raise StageError(f"{source}: no stress-ng section: the load did not run")
    return found


def _keyvalue(lines: list[str], source: str, what: str) -> dict[str, str]:
    pairs = {}
    for line in lines:
        if not line.strip():
            continue
        if "=" not in line:
            raise StageError(f"{source}: {what}: line {line!r} is not key=value")
        key, value = line.split("=", 1)
        pairs[key.strip()] = value.strip()
    return pairs


def environment(lines: list[str], source: str) -> list[tuple[str, float]]:
    """Rows of the environment section (numbers as they are, the clocksource as a flag)."""
    pairs = _keyvalue(lines, source, "environment")
    for key in ("load_seconds", "nproc", "clocksource", "CONFIG_HZ"):
        if key not in pairs:
            raise StageError(f"{source}: environment has no {key}= line")
    rows = [(f"env.clocksource.{pairs['clocksource']}", 1.0)]
    for key, value in pairs.items():
        if re.fullmatch(r"-?\d+(\.\d+)?", value):
            rows.append((f"env.{key}", float(value)))
        elif key.startswith("CONFIG_") and value == "y":
            rows.append((f"env.{key}", 1.0))
    return rows


def stress(name: str, lines: list[str], source: str) -> tuple[list[tuple[str, float]],
                                                                dict[str, float]]:
    """Rows of one stress-ng instance and its bogo-ops by stressor kind."""
    if not lines or not lines[0].startswith("elapsed_s="):
        raise StageError(f"{source}: stress-ng {name}: the section does not start with "
                         "elapsed_s=")
    try:
        report = yaml.safe_load("\n".join(lines[1:]))
    except yaml.YAMLError as e:
        raise StageError(f"{source}: stress-ng {name}: its --yaml report does not parse: "
                         f"{e}") from None
    metrics = (report or {}).get("metrics") if isinstance(report, dict) else None
    if not metrics:
        raise StageError(f"{source}: stress-ng {name}: the report has no metrics (did the "
                         "stressor run? see the boot's console)")
    rows = [(f"stress.{name}.wall_s", float(lines[0].split("=", 1)[1]))]
    kinds: dict[str, float] = {}
    total = 0.0
    for m in metrics:
        ops = float(m["bogo-ops"])
        kinds[m["stressor"]] = kinds.get(m["stressor"], 0.0) + ops
        total += ops
    rows.append((f"stress.{name}.bogo_ops", total))
    return rows, kinds


def events(before: list[str], after: list[str], source: str) -> list[tuple[str, float]]:
    """``events.<NAME>``: how much each sched_ext event counter rose during the load."""
    def read(lines: list[str], which: str) -> dict[str, int]:
        out = {}
        for line in lines:
            parts = line.split()
            if len(parts) != 2 or not re.fullmatch(r"-?\d+", parts[1]):
                raise StageError(f"{source}: events.{which}: line {line!r} is not "
                                 "'<EVENT> <count>'")
            out[parts[0].removeprefix("SCX_EV_")] = int(parts[1])
        if not out:
            raise StageError(f"{source}: events.{which} is empty")
        return out
    b, a = read(before, "before"), read(after, "after")
    if set(b) != set(a):
        raise StageError(f"{source}: events.before and events.after name different counters")
    return [(f"events.{k}", float(a[k] - b[k])) for k in a]


def _value(entry: Any, name: str, source: str) -> float:
    if isinstance(entry, (int, float)) and not isinstance(entry, bool):
        return float(entry)
    raise StageError(f"{source}: bpftrace map {name} holds {entry!r}, not a number")


def bpftrace(lines: list[str], source: str) -> list[tuple[str, float]]:
    """Rows of residence.bt's JSON lines (see the module docstring)."""
    printed: list[str] = []
    values: dict[str, float] = {}
    hists: dict[str, list[tuple[float, float]]] = {}
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise StageError(f"{source}: bpftrace: line {line[:80]!r} is not JSON (was -f "
                             "json dropped, or the output cut?)") from None
        kind, data = record.get("type"), record.get("data")
        if kind == "printf":
            printed.append(str(data).strip())
        elif kind in ("map", "value", "stats") and isinstance(data, dict):
            for name, entry in data.items():
                values[name.lstrip("@")] = _value(entry, name, source)
        elif kind == "hist" and isinstance(data, dict):
            for name, buckets in data.items():
                if not isinstance(buckets, list):
                    raise StageError(f"{source}: bpftrace histogram {name} is {buckets!r}, "
                                     "not a list of buckets")
                hists[name.lstrip("@")] = [(float(b.get("min", 0)), float(b["count"]))
                                           for b in buckets]
        elif kind in ("attached_probes", "lost_events", "time", "helper_error"):
            if kind == "lost_events":
                raise StageError(f"{source}: bpftrace lost events: {data}")
            if kind == "helper_error":
                raise StageError(f"{source}: bpftrace helper error: {data}")
        else:
            raise StageError(f"{source}: bpftrace record of unexpected type {kind!r}: "
                             f"{line[:120]}")
    if "attached" not in printed or "end" not in printed:
        raise StageError(f"{source}: bpftrace output lacks its 'attached' or 'end' line "
                         f"(printed: {printed}); it did not run to its END probe")
    unknown = set(values) - set(COUNTERS) - set(MAXIMA)
    if unknown:
        raise StageError(f"{source}: bpftrace printed maps {sorted(unknown)} this parser "
                         "does not know (residence.bt changed without parse.py?)")
    rows = [(name, values.get(name, 0.0)) for name in COUNTERS]
    rows += [(name, values[name]) for name in MAXIMA if name in values]
    for name in HISTOGRAMS:
        rows += [(f"{name}.hist.{lo:g}", count) for lo, count in hists.get(name, [])
                 if count]
    timed = values.get("residences", 0.0)
    if timed <= 0:
        raise StageError(f"{source}: no local-DSQ residence was timed (did qmap run the "
                         "load? are the probes on the right functions?)")
    for name in ("over_128us", "over_256us"):
        rows.append((f"{name}_per_million", values.get(name, 0.0) / timed * 1e6))
    return rows


def residence(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of residence.sh (see the module docstring)."""
    found = sections(text, source)
    rows = environment(found["environment"], source)
    kinds: dict[str, float] = {}
    for name in sorted(s for s in found if s.startswith("stress-ng ")):
        more, by_kind = stress(name.split(" ", 1)[1], found[name], source)
        rows += more
        for k, v in by_kind.items():
            kinds[k] = kinds.get(k, 0.0) + v
    rows += [(f"bogo_ops.{k}", v) for k, v in sorted(kinds.items())]
    storms = _keyvalue(found["fork_storms"], source, "fork_storms")
    if "storms" not in storms:
        raise StageError(f"{source}: fork_storms has no storms= line")
    rows.append(("fork_storms", float(storms["storms"])))
    rows += events(found["events.before"], found["events.after"], source)
    rows += bpftrace(found["bpftrace"], source)
    return rows

