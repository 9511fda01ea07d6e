"""What every stage shares: its progress lines, its JSON stamp (what it made and where), its log,
the experiment with make's overrides, and the paths a manifest may name.

A stage reads the stamps of the stages before it (Snakemake passes their paths) and writes one
of its own; nothing else passes between stages. Each stamp is a dataclass below, so what one
stage hands the next is written down once, and a stamp of another pipeline version (a field
more or less) is refused with its path instead of failing later on a missing key.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

from lab.command import StageError
from lab.pipeline import cachedir, experiment


@contextmanager
def stage(name: str, target: str, log: Path | None) -> Iterator[None]:
    """Print start and end lines with elapsed time and log (Snakemake's benchmark files keep
    the times; these lines are for the person watching)."""
    start = time.monotonic()
    where = f" (log: {log})" if log else ""
    print(f"[{time.strftime('%H:%M:%S')}] >> {name:<8} {target}{where}", file=sys.stderr,
          flush=True)
    try:
        yield
    except StageError:
        print(f"[{time.strftime('%H:%M:%S')}] !! {name:<8} {target} failed after "
              f"{time.monotonic() - start:.1f} s{where}", file=sys.stderr, flush=True)
        raise
    print(f"[{time.strftime('%H:%M:%S')}] ok {name:<8} {target} "
          f"{time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write a stamp atomically (Snakemake sees it only when complete)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.rename(path)


def read_json(path: str | Path) -> dict[str, Any]:
    """Read a JSON file an earlier stage wrote."""
    return json.loads(Path(path).read_text())


@dataclass(frozen=True)
class Stamp:
    """A stage's stamp. Fields that default to None are absent from the file when unset, so
    a stamp reads back as it was written."""

    STAGE: ClassVar[str]

    @classmethod
    def read(cls, path: str | Path) -> Self:
        """The stamp at ``path``, with exactly this class's fields (the optional ones may be
        missing)."""
        data = read_json(path)
        known = {f.name: f for f in dataclasses.fields(cls)}
        missing = sorted(n for n, f in known.items() if n not in data
                         and f.default is dataclasses.MISSING)
        unknown = sorted(set(data) - set(known))
        if missing or unknown:
            raise StageError(
                f"{path}: not a {cls.STAGE} stamp of this pipeline (missing {missing}, unknown "
                f"{unknown}); another version of the pipeline wrote it. Fix: delete it, and "
                "`make reproduce` runs its stage again")
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        """The fields, less the optional ones left unset."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if not (f.default is None and getattr(self, f.name) is None)}

    def write(self, path: str | Path) -> None:
        """Write the stamp atomically (see :func:`write_json`)."""
        write_json(Path(path), self.to_json())


@dataclass(frozen=True)
class RootStamp(Stamp):
    """The toolchain root: where it is, its key, and what it holds."""

    STAGE = "root"
    root: str
    key: str
    suite: str
    packages: dict[str, str]
    tools: dict[str, str]


@dataclass(frozen=True)
class CrossStamp(RootStamp):
    """The cross layer (a toolchain root with gcc-15's cross compilers over it: where cross
    variants build) and each cross architecture's guest tree (:mod:`lab.pipeline.crosslayer`).
    The root stamp's fields name the layer as they name the root, so a build stage reads
    either."""

    STAGE = "cross"
    base: str
    """The key of the toolchain root under the layer."""
    guests: dict[str, str]
    """Architecture -> its guest tree."""
    guest_packages: dict[str, dict[str, str]]


@dataclass(frozen=True)
class SourceStamp(Stamp):
    """The base tree (:class:`lab.pipeline.source.Base` in plain fields)."""

    STAGE = "source"
    tree: str
    commit: str
    version: str
    origin: str
    sha256: str


@dataclass(frozen=True)
class SeriesStamp(Stamp):
    """One tree of a chapter's series: its commit and the patches applied or reverted."""

    STAGE = "series"
    tree: str
    commit: str
    mode: str
    sha256: str
    patches: dict[str, str]
    steps: list[dict[str, Any]]


