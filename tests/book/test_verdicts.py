"""The one verdict rule (lab.analysis.verdicts): row kinds, units, margins, cited precision, power,
bounds, single boots and clock trouble; and the committed runs judged by it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lab.analysis import cited, judges, quantities, runs, scorecard, stats, verdicts, views

ENV = "TCG, 8 vCPUs on 2 host cores"
TIME = quantities.MARGINS["time"]
ICOUNT = quantities.MARGINS["instructions"]
TICKS = ("TSC ticks", "TSC ticks")


def change(low: float, high: float, n: int = 5, se: float = 0.05) -> stats.Change:
    """A change with its interval; ``se`` (log scale) sizes its detectable change."""
    return stats.Change(percent=(low + high) / 2, low=low, high=high, n_baseline=n,
                        n_patched=n, se=se, df=n - 1)


def claim(low: float, high: float, cited_change: float | quantities.Cited,
          margin: quantities.Margin = TIME, **kw: object) -> verdicts.Verdict:
    return verdicts.judge_change(change(low, high), cited_change, ENV, units=TICKS,
                                 margin=margin, **kw)


@pytest.mark.parametrize(("low", "high", "cited_change", "verdict", "words"), [
    (2.0, 15.0, 8.0, verdicts.REPRODUCED, "meets the cited +8.0 %"),
    (-15.0, -2.0, -8.0, verdicts.REPRODUCED, "meets the cited -8.0 %"),
    # meets the cited value, beyond the margin, but half-width 279 points >> 8.9
    (2.0, 560.0, 8.9, verdicts.DIRECTION, "does not pin the size"),
    (150.0, 900.0, 8.9, verdicts.DIRECTION, "above the cited +8.9 %"),
    (0.5, 3.0, 8.0, verdicts.DIRECTION, "below the cited +8.0 %"),
    (-30.0, -5.0, 8.0, verdicts.CONTRADICTED, "is a decrease beyond the margin"),
    (-5.0, 10.0, 8.0, verdicts.INCONCLUSIVE, "contains the cited +8.0 %"),
    (-2.1, 4.0, -9.2, verdicts.INCONCLUSIVE, "excludes the cited -9.2 %: any change in the "
                                             "author's direction is smaller than his; its point "
                                             "estimate, +0.9 %, is on the other side"),
    (-1.0, -0.2, 8.0, verdicts.INCONCLUSIVE, "reaches into the margin"),
    (-0.15, 0.15, 0.0, verdicts.REPRODUCED, "inside the margin"),
    (1.0, 2.0, 0.0, verdicts.CONTRADICTED, "beyond the margin"),
    (-0.15, 0.15, 8.0, verdicts.NO_CHANGE, "where the author saw +8.0 %"),
])
def test_the_claim_rule(low: float, high: float, cited_change: float, verdict: str,
                        words: str) -> None:
    judged = claim(low, high, cited_change)
    assert (judged.verdict, judged.kind) == (verdict, verdicts.CLAIM)
    assert words in judged.reason
    assert judged.verdict in verdicts.JUDGED


def test_a_claim_is_judged_only_in_its_own_unit() -> None:
    """Instructions for TSC ticks is a mechanism row: judge_change refuses it."""
    with pytest.raises(quantities.UnitMismatch, match="judge_direction"):
        verdicts.judge_change(change(-0.1, -0.05), 2.1, ENV, units=("instructions", "TSC ticks"),
                              margin=ICOUNT)
    with pytest.raises(ValueError, match="margin"):
        verdicts.judge_change(change(1, 2), 2.0, ENV, units=TICKS,
                              margin=quantities.MARGINS["share"])


def test_a_change_inside_the_margin_is_no_change_however_exact() -> None:
    """QPW's exact 0.00 % and its -0.08 % are one answer: no change at this resolution."""
    exact = stats.exact_change(125.5, 125.5)
    tiny = change(-0.09, -0.07, n=3, se=0.0001)
    for ours in (exact, tiny):
        for judged in (verdicts.judge_direction(ours, +1, "more work", ENV, margin=ICOUNT),
                       verdicts.judge_change(ours, 2.1, ENV, units=TICKS, margin=ICOUNT)):
            assert judged.verdict == verdicts.NO_CHANGE, judged.reason


