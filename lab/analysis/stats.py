"""Percent change of patched against baseline, with a confidence interval from scipy.

A kernel comparison is only worth stating with its spread: under emulation one boot can differ
from the next by more than the effect under test. Every change the book shows therefore comes
with a 95 % confidence interval over repetitions (each repetition one boot), and every verdict
on a cited change is decided from that interval (:mod:`lab.analysis.verdicts`), never typed by hand.

The interval is a t-interval on the difference of the mean log values of the two kernels,
reported as a percent change ``100 * (exp(d) - 1)``: the change of the geometric means. Logs,
because run times, rates and counts are positive and their spread scales with their level, so a
ratio is what carries over between machines. The standard error is Welch's (the two kernels'
boots are independent samples whose spreads need not be equal); its degrees of freedom depend
on how much the design can be trusted to estimate them:

* Welch-Satterthwaite's estimate when each kernel has at least :data:`SMALL_N` boots and their
  spreads are within :data:`SPREAD_RATIO` of each other (``scipy.stats.ttest_ind(...,
  equal_var=False)``);
* otherwise Hsu's conservative choice, ``min(n_baseline, n_patched) - 1``: with 3 boots per
  kernel, or one kernel four times as spread as the other, the estimated degrees of freedom are
  too optimistic and Welch's interval covers only 93.5 to 94.7 % of the time, while Hsu's never
  covers less than 95 % under normal errors.

Both use no random numbers, so the same data give the same interval, and the same verdict, on
every build. The coverage of this rule is tested by simulation in ``tests/book/test_stats.py``
at the repetition counts and spread ratios the book meets (3, 4 and 5 boots; equal spreads and
spreads 4 and 10 times apart). Every change also states the smallest change its design could
detect (:meth:`Change.detectable`): the size a true change must have to be seen with
:data:`POWER` probability, from the measured spread and the number of boots.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as scipy_stats

CONFIDENCE = 0.95
"""Coverage of the interval."""

LEVEL = f"{CONFIDENCE * 100:.0f} %"
"""The coverage as the book prints it ("95 %")."""

SMALL_N = 5
"""Fewer boots than this per kernel, and the interval takes Hsu's degrees of freedom."""

SPREAD_RATIO = 2.0
"""Standard deviations further apart than this factor (variances 4 times apart), and the
interval takes Hsu's degrees of freedom: Welch's estimate of them is then unreliable."""

POWER = 0.8
"""The probability with which :meth:`Change.detectable` sizes a change the design would see."""

METHOD = ("a t-interval on the difference of mean log values with Welch's standard error "
          f"(Welch's degrees of freedom; Hsu's, the smaller sample less one, below {SMALL_N} "
          f"boots per kernel or with spreads more than {SPREAD_RATIO:g} times apart)")
"""How the interval is computed, as the method chapter and the notebooks name it."""


class NotEnoughRepetitions(ValueError):
    """Fewer than two repetitions of a kernel: there is no spread, so no interval and no verdict."""


