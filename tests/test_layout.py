"""``lab/`` by role: the pipeline, the analysis and the book's Sphinx side are packages of their
own, imports run one way, and no module grows past what one reader holds in mind.

What the structure must be is stated here rather than left to review: a module added at the top
of ``lab/``, an import circle or an analysis module that reaches into the pipeline fails
``make test-fast``.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from lab import ROOT

LAB = ROOT / "lab"

SHARED = {"__init__.py", "chapters.py", "command.py", "timed.py", "yamlfile.py"}
"""The only modules at the top of ``lab/``: the repository's paths, the chapter schema, running a
command (and its StageError), the Makefile's timer and reading YAML, which every role uses."""

PACKAGES = {"pipeline", "analysis", "book", "parse"}

LIMIT = 400
"""Lines of one module at most (issue 25)."""

MAY_IMPORT = {
    "lab.parse": {"lab.parse"},
    "lab.pipeline": {"lab.parse", "lab.pipeline"},
    "lab.analysis": {"lab.parse", "lab.analysis"},
    "lab.book": {"lab.analysis", "lab.book"},
}
"""Which packages each package may import besides the shared modules: data flows from the
pipeline's stages through the parsers to the committed runs, which the analysis reads and the
book draws; the analysis never calls a stage, and a stage never reads a verdict."""

READS_RUNS = {("lab.pipeline.reparse", "lab.analysis.runs")}
"""The one edge against the flow: ``make reparse`` starts from a committed run, which it loads
as the notebooks do (every file checked against the run's manifest)."""


def _modules() -> dict[str, Path]:
    found = {}
    for path in LAB.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Every ``lab`` module ``path`` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lab"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in modules else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "lab"}
    return found & modules.keys()


def _package(module: str) -> str | None:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or parts[-1] in PACKAGES else None


def test_the_top_of_lab_holds_only_shared_modules_and_the_role_packages() -> None:
    top = {p.name for p in LAB.iterdir() if p.name != "__pycache__"}
    assert top == SHARED | PACKAGES, (
        f"lab/ holds {sorted(top - SHARED - PACKAGES)} beside its shared modules and packages; "
        "put a stage in lab/pipeline/, analysis in lab/analysis/, Sphinx code in lab/book/")


def test_no_module_is_longer_than_the_limit() -> None:
    long = {str(p.relative_to(ROOT)): n for p in LAB.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > LIMIT}
    assert not long, f"modules over {LIMIT} lines: {long}; split them by what they do"


def test_imports_form_no_circle() -> None:
    modules = _modules()
    graph = {m: _imports(p, modules) - {m} for m, p in modules.items()}
    # a module's package (its __init__) is imported with it; that is not a circle
    graph = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                raise AssertionError("import circle: " + " -> ".join(
                    [*stack[stack.index(dep):], dep]))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_packages_import_one_way() -> None:
    modules = _modules()
    wrong = []
    for module, path in modules.items():
        own = _package(module)
        if own is None:
            continue
        for dep in _imports(path, modules):
            theirs = _package(dep)
            if (theirs is not None and theirs not in MAY_IMPORT[own]
                    and (module, dep) not in READS_RUNS):
                wrong.append(f"{module} imports {dep}")
    assert not wrong, wrong


def test_the_checks_see_a_circle_and_a_wrong_way(tmp_path: Path) -> None:
    """The helpers find imports inside functions too, where a circle usually hides."""
    (tmp_path / "a.py").write_text("def f():\n    from lab.analysis import verdicts\n")
    modules = {"lab.analysis.verdicts": Path(), "lab.pipeline.a": tmp_path / "a.py"}
    assert _imports(tmp_path / "a.py", modules) == {"lab.analysis.verdicts"}
    assert _package("lab.pipeline.a") == "lab.pipeline"
    assert "lab.analysis" not in MAY_IMPORT["lab.pipeline"]


def test_a_stage_starts_without_what_only_the_analysis_needs() -> None:
    """Snakemake starts one ``python -m lab.pipeline`` per job, about twenty per run of the
    smoke chapter: a stage that reads every chapter (the schema, the cited files) must not
    pull in pandas, nor the grammars jsonschema's optional IRI check compiles (together 2.3 s
    of each job's 2.7 s before; now about 0.4 s)."""
    probe = ("import sys; from lab.pipeline import cli; from lab import chapters; "
             "chapters.discover(); "
             "print(sorted(m for m in ('pandas', 'scipy', 'matplotlib', 'rfc3987_syntax', 'lark')"
             " if sys.modules.get(m) is not None))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
