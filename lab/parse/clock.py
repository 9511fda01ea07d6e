"""Clock health of one boot, read from its serial console (``raw/<variant>/rep<N>/console.log``).

Under TCG a vCPU is a host thread that the host deschedules at will, so the kernel's
clocksource watchdog, which compares the TSC with the HPET about every half second, sees skews
and unanswered cross-CPU reads that no real machine shows. It then marks the TSC unstable and
switches the clock to the HPET in the middle of a measurement: a time taken while that happened
mixes two clocks and is suspect. The qpw guest's own check (``chapters/qpw/guest/common.sh``)
cannot see this: it greps for mainline's wording ``Marking clocksource 'tsc' as unstable``,
which 7.2.13 does not print (it names tsc without quotes and says no "as").

Only what happens inside the *measured window* is a flag against a boot's timings: the window
opens at the kernel's ``Run <path> as init process`` line, because every workload runs under
that init, and closes at the guest's ``KB-DONE rc=<n>`` line (:data:`DONE`), printed
after the last workload, or at the end of the console if the guest never printed it. Lines
after ``KB-DONE`` are left out because nothing is measured then: in the committed consoles, 17
of the watchdog timeouts after init come between ``KB-DONE`` and the reset, and none of them is
in the boot's ``dmesg.txt``, which the guest saves after its last workload.

Wordings, as 7.2.13 prints them in the committed consoles:

- ``clocksource: Switched to clocksource <name>``
- ``clocksource: Marking clocksource tsc unstable due to frequency skew``, followed by
  ``clocksource: Watchdog hpet interval: ...ns`` / ``clocksource: Clocksource tsc interval:
  ...ns`` (the skew's evidence, not timeouts) and ``tsc: Marking TSC unstable due to clocksource
  watchdog``
- ``tsc: Marking TSC unstable due to TSCs unsynchronized`` (during boot)
- ``clocksource: Watchdog remote CPU <n> read timed out``
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DONE = re.compile(r"^KB-DONE rc=(\d+)")
"""The line the guest's init (``lab/pipeline/guest/guest-init.sh``) prints when its workloads are
done: the boot stage waits for it, and this parser closes the measured window at it."""

_KERNEL_LINE = re.compile(r"\[\s*(\d+\.\d+)\] (.*)")
"""A kernel log line on the console. Searched anywhere in a line, not only at its start:
the console interleaves the guest's output with the kernel's, so a kernel line can follow a
guest line that had no newline yet (``KB-DONE rc=0[   63.906070] sysrq: Resetting``)."""

_INIT = re.compile(r"Run \S+ as init process")
_SWITCH = re.compile(r"clocksource: Switched to clocksource (\S+)")
_TSC_UNSTABLE = re.compile(r"Marking TSC unstable due to"
                           r"|Marking clocksource '?tsc'? (as )?unstable")
"""Either of the two lines the kernel prints when it gives up on the TSC; the second form
also accepts mainline's quoted ``'tsc' as unstable``, so a newer kernel is not missed."""

_WATCHDOG_TIMEOUT = re.compile(r"clocksource: Watchdog .*timed out")

TSC_CLOCKSOURCES = ("tsc-early", "tsc")
"""The TSC under its two names: ``tsc-early`` until the refined calibration, then ``tsc``.
Under TCG the refinement often lands after init, so the hand-over is a switch inside the
window. It is not a flag: the counter stays the same and only its rate is corrected (by at
most 0.33 % in the committed consoles, 2587.632 to 2596.139 MHz), with no watchdog involved;
it stays visible in :attr:`ClockHealth.switches`."""


