# The reproducible kernel-performance book.
#   make html   build the book from the committed data (installs what it needs)
#   make pdf    the same book as one PDF (Sphinx's LaTeX builder with Debian's TeX)
#   make lab    JupyterLab on the project's environment, the MyST notebooks open as notebooks
#   make test   lint, test, build the book with warnings as errors and load it in a browser
#   make help   every target
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TIMED := $(PYTHON) -m lab.timed
BUILD := _build
# Sphinx does not re-read a page whose warnings failed the last -W build; after a failure the
# next build starts from a fresh environment (-E), while executed notebooks stay cached.
FAILED := $(BUILD)/.last-build-failed
# Python is pinned by a lock with hashes (requirements.lock, made from requirements*.txt by
# `make python-lock`) and installed with --require-hashes; the interpreter floor is pyproject's
# requires-python (Debian 12's python3, 3.11.2).
LOCK := requirements.lock
PY_FLOOR := $(shell sed -n 's/^requires-python = ">=\([0-9.]*\)"$$/\1/p' pyproject.toml)
UV := uv==0.13.8
# The CPUs this process may use (its affinity): make test-fast's pytest workers.
CPUS := $(shell nproc)

.DEFAULT_GOAL := help
# Host packages beyond the pipeline's, installed on demand as root like pipeline-deps: headless
# Chromium for the browser test; TeX for the PDF (XeLaTeX with the FreeFont family, which has
# the book's arrows and symbols) and poppler-utils for the PDF test's pdftotext.
BROWSER_DEBS := chromium
PDF_DEBS := latexmk texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended \
	texlive-xetex fonts-freefont-otf tex-gyre poppler-utils
LAB_SETTINGS = $(VENV)/share/jupyter/lab/settings/overrides.json
LAB_ARGS ?=  # more options for jupyter lab, e.g. LAB_ARGS=--no-browser

.PHONY: help html pdf lab test test-pdf lint pytest venv python-lock clean clean-cache \
	browser-deps pdf-deps test-fast pytest-boot pytest-book pytest-fast

# $(call apt-install,<packages>,<target>): install the missing Debian packages as root; as an
# ordinary user, name them and the command that installs them, and fail.
define apt-install
@missing=$$(for p in $(1); do \
  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
if [ -n "$$missing" ] && [ "$$(id -u)" != 0 ]; then \
  echo "missing host packages:" $$missing"; install them as root: sudo make $(2)"; \
  exit 1; \
fi; \
if [ -n "$$missing" ]; then \
  echo "installing host packages:" $$missing; \
  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends $$missing >/dev/null; \
fi
endef

help: ## list the targets
	@grep -hE '^[a-z][a-z-]+:.*## ' $(MAKEFILE_LIST) | sort | \
	  awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

$(STAMP): $(LOCK) pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:3] < tuple(map(int, "$(PY_FLOOR)".split("."))))' || \
	  { echo "$(PYTHON) is $$($(PYTHON) -V 2>&1); the book needs Python $(PY_FLOOR) or newer" \
	    "(pyproject.toml requires-python): run make with PYTHON=/path/to/python3"; exit 1; }
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "python3-venv is missing: installing it"; \
	    apt-get install -y -q python3-venv >/dev/null; \
	  else \
	    echo "$(PYTHON) cannot make a virtual environment (no ensurepip): as root run" \
	      "apt-get install python3-venv, or sudo make pipeline-deps"; exit 1; \
	  fi
	@$(TIMED) "python environment ($(VENV), $$($(PYTHON) -V 2>&1))" -- bash -c '\
	  $(PYTHON) -m venv $(VENV) && \
	  $(PY) -m pip install -q --disable-pip-version-check --require-hashes -r $(LOCK) && \
	  echo "$(CURDIR)" > "$$($(PY) -c "import sysconfig; print(sysconfig.get_paths()[\"purelib\"])")/kernel-book.pth" && \
	  touch $(STAMP)'

