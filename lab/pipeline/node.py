"""The machine a stage runs on: its name, CPU, cores and, under SLURM, the job holding it.

A run made on one machine compares its own boots; runs made on several (a cluster's nodes, a
second laptop) compose only when each says where it was taken. Builds, the accelerator probe
and boots record this identity in their stamps; publish writes the boots' node into the
manifest's ``host``, refuses a run whose boots ran on more than one node, and names the run
after it, so two machines publishing in the same second never make the same run id.
"""

from __future__ import annotations

import os
import platform
import re
import socket
from pathlib import Path
from typing import Any

from lab.command import StageError


def cpu_model() -> str:
    """``model name`` of /proc/cpuinfo (x86), ``unknown`` where the file has none."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def cores() -> int:
    """The CPUs this process may run on: its affinity, which SLURM (``task/affinity``) and
    ``taskset`` narrow, not ``os.cpu_count()``, which counts the whole machine. ``make -j`` and
    QEMU's threads follow it, so a job given 4 of a node's 32 CPUs uses 4."""
    return len(os.sched_getaffinity(0))


def name() -> str:
    """The machine's short host name in the characters a run id allows (``vm``, ``node07``):
    SLURM's node name where the stage runs in a SLURM job, else the host name."""
    raw = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    return re.sub(r"[^A-Za-z0-9-]+", "-", raw).strip("-") or "unnamed"


def identity() -> dict[str, Any]:
    """What the manifest says of the machine: name, CPU model, its cores and the ones this
    stage had, the host kernel and architecture, and the SLURM job that held it (absent when
    the stage did not run in one)."""
    job = os.environ.get("SLURM_JOB_ID")
    return {"name": name(), "cpu_model": cpu_model(), "cores": os.cpu_count(),
            "affinity": cores(), "kernel": platform.release(), "machine": platform.machine(),
            **({"slurm_job": job} if job else {})}


def of_boots(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The machine a run's boots ran on (their stamps' ``node``), which its manifest calls
    ``host``; this machine's where the run booted nothing (a build-only selection) or its boots
    predate node stamps. Boots on more than one node are refused: a comparison of two kernels
    booted on two machines would measure the machines too."""
    nodes = {r["node"]["name"]: r["node"] for r in records if r.get("node")}
    if len(nodes) > 1:
        raise StageError(
            f"the run's boots ran on {len(nodes)} machines ({', '.join(sorted(nodes))}); one "
            "run's boots must share one machine. Under SLURM the profile keeps a chapter's "
            "probe and boots in one group job on one node (workflow/profiles/slurm, groups:)")
    # the job's share of the machine varies per stage, the machine does not
    if not nodes:
        return {k: v for k, v in identity().items() if k != "affinity"}
    (host,) = nodes.values()
    # the SLURM jobs are all that held the boots (one, where the profile grouped them)
    jobs = sorted({r["node"]["slurm_job"] for r in records if r.get("node", {}).get("slurm_job")})
    return {**{k: v for k, v in host.items() if k not in ("affinity", "slurm_job")},
            **({"slurm_job": ",".join(jobs)} if jobs else {})}
