"""The context-switch chapter's analysis: probe cells, inlining evidence, image sizes, verdicts.

The experiment (``experiments/context-switch.yaml``) boots each kernel under two clocks: the
wall-clock TSC of TCG, which is emulated time, and icount, where the guest TSC counts
instructions. The postings' cycles are a real CPU's, so neither clock can confirm their size;
icount can say exactly whether the timed code path got shorter, and the images can say whether
the compiler did what the patch asks. This module turns the committed runs into those tables,
so the notebook only glues and plots.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from lab.runs import (
    MEASURED_COLUMNS,
    UNJUDGED,
    Run,
    describe,
    environment_summary,
    latest_per_variant,
)
from lab.stats import NOT_REPRODUCIBLE, Verdict

TREES = {"v2-thread-baseline": "v2 base", "baseline": "7.2.13", "patched": "7.2.13 + 3/3"}
"""Tree name (patches/context-switch/meta.yaml) -> label: the v2 thread's before, the release
(merged 1/3 and 2/3), and the release with the ported 3/3."""

PROBE = "probe.avg_cycles"


def _clock(variant: dict[str, Any]) -> str:
    used = variant.get("accel_used") or [variant.get("accel_requested", "?")]
    return "icount" if used == ["icount"] else "TSC (" + "/".join(used) + ")"


def probe_frame(runs: list[Run], every_run: bool = False) -> pd.DataFrame:
    """One row per booted variant and repetition: the cell it belongs to and its probe values.

    Each variant comes from the newest run that measured it, or, with ``every_run``, from
    every run that did (to compare runs with each other).

    Columns: variant, rep, run_id, compiler, tree, spectre (``spectre_v2_user=on`` on the
    command line), clock (icount or wall TSC), avg (all full intervals' cycles over their
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
                "compiler": v["compiler"], "tree": v["tree"],
                "spectre": "spectre_v2_user=on" in v.get("cmdline", ""),
                "clock": _clock(v), "avg": values[PROBE],
                "lo": values["probe.min_avg_cycles"], "hi": values["probe.max_avg_cycles"],
                # sysfs names no IBPB state on a CPU without IBPB: then it is off
                "ibpb": values.get("spectre_v2.ibpb",
                                   0.0 if values.get("cpu_flag.ibpb") == 0 else float("nan")),
                "per_switch": values.get("prog.ns_per_switch", float("nan")),
            })
    return pd.DataFrame(rows, columns=["variant", "rep", "run_id", "compiler", "tree",
                                       "spectre", "clock", "avg", "lo", "hi", "ibpb",
                                       "per_switch"])


def cells(probe: pd.DataFrame) -> pd.DataFrame:
    """Per (compiler, spectre, clock, tree): boots, mean of the per-boot averages, their range
    (the spread across boots: zero means identical), and the range of all interval averages."""
    keys = ["compiler", "spectre", "clock", "tree"]
    out = probe.groupby(keys).agg(
        variant=("variant", "first"), boots=("avg", "size"), mean=("avg", "mean"),
        boot_min=("avg", "min"), boot_max=("avg", "max"), lo=("lo", "min"), hi=("hi", "max"),
        ibpb=("ibpb", "max"), per_switch=("per_switch", "mean")).reset_index()
    out["spread"] = out["boot_max"] - out["boot_min"]
    return out


def across_runs(runs: list[Run]) -> pd.DataFrame:
    """icount variants measured by more than one run: each run's mean and the difference
    between the runs' means, the test that the instruction count survives a fresh pipeline
    run (new boots, same images), not just repeated boots within one run.

    Columns: variant, runs, means (per run, oldest first), spread (largest minus smallest
    run mean), spread_pct (of the overall mean).
    """
    probe = probe_frame(runs, every_run=True)
    probe = probe[probe["clock"] == "icount"]
    per_run = probe.groupby(["variant", "run_id"])["avg"].mean().reset_index()
    rows = []
    for name, group in per_run.groupby("variant"):
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
    """Per (compiler, spectre, clock): ``value`` (the probe's mean, or ``per_switch``) before
    and after, and the change in percent."""
    keys = ["compiler", "spectre", "clock"]
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


