#!/bin/sh
# Smoke workload (guest side): whether the patched kernel's marker line is in the kernel log
# (it proves which variant actually booted), then the getpid timing, whose last line is end=ok.
if dmesg | grep -q "kernel-book smoke: patched kernel"; then
	echo "marker=1"
else
	echo "marker=0"
fi
exec /tmp/kb/bin/getpid "${KB_SMOKE_ITERATIONS:-100000}"
