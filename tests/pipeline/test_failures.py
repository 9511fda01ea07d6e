"""Every failure the pipeline promises to name, triggered for real through `make reproduce`.

Each test checks the message (what failed, where, what to do) and that data/ is unchanged:
a failed run must never leave a partial result behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from lab import ROOT, cachedir

from .conftest import EXPERIMENTS, make_reproduce


def exp(name: str) -> str:
    return f"EXPERIMENT={EXPERIMENTS / name}.yaml"


def test_series_conflict_names_patch_file_hunk_and_command(data_unchanged) -> None:
    proc = make_reproduce("CHAPTER=smoketest-conflict", exp("conflict"))
    assert proc.returncode != 0
    out = proc.stdout
    assert "0002-init-conflicting-context.patch does not apply" in out
    assert "file init/main.c, hunk #2 (@@ -1010,6 +1010,7 @@)" in out
    assert "reproduce: export GIT_INDEX_FILE=" in out
    assert "apply --cached --check -v" in out
    data_unchanged()


def test_reproduce_command_of_a_conflict_shows_the_same_failure() -> None:
    proc = make_reproduce("CHAPTER=smoketest-conflict", exp("conflict"))
    line = next(x for x in proc.stdout.splitlines() if x.startswith("reproduce: export"))
    replay = subprocess.run(["bash", "-c", line.removeprefix("reproduce: ")], text=True,
                            capture_output=True, check=False)
    assert replay.returncode != 0
    assert "patch failed: init/main.c:1010" in replay.stderr


def test_dropped_option_is_listed_with_its_fragment(data_unchanged) -> None:
    proc = make_reproduce("CHAPTER=smoketest-dropped", exp("dropped"))
    assert proc.returncode != 0
    assert "olddefconfig dropped or changed 1 requested option(s)" in proc.stdout
    assert "CONFIG_EXT4_FS=y (from dropped.config) is now not set" in proc.stdout
    assert "CONFIG_PRINTK_TIME" not in proc.stdout.split("dropped or changed")[1][:300]
    data_unchanged()


def _bare_path(tmp_path: Path, without: str) -> str:
    """A PATH with every host program except ``without``, as on a host lacking its package."""
    bare = tmp_path / "bin"
    bare.mkdir()
    for d in ("/usr/local/bin", "/usr/bin", "/usr/sbin"):
        for prog in Path(d).iterdir():
            if prog.name != without and not (bare / prog.name).exists():
                (bare / prog.name).symlink_to(prog)
    return str(bare)


def test_missing_tool_names_the_package(tmp_path: Path, data_unchanged) -> None:
    proc = make_reproduce("CHAPTER=smoke", env={"PATH": _bare_path(tmp_path,
                                                                   "qemu-system-x86_64")})
    assert proc.returncode != 0
    assert ("missing host tool(s): qemu-system-x86_64; install them with "
            "`apt-get install qemu-system-x86`") in proc.stdout
    data_unchanged()


def test_guest_panic_is_detected(data_unchanged) -> None:
    proc = make_reproduce("CHAPTER=smoketest", exp("crash"))
    assert proc.returncode != 0
    assert ("smoketest/baseline/rep1: guest kernel panic: "
            in proc.stdout), proc.stdout[-3000:]
    assert "Kernel panic - not syncing: sysrq triggered crash" in proc.stdout
    data_unchanged()


def test_guest_hang_hits_the_boot_timeout(data_unchanged) -> None:
    start = time.monotonic()
    proc = make_reproduce("CHAPTER=smoketest", exp("hang"))
    assert proc.returncode != 0
    assert "guest hang: no KB-DONE marker within 20 s" in proc.stdout, proc.stdout[-3000:]
    assert time.monotonic() - start < 300
    data_unchanged()


def test_truncated_guest_output_is_refused(data_unchanged) -> None:
    proc = make_reproduce("CHAPTER=smoketest", exp("truncate"))
    assert proc.returncode != 0
    assert "guest ended before it finished (no KB-DONE marker): its output is truncated" \
        in proc.stdout, proc.stdout[-3000:]
    data_unchanged()


def _fake_qemu(tmp_path: Path) -> str:
    """A qemu-system-x86_64 whose KVM guests hang (as on this project's machines) and whose
    other guests are the real QEMU's."""
    real = subprocess.run(["bash", "-c", "command -v qemu-system-x86_64"], text=True,
                          capture_output=True, check=True).stdout.strip()
    fake = tmp_path / "fakebin"
    fake.mkdir()
    script = fake / "qemu-system-x86_64"
    script.write_text(f'#!/bin/sh\ncase " $* " in *" kvm "*) exec sleep 600;; esac\n'
                      f'exec {real} "$@"\n')
    script.chmod(0o755)
    return f"{fake}:{os.environ['PATH']}"


def test_kvm_present_but_broken_fails_when_asked_for(tmp_path: Path, data_unchanged) -> None:
    env = {"PATH": _fake_qemu(tmp_path), "KERNEL_BOOK_PROBE_TIMEOUT": "5"}
    proc = make_reproduce("CHAPTER=smoketest", exp("ok"), "ACCEL=kvm", "REPS=1", env=env)
    assert proc.returncode != 0
    assert "ACCEL=kvm but KVM does not work here" in proc.stdout, proc.stdout[-3000:]
    if os.access("/dev/kvm", os.R_OK | os.W_OK):
        assert "probe guest hung: no exit within 5 s (kvm is present but broken)" in proc.stdout
    assert "run with ACCEL=tcg" in proc.stdout
    data_unchanged()


def test_kvm_present_but_broken_falls_back_to_tcg(tmp_path: Path, runs_tmp, data_unchanged
                                                  ) -> None:
    env = {"PATH": _fake_qemu(tmp_path), "KERNEL_BOOK_PROBE_TIMEOUT": "5", **runs_tmp}
    proc = make_reproduce("CHAPTER=smoketest", exp("ok"), "ACCEL=auto", "REPS=1", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    (run,) = (Path(runs_tmp["KERNEL_BOOK_RUNS"]) / "smoketest").iterdir()
    variant = json.loads((run / "manifest.json").read_text())["variants"]["baseline"]
    assert variant["accel_used"] == ["tcg"]
    assert "fell back to TCG" in variant["accel_why"][0]
    data_unchanged()


def test_interrupted_run_leaves_nothing_and_resumes(runs_tmp, data_unchanged) -> None:
    args = ["make", "--no-print-directory", "reproduce", "CHAPTER=smoketest", exp("ok"),
            "ACCEL=tcg", "REPS=2"]
    env = {**os.environ, **runs_tmp}
    # A test run started as a background job inherits an ignored SIGINT, which make would
    # keep ignoring: give the run the default disposition, as in a terminal.
    proc = subprocess.Popen(args, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))
    reader.start()
    deadline = time.monotonic() + 1200
    run_id, done = "", []
    # Interrupt once exactly one repetition has finished; Snakemake may run either first.
    while time.monotonic() < deadline and proc.poll() is None:
        starts = [x for x in list(lines) if x.startswith("reproduce smoketest: run")]
        run_id = starts[0].split()[3] if starts else ""
        work = cachedir.cache_root() / "work/runs/smoketest" / run_id / "baseline"
        done = [r for r in (1, 2) if (work / f"rep{r}" / "run.json").is_file()]
        if run_id and len(done) == 1:
            break
        time.sleep(0.5)
    assert run_id and proc.poll() is None, "".join(lines)[-3000:]
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=120)
    reader.join(timeout=10)
    assert proc.returncode != 0
    published = Path(runs_tmp["KERNEL_BOOK_RUNS"]) / "smoketest"
    assert not published.exists() or not any(published.iterdir()), "partial run left behind"
    data_unchanged()

    again = make_reproduce("CHAPTER=smoketest", exp("ok"), "ACCEL=tcg", "REPS=2",
                           env=runs_tmp)
    assert again.returncode == 0, again.stdout[-3000:]
    assert f"reproduce smoketest: run {run_id}" in again.stdout
    (finished,) = done
    assert f">> run      smoketest/baseline/rep{3 - finished}" in again.stdout
    assert f">> run      smoketest/baseline/rep{finished}" not in again.stdout
    assert ">> build" not in again.stdout
    assert [p.name for p in published.iterdir()] == [run_id]