EVIDENCE_COLUMNS = ["build", "compiler", "tree", "config", "fts_copies", "fts_calls",
                    "fts_sched_text", "region_insns", "region_calls", "rdtsc", "schedule_bytes",
                    "outlined", "text_bytes", "sched_text_bytes", "bzImage", "rq_unlock_calls"]


def evidence_frame(runs: list[Run], forced: list[str] | None = None) -> pd.DataFrame:
    """One row per built kernel: what lab.inspect found in its vmlinux.

    Columns: build, compiler, tree, config (timing or size), fts_copies (out-of-line
    ``finish_task_switch`` symbols), fts_calls (direct calls to them from ``__schedule``),
    fts_sched_text (those copies that lie in ``.sched.text``), region_insns / region_calls
    (between the probe's two rdtsc in ``__schedule``), schedule_bytes, outlined (every
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
        region = sched.get("probe_region", {})
        names = forced or list(ev["functions"])
        rows.append({
            "build": name, "compiler": v["compiler"], "tree": v["tree"],
            "config": "size" if any("size" in f for f in v.get("fragments", [])) else "timing",
            "fts_copies": ", ".join(fts.get("out_of_line", [])) or "none",
            "fts_calls": fts.get("called_from", {}).get("__schedule", 0),
            "fts_sched_text": (", ".join(fts["in_sched_text"]) or "none")
            if "in_sched_text" in fts else None,
            "region_insns": region.get("instructions"),
            "region_calls": ", ".join(region.get("calls", [])) or "none",
            "rdtsc": region.get("markers"),
            "schedule_bytes": sched.get("bytes"),
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
    size = evidence[evidence["config"] == "size"]
    return size.pivot_table(index="compiler", columns="tree", values="bzImage",
                            aggfunc="first").reset_index()


_RDTSC = re.compile(r"context-switch-rdtsc(?:-p4)?-(gcc|clang)-spectre-(default|on)-"
                    r"(baseline|patched)")
_BZIMAGE = re.compile(r"context-switch-bzimage-(gcc|clang)-(baseline|patched)")
CITED_TREE = {"baseline": "v2-thread-baseline", "patched": "patched"}
"""The v2 thread's "without" and "with patches" columns, as trees of this chapter."""


def _cell(cell: pd.DataFrame, compiler: str, spectre: bool, icount: bool,
          tree: str) -> pd.Series | None:
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
                 kind: str = "rdtsc") -> float:
    """The change in percent that a cited before/after pair implies (range midpoints);
    ``spectre`` is "default" or "on", ``kind`` "rdtsc" (cover letter) or "rdtsc-p4"."""
    pick = cited[cited["id"].str.fullmatch(
        rf"context-switch-{kind}-{compiler}-spectre-{spectre}-(baseline|patched)")]
    mids = dict(zip(pick["variant"], pick["mid"].astype(float), strict=True))
    return 100 * (mids["patched"] / mids["baseline"] - 1)


def _rdtsc_verdict(compiler: str, spectre: bool, cell: pd.DataFrame,
                   cited_percent: float) -> Verdict:
    """The cell's verdict, from the deterministic icount path (the TSC of TCG is emulated time).

    The cited entries are absolute TSC readings of the author's i5-8300H, never comparable with an
    emulator's ticks, so each is "not reproducible here"; the reason says how the change the
    cited pair implies fares in instructions, which is all this machine can count.
    """
    before = _cell(cell, compiler, spectre, True, CITED_TREE["baseline"])
    after = _cell(cell, compiler, spectre, True, CITED_TREE["patched"])
    cited = f"{cited_percent:+.1f} %"
    if before is None or after is None:
        return Verdict(UNJUDGED, "no icount run of both kernels of this cell yet")
    instr = 100 * (after["mean"] / before["mean"] - 1)
    fewer = "fewer" if instr < 0 else "more"
    path = f"under icount the timed path runs {abs(instr):.1f} % {fewer} instructions"
    if spectre and not pd.Series([before["ibpb"], after["ibpb"]]).max() >= 2:
        return Verdict(NOT_REPRODUCIBLE, (
            f"spectre_v2_user=on left IBPB off in the guest (the emulated CPU does not offer "
            f"it), so this cell measures the default path: {path}; the cited {cited} "
            "depends on a barrier only a real CPU has"))
    if instr < 0:
        return Verdict(NOT_REPRODUCIBLE, (
            f"absolute TSC readings of the author's CPU; the change the cited pair implies "
            f"({cited}) "
            f"goes the same way in instructions: {path}; its size in cycles needs a real CPU"))
    return Verdict(NOT_REPRODUCIBLE, (
        f"absolute TSC readings of the author's CPU; {path}, so the cited {cited} is not an "
        "instruction-count saving; cycles need a real CPU"))


