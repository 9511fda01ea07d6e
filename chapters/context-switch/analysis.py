"""The context-switch chapter's analysis: probe cells, inlining evidence, image sizes, verdicts.

The experiment (``chapter.yaml``) boots each kernel under two clocks: the
wall-clock TSC of TCG, which is emulated time, and icount, where the guest TSC counts
instructions. The postings' cycles are a real CPU's, so neither clock can confirm their size;
icount can say exactly whether the timed code path got shorter, and the images can say whether
the compiler did what the patch asks. This module turns the committed runs into those tables,
so the notebook only glues and plots.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from lab.analysis import quantities, scorecard, stats, verdicts
from lab.analysis.runs import (
    UNJUDGED,
    Run,
    clock_flags,
    describe,
    environment_limits,
    environment_summary,
    latest_per_variant,
)
from lab.analysis.verdicts import Verdict

HOST = "x86_64"
"""The architecture of a variant whose manifest names none (every x86 run)."""

TREES = {"v2-thread-baseline": "v2 base", "baseline": "7.2.13", "patched": "7.2.13 + 3/3"}
"""Tree name (patches/context-switch/meta.yaml) -> label: the v2 thread's before, the release
(merged 1/3 and 2/3), and the release with the ported 3/3."""

CONFIGS = {"context-switch-size": "size", "context-switch-size-o2": "size-o2"}
"""A build's configuration by its fragment (chapters/context-switch/configs): the author's size
options at -Os and at -O2; a build with neither is the timing configuration."""

SETTINGS = {"size": "size configuration (-Os)", "size-o2": "size configuration at -O2"}
"""How a size row names the configuration it was judged in."""

PROBE = "probe.avg_cycles"


def _clock(variant: dict[str, Any]) -> str:
    """A boot's clock as the tables name it: icount, or the architecture's counter under the
    accelerator that ran it (``TSC (tcg)`` on x86, ``CNTVCT (tcg)`` on Arm, which has no TSC)."""
    used = variant.get("accel_used") or [variant.get("accel_requested", "?")]
    if used == ["icount"]:
        return "icount"
    return f"{COUNTERS[variant.get('arch', HOST)].short} ({'/'.join(used)})"


def probe_frame(runs: list[Run], every_run: bool = False) -> pd.DataFrame:
    """One row per booted variant and repetition: the cell it belongs to and its probe values.

    Each variant comes from the newest run that measured it, or, with ``every_run``, from
    every run that did (to compare runs with each other).

    Columns: variant, rep, run_id, arch (x86_64, arm64, arm), compiler, tree, spectre
    (``spectre_v2_user=on`` on the command line), clock (icount, or the wall clock: TSC on
    x86, the virtual counter on Arm), avg (all full intervals' cycles over their
    switches), lo/hi (the smallest and largest per-interval average), ibpb (the guest's
    IBPB state: 0 disabled, 1 conditional, 2 always-on), per_switch (the program's
    nanoseconds per switch, whole hand-off; under icount at shift 0 one nanosecond is one
    guest instruction).
    """
    rows = []
    chosen = ([(name, run) for run in runs for name in run.manifest["variants"]] if every_run
              else list(latest_per_variant(runs).items()))
    for name, run in chosen:
        v = run.manifest["variants"][name]
        if not v.get("boot", True):
            continue
        res = run.results[run.results["variant"] == name]
        for rep, group in res.groupby("rep"):
            values = dict(zip(group["metric"], group["value"].astype(float), strict=True))
            if PROBE not in values:
                continue
            rows.append({
                "variant": name, "rep": int(rep), "run_id": run.run_id,
                "arch": v.get("arch", HOST), "compiler": v["compiler"], "tree": v["tree"],
                "spectre": "spectre_v2_user=on" in v.get("cmdline", ""),
                "clock": _clock(v), "avg": values[PROBE],
                "lo": values["probe.min_avg_cycles"], "hi": values["probe.max_avg_cycles"],
                # sysfs names no IBPB state on a CPU without IBPB: then it is off
                "ibpb": values.get("spectre_v2.ibpb",
                                   0.0 if values.get("cpu_flag.ibpb") == 0 else float("nan")),
                "per_switch": values.get("prog.ns_per_switch", float("nan")),
                "config": v.get("config_sha256", ""),  # missing only in hand-made manifests
            })
    return pd.DataFrame(rows, columns=["variant", "rep", "run_id", "arch", "compiler", "tree",
                                       "spectre", "clock", "avg", "lo", "hi", "ibpb",
                                       "per_switch", "config"])


def cells(probe: pd.DataFrame) -> pd.DataFrame:
    """Per (arch, compiler, spectre, clock, tree): boots, mean of the per-boot averages, their
    range (the spread across boots: zero means identical), and the range of all interval
    averages."""
    keys = ["arch", "compiler", "spectre", "clock", "tree"]
    out = probe.groupby(keys).agg(
        variant=("variant", "first"), boots=("avg", "size"), mean=("avg", "mean"),
        boot_min=("avg", "min"), boot_max=("avg", "max"), lo=("lo", "min"), hi=("hi", "max"),
        ibpb=("ibpb", "max"), per_switch=("per_switch", "mean")).reset_index()
    out["spread"] = out["boot_max"] - out["boot_min"]
    return out


def across_runs(runs: list[Run]) -> pd.DataFrame:
    """icount variants measured by more than one run with the same kernel configuration: each
    run's mean and the difference between the runs' means, the test that the instruction count
    survives a fresh pipeline run (new boots of a kernel rebuilt from the same configuration),
    not just repeated boots within one run. A variant whose configuration changed between runs
    (the Arm kernels' -Os to -O2) is a new kernel, not a repetition.

    Columns: variant, runs, means (per run, oldest first), spread (largest minus smallest
    run mean), spread_pct (of the overall mean).
    """
    probe = probe_frame(runs, every_run=True)
    probe = probe[probe["clock"] == "icount"]
    per_run = probe.groupby(["variant", "config", "run_id"])["avg"].mean().reset_index()
    rows = []
    for (name, _), group in per_run.groupby(["variant", "config"]):
        if len(group) < 2:
            continue
        means = group.sort_values("run_id")["avg"]
        rows.append({"variant": name, "runs": len(group),
                     "means": ", ".join(f"{m:.2f}" for m in means),
                     "spread": means.max() - means.min(),
                     "spread_pct": 100 * (means.max() - means.min()) / means.mean()})
    return pd.DataFrame(rows, columns=["variant", "runs", "means", "spread", "spread_pct"])


def changes(cell: pd.DataFrame, before: str = "v2-thread-baseline",
            after: str = "patched", value: str = "mean") -> pd.DataFrame:
    """Per (arch, compiler, spectre, clock): ``value`` (the probe's mean, or ``per_switch``)
    before and after, and the change in percent."""
    keys = ["arch", "compiler", "spectre", "clock"]
    wide = cell.pivot_table(index=keys, columns="tree", values=value)
    if before not in wide or after not in wide:
        return pd.DataFrame(columns=[*keys, "before", "after", "change_pct"])
    out = wide[[before, after]].dropna().rename(columns={before: "before", after: "after"})
    out["change_pct"] = 100 * (out["after"] - out["before"]) / out["before"]
    return out.reset_index()


def _builds(runs: list[Run]) -> dict[str, tuple[Run, dict[str, Any]]]:
    """Build variant -> (run, its manifest entry), newest run first wins per build."""
    out: dict[str, tuple[Run, dict[str, Any]]] = {}
    for name, run in latest_per_variant(runs).items():
        v = run.manifest["variants"][name]
        if v.get("build", {}).get("variant", name) == name:
            out[name] = (run, v)
    return out


EVIDENCE_COLUMNS = ["build", "arch", "compiler", "tree", "config", "fts_copies", "fts_bytes",
                    "fts_calls", "fts_tail_calls", "fts_sched_text", "region_insns",
                    "region_calls", "rdtsc",
                    "schedule_bytes", "schedule_tail_bytes", "outlined", "text_bytes",
                    "sched_text_bytes", "bzImage", "rq_unlock_calls"]


def evidence_frame(runs: list[Run], forced: list[str] | None = None) -> pd.DataFrame:
    """One row per built kernel: what lab.pipeline.inspect found in its vmlinux.

    Columns: build, arch, compiler, tree, config (:data:`CONFIGS`, else timing), fts_copies
    (out-of-line ``finish_task_switch`` symbols), fts_bytes (their bytes together), fts_calls and
    fts_tail_calls (direct calls to them from ``__schedule`` and from ``schedule_tail``, its two
    callers), fts_sched_text (those copies that lie in ``.sched.text``), region_insns /
    region_calls (between the probe's two rdtsc in ``__schedule``), schedule_bytes and
    schedule_tail_bytes (the two callers' sizes), outlined (every
    function the series forces inline that still has an out-of-line copy), text_bytes /
    sched_text_bytes (``_stext`` to ``_etext`` and its ``.sched.text`` part; missing where
    the run's inspect stage predates them), bzImage, rq_unlock_calls (direct calls from
    ``__schedule`` to an out-of-line ``raw_spin_rq_unlock``, which the revert of the merged
    2/3 brings back).
    """
    rows = []
    for name, (_, v) in sorted(_builds(runs).items()):
        ev = v.get("inspect", {}).get("evidence")
        if not ev:
            continue
        fts = ev["functions"].get("finish_task_switch", {})
        sched = ev["callers"].get("__schedule", {})
        tail = ev["callers"].get("schedule_tail", {})
        region = sched.get("probe_region", {})
        names = forced or list(ev["functions"])
        rows.append({
            "build": name, "arch": v.get("arch", HOST), "compiler": v["compiler"],
            "tree": v["tree"],
            "config": next((CONFIGS[f] for f in v.get("fragments", []) if f in CONFIGS),
                           "timing"),
            "fts_copies": ", ".join(fts.get("out_of_line", [])) or "none",
            "fts_bytes": fts.get("bytes"),
            "fts_calls": fts.get("called_from", {}).get("__schedule", 0),
            "fts_tail_calls": fts.get("called_from", {}).get("schedule_tail"),
            "fts_sched_text": (", ".join(fts["in_sched_text"]) or "none")
            if "in_sched_text" in fts else None,
            "region_insns": region.get("instructions"),
            "region_calls": ", ".join(region.get("calls", [])) or "none",
            "rdtsc": region.get("markers"),
            "schedule_bytes": sched.get("bytes"),
            "schedule_tail_bytes": tail.get("bytes"),
            "outlined": ", ".join(f for f in names
                                  if ev["functions"].get(f, {}).get("out_of_line")) or "none",
            "text_bytes": ev.get("layout", {}).get("text_bytes"),
            "sched_text_bytes": ev.get("layout", {}).get("sched_text_bytes"),
            "bzImage": v["build"].get("bzImage_bytes"),
            "rq_unlock_calls": ev["functions"].get("raw_spin_rq_unlock", {})
            .get("called_from", {}).get("__schedule", 0),
        })
    return pd.DataFrame(rows, columns=EVIDENCE_COLUMNS)


def sizes(evidence: pd.DataFrame) -> pd.DataFrame:
    """bzImage bytes of the size-configuration builds, per compiler and tree."""
    size = evidence[(evidence["config"] == "size") & (evidence["arch"] == HOST)]
    return size.pivot_table(index="compiler", columns="tree", values="bzImage",
                            aggfunc="first").reset_index()


_RDTSC = re.compile(r"context-switch-rdtsc(?:-p4)?-(gcc|clang)-spectre-(default|on)-"
                    r"(baseline|patched)")
_BZIMAGE = re.compile(r"context-switch-bzimage-(gcc|clang)-(baseline|patched)")
CITED_TREE = {"baseline": "v2-thread-baseline", "patched": "patched"}
"""The v2 thread's "without" and "with patches" columns, as trees of this chapter."""


def _cell(cell: pd.DataFrame, compiler: str, spectre: bool, icount: bool,
          tree: str) -> pd.Series | None:
    """One cell of ``cell`` (:func:`cells` of one architecture's boots)."""
    sel = cell[(cell["compiler"] == compiler) & (cell["spectre"] == spectre)
               & ((cell["clock"] == "icount") == icount) & (cell["tree"] == tree)]
    return sel.iloc[0] if len(sel) else None


def _describe_cell(row: pd.Series | None, probe: pd.DataFrame, clock: str) -> str:
    if row is None:
        return f"{clock}: not measured"
    boots = probe[probe["variant"] == row["variant"]]["avg"]
    if clock == "icount":  # deterministic to a fraction of a tick: the spread is the point
        return (f"icount {boots.mean():.2f} (n={len(boots)}, "
                f"{boots.min():.2f} to {boots.max():.2f})")
    return f"{clock} {describe(boots)}"


def cited_change(cited: pd.DataFrame, compiler: str, spectre: str,
                 kind: str = "rdtsc") -> quantities.Cited:
    """The change in percent that a cited before/after pair implies (range midpoints), with
    the interval its printed values allow; ``spectre`` is "default" or "on", ``kind`` "rdtsc"
    (cover letter) or "rdtsc-p4"."""
    pick = cited[cited["id"].str.fullmatch(
        rf"context-switch-{kind}-{compiler}-spectre-{spectre}-(baseline|patched)")]
    return scorecard.cited_change(pick)


def _bytes_cited(entries: pd.DataFrame) -> quantities.Cited:
    """The size change a cited pair of byte counts implies, in bytes (each printed exactly to
    the byte, so known to a byte either side)."""
    ends = {r: entries[entries["variant"] == r].iloc[0] for r in scorecard.ROLES}
    base, patched = ends["baseline"], ends["patched"]
    value = float(patched["mid"]) - float(base["mid"])
    return quantities.Cited(value, float(patched["true_low"]) - float(base["true_high"]),
                          float(patched["true_high"]) - float(base["true_low"]),
                          f"{value:+,.0f} bytes (implied)")


NO_IBPB = ("spectre_v2_user=on left IBPB off in the guest (the emulated CPU does not offer it), "
           "so this cell runs the default path; the cited change depends on a barrier only a "
           "real CPU has")
"""Why the ``spectre_v2_user=on`` cells cannot show the cited change under TCG."""

@dataclass(frozen=True)
class Counter:
    """The counter the probe reads on an architecture: the unit its readings are in, and the
    names a row gives it."""

    unit: str
    reading: str
    """What one reading is, in a reason's words."""
    wall: str
    """Our wall-clock cells' label."""
    short: str
    """The counter's name in a table's clock column."""


COUNTERS = {
    "x86_64": Counter("TSC ticks", "an rdtsc reading, not core cycles",
                      "wall-clock TSC (emulated)", "TSC"),
    "arm64": Counter("cntvct_el0 ticks", "a read of the virtual counter, not core cycles",
                     "wall-clock cntvct_el0 (emulated)", "CNTVCT_EL0"),
    "arm": Counter("cntvct_el0 ticks", "a read of the virtual counter (CNTVCT), not core "
                   "cycles", "wall-clock CNTVCT (emulated)", "CNTVCT"),
}
"""Each architecture's probe counter (patches/context-switch/instrument/)."""


def tsc_ticks(machine: str, arch: str = HOST) -> str:
    """Why a cited probe reading of ``machine`` is not compared as a level."""
    counter = COUNTERS[arch]
    return (f"{counter.unit} of {machine} ({counter.reading}), not comparable with an "
            "emulator's ticks")


def emulated(machine: str, arch: str = HOST) -> str:
    """Why a wall-clock cell cannot judge the author's change in a real CPU's time: under TCG
    the counter measures how long QEMU took to emulate the region. QEMU models no cache,
    pipeline or predictor, and its cost per guest instruction differs widely between
    instructions (one translated inline, another a call into a helper or a TLB refill), so the
    region's time moves with the emulator's work, not with the core's. The instruction path,
    which transfers, is the icount row's."""
    return (f"under TCG the {COUNTERS[arch].short} measures how long QEMU took to "
            f"emulate the region, not the time of {machine}: QEMU models no cache, pipeline "
            "or branch predictor, and its cost per guest instruction varies with the "
            "instruction, so the region's time moves with the emulator's work; the "
            "instruction path is the icount row's")


ICOUNT = "icount: instructions, not TSC ticks of a real CPU"
"""What limits the mechanism rows: they count instructions, the author's TSC measured time."""

def _boots(probe: pd.DataFrame, row: pd.Series | None) -> pd.Series:
    """The probe's per-boot averages of one cell's variant, indexed by repetition."""
    if row is None:
        return pd.Series(dtype=float)
    return probe[probe["variant"] == row["variant"]].set_index("rep")["avg"]


def _cell_verdict(cell: pd.DataFrame, probe: pd.DataFrame, compiler: str, spectre: bool,
                  icount: bool, latest: dict[str, Run],
                  judge: verdicts.Judge) -> tuple[Verdict, list[str]]:
    """The verdict on one cell from the v2 base to 7.2.13 + 3/3 under one clock (``judge``
    decides it from the change, :func:`lab.analysis.verdicts.judge_boots` adds the boots' clock
    health),
    and the variants it comes from; "measured, not yet judged" with the reason when there is
    no change to judge."""
    ends = [_cell(cell, compiler, spectre, icount, CITED_TREE[r]) for r in scorecard.ROLES]
    used = [r["variant"] for r in ends if r is not None]
    if any(r is None for r in ends):
        return Verdict(UNJUDGED, "no run of both kernels of this cell yet"), used
    try:
        return verdicts.judge_boots(
            *(_boots(probe, r) for r in ends), judge,
            flagged=tuple(clock_flags(latest[r["variant"]], r["variant"]) for r in ends),
        ), used
    except ValueError as exc:  # includes NotEnoughRepetitions
        return Verdict(UNJUDGED, str(exc).split(". Fix:")[0]), used


def _cannot_show(cell: pd.DataFrame, compiler: str, spectre: bool) -> str | None:
    """:data:`NO_IBPB` for a ``spectre_v2_user=on`` cell whose guest had no IBPB, under
    either clock (the same guest CPU model)."""
    ends = [_cell(cell, compiler, spectre, icount, CITED_TREE[r])
            for r in scorecard.ROLES for icount in (False, True)]
    ibpb = max((r["ibpb"] for r in ends if r is not None), default=float("nan"))
    return NO_IBPB if spectre and not ibpb >= 2 else None


def _row(entry_id: str, ours: str, verdict: Verdict, used: list[str],
         latest: dict[str, Run], **where: str) -> dict[str, Any]:
    """A scorecard row from the variants it ``used`` (their runs, sorted; the first's place)."""
    return scorecard.judged_row(entry_id, ours, verdict, sorted({latest[v].run_id for v in used}),
                                environment_summary(latest[used[0]].manifest), **where)


_V5_PROBE = re.compile(r"context-switch-v5-(i5|ryzen)-(gcc|clang)-spectre-(default|on)-baseline")
_V5_ARM = re.compile(r"context-switch-v5-(arm64|arm32)-(gcc|clang)-baseline")
V5_ARCH = {"arm64": "arm64", "arm32": "arm"}
"""The v5 cover's Arm tables, as our architectures."""
_V5_SIZE = re.compile(r"context-switch-v5-(bzimage|text)-(gcc|clang)-(os|o2)-baseline")
V5_CONFIG = {"os": "size", "o2": "size-o2"}
"""The v5 size tables' optimisation levels, as our build configurations: the author's size
options (his follow-up to the v5 cover: x86_64 defconfig with SCHED_CORE and NO_HZ_FULL, -Os
optional) with and without -Os."""

ALWAYS_INLINE = {
    "gcc": ("true by construction: 3/3 marks it __always_inline, no caller takes its address, "
            "and GCC refuses to build a call to such a function that it cannot inline"),
    "clang": ("3/3 marks it __always_inline and no caller takes its address; Clang, which "
              "does not refuse such a call, inlined both"),
}
"""Why no out-of-line copy is left, per compiler: a check, never support."""

V2_MACHINE = "the author's i5-8300H"
V5_MACHINE = {"i5": V2_MACHINE, "ryzen": "the author's Ryzen 9600X",
              "arm64": "the author's Raspberry Pi 3b (Cortex-A53; the counter's rate, which "
                       "its firmware sets, is not in the mail)",
              "arm32": "the author's Raspberry Pi 3b (Cortex-A53 in AArch32; the counter's "
                       "rate, which its firmware sets, is not in the mail)"}
"""The machines of the postings' probe tables, as a reason names them."""

HIDDEN = ("the author measured no change on this CPU, and a decrease on the i5 for the same "
          "kernels: whether a core hides the work the patch saves is a property of its "
          "microarchitecture, which neither TCG's clock nor an instruction count models")
"""Why a cited 0 % (the v5 table's Ryzen rows) cannot be tested here: an instruction count or
an emulator's clock falling says nothing about whether that core's time stayed the same."""

HIDDEN_COUNT = ("the author saw no change on this core, which no instruction count can test; "
                "the same kernels' shorter path is the i5 row's mechanism, and counting it "
                "again here would count one measurement twice")
"""Why the Ryzen rows' instruction counts support nothing: they repeat the i5 row's."""

FUNCTIONS = (
    ("schedule-tail", "schedule_tail_bytes", 1, "schedule_tail() bytes",
     "finish_task_switch() inlined into schedule_tail(), its second caller, too (the review "
     "asked why one caller would keep an out-of-line copy)"),
    ("schedule", "schedule_bytes", 1, "__schedule() bytes",
     "finish_task_switch() inlined into __schedule()"),
    ("fts-out-of-line", "fts_bytes", -1, "out-of-line finish_task_switch() bytes",
     "no out-of-line copy of finish_task_switch() left"),
)
"""Mechanism rows beside each cited .text growth: (id suffix, evidence column, the direction
the patch predicts, what is counted, what a change in that direction confirms)."""


def _probe_rows(entries: pd.DataFrame, compiler: str, spectre: bool, cited: quantities.Cited,
                cell: pd.DataFrame, probe: pd.DataFrame, latest: dict[str, Run],
                where: dict[str, str], *, change_id: str, change_where: dict[str, str],
                icount_id: str | None, hidden: bool, implied: bool,
                machine: str, arch: str = HOST) -> list[dict[str, str]]:
    """The rows of one cited probe pair: its before and after readings (not comparable), its
    change under TCG's wall clock (a claim, row ``change_id``: the cited change entry, or a
    derived row placed by ``change_where``) and, with ``icount_id``, the instructions on the
    timed path (a mechanism row: instructions are not TSC ticks). ``hidden`` marks a cited 0 %
    that no clock here can test (:data:`HIDDEN`); ``implied``, a change that the cited pair
    implies rather than one the author wrote; ``machine``, whose ticks the cited readings are;
    ``arch``, the architecture of the cells (``cell`` holds only its boots) and with it the
    probe's counter (:data:`COUNTERS`)."""
    counter = COUNTERS[arch]
    cited_text = cited.describe(" %")
    first = _cell(cell, compiler, spectre, False, CITED_TREE["patched"])
    some = first if first is not None else _cell(cell, compiler, spectre, True,
                                                 CITED_TREE["patched"])
    if some is None:
        return []
    environment = environment_limits(latest[some["variant"]].manifest, some["variant"])
    ibpb = _cannot_show(cell, compiler, spectre)
    # the rule of emulated() holds for TCG's clock; a cell booted under KVM has a real core's
    tcg = all(r["clock"].endswith("(tcg)") for r in (
        _cell(cell, compiler, spectre, False, CITED_TREE[role]) for role in scorecard.ROLES)
        if r is not None)
    tsc_verdict, tsc_used = _cell_verdict(
        cell, probe, compiler, spectre, False, latest,
        lambda c: verdicts.judge_change(
            c, cited, f"{environment}; TCG's {counter.unit.split()[0]} is emulated time",
            units=(counter.unit, counter.unit),
            margin=quantities.MARGINS["time"],
            cannot_show=ibpb or (HIDDEN if hidden else None)
            or (emulated(machine, arch) if tcg else None)))
    sign = -1 if cited.value <= 0 else 1  # a cited 0 (the Ryzen) still removes the call
    path = f"a {'shorter' if sign < 0 else 'longer'} timed path (the call the patch removes)"
    said = (f"{path}, the author's explanation of his gain on the i5; on this CPU he measured "
            f"{cited_text}, which no instruction count can test" if hidden
            else f"{path}, behind the cited {cited_text}")
    icount_verdict, icount_used = _cell_verdict(
        cell, probe, compiler, spectre, True, latest,
        lambda c: verdicts.judge_direction(c, sign, said, ICOUNT,
                                           margin=quantities.MARGINS["instructions"],
                                           cannot_show=ibpb or (HIDDEN_COUNT if hidden
                                                                else None)))
    if not tsc_used and not icount_used:
        return []
    rows = []
    for entry in entries[entries["variant"].isin(scorecard.ROLES)].itertuples():
        tree = CITED_TREE[entry.variant]
        measured = [(_cell(cell, compiler, spectre, False, tree), counter.wall),
                    (_cell(cell, compiler, spectre, True, tree), "icount")]
        used = [r["variant"] for r, _ in measured if r is not None]
        if not used:
            continue
        ours = "; ".join(_describe_cell(r, probe, label) for r, label in measured)
        judged = (f"{tsc_verdict.verdict} under the wall clock; the instructions under icount "
                  f"(a mechanism row): {icount_verdict.verdict}")
        which = "the change the cited pair implies" if implied else "the cited change"
        rows.append(_row(entry.id, ours, verdicts.not_comparable(
            f"{tsc_ticks(machine, arch)}; {which} ({cited_text}, its own rows) is judged instead: "
            f"{judged}"), used, latest))
    if tsc_used:
        change = tsc_verdict.change
        rows.append(_row(change_id, change.describe() if change else "—", tsc_verdict,
                         tsc_used, latest, **change_where))
    if icount_used and icount_id:
        change = icount_verdict.change
        rows.append(_row(icount_id, f"instructions {change.describe()}" if change else "—",
                         icount_verdict, icount_used, latest,
                         column="mechanism: instructions on the timed path (icount)",
                         cited=cited_text, **where))
    return rows


def _ends(evidence: pd.DataFrame, config: str, compiler: str) -> dict[str, pd.Series]:
    """The v2 base's and the patched tree's build of one configuration and compiler, by cited
    role, where built."""
    part = evidence[(evidence["config"] == config) & (evidence["compiler"] == compiler)
                    & (evidence["arch"] == HOST)]
    by_tree = {r.tree: r for _, r in part.iterrows()}
    return {role: by_tree[t] for role, t in CITED_TREE.items() if t in by_tree}


def _size_rows(entries: pd.DataFrame, kind: str, compiler: str, config: str,
               evidence: pd.DataFrame, latest: dict[str, Run],
               where: dict[str, str]) -> list[dict[str, str]]:
    """The rows of one v5 size pair (bzImage or .text) and, for .text, the function sizes
    behind it: our builds of the matching configuration from the v2 base to 7.2.13 + 3/3."""
    ends = _ends(evidence, config, compiler)
    if not ends:
        return []
    used = [e["build"] for e in ends.values()]
    claimed = _bytes_cited(entries)
    cited_delta = f"{claimed.value:+,.0f} bytes"
    column = "bzImage" if kind == "bzimage" else "text_bytes"
    what = ("a bzImage grows in whole pages" if kind == "bzimage"
            else "our .text is _stext to _etext of the vmlinux")
    setting = f"{SETTINGS[config]}; {what}"
    rows = []
    values = {role: e[column] for role, e in ends.items() if not pd.isna(e[column])}
    if set(scorecard.ROLES) <= set(values):
        # judged in bytes, the unit of the cited delta column (a percent of an image rounds
        # a page to "+0.0 %")
        change = stats.exact_change(values["baseline"], values["patched"], unit=" bytes")
        verdict = verdicts.judge_change(
            change, claimed, setting, units=("bytes", "bytes"),
            margin=quantities.MARGINS["image" if kind == "bzimage" else "bytes"],
            by="our builds")
        percent = stats.exact_change(values["baseline"], values["patched"]).percent
        for entry in entries.itertuples():
            if entry.variant == "change":
                rows.append(_row(entry.id, f"{change.percent:+,.0f} bytes ({percent:+.3f} %)",
                                 verdict, used, latest))
            else:
                rows.append(_row(entry.id, f"{int(values[entry.variant]):,} bytes",
                                 verdicts.not_comparable(
                                     "bytes of the author's linux-next image, not of 7.2.13; "
                                     f"the change ({cited_delta}) is judged in its own row: "
                                     f"{verdict.verdict}"),
                                 [ends[entry.variant]["build"]], latest))
    if kind != "text" or not set(scorecard.ROLES) <= set(ends):
        return rows
    for suffix, field, sign, counted, claim in FUNCTIONS:
        before, after = (ends[r][field] for r in scorecard.ROLES)
        if pd.isna(before) or pd.isna(after) or before <= 0:  # not recorded, or nothing to grow
            continue
        change = stats.exact_change(before, after, unit=" bytes")
        if suffix == "fts-out-of-line":
            # 3/3 marks it __always_inline and nothing takes its address: GCC fails a build
            # whose call it cannot inline; Clang only remarks it, so there it is observed
            verdict, row_kind = verdicts.check(after == 0, f"{claim}: {int(after):,} bytes out "
                                               "of line; " + ALWAYS_INLINE[compiler]), "check"
        else:
            verdict, row_kind = verdicts.judge_direction(
                change, sign, f"{claim}, part of the cited {cited_delta} of .text", setting,
                margin=quantities.MARGINS["bytes"], by="our builds"), "mechanism"
        base = entries[entries["variant"] == "baseline"]["id"].iloc[0]
        rows.append(_row(base.removesuffix("-baseline") + f"-{suffix}",
                         f"{counted}: {int(before):,} → {int(after):,} "
                         f"({stats.exact_change(before, after).percent:+.1f} %)", verdict,
                         used, latest,
                         column=f"{row_kind}: {counted} (vmlinux symbol table)",
                         cited=cited_delta, **where))
    return rows


def judge(cited: pd.DataFrame, chapter_runs: list[Run]) -> pd.DataFrame:
    """Scorecard rows (:data:`lab.analysis.scorecard.DERIVED_COLUMNS`) of the chapter's cited
    entries.

    The v2 thread: the 16 rdtsc readings (cover letter and patch 4/4 give the same table) and
    the 4 sizes, each absolute and not comparable; a derived change row per cited pair (the
    wall-clock TSC of TCG for a reading, the exact bytes for an image); and a mechanism row per
    cell of the cover letter's table: the instructions on the timed path under icount.

    The v5 cover letter: its written changes on the i5 and the Ryzen judged under the wall
    clock, with an icount mechanism row each; its bzImage and .text changes against our
    builds of the same optimisation level, with the function sizes behind .text (both callers
    of ``finish_task_switch()``, and its out-of-line copy) as mechanism rows. Its arm64 and
    arm32 tables as its x86 ones, from our Arm builds booted on QEMU's virt machine: the
    virtual counter's change under TCG's wall clock, and the instructions under icount."""
    part = cited[cited["chapter"] == "context-switch"]
    probe = probe_frame(chapter_runs)
    by_arch = {arch: cells(group) for arch, group in probe.groupby("arch")}
    cell = by_arch.get(HOST, cells(probe[probe["arch"] == HOST]))
    evidence = evidence_frame(chapter_runs)
    latest = latest_per_variant(chapter_runs)
    rows = []
    pairs = part[part["variant"] == "baseline"]
    for base in pairs.itertuples():
        entries = part[(part["table"] == base.table) & (part["row"] == base.row)]
        where = {"chapter": "context-switch", "table": base.table, "row": base.row}
        if m := _RDTSC.fullmatch(base.id):
            compiler, spectre = m[1], m[2] == "on"
            kind = "rdtsc-p4" if "-p4-" in base.id else "rdtsc"
            claimed = cited_change(part, compiler, m[2], kind)
            rows += _probe_rows(
                entries, compiler, spectre, claimed, cell, probe, latest, where,
                change_id=scorecard.derived_id(base.id),
                change_where={**where, "cited": f"{claimed.value:+.1f} % (implied)",
                              "column": scorecard.DERIVED_COLUMN
                              + ", wall-clock TSC of TCG"},
                icount_id=base.id.removesuffix("-baseline") + "-icount"
                if kind == "rdtsc" else None, hidden=False, implied=True,
                machine=V2_MACHINE)
        elif m := _V5_PROBE.fullmatch(base.id):
            change = entries[entries["variant"] == "change"].iloc[0]
            claimed = scorecard.cited_change(entries)
            rows += _probe_rows(
                entries, m[2], m[3] == "on", claimed, cell, probe, latest, where,
                change_id=change["id"], change_where={},
                icount_id=base.id.removesuffix("-baseline") + "-icount",
                hidden=claimed.value == 0, implied=False, machine=V5_MACHINE[m[1]])
        elif m := _V5_ARM.fullmatch(base.id):
            arch = V5_ARCH[m[1]]
            change = entries[entries["variant"] == "change"].iloc[0]
            if arch not in by_arch:
                continue
            rows += _probe_rows(
                entries, m[2], False, scorecard.cited_change(entries), by_arch[arch], probe,
                latest, where, change_id=change["id"], change_where={},
                icount_id=base.id.removesuffix("-baseline") + "-icount", hidden=False,
                implied=False, machine=V5_MACHINE[m[1]], arch=arch)
        elif m := _V5_SIZE.fullmatch(base.id):
            rows += _size_rows(entries, m[1], m[2], V5_CONFIG[m[3]], evidence, latest, where)
        elif m := _BZIMAGE.fullmatch(base.id):
            compiler = m[1]
            size = evidence[(evidence["config"] == "size") & (evidence["compiler"] == compiler)
                            & (evidence["arch"] == HOST)]
            by_tree = dict(zip(size["tree"], size["bzImage"].astype(int), strict=True))
            by_role = {r: by_tree[t] for r, t in CITED_TREE.items() if t in by_tree}
            if not by_role:
                continue
            claimed = _bytes_cited(entries)
            change = (stats.exact_change(by_role["baseline"], by_role["patched"], unit=" bytes")
                      if set(scorecard.ROLES) <= set(by_role) else None)
            verdict = (verdicts.judge_change(
                change, claimed, "size configuration; a bzImage grows in whole pages",
                units=("bytes", "bytes"), margin=quantities.MARGINS["image"])
                if change else Verdict(UNJUDGED, f"no {compiler} size build of both kernels "
                                                 "yet"))
            for entry in entries.itertuples():
                if entry.variant not in by_role:
                    continue
                tree = CITED_TREE[entry.variant]
                rows.append(_row(entry.id, f"{by_role[entry.variant]:,} bytes",
                                 verdicts.not_comparable(
                                     "bytes of the author's linux-next image, not of 7.2.13; the "
                                     "claim it supports, no size change, is judged in its own "
                                     f"row: {verdict.verdict}"),
                                 list(size[size["tree"] == tree]["build"]), latest))
            if change:
                percent = stats.exact_change(by_role["baseline"], by_role["patched"]).percent
                rows.append(_row(scorecard.derived_id(base.id),
                                 f"{change.percent:+,.0f} bytes ({percent:+.3f} %)", verdict,
                                 list(size["build"]), latest,
                                 column=scorecard.DERIVED_COLUMN, cited=claimed.text,
                                 **where))
    return pd.DataFrame(rows, columns=scorecard.DERIVED_COLUMNS)
