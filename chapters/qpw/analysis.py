"""The qpw chapter's analysis: the kmalloc cells against the cited ones, instructions per
kmalloc under icount, where the drain work ran when CPU 1 was isolated, syzbot's lockdep
warning, and the verdicts.

The cited numbers are average TSC ticks per ``kmalloc()`` in seven cells on the authors'
machine. Under TCG the guest TSC follows the host's clock, so our ticks are emulated time:
the absolute values are not comparable, and each patched cell is judged by its change against
the unpatched cell of its preemption model (a change the cited pair implies). Beside each
change stands its mechanism row: the same change in guest instructions per ``kmalloc()``,
counted under icount (deterministic, any machine).

The isolation rows are the series' reason to exist and have no cited number: per drain
request, work items that started on the isolated CPU, IPIs sent to it, its context switches,
and the request's latency, each judged for the direction the series promises (towards none)
between the unpatched kernel and ``pwlocks=1``.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from lab import chapters
from lab.analysis import quantities, runs, scorecard, stats, verdicts
from lab.pipeline import kconfig

CHAPTER = "qpw"
KMALLOC, ISOLATION, LOCKDEP = "kmalloc", "isolation", "lockdep"
METRIC = "alloc_cycles_per_op"
"""The per-boot metric the chapter's ``cited:`` maps to the cited cells."""


@dataclass(frozen=True)
class Cell:
    """One of the cover letter's seven cells and the variants that measure it."""

    cited_id: str
    variant: str
    """The wall-clock variant; the chapter's ``cited:`` declares it for the cited id."""
    model: str
    """The cited table's row (the preemption model), whose baseline cell is the reference."""
    label: str
    """The cited column (the configuration), as the cover letter names it."""
    reference_id: str
    """The cited id of the unpatched cell of the same model."""

    @property
    def icount(self) -> str:
        """The variant that measures this cell under icount (``<variant>-icount``)."""
        return f"{self.variant}-icount"

    @property
    def short(self) -> str:
        """The configuration without the cover letter's "Patched kernel, " (a row label)."""
        return self.label.removeprefix("Patched kernel, ")

    @property
    def is_reference(self) -> bool:
        """True for an unpatched cell: the one every other cell of its model is judged against."""
        return self.cited_id == self.reference_id


def cells(cited: pd.DataFrame) -> list[Cell]:
    """The cells the chapter's ``cited:`` declares (variant -> cited id of
    ``alloc_cycles_per_op``), in chapter.yaml's order, with their model, configuration and
    reference read from the cited entries."""
    by_id = cited[cited["chapter"] == CHAPTER].set_index("id")
    workload = next(w for w in chapters.get(CHAPTER).meta["workloads"] if w["name"] == KMALLOC)
    found = []
    for variant, cid in workload["cited"][METRIC].items():
        entry = by_id.loc[cid]
        same = by_id[(by_id["table"] == entry["table"]) & (by_id["row"] == entry["row"])]
        reference = same.index[same["variant"] == "baseline"]
        if len(reference) != 1:
            raise ValueError(f"data/cited/{CHAPTER}.yaml: row {entry['row']!r} needs exactly one "
                             f"baseline entry to judge {cid} against, has {len(reference)}")
        found.append(Cell(cid, variant, str(entry["row"]), str(entry["column"]), reference[0]))
    return found


TRIGGER = "trigger_ns"
"""A drain request's latency as the victim program reports it, per round ``r<N>.``."""
ISOLATED = {"unpatched": "iso-unpatched", "pwlocks=0": "iso-pw-0", "pwlocks=1": "iso-pw-1"}
"""Isolation kernels: label -> variant (all PREEMPT_DYNAMIC, CPU 1 isolated), requests back
to back."""
SPACED = {"unpatched": "iso-unpatched-spaced", "pwlocks=0": "iso-pw-0-spaced",
          "pwlocks=1": "iso-pw-1-spaced"}
"""The same kernels with each request issued ``qpw.pause_ms=`` after the victim dirtied its
page: more than the fair server's period apart."""
NOHZ = {"pwlocks=0": "iso-nohz-pw-0", "pwlocks=1": "iso-nohz-pw-1"}
"""A full-dynticks build with ``nohz_full=1`` besides ``isolcpus=``, requests back to back;
``pwlocks=0`` queues the drain on CPU 1 as the unpatched kernel does."""
DISK = {"unpatched": "iso-disk-unpatched", "pwlocks=0": "iso-disk-pw-0",
        "pwlocks=1": "iso-disk-pw-1"}
"""The back-to-back kernels built with a virtio-blk disk and ext2, the victim's file on it
(``qpw.disk=1``): each page it writes allocates a block through the block bitmap's buffer
head, which ``bh_lru_install()`` keeps out of CPU 1's buffer-head LRU because
``isolcpus=domain`` isolates CPU 1 (``cpu_is_isolated()``)."""
DISK_NOHZ = {"unpatched": "iso-disk-nohz-unpatched", "pwlocks=0": "iso-disk-nohz-pw-0",
             "pwlocks=1": "iso-disk-nohz-pw-1"}
"""The same disk victim on full-dynticks builds, CPU 1 isolated with ``nohz_full=1`` and
``isolcpus=managed_irq,1`` but not ``domain``: there the buffer head enters CPU 1's LRU, and
2/4's drain has work on CPU 1."""
PATTERNS = {"back to back": ISOLATED, "spaced": SPACED, "nohz_full": NOHZ, "ext2 disk": DISK,
            "ext2 disk nohz_full": DISK_NOHZ}
"""Each way the isolation experiment ran: pattern -> its kernels."""
LRU_PROBE = {"lru_adds_on_victim": "folios that entered the LRU on CPU 1",
             "lru_adds_on_other_cpu": "folios that entered the LRU on CPU 0"}
"""The positive probe (``mm_lru_insertion`` inside a request), per drain request: CPU 1's
batch drained by its own kworker shows on CPU 1, drained remotely on CPU 0."""

PER_TRIGGER = {
    "work_on_victim": "work items started on the isolated CPU",
    "ipis_to_victim": "IPIs sent to the isolated CPU",
    "switches_on_victim": "context switches on the isolated CPU",
    "nivcsw": "times the FIFO loop was preempted",
}
"""Isolation counts, per drain request: metric -> what it counts."""
LOCKDEP = {"v4 as posted": "lockdep-v4", "with 0005": "lockdep-fixed"}
"""syzbot's report, before and after: PWLOCKS=n under CONFIG_PROVE_LOCKING, both built with
clang from the same configuration, v4's four patches against the whole series."""
LOCKDEP_GCC = "lockdep-v4-gcc"
"""v4 as posted with the same configuration and gcc 15: a build the experiment expects to fail;
its diagnostics are the run's raw ``build-errors.txt``."""
DEBUG = "debug"
"""The workload of the lockdep and debug kernels (``guest/debug.sh``)."""
REPORT_KIND_NAMES = [k for k, _ in chapters.get(CHAPTER).module("parse").REPORT_KINDS] + ["other"]
"""The kinds of kernel report the debug parser counts, in its order."""

Chosen = dict[str, runs.Run]
"""Each variant's boots pooled from every run made like its newest one
(:func:`lab.analysis.runs.pooled_per_variant`)."""


def values(chosen: Chosen, variant: str, workload: str, metric: str) -> pd.Series:
    """Per-boot values of one metric of one variant (empty when the variant has no run)."""
    if variant not in chosen:
        return pd.Series(dtype=float)
    return runs.metric_values(chosen[variant], variant, workload, metric)


def workload_rows(chosen: Chosen, variant: str, workload: str) -> pd.DataFrame:
    """Every row of one variant's pooled boots for one workload (empty without a run)."""
    if variant not in chosen:
        return pd.DataFrame(columns=["rep", "metric", "value"])
    res = chosen[variant].results
    return res[(res["variant"] == variant) & (res["workload"] == workload)]


def reference(cell: Cell, every: list[Cell]) -> Cell:
    """The unpatched cell of ``cell``'s model."""
    return next(c for c in every if c.cited_id == cell.reference_id)


def kmalloc_table(chosen: Chosen, every: list[Cell]) -> pd.DataFrame:
    """One row per cell: ticks per kmalloc under TCG (mean over boots, boots, discarded
    loads), instructions per kmalloc under icount, and the same two for kfree."""
    rows = []
    for cell in every:
        row: dict[str, object] = {"model": cell.model, "cell": cell.label,
                                  "cited_id": cell.cited_id}
        for accel, variant in (("tcg", cell.variant), ("icount", cell.icount)):
            for op in ("alloc", "free"):
                v = values(chosen, variant, KMALLOC, f"{op}_cycles_per_op")
                row[f"{op}_{accel}"] = v.mean() if len(v) else float("nan")
            row[f"boots_{accel}"] = len(values(chosen, variant, KMALLOC, METRIC))
            row[f"discarded_{accel}"] = float(
                values(chosen, variant, KMALLOC, "loads_discarded").sum())
        rows.append(row)
    return pd.DataFrame(rows)


