"""The sched-ext chapter's analysis: residence outliers per million, the residences the
deferred handler ended and its wait, by the origin of the fallback that queued it, where the
handler ran, the static call sites, and the verdicts.

The cited numbers are counts of local-DSQ residences above 128 us and 256 us over the author's
five 120 s runs (about 1.2 M tasks per set of five, the mail). Our boots time a different number
of residences, so the comparable quantity is the rate per million timed residences, per boot,
under an assumption the rows state (:data:`SETS`); the cited counts themselves are absolute
values of the author's machine. ``chapter.yaml`` declares that mapping (``cited:``), and
:func:`lab.analysis.scorecard.compare` judges the change.

The kernels differ only when ``schedule_deferred()`` falls back for the runqueue of another CPU
(origin "remote"; "local" when the runqueue is the caller's). The judge hands each outlier claim
the most the patch could move it directly (:class:`lab.analysis.quantities.Bound`, :func:`bounds`).

Beside the claims stand two mechanism rows, both the author's explanation and both timed in
the guest's clock (TCG: a direction only), and three checks:

* mechanism: how long the residences lasted that the handler of a remote fallback ended (the
  "IMMED reenqueue latency" the message says improves);
* mechanism: the wait from a remote fallback to its handler (IPI delivery against the calling
  CPU re-enabling interrupts);
* check: the changed path ran: at least :data:`PATH_RUNS` remote fallbacks in every baseline boot;
* check: where ``deferred_irq_workfn()`` ran: off the runqueue's CPU only in the baseline (the
  patch queues the work there, so the patched kernel's 0 holds by construction);
* check: the image's call sites of ``irq_work_queue()`` and ``irq_work_queue_on()`` in
  ``schedule_deferred()`` (deterministic: the patch's whole static footprint).
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd

from lab.analysis import quantities, runs, scorecard, verdicts

CHAPTER = "sched-ext"
ROLES = {"baseline": "baseline", "patched": "patched"}
"""Cited role -> variant of chapter.yaml."""
CHANGES = ("sched-ext-outliers-128us-change", "sched-ext-outliers-256us-change")
"""The cited changes the mechanism rows stand beside."""
WORKLOAD = "residence"
FALLBACK = "schedule_deferred"
TARGETS = ("irq_work_queue", "irq_work_queue_on")
ORIGINS = ("remote", "local")
"""A fallback's origin: the runqueue of another CPU than the caller's, or the caller's own."""
PATH_RUNS = 1000
"""Remote fallbacks each baseline boot must hold for the run to exercise the patch (issue 22)."""


Chosen = dict[str, runs.Run]
"""Each kernel's boots pooled from every run made like its newest one
(:func:`lab.analysis.runs.pooled_per_variant`): what every function below reads, pooled once."""


UNITS = {f"over_{t}us_per_million": ("outliers per million residences", "count")
         for t in (128, 256)}
"""Our outlier metrics, their unit and margin kind."""
SETS = ("the author's two sets (5 x 120 s per kernel, about 1.2 M tasks per set, the mail) were "
        "of equal size and his counts are over every local-DSQ residence, so that the change "
        "of his outlier counts is the change of the outlier rate; and that our scheduler's "
        "remote IMMED dispatches (scx_remote) stand for his scx_qmap -I -F 50")
"""What reading the cited counts as a rate assumes."""
SIZE = ("in this guest the mean wait for the deferred handler alone lies between 128 and 256 "
        "us in both kernels, so nearly every residence a remote fallback's handler ends lands "
        "above 128 us and many above 256 us whichever kernel runs; the outlier rates are set by "
        "how often scx_remote takes that path and by the emulator's speed, not by the cost the "
        "patch trades; only the counts of the changed path and where its work runs compare")
"""Why the outlier claims cannot be judged here (review of 2026-11-26, N4)."""
TCG = ("under TCG the baseline's wait is the calling vCPU finishing its interrupts-off path at "
       "emulated speed and the patched kernel's is QEMU's cross-vCPU interrupt delivery; neither "
       "is the hardware cost the patch trades (a direction, if any, is the emulator's)")
"""Why the timed mechanism rows cannot be judged here (review of 2026-11-26, N5)."""


