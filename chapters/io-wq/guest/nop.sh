#!/bin/sh
# io-wq chapter, timed kernels: the author's micro-benchmark, a flood of IORING_OP_NOP with
# IOSQE_ASYNC (every request goes to an io-wq worker), under perf (chapters/io-wq/).
#
# Order: an inline control (no IOSQE_ASYNC, no io-wq, no perf); the ASYNC flood under
# `perf record -g -e cpu-clock -F 997` (no PMU under TCG; without -a, the process and the
# io-wq workers it creates are recorded; 997 Hz so the samples never run in step with the
# 1000 Hz tick), then its flat profile and the callers of the symbols where spinning and
# interrupts-off time show; the recording and its build-id cache (each kernel's kallsyms) are
# kept for the host-side perf diff (host/perf-diff.sh); the same flood under `perf stat`
# (context switches, a software count); and under `perf lock record`, with its contention
# table by caller (lock:contention_begin/end; no BPF in Debian's perf).
# Stdout: key=value lines and sections "== <name>" ... "== end <name>", then "end=ok"
# (chapters/io-wq/parse.py).
set -u
. /tmp/kb/bin/common.sh
OPS=5000000
LOCK_OPS=1000000
STAT_OPS=1000000

perf_setup

section control
$BIN/nop --ops $OPS --timeout 200 || fail "nop (inline control) failed"
end_section control

section async
perf --buildid-dir $W/buildid record -q -g -e cpu-clock -F $FREQ -o $W/nop.data -- \
	$BIN/nop --async --ops $OPS --timeout 300 > $W/async.out 2> $W/record.err
rc=$?
cat $W/async.out
[ $rc -eq 0 ] || fail "perf record -- nop --async exited $rc: $(tail -n 3 $W/record.err | tr '\n' '|')"
end_section async
report nop.data
callers nop.data
keep nop.data
section stat
perf stat -x ';' -e context-switches,cpu-migrations,task-clock -o $W/stat.txt -- \
	$BIN/nop --async --ops $STAT_OPS --timeout 300 > $W/stat.out 2> $W/stat.err ||
	fail "perf stat -- nop --async failed: $(tail -n 3 $W/stat.err | tr '\n' '|')"
cat $W/stat.out
grep -v '^#' $W/stat.txt | grep .
end_section stat

section lock
perf lock record -q -o $W/lock.data -- \
	$BIN/nop --async --ops $LOCK_OPS --timeout 300 > $W/lock.out 2> $W/lock.err
rc=$?
cat $W/lock.out
[ $rc -eq 0 ] || fail "perf lock record -- nop --async exited $rc: $(tail -n 3 $W/lock.err | tr '\n' '|')"
end_section lock
section contention
# perf lock prints its table to stderr unless --output names a file. The callers: the
# recorded stack starts in queued_spin_lock_slowpath (the trace event's site), so one frame
# is skipped and perf skips the lock functions after it
perf lock contention -i $W/lock.data -E 1000 -F contended,wait_total,wait_max,avg_wait \
	--stack-skip 1 -x ';' --output $W/contention.txt 2> $W/contention.err ||
	fail "perf lock contention failed: $(tail -n 3 $W/contention.err | tr '\n' '|')"
cat $W/contention.txt
end_section contention
finish
