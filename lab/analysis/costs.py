"""What re-measuring the whole book costs: on one machine, as the committed runs took it, and
projected on N machines of a cluster (``make reproduce CHAPTER=all EXECUTOR=slurm``).

Only committed data goes in. Each run's manifest records every build's wall time (Snakemake's
``benchmark:`` file), each boot's time from QEMU's start to the guest's last result, and, since
node stamps, the once-per-machine setup (toolchain root, base source). The jobs of the book are
the builds and boots of the runs its chapters read (:func:`book_jobs`); the projection is a
list-scheduling simulation over their graph (:func:`simulate`), with the cluster profile's
shape: a build is a job on any machine, a run's boots are one job on one machine after all of
that run's builds.

Builds share a build directory per (chapter, configuration, compiler) on one machine, so the
first build there is cold and the next variant recompiles what its series changes. The model
takes a directory's longest recorded build as its cold time and the median of the others as the
time of each further build on the same machine; a machine meeting the directory for the first
time pays the cold time again (per-machine caches, as the profile assumes).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from lab import chapters
from lab.analysis.runs import Run, pooled_per_variant

SETUP = ("root", "source")
"""The once-per-machine stages whose time newer manifests record (``setup_seconds``)."""


@dataclass(frozen=True)
class Build:
    """One kernel build of the book: its directory key and the time it took."""

    chapter: str
    name: str
    directory: str
    seconds: float


@dataclass(frozen=True)
class Timed:
    """One run's boots: one job on one machine, after the builds it boots."""

    chapter: str
    run_id: str
    seconds: float
    boots: int
    builds: tuple[str, ...]
    """Keys of :attr:`Jobs.builds` it needs."""


@dataclass
class Jobs:
    """The book's jobs: builds by key ``chapter/name``, timed groups, setup seconds."""

    builds: dict[str, Build] = field(default_factory=dict)
    timed: list[Timed] = field(default_factory=list)
    recorded: dict[str, float] = field(default_factory=dict)
    """Build key -> the longest time any committed run records for it: a run that found its
    kernels built records the time of their last make, which may have been a rebuild of a few
    objects, so the longest record is the nearest to what the build costs."""
    setup: float = 0.0
    setup_from: str = ""
    """The run whose manifest gave the setup time (the newest that records one)."""

    def seconds(self, key: str) -> float:
        """A build's time: the longest any committed run records for it (:attr:`recorded`)."""
        return max(self.builds[key].seconds, self.recorded.get(key, 0.0))

    def cold_and_warm(self) -> dict[str, tuple[float, float]]:
        """Build directory -> (cold seconds, seconds of each further build there)."""
        by_dir: dict[str, list[float]] = {}
        for key, b in self.builds.items():
            by_dir.setdefault(b.directory, []).append(self.seconds(key))
        out = {}
        for directory, times in by_dir.items():
            times = sorted(times)
            cold = times[-1]
            out[directory] = (cold, statistics.median(times[:-1]) if len(times) > 1 else cold)
        return out


def book_runs(loaded: dict[str, list[Run]]) -> dict[str, list[Run]]:
    """Chapter -> the runs its notebook reads (every run pooled into a variant it shows), for
    every book chapter with an experiment, from ``loaded`` (chapter -> its committed runs,
    oldest first, as :func:`lab.analysis.runs.load_chapter_runs` gives them)."""
    out = {}
    for chapter in chapters.select("all"):
        runs = loaded.get(chapter.name, [])
        ids = {i for run in pooled_per_variant(runs).values() for i in run.run_id.split(" + ")}
        out[chapter.name] = [r for r in runs if r.run_id in ids]
    return out


def _builds(run: Run) -> dict[str, tuple[str, Build]]:
    """Variant -> the key and build of the kernel it boots. The key is chapter, build name,
    commit, configuration and compiler: a kernel several variants or runs boot is built once."""
    out = {}
    for variant, v in run.manifest["variants"].items():
        name = v["build"].get("variant", variant)
        directory = f"{run.chapter}/{v['config_sha256'][:12]}-{v['compiler']}"
        out[variant] = (f"{run.chapter}/{name}-{v['commit'][:12]}-{directory}",
                        Build(run.chapter, name, directory, float(v["build"]["build_seconds"])))
    return out


