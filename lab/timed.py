"""Run one build stage with a start line and its elapsed time: ``python -m lab.timed LABEL -- CMD``.

Standard library only, because it runs before the project's virtual environment exists.
"""

from __future__ import annotations

import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    """Run the command after ``--``, report its duration, and return its exit status."""
    if "--" not in argv or argv.index("--") == 0:
        print("usage: python -m lab.timed LABEL -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    split = argv.index("--")
    label, command = " ".join(argv[:split]), argv[split + 1:]
    print(f"==> {label}", flush=True)
    start = time.monotonic()
    status = subprocess.call(command)
    elapsed = time.monotonic() - start
    outcome = "ok" if status == 0 else f"FAILED (exit {status})"
    print(f"<== {label}: {elapsed:.1f} s, {outcome}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
