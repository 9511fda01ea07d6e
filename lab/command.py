"""Run the external commands of a stage with a log file and errors that say what to do.

Every stage shells out (apt-get, mmdebstrap, git, make, qemu). The reader who meets a failure
needs the command line, the log file and the next step, not a Python traceback, so all of them
go through :func:`run`, and all pipeline failures are a :class:`StageError`.
"""

from __future__ import annotations

import ctypes
import shlex
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any


class StageError(RuntimeError):
    """A pipeline stage failed; the message names the file or command and the fix."""


HOST_TOOLS: dict[str, str] = {
    "qemu-system-x86_64": "qemu-system-x86",
    "mmdebstrap": "mmdebstrap",
    "bwrap": "bubblewrap",
    "git": "git",
    "apt-get": "apt",
    "apt-cache": "apt",
    "dpkg": "dpkg",
    "dpkg-deb": "dpkg",
    "tar": "tar",
    "xz": "xz-utils",
    # mmdebstrap --mode=unshare maps the root's users onto the user's subordinate ids with these
    "newuidmap": "uidmap",
    "newgidmap": "uidmap",
}
"""Host programs the pipeline calls, mapped to the Debian package that provides each."""


def require_tools(names: Sequence[str], path: str | None = None) -> None:
    """Fail before any work starts if a host program is missing, naming the package to install.

    ``path`` replaces ``$PATH`` for the lookup (the tests use it to simulate a bare host).
    """
    missing = [n for n in names if shutil.which(n, path=path) is None]
    if missing:
        pkgs = " ".join(sorted({HOST_TOOLS.get(n, n) for n in missing}))
        raise StageError(
            f"missing host tool(s): {', '.join(missing)}; install them with "
            f"`apt-get install {pkgs}` (as root), or run `make pipeline-deps`"
        )


def quote(argv: Sequence[str | Path]) -> str:
    """Render ``argv`` as a shell command a reader can paste to reproduce a failure."""
    return shlex.join(str(a) for a in argv)


def run(
    argv: Sequence[str | Path],
    *,
    log: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    what: str = "command",
    stdin: IO[Any] | None = None,
    stdout: IO[Any] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv``; on failure raise :class:`StageError` naming the command and the log.

    With ``log`` the output is appended to that file (long stages: builds, root creation);
    without it, output is captured and the tail is quoted in the error. ``stdin``/``stdout``
    connect pipes and files (binary streams) instead; ``check=False`` returns failures too.
    """
    cmd = [str(a) for a in argv]
    try:
        if stdout is not None:
            proc = subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout, stdin=stdin,
                                  stdout=stdout, stderr=subprocess.PIPE, check=False)
            proc.stderr = proc.stderr.decode(errors="replace")
        elif log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a") as fh:
                fh.write(f"$ {quote(cmd)}\n")
                fh.flush()
                proc = subprocess.run(
                    cmd, cwd=cwd, env=env, timeout=timeout, text=True,
                    stdout=fh, stderr=subprocess.STDOUT, check=False,
                )
        else:
            proc = subprocess.run(
                cmd, cwd=cwd, env=env, timeout=timeout, text=True,
                capture_output=True, check=False,
            )
    except subprocess.TimeoutExpired as exc:
        raise StageError(f"{what} timed out after {timeout} s: {quote(cmd)}") from exc
    except FileNotFoundError as exc:
        raise StageError(f"{what}: program not found: {cmd[0]}") from exc
    if proc.returncode != 0 and check:
        if log is not None:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
            where = f"full log: {log}"
        else:
            tail = "\n".join(((proc.stdout or "") + (proc.stderr or "")).splitlines()[-25:])
            where = "reproduce with the command above"
        raise StageError(
            f"{what} failed (exit {proc.returncode}): {quote(cmd)}\n{tail}\n{where}"
        )
    return proc


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """``preexec_fn`` that has the kernel send ``sig`` to the child when its parent dies.

    QEMU runs in its own session (a Ctrl-C must not reach the guest half-way through a write),
    so a ``kill -9`` of the run's process group does not reach it; this does. Linux only."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


PR_SET_PDEATHSIG = 1
"""From <linux/prctl.h>."""