def icount_boots(chosen: Chosen, variant: str, op: str = "alloc") -> pd.Series:
    """Instructions per operation of each icount boot of a cell: the boot's kept loads after
    the first, over all their operations (its ``<op>_cycles_per_op``).

    Within one boot the loads differ only by the interrupts that land inside the loop; between
    boots the count can also move with what else the two vCPUs did (CPU 1's wake-ups are
    counted too). The boots are the repetitions, so a change between cells is judged against
    the spread of whole boots, not of loads that share one boot's state."""
    return values(chosen, variant, KMALLOC, f"{op}_cycles_per_op")


def icount_repetitions(chosen: Chosen, variant: str, op: str = "alloc") -> tuple[pd.Series, str]:
    """An icount cell's repetitions and what one is: its boots (:func:`icount_boots`) when it
    has two or more, else the loads of its one boot (:func:`icount_loads`, runs from before
    the cells were booted three times), whose spread is only the interrupts within a boot."""
    boots = icount_boots(chosen, variant, op)
    if len(boots) >= 2:
        return boots, "boot"
    return icount_loads(chosen, variant, op), "load of one boot"


def icount_loads(chosen: Chosen, variant: str, op: str = "alloc") -> pd.Series:
    """Instructions per operation of each kept load after the first, over a cell's icount
    boots: the spread within boots, beside :func:`icount_boots`'s spread between them."""
    res = workload_rows(chosen, variant, KMALLOC)
    per_load = res[res["metric"].str.fullmatch(rf"load\d+\.{op}_cycles_per_op")]
    return per_load[~per_load["metric"].str.startswith("load1.")]["value"].astype(float)


def cell_change(chosen: Chosen, cell: Cell, every: list[Cell], *, icount: bool = False,
                op: str = "alloc") -> stats.Change | None:
    """The cell's change against its model's unpatched cell, Welch on log values: over the
    boots under TCG and under icount (:func:`icount_boots`). None when not measured."""
    ref = reference(cell, every)
    if icount:
        base = icount_repetitions(chosen, ref.icount, op)[0]
        patched = icount_repetitions(chosen, cell.icount, op)[0]
    else:
        base = values(chosen, ref.variant, KMALLOC, f"{op}_cycles_per_op")
        patched = values(chosen, cell.variant, KMALLOC, f"{op}_cycles_per_op")
    if base.empty or patched.empty:
        return None
    return stats.percent_change(base, patched)


def isolation_per_trigger(chosen: Chosen, kernels: dict[str, str] = ISOLATED) -> pd.DataFrame:
    """One row per isolation boot of ``kernels`` (:data:`PATTERNS`): the kernel, and each
    :data:`PER_TRIGGER` and :data:`LRU_PROBE` count divided by the boot's drain requests (the
    probe's NaN in runs without it), with the requests' median and maximum latency in ms, and
    the maximum latency and loop gap without the first request (``*_later_ms``), which waits
    for the fair server in the kernels that queue work on the isolated CPU."""
    rows = []
    for label, variant in kernels.items():
        for rep, boot in workload_rows(chosen, variant, ISOLATION).groupby("rep"):
            m = boot.set_index("metric")["value"]
            rounds = m["rounds"]
            latency = m[[k for k in m.index if k.endswith(".trigger_ns")]] / 1e6
            gaps = m[[k for k in m.index if k.endswith(".max_gap_ns")]] / 1e6
            rows.append({"kernel": label, "rep": rep, "rounds": rounds,
                         "pause_ms": m.get("pause_ms", 0.0),
                         **{k: m[k] / rounds for k in PER_TRIGGER},
                         **{k: m.get(k, float("nan")) / rounds for k in LRU_PROBE},
                         "latency_median_ms": latency.median(),
                         "latency_max_ms": latency.max(),
                         "latency_max_later_ms": latency.drop(f"r0.{TRIGGER}").max(),
                         "max_gap_ms": gaps.max(),
                         "max_gap_later_ms": gaps.drop("r0.max_gap_ns").max()})
    return pd.DataFrame(rows)


def per_request(chosen: Chosen, variant: str, metric: str) -> pd.Series:
    """One count or time of every drain request of every boot of an isolation variant (the
    ``r<n>.<metric>`` rows), indexed by boot and request."""
    res = workload_rows(chosen, variant, ISOLATION)
    rows = res[res["metric"].str.fullmatch(rf"r\d+\.{re.escape(metric)}")]
    return rows.set_index(["rep", "metric"])["value"]


def isolation_patterns(chosen: Chosen) -> pd.DataFrame:
    """One row per pattern and kernel (:data:`PATTERNS`): boots, requests per boot and the
    pause before each, the per-request means of every count over the boots, the fewest folios
    the probe saw enter the LRU on each CPU in any one request, and the latency of the
    requests pooled over the boots (median, and the shortest and longest)."""
    rows = []
    for pattern, kernels in PATTERNS.items():
        boots = isolation_per_trigger(chosen, kernels)
        for label, variant in kernels.items():
            mine = boots[boots["kernel"] == label]
            latency = per_request(chosen, variant, TRIGGER) / 1e6
            rows.append({
                "pattern": pattern, "kernel": label, "boots": len(mine),
                "requests": mine["rounds"].iloc[0], "pause_ms": mine["pause_ms"].iloc[0],
                **mine[[*PER_TRIGGER, *LRU_PROBE]].mean().to_dict(),
                **{f"{k}_min": per_request(chosen, variant, k).min() for k in LRU_PROBE},
                "latency_min_ms": latency.min(), "latency_median_ms": latency.median(),
                "latency_max_ms": latency.max()})
    return pd.DataFrame(rows)


def work_functions(chosen: Chosen, kernels: dict[str, str] = ISOLATED) -> pd.DataFrame:
    """Work items that started on the isolated CPU inside drain requests, per function and
    kernel of ``kernels``, summed over the boots, with the requests they came from."""
    rows = []
    for label, variant in kernels.items():
        res = workload_rows(chosen, variant, ISOLATION)
        triggers = res.loc[res["metric"] == "rounds", "value"].sum()
        for metric, v in res[res["metric"].str.startswith("work.")].groupby("metric")["value"]:
            rows.append({"kernel": label, "function": metric.removeprefix("work."),
                         "items": v.sum(), "triggers": triggers})
    return pd.DataFrame(rows, columns=["kernel", "function", "items", "triggers"])


def work_per_request(chosen: Chosen, patterns: dict[str, dict[str, str]]) -> pd.DataFrame:
    """Work items that started on the isolated CPU inside drain requests, per request, by
    pattern, kernel and function (one row each; a function that never ran in a kernel has no
    row there)."""
    rows = []
    for pattern, kernels in patterns.items():
        for r in work_functions(chosen, kernels).to_dict("records"):
            rows.append({"pattern": pattern, "kernel": r["kernel"], "function": r["function"],
                         "per_request": r["items"] / r["triggers"]})
    return pd.DataFrame(rows, columns=["pattern", "kernel", "function", "per_request"])


def debug_boot(chosen: Chosen, variant: str, rep: int = 1) -> pd.Series:
    """One boot of a lockdep or debug kernel (pooled repetition ``rep``): its rows by metric
    (empty without a run)."""
    rows = workload_rows(chosen, variant, DEBUG)
    rows = rows[rows["rep"] == rep]
    return rows.set_index("metric")["value"].astype(float) if len(rows) else pd.Series(
        dtype=float)


def debug_reps(chosen: Chosen, variant: str) -> list[int]:
    """The pooled repetitions of a lockdep or debug kernel, one per boot."""
    return sorted(int(r) for r in workload_rows(chosen, variant, DEBUG)["rep"].unique())


def _raw_boot(chosen: Chosen, variant: str, rep: int) -> Path:
    """The committed raw directory of one pooled boot, in the run it came from."""
    return next(b.raw for b in runs.boots(chosen[variant], variant) if b.rep == rep)


def kernel_config(chosen: Chosen, variant: str) -> dict[str, str]:
    """The ``.config`` the kernel ``variant`` boots was built from, as the run keeps it."""
    run = chosen[variant]
    build = run.manifest["variants"][variant]["build"]["variant"]
    path = run.path / "config" / f"{build}.config.gz"
    return kconfig.parse(gzip.decompress(path.read_bytes()).decode())


