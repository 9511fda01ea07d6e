"""The sched-ext chapter's analysis: residence outliers per million, where the deferred work
ran, how long it waited, the static call sites, and the verdicts.

The cited numbers are counts of local-DSQ residences above 128 us and 256 us over the author's
five 120 s sets (about 1.2 M tasks each). Our boots time a different number of residences, so
the comparable quantity is the rate per million timed residences, per boot; the cited counts
themselves are absolute values of the author's machine. ``chapter.yaml`` declares that mapping
(``cited:``), and :func:`lab.scorecard.compare` judges the change.

The kernels differ only when ``schedule_deferred()`` falls back for the runqueue of another
CPU. The parser counts those remote fallbacks per boot, and the judge hands each outlier claim
the most the patch could move it (:class:`lab.verdicts.Bound`): if every remote fallback had
spared one outlier, the rate would fall by remote fallbacks / outliers of the baseline.

Beside the claims stand one mechanism row and two checks:

* mechanism: how long the deferred work waited, from the first ``schedule_deferred()`` on a
  runqueue to the handler (emulated time: a direction, the latency the patch trades), bounded
  by the share of the averaged fallbacks that were remote;
* check: where ``deferred_irq_workfn()`` ran: how many of its runs were off the CPU that owns
  the runqueue (the patch queues the work there, so it is 0 by construction);
* check: the image's call sites of ``irq_work_queue()`` and ``irq_work_queue_on()`` in
  ``schedule_deferred()`` (deterministic: the patch's whole static footprint).
"""

from __future__ import annotations

import pandas as pd

from lab import runs, scorecard, verdicts

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


UNITS = {f"over_{t}us_per_million": ("outliers per million residences", "count")
         for t in (128, 256)}
"""Our outlier metrics, their unit and margin kind."""
SETS = ("the author's sets were of equal size (about 1.2 M tasks each, the mail), so that the "
        "change of his outlier counts is the change of the outlier rate")
"""What reading the cited counts as a rate assumes."""


def bounds(cited: pd.DataFrame, chosen: Chosen) -> dict[tuple[str, str], verdicts.Bound]:
    """Per cited outlier row, the most the patch could move its rate: the baseline's remote
    fallbacks over its outliers above the threshold, as if each remote fallback had spared one
    outlier (the kernels differ in nothing else)."""
    if ROLES["baseline"] not in chosen:
        return {}
    base = per_boot(chosen, ("fallback_remote", "over_128us", "over_256us"))
    base = base[base["kernel"] == "baseline"]
    found = {}
    for row in cited[cited["variant"] == "baseline"].itertuples():
        threshold = row.id.removesuffix("-baseline").rsplit("-", 1)[1]  # e.g. 128us
        outliers = base[f"over_{threshold}"].mean()
        remote = base["fallback_remote"].mean()
        found[(row.table, row.row)] = verdicts.Bound(
            100 * remote / outliers,
            f"{remote:.1f} remote fallbacks against {outliers:,.0f} residences over {threshold} "
            "per baseline boot, as if each remote fallback had spared one")
    return found


def compare(cited: pd.DataFrame, chosen: Chosen) -> pd.DataFrame:
    """The chapter's comparison (:func:`lab.scorecard.compare`) of the per-million outlier
    rates, each with the bound of :func:`bounds`."""
    cited = cited[cited["chapter"] == CHAPTER]
    measures = scorecard.measures_from_experiment(chosen, cited, UNITS, assume=SETS)
    return scorecard.compare(cited, chosen, measures, bounds(cited, chosen))


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
    """The call-site check: baseline calls only irq_work_queue() from schedule_deferred(),
    patched only irq_work_queue_on(). True by construction of the two trees: it shows the
    builds differ by the patch, not that the patch helps."""
    got = {(r.kernel, r.target): int(r.in_schedule_deferred) for r in sites.itertuples()}
    want = {("baseline", "irq_work_queue"): 1, ("baseline", "irq_work_queue_on"): 0,
            ("patched", "irq_work_queue"): 0, ("patched", "irq_work_queue_on"): 1}
    ours = "; ".join(f"{k}: {got.get((k, 'irq_work_queue'), 0)} x irq_work_queue, "
                     f"{got.get((k, 'irq_work_queue_on'), 0)} x irq_work_queue_on"
                     for k in ROLES)
    if got == want:
        return ours, verdicts.check(True, "the images differ exactly by the patch: "
                                    "schedule_deferred() calls irq_work_queue() in the baseline "
                                    "and irq_work_queue_on() in the patched kernel "
                                    "(deterministic, any machine)")
    return ours, verdicts.check(False, f"expected {want}, the images have {got}: the builds "
                                "do not differ by the patch alone")