@dataclass(frozen=True)
class Change:
    """Patched against baseline in percent (ratio of geometric means), with its interval."""

    percent: float
    low: float
    high: float
    n_baseline: int
    n_patched: int
    unit: str = "%"
    """"%" for a relative change; " points" for a difference of two shares (a perf diff delta),
    or the unit of another difference (" per request", " bytes")."""
    se: float = 0.0
    """Standard error of the difference, on the scale the interval was formed on (log values
    for a percent change); 0 for an exact change."""
    df: float = float("inf")
    """Degrees of freedom of the interval's t quantile (Welch's or Hsu's, see the module)."""
    pairs: int = 0
    """For a paired change (:func:`paired_change`), the number of pairs; 0 otherwise."""

    @property
    def sign(self) -> int:
        """+1 or -1 when the whole interval lies on one side of zero, 0 when it contains zero."""
        if self.low > 0:
            return 1
        if self.high < 0:
            return -1
        return 0

    @property
    def half_width(self) -> float:
        """Half the interval's width in percentage points: what an informative verdict bounds."""
        return (self.high - self.low) / 2

    @property
    def exact(self) -> bool:
        """True for a deterministic change (sizes, one image's counts): no spread, no interval."""
        return self.se == 0 and self.low == self.high

    @property
    def conservative(self) -> bool:
        """True when the interval took Hsu's degrees of freedom (few boots, unequal spreads)."""
        return (not self.exact and not self.pairs
                and self.df == min(self.n_baseline, self.n_patched) - 1)

    def detectable(self, side: int = 1, power: float = POWER) -> float:
        """The smallest change (in this change's unit, as a magnitude) on ``side`` (+1 a rise,
        -1 a fall) that this design would detect with probability ``power``: a true change of
        this size gives an interval that excludes 0 that often, at the measured spread and
        number of boots. 0 for an exact change.

        It is ``d = (t(1 - alpha/2) + t(power)) * se`` on the interval's scale. For a ratio
        that scale is the log: a rise of ``exp(d) - 1`` and a fall of ``1 - exp(-d)``, which is
        the smaller, so a predicted fall must be compared with the fall, not the rise.
        """
        if side not in (-1, 1):
            raise ValueError(f"side is +1 (a rise) or -1 (a fall), not {side!r}")
        if self.exact or self.se == 0:
            return 0.0
        alpha = 1 - CONFIDENCE
        size = (scipy_stats.t.ppf(1 - alpha / 2, self.df)
                + scipy_stats.t.ppf(power, self.df)) * self.se
        return float(abs(100 * np.expm1(side * size))) if self.unit == "%" else float(size)

    @property
    def n(self) -> str:
        """The boots behind the interval, as printed: "n=4+4", or "5 pairs" for a paired
        change."""
        return f"{self.pairs} pairs" if self.pairs else f"n={self.n_baseline}+{self.n_patched}"

    def interval(self) -> str:
        """The interval as the book prints it, e.g. "-12.5 to +40.0 %"."""
        return f"{signed(self.low)} to {signed(self.high)}{self.suffix}"

    @property
    def suffix(self) -> str:
        """The unit as printed after a number: " %", " points", ..."""
        return suffix(self.unit)

    def describe(self) -> str:
        """The change with its interval and its boots, e.g.
        "+8.1 % (95 % CI -12.5 to +40.0 %, n=5+5)"; an exact change alone, "+576 bytes"."""
        if self.exact and self.n_baseline == self.n_patched == 1:
            return f"{signed(self.percent)}{self.suffix} (exact)"
        return f"{signed(self.percent)}{self.suffix} ({LEVEL} CI {self.interval()}, {self.n})"


def suffix(unit: str) -> str:
    """A unit as printed after a number, from a change's unit ("%", " bytes") or a scorecard
    row's (whose ``our_unit`` is stripped, and empty for a percent)."""
    return f" {unit.strip() or '%'}"


def signed(value: float) -> str:
    """A change with its sign and one decimal, and a change that rounds to zero as "0.0": a
    "-0.0" would read as a decrease that was not measured."""
    return f"{value:+.1f}" if round(value, 1) else "0.0"


def at_df(change: Change, df: float, confidence: float = CONFIDENCE) -> Change:
    """``change`` with its interval re-formed at ``df`` degrees of freedom: a leave-one-out
    refit judged at the full sample's degrees of freedom, so that dropping a boot tests the
    boot, not the loss of one degree of freedom (at 3 boots, Hsu's t goes from 4.3 to 12.7)."""
    if change.exact or change.se == 0:
        return change
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, df)) * change.se
    if change.unit == "%":
        centre = float(np.log1p(change.percent / 100))
        low, high = (100 * float(np.expm1(centre - half)), 100 * float(np.expm1(centre + half)))
    else:
        low, high = change.percent - half, change.percent + half
    return replace(change, low=low, high=high, df=df)


