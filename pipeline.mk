# Pipeline targets, included by the Makefile (which defines PY and the venv stamp).
#   make reproduce CHAPTER=smoke [VARIANTS=baseline,patched] [REPS=n] [ACCEL=auto|kvm|tcg|icount]
# Caches (toolchain root, kernel source, build dirs, ccache, Snakemake's state) live in
# $${XDG_CACHE_HOME:-~/.cache}/kernel-book; finished runs in data/runs/<chapter>/<run-id>/.
CHAPTER ?=
VARIANTS ?=
REPS ?=
ACCEL ?=
EXPERIMENT ?= experiments/$(CHAPTER).yaml
KB_CACHE = $${KERNEL_BOOK_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/kernel-book}
PIPELINE_DEBS := qemu-system-x86 mmdebstrap bubblewrap uidmap git
SNAKE_CONFIG = experiment=$(abspath $(EXPERIMENT)) python=$(abspath $(PY)) \
	accel=$(ACCEL) reps=$(REPS) variants=$(VARIANTS)
STAGE_ARGS = --experiment $(EXPERIMENT) --accel '$(ACCEL)' --reps '$(REPS)' \
	--variants '$(VARIANTS)'

.PHONY: reproduce pipeline-deps help-pipeline

help-pipeline: ## how to re-measure a chapter (variables, caches, what needs root)
	@echo "make reproduce CHAPTER=<chapter> [VARIANTS=a,b] [REPS=n] [ACCEL=auto|kvm|tcg|icount]"
	@echo "    builds, boots and measures a chapter; result in data/runs/<chapter>/<run-id>/"
	@echo "    chapters: $(patsubst experiments/%.yaml,%,$(wildcard experiments/*.yaml))"
	@echo "    ACCEL=auto probes KVM with a real guest and falls back to TCG;"
	@echo "    ACCEL=icount: single-threaded TCG where the guest TSC counts instructions"
	@echo "    KERNEL_SRC=<dir> or KERNEL_TARBALL=<file> replaces the pinned 7.2.13 base"
	@echo "make pipeline-deps   install the host packages ($(PIPELINE_DEBS)); needs root"
	@echo "caches: $(KB_CACHE) (delete it to start cold)"

pipeline-deps: ## install the pipeline's host packages with apt-get (needs root)
	@missing=$$(for p in $(PIPELINE_DEBS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing host packages: $$missing"; \
	  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -q --no-install-recommends $$missing >/dev/null; \
	fi

reproduce: $(STAMP) pipeline-deps ## re-measure a chapter: make reproduce CHAPTER=smoke (see make help-pipeline)
	@test -n "$(CHAPTER)" || { echo "usage: make reproduce CHAPTER=<chapter>; see make help-pipeline"; exit 2; }
	@test -f "$(EXPERIMENT)" || { echo "no $(EXPERIMENT); chapters: $(patsubst experiments/%.yaml,%,$(wildcard experiments/*.yaml))"; exit 2; }
	@start=$$(date +%s); \
	run_id=$$($(PY) -m lab.pipeline run-id $(STAGE_ARGS)) || exit 1; \
	echo "reproduce $(CHAPTER): run $$run_id (caches: $(KB_CACHE))"; \
	mkdir -p "$(KB_CACHE)/work"; \
	$(PY) -m snakemake -s workflow/Snakefile --directory "$(KB_CACHE)/work" \
	  --cores $$(nproc) --resources machine=1 --rerun-incomplete --rerun-triggers mtime input params \
	  --quiet host progress rules reason \
	  --config $(SNAKE_CONFIG) run_id=$$run_id 2>&1 | \
	  grep --line-buffered -v -E '^(Select jobs to execute|Execute [0-9]+ jobs)\.\.\.$$'; \
	rc=$${PIPESTATUS[0]}; \
	$(PY) -m lab.pipeline summary $(STAGE_ARGS) --run-id $$run_id; \
	echo "reproduce $(CHAPTER): $$( [ $$rc -eq 0 ] && echo done || echo FAILED) in $$(( $$(date +%s) - start )) s"; \
	exit $$rc
