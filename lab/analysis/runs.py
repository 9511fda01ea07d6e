"""Read what the pipeline measured: ``data/runs/<chapter>/<run-id>/{manifest.json,results.csv}``.

Only the pipeline writes these directories (``lab.pipeline.publish``); this module only reads them,
and
checks each file against the sha256 its manifest records, so an edited measurement is refused
rather than plotted.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from lab import DATA
from lab.parse.clock import parse_console

RUNS_DIR = DATA / "runs"
TEXT_COLUMNS = {"cited_id": str, "verdict": str, "variant": str, "unit": str}


class RunDataError(ValueError):
    """A run directory is incomplete or was edited after the pipeline wrote it."""


@dataclass(frozen=True)
class Run:
    """One pipeline run: its manifest and its tidy results."""

    chapter: str
    run_id: str
    path: Path
    manifest: dict
    results: pd.DataFrame

    @cached_property
    def rows_of(self) -> dict[tuple[str, str, str], Any]:
        """(variant, workload, metric) -> the positions of its rows, found in one pass: a judge
        asks :func:`metric_values` hundreds of times per run, and a masked selection over every
        row each time took 1.9 s of io-wq's 3.3 s judge."""
        return self.results.groupby(["variant", "workload", "metric"], sort=False).indices


def _verify(run_dir: Path, manifest: dict) -> None:
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise RunDataError(f"{run_dir}/manifest.json lists no files with sha256. Fix: re-run "
                           "the pipeline for this chapter; never edit run directories by hand.")
    for name, expected in files.items():
        path = run_dir / name
        if not path.is_file():
            raise RunDataError(f"{path}: listed in manifest.json but missing. Fix: restore it "
                               "from git (git checkout -- data/runs) or re-run the pipeline.")
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != expected:
            raise RunDataError(f"{path}: sha256 differs from manifest.json; measured data must "
                               "not be edited. Fix: git checkout -- that file, or re-run.")


def load_run(run_dir: Path) -> Run:
    """Load and verify one run directory."""
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.is_file():
        raise RunDataError(f"{run_dir}: no manifest.json, so this is not a complete run. Fix: "
                           "remove the directory or re-run the pipeline.")
    manifest = json.loads(manifest_path.read_text())
    _verify(run_dir, manifest)
    # Text columns stay text: "100" as measured must not come back as "100.0".
    results = pd.read_csv(run_dir / "results.csv", dtype=TEXT_COLUMNS)
    return Run(chapter=run_dir.parent.name, run_id=run_dir.name, path=run_dir,
               manifest=manifest, results=results)


def load_chapter_runs(chapter: str, runs_dir: Path = RUNS_DIR) -> list[Run]:
    """Every complete run of a chapter, oldest first (run ids sort by date)."""
    base = runs_dir / chapter
    if not base.is_dir():
        return []
    return [load_run(d) for d in sorted(base.iterdir()) if d.is_dir()]


def latest_per_variant(runs: list[Run]) -> dict[str, Run]:
    """Variant -> the newest run that holds that variant (in its manifest or its results).

    A chapter gathers runs over time: a later run may re-measure only the timed variants with
    more repetitions while the lock-statistics variants stay in an older one. Taking the newest
    run per variant lets a notebook pick up such a run without edits. The manifest counts too,
    because a build-only variant (``boot: false``) has evidence but no result rows. ``runs``
    must be oldest first, as :func:`load_chapter_runs` returns them.
    """
    chosen: dict[str, Run] = {}
    for run in runs:
        names = set(run.manifest.get("variants", {}))
        if "variant" in run.results.columns:
            names |= {str(v) for v in run.results["variant"].dropna().unique()}
        for variant in sorted(names):
            chosen[variant] = run
    return chosen


def superseded(runs: list[Run]) -> set[str]:
    """Ids of runs that a re-parsed run replaces (``make reparse`` names its parent): their
    boots are the re-parsed run's, and must not be counted twice."""
    return {r.manifest["parent"]["run_id"] for r in runs if r.manifest.get("parent")}


SAME_VARIANT = ("commit", "config_sha256", "compiler", "cmdline", "accel_used", "machine")
"""What a variant's boots in two runs must share to be the same experiment (with the image
size, the compilers, QEMU and the workloads, see :func:`same_experiment`)."""


MACHINE_KEYS = ("cpu_model", "cores", "machine")
"""What makes two runs' hosts one machine for pooling: CPU model, core count, architecture.
The host kernel is left out (a VM's host updates it under the same hardware); the machine's
name counts where both manifests record one (runs since node stamps)."""


