"""Collect: one run's raw outputs, tidy results and manifest, moved into ``data/runs`` whole.

The run directory is assembled in a temporary directory and renamed into
``data/runs/<chapter>/<run-id>/`` only when every file is written and hashed, so a reader (or
a notebook) never sees a half-written run, an interrupted collect leaves nothing behind, and
an existing run is never overwritten: a re-measurement is a new run-id.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab import DATA, ROOT
from lab.command import StageError

RUNS = DATA / "runs"
CSV_FIELDS = ("chapter", "variant", "rep", "workload", "metric", "value", "accel")


def runs_dir() -> Path:
    """Where finished runs go: ``data/runs``, or ``KERNEL_BOOK_RUNS`` (the tests' own dir)."""
    return Path(os.environ.get("KERNEL_BOOK_RUNS") or RUNS)


def new_run_id(accel: str, now: datetime | None = None) -> str:
    """A run-id that sorts by time and says which accelerator was asked for."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{accel}"


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


def host_info() -> dict[str, Any]:
    """The host's CPU model, kernel and core count."""
    model = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpu_model": model, "kernel": platform.release(), "cores": os.cpu_count(),
            "machine": platform.machine()}


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
              cited: dict[tuple[str, str], str | dict[str, str]] | None = None
              ) -> list[dict[str, Any]]:
    """Flatten every rep's parsed rows into the tidy table (one measurement per row).

    ``cited`` maps (workload, metric) to the id of the cited number it re-measures
    (``data/cited/<chapter>.yaml``), or to {variant: id}; those rows get a ``cited_id`` for
    the scorecard.
    """
    rows = []
    for rec in records:
        for workload, pairs in sorted(rec["rows"].items()):
            for metric, value in pairs:
                row = {"chapter": chapter, "variant": rec["variant"], "rep": rec["rep"],
                       "workload": workload, "metric": metric, "value": value,
                       "accel": rec["accel"]}
                if cited:
                    row["cited_id"] = cited_id(cited, workload, metric, rec["variant"])
                rows.append(row)
    return rows


def results_csv(chapter: str, records: list[dict[str, Any]],
                cited: dict[tuple[str, str], str | dict[str, str]] | None = None) -> bytes:
    """``results.csv``: the tidy rows of every record, with ``cited_id`` when any is cited."""
    buf = io.StringIO()
    fields = [*CSV_FIELDS, "cited_id"] if cited else list(CSV_FIELDS)
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(tidy_rows(chapter, records, cited))
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


def assemble(tmp: Path, chapter: str, records: list[dict[str, Any]], configs: dict[str, Path],
             manifest: dict[str, Any],
             cited: dict[tuple[str, str], str | dict[str, str]] | None = None,
             diff: bytes = b"", extra: dict[str, bytes] | None = None) -> None:
    """Write raw outputs (gzipped), results.csv, configs, the book's uncommitted ``diff`` (if
    any), ``extra`` raw files that no boot wrote (a failed build's errors) and manifest.json
    into ``tmp``."""
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
    files["results.csv"] = results_csv(chapter, records, cited)
    write_run(tmp, files, manifest)


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
    """Check every file of a published run against its manifest (tests and readers use it)."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    listed = set(manifest["files"])
    present = {str(p.relative_to(run_dir)) for p in run_dir.rglob("*")
               if p.is_file() and p.name != "manifest.json"}
    if listed != present:
        raise StageError(f"{run_dir}: files differ from manifest.json: "
                         f"missing {sorted(listed - present)}, extra {sorted(present - listed)}")
    for rel, digest in manifest["files"].items():
        if sha256_bytes((run_dir / rel).read_bytes()) != digest:
            raise StageError(f"{run_dir / rel}: sha256 differs from manifest.json")
