"""The parse stage: one boot's (or one comparison's) raw output into rows, with the parsers of
:mod:`lab.parse` and the chapter's own; :mod:`lab.pipeline.reparse` parses committed runs with
the same function."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lab import chapters
from lab.command import StageError
from lab.parse import keyvalue, units
from lab.pipeline.stamps import BootStamp, CompareStamp, ParsedStamp, load_experiment, stage


def parse_boot(chapter: str, workloads: list[dict[str, Any]], outputs: dict[str, str],
               guest_info: str, label: str) -> dict[str, Any]:
    """Rows of one boot from its raw outputs (workload name -> text) with the chapter's
    parsers; shared by the parse stage and :mod:`lab.pipeline.reparse`, so both parse alike."""
    parsers = chapters.get(chapter).parsers()
    rows = {}
    for w in workloads:
        name = w.get("parser", "keyvalue")
        if name not in parsers:
            raise StageError(f"{label}: no parser {name!r} (chapter {chapter} has "
                             f"{sorted(parsers)})")
        rows[w["name"]] = parsers[name](outputs[w["name"]], f"{label}/{w['name']}")
        if w.get("units"):  # the runs before units were declared have none
            units.check(rows[w["name"]], w["units"], f"{label}/{w['name']}")
    return {"rows": rows, "guest": keyvalue.fields(guest_info)}


def cmd_parse(a: argparse.Namespace) -> None:
    """Turn one boot's raw output (or one comparison's, ``--boot`` naming its directory) into
    rows with the chapter's parsers."""
    exp = load_experiment(a)
    boot_dir = Path(a.boot)
    if (boot_dir / "compare.json").is_file():
        compared = CompareStamp.read(boot_dir / "compare.json")
        comp = exp.compare(compared.workload, compared.variant)
        label = f"{exp.name}/{comp.patched}/rep{compared.rep}"
        with stage("parse", f"{label}/{comp.workload}", None):
            text = (boot_dir / f"{comp.workload}.out").read_text(errors="replace")
            stamp = ParsedStamp(
                **parse_boot(exp.name, [{"name": comp.workload, "parser": comp.parser,
                                         "units": dict(comp.units)}],
                             {comp.workload: text}, "", label),
                variant=comp.patched, rep=compared.rep, compare=str(boot_dir))
        stamp.write(a.out)
        return
    booted = BootStamp.read(boot_dir / "boot.json")
    label = f"{exp.name}/{booted.variant}/rep{booted.rep}"
    with stage("parse", label, None):
        out = boot_dir / "out"
        ran = exp.workloads_of(booted.variant)
        texts = {w["name"]: (out / f"{w['name']}.out").read_text(errors="replace")
                 for w in ran}
        stamp = ParsedStamp(**parse_boot(exp.name, ran, texts,
                                         (out / "guest-info.txt").read_text(), label),
                            variant=booted.variant, rep=booted.rep, boot=str(boot_dir))
    stamp.write(a.out)
