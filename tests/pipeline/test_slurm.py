"""The pipeline on a real SLURM: a one-node cluster on loopback runs the smoke chapter through
``make reproduce EXECUTOR=slurm``, and a dry run of every chapter shows the jobs the profile
asks SLURM for.

The cluster is Debian's slurmctld, slurmd and munge (``make slurm-deps``), started in the
foreground as the recipe of a cluster without systemd does, with the configuration at
``/etc/slurm/slurm.conf``: the job-step executor inside every job drops ``SLURM_CONF``, so no
other path works. Every daemon is stopped by its pid and every file the test wrote is removed,
whatever the test's outcome. It needs root (the daemons, /etc/slurm); in CI, which runs as
root, a missing prerequisite fails the test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab import ROOT, chapters
from lab.pipeline import cachedir, experiment, publish, reproduce

from ..book import unavailable
from .conftest import make_reproduce, reproduce_env

DAEMONS = {"munged": "/usr/sbin/munged", "slurmctld": "/usr/sbin/slurmctld",
           "slurmd": "/usr/sbin/slurmd"}
PORTS = (6817, 6818)
"""slurmctld's and slurmd's default ports, which the one-node cluster takes on loopback."""
NODE = "localhost"
"""The node's name in slurm.conf, given to slurmd with -N: independent of the machine's name."""
MUNGE_RUN = Path("/run/munge")
MARK = "# written by tests/pipeline/test_slurm.py for a one-node cluster on loopback"
"""The first line of the test's slurm.conf, so a leftover of a killed test is recognised."""


def slurm_conf(state: Path, cpus: int, memory_mb: int) -> str:
    """A one-node cluster on loopback: no accounting, no cgroups (task/affinity pins a job
    to the CPUs it was given), state and logs under ``state``."""
    return "\n".join([
        MARK, "ClusterName=kernelbook", f"SlurmctldHost={NODE}", "SlurmUser=root",
        "AuthType=auth/munge", "CredType=cred/munge", "MpiDefault=none",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/affinity",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none",
        "ReturnToService=2", "MailProg=/bin/true",
        f"StateSaveLocation={state}/state", f"SlurmdSpoolDir={state}/spool",
        f"SlurmctldPidFile={state}/slurmctld.pid", f"SlurmdPidFile={state}/slurmd.pid",
        f"SlurmctldLogFile={state}/slurmctld.log", f"SlurmdLogFile={state}/slurmd.log",
        f"SlurmctldPort={PORTS[0]}", f"SlurmdPort={PORTS[1]}",
        f"NodeName={NODE} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
        f"PartitionName=main Nodes={NODE} Default=YES MaxTime=INFINITE State=UP",
        ""])