python-lock: ## re-resolve requirements*.txt into requirements.lock (with hashes; Python 3.11, x86-64 Linux)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(PYTHON) -m venv "$$tmp" && "$$tmp/bin/pip" install -q --disable-pip-version-check $(UV) && \
	"$$tmp/bin/uv" pip compile --quiet --generate-hashes --python-version 3.11 \
	  --python-platform x86_64-unknown-linux-gnu --custom-compile-command "make python-lock" \
	  requirements.txt requirements-pipeline.txt -o $(LOCK) && \
	echo "wrote $(LOCK) ($$(grep -c '^[a-z0-9].*==' $(LOCK)) packages); commit it"

venv: $(STAMP) ## create the project's virtual environment from requirements.lock (hashes checked)

# Both books share one Sphinx environment (doctrees), so make pdf after make html reads no page
# again (its Sphinx step 45 -> about 30 s here); flock keeps `make -j html pdf` from writing it
# twice at once. $(call sphinx-build,<builder>,<what>) builds $(BUILD)/<builder> in it. Sphinx
# keeps a page whose warnings failed a -W build and does not read it again, so whichever build
# fails marks $(FAILED), and the next build of either kind reads everything again (-E).
SPHINX = flock $(BUILD)/.sphinx.lock $(PY) -m sphinx -W --keep-going -q -d $(BUILD)/doctrees
sphinx-build = fresh=; if [ -e $(FAILED) ]; then fresh=-E; fi; \
  if ! $(TIMED) "$(2) (sphinx -W $$fresh)" -- $(SPHINX) $$fresh -b $(1) . $(BUILD)/$(1); then \
    touch $(FAILED); exit 1; fi; rm -f $(FAILED)

html: $(STAMP) ## execute the notebooks on the committed data (cached) and build the HTML book
	@set -e; start=$$(date +%s); \
	inputs=$$($(PY) -m lab.book.uptodate digest); \
	if [ -n "$$inputs" ] && [ "$$(cat $(BUILD)/html/.kb-inputs 2>/dev/null)" = "$$inputs" ]; then \
	  echo "book: $(BUILD)/html/index.html is up to date (no file of the checkout changed since" \
	    "it was built; lab/book/uptodate.py)"; exit 0; \
	fi; \
	rm -f $(BUILD)/html/.kb-inputs; mkdir -p $(BUILD); \
	$(TIMED) "validate data/cited" -- $(PY) -m lab.analysis.cited; \
	$(call sphinx-build,html,notebooks + HTML); \
	if [ -n "$$inputs" ]; then echo "$$inputs" > $(BUILD)/html/.kb-inputs; fi; \
	echo "book: $(BUILD)/html/index.html; figures (SVG, PDF, PNG): $(BUILD)/figures;" \
	  "total $$(( $$(date +%s) - start )) s"

pdf: $(STAMP) pdf-deps ## the book as one PDF: _build/latex/kernel-book.pdf (XeLaTeX, vector figures)
	@set -e; start=$$(date +%s); mkdir -p $(BUILD); \
	$(TIMED) "validate data/cited" -- bash -c '$(PY) -m lab.analysis.cited >/dev/null'; \
	$(call sphinx-build,latex,notebooks + LaTeX); \
	$(TIMED) "PDF (latexmk, xelatex; log: $(BUILD)/latex/latexmk.log)" -- bash -c \
	  '$(MAKE) -s -C $(BUILD)/latex all-pdf LATEXMKOPTS=-silent >$(BUILD)/latex/latexmk.log 2>&1' || \
	  { tail -40 $(BUILD)/latex/latexmk.log; echo "LaTeX failed: $(BUILD)/latex/latexmk.log and" \
	    "$(BUILD)/latex/kernel-book.log say why"; exit 1; }; \
	echo "book: $(BUILD)/latex/kernel-book.pdf ($$(du -h $(BUILD)/latex/kernel-book.pdf | cut -f1));" \
	  "total $$(( $$(date +%s) - start )) s"

