"""What ``chapters/sched-ext/guest/residence.sh`` prints for one boot.

The output is sections, each opened by a ``== <name>`` line, and ends with ``end=ok``; a
failed step prints ``error=<reason>`` instead (the boot already failed then; a re-parse says
the same). The sections and the rows they give:

* ``environment``: ``key=value`` and ``CONFIG_*`` lines -> ``env.load_seconds``,
  ``env.remote_nth``, ``env.nproc``, ``env.CONFIG_HZ``, ``env.clocksource.<name>`` = 1 (strings
  cannot be rows);
* ``stress-ng <name>``: ``elapsed_s=<s>`` and stress-ng's own ``--yaml`` report ->
  ``stress.<name>.bogo_ops``, ``stress.<name>.wall_s``, and per stressor kind summed over the
  instances of the boot ``bogo_ops.<stressor>``;
* ``census``: the tasks halfway through the load -> ``census.at_s``, ``census.running`` and
  ``census.tasks`` (/proc/loadavg's running/total) and ``census.<comm>`` for every stress-ng
  task name (how many instances each stressor really ran);
* ``probes``: ``recursion_misses``, calls the fentry programs skipped (0, or the boot failed);
* ``events.before`` / ``events.after``: sched_ext's ``root/events`` (``SCX_EV_<NAME> <n>``)
  -> ``events.<NAME>``, the increase over the load;
* ``bpftrace``: bpftrace's JSON lines (``-f json``) from ``residence.bt``. Plain counters, max
  and avg maps -> their name without ``@`` (``inserts``, ``residences``, ``over_128us``, ...;
  a counter the script never incremented is absent from the JSON and becomes 0); maps keyed by
  the fallback's origin (1 local, 2 remote, 3 a handler run it could not tell) ->
  ``<name>.local`` / ``<name>.remote`` / ``<name>.unattributed`` (``fallbacks``,
  ``handlers``, ``handler_residences``, ``handler_over_128us``, ...); ``fallback_callers`` ->
  ``fallback_callers.<origin>.<caller>``, the caller being the nearest return address of the
  stack below the BPF trampoline (``dsq_inc_nr()`` and ``wakeup_preempt_scx()`` reach
  ``schedule_deferred()`` by tail calls, so their caller shows); every histogram ->
  ``<name>[.<origin>].hist.<lower bound>`` per non-empty bucket; and the derived rates
  ``over_128us_per_million`` and ``over_256us_per_million`` (per million timed residences, the
  author's counts being over a sample of another size);
* ``scheduler``: scx_remote's last counters line -> ``sched.dispatch``, ``sched.remote``,
  ``sched.remote_none``, ``sched.reenq``; its other output (the exit reason) is kept raw.

A missing section, a histogram or counter of an unexpected shape, a bpftrace output without
its ``attached`` and ``end`` markers, lost events, or two sections of one name fail the parse.

The runs made with scx_qmap (up to 20261123T113836Z-auto) printed ``fork_storms`` (``storms=<n>``
-> ``fork_storms``) and ``qmap`` (kept raw) sections instead of census, probes and scheduler, and
their bpftrace maps had no origin keys (``fallback_local``, ``fallback_remote``, ``deferral_us``,
...): :func:`residence` recognises that output by its ``== qmap`` section and reads it with the
``QMAP_`` names, so those committed runs re-parse to their own results.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from lab.command import StageError
from lab.parse import sections as lab_sections

COUNTERS = ("tasks", "inserts", "immed_inserts", "residences", "unmatched", "unmatched_late",
            "over_128us", "over_256us", "ran_on_owner", "ran_elsewhere", "handler_unattributed")
"""Plain counters of residence.bt, 0 when bpftrace printed nothing for them."""
MAXIMA = ("residence_max_ns", "residence_avg_ns")
"""max() and avg() maps: absent when nothing was timed."""
ORIGINS = {"1": "local", "2": "remote", "3": "unattributed"}
"""residence.bt's key for the origin of a fallback: the runqueue's CPU against the caller's, or
(handler runs only) a run whose fallback the probe could not tell."""
FALLBACK_ORIGINS = ("local", "remote")
BY_ORIGIN_COUNTERS = ("fallbacks", "handlers", "handler_residences", "handler_over_128us",
                      "handler_over_256us")
"""Counters keyed by origin: each origin's row is 0 when bpftrace printed nothing for it."""
BY_ORIGIN_MAXIMA = ("deferral_max_ns", "deferral_avg_ns", "handler_residence_max_ns",
                    "handler_residence_avg_ns")
