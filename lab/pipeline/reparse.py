"""``make reparse RUN=<chapter>/<run-id>``: a new run from a committed run's raw output.

Parsing is a stage of its own, so a parser fix reaches data already measured the way LKP and
mmtests re-run their parsers over stored logs: the raw files of the parent run are parsed again
with today's parsers (the workloads and cited ids its manifest recorded), and the result is
published as a new run, ``<run-id>-reparse<N>``, whose manifest names its parent and the
parsers' sha256. The parent is never rewritten. The new id sorts right after the parent's, so
"newest run per variant" takes the re-parsed rows where the parent's were taken before, and a
later measurement still wins over both.
"""

from __future__ import annotations

import argparse
import gzip
from datetime import UTC, datetime
from pathlib import Path

from lab import ROOT, chapters
from lab.command import StageError
from lab.pipeline import publish, source


def add_arguments(sp: argparse.ArgumentParser) -> None:
    """``--run <chapter>/<run-id>`` (or a run directory's path); ``--into`` another data root."""
    sp.add_argument("--run", required=True)
    sp.add_argument("--into", default="", help="publish under this runs directory instead of "
                    "KERNEL_BOOK_RUNS or data/runs (the parent is still read where it is)")


def find_run(spec: str) -> Path:
    """A run directory from ``<chapter>/<run-id>`` (under the runs directory) or a path."""
    for candidate in (Path(spec), publish.runs_dir() / spec, publish.RUNS / spec):
        if (candidate / "manifest.json").is_file():
            return candidate.resolve()
    raise StageError(f"RUN={spec}: no run directory with a manifest.json there or under "
                     f"{publish.runs_dir()}; give <chapter>/<run-id>, e.g. "
                     "RUN=workqueue/20261122T062338Z-auto")


def _text(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode(errors="replace")


def reparse(run_dir: Path, into: Path | None = None) -> Path:
    """Parse ``run_dir``'s raw output again and publish the rows as a new run; return it."""
    # imported here, not by every stage's start: the run reader brings pandas (0.4 s)
    from lab.analysis import runs
    from lab.pipeline.parse import parse_boot
    parent = runs.load_run(run_dir)  # checks every file against the parent's manifest
    manifest = parent.manifest
    chapter = manifest["chapter"]
    workloads = manifest["experiment"]["workloads"]
    ch = chapters.get(chapter)
    res = parent.results
    # the parent's row order (variant, then repetition, as its experiment listed them)
    order = list(dict.fromkeys(zip(res["variant"], res["rep"], res["accel"], strict=True)))
    compared = manifest["experiment"].get("compare", [])
    records = []
    for variant, rep, accel in order:
        raw = run_dir / "raw" / variant / f"rep{rep}"
        # a comparison's output sits in its patched boot's directory
        # (lab.pipeline.experiment.Compare)
        ran = manifest["variants"][variant].get("workloads")  # absent: all (earlier runs)
        mine = [*(w for w in workloads if ran is None or w["name"] in ran),
                *({"name": c["workload"], "parser": c["parser"], "units": c.get("units")}
                  for c in compared if c["patched"] == variant and int(rep) <= c["reps"])]
        missing = [w["name"] for w in mine if not (raw / f"{w['name']}.out.gz").is_file()]
        if missing:
            raise StageError(f"{raw}: no raw output of workload(s) {missing}; this run cannot "
                             "be re-parsed (was it published before raw outputs were kept?)")
        texts = {w["name"]: _text(raw / f"{w['name']}.out.gz") for w in mine}
        parsed = parse_boot(chapter, mine, texts, _text(raw / "guest-info.txt.gz"),
                            f"{chapter}/{variant}/rep{rep}")
        records.append({"variant": variant, "rep": int(rep), "accel": accel,
                        "rows": parsed["rows"]})
    cited = {(w["name"], metric): cid for w in workloads
             for metric, cid in (w.get("cited") or {}).items()}
    # the units the run was published with (none before units were declared)
    units = {**{w["name"]: w["units"] for w in workloads if w.get("units")},
             **{c["workload"]: c["units"] for c in compared if c.get("units")}}
    parser_files = sorted((ROOT / "lab" / "parse").glob("*.py")) + (
        [ch.dir / "parse.py"] if (ch.dir / "parse.py").is_file() else [])
    runs_root = into or publish.runs_dir()
    n = 1
    while (runs_root / chapter / f"{parent.run_id}-reparse{n}").exists():
        n += 1
    run_id = f"{parent.run_id}-reparse{n}"
    book, diff = publish.book_state()

    def fill(tmp: Path) -> None:
        files = {rel: (run_dir / rel).read_bytes() for rel in manifest["files"]
                 if rel != "results.csv"}
        files["results.csv"] = publish.results_csv(chapter, records, cited, units)
        if diff:
            files["reparse.diff.gz"] = publish.gzip_bytes(diff)
        publish.write_run(tmp, files, {
            **{k: v for k, v in manifest.items() if k != "files"},
            "run_id": run_id,
            "parent": {"run_id": parent.run_id,
                       "results_sha256": manifest["files"]["results.csv"]},
            "reparsed": {"date": datetime.now(UTC).isoformat(timespec="seconds"),
                         "book": book,
                         "parsers": {str(f.relative_to(ROOT)): source.sha256_file(f)
                                     for f in parser_files}},
        })

    return publish.publish(chapter, run_id, fill, runs_root)


def main(a: argparse.Namespace) -> int:
    """Re-parse one run and say where the new run is and whether its rows changed."""
    run_dir = find_run(a.run)
    new = reparse(run_dir, Path(a.into) if a.into else None)
    same = (run_dir / "results.csv").read_bytes() == (new / "results.csv").read_bytes()
    print(f"reparsed into {new}: results.csv "
          f"{'identical to the parent' if same else 'differs from the parent (parser change)'}")
    return 0
