"""The workqueue chapter's judge: throughput per affinity scope, pooled enqueue latency, the
in-tree mode against the later postings' tables, and the clock-free mechanism rows of
``pool->lock``.

Throughput is declared in ``chapter.yaml`` (``cited:`` per metric and variant);
the latency measure pools several scopes per boot, which an experiment file cannot declare, so
it lives here beside the judge that uses it. The in-tree mode (``wait`` workload, every timed
boot) is what the v3 and v5 cover letters measured; their tables are judged from it, with our
patched kernel carrying v1's code. The mechanism rows count, under LOCK_STAT, how often
``&pool->lock`` was taken and how often it was contended in each shared scope: counts, not
times, so the guest's unstable clock does not enter them. They stand beside the cited throughput
gain of their scope.
"""

from __future__ import annotations

import pandas as pd

from lab.analysis import quantities, runs, scorecard, stats, verdicts

CONTENDED = ("cache_shard", "cache", "numa", "system")
"""The affinity scopes whose pools several CPUs share here, as in the author's latency claim."""

LATENCY = {
    ("enqueue-latency", row): scorecard.Measure(
        workload="batch",
        metrics=tuple(f"{scope}.enq_{row}_ns" for scope in CONTENDED),
        unit="ns", margin="time", exclude_zeros=True)
    for row in ("p50", "p99")
}
"""The cited enqueue latencies are for the contended scopes, not per scope: ours are, per boot,
the mean over those scopes of the batch mode's percentile, with 0 ns (a stopped guest clock)
excluded."""


SCOPES = ("cpu", "smt", *CONTENDED)
"""Every affinity scope, in the order the postings' tables list them."""

IN_TREE = {"v3": "v3's (wake_q)", "v5": "v5's (wake_up_process() after the unlock)"}
"""The postings whose cover letters give in-tree-mode tables, and which code they measured."""

IN_TREE_MEASURES = {
    (f"in-tree-throughput-{version}", scope): scorecard.Measure(
        workload="wait", metrics=(f"{scope}.items_per_sec",), unit="items/s", margin="time")
    for version in IN_TREE for scope in SCOPES
}
"""The v3 and v5 throughput tables come from ``test_workqueue`` as 7.2.13 has it (one item
queued and waited for at a time), which our ``wait`` workload runs in every timed boot."""

V1_ONLY = ("; our patched kernel carries v1's code, the table {code}, so this compares the "
           "direction of the same idea, not the same patch")
"""Appended to the reason of every row judged against a later posting's table."""


def compare(cited: pd.DataFrame, chapter_runs: list[runs.Run]) -> pd.DataFrame:
    """The chapter's comparison (:func:`lab.analysis.scorecard.compare`): throughput per scope,
    enqueue latency p50 and p99, and the in-tree mode's throughput against the v3 and v5
    tables, each variant pooled from every run made like its newest one
    (:func:`lab.analysis.runs.pooled_per_variant`)."""
    chosen = runs.pooled_per_variant(chapter_runs)
    cited = cited[cited["chapter"] == "workqueue"]
    units = {f"{scope}.items_per_sec": ("items/s", "time") for scope in SCOPES}
    measures = (scorecard.measures_from_experiment(chosen, cited, units) | LATENCY
                | IN_TREE_MEASURES)
    return scorecard.compare(cited, chosen, measures)


def in_tree_p95_rows(cited: pd.DataFrame, chapter_runs: list[runs.Run]) -> pd.DataFrame:
    """The v3 and v5 "p95 drop" columns: a written change of the in-tree mode's p95 enqueue
    latency with no before/after beside it, judged from our ``wait`` workload's p95 per boot."""
    chosen = runs.pooled_per_variant(chapter_runs)
    if not all(r in chosen for r in scorecard.ROLES):
        return pd.DataFrame(columns=scorecard.DERIVED_COLUMNS)
    manifest = chosen["patched"].manifest
    rows = []
    for version, code in IN_TREE.items():
        for scope in SCOPES:
            entry = cited[cited["id"]
                          == f"workqueue-{version}-p95-{scope.replace('_', '-')}-change"]
            if entry.empty:
                continue
            values = {r: runs.metric_values(chosen[r], r, "wait", f"{scope}.p95_ns")
                      for r in scorecard.ROLES}
            cited_change = scorecard.cited_change(entry)
            limits = runs.environment_limits(manifest, "patched")
            try:
                verdict = verdicts.judge_boots(
                    values["baseline"], values["patched"],
                    lambda c, cited_change=cited_change, limits=limits: verdicts.judge_change(
                        c, cited_change, limits, units=("ns", "ns"),
                        margin=quantities.MARGINS["time"]),
                    flagged=tuple(runs.clock_flags(chosen[r], r) for r in scorecard.ROLES))
            except ValueError as exc:  # a missing boot or a stopped clock's 0
                verdict = verdicts.Verdict(runs.UNJUDGED, str(exc).split(". Fix:")[0])
            change = verdict.change
            rows.append(scorecard.judged_row(
                entry["id"].iloc[0], change.describe() if change else "—", verdict,
                [chosen[r].run_id for r in scorecard.ROLES], runs.environment_summary(manifest),
                reason=verdict.reason + V1_ONLY.format(code=code)))
    return pd.DataFrame(rows, columns=scorecard.DERIVED_COLUMNS)


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


