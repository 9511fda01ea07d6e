"""A chapter's experiment: the ``variants``/``workloads``/``reps`` of its ``chapter.yaml``.

:mod:`lab.chapters` finds and validates the file; this module turns it into the matrix the
Snakefile builds its DAG from. A variant may override the chapter's fragments (added after
the chapter's), command line (appended), machine and accelerator, so a lockdep build, an
``isolcpus=`` boot or an icount run are each a variant of their own.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lab import chapters, in_repo
from lab.command import StageError
from lab.pipeline.arch import HOST
from lab.pipeline.vm import Machine


@dataclass(frozen=True)
class Variant:
    """One kernel+boot configuration of a chapter."""

    name: str
    tree: str
    fragments: tuple[str, ...]
    cmdline: str
    machine: Machine
    accel: str
    compiler: str
    boot: bool = True
    """False: build and inspect only (e.g. image sizes of a configuration nobody times)."""
    build_fails: str = ""
    """Text the build log must contain: the build is expected to fail (a compiler error that
    is the finding, such as a posted series that does not build in some configuration); such a
    variant never boots, and the run keeps its error lines."""
    initrd: str = ""
    """A tools program handed to QEMU as ``-initrd`` (the 9p root is mounted after it)."""
    reps: int = 3
    """Boots of this variant: the chapter's ``reps`` unless the variant sets its own (a
    deterministic icount cell or a lockdep kernel that only has to show a warning needs one
    boot, not the timed cells' count); make's REPS= overrides both."""
    workloads: tuple[str, ...] = ()
    """The names of the workloads its boots run: the variant's ``workloads`` or, without
    them, every workload of the chapter."""
    arch: str = "x86_64"
    """The architecture its kernel is built for and boots on (:mod:`lab.pipeline.arch`)."""
    kconfig_start: str = "defconfig"
    """The configuration its fragments go on: the chapter's ``kconfig_start``, or its
    architecture's (``arches: {<arch>: {kconfig_start: ...}}``)."""


@dataclass(frozen=True)
class KernelJob:
    """What one kernel stage (series, config, build, tools, inspect) reads of a chapter, for
    one variant or tree: the Snakefile makes it from the experiment and hands it over as the
    rule's one param (:meth:`to_json`), so Snakemake reruns a stage when something that stage
    reads has changed, and no stage re-reads ``chapter.yaml``. Besides the chapter's name,
    file and series (and a variant's compiler and architecture) a job sets only the fields its
    stage reads; the others stay at their defaults, so changing them in ``chapter.yaml`` reruns
    no job of that stage (a new ``inspect:`` list re-inspects, it does not rebuild)."""

    chapter: str
    """The chapter's name, for progress lines."""
    file: str
    """Its ``chapter.yaml``, which an error names as the file to fix. This and the other
    paths are as :func:`lab.in_repo` records them (a clone elsewhere reruns nothing); a
    stage reads them with :func:`lab.from_repo`."""
    series: str
    """The chapter's series directory."""
    variant: str = ""
    """The variant (a series job has none: it makes a tree)."""
    compiler: str = ""
    arch: str = ""
    kconfig_start: str = ""
    fragments: tuple[str, ...] = ()
    """The config fragment files, in merge order (config)."""
    build_fails: str = ""
    extmod: bool = False
    """Keep the external-module tree (build, for a chapter with ``tools: {kbuild: true}``)."""
    tools: dict[str, Any] = field(default_factory=dict)
    """``tools:`` of ``chapter.yaml`` (tools)."""
    tools_dir: str = ""
    """``tools.dir`` as a path (tools)."""
    inspect: dict[str, Any] = field(default_factory=dict)
    """``inspect:`` of ``chapter.yaml`` (inspect)."""
    build: str = ""
    """The variant whose build this one uses (inspect: its stamp names it)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> KernelJob:
        fields = json.loads(text)
        return cls(**{**fields, "fragments": tuple(fields.get("fragments", ()))})


@dataclass(frozen=True)
class Compare:
    """One host-side comparison of two boots (``compare:`` in ``chapter.yaml``): ``script``
    reads the guest output of ``baseline``'s and ``patched``'s boots of one repetition and
    prints what it finds, which is raw output of the patched boot, workload :attr:`workload`.
    It exists because some tools compare two recordings (``perf diff``) whose files are too
    large to publish: they stay in the cache, and only the tool's text is kept."""

    name: str
    script: str
    parser: str
    baseline: str
    patched: str
    reps: int
    units: tuple[tuple[str, str], ...]
    """(metric pattern, unit) of the rows its parser gives, in file order
    (:mod:`lab.parse.units`)."""

    @property
    def workload(self) -> str:
        """The name its output and rows carry, in the patched boot's raw directory."""
        return f"{self.name}-vs-{self.baseline}"


