#!/bin/sh
# io-wq chapter, lock-statistics kernels: the NOP flood on a CONFIG_LOCK_STAT kernel, with
# /proc/lock_stat cleared before it and io-wq's lock classes printed after it (counts of
# contentions and acquisitions; lockdep's own overhead makes the times no kernel's).
# Stdout as in nop.sh; the classes: every statistics line whose class name is one of io-wq's
# locks, with lock_stat's header before them.
set -u
. /tmp/kb/bin/common.sh
OPS=200000
CLASSES='^ *(&acct->lock|&acct->workers_lock|&wq->lock|&hash->wait|&worker->lock|&wq->hash->wait)'

[ -w /proc/lock_stat ] || fail "no writable /proc/lock_stat (CONFIG_LOCK_STAT)"
grep -q 'lockdep is off\|turned off' /proc/lockdep_stats 2>/dev/null &&
	fail "lockdep turned itself off: its statistics are incomplete"
echo 0 > /proc/lock_stat
section flood
$BIN/nop --async --ops $OPS --timeout 300 || fail "nop --async failed"
end_section flood
section lock_stat
grep -m 1 'class name' /proc/lock_stat
grep -E "$CLASSES[^:]*:" /proc/lock_stat
end_section lock_stat
dmesg | grep -q 'WARNING:\|BUG:\|possible recursive locking\|circular locking' &&
	fail "lockdep reported a problem: $(dmesg | grep -m 1 'WARNING:\|BUG:\|locking')"
finish
