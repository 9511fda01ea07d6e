#!/bin/sh
# Workqueue chapter (guest side): the instrument patch's batched-submit mode of test_workqueue,
# once per affinity scope, 8 producers queueing WQ_BATCH_ITEMS items each on a WQ_UNBOUND
# workqueue. Prints the module's result line per scope as the kernel logged it; on a
# CONFIG_LOCK_STAT kernel it also clears /proc/lock_stat before each scope and prints the
# pool->lock class afterwards (parser: chapters/workqueue/parse.py). Last line: end=ok.
#
# Items per producer: the author ran 200000. Under TCG on this book's 2-core host one scope
# at 200000 would take minutes, so 2000 (measured: see ../chapter.yaml).
ITEMS=${WQ_BATCH_ITEMS:-2000}
PRODUCERS=8
SCOPES="cpu smt cache_shard cache numa system"

ko=$(find /tmp/kb/modules -name 'test_workqueue.ko*' | head -n 1)
if [ -z "$ko" ]; then
	echo "no test_workqueue.ko under /tmp/kb/modules: is CONFIG_TEST_WORKQUEUE=m?" >&2
	exit 1
fi
for scope in $SCOPES; do
	[ -w /proc/lock_stat ] && echo 0 > /proc/lock_stat
	mark="kb-workqueue: begin batch $scope run"
	echo "$mark" > /dev/kmsg
	# The module returns -EAGAIN after its runs by design; anything else is a failure.
	err=$(insmod "$ko" mode=batch scope="$scope" batch_producers=$PRODUCERS \
		batch_items="$ITEMS" 2>&1)
	case "$err" in
	*"Resource temporarily unavailable"*) ;;
	*) echo "insmod $ko (scope $scope): ${err:-loaded and stayed loaded}" >&2; exit 1 ;;
	esac
	dmesg | sed -n "\\|$mark|,\$p" | grep 'test_workqueue: mode='
	if [ -r /proc/lock_stat ]; then
		echo "lock_stat scope=$scope"
		grep -m 1 'class name' /proc/lock_stat
		# The pool->lock class: its statistics line and, when it was contended, the
		# contention points under it (up to the next class or the blank line after them).
		awk '/^ *[^ ]+:[ 0-9.]+$/ { on = ($1 ~ /^&pool->lock/) } /^[ .]*$/ { on = 0 } on' \
			/proc/lock_stat
	fi
done
echo "end=ok"
