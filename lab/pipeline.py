"""Command-line entry of every pipeline stage; the Snakefile's rules call it.

``python -m lab.pipeline <stage> ...`` runs one stage for one target and writes one small
JSON stamp (what was made, where, how long it took). Snakemake decides what runs, in which
order, what is up to date and what to rerun after an interruption; this module only does the
work of one step, prints a progress line with the elapsed time and the log path, and turns a
:class:`StageError` into a message without a traceback.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab import (
    ROOT,
    build,
    cachedir,
    collect,
    experiment,
    inspect,
    kconfig,
    series,
    source,
    toolchain,
    vm,
)
from lab.command import HOST_TOOLS, StageError, require_tools, run
from lab.parse import PARSERS, keyvalue


def log_path(*parts: str) -> Path:
    """A stage's log file under the cache's ``logs/``."""
    path = cachedir.sub("logs").joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def stage(name: str, target: str, log: Path | None) -> Iterator[dict[str, Any]]:
    """Print start and end lines with elapsed time and log; record ``seconds`` in the stamp."""
    stamp: dict[str, Any] = {}
    start = time.monotonic()
    where = f" (log: {log})" if log else ""
    print(f"[{time.strftime('%H:%M:%S')}] >> {name:<8} {target}{where}", file=sys.stderr,
          flush=True)
    try:
        yield stamp
    except StageError:
        print(f"[{time.strftime('%H:%M:%S')}] !! {name:<8} {target} failed after "
              f"{time.monotonic() - start:.1f} s{where}", file=sys.stderr, flush=True)
        raise
    stamp["seconds"] = round(time.monotonic() - start, 1)
    print(f"[{time.strftime('%H:%M:%S')}] ok {name:<8} {target} {stamp['seconds']} s",
          file=sys.stderr, flush=True)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write a stamp atomically (Snakemake sees it only when complete)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.rename(path)


def read_json(path: str | Path) -> dict[str, Any]:
    """Read a stamp written by an earlier stage."""
    return json.loads(Path(path).read_text())


def load_experiment(a: argparse.Namespace) -> experiment.Experiment:
    """The experiment with make's ACCEL=, REPS= and VARIANTS= applied."""
    only = [v for v in (a.variants or "").split(",") if v] or None
    return experiment.load(Path(a.experiment), accel=a.accel or None,
                           reps=int(a.reps) if a.reps else None, only=only)


def cmd_root(a: argparse.Namespace) -> None:
    """Create (once) the toolchain root; record its packages and compiler versions."""
    log = log_path("root.log")
    with stage("root", toolchain.root_key(), log) as stamp:
        require_tools(["mmdebstrap", "bwrap"])
        root = toolchain.create_root(log)
        stamp.update(root=str(root), key=root.name, suite=toolchain.SUITE,
                     packages=toolchain.root_packages(root),
                     tools=toolchain.tool_versions(root))
    write_json(Path(a.out), stamp)


def cmd_source(a: argparse.Namespace) -> None:
    """Fetch, verify and unpack the base tree (or take KERNEL_SRC / KERNEL_TARBALL)."""
    log = log_path("source.log")
    with stage("source", "base tree", log) as stamp:
        require_tools(["git", "apt-get", "dpkg-deb"])
        stamp.update(source.prepare(log).to_json())
    write_json(Path(a.out), stamp)


def cmd_series(a: argparse.Namespace) -> None:
    """Make the commit of one tree (baseline or patched) of the chapter's series."""
    exp = load_experiment(a)
    base = read_json(a.base)
    ser = series.load(exp.series)
    with stage("series", f"{exp.chapter}/{a.tree}", None) as stamp:
        commit = series.commit_for(Path(base["tree"]), base["commit"], ser, a.tree)
        stamp.update(tree=a.tree, commit=commit, mode=ser.mode, sha256=ser.sha256,
                     patches={str(p.relative_to(ser.directory)): source.sha256_file(p)
                              for p in ser.files},
                     steps=[{"patch": str(p.relative_to(ser.directory)), "reverse": rev}
                            for p, rev in ser.steps(a.tree)])
    write_json(Path(a.out), stamp)


def _box(a: argparse.Namespace, variant: experiment.Variant) -> build.Toolbox:
    return build.Toolbox(Path(read_json(a.root)["root"]), Path(read_json(a.base)["tree"]),
                         variant.compiler)


