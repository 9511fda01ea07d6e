"""Chapters are directories that shared code finds: discovery, validation, the experiment.

A mistake in a chapter.yaml must surface as a message naming the file and the key, before any
build; a new chapter, of the book or not, must need no change to any shared file (the last two
tests build one).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from lab import DATA, ROOT, chapters, from_repo
from lab.book import claims
from lab.command import StageError
from lab.parse import units
from lab.pipeline import experiment

from .conftest import TEST_CHAPTERS


@pytest.fixture
def here(tmp_path: Path, monkeypatch) -> Path:
    """A chapter search directory of the test's own (after the repository's chapters/)."""
    monkeypatch.setenv("KERNEL_BOOK_CHAPTERS", str(tmp_path / "chapters"))
    (tmp_path / "chapters").mkdir()
    return tmp_path / "chapters"


def write_chapter(base: Path, name: str, text: str, **files: str) -> Path:
    """A chapter directory with ``chapter.yaml`` and other files (relative path -> text)."""
    d = base / name
    d.mkdir(parents=True)
    (d / "chapter.yaml").write_text(textwrap.dedent(text))
    for rel, content in files.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(content)
    return d


SMOKE_LIKE = """\
    title: t
    book: false
    series: patches/smoke
    fragments: [boot]
    workloads:
      - {name: getpid, script: /chapters/smoke/guest/getpid.sh, parser: keyvalue,
         units: {iterations: count, marker: flag, layer: flag, "ns_*": ns, "tsc_*": TSC ticks}}
    variants:
      baseline: {tree: baseline}
