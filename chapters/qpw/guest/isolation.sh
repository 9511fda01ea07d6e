#!/bin/sh
# qpw chapter, isolation kernels (isolcpus=domain,managed_irq,1 irqaffinity=0, or with the disk
# also nohz_full=1 isolcpus=managed_irq,1 without domain): ROUNDS drains of the per-CPU LRU
# batches requested on CPU 0 while a SCHED_FIFO loop runs on the isolated
# CPU 1 (guest/drainvictim.c). Before each round the victim writes one new page of a file, so
# its CPU's batch holds a folio and lru_add_drain_all() has work for CPU 1 every round. The
# file is on tmpfs, or with qpw.disk=1 on the ext2 disk at /dev/vda (chapter.yaml machine:
# disk:), where each new page allocates a block through the block bitmap's buffer head, which
# enters CPU 1's buffer-head LRU unless CPU 1 is domain-isolated.
#
# The kernel's own account comes from trace events, restricted to what concerns CPU 1: work
# items that started on it and work queued for it, IPIs sent to it and the IPI handlers it
# ran, and its context switches; and, on both CPUs, folios entering the LRU (which CPU put the
# victim's folio there). The TSC clock orders them against the rounds' trace markers.
# Stdout: "== environment", "== victim" (drainvictim's lines), "== trace" (the trace buffer),
# then end=ok (chapters/qpw/parse.py).
set -u
. /tmp/kb/bin/common.sh
T=/sys/kernel/tracing

environment
# qpw.rounds= and qpw.pause_ms= (chapter.yaml variants): 20 back-to-back requests unless
# the command line asks for fewer, spaced by a pause
ROUNDS=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^qpw\.rounds=//p')
PAUSE_MS=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^qpw\.pause_ms=//p')
# isolated from the scheduler's domains (isolcpus=domain), or at least from the tick and the
# unbound work (nohz_full=)
[ "$(cat /sys/devices/system/cpu/isolated)" = 1 ] ||
	[ "$(cat /sys/devices/system/cpu/nohz_full 2>/dev/null)" = 1 ] ||
	fail "CPU 1 is neither isolated nor nohz_full (isolcpus= or nohz_full= on the command line: chapter.yaml)"
mount -t tracefs nodev $T 2>/dev/null
[ -w $T/trace_marker ] || fail "no tracefs at $T (CONFIG_FTRACE)"

# event filter: each must be accepted, or the counts would silently include other CPUs
event() {
	[ -d "$T/events/$1" ] || fail "no trace event $1 in this kernel"
	[ -z "$2" ] || echo "$2" > "$T/events/$1/filter" ||
		fail "trace event $1 rejected the filter '$2'"
	echo 1 > "$T/events/$1/enable" || fail "cannot enable trace event $1"
}
echo 0 > $T/tracing_on
echo x86-tsc > $T/trace_clock || fail "no x86-tsc trace clock"
echo 4096 > $T/buffer_size_kb
echo > $T/trace
event workqueue/workqueue_execute_start "common_cpu == 1"
event workqueue/workqueue_queue_work "cpu == 1"
event sched/sched_switch "common_cpu == 1"
event ipi/ipi_send_cpu "cpu == 1"
event ipi/ipi_send_cpumask "cpumask & CPUS{1}"
event irq_vectors/reschedule_entry "common_cpu == 1"
event irq_vectors/call_function_single_entry "common_cpu == 1"
event irq_vectors/call_function_entry "common_cpu == 1"
# the positive probe: a folio entering the LRU, on either CPU. The victim's folio enters it
# on CPU 1 when a kworker there drains the batch, on CPU 0 when CPU 0 drains it remotely.
event pagemap/mm_lru_insertion ""
echo "lru_probe=1"

mkdir -p $W/victim
if tr ' ' '\n' < /proc/cmdline | grep -qx 'qpw.disk=1'; then
	[ -b /dev/vda ] || fail "qpw.disk=1 but no /dev/vda (machine: disk: in chapter.yaml, CONFIG_VIRTIO_BLK)"
	mount -t ext2 /dev/vda $W/victim || fail "mount the ext2 disk /dev/vda for the victim's file"
	echo "victim_fs=ext2"
else
	mount -t tmpfs -o size=64m victim $W/victim || fail "mount tmpfs for the victim's file"
	echo "victim_fs=tmpfs"
fi
mark rounds
echo 1 > $T/tracing_on
$BIN/drainvictim 1 0 "${ROUNDS:-20}" $W/victim "${PAUSE_MS:-0}" > $W/victim.out 2> $W/victim.err
rc=$?
echo 0 > $T/tracing_on
section victim
cat $W/victim.out
end_section victim
[ "$rc" -eq 0 ] || fail "drainvictim exited $rc: $(tail -n 3 $W/victim.err | tr '\n' '|')"
since rounds
bad=$(warnings_in $W/since)
[ -z "$bad" ] || fail "kernel warning during the rounds: $(echo "$bad" | head -n 1)"
grep -q 'overrun: [1-9]' $T/per_cpu/cpu*/stats && fail "the trace buffer overran"
section trace
grep -v '^#' $T/trace
end_section trace
finish