def cmd_config(a: argparse.Namespace) -> None:
    """Configure one variant: start config + fragments, olddefconfig, check nothing dropped."""
    exp = load_experiment(a)
    v = exp.all_variants[a.variant]
    log = log_path(exp.chapter, f"config-{v.name}.log")
    log.unlink(missing_ok=True)
    with stage("config", f"{exp.chapter}/{v.name}", log):
        frags = [kconfig.fragment_path(f) for f in v.fragments]
        build.configure(_box(a, v), read_json(a.series)["commit"], exp.kconfig_start, frags,
                        Path(a.out), log)


def cmd_build(a: argparse.Namespace) -> None:
    """Build one variant's kernel; keep image, vmlinux, System.map, modules and log in the
    stamp's directory (in the cache's work tree, where Snakemake sees the image)."""
    exp = load_experiment(a)
    v = exp.all_variants[a.variant]
    log = log_path(exp.chapter, f"build-{v.name}.log")
    log.unlink(missing_ok=True)
    commit = read_json(a.series)["commit"]
    config = Path(a.config)
    dest = Path(a.out).resolve().parent
    with stage("build", f"{exp.chapter}/{v.name}", log) as stamp:
        info = build.build(_box(a, v), commit, config, read_json(a.base)["commit"], dest, log)
        stamp.update(info, artifacts=str(dest), variant=v.name)
    stamp["build_seconds"] = info["seconds"]
    write_json(Path(a.out), stamp)


def cmd_inspect(a: argparse.Namespace) -> None:
    """When the experiment has ``inspect: {callers: [...]}``, record the out-of-line copies of
    every function the series forces inline and the callers' probe region (:mod:`lab.inspect`),
    read from the variant's vmlinux with the root's binutils. Image sizes are the build's."""
    exp = load_experiment(a)
    v = exp.variants[a.variant]
    built = read_json(a.build)
    artifacts = Path(built["artifacts"])
    root = Path(read_json(a.root)["root"])
    callers = list((exp.raw.get("inspect") or {}).get("callers", []))
    with stage("inspect", f"{exp.chapter}/{v.name}", None) as stamp:
        stamp.update(variant=v.name, build=exp.build_name(v.name))
        if callers:
            def tool(*argv: str) -> str:
                return run(toolchain.in_root(root, list(argv), {artifacts: build.BUILD}),
                           what=f"{argv[0]} of {v.name}'s vmlinux").stdout
            ser = series.load(exp.series)
            functions = inspect.forced_inline([p for p in ser.patches
                                               if p not in ser.instrument])
            listings = {c: tool("objdump", "-d", "--no-show-raw-insn", f"--disassemble={c}",
                                f"{build.BUILD}/vmlinux") for c in callers}
            stamp["evidence"] = inspect.evidence(
                tool("nm", "-S", "--defined-only", f"{build.BUILD}/vmlinux"), listings, functions)
    write_json(Path(a.out), stamp)


def cmd_bench(a: argparse.Namespace) -> None:
    """Compile the chapter's guest programs inside the toolchain root (gcc-15 -O2)."""
    exp = load_experiment(a)
    root = Path(read_json(a.root)["root"])
    out = Path(a.out).parent / "bin"
    log = log_path(exp.chapter, "bench.log")
    log.unlink(missing_ok=True)
    with stage("bench", exp.chapter, log) as stamp:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        built = {}
        for rel in exp.bench:
            src = ROOT / "bench" / rel
            if not src.is_file():
                raise StageError(f"{exp.path}: bench program {src} does not exist")
            name = Path(rel).stem
            argv = ["gcc-15", "-O2", "-Wall", "-Werror", "-o", f"/build/{name}", f"/src/{rel}"]
            run(toolchain.in_root(root, argv, {ROOT / "bench": "/src", out: "/build"}),
                log=log, what=f"compile {rel}")
            built[name] = source.sha256_file(out / name)
        stamp.update(bin=str(out), programs=built)
    write_json(Path(a.out), stamp)