def same_machine(a: dict, b: dict) -> bool:
    """Whether manifests ``a`` and ``b`` were booted on one machine (:data:`MACHINE_KEYS`, and
    the name where both have it): boots of two machines are never pooled, so a comparison
    never mixes the machines' difference into the kernels'."""
    ha, hb = a.get("host", {}), b.get("host", {})
    if any(ha.get(k) != hb.get(k) for k in MACHINE_KEYS):
        return False
    return ha.get("name") is None or hb.get("name") is None or ha["name"] == hb["name"]


def machine_label(host: dict) -> str:
    """A run's host as one short phrase: ``vm: AMD EPYC, 2 cores``, the name left out where an
    older manifest has none."""
    what = f"{host.get('cpu_model', 'unknown CPU')}, {host.get('cores', '?')} cores"
    return f"{host['name']}: {what}" if host.get("name") else what


def same_experiment(a: dict, b: dict, variant: str) -> bool:
    """Whether ``variant`` was built and booted alike in the runs of manifests ``a`` and ``b``:
    same commit, ``.config``, compiler versions, image (its sha256, or its size where an older
    manifest lacks the hash), command line, accelerator, machine, QEMU, the same workloads
    (scripts compared by content where both manifests record it, by name where an older one
    does not), the same guest programs (by content, where both record any): a module
    rebuilt from changed source runs a different experiment on the same kernel; and the same
    host machine (:func:`same_machine`)."""
    va, vb = a.get("variants", {}).get(variant), b.get("variants", {}).get(variant)
    if va is None or vb is None:
        return False

    def workloads(m: dict) -> list[tuple[str, str, str]]:
        return [(w["name"], w.get("parser", "keyvalue"), Path(w["script"]).name)
                for w in m["experiment"]["workloads"]]

    scripts = [m["experiment"].get("scripts") for m in (a, b)]
    programs = [(v.get("tools") or {}).get("programs") or None for v in (va, vb)]
    images = [v.get("build", {}) for v in (va, vb)]
    # the image's sha256 where both runs record it, its size where an older one does not
    image = "bzImage_sha256" if all("bzImage_sha256" in i for i in images) else "bzImage_bytes"
    return ({k: va.get(k) for k in SAME_VARIANT} == {k: vb.get(k) for k in SAME_VARIANT}
            and images[0].get(image) == images[1].get(image)
            and a.get("compilers") == b.get("compilers") and a.get("qemu") == b.get("qemu")
            and workloads(a) == workloads(b)
            and (None in scripts or scripts[0] == scripts[1])
            and (None in programs or programs[0] == programs[1])
            and same_machine(a, b))


def pooled_per_variant(runs: list[Run]) -> dict[str, Run]:
    """Variant -> its boots from every run made like the newest one (:func:`same_experiment`).

    A re-measurement of the same binaries adds boots rather than replacing them, so an older
    run that disagrees is not silently dropped. The pooled run carries the newest run's
    manifest, the ids of every run it pools (``run_id`` joined with " + ") and its rows with
    the repetitions renumbered in run order; each row keeps where it came from (columns
    ``run_id`` and ``run_rep``), for reading its raw files. ``runs`` must be oldest first."""
    gone = superseded(runs)
    live = [r for r in runs if r.run_id not in gone]
    pooled: dict[str, Run] = {}
    for variant, newest in latest_per_variant(live).items():
        members = [r for r in live if r is newest
                   or same_experiment(r.manifest, newest.manifest, variant)]
        frames, ids, offset = [], [], 0
        for run in members:
            rows = run.results[run.results["variant"] == variant].copy()
            if rows.empty:
                continue
            reps = sorted(rows["rep"].unique())
            rows["run_id"], rows["run_rep"] = run.run_id, rows["rep"]
            rows["rep"] = rows["rep"].map({r: offset + i + 1 for i, r in enumerate(reps)})
            offset += len(reps)
            frames.append(rows)
            ids.append(run.run_id)
        results = pd.concat(frames, ignore_index=True) if frames else newest.results.iloc[:0]
        pooled[variant] = Run(newest.chapter, " + ".join(ids) or newest.run_id, newest.path,
                              newest.manifest, results)
    return pooled


CLOCK_COLUMNS = ["rep", "run_id", "run_rep", "window_start", "boot_clocksource", "tsc_unstable",
                 "switches", "watchdog_timeouts", "unstable_before_window",
                 "timeout_before_window", "flags"]
"""Columns of :func:`clock_health`: the boot, then :class:`lab.parse.clock.ClockHealth`'s
fields (``switches`` joined with ", "), then its flags joined with "; "."""


@dataclass(frozen=True)
class Boot:
    """One boot of a plain or pooled run: its (pooled) repetition, the run and repetition it was
    made in, and that run's committed raw directory of it."""
    rep: int
    run_id: str
    run_rep: int
    raw: Path