MECHANISMS = {
    "contentions": (-1, True, "our reading that a shorter hold of pool->lock means fewer "
                              "contended acquisitions, behind the cited {gain} throughput at "
                              "{scope} (the author's explanation is the hold time)"),
    "acquisitions": (0, True, "our reading of 2/2's changelog (only the wakeup leaves the "
                              "section, pool->lock is taken as often as before)"),
}
"""The LOCK_STAT counts judged per contended scope: the direction predicted (0 for none),
whether the prediction is the book's own reading rather than the author's explanation (both
are: the author explains his gain by a shorter hold time, not by these counts), and what it
stands for."""


def mechanism_rows(cited: pd.DataFrame, chapter_runs: list[runs.Run]) -> pd.DataFrame:
    """Two rows per contended scope, beside its cited throughput gain, from LOCK_STAT's counts
    of ``&pool->lock``, both rows of our own reading: the contentions, judged for the direction
    our reading of the author's shorter hold time implies (fewer contentions where he saw more
    items/s), and the acquisitions: the book reads 2/2's changelog as moving the wakeup out of
    the section, not a lock operation, so they should not change beyond the margin; they are
    also what a change of the contentions must be read against."""
    chosen = runs.pooled_per_variant(chapter_runs)
    by_id = cited.set_index("id")
    rows = []
    for scope in CONTENDED:
        gain = f"workqueue-tput-{scope.replace('_', '-')}-gain"
        if gain not in by_id.index:
            continue
        entry = by_id.loc[gain]
        for field, (sign, ours, claim) in MECHANISMS.items():
            counts = lock_counts(chapter_runs, scope, field)
            if counts is None:
                continue
            change = stats.percent_change(counts["baseline"], counts["patched"])
            manifest = chosen[LOCKSTAT["patched"]].manifest
            limits = runs.environment_limits(manifest)
            said = claim.format(gain=entry["value"], scope=scope)
            verdict = verdicts.judge_boots(
                counts["baseline"], counts["patched"],
                lambda c, sign=sign, ours=ours, limits=limits, said=said: (
                    verdicts.judge_direction(c, sign, said, limits,
                                             margin=quantities.MARGINS["count"], ours=ours)))
            change = verdict.change
            rows.append(scorecard.judged_row(
                f"workqueue-mechanism-{scope.replace('_', '-')}-{field}",
                f"{field} {change.describe()}", verdict,
                [chosen[v].run_id for v in LOCKSTAT.values()],
                runs.environment_summary(manifest) + ", CONFIG_LOCK_STAT",
                chapter="workqueue", table=entry["table"], row=entry["row"],
                column=f"mechanism: pool->lock {field} (LOCK_STAT count)",
                cited=entry["cited"] if sign else claim))
    return pd.DataFrame(rows, columns=scorecard.DERIVED_COLUMNS)


def judge(cited: pd.DataFrame, chapter_runs: list[runs.Run]) -> pd.DataFrame:
    """Scorecard rows (:data:`lab.analysis.scorecard.DERIVED_COLUMNS`) of every cited entry
    compared,
    the derived change rows of the latency pairs, the in-tree mode's rows against the v3 and
    v5 tables, and the mechanism rows."""
    cited = cited[cited["chapter"] == "workqueue"]
    compared = scorecard.verdict_rows(compare(cited, chapter_runs), cited)
    for version, code in IN_TREE.items():
        later = compared["id"].str.startswith(f"workqueue-{version}-")
        compared.loc[later, "reason"] += V1_ONLY.format(code=code)
    frames = (compared, in_tree_p95_rows(cited, chapter_runs),
              mechanism_rows(cited, chapter_runs))
    return pd.concat([f for f in frames if len(f)] or [compared], ignore_index=True)
