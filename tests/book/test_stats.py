"""Percent change with a bootstrap interval, and the verdict rule applied to it."""

from __future__ import annotations

import numpy as np
import pytest

from lab import stats


def test_no_spread_gives_a_point_interval() -> None:
    change = stats.percent_change([100, 100], [110, 110])
    assert (change.percent, change.low, change.high) == pytest.approx((10.0, 10.0, 10.0))
    assert (change.n_baseline, change.n_patched) == (2, 2)
    assert change.describe() == "+10.0 % (95 % CI +10.0 to +10.0 %)"


def test_two_values_per_kernel_give_the_known_percentile_interval() -> None:
    # Resampled means: baseline 1, 2, 3 and patched 2, 4, 6 with chances 1/4, 1/2, 1/4. The
    # extreme ratios 2/3 and 6/1 each occur with chance 1/16 > 2.5 %, so they are the bounds.
    change = stats.percent_change([1, 3], [2, 6])
    assert change.percent == pytest.approx(100.0)
    assert (change.low, change.high) == pytest.approx((100 * (2 / 3 - 1), 500.0))


def test_the_interval_covers_a_known_shift_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(1)
    trials, covered = 200, 0
    for trial in range(trials):
        baseline = rng.normal(100, 5, 20)
        patched = rng.normal(110, 5, 20)
        change = stats.percent_change(baseline, patched, n_resamples=2000, seed=trial)
        covered += change.low <= 10.0 <= change.high
    assert 0.88 <= covered / trials <= 0.99


def test_the_same_data_gives_the_same_interval() -> None:
    rng = np.random.default_rng(2)
    baseline, patched = rng.normal(100, 20, 10), rng.normal(105, 20, 10)
    first = stats.percent_change(baseline, patched)
    assert stats.percent_change(baseline, patched) == first
    # The seed is what makes it repeatable: another seed moves the bounds, not the estimate.
    other = stats.percent_change(baseline, patched, seed=stats.SEED + 1)
    assert other.percent == first.percent
    assert (other.low, other.high) != (first.low, first.high)


def test_one_repetition_is_not_enough() -> None:
    with pytest.raises(stats.NotEnoughRepetitions, match=r"baseline: 1 repetition.*Fix"):
        stats.percent_change([100], [110, 120])
    with pytest.raises(stats.NotEnoughRepetitions, match=r"patched: 0 repetition"):
        stats.percent_change([100, 110], [])


@pytest.mark.parametrize("baseline", [[0, 0], [0, 5, 6], [-1, 5]])
def test_a_baseline_that_can_average_to_zero_is_refused(baseline: list[float]) -> None:
    with pytest.raises(ValueError, match=r"value <= 0.*exclude"):
        stats.percent_change(baseline, [1, 2])


def test_a_missing_value_is_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        stats.percent_change([1, float("nan")], [1, 2])


def change(low: float, high: float) -> stats.Change:
    return stats.Change(percent=(low + high) / 2, low=low, high=high, n_baseline=3, n_patched=3)


@pytest.mark.parametrize(("low", "high", "cited", "verdict", "words"), [
    (2.0, 15.0, 8.0, stats.REPRODUCED, "contains the cited +8.0 %"),
    (-15.0, -2.0, -8.0, stats.REPRODUCED, "contains the cited -8.0 %"),
    (150.0, 900.0, 8.9, stats.DIRECTION_ONLY, "lies above the cited +8.9 %"),
    (0.5, 3.0, 8.0, stats.DIRECTION_ONLY, "lies below the cited +8.0 %"),
    (-50.0, 70.0, -0.4, stats.NOT_REPRODUCIBLE, "contains 0 and the cited -0.4 %"),
    (-5.0, 3.0, 8.0, stats.NOT_REPRODUCIBLE, "contains 0: the spread"),
    (-30.0, -5.0, 8.0, stats.NOT_REPRODUCIBLE, "is a decrease, the cited +8.0 % is an increase"),
    (-1.0, 1.0, 0.0, stats.NOT_REPRODUCIBLE, "contains 0 and the cited +0.0 %"),
    (1.0, 2.0, 0.0, stats.NOT_REPRODUCIBLE, "the cited +0.0 % is no change"),
])
def test_verdict_rule(low: float, high: float, cited: float, verdict: str, words: str) -> None:
    judged = stats.judge_change(change(low, high), cited, "TCG, 8 vCPUs on 2 host cores")
    assert judged.verdict == verdict
    assert words in judged.reason
    assert judged.verdict in stats.VERDICTS


def test_a_reason_names_the_environment_when_the_spread_decides() -> None:
    judged = stats.judge_change(change(-50, 70), 8.0, "TCG, 8 vCPUs on 2 host cores")
    assert "(TCG, 8 vCPUs on 2 host cores)" in judged.reason
