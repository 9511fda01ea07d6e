"""The one verdict rule every chapter's judge calls, and its vocabulary.

A scorecard row is one of three kinds (:data:`ROW_KINDS`), and each kind has its own words:

*claim* (:func:`judge_change`)
    the author's cited number, or the change a cited pair implies, judged only by our
    measurement of the *same quantity in the same unit* (TSC ticks for TSC ticks, bytes for
    bytes): ``judge_change`` refuses a measurement in another unit.

    reproduced
        our interval lies beyond the margin on the author's side, meets the interval the cited
        value can mean (its rounding or truncation, :class:`Cited`), and is informative: its
        half-width is no larger than :data:`INFORMATIVE` times the cited change's magnitude.
        A cited "no change" is reproduced by an interval inside the margin.
    direction confirmed
        our interval lies beyond the margin on the author's side, but misses the cited change
        or is too wide to pin it.
    no change at this resolution
        our whole interval lies inside the metric's practical margin (:data:`MARGINS`), where the
        author saw a change: the same answer for an exact 0.00 % and a -0.08 %.
    inconclusive here
        the interval reaches into the margin or across 0. The reason names the cause: too few
        boots for the change the design can detect (:meth:`lab.analysis.stats.Change.detectable`), a
        design whose changed path runs too rarely to move the metric (:class:`Bound`), or an
        environment that cannot produce the author's condition.
    contradicted
        our interval lies beyond the margin on the other side, or beyond it where the author saw
        no change.
    absolute value not comparable
        the cited number is an absolute value of the author's machine (items/s, ns, TSC ticks,
        bytes of another tree); the reason says how the change it belongs to fared.

*mechanism* (:func:`judge_direction`)
    a counterpart of the author's explanation in another unit (instructions for cycles, lock
    contentions for throughput): it has a direction to confirm, never a size, so it is
    "direction confirmed", "no change at this resolution", "inconclusive here" or
    "contradicted". A mechanism row that tests the book's *own* reading of the patch (``ours``)
    is never judged against the author: it is "our reading holds" or "our reading fails", or
    "inconclusive here" where the design cannot test it.

*check* (:func:`check`)
    true by construction or pass/fail (a call site in an image, where a patched path ran, a
    clean lockdep boot): "check passed" or "check failed", never counted as support.

Which verdicts count as support for the author is :data:`SUPPORT`; :func:`judge_boots` adds to
any of the two judged kinds what a reader must know about the boots behind it: how many had
clock trouble and what the verdict is without them, and whether one boot decides it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from lab.analysis import runs, stats
from lab.analysis.quantities import (
    INFORMATIVE,
    Bound,
    Cited,
    Margin,
    UnitMismatch,
    check_margin,
    cited_side,
    detectable,
    margin_side,
    number,
    unmoved,
    within,
)

CLAIM, MECHANISM, CHECK = "claim", "mechanism", "check"
ROW_KINDS = (CLAIM, MECHANISM, CHECK)
"""What a scorecard row is (module docstring)."""

REPRODUCED = "reproduced"
DIRECTION = "direction confirmed"
NO_CHANGE = "no change at this resolution"
INCONCLUSIVE = "inconclusive here"
CONTRADICTED = "contradicted"
NOT_COMPARABLE = "absolute value not comparable"
HOLDS = "our reading holds"
FAILS = "our reading fails"
PASSED = "check passed"
FAILED = "check failed"
NOT_YET = "not yet measured"
UNJUDGED = runs.UNJUDGED

JUDGED = (REPRODUCED, DIRECTION, NO_CHANGE, INCONCLUSIVE, CONTRADICTED, NOT_COMPARABLE, HOLDS,
          FAILS, PASSED, FAILED)
"""The verdicts a judge gives; with :data:`UNJUDGED` and :data:`NOT_YET`, every verdict."""

VERDICTS = (*JUDGED, UNJUDGED, NOT_YET)
"""Every verdict the scorecard can show, in the order the scorecard page defines them."""

SUPPORT = (REPRODUCED, DIRECTION)
"""The verdicts that support the author, on a claim or a mechanism row only: a check passes by
construction and a row of our own reading is not the author's."""


