"""Collect: one run's raw outputs, tidy results and manifest, moved into ``data/runs`` whole.

The run directory is assembled in a temporary directory and renamed into
``data/runs/<chapter>/<run-id>/`` only when every file is written and hashed, so a reader (or
a notebook) never sees a half-written run, an interrupted collect leaves nothing behind, and
an existing run is never overwritten: a re-measurement is a new run-id.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab import DATA, ROOT, chapters, in_repo
from lab.command import StageError
from lab.parse import units as parsed_units
from lab.pipeline import arch as arches
from lab.pipeline import crosslayer, node, source, vm
from lab.pipeline.arch import HOST
from lab.pipeline.stamps import (
    BootStamp,
    BuildStamp,
    CrossStamp,
    InspectStamp,
    LayerStamp,
    ParsedStamp,
    PublishedStamp,
    RootStamp,
    SeriesStamp,
    SourceStamp,
    ToolsStamp,
    benchmark_seconds,
    load_experiment,
    portable,
    stage,
)

RUNS = DATA / "runs"
CSV_FIELDS = ("chapter", "variant", "rep", "workload", "metric", "value", "accel")


def runs_dir() -> Path:
    """Where finished runs go: ``data/runs``, or ``KERNEL_BOOK_RUNS`` (the tests' own dir)."""
    return Path(os.environ.get("KERNEL_BOOK_RUNS") or RUNS)


def new_run_id(accel: str, machine: str, now: datetime | None = None) -> str:
    """A run-id that sorts by time, says which accelerator was asked for and names the
    machine the boots ran on: runs published in the same second on two machines (two nodes of
    a cluster) never share an id."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{accel}-{machine}"


def gzip_bytes(data: bytes) -> bytes:
    """gzip with a zero timestamp, so the same text always compresses to the same bytes."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        gz.write(data)
    return buf.getvalue()


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


CODE = [".", ":(exclude)data"]
"""Git pathspec of the book's code: everything but the measured and cited data."""


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=False)


def book_diff() -> bytes:
    """The uncommitted changes of the book's code against HEAD, new files included (data/
    left out): stored in a run measured from such a tree, so the code that measured it can be
    recovered exactly."""
    tracked = _git("diff", "HEAD", "--binary", "--", *CODE)
    if tracked.returncode != 0:
        return b""
    untracked = _git("ls-files", "--others", "--exclude-standard", "-z", "--", *CODE)
    new = [_git("diff", "--no-index", "--binary", "/dev/null", name).stdout
           for name in untracked.stdout.decode().split("\0") if name]
    return tracked.stdout + b"".join(new)


def book_state() -> tuple[dict[str, Any], bytes]:
    """The book's git commit and whether its code had uncommitted changes (for the manifest),
    and those changes (:func:`book_diff`, stored in the run as ``book.diff.gz``)."""
    head = _git("rev-parse", "HEAD")
    diff = book_diff()
    return ({"commit": head.stdout.decode().strip() if head.returncode == 0 else None,
             "dirty": bool(diff)}, diff)


def cited_id(cited: dict[tuple[str, str], str | dict[str, str]], workload: str, metric: str,
             variant: str) -> str:
    """The cited id a (workload, metric) of ``variant`` re-measures, or "".

    An experiment's ``cited:`` value is either one id for every variant or a mapping from
    variant to id, for a cited table with a column per variant (baseline and patched of the
    same metric); a variant the mapping does not name (a lock-statistics build) gets none.
    """
    cid = cited.get((workload, metric), "")
    return cid.get(variant, "") if isinstance(cid, dict) else cid


