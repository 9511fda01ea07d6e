"""Percent change of patched against baseline, with a confidence interval from scipy.

A kernel comparison is only worth stating with its spread: under emulation one boot can differ
from the next by more than the effect under test. Every change the book shows therefore comes
with a 95 % confidence interval over repetitions (each repetition one boot), and every verdict
on a cited change is decided from that interval (:mod:`lab.verdicts`), never typed by hand.

The interval is Welch's t-interval (``scipy.stats.ttest_ind(..., equal_var=False)``) on the
difference of the mean log values of the two kernels, reported as a percent change
``100 * (exp(d) - 1)``: the change of the geometric means. Logs, because run times, rates and
counts are positive and their spread scales with their level, so a ratio is what carries over
between machines; Welch, because the two kernels' boots are independent samples (boot 2 of one
has nothing to do with boot 2 of the other) whose spreads need not be equal. It uses no random
numbers, so the same data give the same interval, and the same verdict, on every build. Its
coverage at the repetition counts the book uses (3 and 5 boots per kernel) is tested by
simulation in ``tests/book/test_stats.py``; the percentile bootstrap it replaced covered the
true change only 82 % (n=3) and 87 % (n=5) of the time.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

CONFIDENCE = 0.95
"""Coverage of the interval."""

LEVEL = f"{CONFIDENCE * 100:.0f} %"
"""The coverage as the book prints it ("95 %")."""

METHOD = "Welch's t-interval on the difference of mean log values"
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
    or the unit of another difference (" per request")."""

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

    def interval(self) -> str:
        """The interval as the book prints it, e.g. "-12.5 to +40.0 %"."""
        return f"{self.low:+.1f} to {self.high:+.1f}{self.suffix}"

    @property
    def suffix(self) -> str:
        """The unit as printed after a number: " %", " points", ..."""
        return " %" if self.unit == "%" else self.unit

    def describe(self) -> str:
        """The change with its interval, e.g. "+8.1 % (95 % CI -12.5 to +40.0 %)"."""
        return f"{self.percent:+.1f}{self.suffix} ({LEVEL} CI {self.interval()})"


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
    """Difference of mean logs (patched minus baseline) and its Welch interval, along the last
    axis: one comparison per leading index, so a simulation can judge thousands at once.

    When neither kernel varies at all (a deterministic count), the interval is the point.
    """
    return difference_interval(np.log(baseline), np.log(patched), confidence)


def percent_change(baseline: Sequence[float], patched: Sequence[float], *,
                   confidence: float = CONFIDENCE) -> Change:
    """100 * (geometric mean(patched) / geometric mean(baseline) - 1), and its interval.

    Raises :class:`NotEnoughRepetitions` when either kernel has fewer than two repetitions, and
    ``ValueError`` when a value is not positive (it has no logarithm): such values must be
    excluded, and counted, before this call.
    """
    base = _values("baseline", baseline)
    patch = _values("patched", patched)
    diff, low, high = (float(x) for x in log_ratio_interval(base, patch, confidence))
    return Change(percent=100 * float(np.expm1(diff)), low=100 * float(np.expm1(low)),
                  high=100 * float(np.expm1(high)), n_baseline=len(base), n_patched=len(patch))


def difference_interval(baseline: np.ndarray, patched: np.ndarray,
                        confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray,
                                                                 np.ndarray]:
    """Difference of means (patched minus baseline) and its Welch interval, along the last axis.

    For quantities whose difference, not ratio, is the cited number: a symbol's share of a
    profile, whose change ``perf diff`` prints in percentage points; on log values it is
    :func:`log_ratio_interval`. When neither kernel varies at all, the interval is the point.
    """
    diff = patched.mean(axis=-1) - baseline.mean(axis=-1)
    still = (baseline.var(axis=-1) == 0) & (patched.var(axis=-1) == 0)
    # A kernel whose boots agree exactly (an instruction count) is not an error: scipy warns
    # about the lost precision of a zero variance, and the point interval above replaces it.
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = scipy_stats.ttest_ind(patched, baseline, axis=-1, equal_var=False)
        ci = result.confidence_interval(confidence_level=confidence)
    return diff, np.where(still, diff, ci.low), np.where(still, diff, ci.high)


def point_change(baseline: Sequence[float], patched: Sequence[float], *,
                 confidence: float = CONFIDENCE, unit: str = " points") -> Change:
    """mean(patched) - mean(baseline), with its interval: for shares in percent the change in
    percentage points (``perf diff``'s delta column over boots), for a rate that may be 0 (a
    lock a kernel no longer takes) the change in ``unit``. No logarithm is taken."""
    base = _values("baseline", baseline, positive=False)
    patch = _values("patched", patched, positive=False)
    diff, low, high = (float(x) for x in difference_interval(base, patch, confidence))
    return Change(percent=diff, low=low, high=high, n_baseline=len(base),
                  n_patched=len(patch), unit=unit)


def exact_change(baseline: float, patched: float) -> Change:
    """The change between two deterministic values (sizes, instruction counts of one image):
    no spread, so the interval is the point."""
    if baseline <= 0:
        raise ValueError(f"baseline {baseline} <= 0: no percent change. Fix: compare the "
                         "difference instead")
    percent = 100 * (patched / baseline - 1)
    return Change(percent=percent, low=percent, high=percent, n_baseline=1, n_patched=1)
