"""The io-wq parsers on what the guest scripts really printed, and on broken variants of them.

Fixtures (``fixtures/``), captured under TCG on 2026-11-23 (2 vCPUs) before the first
committed run: ``nop-k0.out`` and ``http-k0.out`` from a 7.2.13 boot, ``race-p8.out`` from a
boot of the patch-8 race kernel, ``lockstat-k2.out`` from the CONFIG_LOCK_STAT build of k2,
and ``nop-race-kernel.out``, what nop.sh prints on a kernel of another role. Captured on
2026-11-27 from a trial run of the call-chain scripts: ``nop-k2-callers.out`` (a k2 boot's
nop.sh with the folded callers and perf stat) and ``perfdiff-k0-vs-k2.out`` (host/perf-diff.sh
on that boot and a k0 boot). Captured later that day from a trial run of the h2load-driven
server scripts on a k0 boot: ``http-h2load-k0.out`` (http.sh) and ``php-k0.out`` (php.sh),
and ``perfdiff-php-k0-vs-k2.out``, perf-diff.sh on that boot and a k2 boot, with php.data.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab import chapters
from lab.command import StageError

parse = chapters.get("io-wq").module("parse")
FIXTURES = Path(__file__).parent / "fixtures"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def rows(parser: str, name: str, body: str | None = None) -> dict[str, float]:
    return dict(parse.PARSERS[parser](text(name) if body is None else body, name))


def profile_lines(body: str, report: str) -> list[str]:
    start = body.index(f"== report {report}\n") + len(f"== report {report}\n")
    return body[start:body.index(f"== end report {report}")].splitlines()


def test_the_flood_gives_rates_workers_and_a_whole_profile() -> None:
    r = rows("nop", "nop-k0.out")
    assert r["ran"] == 1
    assert r["async.ops"] == 5_000_000 and r["control.ops"] == 5_000_000
    assert r["async.ops_per_second"] == pytest.approx(r["async.ops"] / r["async.seconds"],
                                                      rel=1e-3)
    assert 1 <= r["async.peak_workers"] <= 8 and r["control.peak_workers"] == 0
    shares = {k: v for k, v in r.items() if k.startswith("share.")}
    # every line of the report is a row (kernel symbols by name, user space summed)
    lines = [ln for ln in profile_lines(text("nop-k0.out"), "nop.data") if ln.strip()]
    names = {ln.split("[k] ")[1].strip() for ln in lines if "[k]" in ln}
    assert len(shares) == len(names) + 1
    # io_run_task_work is two static functions of that name: two lines, one summed row
    twice = [float(ln.split("%")[0]) for ln in lines if ln.rstrip().endswith("io_run_task_work")]
    assert len(twice) == 2 and r["share.io_run_task_work"] == pytest.approx(sum(twice))
    assert sum(shares.values()) == pytest.approx(100, abs=0.5)
    samples = sum(int(ln.split(";")[1]) for ln in lines)
    assert r["profile.samples"] == samples
    slow = next(ln for ln in lines if ln.rstrip().endswith("] queued_spin_lock_slowpath"))
    assert r["share.queued_spin_lock_slowpath"] == float(slow.split("%")[0])


def test_the_contention_table_counts_per_caller() -> None:
    r = rows("nop", "nop-k0.out")
    body = text("nop-k0.out")
    table = body[body.index("== contention\n"):body.index("== end contention")].splitlines()
    events = sum(int(ln.split(";")[0]) for ln in table[2:] if ln.strip())
    assert r["lock.contended_total"] == events
    assert sum(v for k, v in r.items() if k.startswith("contended.")) == events
    assert r["lock.ops"] == 1_000_000


def test_the_http_analogue_gives_wrk_server_and_profile_rows() -> None:
    r = rows("http", "http-k0.out")
    assert r["wrk.requests_per_second"] > 0
    # the server answered at least what wrk counted (wrk stops counting at its deadline)
    assert r["server.requests"] >= r["wrk.requests"] and r["server.errors"] == 0
    assert r["profile.samples"] > 1000 and "share.queued_spin_lock_slowpath" in r


@pytest.mark.parametrize(("name", "parser", "requests"), [
    ("http-h2load-k0.out", "http", 100_000), ("php-k0.out", "php", 20_000)])
def test_the_server_analogues_do_a_fixed_number_of_requests(name, parser, requests) -> None:
    r = rows(parser, name)
    # h2load's fixed count, every one answered 2xx, and the server answered exactly those
    assert r["load.requests"] == requests == r["server.requests"]
    assert r["server.errors"] == 0 and r["server.resets"] == 0
    assert r["server.php_requests"] == (requests if parser == "php" else 0)
    assert r["load.requests_per_second"] == pytest.approx(
        r["load.requests"] / r["load.seconds"], rel=0.01)
    # it waited in epoll, and its profile's spin and unlock samples have their callers
    assert r["server.epoll_waits"] > 0 and r["profile.samples"] > 1000
    for symbol in ("queued_spin_lock_slowpath", "_raw_spin_unlock_irqrestore"):
        callers = sum(v for k, v in r.items() if k.startswith(f"caller.{symbol}."))
        assert callers == r[f"callers.{symbol}.samples"] > 0


def test_perf_diff_covers_each_recording_the_boots_kept() -> None:
    # the earlier runs' two recordings, and since the PHP workload three
    for name, recordings in (("perfdiff-k0-vs-k2.out", {"nop", "http"}),
                             ("perfdiff-php-k0-vs-k2.out", {"nop", "http", "php"})):
        r = rows("perfdiff", name)
        assert {k.split(".")[0] for k in r} == recordings, name
        assert "php.baseline.queued_spin_lock_slowpath" in r or "php" not in recordings


def test_race_and_lockstat_rows() -> None:
    r = rows("race", "race-p8.out")
    assert r["race.trials"] > 0 and 0 <= r["race.lost"] <= r["race.trials"]
    s = rows("lockstat", "lockstat-k2.out")
    assert s["flood.ops"] > 0
    assert s["lockstat.&acct->lock.acquisitions"] >= s["flood.ops"]
    assert s["lockstat.&hash->wait.acquisitions"] >= s["flood.ops"] * 0.9


def test_the_callers_of_each_spin_symbol_add_up_to_its_samples() -> None:
    r = rows("nop", "nop-k2-callers.out")
    for symbol in ("queued_spin_lock_slowpath", "_raw_spin_unlock_irqrestore",
                   "_raw_spin_unlock_irq", "finish_task_switch.isra.0"):
        callers = sum(v for k, v in r.items() if k.startswith(f"caller.{symbol}."))
        assert callers == r[f"callers.{symbol}.samples"] > 0
    # the lock code is skipped: a chain through _raw_spin_lock counts for its caller
    assert "caller.queued_spin_lock_slowpath._raw_spin_lock" not in r
    assert r["caller.queued_spin_lock_slowpath.io_wq_enqueue"] > 0
    # the sampled symbols' own lines in the flat profile carry the same sample counts
    body = text("nop-k2-callers.out")
    line = next(ln for ln in profile_lines(body, "nop.data")
                if ln.rstrip().endswith("[k] queued_spin_lock_slowpath"))
    assert int(line.split(";")[1]) == r["callers.queued_spin_lock_slowpath.samples"]


def test_perf_stat_counts_context_switches_of_its_own_flood() -> None:
    r = rows("nop", "nop-k2-callers.out")
    assert r["stat.ops"] == 1_000_000 and r["stat.context-switches"] > 1000
    assert r["stat.task-clock"] > 0


def test_perf_diff_rows_keep_perf_s_order_and_columns() -> None:
    r = rows("perfdiff", "perfdiff-k0-vs-k2.out")
    body = text("perfdiff-k0-vs-k2.out")
    nop = body[body.index("== diff nop.data"):body.index("== end diff nop.data")]
    lines = [ln for ln in nop.splitlines()[1:] if ln.strip() and not ln.startswith("#")]
    assert r["nop.lines"] == len(lines)
    first = lines[0].split(";")
    symbol = first[3].split("[k] ")[1].strip()
    assert r[f"nop.rank.{symbol}"] == 1
    assert r[f"nop.baseline.{symbol}"] == float(first[0])
    assert r[f"nop.delta.{symbol}"] == float(first[1].strip().rstrip("%"))
    # perf's default order: absolute delta, largest first
    deltas = [abs(float(ln.split(";")[1].strip().rstrip("%"))) for ln in lines
              if ln.split(";")[1].strip()]
    assert deltas == sorted(deltas, reverse=True)
    # a symbol only the patched recording sampled has baseline 0
    new = next(ln for ln in lines if not ln.split(";")[0].strip() and "[k]" in ln)
    assert r[f"nop.baseline.{new.split('[k] ')[1].strip()}"] == 0
    assert {k.split(".")[0] for k in r} == {"nop", "http"}


def test_a_workload_of_another_role_is_one_row() -> None:
    assert rows("nop", "nop-race-kernel.out") == {"ran": 0.0}


@pytest.mark.parametrize(("name", "parser"), [("nop-k0.out", "nop"), ("php-k0.out", "php"),
                                              ("race-p8.out", "race"),
                                              ("lockstat-k2.out", "lockstat")])
def test_an_output_of_a_variant_that_lists_its_workloads_has_no_role(name, parser) -> None:
    """Since each variant lists its workloads, a script prints no role= and ran= head: the
    rows are those of the earlier output, less its ``ran`` row."""
    earlier = parse.PARSERS[parser](text(name), name)
    head = re.sub(r"^(role|ran)=.*\n", "", text(name), flags=re.M)
    assert head != text(name)
    assert parse.PARSERS[parser](head, name) == [r for r in earlier if r[0] != "ran"]


@pytest.mark.parametrize(("name", "parser", "edit", "message"), [
    ("nop-k0.out", "nop", lambda t: t.replace("end=ok", ""), "truncated"),
    ("nop-k0.out", "nop", lambda t: t.replace("== end async\n", ""), "is not closed"),
    ("nop-k0.out", "nop", lambda t: t + "error=perf died\n", "the guest script failed"),
    ("nop-k0.out", "nop", lambda t: re.sub(r"== control\n.*?== end control\n", "", t,
                                           flags=re.S), "sections \\['control'\\] missing"),
    # a report with another --sort order, or a human (not field-separated) layout
    ("nop-k0.out", "nop", lambda t: re.sub(r"\n( *[\d.]+%) *; *(\d+) *;", r"\n\1 \2 ", t,
                                           count=1), "is not 'overhead%;samples"),
    # lines lost from the report (a --percent-limit)
    ("nop-k0.out", "nop", lambda t: re.sub(r"(== report nop.data\n)(?:.*\n){3}", r"\1", t),
     "sum to"),
    ("nop-k0.out", "nop", lambda t: t.replace("# output: contended; total wait",
                                              "# output: contended; wait total"),
     "contention table's header"),
    ("http-k0.out", "http", lambda t: t.replace("Requests/sec:", "Reqs/sec:"),
     "wrk's summary"),
    ("http-k0.out", "http", lambda t: t.replace("Requests/sec:",
                                                "  Non-2xx or 3xx responses: 12\nRequests/sec:"),
     "error responses"),
    ("race-p8.out", "race", lambda t: re.sub(r"lost=\d+\n", "", t), "no trials= or lost="),
    ("lockstat-k2.out", "lockstat", lambda t: re.sub(r".*&acct->lock:.*\n", "", t),
     "no &acct->lock class"),
    ("nop-race-kernel.out", "nop", lambda t: t.replace("role=race\n", ""),
     "a role= line needs a ran= line"),
    # a folded chain lost: the chains no longer add up to the symbol's samples
    ("nop-k2-callers.out", "nop", lambda t: re.sub(r"(== callers nop.data\n.*\n)\d+ .*\n",
                                                   r"\1", t), "count .* samples, its line"),
    ("nop-k2-callers.out", "nop", lambda t: re.sub(r"== stat\n.*?== end stat\n", "", t,
                                                   flags=re.S), "without the rest"),
    ("nop-k2-callers.out", "nop", lambda t: re.sub(r"\n\d+;;context-switches;",
                                                   "\n<not counted>;;context-switches;", t),
     "has no count"),
    ("perfdiff-k0-vs-k2.out", "perfdiff", lambda t: t.replace("Delta Abs", "Ratio"),
     "perf diff's header"),
    ("perfdiff-k0-vs-k2.out", "perfdiff", lambda t: re.sub(
        r"== diff http.data\n.*?== end diff http.data\n", "", t, flags=re.S),
     "not of the recordings"),
    ("http-h2load-k0.out", "http", lambda t: t.replace(" 0 failed,", " 3 failed,"),
     "did not do the fixed work"),
    ("php-k0.out", "php", lambda t: t.replace("status codes: 20000 2xx, 0 3xx, 0 4xx, 0 5xx",
                                              "status codes: 19990 2xx, 0 3xx, 0 4xx, 10 5xx"),
     "did not do the fixed work"),
    ("php-k0.out", "php", lambda t: re.sub(r"finished in .*\n", "", t), "lacks its"),
    ("php-k0.out", "php", lambda t: re.sub(r"== callers php.data\n.*?== end callers php.data\n",
                                           "", t, flags=re.S), "missing"),
])
def test_broken_output_fails_naming_the_problem(name, parser, edit, message) -> None:
    with pytest.raises(StageError, match=message):
        rows(parser, name, edit(text(name)))
