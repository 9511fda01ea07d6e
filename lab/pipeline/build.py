"""Kernel builds inside the toolchain root: one build directory per (base, config, compiler).

Variants of a chapter share a build directory: the build checks out the variant's commit in
the one source tree (git rewrites only the files that differ) and runs make, so switching
from baseline to patched recompiles what the series touches and relinks, as a developer's
incremental build would. ccache catches the rest. Source and build directory are bound at
fixed paths (``/src``, ``/build``) inside the root, so compiler output and ccache keys do not
depend on where the cache lives on this machine.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from lab import from_repo
from lab.command import StageError, run
from lab.pipeline import arch as arches
from lab.pipeline import (
    cachedir,
    crosslayer,
    kconfig,
    node,
    nodecache,
    series,
    toolchain,
)
from lab.pipeline.arch import HOST
from lab.pipeline.experiment import KernelJob
from lab.pipeline.stamps import (
    BuildStamp,
    SeriesStamp,
    SourceStamp,
    fresh_log,
    stage,
)

SRC, BUILD, CCACHE = "/src", "/build", "/ccache"


def kernel_make_vars(compiler: str, arch: str = HOST) -> list[str]:
    """The make variables of a kernel build (:meth:`lab.pipeline.arch.Arch.make_vars`)
    without ccache, for what is built against a kernel outside its build (an out-of-tree
    module must use the kernel's compiler)."""
    return [v.replace("ccache ", "") for v in arches.get(arch).make_vars(compiler)]


REPRODUCIBLE = ["KBUILD_BUILD_TIMESTAMP=2000-01-01", "KBUILD_BUILD_USER=kernel-book",
                "KBUILD_BUILD_HOST=kernel-book", "KBUILD_BUILD_VERSION=1"]
"""Fixed version-string inputs, so identical sources give an identical image. Without
KBUILD_BUILD_VERSION the version string carries a link counter of the shared build directory
("#2" for the second variant linked there), and the same commit and .config gave images a page
apart depending on the order the variants were built in."""


@dataclass(frozen=True)
class Toolbox:
    """What a make inside the root needs: the root (a cross variant's: the cross layer), the
    source tree, the compiler and the architecture."""

    root: Path
    tree: Path
    compiler: str
    arch: str = HOST

    def make(self, build_dir: Path, *targets: str, jobs: int | None = None) -> list[str]:
        """The bwrap+make command line for ``targets`` in ``build_dir``."""
        ccache = cachedir.sub("ccache")
        argv = ["make", "-s", f"-j{jobs or node.cores()}", f"O={BUILD}",
                *arches.get(self.arch).make_vars(self.compiler), *REPRODUCIBLE, *targets]
        return toolchain.in_root(
            self.root, argv, {self.tree: SRC, build_dir: BUILD, ccache: CCACHE}, cwd=SRC,
            env={"CCACHE_DIR": CCACHE, "CCACHE_BASEDIR": "/", "CCACHE_MAXSIZE": "5G",
                 "CCACHE_COMPILERCHECK": "content"},
        )


def _kconfig_inputs(tree: Path, commit: str) -> str:
    """Blob ids of everything that decides a .config: every Kconfig file, the config
    fragments shipped in the tree, the top Makefile (version) and scripts/kconfig."""
    listing = run(["git", "-C", tree, "ls-tree", "-r", commit], what="git ls-tree").stdout
    keep = [line for line in listing.splitlines()
            if "/Kconfig" in line or "\tKconfig" in line or line.endswith(".config")
            or line.endswith("\tMakefile") or "\tscripts/kconfig/" in line]
    return hashlib.sha256("\n".join(keep).encode()).hexdigest()


def configure(box: Toolbox, commit: str, start: str, fragments: list[Path], out: Path,
              log: Path) -> Path:
    """Make ``out`` (a .config): ``start`` (tinyconfig, defconfig...) + fragments, checked.

    Runs in a scratch build directory per (base tree, compiler) so it never disturbs a real
    build directory's timestamps. The result is cached under a key of every input that can
    change it (Kconfig files, start target, fragments, compiler and root), so variants whose
    series does not touch Kconfig share one configuration run.
    """
    wanted = kconfig.requests(fragments)
    key = hashlib.sha256("\n".join([
        _kconfig_inputs(box.tree, commit), start, box.compiler, box.root.name,
        *([box.arch] if box.arch != HOST else []),
        *(f.read_text() for f in fragments)]).encode()).hexdigest()[:20]
    cached = cachedir.sub("kconfig", "results") / f"{key}.config"
    if not cached.is_file():
        scratch = cachedir.sub("kconfig", "-".join(
            [box.tree.name, box.compiler, *([box.arch] if box.arch != HOST else [])]))
        with series.tree_lock(box.tree):
            series.checkout(box.tree, commit)
            (scratch / ".config").unlink(missing_ok=True)
            run(box.make(scratch, start), log=log, what=f"make {start}")
            with (scratch / ".config").open("a") as fh:
                fh.write(kconfig.merged_text(fragments))
            run(box.make(scratch, "olddefconfig"), log=log, what="make olddefconfig")
        shutil.copyfile(scratch / ".config", cached.with_suffix(".tmp"))
        cached.with_suffix(".tmp").rename(cached)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    shutil.copyfile(cached, tmp)
    names = ", ".join(f.name for f in fragments)
    kconfig.check(tmp, wanted, f"{out.resolve()} ({start} + {names})")
    tmp.rename(out)
    return out


def build_dir_for(base_commit: str, config: Path, compiler: str) -> Path:
    """The out-of-tree build directory shared by every variant with this base/config/compiler."""
    return cachedir.sub("build", f"{base_commit[:12]}-{kconfig.sha256(config)[:12]}-{compiler}")


ARTIFACTS = ("vmlinux", "System.map", ".config")
"""What every build keeps besides its boot image."""


def targets_for(config: Path, arch: str = HOST) -> list[str]:
    """make targets of a configuration: the image, and the modules when it has any."""
    has_modules = kconfig.parse(config.read_text()).get("CONFIG_MODULES") == "y"
    return [arches.get(arch).image_target, *(["modules"] if has_modules else [])]


def make_kernel(box: Toolbox, build_dir: Path, commit: str, config: Path, targets: list[str],
                log: Path) -> None:
    """Check ``commit`` out and make ``targets`` in the shared build directory (caller holds
    the tree lock)."""
    series.checkout(box.tree, commit)
    kconfig.install(config, build_dir)
    run(box.make(build_dir, *targets), log=log, what="kernel build")


EXTMOD = "extmod"
"""The artifacts' directory of what an out-of-tree module is built against."""


def install_extmod(box: Toolbox, build_dir: Path, into: Path, log: Path) -> None:
    """Copy what building an out-of-tree module against this kernel needs (its headers,
    generated files, ``Module.symvers``, the build's host programs, ``.config``) into
    ``into``, with the kernel's own ``scripts/package/install-extmod-build``, as a
    distribution's linux-headers package is made. A guest module is then built against the
    variant's own build even after another variant was built in the shared directory, so the
    tools stage never makes a kernel (caller holds the tree lock)."""
    scratch = build_dir / ".kb-extmod"
    shutil.rmtree(scratch, ignore_errors=True)
    run(box.make(build_dir, "run-command", "KBUILD_RUN_COMMAND="
                 f"{SRC}/scripts/package/install-extmod-build {BUILD}/.kb-extmod"),
        log=log, what="install-extmod-build")
    shutil.copyfile(build_dir / ".config", scratch / ".config")
    shutil.move(scratch, into)


def build(box: Toolbox, commit: str, config: Path, base_commit: str, dest: Path,
          log: Path, extmod: bool = False) -> dict[str, object]:
    """Build ``commit`` with ``config`` and copy the image, vmlinux, System.map, modules and
    the log into ``dest`` (outside the repository), and with ``extmod`` what an out-of-tree
    module is built against (:func:`install_extmod`). Returns what the manifest records."""
    build_dir = build_dir_for(base_commit, config, box.compiler)
    targets = targets_for(config, box.arch)
    has_modules = "modules" in targets
    image = arches.get(box.arch).image
    with series.tree_lock(box.tree):
        make_kernel(box, build_dir, commit, config, targets, log)
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for rel in (image, *ARTIFACTS):
            shutil.copyfile(build_dir / rel, tmp / Path(rel).name)
        if has_modules:
            run(box.make(build_dir, "modules_install", "INSTALL_MOD_PATH=/build/.kb-modules"),
                log=log, what="make modules_install")
            shutil.move(build_dir / ".kb-modules", tmp / "modules")
        if extmod:
            install_extmod(box, build_dir, tmp / EXTMOD, log)
    shutil.copyfile(log, tmp / "build.log")
    info = {
        "commit": commit, "compiler": box.compiler, "build_dir": str(build_dir),
        "targets": targets,
        "bzImage_bytes": (tmp / Path(image).name).stat().st_size,
        "vmlinux_bytes": (tmp / "vmlinux").stat().st_size,
        "config_sha256": kconfig.sha256(config), "node": node.identity(),
        **({"arch": box.arch, "image": Path(image).name} if box.arch != HOST else {}),
    }
    (tmp / "build-info.json").write_text(json.dumps(info, indent=1))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return info


_DIAGNOSTIC = re.compile(
    r"(: (?:fatal error|error|warning|note): |: In function |^make\[\d+\]: \*\*\*)")


def diagnostics(log_text: str, limit: int = 200) -> list[str]:
    """The compiler's diagnostic lines of a build log (errors, the warnings and notes beside
    them, the ``In function`` headers and make's failure lines), paths relative to the source
    tree, at most ``limit``: the part of a failed build's log a reader needs."""
    # make O=/build names sources ../src/<path> from the build directory
    lines = [line.replace(f"..{SRC}/", "").replace(f"{SRC}/", "")
             for line in log_text.splitlines() if _DIAGNOSTIC.search(line)]
    return lines[:limit]


def build_failure(box: Toolbox, commit: str, config: Path, base_commit: str, dest: Path,
                  log: Path, expected: str) -> dict[str, object]:
    """Build ``commit`` with ``config`` where the experiment expects the build to fail with
    ``expected`` in its log (a variant's ``build_fails``): the failure is the evidence, so
    its diagnostics are kept in ``dest`` (``errors.txt``) for the run's raw output. A build
    that succeeds, or that fails without the expected text, raises: the claim it stands for
    no longer holds."""
    build_dir = build_dir_for(base_commit, config, box.compiler)
    start = log.stat().st_size if log.exists() else 0
    with series.tree_lock(box.tree):
        try:
            make_kernel(box, build_dir, commit, config, targets_for(config, box.arch), log)
        except StageError:
            pass
        else:
            raise StageError(f"{commit[:12]} built with {box.compiler}, but the experiment "
                             f"expects its build to fail with {expected!r} (build_fails in "
                             f"chapter.yaml): the failure it documents is gone; drop the variant "
                             f"or its build_fails")
    text = log.read_text(errors="replace")[start:]
    if expected not in text:
        raise StageError(f"the build of {commit[:12]} failed, but not with {expected!r} "
                         f"(build_fails in chapter.yaml); see {log}")
    errors = diagnostics(text)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "errors.txt").write_text("".join(f"{line}\n" for line in errors))
    shutil.copyfile(log, tmp / "build.log")
    shutil.copyfile(build_dir / ".config", tmp / ".config")
    info = {"commit": commit, "compiler": box.compiler, "build_dir": str(build_dir),
            "targets": targets_for(config, box.arch), "config_sha256": kconfig.sha256(config),
            "failed": True, "expected": expected,
            "error_lines": sum(": error: " in line for line in errors),
            "node": node.identity()}
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return info