"""


def test_book_chapters_are_found_in_order_and_validate() -> None:
    found = chapters.discover()
    book = [c.name for c in chapters.book()]
    assert book == sorted(book, key=lambda n: found[n].order)
    assert "smoke" in found and "smoke" not in book
    for name in book:
        assert (ROOT / "book" / f"{name}.md").is_file(), f"chapter {name} has no page"
        assert (ROOT / "data" / "cited" / f"{name}.yaml").is_file(), name
    assert [c.name for c in chapters.select("all")] == [
        c.name for c in chapters.book() if c.has_experiment]


def test_a_chapter_without_experiment_cannot_be_reproduced(here: Path) -> None:
    write_chapter(here, "bare", "title: a page whose experiment is still to be written\n")
    assert not chapters.get("bare").has_experiment
    with pytest.raises(StageError, match=r"chapter bare has no experiment yet"):
        chapters.select("bare")


def test_a_chapter_is_read_again_when_a_file_it_names_changes(here: Path) -> None:
    """discover() keeps its last result until one of its inputs changes: a rewrite in the same
    clock tick with the same size, and a fragment that disappears, are both seen."""
    d = write_chapter(here, "again", "title: first\n")
    assert chapters.get("again").title == "first"
    assert chapters.discover() == chapters.discover()
    (d / "chapter.yaml").write_text("title: other\n")
    assert chapters.get("again").title == "other"
    write_chapter(here, "frag", SMOKE_LIKE.replace("[boot]", "[mine]"),
                  **{"configs/mine.config": "CONFIG_X=y\n"})
    assert chapters.get("frag").title == "t"
    (here / "frag" / "configs" / "mine.config").unlink()
    with pytest.raises(StageError, match="config fragment 'mine' not found"):
        chapters.get("frag")


def test_unknown_chapter_lists_the_chapters() -> None:
    with pytest.raises(StageError, match=r"no chapter 'nope': chapters are .*smoke"):
        chapters.select("nope")


def test_smoke_experiment_and_make_overrides() -> None:
    exp = experiment.load("smoke", accel="tcg", reps=1)
    assert exp.reps == 1 and exp.kconfig_start == "tinyconfig"
    assert exp.variants["patched"].accel == "tcg"
    assert exp.variants["patched-icount"].accel == "icount"
    assert exp.build_name("patched-icount") == "patched"
    # a variant runs the workloads it lists, or all of them
    assert [w["name"] for w in exp.workloads_of("baseline")] == ["getpid"]
    assert [w["name"] for w in exp.workloads_of("patched-icount")] == ["getpid", "clock"]
    assert set(experiment.load("smoke", only=["patched"]).variants) == {"patched"}
    with pytest.raises(StageError, match=r"has no variant\(s\) \['nope'\]"):
        experiment.load("smoke", only=["nope"])
    assert experiment.load("smoke", accel="tcg").key != experiment.load("smoke").key


def test_the_experiment_key_follows_what_boots_not_how_the_book_names_it(here: Path) -> None:
    """A new title, label or cited id resumes the boots of a run; a new command line, rep
    count or workload starts a new one."""
    def key(text: str) -> str:
        name = f"k{len(list(here.iterdir()))}"
        write_chapter(here, name, text)
        return experiment.load(name).key

    first = key(SMOKE_LIKE)
    assert key(SMOKE_LIKE.replace("title: t", "title: renamed\n    label: r\n    order: 9")) \
        == first
    cited = {"title": "t", "workloads": [{"name": "w", "cited": {"m": "id"}}]}
    assert experiment.measured(cited) == {"workloads": [{"name": "w"}]}
    assert key(SMOKE_LIKE + "      patched: {tree: baseline, cmdline: quiet}\n") != first
    assert key(SMOKE_LIKE.replace("book: false", "book: false\n    reps: 2")) != first
    assert key(SMOKE_LIKE.replace("name: getpid", "name: other")) != first


def test_a_matrix_makes_each_listed_variant_again_after_the_last_of_them(here: Path) -> None:
    write_chapter(here, "m", SMOKE_LIKE + (
        "      patched: {tree: baseline, cmdline: quiet}\n"
        "      other: {tree: baseline}\n"
        "    matrix:\n"
        "      icount: {of: [baseline, patched], with: {accel: icount, reps: 1}}\n"))
    exp = experiment.load("m")
    assert list(exp.variants) == ["baseline", "patched", "baseline-icount", "patched-icount",
                                  "other"]
    made = exp.variants["patched-icount"]
    assert (made.accel, made.reps, made.cmdline, made.tree) == ("icount", 1, "quiet", "baseline")
    assert exp.build_name("patched-icount") == "baseline"


@pytest.mark.parametrize(("matrix", "message"), [
    ("{x: {of: [nope], with: {reps: 1}}}", r"matrix.x.of: 'nope' is not a variant"),
    ("{icount: {of: [baseline], with: {reps: 1}}}",
     r"matrix.icount: baseline-icount is a variant already"),
])
def test_a_matrix_names_only_variants_and_makes_no_name_twice(here: Path, matrix: str,
                                                              message: str) -> None:
    write_chapter(here, "m", SMOKE_LIKE + "      baseline-icount: {tree: baseline}\n"
                  f"    matrix: {matrix}\n")
    with pytest.raises(StageError, match=message):
        chapters.get("m")


def test_variant_settings_extend_the_chapter(here: Path) -> None:
    write_chapter(here, "x", """\
        title: x
        series: patches/smoke
        fragments: [boot]
        cmdline: quiet
        machine: {cpus: 2, memory: 1G}
        workloads: [{name: w, script: /chapters/smoke/guest/getpid.sh, units: {"*": count}}]
        variants:
          iso: {fragments: [/chapters/smoke/configs/smoke.config], cmdline: isolcpus=1,
                machine: {cpus: 4}}
    """)
    exp = experiment.load("x")
    v = exp.variants["iso"]
    assert exp.fragment_paths("iso") == [ROOT / "configs" / "boot.config",
                                         ROOT / "chapters" / "smoke" / "configs" / "smoke.config"]
    assert v.cmdline == "quiet isolcpus=1" and v.tree == "patched"
    assert (v.machine.cpus, v.machine.memory) == (4, "1G")


def test_a_variant_may_boot_fewer_times_and_boots_still_interleave(here: Path) -> None:
    write_chapter(here, "r", """\
        title: r
        series: patches/smoke
        fragments: [boot]
        reps: 3
        workloads: [{name: w, script: /chapters/smoke/guest/getpid.sh, units: {"*": count}}]
        variants:
          timed-a: {tree: baseline}
          icount: {tree: baseline, accel: icount, reps: 1}
          timed-b: {tree: patched}
    """)
    exp = experiment.load("r")
    assert [exp.variants[v].reps for v in exp.booted] == [3, 1, 3]
    assert exp.boots == [("timed-a", 1), ("icount", 1), ("timed-b", 1),
                         ("timed-a", 2), ("timed-b", 2), ("timed-a", 3), ("timed-b", 3)]
    # make's REPS= is the reader's override of every count
    assert experiment.load("r", reps=2).boots == [
        ("timed-a", 1), ("icount", 1), ("timed-b", 1),
        ("timed-a", 2), ("icount", 2), ("timed-b", 2)]


def test_each_kernel_stage_is_handed_exactly_what_it_reads(here: Path) -> None:
    """A kernel stage's one param is its KernelJob, so Snakemake reruns the stage when, and
    only when, something in it changes: a new title, reps or inspect: list leaves config and
    build alone; inspect: re-inspects; a fragment reconfigures and rebuilds. The paths are
    the repository's own, so a clone elsewhere reruns nothing, and a job survives the JSON
    round trip the command line takes."""
    text = SMOKE_LIKE + "      patched: {tree: patched, compiler: clang}\n"

    def jobs(extra: str = "", name: str = "k", edit: tuple[str, str] = ("", "")
             ) -> dict[str, experiment.KernelJob]:
        if (here / name).exists():
            shutil.rmtree(here / name)
        write_chapter(here, name, text.replace(*edit) + textwrap.indent(extra, "    "),
                      **{"guest/Makefile": "all:\n"})
        exp = experiment.load(name)
        return {"series": exp.series_job(), "config": exp.config_job("patched"),
                "build": exp.build_job("patched"), "tools": exp.tools_job("patched"),
                "inspect": exp.inspect_job("patched")}

    before = jobs()
    assert before["config"].compiler == "clang" and before["config"].arch == "x86_64"
    assert before["config"].fragments == ("configs/boot.config",)
    assert before["series"].series == "patches/smoke" and not before["series"].variant
    assert before["build"].build_fails == "" and not before["build"].extmod
    for stage, job in before.items():
        assert experiment.KernelJob.from_json(job.to_json()) == job, stage

    def changed(extra: str = "", edit: tuple[str, str] = ("", "")) -> set[str]:
        after = jobs(extra, edit=edit)
        return {stage for stage in before if after[stage] != before[stage]}

    assert changed("reps: 7\nboot_timeout: 300\n") == set()
    assert changed(edit=("title: t", "title: u")) == set()
    assert changed("inspect: {callers: [__schedule]}\n") == {"inspect"}
    assert changed("tools: {dir: guest, programs: [x], kbuild: true}\n") == {"build", "tools"}
    assert changed("kconfig_start: tinyconfig\n") == {"config"}
    # the config file a new fragment makes is the build's input, so the build follows
    assert changed(edit=("fragments: [boot]", "fragments: [boot, base]")) == {"config"}
    # a chapter outside the repository keeps absolute paths, which the stage reads back
    tools = jobs("tools: {dir: guest, programs: [x]}\n")["tools"]
    assert from_repo(tools.tools_dir) == (here / "k" / "guest").resolve()
    assert from_repo(tools.file) == (here / "k" / "chapter.yaml").resolve()


def test_a_comparison_runs_for_each_repetition_both_sides_boot(here: Path) -> None:
    write_chapter(here, "c", """\
        title: c
        series: patches/smoke
        fragments: [boot]
        reps: 3
        workloads: [{name: w, script: /chapters/smoke/guest/getpid.sh, units: {"*": count}}]
        compare:
          - {name: diff, script: /chapters/smoke/host/compare.sh, pairs: [[a, b], [a, c]],
             units: {"*": count}}
        variants:
          a: {tree: baseline}
          b: {tree: patched, reps: 2}
          c: {tree: patched}
    """)
    exp = experiment.load("c")
    jobs = [(c.baseline, c.patched, c.workload, r) for c, r in exp.compare_jobs]
    assert jobs == [("a", "b", "diff-vs-a", 1), ("a", "b", "diff-vs-a", 2),
                    ("a", "c", "diff-vs-a", 1), ("a", "c", "diff-vs-a", 2),
                    ("a", "c", "diff-vs-a", 3)]
    assert exp.compare("diff-vs-a", "c").reps == 3
    # VARIANTS= that leaves out one side drops the comparison, not the boot
    assert [c.patched for c in experiment.load("c", only=["a", "c"]).compares] == ["c"]
    assert experiment.load("c", only=["b", "c"]).compares == ()


def test_a_build_expected_to_fail_never_boots_and_has_a_build_of_its_own(here: Path) -> None:
    write_chapter(here, "f", """\
        title: f
        series: patches/smoke
        fragments: [boot]
        workloads: [{name: w, script: /chapters/smoke/guest/getpid.sh, units: {"*": count}}]
        variants:
          works: {tree: baseline}
          fails: {tree: baseline, build_fails: "error: the finding"}
    """)
    exp = experiment.load("f")
    assert exp.booted == ["works"] and exp.variants["fails"].build_fails == "error: the finding"
    assert exp.builds == ["fails", "works"] and exp.kernels == ["works"]


@pytest.mark.parametrize(("edit", "message"), [
    (lambda y: y + "repetitions: 3\n",
     r"chapter.yaml: does not match workflow/schemas/chapter.schema.yaml:\n"
     r"  \(top\): Additional properties are not allowed \('repetitions' was unexpected\)"),
    (lambda y: y.replace("baseline: {tree: baseline}", "baseline: {tree: baseline, boots: 1}"),
     r"variants.baseline: Additional properties are not allowed \('boots' was unexpected\)"),
    (lambda y: y.replace("fragments: [boot]", "fragments: [bot]"),
     r"chapter.yaml:\n  fragments: config fragment 'bot' not found"),
    (lambda y: y.replace("parser: keyvalue", "parser: keyvalu"),
     r"workloads\[0\].parser: unknown parser 'keyvalu'; this chapter has "
     r"\['keyvalue', 'sections'\]"),
    (lambda y: y.replace("baseline: {tree: baseline}",
                         "baseline: {tree: baseline, workloads: [getpid, clock]}"),
     r"variants.baseline.workloads: 'clock' is not one of workloads \['getpid'\]"),
    (lambda y: y.replace("parser: keyvalue", "parser: keyvalue, cited: {marker: x-1}"),
     r"workloads\[0\].cited.marker: 'x-1' is not an id of data/cited/bad.yaml"),
    (lambda y: y.replace("/chapters/smoke/guest/getpid.sh", "guest/missing.sh"),
     r"workloads\[0\].script: .*/bad/guest/missing.sh does not exist"),
    (lambda y: y.replace("series: patches/smoke", "series: patches/nothing"),
     r"series: patches/nothing/series does not exist"),
    (lambda y: y.replace("fragments: [boot]", "fragments: [boot]\ntools: {dir: guest, "
                         "programs: [p]}"),
     r"tools.dir: .*/bad/guest/Makefile does not exist"),
    (lambda y: y.replace("baseline: {tree: baseline}",
                         "baseline: {tree: baseline, build_fails: 'error: x y z', boot: true}"),
     r"variants.baseline: a build expected to fail \(build_fails\) cannot boot"),
    (lambda y: y.replace("baseline: {tree: baseline}", "baseline: {tree: baseline, "
                         "initrd: files.cpio}"),
     r"variants.baseline.initrd: 'files.cpio' is not one of tools.programs \[\]"),
    (lambda y: y + "compare: [{name: c, units: {x: count}, "
                   "script: /chapters/smoke/host/compare.sh, pairs: [[baseline, nope]]}]\n",
     r"compare\[0\].pairs\[0\]: no variant 'nope'"),
    (lambda y: y + "compare: [{name: c, units: {x: count}, "
                   "script: /chapters/smoke/host/compare.sh, pairs: [[baseline, baseline]]}]\n",
     r"compare\[0\].pairs\[0\]: compares baseline with itself"),
    (lambda y: y + "  other: {tree: baseline}\ncompare: [{name: c, script: host/nope.sh, "
                   "units: {x: count}, pairs: [[baseline, other]]}]\n",
     r"compare\[0\].script: .*/bad/host/nope.sh does not exist"),
    (lambda y: y + "  other: {tree: baseline, build_fails: 'error: x y z'}\ncompare: [{name: c, "
                   "script: /chapters/smoke/host/compare.sh, units: {x: count}, "
                   "pairs: [[baseline, other]]}]\n",
     r"compare\[0\].pairs\[0\]: variant 'other' never boots"),
    (lambda y: y + "  other: {tree: baseline}\ncompare: [{name: c, script: "
                   "/chapters/smoke/host/compare.sh, parser: perfdif, units: {x: count}, "
                   "pairs: [[baseline, other]]}]"
                   "\n",
     r"compare\[0\].parser: unknown parser 'perfdif'"),
    (lambda y: "title: [not, a, string]\n",
     r"title: \['not', 'a', 'string'\] is not of type 'string'"),
])
def test_mistakes_name_the_file_and_the_key(here: Path, edit, message) -> None:
    write_chapter(here, "bad", edit(textwrap.dedent(SMOKE_LIKE)))
    with pytest.raises(StageError, match=message):
        chapters.get("bad")


def test_a_chapter_directory_without_chapter_yaml_is_refused(here: Path) -> None:
    (here / "half").mkdir()
    (here / "half" / "parse.py").write_text("PARSERS = {}\n")
    with pytest.raises(StageError, match=r"half: a chapter directory needs chapter.yaml"):
        chapters.discover()


def test_failure_chapters_validate() -> None:
    os.environ["KERNEL_BOOK_CHAPTERS"] = str(TEST_CHAPTERS)
    try:
        names = {p.name for p in TEST_CHAPTERS.iterdir()}
        assert names <= set(chapters.discover())
    finally:
        del os.environ["KERNEL_BOOK_CHAPTERS"]


TOY_ANALYSIS = '''\
"""The toy chapter's judge: its one cited number against the mean of ours."""