def can_warn(chosen: Chosen, variant: str) -> bool:
    """Whether the kernel can print a WARN(): without ``CONFIG_BUG`` (tinyconfig leaves it
    off) ``WARN_ON()`` evaluates its condition and prints nothing, so a failed
    ``lockdep_assert_held()``, ``DEBUG_PREEMPT``'s checks and ``DEBUG_LOCKS_WARN_ON`` (which
    still turns lockdep off) are silent; lockdep's own reports, the spinlock checks' "bad
    magic" and the sleeping- and scheduling-while-atomic reports print without it."""
    return kernel_config(chosen, variant).get("CONFIG_BUG") == "y"


def lockdep_table(chosen: Chosen) -> pd.DataFrame:
    """syzbot's report before and after (:data:`LOCKDEP`): per kernel, whether it was built with
    ``CONFIG_BUG``, the WARNINGs in SLUB's sheaf paths among the report lines kept in the kernel
    log, every report line, and ``/sys/kernel/warn_count`` (with ``CONFIG_BUG`` every WARN()
    since boot, which a wrapped log buffer does not lose; without it no WARN() at all) at the
    end of the boot (``warn_boot``, the guest's ``boot_warn_count``, read before init runs a
    program), just before the test's commands
    (``warn_before``) and just after them, and lockdep's ``debug_locks`` at the end of the test
    (1: still checking); runs made before the guest read them lack all but ``warn_count``."""
    rows = []
    for label, variant in LOCKDEP.items():
        b = debug_boot(chosen, variant)
        if b.empty:
            continue
        kinds = b[b.index.str.startswith("report.")]
        booted = chosen[variant].manifest["variants"][variant]
        rows.append({"kernel": label, "variant": variant, "tree": booted["tree"],
                     "CONFIG_BUG": can_warn(chosen, variant),
                     "sheaf_warnings": b["pw_assert_warnings"],
                     "report_lines": kinds.sum(),
                     "warn_boot": float(booted["guest"].get("boot_warn_count") or "nan"),
                     "warn_before": b.get("warn_before", float("nan")),
                     "warn_count": b["warn_count"],
                     "debug_locks": b.get("debug_locks", float("nan"))})
    counts = ["sheaf_warnings", "report_lines", "warn_boot", "warn_before", "warn_count",
              "debug_locks"]
    return pd.DataFrame(rows).astype(dict.fromkeys(counts, "Int64")) if rows else pd.DataFrame()


def build_errors(chosen: Chosen) -> list[str]:
    """The diagnostics of v4's gcc 15 build under lockdep (:data:`LOCKDEP_GCC`), as the run
    kept them; empty without a run."""
    if LOCKDEP_GCC not in chosen:
        return []
    path = chosen[LOCKDEP_GCC].path / "raw" / LOCKDEP_GCC / "build-errors.txt.gz"
    return gzip.decompress(path.read_bytes()).decode().splitlines()


def debug_table(chosen: Chosen) -> pd.DataFrame:
    """One row per debug kernel boot (``debug-*`` variants, ``boot`` numbering a variant's
    pooled boots): its test, model, tree and
    ``pwlocks=``, whether the kernel can print a WARN() (:func:`can_warn`), the exercise's
    numbers, ``/sys/kernel/warn_count`` just before and just after the test's commands and
    lockdep's ``debug_locks`` after them (runs made before debug.sh read them lack the first
    and last), and the count of each kind of report the kernel log kept (``report.<kind>``,
    :data:`parse.REPORT_KINDS`; kinds absent from every boot are left out)."""
    rows = []
    for variant, rep in ((v, r) for v in sorted(v for v in chosen if v.startswith("debug-"))
                         for r in debug_reps(chosen, v)):
        b = debug_boot(chosen, variant, rep)
        test = next(k.removeprefix("test.") for k in b.index if k.startswith("test."))
        rows.append({"variant": variant, "boot": rep, "test": test,
                     "model": "RT" if b["CONFIG_PREEMPT_RT"] else "DYN",
                     "tree": chosen[variant].manifest["variants"][variant]["tree"],
                     "pwlocks": int(b["pwlocks"]),
                     "CONFIG_BUG": can_warn(chosen, variant),
                     **{k: b[k] for k in ("initrd_kb", "flush.objects", "failslab_failures",
                                          "flush.preempt_leak", "flush.migrate_leak",
                                          "irq.objects", "irq.freed_in_hardirq",
                                          "warn_before", "warn_count", "debug_locks")
                        if k in b.index},
                     **{k.removeprefix("report."): b[k] for k in b.index
                        if k.startswith("report.")}})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    kinds = [c for c in table.columns if c in REPORT_KIND_NAMES]
    return table.drop(columns=[k for k in kinds if not table[k].fillna(0).any()])


def _debug_section(chosen: Chosen, variant: str, name: str, rep: int) -> list[str]:
    """The lines of section ``name`` of a debug boot's ``debug.sh`` output, as the run kept it."""
    path = _raw_boot(chosen, variant, rep) / "debug.out.gz"
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    return lines[lines.index(f"== {name}") + 1:lines.index(f"== end {name}")]


def debug_log(chosen: Chosen, variant: str, rep: int = 1) -> list[str]:
    """A debug boot's kernel log as ``debug.sh`` read it once after the test (``debug-log.txt``,
    kernel log timestamps included)."""
    path = _raw_boot(chosen, variant, rep) / "debug-log.txt.gz"
    return gzip.decompress(path.read_bytes()).decode().splitlines()


def debug_first_report(chosen: Chosen, variant: str, rep: int = 1) -> list[str]:
    """The first report a debug boot's kernel log kept, with the lines around it (``debug.sh``'s
    ``== first`` section, kernel log timestamps included)."""
    return _debug_section(chosen, variant, "first", rep)


def debug_report_lines(chosen: Chosen, variant: str, rep: int = 1) -> list[str]:
    """Every report header line a debug boot's kernel log kept (``debug.sh``'s ``== report``
    section, timestamps stripped)."""
    return _debug_section(chosen, variant, "report", rep)


def _limits(chosen: Chosen, variant: str) -> str:
    return runs.environment_limits(chosen[variant].manifest, variant)


def isolation_limits(chosen: Chosen) -> str:
    """Where the isolation kernels ran: accelerator, vCPUs, host, QEMU, compiler, kernel (the
    compiler of the isolation variants, not of the whole run, whose lockdep kernels are
    clang's)."""
    manifest = chosen[ISOLATED["pwlocks=1"]].manifest
    facts = runs.environment_facts(manifest)
    compilers = ", ".join(sorted({manifest["variants"][v]["compiler"]
                                  for v in ISOLATED.values()}))
    return (f"{_limits(chosen, ISOLATED['pwlocks=1'])} ({facts['host_cpu']}), QEMU "
            f"{facts['qemu']}, {compilers}, {facts['kernel']}")


def _row(rid: str, *, table: str, row: str, column: str, cited: str, ours: str,
         verdict: verdicts.Verdict, measured: list[runs.Run]) -> dict:
    """A scorecard row from the runs it was ``measured`` in (their ids, the last's place)."""
    return scorecard.judged_row(rid, ours, verdict, [r.run_id for r in measured],
                                runs.environment_summary(measured[-1].manifest), chapter=CHAPTER,
                                table=table, row=row, column=column, cited=cited)


def cited_change(cited: pd.DataFrame, cell: Cell) -> quantities.Cited:
    """The change in percent that the cited pair (this cell against its reference) implies,
    with the interval the truncated printing of both cells allows."""
    by_id = cited.set_index("id")
    return scorecard.cited_change(by_id.loc[[cell.reference_id, cell.cited_id]].reset_index())