def cmd_accel(a: argparse.Namespace) -> None:
    """Resolve each requested accelerator once per run (the KVM probe happens here).

    The probe boots the first variant's kernel, so it runs after that build."""
    exp = load_experiment(a)
    with stage("accel", exp.chapter, None) as stamp:
        require_tools([vm.QEMU])
        chosen = {}
        for req in sorted({v.accel for v in exp.variants.values()}):
            used, why = vm.choose_accel(
                req, cachedir.sub("probe"), timeout=a.probe_timeout,
                kernel=Path(read_json(a.build)["artifacts"]) / "bzImage",
                root=Path(read_json(a.root)["root"]))
            chosen[req] = {"used": used, "why": why}
            print(f"           accel {req} -> {used}: {why}", file=sys.stderr)
        stamp["accel"] = chosen
    write_json(Path(a.out), stamp)


def _job_dir(job: Path, exp: experiment.Experiment, bench_bin: Path,
             modules: Path | None = None) -> None:
    """Fill a boot's job directory: guest init, workloads, programs and, when the variant's
    build made modules, its ``modules_install`` tree as ``modules/`` (a workload insmods from
    it, so the guest always loads the modules of the kernel it booted)."""
    shutil.rmtree(job, ignore_errors=True)
    (job / "workloads").mkdir(parents=True)
    shutil.copyfile(ROOT / "bench" / "guest-init.sh", job / "guest-init.sh")
    shutil.copytree(bench_bin, job / "bin")
    if modules is not None and modules.is_dir():
        shutil.copytree(modules, job / "modules", symlinks=True)
    names = []
    for w in exp.workloads:
        src = ROOT / "bench" / w["script"]
        if not src.is_file():
            raise StageError(f"{exp.path}: workload script {src} does not exist")
        shutil.copyfile(src, job / "workloads" / f"{w['name']}.sh")
        names.append(w["name"])
    (job / "job.env").write_text(
        f"KB_WORKLOADS='{' '.join(names)}'\nKB_WORKLOAD_TIMEOUT={int(exp.workload_timeout)}\n"
    )


def cmd_run(a: argparse.Namespace) -> None:
    """Boot one variant once, run the workloads, verify and parse what the guest wrote."""
    exp = load_experiment(a)
    v = exp.variants[a.variant]
    label = f"{exp.chapter}/{v.name}/rep{a.rep}"
    final = Path(a.out).resolve().parent
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "out").mkdir(parents=True)
    console = tmp / "console.log"
    accel = read_json(a.accel_json)["accel"][v.accel]
    with stage("run", label, console) as stamp:
        artifacts = Path(read_json(a.build)["artifacts"])
        _job_dir(tmp / "job", exp, Path(read_json(a.bench)["bin"]), artifacts / "modules")
        cmdline = vm.kernel_cmdline(v.cmdline)
        argv = vm.qemu_command(artifacts / "bzImage",
                               Path(read_json(a.root)["root"]), tmp / "job", tmp / "out",
                               accel["used"], v.machine, cmdline)
        result = vm.boot(argv, console, exp.boot_timeout, label)
        sums = vm.verify_output(tmp / "out", label)
        status = dict(line.split() for line in (tmp / "out" / "status.txt").read_text()
                      .splitlines() if line.strip())
        rows = {}
        for w in exp.workloads:
            if status.get(w["name"]) != "0":
                rc = status.get(w["name"], "missing")
                err = (tmp / "out" / f"{w['name']}.err").read_text(errors="replace")[-500:]
                raise StageError(f"{label}: workload {w['name']} exited {rc}"
                                 f"{' (killed by its timeout)' if rc == '137' else ''}; "
                                 f"stderr: {err.strip() or '(empty)'}; console: {console}")
            text = (tmp / "out" / f"{w['name']}.out").read_text(errors="replace")
            rows[w["name"]] = PARSERS[w.get("parser", "keyvalue")](text, f"{label}/{w['name']}")
        guest = keyvalue.fields((tmp / "out" / "guest-info.txt").read_text())
        stamp.update(variant=v.name, rep=int(a.rep), accel=accel["used"],
                     accel_requested=v.accel, accel_why=accel["why"], qemu_argv=argv,
                     cmdline=cmdline, boot_to_result_seconds=result.seconds_to_done,
                     guest=guest, output_sha256=sums, rows=rows)
    shutil.rmtree(tmp / "job")
    write_json(tmp / "run.json", {**stamp, "dir": str(final)})
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)


def in_repo(path: Path) -> str:
    """A path relative to the repository when it is inside it (experiments, series), else as
    given (a reader's own experiment file)."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def portable(arg: str) -> str:
    """Write the cache location as ``$KB_CACHE`` so a manifest names no one's home."""
    return arg.replace(str(cachedir.cache_root()), "$KB_CACHE")


