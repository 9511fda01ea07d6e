"""What a change is judged against, and how it is printed.

The practical margin of each kind of metric (:data:`MARGINS`: inside it, a change is "no change
at this resolution"), the interval of true changes a cited value can mean (:class:`Cited`), the
most the changed path could move a metric (:class:`Bound`), and a signed change as every reason
prints it (:func:`number`). :mod:`lab.analysis.verdicts` decides with these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lab.analysis import stats

INFORMATIVE = 1.0
"""An interval is informative about a cited change c when its half-width is at most
INFORMATIVE * |c|: then it could not contain both c and a change of the other sign."""


@dataclass(frozen=True)
class Margin:
    """The practical margin of one kind of metric: a change inside +-``size`` (in ``unit``) is
    "no change at this resolution", whatever its interval says."""

    name: str
    size: float
    unit: str
    """"%" for a relative change, else the unit of a difference (" points", " bytes", ...)."""
    why: str

    def text(self) -> str:
        """The margin as printed: "+-0.5 %"."""
        suffix = " %" if self.unit == "%" else self.unit
        return f"±{self.size:,g}{suffix}"


MARGINS = {
    "time": Margin("a time, a rate or a latency measured by a clock", 0.2, "%",
                   "half the smallest timed change an author cites, so that every cited "
                   "change stays outside it"),
    "instructions": Margin("instructions counted under icount", 0.5, "%",
                           "less than one instruction per call on the book's shortest timed "
                           "path (about 125 instructions per kmalloc()): no code change is "
                           "smaller"),
    "count": Margin("a count of events (lock acquisitions, contentions, residences)", 1.0, "%",
                    "the timers and interrupts of an emulated boot move event counts by "
                    "about this much without any kernel change"),
    "per request": Margin("events per request (work items, IPIs, switches, lock "
                          "acquisitions)", 0.05, " per request", "one event in twenty requests"),
    "share": Margin("a share of a profile, in percentage points", 0.15, " points",
                    "a little under half the smallest delta a cited perf diff listing prints, so "
                    "that every cited delta stays outside it"),
    "share-relative": Margin("a relative change of a symbol's share of a profile", 1.4, "%",
                             "a little under half the smallest relative change a cited perf "
                             "diff listing prints (-0.18 points of 6.34 %, -2.8 %), so that every "
                             "cited change stays outside it"),
    "image": Margin("the size of a bzImage", 0.0, " bytes",
                    "exact; a bzImage grows in whole pages of 4096 bytes, so one page is the "
                    "smallest change it shows, and it may stand for a single byte of code"),
    "bytes": Margin("the size of a function or a section", 0.0, " bytes",
                    "a size read from the symbol table is exact to the byte"),
}
"""Each metric kind's margin, stated once on the method page."""


@dataclass(frozen=True)
class Cited:
    """A cited change as the verdict uses it: the value as written (``value``) and the interval
    of true changes it can mean (``low`` to ``high``), from the rounding or truncation of the
    values it was printed from (:func:`lab.analysis.cited.change_bounds`)."""

    value: float
    low: float
    high: float
    text: str = ""
    """How the change was written, or how it was derived ("+25.0 % (implied)")."""
    note: str = ""
    """What the reason must add about the cited value ("printed -0.4 %, read by the author as
    no change")."""

    @classmethod
    def exact(cls, value: float) -> Cited:
        """A cited change known to the digit (or one we must take as such)."""
        return cls(value, value, value)

    @property
    def sign(self) -> int:
        """The direction of the value as written."""
        return int(np.sign(self.value))

    def describe(self, suffix: str) -> str:
        """"+25.0 %", or "+25.0 % (+23.3 to +26.7 % as printed)" when the printing blurs it."""
        head = number(self.value, suffix)
        low, high = number(self.low, suffix), number(self.high, suffix)
        if self.note:
            return f"{head} ({self.note})"
        if low == high:
            return head
        return f"{head} ({low.removesuffix(suffix)} to {high} as printed)"


@dataclass(frozen=True)
class Bound:
    """How far the changed path could move a metric at most, in the change's unit (a
    magnitude): where the path ran N times per boot against M events that make the metric, the
    patch can change at most N/M of them. ``why`` says how it was counted."""

    size: float
    why: str


class UnitMismatch(ValueError):
    """A claim judged by a measurement of another quantity: that is a mechanism row."""


