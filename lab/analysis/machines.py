"""The same kernel booted on two machines: how far a host moves the numbers.

Runs of different machines are never pooled (:func:`lab.analysis.runs.same_machine`), but where
one image ran the same workload script on two hosts (a second session's machine, a cluster's
node), the pair shows what of a result belongs to the kernel and what to the host: under
``-icount`` the guest counts instructions, so a count should not move at all; a time under TCG
moves with the host's speed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lab.analysis.runs import Run, machine_label, same_machine

COLUMNS = ["chapter", "variant", "workload", "metric", "machine_a", "run_a", "median_a",
           "machine_b", "run_b", "median_b", "ratio"]


def _image(run: Run, variant: str) -> str | None:
    return run.manifest["variants"].get(variant, {}).get("build", {}).get("bzImage_sha256")


def pairs(runs: list[Run]) -> list[tuple[str, Run, Run]]:
    """(variant, older run, newer run) for each variant whose image two machines booted: the
    newest run of each machine, the image's sha256 equal. ``runs`` oldest first."""
    out = []
    variants = sorted({v for r in runs for v in r.manifest.get("variants", {})})
    for variant in variants:
        newest: list[Run] = []  # one run per machine, the newest of each
        for run in runs:
            if _image(run, variant) and len(run.results) and \
                    (run.results["variant"] == variant).any():
                newest = [r for r in newest if not same_machine(r.manifest, run.manifest)]
                newest.append(run)
        for i, a in enumerate(newest):
            out += [(variant, a, b) for b in newest[i + 1:]
                    if _image(a, variant) == _image(b, variant)]
    return out


def across(runs: list[Run]) -> pd.DataFrame:
    """One row per (variant, workload, metric) that one image measured on two machines with
    the same workload script (by its sha256): each machine's median over its boots and their
    ratio (b / a)."""
    rows = []
    for variant, a, b in pairs(runs):
        scripts = [r.manifest["experiment"].get("scripts", {}) for r in (a, b)]
        same = {w for w, sha in scripts[0].items() if scripts[1].get(w) == sha}
        medians = []
        for run in (a, b):
            # "ran" is bookkeeping of runs before per-variant workloads, not a measurement
            mine = run.results[(run.results["variant"] == variant)
                               & run.results["workload"].isin(same)
                               & (run.results["metric"] != "ran")]
            medians.append(mine.groupby(["workload", "metric"])["value"].median())
        both = pd.concat(medians, axis=1, keys=["a", "b"]).dropna()
        for (workload, metric), m in both.iterrows():
            ratio = m["b"] / m["a"] if m["a"] else (1.0 if m["b"] == 0 else np.inf)
            rows.append([a.chapter, variant, workload, metric,
                         machine_label(a.manifest.get("host", {})), a.run_id, m["a"],
                         machine_label(b.manifest.get("host", {})), b.run_id, m["b"], ratio])
    return pd.DataFrame(rows, columns=COLUMNS)


def summary(frame: pd.DataFrame, within: float = 0.05) -> pd.DataFrame:
    """Per (chapter, variant, workload) of :func:`across`: the metrics compared, how many
    moved by no more than ``within`` (relative), how many not at all, and the median and
    largest move."""
    if frame.empty:
        return pd.DataFrame(columns=["chapter", "variant", "workload", "machines", "metrics",
                                     "unchanged", "within", "median move", "largest move"])
    move = (frame["ratio"] - 1).abs()
    grouped = frame.assign(move=move, same=frame["median_a"] == frame["median_b"],
                           close=move <= within,
                           machines=frame["machine_a"] + " → " + frame["machine_b"])
    out = grouped.groupby(["chapter", "variant", "workload", "machines"]).agg(
        metrics=("metric", "size"), unchanged=("same", "sum"), within=("close", "sum"),
        median_move=("move", "median"), largest_move=("move", "max")).reset_index()
    return out.rename(columns={"median_move": "median move", "largest_move": "largest move"})
