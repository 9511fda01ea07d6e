"""The book's Python side: pipeline stages, data loaders and the Sphinx glue.

Data flows one way: pinned source -> series -> config -> build -> boot/run -> parse ->
data/ -> notebooks -> figures and glued numbers -> pages.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The repository root; notebooks run with their own directory as cwd, so paths are built here."""

DATA = ROOT / "data"