def judge(cited: pd.DataFrame, chapter_runs: list[runs.Run]) -> pd.DataFrame:
    """Scorecard rows (:data:`lab.analysis.scorecard.DERIVED_COLUMNS`): the seven cited cells
    (absolute
    TSC ticks: not comparable), a change row per patched cell judged from the TCG boots, an
    icount mechanism row beside each, the isolation rows and the lockdep row."""
    cited = cited[cited["chapter"] == CHAPTER]
    by_id = cited.set_index("id")
    chosen = runs.pooled_per_variant(chapter_runs)
    every = cells(cited)
    rows = []
    for cell in every:
        if cell.variant not in chosen:
            continue
        entry = by_id.loc[cell.cited_id]
        run = chosen[cell.variant]
        ticks = values(chosen, cell.variant, KMALLOC, METRIC)
        ours = f"{runs.describe(ticks)} TSC ticks under TCG (emulated time)"
        ref = reference(cell, every)
        if cell.icount in chosen:
            count = values(chosen, cell.icount, KMALLOC, METRIC)
            ours += f"; {count.mean():,.1f} instructions under icount"
        rows.append(_row(cell.cited_id, table=entry["table"], row=entry["row"],
                         column=entry["column"], cited=entry["cited"], ours=ours,
                         verdict=verdicts.not_comparable(
                             "TSC ticks of the authors' machine (not named) against ticks of "
                             "emulated time here; each patched cell's change against its "
                             "unpatched cell is judged in its own row"),
                         measured=[run]))
        if cell.is_reference or ref.variant not in chosen:
            continue
        implied = cited_change(cited, cell)
        cited_text = (f"{implied.describe(' %')} (implied: {entry['cited']} against "
                      f"{by_id.loc[ref.cited_id, 'cited']}, both truncated by the module's "
                      "integer division)")
        base = values(chosen, ref.variant, KMALLOC, METRIC)
        limits = _limits(chosen, cell.variant)
        verdict = verdicts.judge_boots(
            base, ticks, lambda c, implied=implied, limits=limits: verdicts.judge_change(
                c, implied, limits, units=("TSC ticks", "TSC ticks"),
                margin=quantities.MARGINS["time"]),
            flagged=(runs.clock_flags(chosen[ref.variant], ref.variant),
                     runs.clock_flags(run, cell.variant)))
        rows.append(_row(f"{cell.cited_id}-change", table=entry["table"], row=entry["row"],
                         column=f"{cell.short}: {scorecard.DERIVED_COLUMN}", cited=cited_text,
                         ours=verdict.change.describe() if verdict.change else "—",
                         verdict=verdict, measured=[chosen[ref.variant], run]))
        if cell.icount in chosen and ref.icount in chosen:
            (base_n, unit), (own_n, _) = (icount_repetitions(chosen, ref.icount),
                                          icount_repetitions(chosen, cell.icount))
            counted_on = _limits(chosen, cell.icount)
            reading, ours, expected = icount_reading(cell, implied)
            verdict = verdicts.judge_boots(
                base_n, own_n, lambda c, expected=expected, limits=counted_on,
                reading=reading, ours=ours: verdicts.judge_direction(
                    c, expected, reading, limits, margin=quantities.MARGINS["instructions"],
                    ours=ours), unit=unit)
            verdict, predicted = icount_row(cell, implied, verdict, cited_text)
            rows.append(_row(
                f"{cell.cited_id}-icount", table=entry["table"], row=entry["row"],
                column=f"{cell.short}: "
                       f"{'check' if verdict.kind == verdicts.CHECK else 'mechanism'}, "
                       "instructions per kmalloc() (icount)",
                cited=predicted,
                ours=f"{base_n.mean():,.2f} -> {own_n.mean():,.2f} instructions; "
                     f"{verdict.change.describe()} over {len(base_n)} and {len(own_n)} "
                     f"repetitions (each a {unit})",
                verdict=verdict, measured=[chosen[ref.icount], chosen[cell.icount]]))
    rows += _isolation_rows(chosen)
    rows += _lockdep_rows(chosen)
    rows += _flush_rows(chosen)
    return pd.DataFrame(rows, columns=scorecard.DERIVED_COLUMNS)


def icount_reading(cell: Cell, implied: quantities.Cited) -> tuple[str, bool, int]:
    """What an icount row tests for ``cell``: the prediction, whether it is our reading rather
    than the authors', and the direction it predicts. A mechanism row is judged against what
    its explanation predicts, not against the cited cycles (the claim row judges those). The
    cover's explanation (the un/locking in the local functions, which PREEMPT_RT already pays)
    predicts instructions where the locks are on and RT does not pay them already,
    PREEMPT_DYNAMIC with pwlocks=1; that PREEMPT_RT with pwlocks=1 adds none is our sharpening
    of it (the cover prints a small rise there), so that row tests our reading; the cover and
    0001 expect no change with CONFIG_PWLOCKS=n; with the locks compiled in but off the cover
    predicts nothing, so the row tests our reading of the listing, in the cited direction."""
    cited = f"the cited {implied.describe(' %')}"
    if cell.variant == "dyn-pw-1":
        return (f"{cited}, by the cover's explanation the un/locking the locks add to the "
                "allocation fast path"), False, implied.sign
    if cell.variant == "rt-pw-1":
        return ("our sharpening of the cover's explanation, that no instruction is added "
                "here since PREEMPT_RT already pays the major cost, the un/locking in the local "
                f"functions (the cover prints a small rise; the cycles row judges {cited})"), \
            True, 0
    if cell.variant.endswith("pw-off"):
        return ("the cover and 0001, which expect no change with CONFIG_PWLOCKS=n (the "
                f"cycles row judges {cited})"), False, 0
    outlined = (", and the out-of-line __migrate_enable() gcc calls in the key-off arm"
                if cell.variant.startswith("rt-") else "")
    return (f"our reading of the listing, that with the locks off the static branches' NOPs"
            f"{outlined} add instructions, in the direction of {cited} (the cover's "
            "explanation predicts nothing here)"), True, implied.sign


def icount_row(cell: Cell, implied: quantities.Cited, verdict: verdicts.Verdict,
               cited_text: str) -> tuple[verdicts.Verdict, str]:
    """The icount row's verdict and what its cited column shows. A row that tests a prediction
    of no change shows that prediction, not the cited cycles (its claim row judges those), so
    "direction confirmed" never stands beside a cited increase. With CONFIG_PWLOCKS=n the
    helpers are the local locks themselves and the listing is the unpatched kernel's (the
    notebook asserts it, ``qpw-d1-pwlocks-n-same-code``): that the same code runs the same
    instructions is true by construction, a check, never support."""
    cited = f"the cycles row judges the cited {implied.describe(' %')}"
    if cell.variant.endswith("pw-off"):
        passed = verdict.verdict == verdicts.DIRECTION
        change, margin = verdict.change, verdict.margin
        check = verdicts.check(passed, "with CONFIG_PWLOCKS=n __kmalloc_noprof() and kfree() "
                               "are the unpatched kernel's code, so the allocation path must "
                               f"run the same instructions: our {stats.LEVEL} CI "
                               f"{change.interval()} ({change.n}) "
                               f"{'lies' if passed else 'does not lie'} inside the margin of "
                               f"{margin.name} ({margin.text()})")
        return (replace(check, change=verdict.change, margin=verdict.margin, expected_sign=0),
                f"no change, by construction (the same code; {cited})")
    if verdict.expected_sign == 0:
        return verdict, ("no change, our sharpening of the cover's explanation "
                         f"({cited})")
    return verdict, cited_text


ISOLATION_TABLE = "isolated-cpu-drains"
NO_CITED = "none (the cover gives the reproducer, no numbers)"


COUNTED = frozenset({*(f"qpw-isolation-{m.replace('_', '-')}" for m in PER_TRIGGER),
                     "qpw-isolation-work-on-victim-disk"})
"""The rows of event counts (work items, IPIs, switches per request): judged without any clock,
so no boot's clock trouble bears on them."""