lab: $(STAMP) ## JupyterLab on the project's environment; notebooks/*.md open as notebooks (jupytext)
	@mkdir -p $(dir $(LAB_SETTINGS))
	@printf '%s\n' '{"@jupyterlab/docmanager-extension:plugin": {"defaultViewers":' \
	  '{"markdown": "Jupytext Notebook", "myst": "Jupytext Notebook"}},' \
	  '"@jupyterlab/apputils-extension:notification": {"checkForUpdates": false,' \
	  '"fetchNews": "false"}}' > $(LAB_SETTINGS)
	@echo "JupyterLab on $(VENV) (kernel: $$($(PY) -V)); Ctrl-C stops it"
	@exec $(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" --ServerApp.ip=127.0.0.1 \
	  --LabApp.default_url=/lab/tree/notebooks --LabApp.news_url=None \
	  --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
	  --LabApp.extension_manager=readonly \
	  $$([ "$$(id -u)" = 0 ] && echo --allow-root) $(LAB_ARGS)

browser-deps: ## install headless Chromium for the browser test (Debian's chromium; needs root)
	$(call apt-install,$(BROWSER_DEBS),browser-deps)

pdf-deps: ## install TeX and poppler-utils for make pdf (Debian's packages; needs root)
	$(call apt-install,$(PDF_DEBS),pdf-deps)

test-pdf: $(STAMP) pdf-deps ## only the PDF test (make test runs it too): a scratch copy's PDF has every chapter
	@$(TIMED) "pytest (PDF)" -- $(PY) -m pytest -m pdf tests/book

# The tiers (tests/conftest.py) as pytest marker expressions: make test's three lanes, the last
# made from the other two so every test runs in exactly one.
LANE_boot := boot
LANE_book := (book or browser or pdf) and not ($(LANE_boot))
LANE_fast := not ($(LANE_boot)) and not ($(LANE_book))

test-fast: $(STAMP) ## the tests that boot no kernel and build no book (parsers, analysis, pipeline units): about a minute
	@$(TIMED) "pytest (fast tier, $(CPUS) workers)" -- $(PY) -m pytest -n $(CPUS) -m "$(LANE_fast)"

lint: $(STAMP) ## ruff over the Python code
	@$(TIMED) "ruff" -- $(PY) -m ruff check lab tests chapters conf.py

# The pipeline tests boot kernels: pipeline-deps installs QEMU and friends (as root) first;
# slurm-deps the one-node SLURM cluster the SLURM test runs the smoke chapter through.
# It runs in three lanes at once, each printing its output when it ends: the boot tier, whose
# tests share the pipeline's caches and Snakemake work directory (one run at a time); the book's
# one session build with the browser and PDF tests on it (one chain); and the fast tier, in one
# process beside them (the boot lane waits on QEMU and SLURM, and the book lane is one core's
# work, so three lanes finish sooner than two on two CPUs). The lanes do not pass make's
# jobserver on: a test's own make is the reader's.
pytest: $(STAMP) pipeline-deps slurm-deps browser-deps pdf-deps ## the test suite (book build, browser test, PDF, pipeline smoke runs)
	@$(TIMED) "pytest (three lanes)" -- $(MAKE) --no-print-directory -j3 --output-sync=target \
	  pytest-boot pytest-book pytest-fast

pytest-boot pytest-book pytest-fast: pytest-%: $(STAMP)
	@env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL $(TIMED) "pytest, lane $*" -- \
	  $(PY) -m pytest -m "$(LANE_$*)"

test: lint pytest ## everything CI runs

clean: ## remove the built book (keeps the notebook cache and the kernel caches)
	rm -rf $(BUILD)/html $(BUILD)/latex $(BUILD)/figures $(BUILD)/doctrees \
	  $(BUILD)/jupyter_execute $(BUILD)/screenshots

clean-cache: clean ## also drop the notebook execution cache
	rm -rf $(BUILD)/.jupyter_cache

include pipeline.mk