def mechanism_rows(cited: pd.DataFrame, chosen: Chosen) -> pd.DataFrame:
    """The mechanism row and the two checks (module docstring), beside the cited >128us
    change."""
    by_id = cited[cited["chapter"] == CHAPTER].set_index("id")
    if CHANGES[0] not in by_id.index or not all(v in chosen for v in ROLES.values()):
        return pd.DataFrame(columns=scorecard.DERIVED_COLUMNS)
    entry = by_id.loc[CHANGES[0]]
    manifest = chosen[ROLES["patched"]].manifest
    limits = runs.environment_limits(manifest, ROLES["patched"])
    run_id = " + ".join(dict.fromkeys(chosen[v].run_id for v in ROLES.values()))
    rows = []

    boots = per_boot(chosen, ("ran_on_owner", "ran_elsewhere", "deferral_avg_ns",
                              "deferral_max_ns", "fallback_local", "fallback_remote"))
    boots["owner_share"] = boots["ran_on_owner"] / (boots["ran_on_owner"] +
                                                    boots["ran_elsewhere"])
    by_kernel = {k: part for k, part in boots.groupby("kernel")}
    patched_share = by_kernel["patched"]["owner_share"]
    # counts, not a share's interval: the patched side is 1 in every boot by construction
    ours = "; ".join(
        f"{k}: handler ran off the owner's CPU {part['ran_elsewhere'].sum():,.0f} of "
        f"{(part['ran_on_owner'] + part['ran_elsewhere']).sum():,.0f} times"
        for k, part in by_kernel.items())
    rows.append(_row(entry, "sched-ext-check-owner-cpu",
                     "check: deferred_irq_workfn() off the runqueue's own CPU (runs)", ours,
                     verdicts.check(bool((patched_share == 1).all()),
                                    "the patched kernel queues the deferred work on the owner's "
                                    "CPU, so every patched run there is true by construction: it "
                                    "shows the patch is in the kernel, not that it helps"),
                     run_id, manifest))

    waited = boots.dropna(subset=["deferral_avg_ns"])
    delay = {k: part.set_index("rep")["deferral_avg_ns"] for k, part in waited.groupby("kernel")}
    if len(delay) == 2:
        base = waited[waited["kernel"] == "baseline"]
        remote = base["fallback_remote"] / (base["fallback_local"] + base["fallback_remote"])
        # The kernels differ only for remote fallbacks: even if each of their waits had been
        # the boot's longest and the patch made it vanish, the mean moves by at most this.
        most = (100 * remote * base["deferral_max_ns"] / base["deferral_avg_ns"]).mean()
        bound = verdicts.Bound(most, f"{100 * remote.mean():.2f} % of the averaged fallbacks "
                                     "were remote, each at most the boot's longest wait")
        verdict = verdicts.judge_boots(
            delay["baseline"], delay["patched"],
            lambda c: verdicts.judge_direction(
                c, -1, "a shorter wait for the deferred work, the latency the patch trades",
                limits, margin=verdicts.MARGINS["time"], bound=bound),
            flagged=tuple(runs.clock_flags(chosen[v], v) for v in ROLES.values()))
        rows.append(_row(entry, "sched-ext-mechanism-deferral-delay",
                         "mechanism: schedule_deferred() to handler, mean (emulated time)",
                         verdict.change.describe() if verdict.change else "—", verdict,
                         run_id, manifest))

    sites = call_sites(chosen)
    if len(sites):
        ours, verdict = _static_verdict(sites)
        rows.append(_row(entry, "sched-ext-check-call-sites",
                         "check: irq_work call sites in schedule_deferred() (image)",
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
