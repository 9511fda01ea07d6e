"""Sphinx configuration of the reproducible kernel-performance book.

The source directory is the repository root so that chapters (``book/``) and their notebooks
(``notebooks/``) are both documents; everything else is excluded.
"""

import datetime
import os
import sys
from pathlib import Path

# This checkout's lab/ (not whichever one the virtual environment points at) serves Sphinx and,
# through PYTHONPATH, the notebook kernels, so a copy of the book reads its own data.
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)

project = "The reproducible kernel-performance book"
author = "The kernel-performance book authors"
copyright = f"{datetime.date.today().year}, {author}"

extensions = [
    "myst_nb",
    "sphinxcontrib.bibtex",
    "sphinx.ext.mathjax",
    "lab.book.sphinxext",
    "lab.book.forwarddiff",
]

root_doc = "book/index"
include_patterns = ["book/**", "notebooks/**"]
exclude_patterns = ["**/.ipynb_checkpoints", "book/references/**", "book/_static/**",
                    "book/_extra/**"]

source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist", "substitution"]
myst_heading_anchors = 3

# Notebooks run against the committed data; jupyter-cache keys on code, lab.book.sphinxext adds
# the data digest so a changed data file re-executes exactly the notebooks that read it.
nb_execution_mode = "cache"
nb_execution_cache_path = "_build/.jupyter_cache"
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

numfig = True
numfig_format = {"figure": "Figure %s", "table": "Table %s"}

bibtex_bibfiles = sorted(str(p) for p in HERE.glob("book/references/*.bib"))
bibtex_default_style = "unsrt"
bibtex_reference_style = "label"

html_theme = "sphinx_book_theme"
html_title = project
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": True,
    "home_page_in_toc": True,
}
# Light unless the reader chooses otherwise: the figures are drawn on white. (Without a default
# the theme logs "invalid theme mode" on a reader's first visit.)
html_context = {"default_mode": "light"}
html_extra_path = ["book/_extra"]
html_static_path = ["book/_static"]
html_css_files = ["kernelbook.css"]

# The PDF (make pdf): XeLaTeX, so the book's arrows, approximations and dashes print as they
# read, with the FreeFont family Sphinx defaults to for it; no index (the book has none).
# Figures are pasted as "<key>.*" and the LaTeX builder takes their PDF renderings.
latex_engine = "xelatex"
latex_documents = [(root_doc, "kernel-book.tex", project, author, "manual")]
latex_use_xindy = False
latex_domain_indices = False
latex_elements = {
    "papersize": "a4paper",
    "pointsize": "10pt",
    "printindex": "",
    # wide data tables: smaller type, and let long cells break
    "preamble": r"\usepackage{etoolbox}"
                r"\renewcommand{\sphinxstyletheadfamily}{\bfseries\footnotesize}"
                r"\AtBeginEnvironment{tabulary}{\footnotesize}"
                r"\AtBeginEnvironment{longtable}{\footnotesize}",
}