@dataclass(frozen=True)
class Verdict:
    """A verdict, the one-line reason the scorecard prints beside it, and the numbers it was
    decided from."""

    verdict: str
    reason: str
    kind: str = CLAIM
    """:data:`ROW_KINDS`."""
    ours: bool = False
    """The row tests the book's own reading, not the author's claim."""
    change: stats.Change | None = None
    """Our change with its interval."""
    cited: float | None = None
    """The cited change it was judged against, in the unit of ``change``."""
    expected_sign: int | None = None
    """The direction a mechanism row was judged for (-1, 0 or +1)."""
    margin: Margin | None = None
    bound: Bound | None = None
    side: int = 0
    """The direction judged (0: none); ``columns()``' detectable is the smallest change on it."""

    def columns(self) -> dict[str, Any]:
        """The verdict as scorecard row columns: ``verdict``, ``reason`` and
        :data:`NUMBER_COLUMNS`, so a judge's row carries the numbers beside the text."""
        nan = float("nan")
        c = self.change
        return {"verdict": self.verdict, "reason": self.reason, "row_kind": self.kind,
                "ours_reading": self.ours, "our_change": c.percent if c else nan,
                "our_low": c.low if c else nan, "our_high": c.high if c else nan,
                "our_unit": c.suffix.strip() if c else "",
                "cited_change": nan if self.cited is None else float(self.cited),
                "expected_sign": nan if self.expected_sign is None else self.expected_sign,
                "detectable": c.detectable(self.side or 1) if c else nan,
                "detectable_side": self.side, "margin": self.margin.size if self.margin else nan,
                "bound": self.bound.size if self.bound else nan}

    @property
    def supports(self) -> bool:
        """True when this row counts as support for the author (:func:`supporting`)."""
        return supporting(self.verdict, self.kind, self.ours)


def supporting(verdict: str, kind: str, ours: bool) -> bool:
    """Whether a row counts as support for the author: a :data:`SUPPORT` verdict on a claim or
    a mechanism row of his, never on a check or a row of our own reading. One rule for a
    :class:`Verdict` and for a card's columns (:func:`lab.analysis.views.counts`)."""
    return kind != CHECK and not ours and verdict in SUPPORT


NUMBER_COLUMNS = ["row_kind", "ours_reading", "our_change", "our_low", "our_high", "our_unit",
                  "cited_change", "expected_sign", "detectable", "detectable_side", "margin",
                  "bound"]
"""A judged row's kind and numbers (:meth:`Verdict.columns`), so a figure or a tally can draw
what the reason says: the row's kind and whether it tests our own reading; our change and its
interval in ``our_unit``; the cited change in the same unit (a claim) or the direction the
mechanism should move; the smallest change the design detects on the side it was judged in
(:attr:`Verdict.side`; printed by :func:`lab.analysis.quantities.detectable_of`); the margin
and the bound it was judged with. Missing numbers are NaN."""


def _word(sign: int) -> str:
    return {1: "an increase", -1: "a decrease", 0: "no change"}[sign]


def _ours(change: stats.Change) -> str:
    if change.exact:
        return f"our exact change {number(change.percent, change.suffix)}"
    return f"our {stats.LEVEL} CI {change.interval()} ({change.n})"


def _bounded(verdict: Verdict, change: stats.Change, bound: Bound | None) -> Verdict:
    """A verdict whose bound did not decide it still says the bound, so the reader can weigh
    the size of our change against what the changed path could do."""
    if bound is None or "the changed path could move" in verdict.reason:
        return verdict
    return replace(verdict, reason=f"{verdict.reason}; the changed path could move this metric "
                                   f"by at most {bound.size:,.1f}{change.suffix} ({bound.why})")