def _values(name: str, values: Sequence[float], *, positive: bool = True) -> np.ndarray:
    """The repetitions as an array, checked: flat, finite, at least two, and (for a ratio,
    ``positive``) above 0."""
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected a flat list of repetitions, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: {array.tolist()} holds a NaN or infinite value; a missing "
                         "repetition must be left out, not recorded as NaN")
    if len(array) < 2:
        raise NotEnoughRepetitions(
            f"{name}: {len(array)} repetition(s); a confidence interval needs at least 2 per "
            "kernel. Fix: measure more repetitions (reps: in chapters/<chapter>/chapter.yaml)")
    if positive and np.any(array <= 0):
        raise ValueError(f"{name} {array.tolist()} holds a value <= 0, which has no logarithm, "
                         "so no ratio can be formed. Fix: exclude such values (a stopped clock, "
                         "an error code) and say how many, before comparing")
    return array


def log_ratio_interval(baseline: np.ndarray, patched: np.ndarray,
                       confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray,
                                                                np.ndarray]:
    """Difference of mean logs (patched minus baseline) and its interval, along the last axis:
    one comparison per leading index, so a simulation can judge thousands at once.

    When neither kernel varies at all (a deterministic count), the interval is the point.
    """
    return difference_interval(np.log(baseline), np.log(patched), confidence)


def difference_interval(baseline: np.ndarray, patched: np.ndarray,
                        confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray,
                                                                 np.ndarray]:
    """Difference of means (patched minus baseline) and its interval, along the last axis.

    For quantities whose difference, not ratio, is the cited number: a symbol's share of a
    profile, whose change ``perf diff`` prints in percentage points; on log values it is
    :func:`log_ratio_interval`. When neither kernel varies at all, the interval is the point.
    """
    diff, low, high, _, _ = interval_parts(baseline, patched, confidence)
    return diff, low, high