def test_a_truncated_cited_pair_carries_the_interval_it_can_mean() -> None:
    """95 -> 97 printed by integer division means +1.0 ... +3.2 %; our +1.2 % meets it."""
    frame = pd.DataFrame([
        {"variant": "baseline", "mid": 95.0, "true_low": 95.0, "true_high": 96.0},
        {"variant": "patched", "mid": 97.0, "true_low": 97.0, "true_high": 98.0}])
    implied = scorecard.cited_change(frame)
    assert implied.value == pytest.approx(2.105, abs=1e-3)
    assert (implied.low, implied.high) == pytest.approx((100 * (97 / 96 - 1),
                                                          100 * (98 / 95 - 1)))
    assert claim(1.1, 1.3, implied).verdict == verdicts.REPRODUCED
    assert claim(1.1, 1.3, implied.value).verdict == verdicts.DIRECTION
    value = cited.parse_value("95")
    assert value.bounds("truncated") == (95.0, 96.0)
    assert value.bounds("rounded") == (94.5, 95.5)
    assert cited.parse_value("-7.5%").bounds() == pytest.approx((-7.55, -7.45))


def test_an_inconclusive_row_states_what_its_boots_can_detect() -> None:
    judged = claim(-25.0, 28.0, -3.3)
    assert judged.verdict == verdicts.INCONCLUSIVE
    assert "too few boots" in judged.reason
    assert "smallest change these boots detect (80 % power)" in judged.reason
    # the cited change is a fall, so the reason gives the smallest fall, not the larger rise
    fall, rise = change(-25.0, 28.0).detectable(-1), change(-25.0, 28.0).detectable(1)
    assert fall < rise
    assert f"is -{fall:,.1f} %" in judged.reason
    assert judged.columns()["detectable_side"] == -1 and judged.columns()["detectable"] == fall
    direction = verdicts.judge_direction(change(-25.0, 28.0), -1, "fewer", ENV, margin=TIME)
    assert f"detect (80 % power) is -{fall:,.1f} %" in direction.reason
    either = verdicts.judge_direction(change(-25.0, 28.0), 0, "no change", ENV, margin=TIME)
    assert (either.columns()["detectable_side"], either.columns()["detectable"]) == (0, rise)


def test_a_fall_is_judged_against_the_smallest_fall_not_the_larger_rise() -> None:
    """With these boots the smallest detectable fall (17.0 %) is below the smallest rise
    (20.4 %): a cited -18 % lies between them, so the boots could see it and the row does not
    blame too few boots, while a cited +18 % is beyond what they can see. A bound of 18.7 %
    is so within reach of a predicted fall, and of a predicted "no change" (either side), but
    not of a predicted rise."""
    fall, rise = change(-25.0, 28.0).detectable(-1), change(-25.0, 28.0).detectable(1)
    assert fall < 18.0 < 18.7 < rise
    assert "too few boots" not in claim(-25.0, 28.0, -18.0).reason
    assert "too few boots" in claim(-25.0, 28.0, 18.0).reason
    bound = quantities.Bound(18.7, "a counted path")
    for sign, unseen in ((-1, False), (0, False), (1, True)):
        judged = verdicts.judge_direction(change(-25.0, 28.0), sign, "x", ENV, margin=TIME,
                                          bound=bound)
        assert ("cannot see a change that small" in judged.reason) is unseen, sign


def test_a_rows_detectable_change_prints_with_the_side_it_was_judged_on() -> None:
    """A notebook prints the scorecard column with the sign of the side it holds: a claim's
    cited side, a mechanism row's predicted one; a row without a side gives a ratio's rise and
    fall, which differ, and a difference's one size."""
    rows = pd.DataFrame([
        {**claim(-25.0, 28.0, -3.3).columns(), "expected_sign": float("nan")},
        verdicts.judge_direction(change(-25.0, 28.0), 1, "more", ENV, margin=TIME).columns(),
        verdicts.judge_direction(change(-25.0, 28.0), 0, "none", ENV, margin=TIME).columns(),
    ])
    printed = [quantities.detectable_of(r) for _, r in rows.iterrows()]
    fall, rise = change(-25.0, 28.0).detectable(-1), change(-25.0, 28.0).detectable(1)
    assert printed == [f"-{fall:,.1f} %", f"+{rise:,.1f} %",
                       f"+{rise:,.1f} % or -{fall:,.1f} %"]
    assert quantities.detectable_text(12.0, 0, " bytes") == "±12.0 bytes"
    with pytest.raises(ValueError, match="side is"):
        change(-25.0, 28.0).detectable(0)


