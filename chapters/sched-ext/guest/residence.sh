#!/bin/sh
# sched-ext chapter, one boot: the chapter's scheduler scx_remote (scx_remote.bpf.c) under a
# mixed stress-ng load, with residence.bt timing every task's stay on a local dispatch queue,
# every irq_work fallback of schedule_deferred() and where its handler ran.
#
# Order: pre-flight (probe targets traceable by name, BTF present, no scheduler loaded),
# scx_remote enabled, bpftrace attached, sched_ext's event counters read, the load for
# LOAD_SECONDS with a census of its tasks halfway, counters read again, bpftrace stopped (its END
# prints the maps), the scheduler stopped. Any step that fails prints "error=<reason>" and exits
# non-zero, so the boot fails and nothing is published: the scheduler exiting or kicked out,
# bpftrace exiting, failing a map update (a full map), losing output or skipping calls (BPF
# recursion misses), a removal without its insert after the probes settled, a stress-ng instance failing or overrunning its bound.
# Stdout is sections "== <name>" then "end=ok" (parsed by chapters/sched-ext/parse.py).
#
# The load keeps the author's ingredients, one instance each unless stress-ng makes more (the
# census section says how many tasks of each ran): a CPU hog at each of nice -10/0/10/19, a
# yielder, a pipe switcher pair, a SCHED_FIFO task woken every 1 ms (cyclic), a SCHED_FIFO pipe
# pair switching at 1 kHz, and a forker, all for the whole LOAD_SECONDS.
set -u
LOAD_SECONDS=30
# scx_remote -n: every REMOTE_NTH-th dispatch goes to the other CPU's local DSQ
REMOTE_NTH=20
BIN=/tmp/kb/bin
W=/tmp/work
PROBES="dsq_inc_nr task_unlink_from_dsq schedule_deferred deferred_irq_workfn"
SCX=/sys/kernel/sched_ext

fail() {
	echo "error=$*"
	echo "error=$*" >&2
	[ -n "${BT_PID:-}" ] && kill -INT "$BT_PID" 2>/dev/null
	[ -n "${SCHED_PID:-}" ] && kill -INT "$SCHED_PID" 2>/dev/null
	dmesg | grep -i sched_ext | tail -n 5 >&2
	[ -s $W/sched.out ] && { echo "--- scheduler output (last 80 lines)"; tail -n 80 $W/sched.out; } >&2
	exit 1
}

# wait_for <seconds> <what> <shell test> [<log>]: poll every 0.5 s; on timeout the failure
# names the log's last lines
wait_for() {
	n=$(($1 * 2))
	while ! eval "$3"; do
		[ -n "${SCHED_PID:-}" ] && ! kill -0 "$SCHED_PID" 2>/dev/null &&
			fail "scx_remote exited while waiting for: $2"
		[ -n "${BT_PID:-}" ] && ! kill -0 "$BT_PID" 2>/dev/null &&
			{ echo "--- bpftrace stderr"; cat $W/bt.err; } >&2 &&
			fail "bpftrace exited while waiting for: $2 (its stderr is in this workload's)"
		n=$((n - 1))
		[ "$n" -le 0 ] && fail "$2 not reached within $1 s${4:+; $4 ends: $(tail -n 5 "$4" | tr '\n' '|')}"
		sleep 0.5
	done
}

mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
mount -t debugfs nodev /sys/kernel/debug 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
# devtmpfs has no /dev/fd; bpftrace's built-in clang writes its object to /dev/fd/<n>
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd

[ -r /sys/kernel/btf/vmlinux ] || fail "no /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF)"
[ -d "$SCX" ] || fail "no $SCX (CONFIG_SCHED_CLASS_EXT)"
for f in $PROBES; do
	grep -qx "$f" /sys/kernel/tracing/available_filter_functions ||
		fail "probe target $f is not in available_filter_functions under its own name" \
			"(inlined or cloned in this build: see patches/sched-ext/instrument/)"
done
[ "$(cat $SCX/state)" = disabled ] || fail "a sched_ext scheduler is already loaded"

echo "== environment"
echo "probes=$(echo $PROBES | tr ' ' ,)"
# the functions the patch swaps: traceable or not (irq_work.o is built without ftrace)
for f in irq_work_queue irq_work_queue_on; do
	echo "ftrace_$f=$(grep -cx "$f" /sys/kernel/tracing/available_filter_functions)"
done
echo "clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
zcat /proc/config.gz | grep -E '^CONFIG_(HZ|PREEMPT_LAZY|PREEMPT|PREEMPT_DYNAMIC|NO_HZ_IDLE)='
echo "load_seconds=$LOAD_SECONDS"
echo "remote_nth=$REMOTE_NTH"
echo "nproc=$(nproc)"

"$BIN/scx_remote" -n $REMOTE_NTH > $W/sched.out 2>&1 &
SCHED_PID=$!
wait_for 120 "sched_ext state 'enabled' with scx_remote" \
	'[ "$(cat $SCX/state)" = enabled ] && grep -qx remote $SCX/root/ops 2>/dev/null' $W/sched.out

