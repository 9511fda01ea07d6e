"""Experiment definitions: ``experiments/<chapter>.yaml``, variants x workloads x reps.

One declarative file per chapter says what to build and how to run it; the Snakefile turns
it into the DAG. A variant may override the chapter's fragments (added after the chapter's),
command line (appended), machine and accelerator, so a lockdep build, an ``isolcpus=`` boot
or an icount run are each a variant of their own.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lab import ROOT
from lab.command import StageError
from lab.vm import ACCELS, Machine

EXPERIMENTS = ROOT / "experiments"
_KEYS = {"chapter", "series", "compiler", "kconfig_start", "fragments", "bench", "machine",
         "cmdline", "boot_timeout", "workload_timeout", "workloads", "reps", "accel",
         "variants", "title", "inspect"}
_VARIANT_KEYS = {"tree", "fragments", "cmdline", "machine", "accel", "compiler", "boot"}


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


@dataclass(frozen=True)
class Experiment:
    """A chapter's whole matrix."""

    path: Path
    chapter: str
    series: Path
    kconfig_start: str
    bench: tuple[str, ...]
    boot_timeout: float
    workload_timeout: float
    workloads: tuple[dict[str, str], ...]
    reps: int
    variants: dict[str, Variant]
    raw: dict[str, Any]
    all_variants: dict[str, Variant]
    """Every variant of the file, also those VARIANTS= left out: a selected variant may boot
    the build of one that is not selected."""

    @property
    def booted(self) -> list[str]:
        """The variants that boot (the others are only built and inspected)."""
        return [name for name, v in self.variants.items() if v.boot]

    def build_name(self, variant: str) -> str:
        """The variant whose build ``variant`` boots: the first with the same tree, fragments
        and compiler. Variants that differ only in command line or accelerator share one
        kernel, so eight timed cells need two builds per compiler, not eight."""
        v = self.all_variants[variant]
        return next(name for name, o in self.all_variants.items()
                    if (o.tree, o.fragments, o.compiler) == (v.tree, v.fragments, v.compiler))

    @property
    def builds(self) -> list[str]:
        """The variants whose kernels are built (see :meth:`build_name`)."""
        return sorted({self.build_name(name) for name in self.variants})

    @property
    def sha256(self) -> str:
        """Hash of the definition, recorded in the manifest."""
        return hashlib.sha256(json.dumps(self.raw, sort_keys=True).encode()).hexdigest()


def _machine(d: dict[str, Any], where: str) -> Machine:
    unknown = set(d) - {"memory", "cpus", "sockets", "threads", "numa", "cpu_model"}
    if unknown:
        raise StageError(f"{where}: unknown machine key(s) {sorted(unknown)}")
    numa = tuple({k: str(v) for k, v in n.items()} for n in d.get("numa", []))
    return Machine(str(d.get("memory", "512M")), int(d.get("cpus", 1)),
                   int(d.get("sockets", 1)), int(d.get("threads", 1)), numa,
                   str(d.get("cpu_model", "max")))


def load(path: Path, accel: str | None = None, reps: int | None = None,
         only: list[str] | None = None) -> Experiment:
    """Read and check an experiment file; ``accel``/``reps``/``only`` come from make's
    ACCEL=, REPS= and VARIANTS= and override the file. ACCEL= sets the accelerator of every
    variant that does not name its own (an icount variant stays an icount variant)."""
    if not path.is_file():
        have = ", ".join(sorted(p.stem for p in EXPERIMENTS.glob("*.yaml")))
        raise StageError(f"no experiment file {path} (chapters with one: {have})")
    raw = yaml.safe_load(path.read_text())
    unknown = set(raw) - _KEYS
    if unknown:
        raise StageError(f"{path}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_KEYS)}")
    base_machine = raw.get("machine", {})
    variants = {}
    for name, v in (raw.get("variants") or {}).items():
        v = v or {}
        if set(v) - _VARIANT_KEYS:
            raise StageError(f"{path}: variant {name}: unknown key(s) "
                             f"{sorted(set(v) - _VARIANT_KEYS)}")
        tree = str(v.get("tree", "patched"))
        if not re.fullmatch(r"[A-Za-z0-9_-]+", tree):
            raise StageError(f"{path}: variant {name}: tree {tree!r} must be baseline, patched "
                             "or a name from the series' meta.yaml trees")
        variant_accel = v.get("accel") or accel or raw.get("accel", "auto")
        if variant_accel not in ACCELS:
            raise StageError(f"{path}: variant {name}: accel {variant_accel!r} not in {ACCELS}")
        variants[name] = Variant(
            name, tree, tuple(raw.get("fragments", [])) + tuple(v.get("fragments", [])),
            " ".join(x for x in (raw.get("cmdline", ""), v.get("cmdline", "")) if x),
            _machine({**base_machine, **v.get("machine", {})}, f"{path}: {name}"),
            variant_accel, v.get("compiler", raw.get("compiler", "gcc")),
            bool(v.get("boot", True)),
        )
    every = dict(variants)
    if only:
        missing = [o for o in only if o not in variants]
        if missing:
            raise StageError(f"VARIANTS={','.join(only)}: {path} has no variant(s) "
                             f"{missing}; it has {sorted(variants)}")
        variants = {k: variants[k] for k in only}
    if not variants:
        raise StageError(f"{path}: no variants defined")
    return Experiment(
        path, raw["chapter"], ROOT / raw["series"], raw.get("kconfig_start", "defconfig"),
        tuple(raw.get("bench", [])), float(raw.get("boot_timeout", 120)),
        float(raw.get("workload_timeout", 60)), tuple(raw.get("workloads", [])),
        int(reps if reps is not None else raw.get("reps", 3)), variants, raw, every,
    )