HISTOGRAMS = ("residence_us",)
BY_ORIGIN_HISTOGRAMS = ("deferral_us", "handler_residence_us")
CALLERS = "fallback_callers"
SELF = "schedule_deferred"
REQUIRED = ("environment", "census", "probes", "events.before", "events.after", "bpftrace",
            "scheduler")
SCHEDULER = ("dispatch", "remote", "remote_none", "reenq")
"""scx_remote's counters (scx_remote.c prints them as key=value on one line)."""
QMAP_COUNTERS = ("inserts", "immed_inserts", "residences", "unmatched", "over_128us",
                 "over_256us", "fallback_local", "fallback_remote", "ran_on_owner",
                 "ran_elsewhere")
QMAP_MAXIMA = ("residence_max_ns", "residence_avg_ns", "deferral_max_ns", "deferral_avg_ns")
QMAP_HISTOGRAMS = ("residence_us", "deferral_us")
QMAP_REQUIRED = ("environment", "fork_storms", "events.before", "events.after", "bpftrace",
                 "qmap")
"""The scx_qmap runs' maps and sections (module docstring)."""


def sections(text: str, source: str, required: tuple[str, ...] = REQUIRED
             ) -> dict[str, list[str]]:
    """Split the output into its sections (:mod:`lab.parse.sections`, the open layout); check
    that every ``required`` section and a stress-ng section are there."""
    split = lab_sections.split(text, source, closed=False)
    split.require(required, source)
    if not any(s.startswith("stress-ng ") for s in split.body):
        raise StageError(f"{source}: no stress-ng section: the load did not run")
    return split.body


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


def _origin(key: str, name: str, source: str) -> str:
    if key not in ORIGINS:
        raise StageError(f"{source}: bpftrace map {name} has key {key!r}, not an origin "
                         f"({sorted(ORIGINS)})")
    return ORIGINS[key]


def _caller(key: str, name: str, source: str) -> tuple[str, str]:
    """(origin, caller) of a ``fallback_callers`` key: the stack's frames then the origin."""
    stack, _, origin = key.rpartition(",")
    frames = [f.strip().split("+", 1)[0] for f in stack.strip().splitlines() if f.strip()]
    callers = [f for f in frames if f != SELF and not f.startswith("bpf_")]
    if not callers:
        raise StageError(f"{source}: bpftrace map {name}: stack {stack!r} names no caller of "
                         f"{SELF}")
    return _origin(origin.strip(), name, source), callers[0]


def _hist(buckets: Any, name: str, source: str) -> list[tuple[float, float]]:
    if not isinstance(buckets, list):
        raise StageError(f"{source}: bpftrace histogram {name} is {buckets!r}, not a list of "
                         "buckets")
    return [(float(b.get("min", 0)), float(b["count"])) for b in buckets]