def _port_taken(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _memory_mb() -> int:
    """What slurmd will see, less a margin: a node whose RealMemory exceeds it is drained."""
    kib = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
               if line.startswith("MemTotal:"))
    return kib // 1024 * 9 // 10


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each daemon, newest first, and wait; SIGKILL what is still there after 15 s."""
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def _wait_idle(state: Path, timeout: float = 60) -> None:
    """Wait until sinfo shows the node idle; fail with the daemons' logs otherwise."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        proc = subprocess.run(["sinfo", "--noheader", "--format=%t"], capture_output=True,
                              text=True, check=False)
        last = (proc.stdout + proc.stderr).strip()
        if proc.returncode == 0 and last == "idle":
            return
        time.sleep(0.5)
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(state.glob("*.l*"))
                     if p.is_file())
    pytest.fail(f"the one-node SLURM did not come up in {timeout:.0f} s (sinfo: {last!r})\n{logs}")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A one-node SLURM cluster on loopback for the module's tests; yields its state directory.
    Stops every daemon by pid and removes /etc/slurm/slurm.conf (and /run/munge, where it
    made it) on the way out, also when a test failed."""
    if os.geteuid() != 0:
        unavailable("the SLURM test runs slurmctld, slurmd and munged and writes "
                    f"{reproduce.SLURM_CONF}: run it as root (CI does)")
    missing = [name for name, path in DAEMONS.items() if not Path(path).is_file()]
    missing += [t for t in ("sbatch", "sinfo", "squeue", "srun") if not shutil.which(t)]
    if missing:
        unavailable(f"SLURM is not installed (no {', '.join(missing)}): sudo make slurm-deps")
    if reproduce.SLURM_CONF.exists():
        mine = reproduce.SLURM_CONF.read_text().startswith(MARK)
        unavailable(f"{reproduce.SLURM_CONF} exists: " + (
            "a test run that was killed left it; stop its daemons (pkill slurmd slurmctld "
            "munged) and delete it" if mine else
            "this machine is part of a SLURM cluster already, which the test would replace; "
            "run it on a machine without one"))
    if any(map(_port_taken, PORTS)):
        unavailable(f"a port of {PORTS} is taken on loopback: another SLURM is running")
    if not Path("/etc/munge/munge.key").is_file():
        unavailable("munge has no key (/etc/munge/munge.key); reinstall munge: "
                    "sudo make slurm-deps")
    state = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (state / sub).mkdir()
    made_run = not MUNGE_RUN.exists()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        MUNGE_RUN.mkdir(exist_ok=True)
        shutil.chown(MUNGE_RUN, "munge", "munge")
        reproduce.SLURM_CONF.write_text(slurm_conf(state, os.cpu_count() or 1, _memory_mb()))

        def start(argv: list[str], **kw: object) -> None:
            log = (state / f"{Path(argv[0]).name}.out").open("wb")
            procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True,
                                          **kw))  # type: ignore[call-overload]

        start([DAEMONS["munged"], "--foreground"], user="munge", group="munge")
        deadline = time.monotonic() + 10
        while not (MUNGE_RUN / "munge.socket.2").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        start([DAEMONS["slurmctld"], "-D", "-i"])
        start([DAEMONS["slurmd"], "-D", "-N", NODE])
        _wait_idle(state)
        yield state
    finally:
        _stop(procs)
        reproduce.SLURM_CONF.unlink(missing_ok=True)
        if made_run:
            shutil.rmtree(MUNGE_RUN, ignore_errors=True)


@pytest.mark.boot
def test_the_daemons_are_stopped_and_the_config_removed_after_a_failure(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The fixture's clean-up, driven by hand: a test that fails inside the cluster still
    leaves no daemon and no /etc/slurm/slurm.conf behind."""
    if os.geteuid() != 0 or not Path(DAEMONS["slurmctld"]).is_file():
        unavailable("needs root and SLURM: sudo make slurm-deps")
    if reproduce.SLURM_CONF.exists():
        unavailable(f"{reproduce.SLURM_CONF} exists: another SLURM owns this machine")
    gen = slurm.__wrapped__(tmp_path_factory)  # type: ignore[attr-defined]
    next(gen)
    pids = [p.stdout.strip() for p in (subprocess.run(["pgrep", "-x", name], text=True,
                                                      capture_output=True) for name in DAEMONS)]
    assert all(pids), "a daemon did not start"
    with pytest.raises(RuntimeError):
        gen.throw(RuntimeError("a failing test"))
    for name in DAEMONS:
        assert subprocess.run(["pgrep", "-x", name], capture_output=True).returncode == 1, name
    assert not reproduce.SLURM_CONF.exists()


def test_the_records_of_timed_outputs_that_are_gone_are_the_ones_cleared(tmp_path: Path) -> None:
    """Before a SLURM run the driver clears Snakemake's records of the probe, boots and
    comparisons that no longer exist (a published run's), and only those."""
    exp = experiment.load(chapters.get("smoke"), reps=1)
    stale = reproduce.stale_timed_outputs([exp], tmp_path)
    assert stale[0] == f"accel/smoke/{exp.key}.json"
    assert len(stale) == 1 + len(exp.boots) + len(exp.compare_jobs)
    kept = tmp_path / "boot" / "smoke" / exp.key / exp.boots[0][0] / f"rep{exp.boots[0][1]}"
    kept.mkdir(parents=True)
    assert str(kept.relative_to(tmp_path)) not in reproduce.stale_timed_outputs([exp], tmp_path)
    assert len(reproduce.stale_timed_outputs([exp], tmp_path)) == len(stale) - 1


def _profile(tmp_path: Path) -> Path:
    """The project's profile, with the first status check after 2 s instead of 40 (a test's
    jobs are short)."""
    profile = tmp_path / "profile"
    shutil.copytree(reproduce.PROFILE, profile)
    config = profile / "config.yaml"
    config.write_text(config.read_text() + "slurm-init-seconds-before-status-checks: 2\n")
    return profile


def test_the_smoke_chapter_through_slurm(slurm: Path, runs_tmp: Path, tmp_path: Path,
                                         data_unchanged) -> None:
    proc = make_reproduce(runs_tmp, "CHAPTER=smoke", "REPS=1", "ACCEL=tcg", "EXECUTOR=slurm",
                          f"PROFILE={_profile(tmp_path)}", timeout=2400)
    assert proc.returncode == 0, proc.stdout[-4000:]
    (run,) = sorted((runs_tmp / "smoke").iterdir())
    publish.verify_run(run)
    manifest = json.loads((run / "manifest.json").read_text())
    host = manifest["host"]
    # the boots ran on the cluster's node, in one SLURM job (the timed group), and the run
    # is named after the node
    assert host["name"] == NODE, host
    assert re.fullmatch(r"\d+", host["slurm_job"]), host
    assert run.name.endswith(f"-{NODE}")
    assert {v["accel_used"][0] for v in manifest["variants"].values()} == {"tcg", "icount"}
    # SLURM ran the jobs: the plugin keeps a log per job, and the timed group is one of them
    logs = cachedir.work() / ".snakemake" / "slurm_logs"
    group = logs / "group_timed_accel_boot_compare" / f"{host['slurm_job']}.log"
    assert group.is_file(), sorted(p.name for p in logs.iterdir())
    text = group.read_text()
    assert all(f"variant={v}, rep=1" in text for v in manifest["variants"]), text[-2000:]
    # parse and publish ran on this machine, not as SLURM jobs (localrules)
    assert not {p.name for p in logs.iterdir()} & {"rule_parse", "rule_parse_compare",
                                                     "rule_publish"}
    assert subprocess.run(["squeue", "--noheader"], capture_output=True,
                          text=True).stdout.strip() == ""
    data_unchanged()