def judge_change(change: stats.Change, cited: Cited | float, environment: str, *,
                 units: tuple[str, str], margin: Margin, cannot_show: str | None = None,
                 bound: Bound | None = None, by: str = "this environment") -> Verdict:
    """Judge our change against the author's cited change (a claim row).

    ``units`` is (the unit of our measurement, the cited unit): they must be the same
    quantity, or :class:`UnitMismatch` says to judge it as a mechanism row. ``environment``
    names what limits the measurement (e.g. "TCG, 8 vCPUs on 2 host cores"); ``cannot_show``
    says why ``by`` (this environment, or our builds) lacks the condition the author measured,
    which makes the verdict "inconclusive here" whatever the interval says; ``bound`` how far
    the changed path could move the metric at all.
    """
    ours_unit, cited_unit = (u.strip() for u in units)
    if ours_unit != cited_unit:
        raise UnitMismatch(
            f"a cited {cited_unit!r} judged by our {ours_unit!r}: a claim is judged only by the "
            "same quantity in the same unit. Fix: judge it with judge_direction as a mechanism "
            "row")
    check_margin(change, margin)
    if not isinstance(cited, Cited):
        cited = Cited.exact(float(cited))
    side = cited_side(cited, margin)
    decided = _bounded(_judge_change(change, cited, side, environment, margin, cannot_show,
                                     bound, by), change, bound)
    return replace(decided, kind=CLAIM, change=change, cited=cited.value, margin=margin,
                   bound=bound, side=side)


def _judge_change(change: stats.Change, cited: Cited, claimed: int, environment: str,
                  margin: Margin, cannot_show: str | None, bound: Bound | None,
                  by: str) -> Verdict:
    suffix = change.suffix
    said = cited.describe(suffix)
    ours = _ours(change)
    if cannot_show:
        return Verdict(INCONCLUSIVE, f"{ours}, but {by} cannot show the cited "
                                     f"{said}: {cannot_show}")
    if why := unmoved(change, bound, cited, side=claimed):
        return Verdict(INCONCLUSIVE, f"{ours}; {why}")
    cited_none = claimed == 0
    meets = change.low <= cited.high and cited.low <= change.high
    side = margin_side(change, margin)
    if within(change, margin):
        if cited_none:
            return Verdict(REPRODUCED, f"{ours} lies inside the margin of {margin.name} "
                                       f"({margin.text()}), as the cited {said} does")
        return Verdict(NO_CHANGE, f"{ours} lies inside the margin of {margin.name} "
                                  f"({margin.text()}), where the author saw {said}: no change at "
                                  "this resolution")
    if cited_none:
        if side:
            return Verdict(CONTRADICTED, f"{ours} is {_word(side)} beyond the margin "
                                         f"({margin.text()}), where the cited {said} is none "
                                         f"({environment})")
        return Verdict(INCONCLUSIVE, f"{ours} is too wide to show the cited {said} within the "
                                     f"margin ({margin.text()}): too few boots, "
                                     f"{detectable(change)}")
    if side and side == cited.sign:
        informative = change.half_width <= INFORMATIVE * abs(cited.value)
        if meets and informative:
            return Verdict(REPRODUCED, f"{ours} lies beyond the margin on the author's side and "
                                       f"meets the cited {said}")
        if meets:
            return Verdict(DIRECTION, (
                f"{ours} lies beyond the margin on the author's side and meets the cited {said}, "
                f"but its half-width ({change.half_width:,.1f}{suffix}) exceeds the cited "
                "change's magnitude, so it does not pin the size"))
        where = "above" if change.low > cited.high else "below"
        return Verdict(DIRECTION, f"{ours} lies beyond the margin on the author's side but "
                                  f"{where} the cited {said} ({environment})")
    if side:
        return Verdict(CONTRADICTED, f"{ours} is {_word(side)} beyond the margin "
                                     f"({margin.text()}); the cited {said} is "
                                     f"{_word(cited.sign)} ({environment})")
    # The interval reaches into the margin or across 0: say which, and why.
    detect = detectable(change, cited.sign)
    if change.sign == -cited.sign:
        return Verdict(INCONCLUSIVE, f"{ours} is {_word(change.sign)}, but it reaches into the "
                                     f"margin ({margin.text()}); the cited {said} is "
                                     f"{_word(cited.sign)}")
    if not meets:
        # the interval may still reach further than the cited change on the other side
        other = (f"; its point estimate, {number(change.percent, suffix)}, is on the other side"
                 if np.sign(change.percent) == -cited.sign else "")
        return Verdict(INCONCLUSIVE, (
            f"{ours} reaches into the margin ({margin.text()}) and excludes the cited {said}: "
            f"any change in the author's direction is smaller than his{other}"))
    if change.detectable(cited.sign or 1) > abs(cited.value):
        return Verdict(INCONCLUSIVE, f"{ours} reaches into the margin ({margin.text()}) and "
                                     f"contains the cited {said}: too few boots, {detect} "
                                     f"({environment})")
    return Verdict(INCONCLUSIVE, f"{ours} reaches into the margin ({margin.text()}) and "
                                 f"contains the cited {said}; {detect}")


