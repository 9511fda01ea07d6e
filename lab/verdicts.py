"""The one verdict rule every chapter's judge calls, and its vocabulary.

A verdict compares our change (a :class:`lab.stats.Change`: an estimate and its confidence
interval, or a single value when the measure is deterministic) with the change the author cited:

reproduced
    the interval excludes 0 on the author's side, contains the cited change, and is
    informative: its half-width is no larger than :data:`MARGIN` times the cited change's
    magnitude. A cited "no change" (0) is reproduced only by a deterministic 0.
direction confirmed
    the interval excludes 0 on the author's side, but misses the cited change or is too wide to
    pin it.
inconclusive here
    the interval contains 0 (too wide to tell the cited change from none), or this environment
    cannot produce the condition the author measured (the reason says which).
contradicted
    the interval excludes 0 on the other side, or excludes 0 where the author saw no change.
absolute value not comparable
    the cited number is an absolute value of the author's machine (items/s, ns, TSC ticks,
    bytes of another tree); the reason says why, and how the change it belongs to fared.
not yet measured
    no committed run measures it.

A *mechanism row* (an instruction count, a lock-statistics count) stands for a cited change of
another quantity: it has a direction to confirm, not a size, so :func:`judge_direction` gives it
one of "direction confirmed", "contradicted" or "inconclusive here" by the same interval test.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from lab import runs, stats

REPRODUCED = "reproduced"
DIRECTION = "direction confirmed"
INCONCLUSIVE = "inconclusive here"
CONTRADICTED = "contradicted"
NOT_COMPARABLE = "absolute value not comparable"
NOT_YET = "not yet measured"
UNJUDGED = runs.UNJUDGED

JUDGED = (REPRODUCED, DIRECTION, INCONCLUSIVE, CONTRADICTED, NOT_COMPARABLE)
"""The verdicts a judge gives; with :data:`UNJUDGED` and :data:`NOT_YET`, every verdict."""

VERDICTS = (*JUDGED, UNJUDGED, NOT_YET)
"""Every verdict the scorecard can show, in the order the scorecard page defines them."""

MARGIN = 1.0
"""An interval is informative about a cited change c when its half-width is at most MARGIN * |c|
percentage points: then it could not contain both c and a change of the other sign."""


NUMBER_COLUMNS = ["our_change", "our_low", "our_high", "our_unit", "cited_change",
                  "expected_sign"]
"""A judged row's numbers (:meth:`Verdict.columns`), so a figure can draw what the reason says:
our change and its interval in ``our_unit``, the cited change in the same unit (a judged change),
or the direction the mechanism should move (a mechanism row). Missing numbers are NaN."""


@dataclass(frozen=True)
class Verdict:
    """A verdict and the one-line reason the scorecard prints beside it, with the numbers it was
    decided from when :func:`judge_change` or :func:`judge_direction` decided it."""

    verdict: str
    reason: str
    change: stats.Change | None = None
    """Our change with its interval."""
    cited: float | None = None
    """The cited change it was judged against, in the unit of ``change``."""
    expected_sign: int | None = None
    """The direction a mechanism row was judged for (-1 or +1)."""

    def columns(self) -> dict[str, Any]:
        """The verdict as scorecard row columns: ``verdict``, ``reason`` and
        :data:`NUMBER_COLUMNS`, so a judge's row carries the numbers beside the text."""
        nan = float("nan")
        change = self.change
        return {"verdict": self.verdict, "reason": self.reason,
                "our_change": change.percent if change else nan,
                "our_low": change.low if change else nan,
                "our_high": change.high if change else nan,
                "our_unit": change.suffix.strip() if change else "",
                "cited_change": nan if self.cited is None else float(self.cited),
                "expected_sign": nan if self.expected_sign is None else self.expected_sign}


def _word(sign: int) -> str:
    return {1: "an increase", -1: "a decrease", 0: "no change"}[sign]


def _ours(change: stats.Change) -> str:
    if change.low == change.high:
        return f"our exact change {change.percent:+.3f}{change.suffix}"
    return f"our {stats.LEVEL} CI {change.interval()}"


