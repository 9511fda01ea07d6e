"""Percent change of patched against baseline with a bootstrap interval, and the verdict rule.

A kernel comparison is only worth stating with its spread: under emulation one boot can differ
from the next by more than the effect under test. Every change the book shows therefore comes
with a 95 % percentile-bootstrap confidence interval over repetitions (each repetition one boot),
and every verdict on a cited change is decided from that interval alone, by the rule in
:func:`judge_change`, never typed by hand.

The bootstrap resamples the repetitions of each kernel independently (the boots of the baseline
and of the patched kernel are not paired: boot 2 of one has nothing to do with boot 2 of the
other). It draws :data:`N_RESAMPLES` resamples from a generator seeded with :data:`SEED`, so the
interval, and the verdict, are the same on every build of the book from the same data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

N_RESAMPLES = 10_000
"""Bootstrap resamples: enough that the 2.5 and 97.5 percentiles move by far less than shown."""

SEED = 20260526
"""Fixed generator seed (the date of the v1 posting), so a rebuilt book shows the same interval."""

CONFIDENCE = 0.95
"""Coverage of the percentile interval."""

LEVEL = f"{CONFIDENCE * 100:.0f} %"
"""The coverage as the book prints it ("95 %")."""

REPRODUCED = "reproduced"
DIRECTION_ONLY = "direction only"
NOT_REPRODUCIBLE = "not reproducible here"
VERDICTS = (REPRODUCED, DIRECTION_ONLY, NOT_REPRODUCIBLE)
"""The verdicts a judged entry can get; the scorecard page defines them for the reader."""


class NotEnoughRepetitions(ValueError):
    """Fewer than two repetitions of a kernel: there is no spread, so no interval and no verdict."""


@dataclass(frozen=True)
class Change:
    """Patched mean against baseline mean in percent, with its bootstrap interval."""

    percent: float
    low: float
    high: float
    n_baseline: int
    n_patched: int

    @property
    def sign(self) -> int:
        """+1 or -1 when the whole interval lies on one side of zero, 0 when it contains zero."""
        if self.low > 0:
            return 1
        if self.high < 0:
            return -1
        return 0

    def interval(self) -> str:
        """The interval as the book prints it, e.g. "-12.5 to +40.0 %"."""
        return f"{self.low:+.1f} to {self.high:+.1f} %"

    def describe(self) -> str:
        """The change with its interval, e.g. "+8.1 % (95 % CI -12.5 to +40.0 %)"."""
        return f"{self.percent:+.1f} % ({LEVEL} CI {self.interval()})"


def _values(name: str, values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected a flat list of repetitions, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: {array.tolist()} holds a NaN or infinite value; a missing "
                         "repetition must be left out, not recorded as NaN")
    if len(array) < 2:
        raise NotEnoughRepetitions(
            f"{name}: {len(array)} repetition(s); a confidence interval needs at least 2 per "
            "kernel. Fix: measure more repetitions (reps: in experiments/<chapter>.yaml)")
    return array


def percent_change(baseline: Sequence[float], patched: Sequence[float], *,
                   n_resamples: int = N_RESAMPLES, seed: int = SEED,
                   confidence: float = CONFIDENCE) -> Change:
    """100 * (mean(patched) / mean(baseline) - 1), and its percentile-bootstrap interval.

    Raises :class:`NotEnoughRepetitions` when either kernel has fewer than two repetitions, and
    ``ValueError`` when a baseline value is not positive: a percent change of a quantity that
    can be zero (a resample of zeros) or negative has no meaning, and such values (a stopped
    clock, an error code) must be excluded, and counted, before this call.
    """
    base = _values("baseline", baseline)
    patch = _values("patched", patched)
    if np.any(base <= 0):
        raise ValueError(f"baseline {base.tolist()} holds a value <= 0, so a resample can have "
                         "mean 0 and the percent change is undefined. Fix: exclude such values "
                         "(and say how many) before comparing")
    rng = np.random.default_rng(seed)
    base_means = base[rng.integers(0, len(base), (n_resamples, len(base)))].mean(axis=1)
    patch_means = patch[rng.integers(0, len(patch), (n_resamples, len(patch)))].mean(axis=1)
    resampled = 100 * (patch_means / base_means - 1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return Change(percent=float(100 * (patch.mean() / base.mean() - 1)), low=float(low),
                  high=float(high), n_baseline=len(base), n_patched=len(patch))


@dataclass(frozen=True)
class Verdict:
    """A verdict and the one-line reason the scorecard prints beside it."""

    verdict: str
    reason: str


def _sign_word(sign: int) -> str:
    return {1: "an increase", -1: "a decrease", 0: "no change"}[sign]


def judge_change(change: Change, cited_percent: float, environment: str) -> Verdict:
    """Judge our change against the author's, from our interval alone.

    * the interval excludes 0 on the cited side and contains the cited change: reproduced;
    * it excludes 0 on the cited side but not the cited change: direction only;
    * it contains 0, or lies on the other side: not reproducible here. A cited change of
      exactly 0 can never be reproduced this way, because an interval cannot prove "no change"
      without a margin the author did not give.

    ``environment`` names what limits the measurement (e.g. "TCG, 8 vCPUs on 2 host cores");
    it goes into the reason when the spread or the direction rules the cited change out.
    """
    cited_sign = int(np.sign(cited_percent))
    cited = f"{cited_percent:+.1f} %"
    ci = f"our {LEVEL} CI {change.interval()}"
    if change.sign == 0:
        inside = change.low <= cited_percent <= change.high
        return Verdict(NOT_REPRODUCIBLE, (
            f"{ci} contains 0{' and the cited ' + cited if inside else ''}: the spread between "
            f"boots ({environment}) is too wide to tell {cited} from no change"))
    if change.sign != cited_sign:
        return Verdict(NOT_REPRODUCIBLE, (
            f"{ci} is {_sign_word(change.sign)}, the cited {cited} is {_sign_word(cited_sign)}: "
            f"in this environment ({environment}) the change goes the other way"))
    if change.low <= cited_percent <= change.high:
        return Verdict(REPRODUCED, f"{ci} excludes 0 and contains the cited {cited}")
    side = "above" if change.low > cited_percent else "below"
    return Verdict(DIRECTION_ONLY, (
        f"{ci} excludes 0 with the cited sign but lies {side} the cited {cited} "
        f"({environment})"))
