"""The sched-ext chapter's analysis: residence outliers per million, where the deferred work
ran, how long it waited, the static call sites, and the verdicts.

The cited numbers are counts of local-DSQ residences above 128 us and 256 us over the author's
five 120 s sets (about 1.2 M tasks each). Our boots time a different number of residences, so
the comparable quantity is the rate per million timed residences, per boot; the cited counts
themselves are absolute values of the author's machine. ``chapter.yaml`` declares that mapping
(``cited:``), and :func:`lab.scorecard.compare` judges the change.

Three mechanism rows stand beside the cited changes:

* where ``deferred_irq_workfn()`` ran: the share of its runs on the CPU that owns the runqueue
  (the patch queues the work there, so the share should rise to 1);
* how long the deferred work waited, from the first ``schedule_deferred()`` on a runqueue to
  the handler (emulated time: a direction, the latency the patch trades);
* the image's call sites of ``irq_work_queue()`` and ``irq_work_queue_on()`` in
  ``schedule_deferred()`` (deterministic: the patch's whole static footprint).
"""

from __future__ import annotations

import pandas as pd

from lab import runs, scorecard, stats, verdicts

CHAPTER = "sched-ext"
ROLES = {"baseline": "baseline", "patched": "patched"}
"""Cited role -> variant of chapter.yaml."""
CHANGES = ("sched-ext-outliers-128us-change", "sched-ext-outliers-256us-change")
"""The cited changes the mechanism rows stand beside."""
WORKLOAD = "residence"
FALLBACK = "schedule_deferred"
TARGETS = ("irq_work_queue", "irq_work_queue_on")


Chosen = dict[str, runs.Run]
"""Each kernel's boots pooled from every run made like its newest one
(:func:`lab.runs.pooled_per_variant`): what every function below reads, pooled once."""


def compare(cited: pd.DataFrame, chosen: Chosen) -> pd.DataFrame:
    """The chapter's comparison (:func:`lab.scorecard.compare`) of the per-million outlier
    rates."""
    cited = cited[cited["chapter"] == CHAPTER]
    return scorecard.compare(cited, chosen, scorecard.measures_from_experiment(chosen, cited))


def per_boot(chosen: Chosen, metrics: tuple[str, ...]) -> pd.DataFrame:
    """One row per boot of each kernel: ``kernel``, ``run_id``, ``rep`` and the metrics (a
    counter bpftrace never incremented is 0, see parse.py)."""
    frames = []
    for role, variant in ROLES.items():
        if variant not in chosen:
            continue
        columns = {m: runs.metric_values(chosen[variant], variant, WORKLOAD, m) for m in metrics}
        frame = pd.DataFrame(columns)
        frame.insert(0, "kernel", role)
        frame.insert(1, "run_id", chosen[variant].run_id)
        frames.append(frame.reset_index(names="rep"))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def histogram(chosen: Chosen, name: str) -> pd.DataFrame:
    """Bucket counts of a residence.bt histogram (``residence_us`` or ``deferral_us``), summed
    over each kernel's boots: ``kernel``, ``low_us`` (the power-of-two bucket's lower bound),
    ``count`` and ``share`` of the kernel's total."""
    rows = []
    for role, variant in ROLES.items():
        if variant not in chosen:
            continue
        res = chosen[variant].results
        part = res[(res["variant"] == variant) & (res["workload"] == WORKLOAD)
                   & res["metric"].str.startswith(f"{name}.hist.")]
        for metric, values in part.groupby("metric")["value"]:
            rows.append({"kernel": role, "low_us": float(metric.rsplit(".hist.", 1)[1]),
                         "count": float(values.sum())})
    frame = pd.DataFrame(rows, columns=["kernel", "low_us", "count"])
    frame["share"] = frame["count"] / frame.groupby("kernel")["count"].transform("sum")
    return frame.sort_values(["kernel", "low_us"], ignore_index=True)


def call_sites(chosen: Chosen) -> pd.DataFrame:
    """Per built kernel: call sites of each irq_work entry point in ``schedule_deferred()``
    and in the whole image (lab.inspect's ``call_sites``)."""
    rows = []
    for role, variant in ROLES.items():
        if variant not in chosen:
            continue
        ev = chosen[variant].manifest["variants"][variant].get("inspect", {}).get("evidence", {})
        sites = ev.get("call_sites")
        if not sites:
            continue
        for target in TARGETS:
            callers = sites.get(target, {})
            rows.append({"kernel": role, "target": target,
                         "in_schedule_deferred": callers.get(FALLBACK, 0),
                         "in_image": sum(callers.values()), "functions": len(callers)})
    return pd.DataFrame(rows, columns=["kernel", "target", "in_schedule_deferred", "in_image",
                                       "functions"])