def judge_direction(change: stats.Change, expected_sign: int, claim: str, environment: str, *,
                    margin: Margin, ours: bool = False, bound: Bound | None = None,
                    cannot_show: str | None = None, by: str = "this environment") -> Verdict:
    """Judge a mechanism row: does our interval move the way ``claim`` predicts?

    ``expected_sign`` is -1 or +1, or 0 for a reading that predicts no change beyond the margin;
    ``claim`` says what it stands for, e.g. "fewer contentions of pool->lock, behind the cited
    +8.9 % throughput". With ``ours`` the row tests the book's own reading, and its verdict
    says whether that reading holds, never whether the author is confirmed. ``cannot_show``
    makes it "inconclusive here", as for a claim; ``by`` names what cannot show it (the
    environment, or a step of a series whose change is too small to test the reading).
    """
    check_margin(change, margin)
    if cannot_show:
        decided = Verdict(INCONCLUSIVE, f"{_ours(change)}, but {by} cannot show {claim}: "
                                        f"{cannot_show}")
    else:
        decided = _bounded(_judge_direction(change, expected_sign, claim, environment, margin,
                                            ours, bound), change, bound)
    return replace(decided, kind=MECHANISM, ours=ours, change=change,
                   expected_sign=expected_sign, margin=margin, bound=bound, side=expected_sign)


def _judge_direction(change: stats.Change, expected_sign: int, claim: str, environment: str,
                     margin: Margin, ours: bool, bound: Bound | None) -> Verdict:
    text = _ours(change)
    yes, no = (HOLDS, FAILS) if ours else (DIRECTION, CONTRADICTED)
    side = margin_side(change, margin)
    if why := unmoved(change, bound, side=expected_sign):
        return Verdict(INCONCLUSIVE, f"{text}; {why}")
    if within(change, margin):
        if expected_sign == 0:
            return Verdict(yes, f"{text} lies inside the margin of {margin.name} "
                                f"({margin.text()}), as predicted: {claim}")
        return Verdict(NO_CHANGE, f"{text} lies inside the margin of {margin.name} "
                                  f"({margin.text()}), where {_word(expected_sign)} was "
                                  f"predicted: {claim}")
    if side and side == expected_sign:
        return Verdict(yes, f"{text} is {_word(side)} beyond the margin ({margin.text()}), as "
                            f"predicted: {claim}")
    if side:
        return Verdict(no, f"{text} is {_word(side)} beyond the margin ({margin.text()}), "
                           f"where {_word(expected_sign)} was predicted: {claim}")
    return Verdict(INCONCLUSIVE, f"{text} reaches into the margin ({margin.text()}; "
                                 f"{environment}), so it cannot show {_word(expected_sign)} as "
                                 f"predicted ({claim}); {detectable(change, expected_sign)}")