def book_jobs(book: dict[str, list[Run]], everything: Iterable[Run] = ()) -> Jobs:
    """The builds and timed groups of ``book``'s runs; ``everything`` (all committed runs)
    gives each build directory's longest recorded build and the newest setup time."""
    jobs = Jobs()
    everything = list(everything)
    for run in everything:
        for key, build in _builds(run).values():
            jobs.recorded[key] = max(jobs.recorded.get(key, 0.0), build.seconds)
    for chapter, runs in book.items():
        for run in runs:
            needs, seconds, boots = set(), 0.0, 0
            for variant, (key, build) in _builds(run).items():
                jobs.builds.setdefault(key, build)
                times = run.manifest["variants"][variant].get("boot_to_result_seconds", [])
                if times:
                    needs.add(key)
                seconds += sum(times)
                boots += len(times)
            if boots:
                jobs.timed.append(Timed(chapter, run.run_id, seconds, boots, tuple(sorted(needs))))
    recorded = [r for r in everything if r.manifest.get("setup_seconds")]
    if recorded:
        newest = max(recorded, key=lambda r: r.run_id)
        jobs.setup = float(sum(newest.manifest["setup_seconds"].get(k, 0.0) for k in SETUP))
        jobs.setup_from = f"{newest.chapter}/{newest.run_id}"
    return jobs


def single_machine_seconds(jobs: Jobs) -> float:
    """Every job one after another on one machine: setup once, each build directory cold once
    and warm for its further builds, every boot."""
    dirs = jobs.cold_and_warm()
    count: dict[str, int] = {}
    for b in jobs.builds.values():
        count[b.directory] = count.get(b.directory, 0) + 1
    builds = sum(dirs[d][0] + (n - 1) * dirs[d][1] for d, n in count.items())
    return jobs.setup + builds + sum(t.seconds for t in jobs.timed)


def critical_path(jobs: Jobs) -> tuple[float, tuple[str, ...]]:
    """The longest chain of the book's graph, which no number of machines shortens: a
    machine's setup, the slowest cold build a timed group waits for, and the group's boots.
    Returns its seconds and its jobs, first first."""
    dirs = jobs.cold_and_warm()
    best: tuple[float, tuple[str, ...]] = (0.0, ())
    for t in jobs.timed:
        key = max(t.builds, key=lambda k: dirs[jobs.builds[k].directory][0], default=None)
        cold = dirs[jobs.builds[key].directory][0] if key else 0.0
        steps = (("setup",) if jobs.setup else ()) + (
            (f"build {key.split('/')[0]}/{jobs.builds[key].name}",) if key else ()) + (
            f"{t.boots} boots of {t.chapter}/{t.run_id}",)
        best = max(best, (jobs.setup + cold + t.seconds, steps))
    return best


def simulate(jobs: Jobs, machines: int) -> float:
    """The book's makespan on ``machines`` machines, by list scheduling: jobs in order of
    their longest path to the end (builds first, as every group waits for builds), each put on
    the machine where it finishes first, paying the setup on a machine's first job and a build
    directory's cold build on its first build there; a timed group starts once all its builds
    are done."""
    dirs = jobs.cold_and_warm()
    waiting: dict[str, float] = {}  # build key -> longest timed group that waits for it
    for t in jobs.timed:
        for key in t.builds:
            waiting[key] = max(waiting.get(key, 0.0), t.seconds)
    free = [0.0] * machines
    warm: list[set[str]] = [set() for _ in range(machines)]
    started = [False] * machines
    built: dict[str, float] = {}

    def run(cost: list[float], after: float) -> tuple[int, float]:
        """Put a job on the machine where it ends first; that machine and the end."""
        m = min(range(machines), key=lambda i: (max(free[i], after) + cost[i], i))
        free[m] = max(free[m], after) + cost[m]
        started[m] = True
        return m, free[m]

    for key in sorted(jobs.builds, key=lambda k: -(dirs[jobs.builds[k].directory][0]
                                                   + waiting.get(k, 0.0))):
        b = jobs.builds[key]
        cold, hot = dirs[b.directory]
        cost = [(0.0 if started[m] else jobs.setup) + (hot if b.directory in warm[m] else cold)
                for m in range(machines)]
        m, built[key] = run(cost, 0.0)
        warm[m].add(b.directory)
    for t in sorted(jobs.timed, key=lambda t: -t.seconds):
        cost = [(0.0 if started[m] else jobs.setup) + t.seconds for m in range(machines)]
        run(cost, max((built[k] for k in t.builds), default=0.0))
    return max(free)