def judge_change(change: stats.Change, cited_percent: float, environment: str, *,
                 cannot_show: str | None = None) -> Verdict:
    """Judge our change against the author's cited change (both in percent).

    ``environment`` names what limits the measurement (e.g. "TCG, 8 vCPUs on 2 host cores");
    ``cannot_show`` says why this environment lacks the condition the author measured (e.g. no
    IBPB in the guest), which makes the verdict "inconclusive here" whatever the interval says.
    The verdict carries both changes, so the row that holds it can draw them.
    """
    decided = _judge_change(change, cited_percent, environment, cannot_show)
    return replace(decided, change=change, cited=cited_percent)


def _judge_change(change: stats.Change, cited_percent: float, environment: str,
                  cannot_show: str | None) -> Verdict:
    cited_sign = int(np.sign(cited_percent))
    cited = f"{cited_percent:+.1f}{change.suffix}"
    ours = _ours(change)
    if cannot_show:
        return Verdict(INCONCLUSIVE, f"{ours}, but this environment cannot show the cited "
                                     f"{cited}: {cannot_show}")
    inside = change.low <= cited_percent <= change.high
    informative = change.half_width <= MARGIN * abs(cited_percent)
    if inside and informative and change.sign == cited_sign:
        return Verdict(REPRODUCED, (
            f"{ours} excludes 0 on the author's side and contains the cited {cited}"
            if cited_sign else f"{ours} is exactly the cited {cited}"))
    if change.sign == 0 and cited_sign == 0:
        return Verdict(INCONCLUSIVE, (
            f"{ours} contains 0 and the cited {cited}, but only an exact 0 reproduces a cited "
            f"no change: the spread between boots ({environment}) leaves a small change open"))
    if change.sign == 0:
        return Verdict(INCONCLUSIVE, (
            f"{ours} contains 0{' and the cited ' + cited if inside else ''}: the spread "
            f"between boots ({environment}) is too wide to tell {cited} from no change"))
    if change.sign != cited_sign:
        return Verdict(CONTRADICTED, (
            f"{ours} is {_word(change.sign)}, the cited {cited} is {_word(cited_sign)} "
            f"({environment})"))
    if inside:
        return Verdict(DIRECTION, (
            f"{ours} excludes 0 on the author's side and contains the cited {cited}, but its "
            f"half-width ({change.half_width:.1f} points) exceeds the cited change's magnitude, "
            "so it does not pin the size"))
    side = "above" if change.low > cited_percent else "below"
    return Verdict(DIRECTION, (
        f"{ours} excludes 0 on the author's side but lies {side} the cited {cited} "
        f"({environment})"))


def judge_direction(change: stats.Change, expected_sign: int, claim: str,
                    environment: str) -> Verdict:
    """Judge a mechanism row: does our interval confirm the direction ``claim`` predicts?

    ``expected_sign`` is -1 or +1 (the direction the mechanism should move if the author's
    explanation holds); ``claim`` says what it stands for, e.g. "fewer contentions of
    pool->lock, behind the cited +8.9 % throughput". The verdict carries our change and
    ``expected_sign``.
    """
    decided = _judge_direction(change, expected_sign, claim, environment)
    return replace(decided, change=change, expected_sign=expected_sign)


def _judge_direction(change: stats.Change, expected_sign: int, claim: str,
                     environment: str) -> Verdict:
    ours = _ours(change)
    if change.sign == 0:
        return Verdict(INCONCLUSIVE, f"{ours} contains 0 ({environment}): it cannot confirm "
                                     f"{claim}")
    if change.sign != expected_sign:
        return Verdict(CONTRADICTED, f"{ours} is {_word(change.sign)}, against {claim}")
    return Verdict(DIRECTION, f"{ours} is {_word(change.sign)}: it confirms {claim}; the size "
                              "is of another quantity than the cited one")


def not_comparable(why: str) -> Verdict:
    """An absolute value of the author's machine: never compared, ``why`` says how it stands."""
    return Verdict(NOT_COMPARABLE, why)