def _isolation_rows(chosen: Chosen) -> list[dict]:
    """unpatched -> pwlocks=1, per drain request: each count, and the latency."""
    if not {"unpatched", "pwlocks=1"} <= {k for k, v in ISOLATED.items() if v in chosen}:
        return []
    boots = isolation_per_trigger(chosen)
    by = {k: part for k, part in boots.groupby("kernel")}
    run = chosen[ISOLATED["pwlocks=1"]]
    limits = _limits(chosen, ISOLATED["pwlocks=1"])
    measured = [chosen[ISOLATED["unpatched"]], run]
    rows = []
    for metric, what in PER_TRIGGER.items():
        verdict = verdicts.judge_boots(
            by["unpatched"].set_index("rep")[metric], by["pwlocks=1"].set_index("rep")[metric],
            lambda c, what=what: verdicts.judge_direction(
                c, -1, f"fewer {what} (the series' purpose)", limits,
                margin=quantities.MARGINS["per request"]),
            measure=lambda b, p: stats.point_change(b, p, unit=" per request"))
        rows.append(_row(
            f"qpw-isolation-{metric.replace('_', '-')}", table=ISOLATION_TABLE,
            row="unpatched -> PWLOCKS=y, pwlocks=1",
            column=f"mechanism: {what}, per drain request", cited=NO_CITED,
            ours=f"{by['unpatched'][metric].mean():.2f} -> {by['pwlocks=1'][metric].mean():.2f}"
                 f"; {verdict.change.describe()}",
            verdict=verdict, measured=measured))
    flagged = tuple(runs.clock_flags(chosen[ISOLATED[k]], ISOLATED[k])
                    for k in ("unpatched", "pwlocks=1"))
    for rid, metric, what, claim in (
            ("qpw-isolation-latency", "latency_max_ms",
             "longest drain request on CPU 0 per boot", "that the requester no longer waits "
             "for a kworker behind the isolated CPU's FIFO loop"),
            ("qpw-isolation-latency-later", "latency_max_later_ms",
             "longest drain request on CPU 0 per boot, the first request left out",
             "that the requester no longer waits for a kworker behind the isolated CPU's FIFO "
             "loop, once the first request's wait for the fair server is set aside"),
            ("qpw-isolation-gap", "max_gap_ms", "longest gap in the FIFO loop per boot",
             "that the isolated CPU's loop is no longer interrupted by the drain"),
            ("qpw-isolation-gap-later", "max_gap_later_ms",
             "longest gap in the FIFO loop per boot, the first request left out",
             "that the isolated CPU's loop is no longer interrupted by the drain, once the "
             "first request is set aside")):
        verdict = verdicts.judge_boots(
            by["unpatched"].set_index("rep")[metric], by["pwlocks=1"].set_index("rep")[metric],
            lambda c, claim=claim: verdicts.judge_direction(
                c, -1, claim, limits, margin=quantities.MARGINS["time"]), flagged=flagged)
        rows.append(_row(
            rid, table=ISOLATION_TABLE, row="unpatched -> PWLOCKS=y, pwlocks=1",
            column=f"mechanism: {what} (emulated time)", cited=NO_CITED,
            ours=f"{by['unpatched'][metric].mean():,.2f} -> {by['pwlocks=1'][metric].mean():,.2f}"
                 f" ms; {verdict.change.describe()}",
            verdict=verdict, measured=measured))
    if {SPACED["unpatched"], SPACED["pwlocks=1"]} <= set(chosen):
        spaced = {k: part.set_index("rep")["latency_median_ms"] for k, part in
                  isolation_per_trigger(chosen, SPACED).groupby("kernel")}
        verdict = verdicts.judge_boots(
            spaced["unpatched"], spaced["pwlocks=1"],
            lambda c: verdicts.judge_direction(
                c, -1, "that the requester no longer waits for a kworker behind the isolated "
                "CPU's FIFO loop, when requests come more than a fair-server period apart",
                _limits(chosen, SPACED["pwlocks=1"]), margin=quantities.MARGINS["time"]),
            flagged=tuple(runs.clock_flags(chosen[SPACED[k]], SPACED[k])
                          for k in ("unpatched", "pwlocks=1")))
        rows.append(_row(
            "qpw-isolation-latency-spaced", table=ISOLATION_TABLE,
            row="unpatched -> PWLOCKS=y, pwlocks=1, requests spaced",
            column="mechanism: median drain request on CPU 0 per boot, requests spaced past "
                   "the fair server's period (emulated time)", cited=NO_CITED,
            ours=f"{spaced['unpatched'].mean():,.2f} -> {spaced['pwlocks=1'].mean():,.2f} ms; "
                 f"{verdict.change.describe()}",
            verdict=verdict, measured=[chosen[SPACED["unpatched"]], chosen[SPACED["pwlocks=1"]]]))
    if {DISK_NOHZ["unpatched"], DISK_NOHZ["pwlocks=1"]} <= set(chosen):
        rows += _disk_rows(chosen)
    return rows


DRAIN_WORK = ("lru_add_drain_per_cpu", "bh_add_drain_per_cpu", "wq_barrier_func")
"""The work functions of a drain on the isolated CPU: the folio drain (unpatched, it also
empties the buffer-head LRU), 2/4's buffer-head drain, and ``flush_work()``'s barrier."""


def drain_work(chosen: Chosen, variant: str) -> pd.Series:
    """Per boot (indexed by repetition) of an isolation variant: the :data:`DRAIN_WORK` items
    that started on the isolated CPU inside the requests, per request; other work that ran
    there (``vmstat_update()`` without domain isolation) is left out."""
    res = workload_rows(chosen, variant, ISOLATION).pivot_table(
        index="rep", columns="metric", values="value", aggfunc="first")
    items = sum(res.get(f"work.{fn}", 0.0) for fn in DRAIN_WORK)
    return (items / res["rounds"]).fillna(0.0)


def _disk_rows(chosen: Chosen) -> list[dict]:
    """Our reading of 2/4 and 3/4, unpatched -> pwlocks=1, with the disk victim on a CPU
    isolated by nohz_full= alone (its buffer-head LRU holds the bitmap's buffer head): the
    buffer-head drain stays a work item on CPU 1, so the drain work items per request and the
    longest request per boot should not change."""
    work = {k: drain_work(chosen, DISK_NOHZ[k]) for k in ("unpatched", "pwlocks=1")}
    boots = {k: part.set_index("rep") for k, part in
             isolation_per_trigger(chosen, DISK_NOHZ).groupby("kernel")}
    limits = _limits(chosen, DISK_NOHZ["pwlocks=1"])
    measured = [chosen[DISK_NOHZ["unpatched"]], chosen[DISK_NOHZ["pwlocks=1"]]]
    flagged = tuple(runs.clock_flags(chosen[DISK_NOHZ[k]], DISK_NOHZ[k])
                    for k in ("unpatched", "pwlocks=1"))
    row = "unpatched -> PWLOCKS=y, pwlocks=1; victim's file on ext2, CPU 1 nohz_full"
    drains = verdicts.judge_boots(
        work["unpatched"], work["pwlocks=1"],
        lambda c: verdicts.judge_direction(
            c, 0, "2/4's buffer-head drain takes the folio drain's place on a CPU that holds a "
            "buffer head, so the drain work items on it per request stay", limits,
            margin=quantities.MARGINS["per request"], ours=True),
        measure=lambda b, p: stats.point_change(b, p, unit=" per request"))
    latency = verdicts.judge_boots(
        boots["unpatched"]["latency_max_ms"], boots["pwlocks=1"]["latency_max_ms"],
        lambda c: verdicts.judge_direction(
            c, 0, "with the buffer-head drain queued on CPU 1 the requester still waits for "
            "its kworker behind the FIFO loop, so the longest request per boot stays", limits,
            margin=quantities.MARGINS["time"], ours=True), flagged=flagged)
    return [
        _row("qpw-isolation-work-on-victim-disk", table=ISOLATION_TABLE, row=row,
             column="mechanism: drain work items started on the isolated CPU (folio drain, "
                    "buffer-head drain, flush barrier), per drain request", cited=NO_CITED,
             ours=f"{work['unpatched'].mean():.2f} -> {work['pwlocks=1'].mean():.2f}; "
                  f"{drains.change.describe()}",
             verdict=drains, measured=measured),
        _row("qpw-isolation-latency-disk", table=ISOLATION_TABLE, row=row,
             column="mechanism: longest drain request on CPU 0 per boot (emulated time)",
             cited=NO_CITED,
             ours=f"{boots['unpatched']['latency_max_ms'].mean():,.2f} -> "
                  f"{boots['pwlocks=1']['latency_max_ms'].mean():,.2f} ms; "
                  f"{latency.change.describe()}",
             verdict=latency, measured=measured)]