def boots(run: Run, variant: str) -> list[Boot]:
    """Every boot of ``variant`` in ``run``, in repetition order. A pooled run's boots keep their
    raw files in the runs they came from (``run_id``, ``run_rep``), so anything read from raw
    output must go through here rather than through ``run.path``."""
    rows = run.results[run.results["variant"] == variant]
    if "run_id" not in rows.columns:  # a plain run: each rep is its own
        rows = rows.assign(run_id=run.run_id, run_rep=rows["rep"])
    reps = rows[["rep", "run_id", "run_rep"]].drop_duplicates().sort_values("rep")
    return [Boot(int(rep), run_id, int(run_rep),
                 run.path.parent / run_id / "raw" / variant / f"rep{run_rep}")
            for rep, run_id, run_rep in reps.itertuples(index=False)]


def clock_health(run: Run, variant: str) -> pd.DataFrame:
    """One row per boot of ``variant`` in ``run`` (plain or pooled): what its serial console
    says about the guest's clock while the workloads ran (:mod:`lab.parse.clock`).

    Read from the committed ``console.log.gz`` of each boot, in the run directory its rows came
    from, so every committed run has these flags without being re-parsed or rewritten. A judge
    can then set aside or mark the timings of a boot whose clock was in doubt.
    """
    records = []
    for boot in boots(run, variant):
        path = boot.raw / "console.log.gz"
        if not path.is_file():
            raise RunDataError(f"{path}: missing, so the clock of {run.chapter} {variant} rep "
                               f"{boot.rep} cannot be checked. Fix: restore it from git (git "
                               "checkout -- data/runs).")
        health = parse_console(gzip.decompress(path.read_bytes()).decode(errors="replace"),
                               str(path))
        fields = asdict(health) | {"switches": ", ".join(health.switches)}
        records.append({"rep": boot.rep, "run_id": boot.run_id, "run_rep": boot.run_rep,
                        **fields, "flags": "; ".join(health.flags())})
    return pd.DataFrame(records, columns=CLOCK_COLUMNS)


_FLAGS: dict[tuple[str, str, str], dict[int, str]] = {}


def clock_flags(run: Run, variant: str) -> dict[int, str]:
    """The boots of ``variant`` whose clock was in doubt while the workloads ran: repetition ->
    the flags in words ("TSC marked unstable; clocksource switched to hpet"), for
    :func:`lab.analysis.verdicts.judge_boots`. Healthy boots are left out. Read once per run and
    variant: the judges ask for the same boots row after row."""
    key = (str(run.path), run.run_id, variant)
    if key not in _FLAGS:
        health = clock_health(run, variant)
        flagged = health[health["flags"] != ""]
        _FLAGS[key] = dict(zip(flagged["rep"].astype(int), flagged["flags"], strict=True))
    return _FLAGS[key]


def environment_facts(manifest: dict) -> dict[str, str]:
    """What a run was measured on, one fact per key, for glued prose and captions.

    Keys: accelerator, vcpus, host_cores, host_cpu, qemu, compiler, kernel, config, guest
    (the guests' architecture and emulated CPU where not the host's x86_64, else empty).
    Where the variants of a run differ (the lock-statistics builds have their own config),
    the values are joined with ", ".
    """
    variants = manifest.get("variants", {})
    foreign = sorted({(v["arch"], v.get("machine", {}).get("cpu_model", "?"))
                      for v in variants.values() if v.get("arch", "x86_64") != "x86_64"})
    guests = manifest.get("cross_layer", {}).get("guests", {})
    accels = sorted({a for v in variants.values() for a in v.get("accel_used", [])})
    compilers = sorted({v.get("compiler", "") for v in variants.values()} - {""})
    configs = sorted({v.get("config_sha256", "")[:12] for v in variants.values()} - {""})
    vcpus = sorted({str(v.get("machine", {}).get("cpus", "")) for v in variants.values()} - {""})
    host = manifest.get("host", {})
    qemu = str(guests[foreign[0][0]]["qemu"] if foreign and foreign[0][0] in guests
               else manifest.get("qemu", "")).split(" (")[0].replace("QEMU emulator version ",
                                                                      "")
    base = manifest.get("base", {})
    built_only = bool(variants) and not any(v.get("boot", True) for v in variants.values())
    return {
        "accelerator": "/".join(a.upper() for a in accels)
        or ("built only (not booted)" if built_only else "unknown accelerator"),
        "vcpus": ", ".join(vcpus) or "?",
        "host_cores": str(host.get("cores", "?")),
        "host_cpu": str(host.get("cpu_model", "unknown CPU")),
        "qemu": qemu or "?",
        "compiler": ", ".join(compilers) or "?",
        "kernel": f"Linux {base.get('version', '?')} ({base.get('origin', '?')})",
        "config": ", ".join(configs) or "?",
        "guest": ", ".join(f"{arch} guest ({cpu}, QEMU virt)" for arch, cpu in foreign),
    }