def tidy_rows(chapter: str, records: list[dict[str, Any]],
              cited: dict[tuple[str, str], str | dict[str, str]] | None = None,
              units: dict[str, dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """Flatten every rep's parsed rows into the tidy table (one measurement per row).

    ``cited`` maps (workload, metric) to the id of the cited number it re-measures
    (``data/cited/<chapter>.yaml``), or to {variant: id}; those rows get a ``cited_id`` for
    the scorecard. ``units`` (workload -> metric pattern -> unit, :mod:`lab.parse.units`)
    gives every row its ``unit``; the runs before units were declared have none.
    """
    rows = []
    for rec in records:
        for workload, pairs in sorted(rec["rows"].items()):
            for metric, value in pairs:
                row = {"chapter": chapter, "variant": rec["variant"], "rep": rec["rep"],
                       "workload": workload, "metric": metric, "value": value,
                       "accel": rec["accel"]}
                if units:
                    row["unit"] = parsed_units.unit_of(units.get(workload, {}), metric)
                    if row["unit"] is None:
                        raise StageError(f"{chapter}/{rec['variant']}/rep{rec['rep']}: no unit "
                                         f"for {workload}'s {metric}; declare it under the "
                                         "workload's units: in chapter.yaml")
                if cited:
                    row["cited_id"] = cited_id(cited, workload, metric, rec["variant"])
                rows.append(row)
    return rows


def results_csv(chapter: str, records: list[dict[str, Any]],
                cited: dict[tuple[str, str], str | dict[str, str]] | None = None,
                units: dict[str, dict[str, str]] | None = None) -> bytes:
    """``results.csv``: the tidy rows of every record, with ``unit`` when the experiment
    declares units and ``cited_id`` when any is cited."""
    buf = io.StringIO()
    fields = [*CSV_FIELDS[:6], *(["unit"] if units else []), *CSV_FIELDS[6:],
              *(["cited_id"] if cited else [])]
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(tidy_rows(chapter, records, cited, units))
    return buf.getvalue().encode()


def write_run(tmp: Path, files: dict[str, bytes], manifest: dict[str, Any]) -> None:
    """Write ``files`` (relative path -> bytes) and ``manifest.json`` listing each file's
    sha256 into ``tmp``: the one way a run directory's contents are written."""
    for rel, data in sorted(files.items()):
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    sums = {rel: sha256_bytes(data) for rel, data in sorted(files.items())}
    manifest = {**manifest, "files": sums}
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


MANIFEST_SCHEMA = ROOT / "workflow" / "schemas" / "manifest.schema.yaml"


def check_manifest(manifest: dict[str, Any], where: Path) -> None:
    """Refuse a manifest that :data:`MANIFEST_SCHEMA` does not describe, naming each key."""
    chapters.check_schema(manifest, MANIFEST_SCHEMA, where, 10,
                          "Fix: a manifest the pipeline writes must match the schema: add a "
                          "new key to it with what it means, or write the key it requires")


def assemble(tmp: Path, chapter: str, records: list[dict[str, Any]], configs: dict[str, Path],
             manifest: dict[str, Any],
             cited: dict[tuple[str, str], str | dict[str, str]] | None = None,
             diff: bytes = b"", extra: dict[str, bytes] | None = None,
             units: dict[str, dict[str, str]] | None = None) -> None:
    """Write raw outputs (gzipped), results.csv (with ``units``), configs, the book's
    uncommitted ``diff`` (if any), ``extra`` raw files that no boot wrote (a failed build's
    errors) and manifest.json into ``tmp``."""
    files: dict[str, bytes] = dict(extra or {})
    for rec in records:
        rep_dir = Path(rec["dir"])
        prefix = f"raw/{rec['variant']}/rep{rec['rep']}"
        for path in sorted([rep_dir / "console.log", *sorted((rep_dir / "out").iterdir())]):
            if path.is_file():
                files[f"{prefix}/{path.name}.gz"] = gzip_bytes(path.read_bytes())
    for variant, config in sorted(configs.items()):
        files[f"config/{variant}.config.gz"] = gzip_bytes(config.read_bytes())
    if diff:
        files["book.diff.gz"] = gzip_bytes(diff)
    files["results.csv"] = results_csv(chapter, records, cited, units)
    write_run(tmp, files, manifest)
    check_manifest(json.loads((tmp / "manifest.json").read_text()), tmp / "manifest.json")


def publish(chapter: str, run_id: str, fill: Callable[[Path], None],
            root: Path | None = None) -> Path:
    """Create ``<root>/chapter/run_id`` atomically (``root``: :func:`runs_dir`): ``fill(tmp)``
    writes, then rename.

    Refuses to replace an existing run. The temporary directory is a hidden sibling (same
    file system, so the rename is atomic) and is removed if ``fill`` fails.
    """
    parent = (root or runs_dir()) / chapter
    final = parent / run_id
    if final.exists():
        raise StageError(f"{final} already exists; runs are never overwritten "
                         "(start a new run: `make reproduce` picks a new run-id)")
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".incomplete-{run_id}-", dir=parent))
    try:
        fill(tmp)
        if final.exists():
            raise StageError(f"{final} appeared while collecting; not replacing it")
        tmp.chmod(0o755)
        tmp.rename(final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return final


def verify_run(run_dir: Path) -> None:
    """Check a published run's manifest against its schema and every file against the
    manifest (tests and readers use it)."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    check_manifest(manifest, run_dir / "manifest.json")
    listed = set(manifest["files"])
    present = {str(p.relative_to(run_dir)) for p in run_dir.rglob("*")
               if p.is_file() and p.name != "manifest.json"}
    if listed != present:
        raise StageError(f"{run_dir}: files differ from manifest.json: "
                         f"missing {sorted(listed - present)}, extra {sorted(present - listed)}")
    for rel, digest in manifest["files"].items():
        if sha256_bytes((run_dir / rel).read_bytes()) != digest:
            raise StageError(f"{run_dir / rel}: sha256 differs from manifest.json")


def _image_fields(built: BuildStamp) -> dict[str, Any]:
    """What the manifest records of a build: the image's size and sha256 (hashed here, from
    the image itself, so a build cached before the stamp knew the field still gets it), or,
    for a build the experiment expects to fail, the text it failed with; and the machine it
    was built on, whose time ``build_seconds`` is."""
    where = {"node": built.node["name"]} if built.node else {}
    if built.failed:
        return {"failed": built.failed, "expected": built.expected,
                "error_lines": built.error_lines, "targets": built.targets, **where}
    return {"bzImage_sha256": source.sha256_file(built.boot_image),
            "bzImage_bytes": built.bzImage_bytes, "vmlinux_bytes": built.vmlinux_bytes,
            "targets": built.targets, **({"image": built.image} if built.image else {}),
            **where}


def cmd_publish(a: argparse.Namespace) -> None:
    """Assemble the run directory and rename it into data/runs/<chapter>/<run-id>."""
    exp = load_experiment(a)
    records = []
    for p in a.parsed:
        parsed = ParsedStamp.read(p)
        boot_dir = Path(str(parsed.boot))
        records.append({**BootStamp.read(boot_dir / "boot.json").to_json(),
                        **parsed.to_json(), "dir": str(boot_dir)})
    builds = {s.variant: s for s in map(BuildStamp.read, a.builds)}
    build_seconds = {Path(p).stem.removeprefix("build-"): benchmark_seconds(p)
                     for p in a.build_times}
    tools = {s.variant: s for s in map(ToolsStamp.read, a.tools)}
    inspected = {s.variant: s for s in map(InspectStamp.read, a.inspected)}
    root = RootStamp.read(a.root)
    layer = LayerStamp.read(a.layer)
    base = SourceStamp.read(a.base)
    serieses = {s.tree: s for s in map(SeriesStamp.read, a.series)}
    host = node.of_boots(records)
    run_id = new_run_id("-".join(sorted({v.accel for v in exp.variants.values()})),
                        host["name"])
    book, diff = book_state()
    chapter = exp.chapter
    with stage("publish", f"{exp.name}/{run_id}", None):
        variants = {}
        extra: dict[str, bytes] = {}  # raw files no boot wrote
        for p in a.compared:
            compared = ParsedStamp.read(p)
            rec = next((r for r in records if (r["variant"], int(r["rep"]))
                        == (compared.variant, compared.rep)), None)
            if rec is None:
                raise StageError(f"{p}: a comparison for {compared.variant} rep"
                                 f"{compared.rep}, which this run did not boot")
            rec["rows"].update(compared.rows)
            for path in sorted(Path(str(compared.compare)).iterdir()):
                if path.name != "compare.json":
                    extra[f"raw/{rec['variant']}/rep{rec['rep']}/{path.name}.gz"] = (
                        gzip_bytes(path.read_bytes()))
        listed: set[str] = set()
        for name, v in exp.variants.items():
            reps = [r for r in records if r["variant"] == name]
            bname = exp.build_name(name)
            built = builds[bname]
            variants[name] = {
                "tree": v.tree, "commit": built.commit, "compiler": v.compiler,
                **({"arch": v.arch} if v.arch != HOST else {}),
                "reps": v.reps,
                "config_sha256": built.config_sha256, "boot": v.boot,
                "workloads": list(v.workloads),
                "fragments": list(v.fragments), "kconfig_start": v.kconfig_start,
                "cmdline": reps[0]["cmdline"] if reps else vm.kernel_cmdline(
                    v.cmdline, arches.get(v.arch).console),
                "accel_requested": v.accel,
                "accel_used": sorted({r["accel"] for r in reps}),
                "accel_why": sorted({r["accel_why"] for r in reps}),
                "machine": {"memory": v.machine.memory, "cpus": v.machine.cpus,
                            "sockets": v.machine.sockets, "threads": v.machine.threads,
                            "numa": list(v.machine.numa), "cpu_model": v.machine.cpu_model,
                            **({"disk": v.machine.disk} if v.machine.disk else {})},
                "guest": reps[0]["guest"] if reps else {},
                "qemu_argv": [portable(x) for x in reps[0]["qemu_argv"]] if reps else [],
                **({"disk_mkfs": [portable(x) for x in reps[0]["disk_mkfs"]],
                    "disk_mke2fs": reps[0]["disk_mke2fs"], "disk_sha256": reps[0]["disk_sha256"]}
                   if reps and "disk_mkfs" in reps[0] else {}),
                "boot_to_result_seconds": [r["boot_to_result_seconds"] for r in reps],
                "build": {"variant": bname, "build_seconds": build_seconds[bname],
                          **_image_fields(built)},
                "tools": {"programs": tools[bname].programs, "cc": tools[bname].cc,
                          "bpf_cc": tools[bname].bpf_cc} if bname in tools else {},
                "inspect": ({"evidence": inspected[name].evidence}
                            if name in inspected and inspected[name].evidence is not None
                            else {}),
            }
            listing = inspected[name].listing if name in inspected else None
            if listing and bname not in listed:  # once per kernel, under its first variant
                listed.add(bname)
                extra[f"raw/{name}/disassembly.txt.gz"] = gzip_bytes(
                    Path(listing).read_bytes())
            if built.failed:
                extra[f"raw/{name}/build-errors.txt.gz"] = gzip_bytes(
                    (Path(built.artifacts) / "errors.txt").read_bytes())
        ser = next(iter(serieses.values()))
        parser_files = sorted((ROOT / "lab" / "parse").glob("*.py")) + (
            [chapter.dir / "parse.py"] if (chapter.dir / "parse.py").is_file() else [])
        manifest = {
            "chapter": exp.name, "run_id": run_id,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "book": book,
            "experiment": {"file": in_repo(exp.path), "sha256": exp.sha256,
                           "reps": exp.reps, "workloads": list(exp.workloads),
                           "scripts": {w["name"]: source.sha256_file(chapter.path(w["script"]))
                                       for w in exp.workloads},
                           **({"compare": [
                               {"workload": c.workload, "baseline": c.baseline,
                                "patched": c.patched, "reps": c.reps, "parser": c.parser,
                                "script": c.script, "units": dict(c.units),
                                "sha256": source.sha256_file(chapter.path(c.script))}
                               for c in exp.compares]} if exp.compares else {})},
            "parsers": {in_repo(f): source.sha256_file(f) for f in parser_files},
            "base": {"version": base.version, "origin": base.origin, "sha256": base.sha256,
                     "commit": base.commit},
            "series": {"dir": in_repo(exp.series), "mode": ser.mode,
                       "sha256": ser.sha256, "patches": ser.patches,
                       "commits": {t: s.commit for t, s in serieses.items()},
                       "trees": {t: s.steps for t, s in serieses.items()}},
            # the time the toolchain root and the base source took when they were made (once
            # per machine's cache), beside each build's: what the cost model adds per machine
            "setup_seconds": {Path(p).stem: benchmark_seconds(p) for p in a.setup_times},
            "compilers": root.tools, "qemu": vm.qemu_version(),
            "python": sys.version.split()[0],
            "host": host,
            "toolchain_root": {"key": root.key, "suite": root.suite,
                               "packages": root.packages},
            **({"guest_layer": {"key": layer.key, "lock": layer.lock,
                                "packages": layer.packages}} if layer.packages else {}),
            **({"cross_layer": crosslayer.record(CrossStamp.read(a.cross), exp)}
               if a.cross else {}),
            "variants": variants,
        }
        configs = {name: Path(b.artifacts) / ".config" for name, b in builds.items()}
        final = publish(exp.name, run_id,
                        lambda tmp: assemble(tmp, exp.name, records, configs, manifest,
                                             exp.cited(), diff, extra, exp.units))
        stamp = PublishedStamp(run_dir=str(final), rows=sum(
            len(p) for r in records for p in r["rows"].values()))
    stamp.write(a.out)
    print(f"run published: {final}", file=sys.stderr)