def bounds(cited: pd.DataFrame, chosen: Chosen) -> dict[tuple[str, str], quantities.Bound]:
    """Per cited outlier row, the most the patch could move its rate directly: the baseline's
    remote fallbacks, or the residences their handlers ended if more, over its residences above
    the threshold, as if each had spared one outlier (the kernels differ in nothing else)."""
    if ROLES["baseline"] not in chosen:
        return {}
    base = per_boot(chosen, ("fallbacks.remote", "handler_residences.remote", "over_128us",
                             "over_256us"))
    base = base[base["kernel"] == "baseline"]
    found = {}
    for row in cited[cited["variant"] == "baseline"].itertuples():
        threshold = row.id.removesuffix("-baseline").rsplit("-", 1)[1]  # e.g. 128us
        outliers = base[f"over_{threshold}"].mean()
        remote = base["fallbacks.remote"].mean()
        ended = base["handler_residences.remote"].mean()
        # a rate falls by 100 % at most, however many calls could each spare an outlier
        found[(row.table, row.row)] = quantities.Bound(
            min(100.0, 100 * max(remote, ended) / outliers),
            f"{remote:,.0f} remote fallbacks, whose handlers ended {ended:,.0f} residences, "
            f"against {outliers:,.0f} residences over {threshold} per baseline boot, as if each "
            "had spared one")
    return found


def compare(cited: pd.DataFrame, chosen: Chosen) -> pd.DataFrame:
    """The chapter's comparison (:func:`lab.analysis.scorecard.compare`) of the per-million outlier
    rates, each with the bound of :func:`bounds`."""
    cited = cited[cited["chapter"] == CHAPTER]
    measures = scorecard.measures_from_experiment(chosen, cited, UNITS, assume=SETS,
                                                  cannot_show=SIZE)
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


def _workload_rows(chosen: Chosen) -> Iterator[tuple[str, pd.DataFrame]]:
    """Per cited role with a chosen run, that variant's rows of the residence workload."""
    for role, variant in ROLES.items():
        if variant in chosen:
            res = chosen[variant].results
            yield role, res[(res["variant"] == variant) & (res["workload"] == WORKLOAD)]


def histogram(chosen: Chosen, name: str) -> pd.DataFrame:
    """Bucket counts of a residence.bt histogram (``residence_us``, or one origin's
    ``deferral_us.<origin>`` or ``handler_residence_us.<origin>``) per boot: ``kernel``,
    ``rep``, ``low_us`` (the power-of-two bucket's lower bound), ``count`` and ``share`` of the
    boot's total."""
    rows = []
    for role, res in _workload_rows(chosen):
        for row in res[res["metric"].str.startswith(f"{name}.hist.")].itertuples():
            rows.append({"kernel": role, "rep": int(row.rep),
                         "low_us": float(row.metric.rsplit(".hist.", 1)[1]),
                         "count": float(row.value)})
    frame = pd.DataFrame(rows, columns=["kernel", "rep", "low_us", "count"])
    frame["share"] = frame["count"] / frame.groupby(["kernel", "rep"])["count"].transform("sum")
    return frame.sort_values(["kernel", "rep", "low_us"], ignore_index=True)


def ccdf(hist: pd.DataFrame) -> pd.DataFrame:
    """Per boot, the share of its values at or above each bucket's lower bound (a CCDF read at
    the power-of-two bounds, which include the author's 128 and 256 us)."""
    frame = hist.sort_values(["kernel", "rep", "low_us"], ascending=[True, True, False])
    frame = frame.assign(at_or_above=frame.groupby(["kernel", "rep"])["share"].cumsum())
    return frame.sort_values(["kernel", "rep", "low_us"], ignore_index=True)


def callers(chosen: Chosen) -> pd.DataFrame:
    """Fallbacks per boot by calling function and origin, each kernel's mean: ``kernel``,
    ``origin``, ``caller``, ``per_boot``."""
    rows = []
    for role, res in _workload_rows(chosen):
        boots = res["rep"].nunique()
        part = res[res["metric"].str.startswith("fallback_callers.")]
        for metric, values in part.groupby("metric")["value"]:
            _, origin, caller = metric.split(".", 2)
            rows.append({"kernel": role, "origin": origin, "caller": caller,
                         "per_boot": float(values.sum()) / boots})
    return pd.DataFrame(rows, columns=["kernel", "origin", "caller", "per_boot"]).sort_values(
        ["kernel", "origin", "per_boot"], ascending=[True, True, False], ignore_index=True)


