"""Command-line entry of every pipeline stage; the Snakefile's rules call it.

``python -m lab.pipeline <stage> ...`` runs one stage for one target and writes one small
JSON stamp (what was made and where). Snakemake decides what runs, in which order, what is up
to date and what to rerun after an interruption, and records each job's log and time
(``log:``, ``benchmark:``); each stage's module does the work of one step and prints a progress
line; this module turns a :class:`StageError` into a message without a traceback.

Three commands are for people rather than rules: ``reproduce`` (``make reproduce``) drives
Snakemake, ``reparse`` (``make reparse``) derives a new run from a committed run's raw output
with today's parsers, and ``check`` validates chapters without building anything.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from lab import chapters
from lab.command import StageError
from lab.pipeline import (
    accel,
    boot,
    build,
    crosslayer,
    experiment,
    guestlayer,
    inspect,
    parse,
    publish,
    reparse,
    reproduce,
    series,
    source,
    toolchain,
    tools,
)


def cmd_check(a: argparse.Namespace) -> None:
    """Validate chapters (schema, files, parsers, cited ids, guest locks) and print what each
    would run."""
    for ch in chapters.select(a.chapters) if a.chapters else chapters.discover().values():
        if ch.has_experiment:
            exp = experiment.load(ch)
            if guestlayer.requested(ch):
                guestlayer.load_lock(ch, toolchain.root_key())
            if exp.cross:
                crosslayer.locks(toolchain.root_key())
            print(f"{ch.name}: {len(exp.variants)} variants, {len(exp.builds)} builds, "
                  f"{len(exp.boots)} boots")
        else:
            print(f"{ch.name}: no experiment yet")


def main(argv: list[str] | None = None) -> int:
    """Parse the stage and its arguments, run it, and map a StageError to exit status 1."""
    p = argparse.ArgumentParser(prog="python -m lab.pipeline", description=__doc__)
    sub = p.add_subparsers(dest="stage", required=True)

    def add(name: str, fn: Callable[[argparse.Namespace], None], *args: str,
            exp: bool = True, job: bool = False, log: bool = True) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=fn.__doc__)
        sp.set_defaults(fn=fn)
        if job:
            # a kernel stage: what it reads of the chapter (experiment.KernelJob, as JSON)
            sp.add_argument("--job", required=True, type=experiment.KernelJob.from_json)
        elif exp:
            sp.add_argument("--chapter", required=True)
            sp.add_argument("--accel", default="")
            sp.add_argument("--reps", default="")
            sp.add_argument("--variants", default="")
        if log:
            sp.add_argument("--log", required=True)
        for arg in args:
            sp.add_argument(arg, required=True)
        return sp

    add("root", toolchain.cmd_root, "--out", exp=False)
    add("source", source.cmd_source, "--out", exp=False)
    add("cross", crosslayer.cmd_cross, "--root", "--out", exp=False)
    add("series", series.cmd_series, "--base", "--tree", "--out", job=True, log=False)
    add("config", build.cmd_config, "--base", "--root", "--series", "--out", job=True)
    add("build", build.cmd_build, "--base", "--root", "--series", "--config", "--out", job=True)
    add("tools", tools.cmd_tools, "--root", "--base", "--series", "--build", "--out", job=True)
    acc = add("accel", boot.cmd_accel, "--root", "--out", log=False)
    acc.add_argument("--build", nargs="?", default="")  # none when no variant boots
    acc.add_argument("--probe-timeout", type=float, default=accel.probe_timeout())
    add("layer", guestlayer.cmd_layer, "--root", "--out")
    bt = add("boot", boot.cmd_boot, "--layer", "--build", "--tools", "--accel-json",
             "--variant", "--rep", "--out", log=False)
    bt.add_argument("--cross", default="")  # the cross stage's stamp, for an Arm variant
    add("compare", boot.cmd_compare, "--root", "--baseline-boot", "--patched-boot",
        "--baseline-build", "--patched-build", "--workload", "--variant", "--rep", "--out",
        log=False)
    add("parse", parse.cmd_parse, "--boot", "--out", log=False)
    add("inspect", inspect.cmd_inspect, "--root", "--build", "--out", job=True, log=False)
    pub = add("publish", publish.cmd_publish, "--root", "--layer", "--base", "--out", log=False)
    for many in ("--builds", "--build-times", "--setup-times", "--series", "--inspected",
                 "--tools"):
        pub.add_argument(many, nargs="+", required=True)
    pub.add_argument("--parsed", nargs="*", default=[])  # none when no variant boots
    pub.add_argument("--cross", default="")  # the cross stage's stamp, when a variant is cross
    pub.add_argument("--compared", nargs="*", default=[])  # parsed comparisons (compare:)
    chk = add("check", cmd_check, exp=False, log=False)
    chk.add_argument("--chapters", default="")
    reproduce.add_arguments(add("reproduce", reproduce.main, exp=False, log=False))
    reparse.add_arguments(add("reparse", reparse.main, exp=False, log=False))
    a = p.parse_args(argv)
    try:
        status = a.fn(a)
    except StageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