@dataclass(frozen=True)
class BuildStamp(Stamp):
    """One kernel: where its artifacts are and what built them; a build the experiment expects
    to fail has ``failed`` and its ``expected`` text instead of image sizes."""

    STAGE = "build"
    variant: str
    artifacts: str
    commit: str
    compiler: str
    build_dir: str
    targets: list[str]
    config_sha256: str
    bzImage_bytes: int | None = None
    vmlinux_bytes: int | None = None
    failed: bool | None = None
    expected: str | None = None
    error_lines: int | None = None
    node: dict[str, Any] | None = None
    """Where it was built (:func:`lab.pipeline.node.identity`): its time is that machine's."""
    arch: str | None = None
    """The architecture it was built for; unset: the host's (x86_64)."""
    image: str | None = None
    """The boot image's file name in ``artifacts`` (``bzImage_bytes`` is its size); unset:
    ``bzImage``."""

    @property
    def boot_image(self) -> Path:
        """The image QEMU boots."""
        return Path(self.artifacts) / (self.image or "bzImage")


@dataclass(frozen=True)
class ToolsStamp(Stamp):
    """A kernel's guest programs (built against it) and the compilers that built them."""

    STAGE = "tools"
    variant: str
    bin: str
    programs: dict[str, str]
    commit: str
    cc: str | None = None
    bpf_cc: str | None = None


@dataclass(frozen=True)
class LayerStamp(Stamp):
    """The guest's root: the toolchain root, or the layer of the chapter's guest packages."""

    STAGE = "layer"
    root: str
    key: str
    packages: dict[str, str]
    lock: str | None = None


@dataclass(frozen=True)
class InspectStamp(Stamp):
    """What the inspect stage read from a kernel image (``evidence``) and its listing file."""

    STAGE = "inspect"
    variant: str
    build: str
    evidence: dict[str, Any] | None = None
    listing: str | None = None


@dataclass(frozen=True)
class AccelStamp(Stamp):
    """Each requested accelerator with the one used and why (the KVM probe's answer)."""

    STAGE = "accel"
    accel: dict[str, dict[str, str]]
    node: dict[str, Any] | None = None
    """Where the probe ran: its answer holds for boots on that machine only."""


@dataclass(frozen=True)
class BootStamp(Stamp):
    """One boot (``boot.json`` beside its output): how QEMU ran and the output's sums."""

    STAGE = "boot"
    variant: str
    rep: int
    accel: str
    accel_requested: str
    accel_why: str
    qemu_argv: list[str]
    cmdline: str
    boot_to_result_seconds: float
    output_sha256: dict[str, str]
    disk_mkfs: list[str] | None = None
    disk_mke2fs: str | None = None
    disk_sha256: str | None = None
    node: dict[str, Any] | None = None
    """Where the boot ran (:func:`lab.pipeline.node.identity`)."""


@dataclass(frozen=True)
class CompareStamp(Stamp):
    """One host-side comparison of two boots (``compare.json`` beside its output)."""

    STAGE = "compare"
    variant: str
    rep: int
    workload: str
    baseline: str
    script: str
    script_sha256: str
    argv: list[str]


@dataclass(frozen=True)
class ParsedStamp(Stamp):
    """The rows of one boot (``boot``) or of one comparison (``compare``), by workload."""

    STAGE = "parse"
    variant: str
    rep: int
    rows: dict[str, list[list[Any]]]
    guest: dict[str, str]
    boot: str | None = None
    compare: str | None = None


@dataclass(frozen=True)
class PublishedStamp(Stamp):
    """Where a run was published, and how many rows it has."""

    STAGE = "publish"
    run_dir: str
    rows: int


def fresh_log(a: argparse.Namespace) -> Path:
    """The job's log file (Snakemake's ``log:``), emptied: a rerun does not append."""
    log = Path(a.log).resolve()
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    return log


def load_experiment(a: argparse.Namespace) -> experiment.Experiment:
    """The chapter's experiment with make's ACCEL=, REPS= and VARIANTS= applied."""
    only = [v for v in (a.variants or "").split(",") if v] or None
    return experiment.load(a.chapter, accel=a.accel or None,
                           reps=int(a.reps) if a.reps else None, only=only)




def portable(arg: str) -> str:
    """Write the cache location as ``$KB_CACHE`` so a manifest names no one's home."""
    return arg.replace(str(cachedir.cache_root()), "$KB_CACHE")


def benchmark_seconds(path: str | Path) -> float:
    """Wall-clock seconds of a job from its Snakemake ``benchmark:`` file (column ``s``)."""
    lines = Path(path).read_text().splitlines()
    header, values = lines[0].split("\t"), lines[-1].split("\t")
    return round(float(values[header.index("s")]), 1)
