# Pipeline targets, included by the Makefile (which defines PY and the venv stamp).
#   make reproduce CHAPTER=smoke|a,b|all [VARIANTS=baseline,patched] [REPS=n] [ACCEL=...]
#   make reparse RUN=<chapter>/<run-id>
# Caches (toolchain root, kernel source, build dirs, ccache, Snakemake's state) live in
# $${XDG_CACHE_HOME:-~/.cache}/kernel-book; finished runs in data/runs/<chapter>/<run-id>/.
CHAPTER ?=
VARIANTS ?=
REPS ?=
ACCEL ?=
# EXECUTOR=slurm runs the jobs on a SLURM cluster (workflow/profiles/slurm, or PROFILE=<dir>)
EXECUTOR ?= local
PROFILE ?=
RUN ?=
KB_CACHE = $${KERNEL_BOOK_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/kernel-book}
# python3-venv for the project's virtual environment with Debian's python3; uidmap and passwd
# (newuidmap, useradd) for making the toolchain root and the test's user without root; tar and
# xz-utils unpack the kernel tarball; e2fsprogs formats the disk of a machine that has one.
PIPELINE_DEBS := qemu-system-x86 qemu-system-arm mmdebstrap bubblewrap uidmap passwd git tar xz-utils \
	python3-venv e2fsprogs
# SLURM's client tools, its two daemons and munge, its authentication: a cluster's head and
# nodes have them; the SLURM test runs a one-node cluster of them on loopback
SLURM_DEBS := slurm-client slurmctld slurmd munge
CHAPTERS_LIST = $(notdir $(patsubst %/chapter.yaml,%,$(wildcard chapters/*/chapter.yaml)))

.PHONY: reproduce reparse check-chapters pipeline-deps slurm-deps help-pipeline toolchain-lock \
	guest-lock cross-lock

help-pipeline: ## how to re-measure a chapter (variables, caches, what needs root)
	@echo "make reproduce CHAPTER=<chapter>|a,b|all [VARIANTS=a,b] [REPS=n] [ACCEL=auto|kvm|tcg|icount]"
	@echo "    builds, boots and measures chapters in one DAG; results in data/runs/<chapter>/<run-id>/"
	@echo "    chapters (chapters/*/chapter.yaml): $(CHAPTERS_LIST)"
	@echo "make reparse RUN=<chapter>/<run-id>   a new run from a committed run's raw output"
	@echo "make check-chapters   validate every chapter.yaml (schema, files, parsers, cited ids)"
	@echo "    ACCEL=auto probes KVM with a real guest and falls back to TCG;"
	@echo "    ACCEL=icount: single-threaded TCG where the guest TSC counts instructions"
	@echo "    KERNEL_SRC=<dir> or KERNEL_TARBALL=<file> replaces the pinned 7.2.13 base"
	@echo "    EXECUTOR=slurm runs the jobs on a SLURM cluster (profile workflow/profiles/slurm,"
	@echo "    or PROFILE=<dir>): builds as jobs, each chapter's probe and boots on one node"
	@echo "make slurm-deps      install SLURM's client and daemons and munge (needs root; the"
	@echo "    SLURM test runs a one-node cluster of them on loopback)"
	@echo "make pipeline-deps   install the host packages ($(PIPELINE_DEBS)); needs root,"
	@echo "    the only step that does: every other target runs as an ordinary user"
	@echo "make toolchain-lock  re-make the toolchain root from today's sid and rewrite"
	@echo "    configs/toolchain.lock.yaml (when the archive no longer serves a locked version)"
	@echo "make cross-lock  pin gcc-15's cross compilers and the Arm guests' busybox against"
	@echo "                 the toolchain root (configs/cross.lock.yaml, configs/guest-*.lock.yaml)"
	@echo "make guest-lock CHAPTER=<chapter>  pin the chapter's guest_packages against the"
	@echo "    toolchain root (chapters/<chapter>/guest.lock.yaml; boots only, no rebuild)"
	@echo "caches: $(KB_CACHE) (delete it to start cold); KERNEL_BOOK_WORK=<dir> puts"
	@echo "    Snakemake's work directory elsewhere (on a cluster: the one directory nodes share)"

pipeline-deps: ## install the pipeline's host packages with apt-get (needs root)
	$(call apt-install,$(PIPELINE_DEBS),pipeline-deps)

slurm-deps: ## install SLURM (client, slurmctld, slurmd) and munge for EXECUTOR=slurm and its test (needs root)
	$(call apt-install,$(SLURM_DEBS),slurm-deps)

toolchain-lock: $(STAMP) pipeline-deps ## re-make the toolchain root from today's sid and rewrite its lock
	@$(PY) -m lab.pipeline.toolchain lock

guest-lock: $(STAMP) pipeline-deps ## pin a chapter's guest packages: make guest-lock CHAPTER=io-wq
	@test -n "$(CHAPTER)" || { echo "usage: make guest-lock CHAPTER=<chapter>"; exit 2; }
	@$(PY) -m lab.pipeline.guestlayer lock '$(CHAPTER)'

cross-lock: $(STAMP) pipeline-deps ## pin the cross compilers and Arm guest trees (configs/cross.lock.yaml, configs/guest-*.lock.yaml)
	@$(PY) -m lab.pipeline.crosslayer lock

reproduce: $(STAMP) pipeline-deps ## re-measure chapters: make reproduce CHAPTER=smoke (see make help-pipeline)
	@test -n "$(CHAPTER)" || { echo "usage: make reproduce CHAPTER=<chapter>|a,b|all; chapters: $(CHAPTERS_LIST)"; exit 2; }
	@exec $(PY) -m lab.pipeline reproduce --chapters '$(CHAPTER)' --variants '$(VARIANTS)' \
	  --reps '$(REPS)' --accel '$(ACCEL)' --python $(abspath $(PY)) \
	  --executor '$(EXECUTOR)' --profile '$(PROFILE)'

reparse: $(STAMP) ## parse a committed run's raw output again into a new run: make reparse RUN=<chapter>/<run-id>
	@test -n "$(RUN)" || { echo "usage: make reparse RUN=<chapter>/<run-id> (see data/runs/)"; exit 2; }
	@$(PY) -m lab.pipeline reparse --run '$(RUN)'

check-chapters: $(STAMP) ## validate every chapter.yaml without building anything
	@$(PY) -m lab.pipeline check