@dataclass(frozen=True)
class Experiment:
    """A chapter's whole matrix."""

    chapter: chapters.Chapter
    kconfig_start: str
    boot_timeout: float
    workload_timeout: float
    workloads: tuple[dict[str, Any], ...]
    reps: int
    variants: dict[str, Variant]
    all_variants: dict[str, Variant]
    """Every variant of the file, also those VARIANTS= left out: a selected variant may boot
    the build of one that is not selected."""
    accel_override: str = ""
    compares: tuple[Compare, ...] = ()
    """The comparisons whose two variants are both selected."""

    @property
    def compare_jobs(self) -> list[tuple[Compare, int]]:
        """Each comparison with each repetition both of its variants boot."""
        return [(c, r) for c in self.compares for r in range(1, c.reps + 1)]

    def compare(self, workload: str, patched: str) -> Compare:
        """The comparison that writes ``workload`` into ``patched``'s boots."""
        return next(c for c in self.compares
                    if c.workload == workload and c.patched == patched)

    @property
    def name(self) -> str:
        """The chapter's name (its directory)."""
        return self.chapter.name

    @property
    def path(self) -> Path:
        """The chapter's ``chapter.yaml``."""
        return self.chapter.file

    @property
    def raw(self) -> dict[str, Any]:
        """``chapter.yaml`` as read."""
        return self.chapter.meta

    @property
    def series(self) -> Path:
        """The chapter's series directory."""
        return self.chapter.series

    @property
    def cross(self) -> bool:
        """Whether a selected variant is built for another architecture than the host's
        (its builds need the cross stage)."""
        return any(v.arch != HOST for v in self.variants.values())

    @property
    def booted(self) -> list[str]:
        """The variants that boot (the others are only built and inspected)."""
        return [name for name, v in self.variants.items() if v.boot]

    @property
    def boots(self) -> list[tuple[str, int]]:
        """(variant, rep) of every boot, repetition-major: rep 1 of each kernel, then rep 2,
        ..., so the kernels' boots interleave and a slow drift of the host touches every
        kernel alike; a variant with fewer ``reps`` drops out once it has had them."""
        most = max((self.variants[v].reps for v in self.booted), default=0)
        return [(v, r) for r in range(1, most + 1) for v in self.booted
                if r <= self.variants[v].reps]

    def build_name(self, variant: str) -> str:
        """The variant whose build ``variant`` boots: the first with the same tree, fragments,
        compiler and expected build failure. Variants that differ only in command line or
        accelerator share one kernel, so eight timed cells need two builds per compiler, not
        eight."""
        v = self.all_variants[variant]
        return next(name for name, o in self.all_variants.items()
                    if (o.tree, o.fragments, o.compiler, o.build_fails, o.arch)
                    == (v.tree, v.fragments, v.compiler, v.build_fails, v.arch))

    @property
    def builds(self) -> list[str]:
        """The variants whose kernels are built (see :meth:`build_name`)."""
        return sorted({self.build_name(name) for name in self.variants})

    @property
    def kernels(self) -> list[str]:
        """The builds that must succeed (:attr:`builds` less the expected failures): the ones
        with an image, tools and an inspection."""
        return [b for b in self.builds if not self.all_variants[b].build_fails]

    @property
    def trees(self) -> list[str]:
        """The series trees the selected variants' builds need."""
        return sorted({self.all_variants[b].tree for b in self.builds})

    @property
    def sha256(self) -> str:
        """Hash of what changes results (and of ACCEL=, which changes what boots), recorded in
        the manifest; the work directory keys a run's boots by it, so an edited experiment
        never resumes the boots of the old one, while a new title, label, place in the book or
        cited id (:data:`PRESENTATION`) resumes them."""
        text = json.dumps([measured(self.raw), self.accel_override], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def key(self) -> str:
        """The short form of :attr:`sha256` that names the run's work directories."""
        return self.sha256[:12]

    def _job(self, variant: str = "", **fields: Any) -> KernelJob:
        v = self.all_variants[variant] if variant else None
        return KernelJob(self.name, in_repo(self.path), in_repo(self.series), variant,
                         v.compiler if v else "", v.arch if v else "", **fields)

    def series_job(self) -> KernelJob:
        """What the series stage reads: the series directory."""
        return self._job()

    def config_job(self, variant: str) -> KernelJob:
        """What the config stage reads: compiler, architecture, start and fragments."""
        return self._job(variant, kconfig_start=self.all_variants[variant].kconfig_start,
                         fragments=tuple(in_repo(p) for p in self.fragment_paths(variant)))

    def build_job(self, variant: str) -> KernelJob:
        """What the build stage reads: compiler, architecture, an expected failure, and
        whether the chapter's guest programs are modules built against the kernel."""
        return self._job(variant, build_fails=self.all_variants[variant].build_fails,
                         extmod=bool((self.raw.get("tools") or {}).get("kbuild")))

    def tools_job(self, variant: str) -> KernelJob:
        """What the tools stage reads: compiler, architecture and ``tools:``."""
        tools = dict(self.raw.get("tools") or {})
        return self._job(variant, tools=tools,
                         tools_dir=in_repo(self.chapter.path(tools["dir"])) if tools else "")

    def inspect_job(self, variant: str) -> KernelJob:
        """What the inspect stage reads: architecture, ``inspect:`` and the build it reads."""
        return self._job(variant, inspect=dict(self.raw.get("inspect") or {}),
                         build=self.build_name(variant))

    def fragment_paths(self, variant: str) -> list[Path]:
        """The config fragment files of a variant, in merge order."""
        return [self.chapter.fragment(f) for f in self.all_variants[variant].fragments]

    def workloads_of(self, variant: str) -> list[dict[str, Any]]:
        """The workloads (as ``chapter.yaml`` lists them) that ``variant``'s boots run."""
        wanted = self.all_variants[variant].workloads
        return [w for w in self.workloads if w["name"] in wanted]

    @property
    def units(self) -> dict[str, dict[str, str]]:
        """Workload (and comparison) name -> its metric patterns and their units."""
        return {**{w["name"]: dict(w["units"]) for w in self.workloads},
                **{c.workload: dict(c.units) for c in self.compares}}

    def cited(self) -> dict[tuple[str, str], str | dict[str, str]]:
        """(workload, metric) -> the cited id it re-measures, or {variant: id}."""
        return {(w["name"], metric): cid for w in self.workloads
                for metric, cid in (w.get("cited") or {}).items()}


PRESENTATION = ("title", "label", "order", "book")
"""Keys of ``chapter.yaml`` that say how the book shows a chapter, not what boots: with a
workload's ``cited:`` they are left out of :attr:`Experiment.sha256`."""


def measured(raw: dict[str, Any]) -> dict[str, Any]:
    """``chapter.yaml`` less what does not change a result: :data:`PRESENTATION` and the
    cited id each workload's metrics are compared with."""
    kept = {k: v for k, v in raw.items() if k not in PRESENTATION}
    if "workloads" in kept:
        kept["workloads"] = [{k: v for k, v in w.items() if k != "cited"}
                             for w in kept["workloads"]]
    return kept


def _machine(d: dict[str, Any]) -> Machine:
    numa = tuple({k: str(v) for k, v in n.items()} for n in d.get("numa", []))
    return Machine(str(d.get("memory", "512M")), int(d.get("cpus", 1)),
                   int(d.get("sockets", 1)), int(d.get("threads", 1)), numa,
                   str(d.get("cpu_model", "max")), str(d.get("disk", "")))


def load(chapter: chapters.Chapter | str, accel: str | None = None, reps: int | None = None,
         only: list[str] | None = None) -> Experiment:
    """The experiment of a chapter (validated by :mod:`lab.chapters`); ``accel``/``reps``/
    ``only`` come from make's ACCEL=, REPS= and VARIANTS= and override the file. ACCEL= sets
    the accelerator of every variant that does not name its own (an icount variant stays an
    icount variant)."""
    ch = chapters.get(chapter) if isinstance(chapter, str) else chapter
    raw = ch.meta
    if not ch.has_experiment:
        raise StageError(f"{ch.file}: chapter {ch.name} has no experiment yet (no variants:)")
    if accel and accel not in ("auto", "kvm", "tcg", "icount"):
        raise StageError(f"ACCEL={accel} is not one of auto, kvm, tcg, icount")
    variants = {}
    for name, v in ch.variants.items():
        arch = str(v.get("arch", HOST))
        # a cross architecture's own start, fragments and machine replace the chapter's
        # (which are the host's: an x86 boot fragment has no place in an arm64 kernel)
        own = raw.get("arches", {}).get(arch, {}) if arch != HOST else raw
        if arch != HOST and not own:
            raise StageError(f"{ch.file}: variants.{name} is for {arch}, but the chapter has "
                             f"no arches: {{{arch}: ...}} (its kconfig_start, fragments and "
                             "machine)")
        base_machine = {**raw.get("machine", {}), **own.get("machine", {})}
        variants[name] = Variant(
            name, str(v.get("tree", "patched")),
            tuple(own.get("fragments", [])) + tuple(v.get("fragments", [])),
            " ".join(x for x in (raw.get("cmdline", ""), v.get("cmdline", "")) if x),
            _machine({**base_machine, **v.get("machine", {})}),
            v.get("accel") or accel or raw.get("accel", "auto"),
            v.get("compiler", raw.get("compiler", "gcc")),
            bool(v.get("boot", not v.get("build_fails"))),
            str(v.get("build_fails", "")),
            str(v.get("initrd", "")),
            int(reps if reps is not None else v.get("reps", raw.get("reps", 3))),
            tuple(v.get("workloads") or [w["name"] for w in raw.get("workloads", [])
                                         if arch in w.get("arch", [arch])]),
            arch, str(own.get("kconfig_start", raw.get("kconfig_start", "defconfig"))),
        )
    every = dict(variants)
    if only:
        missing = [o for o in only if o not in variants]
        if missing:
            raise StageError(f"VARIANTS={','.join(only)}: {ch.file} has no variant(s) "
                             f"{missing}; it has {sorted(variants)}")
        variants = {k: variants[k] for k in only}
    for name, v in variants.items():
        try:
            v.machine.args()
        except StageError as exc:
            raise StageError(f"{ch.file}: variants.{name}.machine: {exc}") from None
    compares = tuple(
        Compare(c["name"], c["script"], c.get("parser", "keyvalue"), a, b,
                min(variants[a].reps, variants[b].reps), tuple(c["units"].items()))
        for c in raw.get("compare", []) for a, b in c["pairs"]
        if a in variants and b in variants)
    return Experiment(
        ch, raw.get("kconfig_start", "defconfig"), float(raw.get("boot_timeout", 120)),
        float(raw.get("workload_timeout", 60)), tuple(raw.get("workloads", [])),
        int(reps if reps is not None else raw.get("reps", 3)), variants, every, accel or "",
        compares,
    )