def environment_summary(manifest: dict) -> str:
    """One line naming where a run was measured: accelerator, host CPU, QEMU, compiler, kernel.

    Every figure that shows a measured number shows this line, because a number from TCG and
    a number from bare metal are different claims.
    """
    f = environment_facts(manifest)
    guest = f", {f['guest']}" if f["guest"] else ""
    return (f"{f['accelerator']} on {f['host_cpu']} ({f['host_cores']} host cores){guest}, "
            f"QEMU {f['qemu']}, {f['compiler']}, {f['kernel']}, config {f['config']}")


def environment_limits(manifest: dict, variant: str | None = None) -> str:
    """The part of the environment that bounds what a timing can show.

    For example "TCG, 8 vCPUs on 2 host cores": the phrase a verdict's reason quotes when the
    spread between boots, not the kernel, decides it. With ``variant``, the accelerator and the
    vCPUs are that variant's own: a run that boots TCG and icount variants, or the context-switch
    chapter's arm32 icount cells on one vCPU beside two-vCPU ones, would otherwise name both.
    """
    f = environment_facts(manifest)
    own = manifest.get("variants", {}).get(variant, {}) if variant else {}
    accel = "/".join(a.upper() for a in own.get("accel_used", [])) or f["accelerator"]
    vcpus = str(own.get("machine", {}).get("cpus", f["vcpus"]))
    guest = f" of an emulated {own['arch']}" if own.get("arch") else ""
    return (f"{accel}, {vcpus} vCPU{'' if vcpus == '1' else 's'}{guest} on "
            f"{f['host_cores']} host cores")


def metric_values(run: Run, variant: str, workload: str, metric: str) -> pd.Series:
    """One metric of one variant and workload, one value per repetition, ordered by repetition."""
    sel = run.results.iloc[run.rows_of.get((variant, workload, metric), [])]
    return sel.sort_values("rep").set_index("rep")["value"].astype(float)


UNJUDGED = "measured, not yet judged"
"""Verdict of a measured number whose experiment has not yet compared it with the cited one."""

UNJUDGED_REASON = "the chapter does not yet compare this quantity with the cited one"
"""The reason printed beside :data:`UNJUDGED`."""

RECORDED_REASON = "verdict recorded in the run's results"
"""The reason printed beside a verdict that a run's ``verdict`` column gives."""


def describe(values: pd.Series) -> str:
    """Our value as the scorecard shows it: the mean, and the spread across repetitions.

    A single repetition is shown alone; several show their count and range, because under
    emulation the run-to-run spread is often as large as the effect.
    """
    if len(values) == 1:
        return _number(values.iloc[0])
    return (f"mean {_number(values.mean())} (n={len(values)}, "
            f"{_number(values.min())} to {_number(values.max())})")


def _number(value: float) -> str:
    """Thousands separators for large or whole numbers, four significant digits otherwise."""
    return f"{value:,.0f}" if abs(value) >= 1000 or float(value).is_integer() else f"{value:.4g}"


MEASURED_COLUMNS = ["id", "ours", "verdict", "reason", "run_id", "environment"]
"""Columns of :func:`measured_for_cited`, and of a chapter judge's rows that replace them."""


def measured_for_cited(runs_dir: Path = RUNS_DIR) -> pd.DataFrame:
    """Measured values that a run marks as re-measuring a cited entry (``cited_id`` column).

    Returns one row per cited id: our value over the run's repetitions, the run's verdict if it
    gives one, and its environment; the newest run wins where several measure the same entry.
    Chapters with a judge (:func:`lab.analysis.judges.judges`) replace these rows with judged ones.
    """
    rows = []
    for chapter_dir in sorted(p for p in runs_dir.glob("*") if p.is_dir()):
        for run in load_chapter_runs(chapter_dir.name, runs_dir):
            if "cited_id" not in run.results.columns:
                continue
            env = environment_summary(run.manifest)
            measured = run.results.dropna(subset=["cited_id"])
            for cited_id, group in measured.groupby("cited_id", sort=False):
                verdicts = group["verdict"].dropna() if "verdict" in group else pd.Series()
                rows.append({
                    "id": cited_id, "ours": describe(group["value"].astype(float)),
                    "verdict": verdicts.iloc[-1] if len(verdicts) else UNJUDGED,
                    "reason": RECORDED_REASON if len(verdicts) else UNJUDGED_REASON,
                    "run_id": run.run_id, "environment": env,
                })
    frame = pd.DataFrame(rows, columns=MEASURED_COLUMNS)
    return frame.drop_duplicates("id", keep="last")