def _row(entry: pd.Series, rid: str, column: str, ours: str, verdict: verdicts.Verdict,
         run_id: str, manifest: dict) -> dict:
    return {"id": rid, "ours": ours, **verdict.columns(), "run_id": run_id,
            "environment": runs.environment_summary(manifest),
            "chapter": CHAPTER, "table": entry["table"], "row": entry["row"],
            "column": column, "cited": entry["cited"]}


def _static_verdict(sites: pd.DataFrame) -> tuple[str, verdicts.Verdict]:
    """The call-site row: baseline calls only irq_work_queue() from schedule_deferred(),
    patched only irq_work_queue_on(). A count, not a sample: either it is so or it is not."""
    got = {(r.kernel, r.target): int(r.in_schedule_deferred) for r in sites.itertuples()}
    want = {("baseline", "irq_work_queue"): 1, ("baseline", "irq_work_queue_on"): 0,
            ("patched", "irq_work_queue"): 0, ("patched", "irq_work_queue_on"): 1}
    ours = "; ".join(f"{k}: {got.get((k, 'irq_work_queue'), 0)} x irq_work_queue, "
                     f"{got.get((k, 'irq_work_queue_on'), 0)} x irq_work_queue_on"
                     for k in ROLES)
    if got == want:
        return ours, verdicts.Verdict(verdicts.DIRECTION, "the images differ exactly by the "
                                      "patch: schedule_deferred() calls irq_work_queue() in the "
                                      "baseline and irq_work_queue_on() in the patched kernel "
                                      "(deterministic, any machine)")
    return ours, verdicts.Verdict(verdicts.CONTRADICTED, f"expected {want}, the images have "
                                  f"{got}: the builds do not differ by the patch alone")


def mechanism_rows(cited: pd.DataFrame, chosen: Chosen) -> pd.DataFrame:
    """The three mechanism rows (module docstring), each beside the cited >128us change."""
    by_id = cited[cited["chapter"] == CHAPTER].set_index("id")
    if CHANGES[0] not in by_id.index or not all(v in chosen for v in ROLES.values()):
        return pd.DataFrame(columns=scorecard.DERIVED_COLUMNS)
    entry = by_id.loc[CHANGES[0]]
    manifest = chosen[ROLES["patched"]].manifest
    limits = runs.environment_limits(manifest)
    run_id = " + ".join(dict.fromkeys(chosen[v].run_id for v in ROLES.values()))
    rows = []

    boots = per_boot(chosen, ("ran_on_owner", "ran_elsewhere", "deferral_avg_ns"))
    boots["owner_share"] = boots["ran_on_owner"] / (boots["ran_on_owner"] +
                                                    boots["ran_elsewhere"])
    by_kernel = {k: part for k, part in boots.groupby("kernel")}
    owner = stats.percent_change(by_kernel["baseline"]["owner_share"],
                                 by_kernel["patched"]["owner_share"])
    ours = (f"share on the owner's CPU: baseline {by_kernel['baseline']['owner_share'].mean():.1%}"
            f", patched {by_kernel['patched']['owner_share'].mean():.1%}; change "
            f"{owner.describe()}")
    rows.append(_row(entry, "sched-ext-mechanism-owner-cpu",
                     "mechanism: deferred_irq_workfn() on the runqueue's own CPU (share)", ours,
                     verdicts.judge_direction(owner, +1, "that the deferred work now runs on "
                                              "the CPU that owns the runqueue", limits),
                     run_id, manifest))

    waited = boots.dropna(subset=["deferral_avg_ns"])
    delay = {k: part["deferral_avg_ns"] for k, part in waited.groupby("kernel")}
    if len(delay) == 2:
        change = stats.percent_change(delay["baseline"], delay["patched"])
        rows.append(_row(entry, "sched-ext-mechanism-deferral-delay",
                         "mechanism: schedule_deferred() to handler, mean (emulated time)",
                         f"{change.describe()}",
                         verdicts.judge_direction(change, -1, "a shorter wait for the deferred "
                                                  "work, the latency the patch trades",
                                                  limits), run_id, manifest))

    sites = call_sites(chosen)
    if len(sites):
        ours, verdict = _static_verdict(sites)
        rows.append(_row(entry, "sched-ext-mechanism-call-sites",
                         "mechanism: irq_work call sites in schedule_deferred() (image)",
                         ours, verdict, run_id, manifest))
    return pd.DataFrame(rows, columns=scorecard.DERIVED_COLUMNS)


def judge(cited: pd.DataFrame, chapter_runs: list[runs.Run]) -> pd.DataFrame:
    """Scorecard rows (:data:`lab.scorecard.DERIVED_COLUMNS`): each cited entry compared (the
    counts as absolute values, the changes judged from the per-million rates) and the
    mechanism rows."""
    cited = cited[cited["chapter"] == CHAPTER]
    chosen = runs.pooled_per_variant(chapter_runs)
    compared = scorecard.verdict_rows(compare(cited, chosen), cited)
    mechanism = mechanism_rows(cited, chosen)
    return pd.concat([f for f in (compared, mechanism) if len(f)] or [compared],
                     ignore_index=True)
