"""The one verdict rule (lab.verdicts), and that judging the committed runs is repeatable."""

from __future__ import annotations

import numpy as np
import pytest

from lab import cited, judges, runs, scorecard, stats, verdicts

ENV = "TCG, 8 vCPUs on 2 host cores"


def change(low: float, high: float) -> stats.Change:
    return stats.Change(percent=(low + high) / 2, low=low, high=high, n_baseline=3, n_patched=3)


@pytest.mark.parametrize(("low", "high", "cited", "verdict", "words"), [
    (2.0, 15.0, 8.0, verdicts.REPRODUCED, "contains the cited +8.0 %"),
    (-15.0, -2.0, -8.0, verdicts.REPRODUCED, "contains the cited -8.0 %"),
    # contains the cited value, excludes 0, but half-width 279 points >> 8.9: not informative
    (2.0, 560.0, 8.9, verdicts.DIRECTION, "does not pin the size"),
    (150.0, 900.0, 8.9, verdicts.DIRECTION, "lies above the cited +8.9 %"),
    (-10.4, -10.3, -10.9, verdicts.DIRECTION, "lies above the cited -10.9 %"),
    (0.5, 3.0, 8.0, verdicts.DIRECTION, "lies below the cited +8.0 %"),
    (-50.0, 70.0, -0.4, verdicts.INCONCLUSIVE, "contains 0 and the cited -0.4 %"),
    (-5.0, 3.0, 8.0, verdicts.INCONCLUSIVE, "contains 0: the spread"),
    (-30.0, -5.0, 8.0, verdicts.CONTRADICTED, "is a decrease, the cited +8.0 % is an increase"),
    (-1.0, 1.0, 0.0, verdicts.INCONCLUSIVE, "only an exact 0 reproduces a cited no change"),
    (1.0, 2.0, 0.0, verdicts.CONTRADICTED, "the cited +0.0 % is no change"),
    (0.0, 0.0, 0.0, verdicts.REPRODUCED, "exactly the cited +0.0 %"),
])
def test_verdict_rule(low: float, high: float, cited: float, verdict: str, words: str) -> None:
    judged = verdicts.judge_change(change(low, high), cited, ENV)
    assert judged.verdict == verdict
    assert words in judged.reason
    assert judged.verdict in verdicts.JUDGED


def test_reproduced_needs_an_informative_interval() -> None:
    """The margin: half-width at most MARGIN times the cited magnitude."""
    cited_percent = 8.0
    edge = verdicts.MARGIN * cited_percent
    assert verdicts.judge_change(change(8.0 - edge + 0.1, 8.0 + edge - 0.1), cited_percent,
                                 ENV).verdict == verdicts.REPRODUCED
    assert verdicts.judge_change(change(1.0, 1.0 + 2 * edge + 1), cited_percent,
                                 ENV).verdict == verdicts.DIRECTION


def test_an_environment_that_cannot_show_the_condition_is_inconclusive() -> None:
    judged = verdicts.judge_change(change(-30, -20), -25.0, ENV, cannot_show="no IBPB here")
    assert judged.verdict == verdicts.INCONCLUSIVE and "no IBPB here" in judged.reason


@pytest.mark.parametrize(("low", "high", "verdict"), [
    (-40.0, -20.0, verdicts.DIRECTION), (-40.0, 7.0, verdicts.INCONCLUSIVE),
    (5.0, 9.0, verdicts.CONTRADICTED)])
def test_mechanism_rows_are_judged_for_their_direction(low: float, high: float,
                                                       verdict: str) -> None:
    judged = verdicts.judge_direction(change(low, high), -1, "fewer contentions", ENV)
    assert judged.verdict == verdict and "fewer contentions" in judged.reason


def test_judging_the_committed_runs_does_not_depend_on_a_random_seed() -> None:
    frame = cited.to_frame(cited.load_all())
    np.random.seed(1)
    first = judges.judged(frame)
    np.random.seed(99)
    again = judges.judged(frame)
    assert first.equals(again)
    card = scorecard.build(frame, runs.measured_for_cited(), first)
    assert set(card["verdict"]) <= set(verdicts.VERDICTS)


def test_a_verdict_carries_the_numbers_it_was_decided_from() -> None:
    """A row built from a verdict holds our change, its interval and the cited change (or the
    direction a mechanism row was judged for) as numbers, so a figure need not parse text."""
    judged = verdicts.judge_change(change(2.0, 15.0), 8.0, ENV).columns()
    assert set(judged) == {"verdict", "reason", *verdicts.NUMBER_COLUMNS}
    assert (judged["our_change"], judged["our_low"], judged["our_high"]) == (8.5, 2.0, 15.0)
    assert (judged["our_unit"], judged["cited_change"]) == ("%", 8.0)
    assert np.isnan(judged["expected_sign"])
    mechanism = verdicts.judge_direction(change(-40.0, -20.0), -1, "fewer", ENV).columns()
    assert (mechanism["our_low"], mechanism["expected_sign"]) == (-40.0, -1)
    assert np.isnan(mechanism["cited_change"])
    absolute = verdicts.not_comparable("another machine").columns()
    assert absolute["our_unit"] == "" and np.isnan(absolute["our_change"])