def planned_jobs(text: str) -> list[dict[str, object]]:
    """The jobs of a Snakemake dry run's listing: rule, wildcards, threads, resources and the
    group job it belongs to (members are listed indented under ``Group job <name>``)."""
    jobs: list[dict[str, object]] = []
    group = None
    for line in text.splitlines():
        if m := re.search(r"\] Group job (\S+)", line):
            group = m.group(1)
        elif m := re.fullmatch(r"( *)(?:local)?rule (\w+):", line):
            jobs.append({"rule": m.group(2), "group": group if m.group(1) else None,
                         "wildcards": {}, "resources": {}, "threads": 1})
        elif jobs and (m := re.fullmatch(r" +(wildcards|resources|threads): (.*)", line)):
            value: object = m.group(2)
            if m.group(1) != "threads":
                value = dict(kv.split("=", 1) for kv in m.group(2).split(", "))
            jobs[-1][m.group(1)] = value
        if line and not line.startswith(" ") and "Group job" not in line and group \
                and not line.startswith("["):
            group = None
    return jobs


def test_a_dry_run_of_every_chapter_asks_slurm_for_one_timed_node_per_chapter(
        slurm: Path, runs_tmp: Path) -> None:
    """The profile on the whole book: each variant's kernel is one group job; each chapter's
    probe, boots and comparisons are one group job on a whole node, asking for each boot's own
    time and memory and the node's CPUs."""
    a = argparse.Namespace(chapters="all", variants="", reps="", accel="",
                           python=sys.executable, executor="slurm", profile="")
    argv = reproduce.snakemake(a, cachedir.work(), "--dry-run", "--forceall")
    quiet = argv.index("--quiet")
    del argv[quiet:quiet + 5]  # the job listing is what the test reads
    proc = subprocess.run(argv, cwd=ROOT, env=reproduce_env(runs_tmp), text=True,
                          capture_output=True, timeout=600, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    jobs = planned_jobs(proc.stdout + proc.stderr)
    cores = str(reproduce.largest_node())
    timed = [j for j in jobs if j["rule"] in ("accel", "boot", "compare")]
    booted = {c.name: experiment.load(c) for c in chapters.select("all")}
    booted = {name: exp for name, exp in booted.items() if exp.boots}
    assert {j["wildcards"]["chapter"] for j in timed} == set(booted)  # type: ignore[index]
    for name, exp in booted.items():
        mine = [j for j in timed if j["wildcards"]["chapter"] == name]  # type: ignore[index]
        # one group job per chapter holds its probe, every boot and every comparison
        assert {j["group"] for j in mine} == {"timed"}, name
        assert [j["rule"] for j in mine].count("accel") == 1
        assert sum(j["rule"] == "boot" for j in mine) == len(exp.boots), name
        for job in mine:
            assert job["resources"]["slurm_extra"] == "--exclusive", job  # type: ignore[index]
        for job in (j for j in mine if j["rule"] == "boot"):
            variant = exp.variants[job["wildcards"]["variant"]]  # type: ignore[index]
            assert job["threads"] == cores
            assert job["resources"]["runtime"] == str(  # type: ignore[index]
                math.ceil(exp.boot_timeout / 60) + 1)
            assert job["resources"]["mem_mb"] == str(  # type: ignore[index]
                variant.machine.memory_mb + 1024)
    # the group jobs are disconnected per chapter: as many headers as chapters that boot
    assert (proc.stdout + proc.stderr).count("] Group job timed") == len(booted)
    # each build is a group job with its variant's configuration, guest programs and
    # inspection, so a guest module is built on the node that holds the build directory
    builds = [j for j in jobs if j["rule"] == "build"]
    assert builds and {j["group"] for j in jobs if j["rule"] in (
        "config", "build", "tools", "inspect")} == {"kernel"}
    assert (proc.stdout + proc.stderr).count("] Group job kernel") == len(builds)
    assert {(j["resources"]["runtime"], j["resources"]["mem_mb"], j["threads"])  # type: ignore[index]
            for j in builds} == {("120", "8000", cores)}
    # what runs once for all (root, source, series, layer) is a job of its own
    assert {j["group"] for j in jobs if j["rule"] in ("root", "source", "series")} == {None}