def number(value: float, suffix: str) -> str:
    """A signed change as the reasons print it: whole bytes with separators ("+4,096 bytes"),
    other units to one decimal ("-10.4 %")."""
    if suffix.strip() == "bytes":
        return f"{value:+,.0f}{suffix}"
    return f"{value:+,.1f}{suffix}"


def margin_side(change: stats.Change, margin: Margin) -> int:
    """+1 or -1 when the whole interval lies beyond the margin on that side; 0 otherwise."""
    if change.low > margin.size:
        return 1
    if change.high < -margin.size:
        return -1
    return 0


def cited_side(cited: Cited, margin: Margin) -> int:
    """The cited direction; 0 for "no change": a cited interval inside the margin (a "0 %"
    means -0.5 ... +0.5 %, however wide its printing)."""
    return 0 if -margin.size <= cited.low and cited.high <= margin.size else cited.sign


def within(change: stats.Change, margin: Margin) -> bool:
    return -margin.size <= change.low and change.high <= margin.size


def check_margin(change: stats.Change, margin: Margin) -> None:
    if (margin.unit == "%") != (change.unit == "%") or (
            margin.unit != "%" and margin.unit.strip() != change.unit.strip()):
        raise ValueError(f"the margin of {margin.name} is in {margin.unit.strip()!r}, the change "
                         f"in {change.unit.strip()!r}. Fix: pick the margin of the change's "
                         "metric kind from lab.analysis.quantities.MARGINS")


def detectable_text(size: float, side: int, unit: str, digits: int = 1) -> str:
    """The smallest detectable change as printed: ``size`` is
    :meth:`lab.analysis.stats.Change.detectable` on ``side`` (a rise when ``side`` is 0).

    With a side the number carries its sign. Without one, a difference (bytes, points) is the
    same size either way ("±"), while a ratio's rise and fall differ and both are given."""
    if side:
        return f"{'+' if side > 0 else '-'}{size:,.{digits}f}{stats.suffix(unit)}"
    if unit != "%":
        return f"±{size:,.{digits}f}{stats.suffix(unit)}"
    fall = 100 * (1 - 1 / (1 + size / 100))  # the same log size as the rise, downwards
    return f"+{size:,.{digits}f} % or -{fall:,.{digits}f} %"


def detectable_of(row: Any, digits: int = 1) -> str:
    """A judged row's smallest detectable change as printed, signed by the side it was
    computed for: ``row`` maps the columns of :meth:`lab.analysis.verdicts.Verdict.columns`
    (a scorecard row, or a verdict's own columns)."""
    return detectable_text(row["detectable"], int(row["detectable_side"]), row["our_unit"],
                           digits)


def detectable(change: stats.Change, side: int = 0) -> str:
    """The clause a verdict's reason gives for too few boots: the smallest change these boots
    detect on ``side`` (the direction judged; 0 for both)."""
    if change.exact:
        return "it is exact"
    return (f"the smallest change these boots detect ({stats.POWER * 100:.0f} % power) is "
            + detectable_text(change.detectable(side or 1), side, change.unit))


def unmoved(change: stats.Change, bound: Bound | None, cited: Cited | None = None,
            side: int = 0) -> str | None:
    """Why this setup cannot show the patch, when a bound says so. For a claim: the most the
    changed path could move the metric is smaller than the cited change (at its end nearest
    0), so no result of this setup is the author's change. For a mechanism row: smaller than
    the smallest change these boots detect on ``side`` (the predicted direction; either side
    for 0, so the smaller of a ratio's rise and fall), so they cannot see it."""
    if bound is None:
        return None
    if cited is not None and cited.sign:
        if bound.size >= min(abs(cited.low), abs(cited.high)):
            return None
        return (f"the changed path could move this metric by at most {bound.size:,.1f}"
                f"{change.suffix} ({bound.why}), less than the cited change: this design cannot "
                "move the metric as far as the author saw it move, and no change it shows is "
                "the patch's")
    if bound.size >= (change.detectable(side) if side
                       else min(change.detectable(1), change.detectable(-1))):
        return None
    detect = detectable_text(change.detectable(side or 1), side, change.unit)
    return (f"the changed path could move this metric by at most {bound.size:,.1f}"
            f"{change.suffix} ({bound.why}), less than the smallest change these boots detect "
            f"({detect}): these boots cannot see a change that small")
