"""``make reproduce CHAPTER=a[,b]|all``: check, take the work directory, run Snakemake, report.

The chapters are validated first (schema, files, parsers, cited ids: seconds, before any
build). Then the driver takes an exclusive ``flock`` on the work directory for its whole life;
the kernel drops it when the driver dies, however it dies. Holding it, any Snakemake lock in
the work directory belongs to a run that is gone (a ``kill -9``), and is cleared with
``snakemake --unlock`` instead of failing with "Directory cannot be locked". A second
``make reproduce`` on the same cache while one runs is refused with the first one's pid.

Snakemake then decides everything else: what is cached, what an interrupted run left to do
(its finished boots are kept until they are published), what to rerun.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lab import ROOT, chapters
from lab.command import HOST_TOOLS, StageError, die_with_parent, require_tools
from lab.pipeline import cachedir, experiment, node, publish

NOISE = re.compile(r"^(Select jobs to execute|Execute \d+ jobs)\.\.\.$")
"""Snakemake lines that say nothing to a reader."""


def add_arguments(sp: argparse.ArgumentParser) -> None:
    """make's CHAPTER=, VARIANTS=, REPS=, ACCEL= and the interpreter for the jobs."""
    sp.add_argument("--chapters", default="")
    sp.add_argument("--variants", default="")
    sp.add_argument("--reps", default="")
    sp.add_argument("--accel", default="")
    sp.add_argument("--python", default=sys.executable)
    sp.add_argument("--executor", default="local", choices=("local", "slurm"),
                    help="where the jobs run: this machine, or a SLURM cluster")
    sp.add_argument("--profile", default="",
                    help="the SLURM profile directory (default workflow/profiles/slurm)")


PROFILE = ROOT / "workflow" / "profiles" / "slurm"
"""The SLURM profile of this project: ``make reproduce EXECUTOR=slurm`` (:func:`executor_args`)."""

SLURM_CONF = Path("/etc/slurm/slurm.conf")


def largest_node() -> int:
    """The CPUs of the cluster's largest node (``sinfo``): Snakemake caps every job's threads
    at ``--cores``, remote jobs included, so on a cluster ``--cores`` must be a node's count,
    not this login machine's."""
    proc = subprocess.run(["sinfo", "--noheader", "--format=%c"], capture_output=True,
                          text=True, check=False)
    counts = [int(word.rstrip("+")) for word in proc.stdout.split() if word.rstrip("+").isdigit()]
    if proc.returncode != 0 or not counts:
        raise StageError(f"sinfo gave no node (exit {proc.returncode}: "
                         f"{(proc.stderr or proc.stdout).strip() or 'no output'}); is slurmctld "
                         "up and this machine a SLURM client?")
    return max(counts)


def executor_args(a: argparse.Namespace) -> list[str]:
    """Snakemake's options for the executor asked for: this machine's cores, or the SLURM
    profile with the largest node's cores.

    Checked before anything is submitted: the SLURM client tools, and the configuration at
    its default path, because the job-step executor inside each job drops ``SLURM_CONF``
    from the environment (a configuration only ``SLURM_CONF`` names works for ``sbatch`` here
    and fails every job)."""
    if a.executor == "local":
        return ["--cores", str(node.cores())]
    require_tools(["sbatch", "squeue", "sinfo", "srun"])
    if os.environ.get("SLURM_CONF") and not SLURM_CONF.is_file():
        raise StageError(f"SLURM_CONF={os.environ['SLURM_CONF']}, but {SLURM_CONF} does not "
                         "exist: the jobs' srun ignores SLURM_CONF and would find no cluster. "
                         f"Install the configuration at {SLURM_CONF} (or run SLURM configless)")
    profile = Path(a.profile or PROFILE).resolve()
    if not (profile / "config.yaml").is_file():
        raise StageError(f"{profile} holds no config.yaml; PROFILE= names a directory like "
                         f"{PROFILE}")
    return ["--workflow-profile", str(profile), "--cores", str(largest_node())]


@contextmanager
def exclusive(work: Path) -> Iterator[None]:
    """Hold the work directory; fail naming the holder if another driver has it."""
    lock = work / ".reproduce.lock"
    fh = lock.open("a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        raise StageError(f"another `make reproduce` is running on {work} ({fh.read().strip()});"
                         " wait for it, or stop it (Ctrl-C) first") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    fh.flush()
    try:
        yield
    finally:
        fh.close()


def snakemake(a: argparse.Namespace, work: Path, *extra: str) -> list[str]:
    """The Snakemake command line of this reproduce."""
    config = [f"chapters={a.chapters}", f"python={a.python}", f"accel={a.accel}",
              f"reps={a.reps}", f"variants={a.variants}"]
    return [sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"),
            "--directory", str(work), *executor_args(a),
            "--resources", "machine=1", "--rerun-incomplete",
            "--rerun-triggers", "mtime", "input", "params",
            # a finished run is measured anew: publish always runs, and the boots it consumed
            # (temporary, deleted once published) are made again; an interrupted run's
            # finished boots still exist and are kept
            "--forcerun", "publish",
            "--quiet", "host", "progress", "rules", "reason",
            "--config", *config, *extra]