def _lockdep_rows(chosen: Chosen) -> list[dict]:
    """syzbot's report before and after, two checks of one boot each under the same clang
    lockdep configuration: v4 as posted must warn in SLUB's sheaf paths (the report
    reproduced); the whole series must raise no WARNING at all since boot, with lockdep still
    on at the end of the test, so its silence was checked throughout (the fix)."""
    table = lockdep_table(chosen)
    if len(table) < len(LOCKDEP):
        return []
    by = table.set_index("kernel")
    v4, fixed = by.loc["v4 as posted"], by.loc["with 0005"]
    before, after = v4["sheaf_warnings"], fixed["sheaf_warnings"]
    cited = "syzbot's report (a warning at boot, no number)"
    row = "PWLOCKS=n, CONFIG_PROVE_LOCKING, clang"
    if not table["CONFIG_BUG"].all():
        quiet = ", ".join(f"{v} ({chosen[v].path.name})"
                          for v in table.loc[~table["CONFIG_BUG"], "variant"])
        raise ValueError(
            f"{quiet}: built without CONFIG_BUG, so WARN_ON() prints nothing and syzbot's "
            "report cannot show; run the lockdep variants again (chapters/qpw/configs/"
            "qpw-lockdep.config sets CONFIG_BUG=y)")
    quiet = after == 0 and fixed["warn_count"] == 0 and fixed["debug_locks"] == 1
    return [
        _row("qpw-lockdep-v4", table="lockdep", row=row,
             column="check: v4 as posted warns in SLUB's sheaf paths (the report reproduced)",
             cited=cited, ours=_lockdep_ours(v4),
             verdict=verdicts.check(
                 before > 0, f"v4 as posted warned in SLUB's sheaf paths ({before} of the "
                 "report lines its kernel log kept)" if before else
                 "v4 as posted did not warn in SLUB's sheaf paths: syzbot's report is not "
                 "reproduced here"),
             measured=[chosen[LOCKDEP["v4 as posted"]]]),
        _row("qpw-lockdep-syzbot", table="lockdep", row=row,
             column="check: with 0005, no warning since boot and lockdep on to the end",
             cited=cited, ours=_lockdep_ours(fixed),
             verdict=verdicts.check(
                 quiet, "with the fix, no WARNING at all since boot and lockdep still on at the "
                 "end, under the configuration in which v4 warned" if quiet else
                 f"with the fix, {fixed['warn_count']} WARNING(s) since boot, {after} of the "
                 f"kept ones in SLUB's sheaf paths, lockdep "
                 f"{'on' if fixed['debug_locks'] == 1 else 'off'} at the end"),
             measured=[chosen[LOCKDEP["with 0005"]]]),
    ]


def _lockdep_ours(kernel: pd.Series) -> str:
    """What a lockdep boot showed: its WARNINGs since boot (``warn_count``, which a wrapped log
    does not lose) and how many of the report lines its log kept are in the sheaf paths."""
    return (f"{kernel['warn_count']:,} WARNINGs since boot; {kernel['sheaf_warnings']} of the "
            f"{kernel['report_lines']} report lines the log kept are in the sheaf paths")


def _flush_rows(chosen: Chosen) -> list[dict]:
    """0006, before and after: with the PW locks on, the flush path of v4 4/4 leaks the
    preempt (on RT, migrate) count of its _local trylock once per batch; with 0006 it must
    not. A check per model, and only where failslab's failures show the path ran."""
    table = debug_table(chosen)
    if table.empty:
        return []
    flush = table[(table["test"] == "flush") & (table["pwlocks"] == 1)]
    rows = []
    for model, part in flush.groupby("model"):
        by = part.set_index("tree")
        if not {"no-0006", "patched"} <= set(by.index):
            continue
        counter = "flush.migrate_leak" if model == "RT" else "flush.preempt_leak"
        what = "migrate-disable" if model == "RT" else "preempt"
        before, after = by.loc["no-0006", counter], by.loc["patched", counter]
        ran = min(by.loc["no-0006", "failslab_failures"], by.loc["patched", "failslab_failures"])
        ok = ran > 0 and before > 0 and after == 0
        rows.append(_row(
            f"qpw-0006-flush-{model.lower()}", table="debug", row=f"{model}, pwlocks=1",
            column=f"check: the {what} count the in-place flush leaves behind, without and "
                   "with 0006",
            cited="none (found by reading v4 4/4)",
            ours=f"{before:.0f} -> {after:.0f} over one free loop; the path ran after "
                 f"{ran:.0f} or more failed sheaf allocations",
            verdict=verdicts.check(ok, (
                f"without 0006 the loop left the {what} count {before:.0f} higher, with it "
                f"unchanged, and the flush path ran (at least {ran:.0f} failed allocations)")
                if ok else (f"{what} count {before:.0f} without and {after:.0f} with 0006, "
                            f"path ran after {ran:.0f} failed allocations")),
            measured=[chosen[v] for v in part["variant"]]))
    return rows


# The isolation traces read again, from the committed raw output: what the counts of
# results.csv cannot say (when the kworker first ran, which IPIs belong to the drain).

FAIR_SERVER_RUNTIME_MS, FAIR_SERVER_PERIOD_MS = 50.0, 1000.0
"""7.2.13's fair server: 50 ms of runtime per 1000 ms period for a CPU's fair tasks, deferred
(``dl_defer``) to its zero-laxity point, ``period - runtime`` after it is started
(``sched_init_dl_servers()`` and ``start_dl_timer()`` in kernel/sched/deadline.c)."""
ISOLATION_OUTPUT = "isolation.out.gz"
_TRACE_LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d{3})\]\s+(?:\S+\s+)?(\d+):\s+(\w+):\s*(.*)$")
_TRACE_MARK = re.compile(r"kb-round (\d+) (begin|end)")
_CALLSITE = re.compile(r"callsite=(\w+)")
TRACE_COLUMNS = ["comm", "cpu", "tsc", "event", "detail", "round"]
"""Columns of :func:`isolation_trace`: the task and CPU of the event, its TSC (the trace
clock is x86-tsc), the event and its text, and the round whose markers enclose it (-1
outside every round)."""


def isolation_outputs(chosen: Chosen, variant: str) -> list[tuple[int, Path]]:
    """(pooled repetition, path of the committed ``isolation.out.gz``) of each boot of an
    isolation variant, in the run directory its rows came from."""
    found = []
    for boot in runs.boots(chosen[variant], variant):
        path = boot.raw / ISOLATION_OUTPUT
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing, so the trace of {variant} rep {boot.rep} "
                                    "cannot be read. Fix: git checkout -- data/runs")
        found.append((boot.rep, path))
    return found


def isolation_trace(path: Path) -> tuple[pd.DataFrame, float]:
    """The trace of one isolation boot (:data:`TRACE_COLUMNS`) and the victim's TSC ticks per
    nanosecond, which turn its TSC differences into emulated time."""
    text = gzip.decompress(path.read_bytes()).decode()
    rate = re.search(r"^tsc_per_ns=([\d.]+)$", text, re.M)
    if rate is None or "== trace\n" not in text:
        raise ValueError(f"{path}: no tsc_per_ns line or no trace section; not an isolation "
                         "boot's output")
    body = text.split("== trace\n", 1)[1].split("== end trace", 1)[0]
    events, begun = [], {}
    for line in body.splitlines():
        m = _TRACE_LINE.match(line)
        if not m:
            raise ValueError(f"{path}: trace line {line!r} is not an event line")
        comm, _, cpu, tsc, event, detail = m.groups()
        if event == "tracing_mark_write" and (mark := _TRACE_MARK.search(detail)):
            begun[int(mark[1])] = (int(tsc), mark[2])
        events.append({"comm": comm, "cpu": int(cpu), "tsc": int(tsc), "event": event,
                       "detail": detail})
    trace = pd.DataFrame(events, columns=TRACE_COLUMNS[:-1])
    trace["round"] = -1
    for n in sorted(begun):
        inside = trace["event"].eq("tracing_mark_write") & trace["detail"].str.fullmatch(
            rf"kb-round {n} (begin|end)")
        lo, hi = trace.loc[inside, "tsc"].min(), trace.loc[inside, "tsc"].max()
        trace.loc[trace["tsc"].between(lo, hi), "round"] = n
    return trace, float(rate[1])


def _first(trace: pd.DataFrame, event: str, pattern: str) -> pd.Series | None:
    hit = trace[(trace["cpu"] == 1) & (trace["event"] == event)
                & trace["detail"].str.contains(pattern, regex=True)]
    return None if hit.empty else hit.iloc[0]