def test_a_design_that_cannot_move_the_metric_says_so() -> None:
    """sched-ext's scx_qmap run: 11 remote fallbacks against 443 outliers move the rate by 2.5 %
    at most."""
    bound = quantities.Bound(2.5, "11 remote fallbacks against 443 outliers")
    judged = claim(-45.0, 18.0, -45.0, bound=bound)
    assert judged.verdict == verdicts.INCONCLUSIVE
    assert "this design cannot move the metric" in judged.reason and "2.5 %" in judged.reason
    assert judged.columns()["bound"] == 2.5
    # a bound larger than what the boots detect does not decide, but is said
    loose = claim(2.0, 15.0, 8.0, bound=quantities.Bound(1000.0, "every residence"))
    assert loose.verdict == verdicts.REPRODUCED and "at most 1,000.0 %" in loose.reason


def test_checks_and_our_own_readings_never_count_as_support() -> None:
    passed = verdicts.check(True, "the images differ by the patch")
    assert (passed.verdict, passed.kind, passed.supports) == (verdicts.PASSED, verdicts.CHECK,
                                                             False)
    mine = verdicts.judge_direction(change(-40, -20), -1, "our reading", ENV, margin=TIME,
                                    ours=True)
    assert (mine.verdict, mine.supports) == (verdicts.HOLDS, False)
    against = verdicts.judge_direction(change(5, 9), -1, "our reading", ENV, margin=TIME,
                                       ours=True)
    assert against.verdict == verdicts.FAILS
    author = verdicts.judge_direction(change(-40, -20), -1, "fewer", ENV, margin=TIME)
    assert (author.verdict, author.supports) == (verdicts.DIRECTION, True)


@pytest.mark.parametrize(("low", "high", "verdict"), [
    (-40.0, -20.0, verdicts.DIRECTION), (-40.0, 7.0, verdicts.INCONCLUSIVE),
    (5.0, 9.0, verdicts.CONTRADICTED), (-0.15, 0.1, verdicts.NO_CHANGE)])
def test_mechanism_rows_are_judged_for_their_direction(low: float, high: float,
                                                       verdict: str) -> None:
    judged = verdicts.judge_direction(change(low, high), -1, "fewer contentions", ENV,
                                      margin=TIME)
    assert (judged.verdict, judged.kind) == (verdict, verdicts.MECHANISM)
    assert "fewer contentions" in judged.reason


def _judge(c: stats.Change) -> verdicts.Verdict:
    return verdicts.judge_change(c, 10.0, ENV, units=TICKS, margin=TIME)


def _by_size(c: stats.Change) -> verdicts.Verdict:
    """A judge that takes a side on the estimate alone, so the test sees the refit's report."""
    return verdicts.Verdict(verdicts.DIRECTION if c.percent > 15 else verdicts.INCONCLUSIVE, "x",
                            change=c)


def test_a_verdict_one_boot_carries_is_shown_without_it() -> None:
    base = pd.Series([1.0, 1.01, 0.99], index=range(1, 4))
    patched = pd.Series([1.05, 1.06, 1.5], index=range(1, 4))
    judged = verdicts.judge_boots(base, patched, _by_size)
    assert judged.verdict == verdicts.DIRECTION
    assert "it rests on one boot: without patched boot 3 it is inconclusive here" in judged.reason
    # an inconclusive verdict takes no side: no search for a boot that would make it one
    assert "rests on one" not in verdicts.judge_boots(patched, base, _by_size).reason


def test_a_dropped_boot_is_refitted_at_the_full_degrees_of_freedom() -> None:
    """At 3 boots Hsu's t is 4.30 with 2 degrees of freedom and 12.71 with 1: a refit at its own
    degrees of freedom would blame any boot for the lost degree of freedom."""
    full = stats.percent_change([849.1, 847.5, 845.3], [4.1, 3.9, 4.4])
    dropped = stats.percent_change([847.5, 845.3], [4.1, 3.9, 4.4])
    kept = stats.at_df(dropped, full.df)
    assert (kept.df, dropped.df, kept.percent) == (full.df, 1.0, dropped.percent)
    assert kept.half_width < dropped.half_width / 2