def interval_parts(baseline: np.ndarray, patched: np.ndarray, confidence: float = CONFIDENCE
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Difference of means, its interval, standard error and degrees of freedom, along the last
    axis, by the module's rule (Welch's degrees of freedom, or Hsu's for few boots or unequal
    spreads). The standard error and degrees of freedom are what :meth:`Change.detectable`
    needs."""
    n_base, n_patch = baseline.shape[-1], patched.shape[-1]
    diff = patched.mean(axis=-1) - baseline.mean(axis=-1)
    var_base, var_patch = baseline.var(axis=-1, ddof=1), patched.var(axis=-1, ddof=1)
    still = (var_base == 0) & (var_patch == 0)
    # A kernel whose boots agree exactly (an instruction count) is not an error: scipy warns
    # about the lost precision of a zero variance, and the point interval below replaces it.
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        welch_df = scipy_stats.ttest_ind(patched, baseline, axis=-1, equal_var=False).df
        ratio = np.sqrt(np.maximum(var_base, var_patch) / np.minimum(var_base, var_patch))
    unequal = ~(ratio <= SPREAD_RATIO)  # a zero spread beside a non-zero one is unequal too
    hsu = (min(n_base, n_patch) < SMALL_N) | unequal
    df = np.where(hsu, min(n_base, n_patch) - 1, welch_df)
    se = np.sqrt(var_base / n_base + var_patch / n_patch)
    with np.errstate(invalid="ignore"):
        half = scipy_stats.t.ppf(0.5 + confidence / 2, df) * se
    return (diff, np.where(still, diff, diff - half), np.where(still, diff, diff + half),
            np.where(still, 0.0, se), np.where(still, np.inf, df))


def percent_change(baseline: Sequence[float], patched: Sequence[float], *,
                   confidence: float = CONFIDENCE) -> Change:
    """100 * (geometric mean(patched) / geometric mean(baseline) - 1), and its interval.

    Raises :class:`NotEnoughRepetitions` when either kernel has fewer than two repetitions, and
    ``ValueError`` when a value is not positive (it has no logarithm): such values must be
    excluded, and counted, before this call.
    """
    base = _values("baseline", baseline)
    patch = _values("patched", patched)
    diff, low, high, se, df = (float(x) for x in interval_parts(np.log(base), np.log(patch),
                                                                confidence))
    return Change(percent=100 * float(np.expm1(diff)), low=100 * float(np.expm1(low)),
                  high=100 * float(np.expm1(high)), n_baseline=len(base), n_patched=len(patch),
                  se=se, df=df)


def point_change(baseline: Sequence[float], patched: Sequence[float], *,
                 confidence: float = CONFIDENCE, unit: str = " points") -> Change:
    """mean(patched) - mean(baseline), with its interval: for shares in percent the change in
    percentage points (``perf diff``'s delta column over boots), for a rate that may be 0 (a
    lock a kernel no longer takes) the change in ``unit``. No logarithm is taken."""
    base = _values("baseline", baseline, positive=False)
    patch = _values("patched", patched, positive=False)
    diff, low, high, se, df = (float(x) for x in interval_parts(base, patch, confidence))
    return Change(percent=diff, low=low, high=high, n_baseline=len(base),
                  n_patched=len(patch), unit=unit, se=se, df=df)


def paired_change(baseline: Sequence[float], patched: Sequence[float], *,
                  confidence: float = CONFIDENCE, unit: str = "%") -> Change:
    """The change of patched against baseline from pairs of boots (``baseline[i]`` with
    ``patched[i]``), with the paired t-interval (``scipy.stats.ttest_rel``, pairs less one
    degrees of freedom): in percent, the geometric mean of the pairs' ratios less one (log
    values, as :func:`percent_change`); in another ``unit``, the mean of their differences.

    Pairing removes what a repetition's boots share (the host's state at that time), which
    independent samples (:func:`percent_change`) count as spread. The book's verdicts use
    independent samples; a chapter whose own tool pairs its boots (perf diff) may show this
    beside a verdict, never deciding it (book/method.md), printed with "5 pairs"."""
    base = _values("baseline", baseline, positive=unit == "%")
    patch = _values("patched", patched, positive=unit == "%")
    if len(base) != len(patch):
        raise ValueError(f"paired change of {len(base)} baseline and {len(patch)} patched "
                         "values: pairs need one of each. Fix: align the boots by repetition "
                         "and drop the unpaired ones")
    if len(base) < 2:
        raise NotEnoughRepetitions("a paired change needs at least two pairs")
    # the paired t-interval is the one-sample interval of the pairs' differences
    diffs = np.log(patch) - np.log(base) if unit == "%" else patch - base
    mean, low, high = mean_interval(diffs, confidence)
    spread = np.ptp(diffs) > 0
    se = float(diffs.std(ddof=1) / np.sqrt(len(diffs))) if spread else 0.0
    df = float(len(diffs) - 1) if spread else float("inf")
    if unit == "%":
        mean, low, high = (100 * float(np.expm1(x)) for x in (mean, low, high))
    return Change(percent=mean, low=low, high=high, n_baseline=len(base),
                  n_patched=len(patch), unit=unit, se=se, df=df, pairs=len(base))


def exact_change(baseline: float, patched: float, *, unit: str = "%") -> Change:
    """The change between two deterministic values (sizes, instruction counts of one image):
    no spread, so the interval is the point. In percent by default; with another ``unit``
    (" bytes") the difference in that unit, for a cited change written as one."""
    if unit != "%":
        delta = float(patched - baseline)
        return Change(percent=delta, low=delta, high=delta, n_baseline=1, n_patched=1,
                      unit=unit)
    if baseline <= 0:
        raise ValueError(f"baseline {baseline} <= 0: no percent change. Fix: compare the "
                         "difference instead")
    percent = 100 * (patched / baseline - 1)
    return Change(percent=percent, low=percent, high=percent, n_baseline=1, n_patched=1)


def mean_interval(values: Sequence[float], confidence: float = CONFIDENCE
                  ) -> tuple[float, float, float]:
    """The mean of ``values`` and its t-interval (``scipy.stats.ttest_1samp``): for a quantity
    already formed per pair of boots, such as the delta ``perf diff`` prints for each
    repetition's two recordings. At least two values."""
    data = _values("values", values, positive=False)
    if np.ptp(data) == 0:
        return float(data[0]), float(data[0]), float(data[0])
    ci = scipy_stats.ttest_1samp(data, 0.0).confidence_interval(confidence)
    return float(data.mean()), float(ci.low), float(ci.high)