def fair_server_wait(chosen: Chosen, kernels: dict[str, str] = ISOLATED) -> pd.DataFrame:
    """Per isolation boot, the first request's wait, read from the trace in emulated ms: from
    the victim's first switch-in on CPU 1 (``victim_prio`` says it was still a fair task then,
    120) to the kworker's first run there (``to_kworker_ms``) and to round 0's begin marker
    (``to_request_ms``, the victim's start-up); ``predicted_ms``, the fair server's zero-laxity
    point less that start-up; round 0's latency as the victim timed it; and ``rest_ms``, from
    the kworker's first run to the end of the last round (the later requests, inside the same
    server period when below :data:`FAIR_SERVER_PERIOD_MS`); ``idle_or_fair_ms``, the time
    CPU 1 spent idle or running a fair task between the victim's switch-in and the kworker's
    first run (segments whose task left the CPU at a priority of 100 or more): the server is
    charged for that time (``dl_server_update_idle()`` and the fair class's ``update_curr()``),
    which moves its zero-laxity timer later (``dl_server_timer()`` re-arms it when more than
    ``dl_server_min_res``, 1 ms, of runtime has been consumed). A kernel whose kworker never
    ran on CPU 1 has NaN for the kworker's columns. ``kernels``: one pattern's kernels
    (:data:`PATTERNS`)."""
    zero_laxity = FAIR_SERVER_PERIOD_MS - FAIR_SERVER_RUNTIME_MS
    rows = []
    for label, variant in kernels.items():
        latency = workload_rows(chosen, variant, ISOLATION)
        for rep, path in isolation_outputs(chosen, variant):
            trace, per_ns = isolation_trace(path)
            victim = _first(trace, "sched_switch", r"next_comm=drainvictim ")
            kworker = _first(trace, "sched_switch", r"next_comm=kworker/1:")
            begin = trace.loc[trace["detail"] == "kb-round 0 begin", "tsc"].iloc[0]
            last = trace.loc[trace["event"] == "tracing_mark_write", "tsc"].max()
            mine = latency[latency["rep"] == rep].set_index("metric")["value"]

            def ms(ticks: float, per_ns: float = per_ns) -> float:
                return ticks / per_ns / 1e6

            to_request = ms(begin - victim["tsc"])
            end = kworker["tsc"] if kworker is not None else float("inf")
            switches = trace[(trace["event"] == "sched_switch") & (trace["tsc"] >= victim["tsc"])
                             & (trace["tsc"] <= end)]
            starts, fair = switches["tsc"].to_numpy()[:-1], switches["detail"].to_numpy()[1:]
            idle_or_fair = sum(ms(stop - start) for start, stop, detail in zip(
                starts, switches["tsc"].to_numpy()[1:], fair, strict=True)
                if int(re.search(r"prev_prio=(\d+)", detail)[1]) >= 100)
            rows.append({
                "kernel": label, "rep": rep,
                "victim_prio": int(re.search(r"next_prio=(\d+)", victim["detail"])[1]),
                "to_request_ms": to_request,
                "to_kworker_ms": ms(kworker["tsc"] - victim["tsc"]) if kworker is not None
                else float("nan"),
                "predicted_ms": zero_laxity - to_request,
                "round0_latency_ms": mine[f"r0.{TRIGGER}"] / 1e6,
                "rest_ms": ms(last - kworker["tsc"]) if kworker is not None else float("nan"),
                "idle_or_fair_ms": idle_or_fair if kworker is not None else float("nan")})
    return pd.DataFrame(rows)


def request_waits(chosen: Chosen, kernels: dict[str, str]) -> pd.DataFrame:
    """Per request of every boot of ``kernels``, read from the trace in emulated ms: the
    request's latency as the victim timed it, and from its begin marker to the first switch to
    a kworker on CPU 1 inside it (NaN when none ran there): where the request waits for the
    fair server, the second is that wait."""
    rows = []
    for label, variant in kernels.items():
        for rep, path in isolation_outputs(chosen, variant):
            trace, per_ns = isolation_trace(path)
            latency = per_request(chosen, variant, TRIGGER).loc[rep] / 1e6
            for n, inside in trace[trace["round"] >= 0].groupby("round"):
                begin = inside.loc[inside["detail"] == f"kb-round {n} begin", "tsc"].iloc[0]
                ran = inside[(inside["cpu"] == 1) & (inside["event"] == "sched_switch")
                             & inside["detail"].str.contains(r"next_comm=kworker/1:")]
                rows.append({"kernel": label, "rep": rep, "round": n,
                             "latency_ms": latency[f"r{n}.{TRIGGER}"],
                             "to_kworker_ms": (ran["tsc"].iloc[0] - begin) / per_ns / 1e6
                             if not ran.empty else float("nan")})
    return pd.DataFrame(rows, columns=["kernel", "rep", "round", "latency_ms",
                                       "to_kworker_ms"])


def ipis_by_callsite(chosen: Chosen, kernels: dict[str, str] = ISOLATED) -> pd.DataFrame:
    """IPIs sent to CPU 1 inside the rounds of every isolation boot of ``kernels``, by kernel,
    boot, round and the function that sent them (``ttwu_queue_wakelist`` wakes the kworker;
    ``generic_exec_single`` is a function call on CPU 1 that the drain did not ask for)."""
    rows = []
    for label, variant in kernels.items():
        for rep, path in isolation_outputs(chosen, variant):
            trace, _ = isolation_trace(path)
            sent = trace[trace["event"].str.startswith("ipi_send") & (trace["round"] >= 0)]
            for (n, site), count in sent.groupby(
                    ["round", sent["detail"].str.extract(_CALLSITE, expand=False)]).size().items():
                rows.append({"kernel": label, "rep": rep, "round": n, "callsite": site,
                             "ipis": count})
    return pd.DataFrame(rows, columns=["kernel", "rep", "round", "callsite", "ipis"])


def trace_excerpt(chosen: Chosen, kernel: str = "unpatched", rep: int = 1) -> pd.DataFrame:
    """One boot's first request as the trace recorded it: the victim's first switch-in on
    CPU 1, then every event of round 0, with emulated ms from that switch-in."""
    path = dict(isolation_outputs(chosen, ISOLATED[kernel]))[rep]
    trace, per_ns = isolation_trace(path)
    start = _first(trace, "sched_switch", r"next_comm=drainvictim ")
    shown = pd.concat([start.to_frame().T, trace[trace["round"] == 0]])
    return pd.DataFrame({"CPU": shown["cpu"].astype(int), "TSC": shown["tsc"].astype(int),
                         "ms after the victim's first switch-in": (
                             (shown["tsc"] - start["tsc"]) / per_ns / 1e6).map("{:,.2f}".format),
                         "task": shown["comm"], "event": shown["event"],
                         "detail": shown["detail"]}).reset_index(drop=True)


# D1: the instruction deltas of the icount cells, read from each kernel's committed listing of
# the allocation and free paths (chapter.yaml's inspect: listings, with static-branch sites)

DISASSEMBLY = "disassembly.txt.gz"
PW_KEY = "pw_sl"
"""The static key behind ``pwlocks=``: its sites are the lock and unlock of the PW locks."""
_LISTED = re.compile(r"^== (\S+): (?:(\d+) instructions|no symbol|inlined)")
_LINE = re.compile(r"^\s*([0-9a-f]+): (\S+)\s*(.*?)(?:  # static branch (\S+): jmp "
                   r"(?:\+0x([0-9a-f]+)|outside, \S+) when (on|off))?$")
_WITHIN = re.compile(r"<(\S+?)\+0x([0-9a-f]+)>")


@dataclass(frozen=True)
class Line:
    """One instruction of a committed listing: offset in its function, mnemonic, operands,
    and for a static-branch site its key and the offset it jumps to."""

    offset: int
    mnemonic: str
    operands: str
    key: str | None = None
    target: int | None = None

    @property
    def text(self) -> str:
        return f"{self.offset:5x}: {self.mnemonic} {self.operands}".rstrip()


def listing_file(chosen: Chosen, variant: str) -> Path:
    """The committed disassembly of the kernel ``variant`` booted: publish keeps one per build,
    under the first variant of the run that used it, so the newest run of ``variant``'s boots
    that holds one for its build is read."""
    for run_id in sorted({b.run_id for b in runs.boots(chosen[variant], variant)}, reverse=True):
        run_dir = chosen[variant].path.parent / run_id
        listed = runs.load_run(run_dir).manifest["variants"]
        build = listed[variant]["build"]
        for name, entry in listed.items():
            if entry.get("build") == build and (run_dir / "raw" / name / DISASSEMBLY).is_file():
                return run_dir / "raw" / name / DISASSEMBLY
    raise FileNotFoundError(f"no {DISASSEMBLY} for {variant}'s kernel in its runs "
                            f"({chosen[variant].run_id}); the chapter's inspect: listings "
                            "makes one. Fix: git checkout -- data/runs, or re-run the cell")


def listings(path: Path) -> dict[str, list[Line]]:
    """The functions of one listing file (gzipped as a run keeps it, or plain) by name; an
    empty list: no symbol in that kernel."""
    out: dict[str, list[Line]] = {}
    current: list[Line] = []
    data = path.read_bytes()
    for raw in (gzip.decompress(data) if path.suffix == ".gz" else data).decode().splitlines():
        if m := _LISTED.match(raw):
            current = out.setdefault(m[1], [])
        elif m := _LINE.match(raw):
            current.append(Line(int(m[1], 16), m[2], m[3], m[4],
                                int(m[5], 16) if m[5] else None))
        else:
            raise ValueError(f"{path}: line {raw!r} is neither a function header nor an "
                             "instruction of lab.pipeline.inspect's listing format")
    return out