def test_boots_with_clock_trouble_are_counted_and_left_out() -> None:
    base = pd.Series([100.0, 101.0, 99.0, 100.0], index=range(1, 5))
    patched = pd.Series([110.0, 111.0, 109.0, 150.0], index=range(1, 5))
    judged = verdicts.judge_boots(base, patched, _judge,
                                  flagged=({}, {4: "TSC marked unstable"}))
    assert "1 of 8 boots had clock trouble (TSC marked unstable); without them" in judged.reason
    # the same trouble in several boots is each boot's, not their total
    several = verdicts.judge_boots(base, patched, _judge, flagged=(
        {1: "1 watchdog timeout"}, {2: "1 watchdog timeout", 3: "1 watchdog timeout"}))
    assert "3 of 8 boots had clock trouble (1 watchdog timeout each);" in several.reason
    mixed = verdicts.judge_boots(base, patched, _judge, flagged=(
        {1: "1 watchdog timeout"}, {2: "TSC marked unstable"}))
    assert "(1 watchdog timeout; TSC marked unstable)" in mixed.reason
    clean = verdicts.judge_boots(base, patched, _judge)
    assert "clock trouble" not in clean.reason


def test_the_margins_leave_every_cited_change_resolvable() -> None:
    """A margin is at most half the smallest non-zero cited change judged with it, so no
    author's change is called "no change" by construction (book/method.md says so)."""
    card = _card()
    judged = card[(card["row_kind"] == verdicts.CLAIM) & card["margin"].notna()
                  & card["cited_change"].notna() & (card["cited_change"] != 0)]
    assert len(judged) > 20
    for margin, part in judged.groupby("margin"):
        assert margin <= part["cited_change"].abs().min() / 2, part[["id", "cited_change"]]


def _card() -> pd.DataFrame:
    frame = cited.to_frame(cited.load_all())
    return scorecard.build(frame, runs.measured_for_cited(), judges.judged(frame))


def test_the_committed_runs_are_judged_by_these_rules() -> None:
    """The done-when of the verdicts issue, on the book's own card: every row has a kind; no
    claim row is contradicted inside its margin; no check supports; every inconclusive timed
    row says what its boots could detect or why the environment cannot show it."""
    card = _card()
    assert set(card["row_kind"]) == set(verdicts.ROW_KINDS)
    claims = card[card["row_kind"] == verdicts.CLAIM]
    contradicted = claims[claims["verdict"] == verdicts.CONTRADICTED]
    assert ((contradicted["our_low"] > contradicted["margin"])
            | (contradicted["our_high"] < -contradicted["margin"])).all()
    checks = card[card["row_kind"] == verdicts.CHECK]
    assert set(checks["verdict"]) <= {verdicts.PASSED, verdicts.FAILED}
    assert views.counts(card, cited.to_frame(cited.load_all()))["check-support"] == 0
    ours = card[card["ours_reading"]]
    assert len(ours) and not ours["verdict"].isin([verdicts.CONTRADICTED,
                                                   *verdicts.SUPPORT]).any()
    timed = card[(card["verdict"] == verdicts.INCONCLUSIVE) & (card["detectable"] > 0)]
    assert len(timed)
    for reason in timed["reason"]:
        assert any(words in reason for words in (
            "smallest change these boots detect", "cannot show", "cannot move",
            "excludes the cited", "it is exact")), reason


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
    """A row built from a verdict holds its kind, our change, its interval, the cited change
    (or the direction a mechanism row was judged for), the margin and the detectable change as
    numbers, so a figure need not parse text."""
    judged = claim(2.0, 15.0, 8.0).columns()
    assert set(judged) == {"verdict", "reason", *verdicts.NUMBER_COLUMNS}
    assert (judged["our_change"], judged["our_low"], judged["our_high"]) == (8.5, 2.0, 15.0)
    assert (judged["our_unit"], judged["cited_change"]) == ("%", 8.0)
    assert (judged["row_kind"], judged["ours_reading"], judged["margin"]) == (
        verdicts.CLAIM, False, TIME.size)
    assert judged["detectable"] > 0 and np.isnan(judged["expected_sign"])
    mechanism = verdicts.judge_direction(change(-40.0, -20.0), -1, "fewer", ENV,
                                         margin=TIME).columns()
    assert (mechanism["our_low"], mechanism["expected_sign"]) == (-40.0, -1)
    assert mechanism["row_kind"] == verdicts.MECHANISM and np.isnan(mechanism["cited_change"])
    absolute = verdicts.not_comparable("another machine").columns()
    assert absolute["our_unit"] == "" and np.isnan(absolute["our_change"])