def check(passed: bool, what: str) -> Verdict:
    """A check: pass/fail or true by construction, never support. ``what`` says what was
    checked and what was found."""
    return Verdict(PASSED if passed else FAILED, what, kind=CHECK)


def not_comparable(why: str) -> Verdict:
    """An absolute value of the author's machine: never compared, ``why`` says how it stands."""
    return Verdict(NOT_COMPARABLE, why)


Judge = Callable[[stats.Change], Verdict]
"""A judgement of one change, e.g. ``lambda c: judge_change(c, cited, env, units=..., ...)``."""


def judge_boots(baseline: pd.Series, patched: pd.Series, judge: Judge, *,
                measure: Callable[[pd.Series, pd.Series], stats.Change] = stats.percent_change,
                flagged: tuple[dict, dict] = ({}, {}), unit: str = "boot") -> Verdict:
    """Judge per-boot values, and say what the verdict rests on.

    ``baseline`` and ``patched`` hold one value per boot (indexed by repetition); ``measure``
    turns them into a change (:func:`lab.analysis.stats.percent_change` or ``point_change``),
    ``judge`` into a verdict. ``flagged`` maps, per kernel, a repetition to the clock trouble
    of that boot (:func:`lab.analysis.runs.clock_health`): when any boot is flagged, the reason
    adds how many and the verdict without them. When a verdict takes a side (supports,
    contradicts, holds or fails) and dropping a single boot (``unit`` names what one value is,
    e.g. "load") would change it, the reason says which and what it would be, so a headline
    that one value carries is shown with and without it; the refit keeps the full sample's
    degrees of freedom, so the note is about that boot, not about the degree of freedom its
    loss costs."""
    verdict = judge(measure(baseline, patched))
    notes = []
    bad = [(side, rep) for side, values, marks in (("baseline", baseline, flagged[0]),
                                                   ("patched", patched, flagged[1]))
           for rep in values.index if marks.get(rep)]
    if bad:
        words = sorted({flagged[0 if s == "baseline" else 1][r] for s, r in bad})
        kept = (baseline.drop([r for s, r in bad if s == "baseline"]),
                patched.drop([r for s, r in bad if s == "patched"]))
        total = len(baseline) + len(patched)
        try:
            without = judge(measure(*kept))
        except ValueError:  # includes NotEnoughRepetitions
            after = "too few boots are left to judge without them"
        else:
            after = (f"without them {without.verdict}" + (
                f" ({without.change.interval()}, {without.change.n})" if without.change
                else ""))
        # several boots with the same trouble: say it is each one's, not the boots' total
        said = f"{words[0]} each" if len(bad) > 1 and len(words) == 1 else "; ".join(words)
        notes.append(f"{len(bad)} of {total} boots had clock trouble ({said}); {after}")
    sided = verdict.verdict in (*SUPPORT, CONTRADICTED, HOLDS, FAILS)
    full = verdict.change
    for side, values in (("baseline", baseline), ("patched", patched)):
        if len(values) < 3 or not sided or full is None:
            continue
        for rep in values.index:
            kept = ((baseline.drop(rep), patched) if side == "baseline"
                    else (baseline, patched.drop(rep)))
            other = judge(stats.at_df(measure(*kept), full.df))
            if other.verdict != verdict.verdict:
                notes.append(f"it rests on one {unit}: without {side} {unit} {rep} it is "
                             f"{other.verdict}"
                             + (f" ({other.change.interval()})" if other.change else ""))
                break
        else:
            continue
        break
    if not notes:
        return verdict
    return replace(verdict, reason=f"{verdict.reason}; " + "; ".join(notes))
