"""The workqueue chapter's judge: throughput per affinity scope, pooled enqueue latency, and the
clock-free mechanism rows of ``pool->lock``.

Throughput is declared in ``chapter.yaml`` (``cited:`` per metric and variant);
the latency measure pools several scopes per boot, which an experiment file cannot declare, so
it lives here beside the judge that uses it. The mechanism rows count, under LOCK_STAT, how
often ``&pool->lock`` was contended in each shared scope: a count, not a time, so the guest's
unstable clock does not enter it. They stand beside the cited throughput gain of their scope.
"""

from __future__ import annotations

import pandas as pd

from lab import runs, scorecard, stats, verdicts

CONTENDED = ("cache_shard", "cache", "numa", "system")
"""The affinity scopes whose pools several CPUs share here, as in the author's latency claim."""

LATENCY = {
    ("enqueue-latency", row): scorecard.Measure(
        workload="batch",
        metrics=tuple(f"{scope}.enq_{row}_ns" for scope in CONTENDED),
        exclude_zeros=True)
    for row in ("p50", "p99")
}
"""The cited enqueue latencies are for the contended scopes, not per scope: ours are, per boot,
the mean over those scopes of the batch mode's percentile, with 0 ns (a stopped guest clock)
excluded."""


def compare(cited: pd.DataFrame, chapter_runs: list[runs.Run]) -> pd.DataFrame:
    """The chapter's comparison (:func:`lab.scorecard.compare`): throughput per scope,
    enqueue latency p50 and p99, each variant pooled from every run made like its newest one
    (:func:`lab.runs.pooled_per_variant`)."""
    chosen = runs.pooled_per_variant(chapter_runs)
    cited = cited[cited["chapter"] == "workqueue"]
    measures = scorecard.measures_from_experiment(chosen, cited) | LATENCY
    return scorecard.compare(cited, chosen, measures)


LOCKSTAT = {"baseline": "lockstat-baseline", "patched": "lockstat-patched"}
"""The LOCK_STAT variants (never timed) of each kernel."""


def lock_counts(chapter_runs: list[runs.Run], scope: str,
                field: str) -> dict[str, pd.Series] | None:
    """Per kernel, one LOCK_STAT field of ``&pool->lock`` per boot during the batched run of
    ``scope`` (e.g. ``contentions``, ``acquisitions``), or None without both variants."""
    chosen = runs.pooled_per_variant(chapter_runs)
    if not all(v in chosen for v in LOCKSTAT.values()):
        return None
    return {role: runs.metric_values(chosen[v], v, "batch", f"{scope}.pool_lock.{field}")
            for role, v in LOCKSTAT.items()}


def mechanism_rows(cited: pd.DataFrame, chapter_runs: list[runs.Run]) -> pd.DataFrame:
    """One row per contended scope: the change of ``&pool->lock`` contentions under LOCK_STAT,
    judged for the direction the cited throughput gain of that scope implies (fewer contentions
    where the author saw more items/s), with the acquisitions beside it as the control (the
    same work queued in both kernels)."""
    chosen = runs.pooled_per_variant(chapter_runs)
    by_id = cited.set_index("id")
    rows = []
    for scope in CONTENDED:
        gain = f"workqueue-tput-{scope.replace('_', '-')}-gain"
        counts = lock_counts(chapter_runs, scope, "contentions")
        taken = lock_counts(chapter_runs, scope, "acquisitions")
        if gain not in by_id.index or counts is None or taken is None:
            continue
        entry = by_id.loc[gain]
        contended = stats.percent_change(counts["baseline"], counts["patched"])
        acquired = stats.percent_change(taken["baseline"], taken["patched"])
        manifest = chosen[LOCKSTAT["patched"]].manifest
        claim = (f"fewer contended acquisitions of pool->lock, the mechanism behind the "
                 f"cited {entry['value']} throughput at {scope}")
        verdict = verdicts.judge_direction(contended, -1, claim,
                                           runs.environment_limits(manifest))
        rows.append({
            "id": f"workqueue-mechanism-{scope.replace('_', '-')}-contentions",
            "ours": f"contentions {contended.describe()}; acquisitions (control) "
                    f"{acquired.describe()}",
            **verdict.columns(),
            "run_id": " + ".join(dict.fromkeys(chosen[v].run_id for v in LOCKSTAT.values())),
            "environment": runs.environment_summary(manifest) + ", CONFIG_LOCK_STAT",
            "chapter": "workqueue", "table": entry["table"], "row": entry["row"],
            "column": "mechanism: pool->lock contentions (LOCK_STAT count)",
            "cited": entry["cited"]})
    return pd.DataFrame(rows, columns=scorecard.DERIVED_COLUMNS)


def judge(cited: pd.DataFrame, chapter_runs: list[runs.Run]) -> pd.DataFrame:
    """Scorecard rows (:data:`lab.scorecard.DERIVED_COLUMNS`) of every cited entry compared,
    the derived change rows of the latency pairs, and the mechanism rows."""
    cited = cited[cited["chapter"] == "workqueue"]
    compared = scorecard.verdict_rows(compare(cited, chapter_runs), cited)
    mechanism = mechanism_rows(cited, chapter_runs)
    return pd.concat([f for f in (compared, mechanism) if len(f)] or [compared],
                     ignore_index=True)
