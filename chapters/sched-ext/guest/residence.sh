#!/bin/sh
# sched-ext chapter, one boot: scx_qmap -I -F 50 under a mixed stress-ng load, with
# residence.bt timing every task's stay on a local dispatch queue (chapters/sched-ext/).
#
# Order: pre-flight (probe targets traceable by name, BTF present, no scheduler loaded), qmap
# enabled, bpftrace attached, sched_ext's event counters read, the load for LOAD_SECONDS,
# counters read again, bpftrace stopped (its END prints the maps), qmap stopped. Any step that
# fails prints "error=<reason>" and exits non-zero, so the boot fails and nothing is published.
# Stdout is sections "== <name>" then "end=ok" (parsed by chapters/sched-ext/parse.py).
#
# The load maps the author's (24 CPUs: 2x oversubscribed, yielders, pipe switchers, SCHED_FIFO
# bursts, fork storms, several nice levels) onto N vCPUs: a CPU hog per nice level -10/0/10/19
# (4 hogs on 2 vCPUs is 2x), N yielders, N pipe switchers, a FIFO cyclic task waking every
# 1 ms, a FIFO pipe pair, and a fork storm of N forkers for 2 s every 10 s.
set -u
LOAD_SECONDS=30
BIN=/tmp/kb/bin
W=/tmp/work
PROBES="dsq_inc_nr task_unlink_from_dsq schedule_deferred deferred_irq_workfn"
SCX=/sys/kernel/sched_ext

fail() {
	echo "error=$*"
	echo "error=$*" >&2
	[ -n "${BT_PID:-}" ] && kill -INT "$BT_PID" 2>/dev/null
	[ -n "${QMAP_PID:-}" ] && kill -INT "$QMAP_PID" 2>/dev/null
	dmesg | grep -i sched_ext | tail -n 5 >&2
	[ -s $W/qmap.out ] && { echo "--- scx_qmap output (last 80 lines)"; tail -n 80 $W/qmap.out; } >&2
	exit 1
}

# wait_for <seconds> <what> <shell test> [<log>]: poll every 0.5 s; on timeout the failure
# names the log's last lines
wait_for() {
	n=$(($1 * 2))
	while ! eval "$3"; do
		[ -n "${QMAP_PID:-}" ] && ! kill -0 "$QMAP_PID" 2>/dev/null &&
			fail "scx_qmap exited while waiting for: $2"
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
echo "nproc=$(nproc)"

"$BIN/scx_qmap" -I -F 50 > $W/qmap.out 2>&1 &
QMAP_PID=$!
wait_for 120 "sched_ext state 'enabled' with qmap" \
	'[ "$(cat $SCX/state)" = enabled ] && grep -qx qmap $SCX/root/ops 2>/dev/null' $W/qmap.out

bpftrace -f json -o $W/bt.json "$BIN/residence.bt" 2> $W/bt.err &
BT_PID=$!
wait_for 240 "bpftrace attached" 'grep -q "attached" $W/bt.json 2>/dev/null' $W/bt.err
kill -0 $QMAP_PID 2>/dev/null || fail "scx_qmap exited while bpftrace attached: $(tail -n 3 $W/qmap.out)"

cat $SCX/root/events > $W/events.before

N=$(nproc)
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
run cpu-nice-10 -10 $T --cpu $((N / 2))
run cpu-nice0 0 $T --cpu $((N / 2))
run cpu-nice10 10 $T --cpu $((N / 2))
run cpu-nice19 19 $T --cpu $((N / 2))
run yield 0 $T --yield "$N"
run switch 0 $T --switch "$N" --switch-method pipe
run cyclic 0 $T --cyclic 1 --cyclic-policy fifo --cyclic-prio 50 --cyclic-sleep 1000000
run fifo-pair 0 $T --switch 1 --switch-freq 1000 --sched fifo
storms=0
while [ $(($(date +%s) - start + 2)) -le "$T" ]; do
	sleep 8
	[ $(($(date +%s) - start + 2)) -le "$T" ] || break
	storms=$((storms + 1))
	run "fork$storms" 0 2 --fork "$N"
	sleep 2
done
# not a bare wait: bpftrace and qmap are children too
wait $LOAD_PIDS

cat $SCX/root/events > $W/events.after
[ "$(cat $SCX/state)" = enabled ] && kill -0 $QMAP_PID 2>/dev/null ||
	fail "scx_qmap is no longer the running scheduler: $(dmesg | grep -i 'sched_ext' | tail -n 1)"
kill -INT $BT_PID
wait $BT_PID
bt_rc=$?
BT_PID=
kill -INT $QMAP_PID
wait $QMAP_PID
QMAP_PID=
[ "$bt_rc" -eq 0 ] || fail "bpftrace exited $bt_rc: $(tail -n 3 $W/bt.err)"
grep -q '"end' $W/bt.json || fail "bpftrace output has no END marker (truncated)"

for rc in $W/*.rc; do
	name=$(basename "$rc" .rc)
	read -r code secs < "$rc"
	[ "$code" -eq 0 ] || fail "stress-ng $name exited $code: $(tail -n 2 $W/$name.log)"
	limit=$LOAD_SECONDS
	case $name in fork*) limit=2 ;; esac
	[ "$secs" -le $((limit + 20)) ] ||
		fail "stress-ng $name overran: $secs s for a $limit s bound"
	echo "== stress-ng $name"
	echo "elapsed_s=$secs"
	cat "$W/$name.yaml"
done
echo "== fork_storms"
echo "storms=$storms"
echo "== events.before"
cat $W/events.before
echo "== events.after"
cat $W/events.after
echo "== bpftrace"
cat $W/bt.json
echo "== qmap"
tail -n 4 $W/qmap.out
echo "end=ok"