bpftrace -f json -o $W/bt.json "$BIN/residence.bt" 2> $W/bt.err &
BT_PID=$!
wait_for 240 "bpftrace attached" 'grep -q "attached" $W/bt.json 2>/dev/null' $W/bt.err
kill -0 $SCHED_PID 2>/dev/null ||
	fail "scx_remote exited while bpftrace attached: $(tail -n 3 $W/sched.out)"

cat $SCX/root/events > $W/events.before

T=$LOAD_SECONDS
start=$(date +%s)
# run <name> <nice> <seconds> <stress-ng arguments>: one stress-ng each, bounded by -t
run() {
	name=$1 nice=$2 secs=$3
	shift 3
	(
		s=$(date +%s)
		nice -n "$nice" stress-ng --temp-path $W --seed 1 --metrics -t "$secs" \
			--yaml "$W/$name.yaml" "$@" > "$W/$name.log" 2>&1
		echo "$? $(($(date +%s) - s))" > "$W/$name.rc"
	) &
	LOAD_PIDS="$LOAD_PIDS $!"
}
LOAD_PIDS=""
run cpu-nice-10 -10 $T --cpu 1
run cpu-nice0 0 $T --cpu 1
run cpu-nice10 10 $T --cpu 1
run cpu-nice19 19 $T --cpu 1
run yield 0 $T --yield 1
run switch 0 $T --switch 1 --switch-method pipe
run cyclic 0 $T --cyclic 1 --cyclic-policy fifo --cyclic-prio 50 --cyclic-sleep 1000000
run fifo-pair 0 $T --switch 1 --switch-freq 1000 --sched fifo
run fork 0 $T --fork 1
# halfway: every task by name, and the run queue as /proc/loadavg counts it
sleep $((T / 2))
{
	echo "at_s=$(($(date +%s) - start))"
	echo "loadavg=$(cat /proc/loadavg)"
	cat /proc/[0-9]*/comm 2>/dev/null | sort | uniq -c |
		while read -r n name; do echo "comm.$(echo "$name" | tr " =" __)=$n"; done
} > $W/census
# not a bare wait: bpftrace and the scheduler are children too
wait $LOAD_PIDS

cat $SCX/root/events > $W/events.after
# an fentry program that finds itself already running on its CPU skips the call and counts a
# recursion miss: the probes' only way of losing a call without an error (bpftool -j lists the
# count per program when it is not 0)
misses=$(bpftool -j prog show | grep -o '"recursion_misses":[0-9]*' | cut -d: -f2 |
	awk '{ s += $1 } END { print s + 0 }')
[ "$(cat $SCX/state)" = enabled ] && kill -0 $SCHED_PID 2>/dev/null ||
	fail "scx_remote is no longer the running scheduler: $(dmesg | grep -i 'sched_ext' | tail -n 1)"
kill -INT $BT_PID
wait $BT_PID
bt_rc=$?
BT_PID=
kill -INT $SCHED_PID
wait $SCHED_PID
SCHED_PID=
[ "$bt_rc" -eq 0 ] || fail "bpftrace exited $bt_rc: $(tail -n 3 $W/bt.err)"
grep -q '"end' $W/bt.json || fail "bpftrace output has no END marker (truncated)"
# a failed map update (a full map) is a helper error, lost output a lost_events record; reads of
# absent keys are 0 by design, so -k (which reports them too) stays off
grep -q 'Map full' $W/bt.err && fail "bpftrace: $(grep 'Map full' $W/bt.err | head -n 1)"
grep -q '"helper_error"' $W/bt.json &&
	fail "bpftrace helper error: $(grep '"helper_error"' $W/bt.json | head -n 1)"
grep -q '"lost_events"' $W/bt.json && fail "bpftrace lost events: $(grep '"lost_events"' $W/bt.json | head -n 1)"
[ "$misses" -eq 0 ] || fail "the probes skipped $misses calls (BPF recursion misses)"
late=$(sed -n 's/.*"@unmatched_late": *\([0-9]*\).*/\1/p' $W/bt.json)
[ "${late:-0}" -eq 0 ] || fail "$late local-DSQ removals without their insert after the probes settled (an insert was lost)"

for rc in $W/*.rc; do
	name=$(basename "$rc" .rc)
	read -r code secs < "$rc"
	[ "$code" -eq 0 ] || fail "stress-ng $name exited $code: $(tail -n 2 $W/$name.log)"
	[ "$secs" -le $((LOAD_SECONDS + 20)) ] ||
		fail "stress-ng $name overran: $secs s for a $LOAD_SECONDS s bound"
	echo "== stress-ng $name"
	echo "elapsed_s=$secs"
	cat "$W/$name.yaml"
done
echo "== census"
cat $W/census
echo "== probes"
echo "recursion_misses=$misses"
echo "== events.before"
cat $W/events.before
echo "== events.after"
cat $W/events.after
echo "== bpftrace"
cat $W/bt.json
echo "== scheduler"
grep "^dispatch=" $W/sched.out | tail -n 1
grep -v "^dispatch=" $W/sched.out
echo "end=ok"