def cmd_collect(a: argparse.Namespace) -> None:
    """Assemble the run directory and rename it into data/runs/<chapter>/<run-id>."""
    exp = load_experiment(a)
    records = [read_json(p) for p in a.runs]
    builds = {read_json(p)["variant"]: read_json(p) for p in a.builds}
    inspected = {read_json(p)["variant"]: read_json(p) for p in a.inspected}
    root = read_json(a.root)
    base = read_json(a.base)
    serieses = {read_json(p)["tree"]: read_json(p) for p in a.series}
    with stage("collect", f"{exp.chapter}/{a.run_id}", None) as stamp:
        variants = {}
        for name, v in exp.variants.items():
            reps = [r for r in records if r["variant"] == name]
            built = builds[exp.build_name(name)]
            variants[name] = {
                "tree": v.tree, "commit": built["commit"], "compiler": v.compiler,
                "config_sha256": built["config_sha256"], "boot": v.boot,
                "fragments": list(v.fragments), "kconfig_start": exp.kconfig_start,
                "cmdline": reps[0]["cmdline"] if reps else vm.kernel_cmdline(v.cmdline),
                "accel_requested": v.accel,
                "accel_used": sorted({r["accel"] for r in reps}),
                "accel_why": sorted({r["accel_why"] for r in reps}),
                "machine": {"memory": v.machine.memory, "cpus": v.machine.cpus,
                            "sockets": v.machine.sockets, "threads": v.machine.threads,
                            "numa": list(v.machine.numa), "cpu_model": v.machine.cpu_model},
                "guest": reps[0]["guest"] if reps else {},
                "qemu_argv": [portable(x) for x in reps[0]["qemu_argv"]] if reps else [],
                "boot_to_result_seconds": [r["boot_to_result_seconds"] for r in reps],
                "build": {"variant": exp.build_name(name),
                          **{k: built[k] for k in ("bzImage_bytes", "vmlinux_bytes",
                                                   "targets", "build_seconds")}},
                "inspect": {k: val for k, val in inspected[name].items()
                            if k == "evidence"},
            }
        ser = next(iter(serieses.values()))
        manifest = {
            "chapter": exp.chapter, "run_id": a.run_id,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "book": collect.book_commit(),
            "experiment": {"file": in_repo(exp.path), "sha256": exp.sha256,
                           "reps": exp.reps, "workloads": list(exp.workloads)},
            "base": {k: base[k] for k in ("version", "origin", "sha256", "commit")},
            "series": {"dir": in_repo(exp.series), "mode": ser["mode"],
                       "sha256": ser["sha256"], "patches": ser["patches"],
                       "commits": {t: s["commit"] for t, s in serieses.items()},
                       "trees": {t: s["steps"] for t, s in serieses.items()}},
            "compilers": root["tools"], "qemu": vm.qemu_version(),
            "host": collect.host_info(),
            "toolchain_root": {"key": root["key"], "suite": root["suite"],
                               "packages": root["packages"]},
            "variants": variants,
        }
        configs = {name: Path(b["artifacts"]) / ".config" for name, b in builds.items()}
        cited = {(w["name"], metric): cid for w in exp.workloads
                 for metric, cid in (w.get("cited") or {}).items()}
        final = collect.publish(exp.chapter, a.run_id,
                                lambda tmp: collect.assemble(tmp, exp.chapter, records,
                                                             configs, manifest, cited))
        stamp.update(run_dir=str(final), rows=sum(
            len(p) for r in records for p in r["rows"].values()))
    pending = pending_file(exp.chapter)
    if pending.is_file() and read_json(pending).get("run_id") == a.run_id:
        pending.unlink()
    write_json(Path(a.out), stamp)
    print(f"run published: {final}", file=sys.stderr)


def pending_file(chapter: str) -> Path:
    """Records the run-id of a chapter's unfinished run, so a rerun resumes it (one per
    chapter and results directory, so the tests' runs never take over a reader's)."""
    where = hashlib.sha256(str(collect.runs_dir().resolve()).encode()).hexdigest()[:8]
    return cachedir.sub("work", "pending") / f"{chapter}-{where}.json"


