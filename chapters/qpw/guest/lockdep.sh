#!/bin/sh
# qpw chapter, lockdep kernels (PWLOCKS=n, CONFIG_PROVE_LOCKING, never timed): the warnings
# lockdep raised from boot to here, after a short kmalloc_bench load (100 000 allocations)
# has run SLUB's sheaf refill and flush paths once more. With v4 as posted,
# pw_lockdep_assert_held() asserts on the per-CPU variable's offset and warns; with the fix
# (patches/qpw/0005) it asserts on this CPU's lock and stays quiet.
# Stdout: "== environment", "== warnings" (every WARNING: line of the log), then end=ok.
set -u
. /tmp/kb/bin/common.sh

only_role lockdep
environment
taskset -c 0 insmod $BIN/kmalloc_bench.ko iterations=100000 2> $W/insmod.err ||
	fail "insmod kmalloc_bench.ko: $(tr '\n' '|' < $W/insmod.err)"
rmmod kmalloc_bench || fail "rmmod kmalloc_bench"
echo "== warnings"
dmesg | grep 'WARNING:' | sed 's/^\[[ 0-9.]*\] //'
echo "== end warnings"
echo "end=ok"
