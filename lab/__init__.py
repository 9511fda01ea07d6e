"""The book's Python side, in packages by role.

* :mod:`lab.pipeline`: one module per stage, from the toolchain root to the published run;
* :mod:`lab.parse`: the parsers of guest output that chapters share;
* :mod:`lab.analysis`: what notebooks compute from the committed runs (cited numbers, runs,
  statistics, verdicts, the scorecard);
* :mod:`lab.book`: the Sphinx extension, the notebooks' figures and glue.

At this level only what every role uses: the repository's paths, the chapter schema
(:mod:`lab.chapters`), running a command (:mod:`lab.command`), the Makefile's timer and
reading YAML (:mod:`lab.yamlfile`). Data flows one way: pinned source -> series -> config ->
build -> boot/run -> parse -> data/ -> notebooks -> figures and glued numbers -> pages;
tests/test_layout.py holds the imports to it.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The repository root; notebooks run with their own directory as cwd, so paths are built here."""

DATA = ROOT / "data"


def in_repo(path: Path) -> str:
    """A path relative to the repository when it is inside it (chapters, series), else as
    given (a test chapter in a temporary directory): what a manifest or a rule's param records,
    so neither depends on where the repository is checked out."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def from_repo(text: str) -> Path:
    """The path :func:`in_repo` recorded, as a path on this machine: a relative one under
    :data:`ROOT`, an absolute one (outside the repository) unchanged, as ``/`` makes it."""
    return ROOT / text