def _records(lines: list[str], source: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """bpftrace's JSON lines as its maps and histograms (name without ``@`` -> the printed
    data), after checking that the script ran from its ``attached`` to its ``end`` line and lost
    nothing."""
    printed: list[str] = []
    maps: dict[str, Any] = {}
    hists: dict[str, Any] = {}
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
            maps.update((name.lstrip("@"), entry) for name, entry in data.items())
        elif kind == "hist" and isinstance(data, dict):
            hists.update((name.lstrip("@"), buckets) for name, buckets in data.items())
        elif kind == "lost_events":
            raise StageError(f"{source}: bpftrace lost events: {data}")
        elif kind == "helper_error":
            raise StageError(f"{source}: bpftrace helper error: {data}")
        elif kind not in ("attached_probes", "time"):
            raise StageError(f"{source}: bpftrace record of unexpected type {kind!r}: "
                             f"{line[:120]}")
    if "attached" not in printed or "end" not in printed:
        raise StageError(f"{source}: bpftrace output lacks its 'attached' or 'end' line "
                         f"(printed: {printed}); it did not run to its END probe")
    return maps, hists


def _unknown(names: set[str], source: str) -> None:
    if names:
        raise StageError(f"{source}: bpftrace printed maps {sorted(names)} this parser "
                         "does not know (residence.bt changed without parse.py?)")


def _rates(values: dict[str, float], source: str) -> list[tuple[str, float]]:
    """The outlier rates per million timed residences."""
    timed = values.get("residences", 0.0)
    if timed <= 0:
        raise StageError(f"{source}: no local-DSQ residence was timed (did the scheduler run "
                         "the load? are the probes on the right functions?)")
    return [(f"{name}_per_million", values.get(name, 0.0) / timed * 1e6)
            for name in ("over_128us", "over_256us")]


def bpftrace(lines: list[str], source: str) -> list[tuple[str, float]]:
    """Rows of residence.bt's JSON lines (see the module docstring)."""
    maps, raw_hists = _records(lines, source)
    values: dict[str, float] = {}
    keyed: dict[str, dict[str, float]] = {}
    hists: dict[str, list[tuple[float, float]]] = {}
    for name, entry in maps.items():
        if name == CALLERS:
            if not isinstance(entry, dict):
                raise StageError(f"{source}: bpftrace map {name} is {entry!r}, not keyed by "
                                 "stack and origin")
            for key, count in entry.items():
                origin, caller = _caller(key, name, source)
                row = f"{name}.{origin}.{caller}"
                keyed.setdefault(name, {})[row] = (
                    keyed.get(name, {}).get(row, 0.0) + _value(count, name, source))
        elif isinstance(entry, dict):
            keyed[name] = {f"{name}.{_origin(k, name, source)}": _value(v, name, source)
                           for k, v in entry.items()}
        else:
            values[name] = _value(entry, name, source)
    for name, buckets in raw_hists.items():
        if name in BY_ORIGIN_HISTOGRAMS:
            if not isinstance(buckets, dict):
                raise StageError(f"{source}: bpftrace histogram {name} is not keyed by origin")
            for k, b in buckets.items():
                hists[f"{name}.{_origin(k, name, source)}"] = _hist(b, name, source)
        else:
            hists[name] = _hist(buckets, name, source)
    known = set(COUNTERS) | set(MAXIMA) | set(BY_ORIGIN_COUNTERS) | set(BY_ORIGIN_MAXIMA) | {
        CALLERS}
    _unknown((set(values) | set(keyed)) - known | {
        h for h in hists if h.split(".")[0] not in HISTOGRAMS + BY_ORIGIN_HISTOGRAMS}, source)
    rows = [(name, values.get(name, 0.0)) for name in COUNTERS]
    rows += [(name, values[name]) for name in MAXIMA if name in values]
    for name in BY_ORIGIN_COUNTERS:
        got = keyed.get(name, {})
        origins = FALLBACK_ORIGINS if name in ("fallbacks", "handlers") else ORIGINS.values()
        rows += [(f"{name}.{o}", got.get(f"{name}.{o}", 0.0)) for o in origins]
    for name in BY_ORIGIN_MAXIMA:
        rows += sorted(keyed.get(name, {}).items())
    rows += sorted(keyed.get(CALLERS, {}).items())
    for name, buckets in sorted(hists.items()):
        rows += [(f"{name}.hist.{lo:g}", count) for lo, count in buckets if count]
    return rows + _rates(values, source)


def census(lines: list[str], source: str) -> list[tuple[str, float]]:
    """Rows of the census halfway through the load (see the module docstring)."""
    pairs = _keyvalue(lines, source, "census")
    for key in ("at_s", "loadavg"):
        if key not in pairs:
            raise StageError(f"{source}: census has no {key}= line")
    fields = pairs["loadavg"].split()
    if len(fields) < 4 or not re.fullmatch(r"\d+/\d+", fields[3]):
        raise StageError(f"{source}: census: loadavg {pairs['loadavg']!r} has no running/total")
    running, tasks = fields[3].split("/")
    rows = [("census.at_s", float(pairs["at_s"])), ("census.running", float(running)),
            ("census.tasks", float(tasks))]
    rows += [(f"census.{k.removeprefix('comm.')}", float(v)) for k, v in sorted(pairs.items())
             if k.startswith("comm.stress-ng")]
    return rows


def scheduler(lines: list[str], source: str) -> list[tuple[str, float]]:
    """Rows of scx_remote's last counters line (its other lines, such as libbpf's messages and
    the exit reason, are kept raw and not parsed)."""
    last = [line for line in lines if line.startswith("dispatch=")]
    if not last:
        raise StageError(f"{source}: scheduler section has no dispatch= line (scx_remote "
                         "printed no counters)")
    pairs = dict(f.split("=", 1) for f in last[-1].split() if "=" in f)
    missing = [k for k in SCHEDULER if not re.fullmatch(r"\d+", pairs.get(k, ""))]
    if missing:
        raise StageError(f"{source}: scheduler line {last[-1]!r} lacks {missing}")
    return [(f"sched.{k}", float(pairs[k])) for k in SCHEDULER]


def _load(found: dict[str, list[str]], source: str) -> list[tuple[str, float]]:
    """Rows of the environment and of every stress-ng instance, and bogo-ops per stressor kind
    summed over the boot's instances."""
    rows = environment(found["environment"], source)
    kinds: dict[str, float] = {}
    for name in sorted(s for s in found if s.startswith("stress-ng ")):
        more, by_kind = stress(name.split(" ", 1)[1], found[name], source)
        rows += more
        for k, v in by_kind.items():
            kinds[k] = kinds.get(k, 0.0) + v
    return rows + [(f"bogo_ops.{k}", v) for k, v in sorted(kinds.items())]


def _qmap_residence(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of the scx_qmap runs (module docstring)."""
    found = sections(text, source, QMAP_REQUIRED)
    rows = _load(found, source)
    storms = _keyvalue(found["fork_storms"], source, "fork_storms")
    if "storms" not in storms:
        raise StageError(f"{source}: fork_storms has no storms= line")
    rows.append(("fork_storms", float(storms["storms"])))
    rows += events(found["events.before"], found["events.after"], source)
    maps, raw_hists = _records(found["bpftrace"], source)
    values = {name: _value(entry, name, source) for name, entry in maps.items()}
    hists = {name: _hist(buckets, name, source) for name, buckets in raw_hists.items()}
    _unknown(set(values) - set(QMAP_COUNTERS) - set(QMAP_MAXIMA), source)
    rows += [(name, values.get(name, 0.0)) for name in QMAP_COUNTERS]
    rows += [(name, values[name]) for name in QMAP_MAXIMA if name in values]
    for name in QMAP_HISTOGRAMS:
        rows += [(f"{name}.hist.{lo:g}", count) for lo, count in hists.get(name, []) if count]
    return rows + _rates(values, source)


def residence(text: str, source: str) -> list[tuple[str, float]]:
    """Rows of one boot of residence.sh (see the module docstring); the output of the scx_qmap
    runs, recognised by its ``== qmap`` section, is read the way they printed it."""
    if "\n== qmap" in text:
        return _qmap_residence(text, source)
    found = sections(text, source)
    rows = _load(found, source)
    rows += census(found["census"], source)
    probes = _keyvalue(found["probes"], source, "probes")
    if not re.fullmatch(r"\d+", probes.get("recursion_misses", "")):
        raise StageError(f"{source}: probes has no recursion_misses=<n> line")
    rows.append(("recursion_misses", float(probes["recursion_misses"])))
    rows += events(found["events.before"], found["events.after"], source)
    rows += bpftrace(found["bpftrace"], source)
    rows += scheduler(found["scheduler"], source)
    return rows


PARSERS = {"residence": residence}