def call_sites(chosen: Chosen) -> pd.DataFrame:
    """Per built kernel: call sites of each irq_work entry point in ``schedule_deferred()``
    and in the whole image (lab.pipeline.inspect's ``call_sites``)."""
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
    """A scorecard row beside the cited ``entry``."""
    return scorecard.judged_row(rid, ours, verdict, [run_id], runs.environment_summary(manifest),
                                chapter=CHAPTER, table=entry["table"], row=entry["row"],
                                column=column, cited=entry["cited"])


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
    """The mechanism rows and the checks (module docstring), beside the cited >128us change."""
    by_id = cited[cited["chapter"] == CHAPTER].set_index("id")
    if CHANGES[0] not in by_id.index or not all(v in chosen for v in ROLES.values()):
        return pd.DataFrame(columns=scorecard.DERIVED_COLUMNS)
    entry = by_id.loc[CHANGES[0]]
    manifest = chosen[ROLES["patched"]].manifest
    limits = runs.environment_limits(manifest, ROLES["patched"])
    run_id = " + ".join(dict.fromkeys(chosen[v].run_id for v in ROLES.values()))
    rows = []

    boots = per_boot(chosen, ("ran_on_owner", "ran_elsewhere", "fallbacks.remote",
                              "fallbacks.local"))
    by_kernel = {k: part for k, part in boots.groupby("kernel")}
    base = by_kernel["baseline"]
    ours = (f"remote fallbacks per baseline boot: {base['fallbacks.remote'].min():,.0f} to "
            f"{base['fallbacks.remote'].max():,.0f} (local: {base['fallbacks.local'].min():,.0f} "
            f"to {base['fallbacks.local'].max():,.0f})")
    rows.append(_row(entry, "sched-ext-check-remote-path-ran",
                     f"check: schedule_deferred() for another CPU's runqueue, at least "
                     f"{PATH_RUNS:,} per baseline boot", ours,
                     verdicts.check(bool((base["fallbacks.remote"] >= PATH_RUNS).all()),
                                    "the only call the kernels run differently ran in every "
                                    "baseline boot often enough to time it (a count of the "
                                    "design, not evidence for the patch)"),
                     run_id, manifest))

    # counts, not a share's interval: the patched side is 0 in every boot by construction
    ours = "; ".join(
        f"{k}: handler ran off the runqueue's CPU {part['ran_elsewhere'].sum():,.0f} of "
        f"{(part['ran_on_owner'] + part['ran_elsewhere']).sum():,.0f} times"
        for k, part in by_kernel.items())
    rows.append(_row(entry, "sched-ext-check-owner-cpu",
                     "check: deferred_irq_workfn() off the runqueue's own CPU (runs)", ours,
                     verdicts.check(bool((by_kernel["patched"]["ran_elsewhere"] == 0).all()
                                         and (base["ran_elsewhere"] > 0).all()),
                                    "the baseline ran the handler of remote fallbacks on the "
                                    "calling CPU and the patched kernel never off the owner's: "
                                    "true by construction of irq_work_queue_on(), it shows the "
                                    "patch is in the kernel, not that it helps"),
                     run_id, manifest))

    flagged = tuple(runs.clock_flags(chosen[v], v) for v in ROLES.values())
    for rid, metric, column, claim in (
            ("sched-ext-mechanism-handler-residence", "handler_residence_avg_ns.remote",
             "mechanism: residence the handler of a remote fallback ended, mean (guest clock)",
             "residences that the deferred reenqueue of a remote local DSQ ends are shorter, "
             "the IMMED reenqueue latency the message says improves"),
            ("sched-ext-mechanism-deferral-remote", "deferral_avg_ns.remote",
             "mechanism: remote fallback to its handler, mean wait (guest clock)",
             "the deferred work of a remote fallback runs sooner: an IPI to the owner instead "
             "of waiting for the calling CPU to re-enable interrupts")):
        values = per_boot(chosen, (metric,)).dropna(subset=[metric])
        by = {k: part.set_index("rep")[metric] for k, part in values.groupby("kernel")}
        if len(by) != 2:
            continue
        verdict = verdicts.judge_boots(
            by["baseline"], by["patched"],
            lambda c, claim=claim: verdicts.judge_direction(
                c, -1, claim, limits, margin=quantities.MARGINS["time"], cannot_show=TCG),
            flagged=flagged)
        rows.append(_row(entry, rid, column,
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
    """Scorecard rows (:data:`lab.analysis.scorecard.DERIVED_COLUMNS`): each cited entry compared
    (the
    counts as absolute values, the changes judged from the per-million rates) and the
    mechanism rows."""
    cited = cited[cited["chapter"] == CHAPTER]
    chosen = runs.pooled_per_variant(chapter_runs)
    compared = scorecard.verdict_rows(compare(cited, chosen), cited)
    mechanism = mechanism_rows(cited, chosen)
    return pd.concat([f for f in (compared, mechanism) if len(f)] or [compared],
                     ignore_index=True)