def _bzimage_verdict(compiler: str, sizes_by_role: dict[str, int]) -> Verdict:
    """The v2 cover letter's claim is "no size change": both sizes equal.

    ``sizes_by_role`` maps the cited columns ("baseline", "patched") to our image sizes."""
    if not {"baseline", "patched"} <= set(sizes_by_role):
        return Verdict(UNJUDGED, f"no {compiler} size build of both kernels yet")
    delta = sizes_by_role["patched"] - sizes_by_role["baseline"]
    if delta == 0:
        return Verdict(NOT_REPRODUCIBLE, (
            "an absolute size of the author's tree and compilers; the claim it supports, no "
            f"size change, holds here too: our {compiler} images of the v2 base and of "
            "7.2.13 + 3/3 (size configuration) are byte-for-byte the same size"))
    return Verdict(NOT_REPRODUCIBLE, (
        f"an absolute size of the author's tree and compilers; the claim it supports, no size "
        f"change, does not hold here: from the v2 base to 7.2.13 + 3/3 our {compiler} image "
        f"changes by {delta:+,} bytes (size configuration)"))


def judge(cited: pd.DataFrame, chapter_runs: list[Run]) -> pd.DataFrame:
    """Scorecard rows (:data:`lab.runs.MEASURED_COLUMNS`) of the chapter's cited entries:
    the 16 rdtsc ranges (cover letter and patch 4/4 give the same table) and the 4 sizes."""
    part = cited[cited["chapter"] == "context-switch"]
    probe = probe_frame(chapter_runs)
    cell = cells(probe)
    evidence = evidence_frame(chapter_runs)
    latest = latest_per_variant(chapter_runs)
    rows = []
    for entry in part.itertuples():
        if m := _RDTSC.fullmatch(entry.id):
            compiler, spectre, role = m[1], m[2] == "on", m[3]
            tree = CITED_TREE[role]
            tsc = _cell(cell, compiler, spectre, False, tree)
            icount = _cell(cell, compiler, spectre, True, tree)
            if tsc is None and icount is None:
                continue
            kind = "rdtsc-p4" if "-p4-" in entry.id else "rdtsc"
            verdict = _rdtsc_verdict(compiler, spectre, cell,
                                     cited_change(part, compiler, m[2], kind))
            used = [r["variant"] for r in (tsc, icount) if r is not None]
            ours = "; ".join([_describe_cell(tsc, probe, "wall-clock TSC (emulated)"),
                              _describe_cell(icount, probe, "icount")])
        elif m := _BZIMAGE.fullmatch(entry.id):
            compiler, tree = m[1], CITED_TREE[m[2]]
            size = evidence[(evidence["config"] == "size") & (evidence["compiler"] == compiler)]
            by_tree = dict(zip(size["tree"], size["bzImage"].astype(int), strict=True))
            if tree not in by_tree:
                continue
            verdict = _bzimage_verdict(compiler, {
                role: by_tree[t] for role, t in CITED_TREE.items() if t in by_tree})
            used = list(size[size["tree"] == tree]["build"])
            ours = f"{by_tree[tree]:,} bytes"
        else:
            continue
        run_ids = sorted({latest[v].run_id for v in used})
        rows.append({"id": entry.id, "ours": ours, "verdict": verdict.verdict,
                     "reason": verdict.reason, "run_id": " + ".join(run_ids),
                     "environment": environment_summary(latest[used[0]].manifest)})
    return pd.DataFrame(rows, columns=MEASURED_COLUMNS)
