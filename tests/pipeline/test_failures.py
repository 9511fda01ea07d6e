"""Every failure the pipeline promises to name, triggered through `make reproduce`.

Each test checks the message (what failed, where, what to do) and that data/ is unchanged:
a failed run must never leave a partial result behind. The failure chapters are in
``chapters/`` beside this file. A guest that panics, hangs or ends early is a QEMU on the
PATH that replays a real captured console (``fixtures/``) or never finishes: how the boot
stage reads a console is proved on those consoles in test_vm.py, and these tests prove that
the failure reaches the reader of `make reproduce`, without booting a kernel for it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from lab import ROOT
from lab.pipeline import cachedir, experiment

from .conftest import FIXTURES, TEST_CHAPTERS, make_reproduce, reproduce_env


def test_series_conflict_names_patch_file_hunk_and_command(runs_tmp, data_unchanged) -> None:
    proc = make_reproduce(runs_tmp, "CHAPTER=smoketest-conflict")
    assert proc.returncode != 0
    out = proc.stdout
    assert "0002-init-conflicting-context.patch does not apply" in out
    assert "file init/main.c, hunk #2 (@@ -1010,6 +1010,7 @@)" in out
    assert "reproduce: export GIT_INDEX_FILE=" in out
    assert "apply --cached --check -v" in out
    data_unchanged()


def test_reproduce_command_of_a_conflict_shows_the_same_failure(runs_tmp) -> None:
    proc = make_reproduce(runs_tmp, "CHAPTER=smoketest-conflict")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("reproduce: export"))
    replay = subprocess.run(["bash", "-c", line.removeprefix("reproduce: ")], text=True,
                            capture_output=True, check=False)
    assert replay.returncode != 0
    assert "patch failed: init/main.c:1010" in replay.stderr


def test_dropped_option_is_listed_with_its_fragment(runs_tmp, data_unchanged) -> None:
    proc = make_reproduce(runs_tmp, "CHAPTER=smoketest-dropped")
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


def test_missing_tool_names_the_package(tmp_path: Path, runs_tmp, data_unchanged) -> None:
    proc = make_reproduce(runs_tmp, "CHAPTER=smoke",
                          env={"PATH": _bare_path(tmp_path, "qemu-system-x86_64")})
    assert proc.returncode != 0
    assert ("missing host tool(s): qemu-system-x86_64; install them with "
            "`apt-get install qemu-system-x86`") in proc.stdout
    data_unchanged()


def test_a_broken_chapter_fails_before_any_stage(tmp_path: Path, runs_tmp,
                                                 data_unchanged) -> None:
    chapters = tmp_path / "chapters"
    (chapters / "typo").mkdir(parents=True)
    text = (TEST_CHAPTERS / "smoketest" / "chapter.yaml").read_text()
    (chapters / "typo" / "chapter.yaml").write_text(
        text.replace("parser: keyvalue", "parser: keyvalu") + "repetitions: 3\n")
    proc = make_reproduce(runs_tmp, "CHAPTER=typo",
                          env={"KERNEL_BOOK_CHAPTERS": str(chapters)})
    assert proc.returncode != 0
    where = chapters / "typo" / "chapter.yaml"
    assert f"{where}: does not match workflow/schemas/chapter.schema.yaml" in proc.stdout
    assert "Additional properties are not allowed ('repetitions' was unexpected)" in proc.stdout
    assert ">> " not in proc.stdout, "a stage ran before the chapter was validated"
    (chapters / "typo" / "chapter.yaml").write_text(text.replace("parser: keyvalue",
                                                                 "parser: keyvalu"))
    proc = make_reproduce(runs_tmp, "CHAPTER=typo",
                          env={"KERNEL_BOOK_CHAPTERS": str(chapters)})
    assert f"{where}:\n  workloads[0].parser: unknown parser 'keyvalu'" in proc.stdout
    assert ">> " not in proc.stdout
    data_unchanged()


def _fake_qemu(tmp_path: Path, body: str) -> dict[str, str]:
    """An environment whose qemu-system-x86_64 is a shell script running ``body`` (with
    ACCEL=tcg no probe runs, so only the boots see it)."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    script = fake / "qemu-system-x86_64"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return {"PATH": f"{fake}:{os.environ['PATH']}"}


def test_guest_panic_is_detected(tmp_path: Path, runs_tmp, data_unchanged) -> None:
    proc = make_reproduce(runs_tmp, "CHAPTER=smoketest", "ACCEL=tcg", "REPS=1",
                          env=_fake_qemu(tmp_path, f"cat {FIXTURES / 'console-panic.log'}"))
    assert proc.returncode != 0
    assert "smoketest/baseline/rep1: guest kernel panic: " in proc.stdout, proc.stdout[-3000:]
    assert "Kernel panic - not syncing: sysrq triggered crash" in proc.stdout
    data_unchanged()


def test_guest_hang_hits_the_boot_timeout(tmp_path: Path, runs_tmp, data_unchanged) -> None:
    proc = make_reproduce(runs_tmp, "CHAPTER=smoketest-hang",
                          env=_fake_qemu(tmp_path, "echo booting; exec sleep 600"))
    assert proc.returncode != 0
    assert "guest hang: no KB-DONE marker within 5 s" in proc.stdout, proc.stdout[-3000:]
    data_unchanged()


def test_truncated_guest_output_is_refused(tmp_path: Path, runs_tmp, data_unchanged) -> None:
    proc = make_reproduce(runs_tmp, "CHAPTER=smoketest", "ACCEL=tcg", "REPS=1",
                          env=_fake_qemu(tmp_path, f"cat {FIXTURES / 'console-reset.log'}"))
    assert proc.returncode != 0
    assert "guest ended before it finished (no KB-DONE marker): its output is truncated" \
        in proc.stdout, proc.stdout[-3000:]
    data_unchanged()