def toolbox(a: argparse.Namespace, job: KernelJob) -> Toolbox:
    """The root, base tree (with the variant's series commit) and compiler of a stage's make,
    made on this machine where it lacks them (:mod:`lab.pipeline.nodecache`)."""
    base = SourceStamp.read(a.base)
    root = crosslayer.tree_of(a.root)
    nodecache.base(base)
    series.ensure_commit(base, SeriesStamp.read(a.series), from_repo(job.series))
    return Toolbox(root, Path(base.tree), job.compiler, job.arch)


def cmd_config(a: argparse.Namespace) -> None:
    """Configure one variant: start config + fragments, olddefconfig, check nothing dropped."""
    job: KernelJob = a.job
    log = fresh_log(a)
    with stage("config", f"{job.chapter}/{job.variant}", log):
        configure(toolbox(a, job), SeriesStamp.read(a.series).commit, job.kconfig_start,
                  [from_repo(f) for f in job.fragments], Path(a.out), log)


def cmd_build(a: argparse.Namespace) -> None:
    """Build one variant's kernel; keep image, vmlinux, System.map, modules and log in the
    stamp's directory (in the cache's work tree, where Snakemake sees the image)."""
    job: KernelJob = a.job
    log = fresh_log(a)
    dest = Path(a.out).resolve().parent
    with stage("build", f"{job.chapter}/{job.variant}", log):
        make = (functools.partial(build_failure, expected=job.build_fails)
                if job.build_fails else functools.partial(build, extmod=job.extmod))
        info = make(toolbox(a, job), SeriesStamp.read(a.series).commit,
                    Path(a.config), SourceStamp.read(a.base).commit, dest, log)
        stamp = BuildStamp(**info, artifacts=str(dest), variant=job.variant)
    stamp.write(a.out)