def cmd_run_id(a: argparse.Namespace) -> None:
    """Check the host tools, then print the run-id to use: the unfinished one with the same
    parameters (so a rerun resumes it), or a new one."""
    exp = load_experiment(a)
    require_tools(list(HOST_TOOLS))
    params = {"experiment": exp.sha256, "variants": sorted(exp.variants), "reps": exp.reps,
              "accel": a.accel or "", "runs_dir": str(collect.runs_dir())}
    pending = pending_file(exp.chapter)
    if pending.is_file():
        old = read_json(pending)
        if old.get("params") == params and not (collect.runs_dir() / exp.chapter /
                                                old["run_id"]).exists():
            print(old["run_id"])
            return
    first = collect.new_run_id("-".join(sorted({v.accel for v in exp.variants.values()})))
    run_id, n = first, 1
    while (collect.runs_dir() / exp.chapter / run_id).exists():
        n += 1
        run_id = f"{first}-{n}"
    write_json(pending, {"run_id": run_id, "params": params})
    print(run_id)


def cmd_summary(a: argparse.Namespace) -> None:
    """Print each stage's time for this run (cached stages show their original time)."""
    work = cachedir.cache_root() / "work"
    exp = load_experiment(a)
    rows = [("root", work / "toolchain" / "root.json"),
            ("source", work / "source" / "base.json")]
    for name in exp.builds:
        rows.append((f"build {name}", work / "build" / exp.chapter / name / "build.json"))
    for name in exp.variants:
        rows.append((f"inspect {name}", work / "inspect" / exp.chapter / f"{name}.json"))
    for name in exp.booted:
        for rep in range(1, exp.reps + 1):
            rows.append((f"run {name} rep{rep}",
                         work / "runs" / exp.chapter / a.run_id / name / f"rep{rep}" / "run.json"))
    rows.append(("collect", work / "collected" / exp.chapter / f"{a.run_id}.json"))
    print(f"\nsummary of {exp.chapter} run {a.run_id}:")
    for label, path in rows:
        if not path.is_file():
            print(f"  {label:<24} not done")
            continue
        data = read_json(path)
        extra = ""
        if "boot_to_result_seconds" in data:
            extra = f"  (boot-to-result {data['boot_to_result_seconds']} s, {data['accel']})"
        if "run_dir" in data:
            extra = f"  -> {data['run_dir']}"
        print(f"  {label:<24} {data.get('seconds', '?'):>7} s{extra}")


def main(argv: list[str] | None = None) -> int:
    """Parse the stage and its arguments, run it, and map a StageError to exit status 1."""
    p = argparse.ArgumentParser(prog="python -m lab.pipeline", description=__doc__)
    sub = p.add_subparsers(dest="stage", required=True)

    def add(name: str, fn: Callable[[argparse.Namespace], None], *args: str,
            exp: bool = True) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=fn.__doc__)
        sp.set_defaults(fn=fn)
        if exp:
            sp.add_argument("--experiment", required=True)
            sp.add_argument("--accel", default="")
            sp.add_argument("--reps", default="")
            sp.add_argument("--variants", default="")
        for arg in args:
            if arg.startswith("--"):
                sp.add_argument(arg, required=True)
            else:
                sp.add_argument(arg)
        return sp

    add("root", cmd_root, "--out", exp=False)
    add("source", cmd_source, "--out", exp=False)
    add("series", cmd_series, "--base", "--tree", "--out")
    add("config", cmd_config, "--base", "--root", "--series", "--variant", "--out")
    add("build", cmd_build, "--base", "--root", "--series", "--config", "--variant", "--out")
    add("bench", cmd_bench, "--root", "--out")
    acc = add("accel", cmd_accel, "--root", "--build", "--out")
    acc.add_argument("--probe-timeout", type=float, default=vm.probe_timeout())
    add("run", cmd_run, "--root", "--build", "--bench", "--accel-json", "--variant", "--rep",
        "--out")
    add("inspect", cmd_inspect, "--root", "--build", "--variant", "--out")
    col = add("collect", cmd_collect, "--root", "--base", "--run-id", "--out")
    for many in ("--builds", "--series", "--inspected"):
        col.add_argument(many, nargs="+", required=True)
    col.add_argument("--runs", nargs="*", default=[])  # none when no variant boots
    add("run-id", cmd_run_id)
    add("summary", cmd_summary, "--run-id")
    a = p.parse_args(argv)
    try:
        a.fn(a)
    except StageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
