# The reproducible kernel-performance book.
#   make html   build the book from the committed data (installs what it needs)
#   make test   lint, test, and build the book with warnings as errors
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

.DEFAULT_GOAL := help
.PHONY: help html test lint pytest venv python-lock clean clean-cache

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

html: $(STAMP) ## execute the notebooks on the committed data (cached) and build the HTML book
	@set -e; start=$$(date +%s); \
	$(TIMED) "validate data/cited" -- $(PY) -m lab.cited; \
	fresh=; if [ -e $(FAILED) ]; then fresh=-E; fi; \
	if ! $(TIMED) "notebooks + HTML (sphinx -W $$fresh)" -- \
	    $(PY) -m sphinx -W --keep-going -q $$fresh -b html . $(BUILD)/html; then \
	  mkdir -p $(BUILD); touch $(FAILED); exit 1; \
	fi; \
	rm -f $(FAILED); \
	echo "book: $(BUILD)/html/index.html; figures (SVG, PDF, PNG): $(BUILD)/figures;" \
	  "total $$(( $$(date +%s) - start )) s"

lint: $(STAMP) ## ruff over the Python code
	@$(TIMED) "ruff" -- $(PY) -m ruff check lab tests conf.py

# The pipeline tests boot kernels: pipeline-deps installs QEMU and friends (as root) first.
pytest: $(STAMP) pipeline-deps ## the test suite (includes a full book build and the pipeline smoke run)
	@$(TIMED) "pytest" -- $(PY) -m pytest

test: lint pytest ## everything CI runs

clean: ## remove the built book (keeps the notebook cache and the kernel caches)
	rm -rf $(BUILD)/html $(BUILD)/figures $(BUILD)/doctrees $(BUILD)/jupyter_execute

clean-cache: clean ## also drop the notebook execution cache
	rm -rf $(BUILD)/.jupyter_cache

include pipeline.mk
