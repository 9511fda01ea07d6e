#!/bin/sh
# Workqueue chapter (guest side): test_workqueue's in-tree mode (each of 8 threads queues one
# item and waits for it) over the six affinity scopes in one load. Prints the module's result
# lines as the kernel logged them (parser: chapters/workqueue/parse.py). Last line: end=ok.
# Not run on a CONFIG_LOCK_STAT kernel: those variants only count pool->lock contention in the
# batched mode, and lockdep would slow this mode for nothing.
#
# Items per thread: 50000 in-tree; 500 here so that one load fits under TCG.
ITEMS=${WQ_WAIT_ITEMS:-500}

if [ -e /proc/lock_stat ]; then
	echo "skipped=1"
	echo "end=ok"
	exit 0
fi
ko=$(find /tmp/kb/modules -name 'test_workqueue.ko*' | head -n 1)
if [ -z "$ko" ]; then
	echo "no test_workqueue.ko under /tmp/kb/modules: is CONFIG_TEST_WORKQUEUE=m?" >&2
	exit 1
fi
mark="kb-workqueue: begin wait run"
echo "$mark" > /dev/kmsg
err=$(insmod "$ko" mode=wait wq_items="$ITEMS" 2>&1)
case "$err" in
*"Resource temporarily unavailable"*) ;;
*) echo "insmod $ko: ${err:-loaded and stayed loaded}" >&2; exit 1 ;;
esac
dmesg | sed -n "\\|$mark|,\$p" | grep -E 'test_workqueue: (running|  |mode=)'
echo "end=ok"