def summary(exps: list[experiment.Experiment], work: Path,
            published: dict[str, list[str]]) -> None:
    """Each stage's time (from Snakemake's benchmark files; cached stages show the time they
    took when they ran) and the run directories this reproduce published."""
    from lab.pipeline.stamps import benchmark_seconds
    for exp in exps:
        bench = work / "benchmarks"
        rows = [("root", bench / "root.tsv"), ("source", bench / "source.tsv")]
        rows += [(f"build {b}", bench / exp.name / f"build-{b}.tsv") for b in exp.builds]
        rows += [(f"tools {b}", bench / exp.name / f"tools-{b}.tsv") for b in exp.builds]
        rows += [(f"boot {v} rep{r}", bench / exp.name / exp.key / f"boot-{v}-rep{r}.tsv")
                 for v, r in exp.boots]
        print(f"\nsummary of {exp.name} (experiment {exp.key}):")
        for label, path in rows:
            when = f"{benchmark_seconds(path):>8} s" if path.is_file() else "  not done"
            print(f"  {label:<32} {when}")
        for run_dir in published.get(exp.name, []) or ["(nothing published)"]:
            print(f"  published: {run_dir}")


def stale_timed_outputs(exps: list[experiment.Experiment], work: Path) -> list[str]:
    """The probe, boot and comparison outputs of ``exps`` that do not exist but whose
    metadata Snakemake may still hold: a published run's boots are temporary and deleted,
    their records are not.

    On SLURM each job of the timed group runs in a Snakemake of its own, which checks the
    group's earlier jobs against those records before the head has updated them; a record
    from another run (another checkout's paths, another script) makes it run the earlier boot
    again instead of its own, and the group fails. Clearing the records of what does not
    exist loses nothing: an output that is gone is made anew anyway."""
    paths = []
    for exp in exps:
        paths.append(f"accel/{exp.name}/{exp.key}.json")
        paths += [f"boot/{exp.name}/{exp.key}/{v}/rep{r}" for v, r in exp.boots]
        paths += [f"compare/{exp.name}/{exp.key}/{c.patched}/rep{r}/{c.workload}"
                  for c, r in exp.compare_jobs]
    return [p for p in paths if not (work / p).exists()]


def main(a: argparse.Namespace) -> int:
    """Validate, lock, run Snakemake over the selected chapters, print the summary."""
    selected = chapters.select(a.chapters)
    only = [v for v in a.variants.split(",") if v] or None
    if only and len(selected) > 1:
        raise StageError("VARIANTS= names variants of one chapter; give a single CHAPTER=")
    exps = [experiment.load(ch, accel=a.accel or None, reps=int(a.reps) if a.reps else None,
                            only=only) for ch in selected]
    require_tools(list(HOST_TOOLS))
    work = cachedir.work()
    start = time.monotonic()
    print(f"reproduce {','.join(e.name for e in exps)} (caches: {cachedir.cache_root()})",
          flush=True)
    with exclusive(work):
        if any((work / ".snakemake" / "locks").glob("*")):
            print("clearing the Snakemake lock of an earlier run that was killed", flush=True)
            subprocess.run(snakemake(a, work, "--unlock"), check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        stale = stale_timed_outputs(exps, work) if a.executor == "slurm" else []
        if stale:
            # Snakemake clears the records it has and fails naming those it has none of
            # (never booted here): only another failure is one
            done = subprocess.run(snakemake(a, work, "--cleanup-metadata", *stale), text=True,
                                  capture_output=True, check=False)
            if done.returncode and "metadata was not present" not in done.stderr + done.stdout:
                raise StageError(f"snakemake --cleanup-metadata failed: {done.stderr[-2000:]}")
        before = {e.name: set(_runs(e.name)) for e in exps}
        proc = subprocess.Popen(snakemake(a, work), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                preexec_fn=lambda: die_with_parent(signal.SIGTERM))
        assert proc.stdout is not None
        for line in proc.stdout:
            if not NOISE.match(line.strip()):
                print(line, end="", flush=True)
        rc = proc.wait()
    published = {e.name: sorted(str(p) for p in set(_runs(e.name)) - before[e.name])
                 for e in exps}
    summary(exps, work, published)
    print(f"reproduce: {'done' if rc == 0 else 'FAILED'} in {time.monotonic() - start:.0f} s")
    return 0 if rc == 0 else 1


def _runs(chapter: str) -> list[Path]:
    base = publish.runs_dir() / chapter
    return [p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")] \
        if base.is_dir() else []