@dataclass(frozen=True)
class ClockHealth:
    """What the console says about the guest's clock during one boot."""

    window_start: float | None
    """Timestamp (s) of the ``Run <path> as init process`` line, where the measured window
    opens. None when the console has no such line before ``KB-DONE`` (a boot that died before
    init, or one booted ``quiet``, whose console hides the kernel's informational lines): the
    whole console up to ``KB-DONE`` is then the window, and :meth:`flags` says the clock could
    not be checked, because a console that cannot show a problem is no evidence of health."""

    boot_clocksource: str
    """The clocksource in force when the window opened (the last switch before it; "" if none):
    a boot that starts its workloads on the HPET times everything with a different clock."""

    tsc_unstable: bool
    """The kernel marked the TSC unstable inside the window, so a measurement in flight lost
    its clock."""

    switches: tuple[str, ...]
    """Clocksources switched to inside the window, in order."""

    watchdog_timeouts: int
    """Watchdog lines inside the window that report a timed-out read of another CPU's clock:
    the watchdog could not even check the clock, a sign that a vCPU was not running when a
    measurement may have been. The ``Watchdog hpet interval`` lines that follow a frequency
    skew are the skew's evidence, not timeouts, and are not counted. The kernel prints the
    remote-read line (``Watchdog remote CPU <n> read timed out``) once per boot
    (``pr_info_once()`` in ``kernel/time/clocksource.c``), so for it 1 means at least one, and
    a boot that printed it before the window cannot show one inside it."""

    unstable_before_window: bool
    """The TSC was marked unstable during boot, before the window (e.g. ``TSCs
    unsynchronized``): not a flag against this boot's timings, which all ran on the clock the
    kernel then chose, but a fact a reader should see beside them."""

    timeout_before_window: bool = False
    """The once-per-boot timeout line came before the window: the window's count of 0 then says
    nothing (see :attr:`watchdog_timeouts`). Not a flag, a limit of the evidence."""

    def flags(self) -> tuple[str, ...]:
        """Short words for each problem inside the window; empty when the clock was healthy.

        A switch between the TSC's own two names (:data:`TSC_CLOCKSOURCES`) is not a problem;
        a switch to any other clocksource is.
        """
        words = []
        if self.window_start is None:
            words.append("clock not checked: no init line on the console")
        if self.tsc_unstable:
            words.append("TSC marked unstable")
        words += [f"clocksource switched to {name}" for name in self.switches
                  if name not in TSC_CLOCKSOURCES]
        if self.watchdog_timeouts:
            n = self.watchdog_timeouts
            words.append(f"{n} watchdog timeout{'s' if n > 1 else ''}")
        return tuple(words)

    @property
    def flagged(self) -> bool:
        """Whether any timing of this boot is suspect (:meth:`flags` is not empty)."""
        return bool(self.flags())


def parse_console(text: str, source: str = "console text") -> ClockHealth:
    """The clock health of one boot from its serial console's text.

    Raises ValueError naming ``source`` when the text holds no kernel log line at all and no
    end marker: a file that is not a console (a workload's output, an empty capture) would
    otherwise read as a healthy clock. A boot whose kernel printed nothing to the console
    (``loglevel=0``, which keeps a debug kernel's reports in its log) ends with the marker
    and reads as not checked.
    """
    raw = text.splitlines()
    if not any(_KERNEL_LINE.search(line) or DONE.match(line) for line in raw):
        raise ValueError(f"{source}: no kernel log line ('[ seconds] message'), so this is not "
                         "the serial console of a boot. Fix: pass a boot's console.log "
                         "(raw/<variant>/rep<N>/console.log.gz), not a workload's output.")
    end = next((i for i, line in enumerate(raw) if DONE.match(line)), len(raw))
    lines = [m.groups() for line in raw[:end] if (m := _KERNEL_LINE.search(line))]
    start = next((i for i, (_, msg) in enumerate(lines) if _INIT.search(msg)), None)
    before, window = (lines[:start], lines[start:]) if start is not None else ([], lines)
    booted_on = [m[1] for _, msg in before if (m := _SWITCH.search(msg))]
    return ClockHealth(
        window_start=float(lines[start][0]) if start is not None else None,
        boot_clocksource=booted_on[-1] if booted_on else "",
        tsc_unstable=any(_TSC_UNSTABLE.search(msg) for _, msg in window),
        switches=tuple(m[1] for _, msg in window if (m := _SWITCH.search(msg))),
        watchdog_timeouts=sum(bool(_WATCHDOG_TIMEOUT.search(msg)) for _, msg in window),
        unstable_before_window=any(_TSC_UNSTABLE.search(msg) for _, msg in before),
        timeout_before_window=any(_WATCHDOG_TIMEOUT.search(msg) for _, msg in before),
    )