def comparable(lines: list[Line]) -> list[str]:
    """A function's instructions without what moves when anything else in the image moves:
    offsets, RIP-relative displacements and the comments naming their symbols."""
    return [re.sub(r"-?0x[0-9a-f]+\(%rip\)", "(%rip)",
                   re.sub(r"\s*#.*$", "", f"{x.mnemonic} {x.operands}")) for x in lines]


MIGRATE_ENABLE = "__migrate_enable"
"""gcc's out-of-line copy of ``migrate_enable()`` (``static inline`` in include/linux/sched.h),
whose first load names the task's ``migration_disabled`` field in this build."""


def migration_field(functions: dict[str, list[Line]]) -> str | None:
    """The operand that reads ``current->migration_disabled`` in this kernel (``0x338(``):
    the displacement of the first ``movzwl`` of :data:`MIGRATE_ENABLE`; None in a kernel
    without it (``PREEMPT_DYNAMIC`` here), where no branch tests the nesting."""
    for x in functions.get(MIGRATE_ENABLE, []):
        if x.mnemonic == "movzwl" and (m := re.match(r"(-?0x[0-9a-f]+\()", x.operands)):
            return m[1]
    return None


def _nested(run: list[Line], x: Line, field: str | None) -> bool:
    """Whether ``x`` is ``migrate_enable()``'s test for an outer migrate_disable() (``ja`` after
    ``cmp $0x1`` of the count): the benchmark's own outer one makes it taken on every call."""
    return (field is not None and x.mnemonic == "ja" and len(run) >= 3
            and run[-2].mnemonic == "cmp" and run[-2].operands.startswith("$0x1,")
            and run[-3].mnemonic == "movzwl" and run[-3].operands.startswith(field))


def _walk(lines: list[Line], function: str, start: int, field: str | None,
          stop: Callable[[Line, int | None, int | None], bool]) -> list[Line]:
    """The instructions the benchmark runs from ``lines[start]`` until ``stop(line, target,
    next)`` holds (the line counted; ``target``, the offset it jumps to within the function,
    ``next``, the offset it falls through to): straight on, through unconditional jumps within
    the function, and through the nesting test of :func:`_nested`; every other conditional
    branch falls through (the fast path: lock free, sheaf neither empty nor full, no
    reschedule due)."""
    at = {x.offset: k for k, x in enumerate(lines)}
    run: list[Line] = []
    k = start
    while k < len(lines) and len(run) <= len(lines):
        x = lines[k]
        run.append(x)
        target = _jump_target(x, function)
        if stop(x, target, lines[k + 1].offset if k + 1 < len(lines) else None):
            return run
        if target is not None and (x.mnemonic == "jmp" or _nested(run, x, field)):
            k = at[target]
        else:
            k += 1
    raise ValueError(f"{function}: the path from {lines[start].offset:#x} never stops")


def callee_path(functions: dict[str, list[Line]], callee: str) -> list[Line] | None:
    """A called function's path from its entry to its ``ret`` (:func:`_walk`), or None when it
    ends in a tail call (``rt_spin_unlock()``'s ``jmp`` to ``__rcu_read_unlock()``) or has no
    listing: its count then cancels only where both arms call it."""
    lines = functions.get(callee)
    if not lines:
        return None
    field = migration_field(functions)
    run = _walk(lines, callee, 0, field, lambda x, t, _: x.mnemonic in ("ret", "jmp")
                and not (x.mnemonic == "jmp" and t is not None))
    return run if run[-1].mnemonic == "ret" else None


def _jump_target(line: Line, function: str) -> int | None:
    m = _WITHIN.search(line.operands)
    return int(m[2], 16) if m and m[1] == function and line.mnemonic.startswith("j") else None


@dataclass(frozen=True)
class Site:
    """A ``pw_sl`` site and the two arms the key chooses between, from the site to the point
    where they rejoin: ``on``, the taken ``jmp`` and the block it leads to (empty when the target
    lies on the inline path); ``off``, the NOP and the inline instructions up to that point. Each
    arm's ``calls`` are the functions it calls."""

    function: str
    site: Line
    on: list[Line]
    off: list[Line]

    def calls(self, arm: list[Line]) -> list[str]:
        return [m[1] for x in arm if x.mnemonic == "call"
                and (m := re.match(r"<(\S+)>", x.operands))]


def pw_sites(functions: dict[str, list[Line]], function: str) -> list[Site]:
    """Each ``pw_sl`` site of ``function`` with its two arms (:class:`Site`), walked as the
    benchmark runs them (:func:`_walk`). If the inline path itself reaches the target (PREEMPT_RT's
    lock sites jump forward over the hardirq/NMI test) the key-on arm is the jump alone and they
    rejoin there; otherwise the key-on arm runs to its first jump back to an offset below the
    target, and both rejoin where that jump goes."""
    lines = functions[function]
    at = {x.offset: k for k, x in enumerate(lines)}
    field = migration_field(functions)
    out = []
    for k, site in enumerate(lines):
        if site.key != PW_KEY:
            continue
        if site.target is None or site.target not in at or site.target < site.offset:
            raise ValueError(f"{function}: the pw_sl site at {site.offset:#x} does not jump "
                             "forward within the function")
        rejoin = site.target
        if not _reaches(lines, k, function, field, rejoin):
            block = _walk(lines, function, at[site.target], field,
                          lambda x, t, _, lo=site.target: t is not None and t < lo)
            rejoin = _jump_target(block[-1], function)
            if not _reaches(lines, k, function, field, rejoin):
                raise ValueError(f"{function}: the block at {site.target:#x} of the pw_sl site "
                                 f"at {site.offset:#x} does not rejoin the inline path")
        else:
            block = []
        off = _walk(lines, function, k, field, lambda x, t, nxt, r=rejoin: r in (t, nxt))
        out.append(Site(function, site, [site, *block], off))
    return out


def _reaches(lines: list[Line], k: int, function: str, field: str | None, point: int) -> bool:
    """Whether the inline path after the site at ``lines[k]`` reaches ``point`` (falling through
    or jumping to it) before it leaves the function or jumps back to the site or before it."""
    origin = lines[k].offset
    arrived = []

    def stop(x: Line, t: int | None, nxt: int | None) -> bool:
        if point in (t, nxt):
            arrived.append(x)
            return True
        return (x.mnemonic == "ret" or (x.mnemonic == "jmp" and t is None)
                or (t is not None and t <= origin))
    try:
        _walk(lines, function, k, field, stop)
    except ValueError:
        return False
    return bool(arrived)


ALLOC_FN, FREE_FN = "__kmalloc_noprof", "kfree"
"""What kmalloc_bench's loops call: its size is a module parameter, so kmalloc() is the
size-indexed ``__kmalloc_noprof()``, not the constant-size ``__kmalloc_cache_noprof()``."""


def site_table(chosen: Chosen, variant: str) -> pd.DataFrame:
    """Every ``pw_sl`` site in the allocation and free functions of ``variant``'s kernel: where
    it is, the NOP it is while the key is off, where it jumps when on, the two arms' lengths and
    calls, and the instructions per call each state adds: off, the NOP against a kernel without
    the site (``key_off``); on against off (``on_minus_off``), the arms' lengths and the paths
    of the functions only one arm calls (:func:`callee_path`; NaN if such a path is unknown)."""
    functions = listings(listing_file(chosen, variant))
    rows = []
    for fn in (ALLOC_FN, FREE_FN):
        for site in pw_sites(functions, fn):
            on, off = site.calls(site.on), site.calls(site.off)
            only = [(c, +1) for c in on if c not in off] + [(c, -1) for c in off if c not in on]
            paths = {c: callee_path(functions, c) for c, _ in only}
            rows.append({
                "function": fn, "site": f"+{site.site.offset:#x}",
                "nop": {"xchg": "2-byte", "nopl": "5-byte"}.get(site.site.mnemonic,
                                                                 site.site.mnemonic),
                "target": f"+{site.site.target:#x}", "on_arm": len(site.on),
                "off_arm": len(site.off),
                "calls": "; ".join(
                    f"{'on' if sign > 0 else 'off'}: {c}"
                    + (f" ({len(paths[c])})" if paths[c] is not None else "")
                    for c, sign in only) or "same in both",
                "key_off": 1,
                "on_minus_off": float("nan") if any(p is None for p in paths.values()) else (
                    len(site.on) - len(site.off)
                    + sum(sign * len(paths[c]) for c, sign in only))})
    return pd.DataFrame(rows)
