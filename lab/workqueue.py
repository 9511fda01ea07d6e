"""The workqueue chapter's judge: throughput per affinity scope and pooled enqueue latency.

Throughput is declared in ``experiments/workqueue.yaml`` (``cited:`` per metric and variant);
the latency measure pools several scopes per boot, which an experiment file cannot declare, so
it lives here beside the judge that uses it.
"""

from __future__ import annotations

import pandas as pd

from lab import runs, scorecard

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
    enqueue latency p50 and p99, each variant from the newest run that has it."""
    chosen = runs.latest_per_variant(chapter_runs)
    cited = cited[cited["chapter"] == "workqueue"]
    measures = scorecard.measures_from_experiment(chosen, cited) | LATENCY
    return scorecard.compare(cited, chosen, measures)


def judge(cited: pd.DataFrame, chapter_runs: list[runs.Run]) -> pd.DataFrame:
    """Scorecard rows (:data:`lab.runs.MEASURED_COLUMNS`) of every cited entry compared."""
    return scorecard.verdict_rows(compare(cited, chapter_runs), cited)