def _broken_kvm(tmp_path: Path) -> dict[str, str]:
    """A host whose KVM device is present and whose KVM guests hang (as on this project's
    machines): a device file the user may open, and a qemu-system-x86_64 that never returns
    for ``-accel kvm`` and is the real QEMU otherwise."""
    real = subprocess.run(["bash", "-c", "command -v qemu-system-x86_64"], text=True,
                          capture_output=True, check=True).stdout.strip()
    fake = tmp_path / "fakebin"
    fake.mkdir()
    script = fake / "qemu-system-x86_64"
    script.write_text(f'#!/bin/sh\ncase " $* " in *" kvm "*) exec sleep 600;; esac\n'
                      f'exec {real} "$@"\n')
    script.chmod(0o755)
    device = tmp_path / "kvm"
    device.write_bytes(b"")
    return {"PATH": f"{fake}:{os.environ['PATH']}", "KERNEL_BOOK_PROBE_TIMEOUT": "5",
            "KERNEL_BOOK_KVM_DEVICE": str(device)}


def test_kvm_present_but_broken_fails_when_asked_for(tmp_path: Path, runs_tmp,
                                                     data_unchanged) -> None:
    proc = make_reproduce(runs_tmp, "CHAPTER=smoketest", "ACCEL=kvm", "REPS=1",
                          env=_broken_kvm(tmp_path))
    assert proc.returncode != 0
    assert "ACCEL=kvm but KVM does not work here" in proc.stdout, proc.stdout[-3000:]
    assert "probe guest hung: no exit within 5 s (kvm is present but broken)" in proc.stdout
    assert "run with ACCEL=tcg" in proc.stdout
    data_unchanged()


def test_kvm_present_but_broken_falls_back_to_tcg(tmp_path: Path, runs_tmp,
                                                  data_unchanged) -> None:
    proc = make_reproduce(runs_tmp, "CHAPTER=smoketest", "ACCEL=auto", "REPS=1",
                          env=_broken_kvm(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:]
    (run,) = (runs_tmp / "smoketest").iterdir()
    variant = json.loads((run / "manifest.json").read_text())["variants"]["baseline"]
    assert variant["accel_used"] == ["tcg"]
    assert "probe guest hung: no exit within 5 s" in variant["accel_why"][0]
    assert "fell back to TCG" in variant["accel_why"][0]
    data_unchanged()


def _qemus(marker: str) -> list[int]:
    """Pids of QEMU processes whose command line contains ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"qemu-system-x86_64") and \
                any(marker.encode() in a for a in argv):
            found.append(int(proc.name))
    return found


def test_kill_9_leaves_no_process_and_the_next_run_resumes(runs_tmp, monkeypatch,
                                                           data_unchanged) -> None:
    monkeypatch.setenv("KERNEL_BOOK_CHAPTERS", str(TEST_CHAPTERS))
    key = experiment.load("smoketest", accel="tcg", reps=2).key
    boots = cachedir.work() / "boot" / "smoketest" / key / "baseline"
    args = ["make", "--no-print-directory", "reproduce", "CHAPTER=smoketest", "ACCEL=tcg",
            "REPS=2"]
    proc = subprocess.Popen(args, cwd=ROOT, env=reproduce_env(runs_tmp), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))
    reader.start()
    deadline = time.monotonic() + 1200
    done: list[int] = []
    # Kill while the second boot runs: one repetition finished, the other's QEMU is up.
    while time.monotonic() < deadline and proc.poll() is None:
        done = [r for r in (1, 2) if (boots / f"rep{r}" / "boot.json").is_file()]
        if len(done) == 1 and _qemus(str(boots)):
            break
        time.sleep(0.2)
    assert len(done) == 1 and proc.poll() is None, "".join(lines)[-3000:]

    second = make_reproduce(runs_tmp, "CHAPTER=smoketest", "ACCEL=tcg", "REPS=2")
    assert second.returncode != 0
    assert "another `make reproduce` is running on" in second.stdout, second.stdout[-2000:]

    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    reader.join(timeout=10)
    for _ in range(50):
        if not _qemus(str(boots)):
            break
        time.sleep(0.1)
    assert not _qemus(str(boots)), "QEMU outlived the killed run"
    assert not (runs_tmp / "smoketest").exists() or not any((runs_tmp / "smoketest").iterdir())
    data_unchanged()

    again = make_reproduce(runs_tmp, "CHAPTER=smoketest", "ACCEL=tcg", "REPS=2")
    assert again.returncode == 0, again.stdout[-3000:]
    assert "clearing the Snakemake lock of an earlier run that was killed" in again.stdout
    (finished,) = done
    assert f">> boot     smoketest/baseline/rep{3 - finished}" in again.stdout
    assert f">> boot     smoketest/baseline/rep{finished}" not in again.stdout
    assert ">> build" not in again.stdout
    assert len(list((runs_tmp / "smoketest").iterdir())) == 1
    assert not any(boots.glob("rep*")), "published boots stayed in the work directory"
    # a finished run is measured anew (Snakemake's --forcerun publish, no marker deleted)
    anew = make_reproduce(runs_tmp, "CHAPTER=smoketest", "ACCEL=tcg", "REPS=2")
    assert anew.returncode == 0, anew.stdout[-3000:]
    assert all(f">> boot     smoketest/baseline/rep{r}" in anew.stdout for r in (1, 2))
    assert ">> build" not in anew.stdout
    assert len(list((runs_tmp / "smoketest").iterdir())) == 2
