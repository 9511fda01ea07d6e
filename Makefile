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
REQUIREMENTS := requirements.txt $(wildcard requirements-pipeline.txt)

.DEFAULT_GOAL := help
.PHONY: help html test lint pytest venv clean clean-cache

help: ## list the targets
	@grep -hE '^[a-z][a-z-]+:.*## ' $(MAKEFILE_LIST) | sort | \
	  awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

$(STAMP): $(REQUIREMENTS) pyproject.toml
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || \
	  { echo "python3-venv is missing: installing it (needs root)"; \
	    apt-get install -y -q python3-venv >/dev/null; }
	@$(TIMED) "python environment ($(VENV))" -- bash -c '\
	  $(PYTHON) -m venv $(VENV) && \
	  $(PY) -m pip install -q --disable-pip-version-check $(addprefix -r ,$(REQUIREMENTS)) && \
	  echo "$(CURDIR)" > "$$($(PY) -c "import sysconfig; print(sysconfig.get_paths()[\"purelib\"])")/kernel-book.pth" && \
	  touch $(STAMP)'

venv: $(STAMP) ## create the project's virtual environment from the pinned requirements

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
