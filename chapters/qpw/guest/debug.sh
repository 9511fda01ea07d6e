#!/bin/sh
# qpw chapter, debug kernels (CONFIG_PROVE_LOCKING and friends, never timed): one test per
# boot, named by qpw.test= on the command line, then what the kernel's checks reported from
# boot to here. One test a boot, because the first lockdep or spinlock report turns those
# checks off for the rest of the boot.
#   load   100 000 allocations of kmalloc_bench, so SLUB's sheaf refill and flush paths run
#          (lockdep kernels: v4's pw_lockdep_assert_held() with PWLOCKS=n, syzbot's report)
#   init   nothing more: the boot unpacked an initramfs of files (chapter.yaml initrd:),
#          filling the page cache through the per-CPU LRU batches before swap_setup()
#          initialised their locks
#   flush  pw_exercise.ko test=flush under failslab (its task filter: only the module's
#          free loop fails to allocate), so the main sheaf is flushed in place
#   irq    pw_exercise.ko test=irq: kfree_nolock() from a hard-interrupt hrtimer
# The kernels boot with loglevel=0: the reports stay in the kernel log (and out of the
# console, where the pipeline would fail the boot on them); /sys/kernel/warn_count counts
# every WARNING even when the log buffer has wrapped (warn_before= just before the test's
# commands, warn_count= just after them, before the log is read); the report sections read one
# snapshot of the log taken after that (kept as debug-log.txt), so on a kernel that keeps
# warning they hold the warnings of these last reads; debug_locks= (lockdep kernels) is
# lockdep's own switch at the end of the test.
# Stdout: "== environment", "== exercise" (the module's line, failslab's failures),
# "== report" (every report header line of the log), "== first" (the first report, for the
# book), then end=ok (chapters/qpw/parse.py).
set -u
. /tmp/kb/bin/common.sh
REPORT='WARNING:|BUG:|INFO: |returned with preemption imbalance|Invalid wait context|bad magic'
TIMES=100000000

environment
test=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^qpw\.test=//p')
echo "test=$test"
section exercise
# the WARNINGs raised before the test's commands (boot, earlier scripts, this one so far)
echo "warn_before=$(cat /sys/kernel/warn_count)"
case "$test" in
load)
	taskset -c 0 insmod $BIN/kmalloc_bench.ko iterations=100000 2> $W/insmod.err ||
		fail "insmod kmalloc_bench.ko: $(tr '\n' '|' < $W/insmod.err)"
	rmmod kmalloc_bench || fail "rmmod kmalloc_bench"
	;;
init)
	# 7.2.13 says "Unpacking initramfs..." and then frees the archive's memory
	dmesg | grep -q 'Unpacking initramfs' ||
		fail "the kernel did not unpack an initramfs (chapter.yaml initrd:)"
	dmesg | grep -q 'Initramfs unpacking failed' && fail "initramfs unpacking failed"
	echo "initrd_kb=$(dmesg | sed -n 's/.*Freeing initrd memory: \([0-9]*\)K.*/\1/p' | tail -n 1)"
	;;
flush)
	F=/sys/kernel/debug/failslab
	mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
	[ -d $F ] || fail "no $F (CONFIG_FAILSLAB, CONFIG_FAULT_INJECTION_DEBUG_FS)"
	# the task filter first: with it, only tasks that set make_it_fail see failures
	echo Y > $F/task-filter && echo 0 > $F/verbose && echo 1 > $F/interval &&
		echo $TIMES > $F/times && echo 100 > $F/probability ||
		fail "cannot configure failslab"
	taskset -c 0 insmod $BIN/pw_exercise.ko test=flush 2> $W/insmod.err ||
		fail "insmod pw_exercise.ko test=flush: $(tr '\n' '|' < $W/insmod.err)"
	echo "failslab_failures=$((TIMES - $(cat $F/times)))"
	echo 0 > $F/probability
	rmmod pw_exercise || fail "rmmod pw_exercise"
	;;
irq)
	taskset -c 0 insmod $BIN/pw_exercise.ko test=irq 2> $W/insmod.err ||
		fail "insmod pw_exercise.ko test=irq: $(tr '\n' '|' < $W/insmod.err)"
	rmmod pw_exercise || fail "rmmod pw_exercise"
	;;
*)
	fail "qpw.test=$test is not one of load, init, flush, irq (chapter.yaml variants)"
	;;
esac
echo "warn_count=$(cat /sys/kernel/warn_count)"
# the one read of the log the report sections come from, kept with the boot's output
dmesg > $W/log
cp $W/log /tmp/out/debug-log.txt || fail "cannot copy the log snapshot to /tmp/out"
sed -n 's/.*pw_exercise: \(test=.*\)/\1/p' $W/log
# lockdep's own switch at the end: 0 once a report turned it off, so a quiet lockdep kernel
# with debug_locks=1 was checking to the end of the test
[ -r /proc/lockdep_stats ] &&
	echo "debug_locks=$(sed -n 's/^ *debug_locks: *//p' /proc/lockdep_stats)"
end_section exercise
section report
sed 's/^\[[ 0-9.]*\] //' $W/log | grep -E "$REPORT"
end_section report
section first
grep -m 1 -n -E "$REPORT" $W/log | cut -d: -f1 | {
	read -r at && tail -n +"$((at > 2 ? at - 2 : 1))" $W/log | head -n 40
}
end_section first
finish