import pandas as pd

from lab.analysis import runs


def judge(cited: pd.DataFrame, chapter_runs: list[runs.Run]) -> pd.DataFrame:
    """One row: the mean marker of the newest run, judged against the cited value."""
    run = chapter_runs[-1]
    ours = runs.metric_values(run, "baseline", "getpid", "marker").mean()
    return pd.DataFrame([{"id": "toy-marker", "ours": f"{ours:g}",
                          "verdict": "toy verdict", "reason": "toy judge ran",
                          "run_id": run.run_id, "environment": "toy"}])
'''

TOY_CITED = """\
chapter: toy
sources:
  - {id: mail, file: 000_x.txt, message_id: "<x@y>", url: "https://example.org/x",
     author: A, date: "2026-01-01", subject: "s"}
entries:
  - {id: toy-marker, table: t, row: r, column: c, variant: single, quantity: marker,
     unit: count, condition: {run: toy}, value: "1", source: mail, quote: "marker 1"}
"""


TOY_CHAPTER = """\
    title: a throw-away chapter
    order: 99
    book: false
    fragments: [boot, /chapters/smoke/configs/smoke.config]
    kconfig_start: tinyconfig
    tools: {dir: /chapters/smoke/guest, programs: [getpid]}
    workloads:
      - name: getpid
        script: /chapters/smoke/guest/getpid.sh
        parser: toy
        units: {marker: flag, layer: flag, iterations: count, "ns_*": ns, "tsc_*": TSC ticks}
        cited: {marker: toy-marker}
    reps: 1
    variants:
      baseline: {tree: baseline}
"""

TOY_RUN = """\
from lab.pipeline import publish
rec = {"variant": "baseline", "rep": 1, "accel": "tcg",
       "rows": {"getpid": [("marker", 1.0)]}, "dir": "unused"}
publish.publish("toy", "20260101T000000Z-tcg", lambda tmp: publish.write_run(
    tmp, {"results.csv": publish.results_csv(
        "toy", [rec], {("getpid", "marker"): "toy-marker"})},
    {"chapter": "toy", "variants": {"baseline": {}}}))
"""
"""A published run of the toy chapter: one boot whose marker is 1."""

TOY_SCORED = """\
from lab.analysis import cited, judges, runs, scorecard
frame = cited.to_frame(cited.load_all())
card = scorecard.build(frame, runs.measured_for_cited(), judges.judged(frame))
row = card.set_index("id").loc["toy-marker"]
print(row["ours"], "|", row["verdict"], "|", row["reason"])
"""


def toy_tree(tmp_path: Path, chapter: str) -> tuple[Path, dict[str, bytes], Callable[..., str]]:
    """A copy of the repository's files (no runs) with the toy chapter's own files added:
    the copy, the shared files' bytes before, and a runner of Python in the copy."""
    tree = tmp_path / "tree"
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout.split()
    for rel in listed:
        if (ROOT / rel).is_file() and not rel.startswith("data/runs/"):
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, tree / rel)
    shared = {rel: (tree / rel).read_bytes() for rel in listed if (tree / rel).is_file()}
    write_chapter(tree / "chapters", "toy", chapter, **{
        "parse.py": "from lab.parse import keyvalue\n\nPARSERS = {'toy': keyvalue.parse}\n",
        "analysis.py": TOY_ANALYSIS})
    (tree / "patches" / "toy").mkdir(parents=True)
    (tree / "patches" / "toy" / "series").write_text("")
    (tree / "data" / "cited" / "toy.yaml").write_text(TOY_CITED)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("KERNEL_BOOK_CHAPTERS", None)

    def py(*argv: str) -> str:
        proc = subprocess.run([sys.executable, *argv], cwd=tree, env=env, text=True,
                              capture_output=True, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    return tree, shared, py


def test_a_new_chapter_touches_only_its_own_files(tmp_path: Path) -> None:
    tree, shared, py = toy_tree(tmp_path, TOY_CHAPTER)
    # discovered and validated
    assert "toy: 1 variants, 1 builds, 1 boots" in py("-m", "lab.pipeline", "check")
    # in the DAG, beside another chapter
    dag = py("-m", "snakemake", "-s", "workflow/Snakefile", "--directory",
             str(tmp_path / "work"), "-n", "--config",
             "chapters=toy,smoke", f"python={sys.executable}")
    assert "published/toy/" in dag and "published/smoke/" in dag, dag
    # scored: a run of the toy chapter, published and judged by its own analysis.py
    py("-c", TOY_RUN)
    assert py("-c", TOY_SCORED).strip() == "1 | toy verdict | toy judge ran"
    changed = [rel for rel, data in shared.items() if (tree / rel).read_bytes() != data]
    assert changed == [], f"adding a chapter changed shared files: {changed}"


TOY_NOTEBOOK = """\
---
jupytext:
  text_representation: {extension: .md, format_name: myst}
kernelspec: {display_name: Python 3, language: python, name: python3}
kernelbook:
  reads: [data/cited/toy.yaml, data/runs/toy/**/*, chapters/toy/**/*]
---

# Toy: the cited number and ours

```{code-cell} python
from lab.analysis import runs
from lab.book import notebook

notebook.setup()
section = notebook.cited_section("toy")
marker = runs.metric_values(section.runs[-1], "baseline", "getpid", "marker").mean()
notebook.glue_text("toy-marker-ours", f"{marker:g}")
notebook.claim("toy-marker-set", marker == 1, "the baseline's marker is set")
```
"""

TOY_PAGE = """\
# A throw-away chapter

The author saw {glue:text}`/notebooks/toy.md::toy-marker`; our boot printed
{glue:text}`/notebooks/toy.md::toy-marker-ours`, more than
none{claim}`/notebooks/toy.md::toy-marker-set`.
"""


@pytest.mark.book
def test_a_new_book_chapter_touches_only_its_own_files(tmp_path: Path) -> None:
    """A chapter of the book adds its page and notebook to its own files: the book lists it
    after the others, its notebook runs on its committed run and asserts its sentence, the
    page's claim marker names that assertion, and its judge scores it; no shared file
    changes."""
    tree, shared, py = toy_tree(tmp_path, TOY_CHAPTER.replace("book: false", "book: true"))
    (tree / "book" / "toy.md").write_text(TOY_PAGE)
    (tree / "notebooks" / "toy.md").write_text(TOY_NOTEBOOK)
    assert py("-c", "from lab import chapters; print([c.name for c in chapters.book()])"
              ).strip().endswith("'toy']")
    py("-c", TOY_RUN)
    executed = tmp_path / "toy.ipynb"
    py("-m", "jupytext", "--to", "ipynb", "--execute", "notebooks/toy.md", "-o", str(executed))
    glued = {o["metadata"]["scrapbook"]["name"]:
             o["data"]["application/papermill.record/text/plain"]
             for cell in json.loads(executed.read_text())["cells"]
             for o in cell.get("outputs", [])
             if "application/papermill.record/text/plain" in o.get("data", {})}
    assert glued["toy-marker-ours"] == "'1'" and glued["toy-marker"] == "'1'", glued
    page = (tree / "book" / "toy.md").read_text()
    backings = [claims.parse(m) for m in claims.markers(page)]
    assert backings and all(claims.asserted_in(tree, b) for b in backings)
    assert py("-c", TOY_SCORED).strip() == "1 | toy verdict | toy judge ran"
    changed = [rel for rel, data in shared.items() if (tree / rel).read_bytes() != data]
    assert changed == [], f"adding a book chapter changed shared files: {changed}"


@pytest.mark.parametrize("name", [c.name for c in chapters.discover().values()
                                  if c.has_experiment and (DATA / "runs" / c.name).is_dir()])
def test_the_declared_units_cover_every_metric_the_committed_runs_hold(name: str) -> None:
    """Every metric a committed run of the chapter holds, of a workload it still runs, has a
    unit under that workload's units: (so the next run publishes, rather than failing at its
    first parse)."""
    declared = experiment.load(name).units
    missing = set()
    for results in sorted((DATA / "runs" / name).glob("*/results.csv")):
        with results.open() as fh:
            missing |= {(row["workload"], row["metric"]) for row in csv.DictReader(fh)
                        if row["workload"] in declared
                        and units.unit_of(declared[row["workload"]], row["metric"]) is None}
    assert not missing, sorted(missing)[:20]
