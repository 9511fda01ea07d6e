#!/bin/sh
# Smoke workload (guest side): whether the patched kernel's marker line is in the kernel log
# (it proves which variant actually booted), then the getpid timing, whose last line is end=ok.
# The kernel log also goes to keep/, where only the host-side comparison (compare.sh) reads it.
mkdir -p /tmp/out/keep
dmesg > /tmp/out/keep/dmesg.txt
if grep -q "kernel-book smoke: patched kernel" /tmp/out/keep/dmesg.txt; then
	echo "marker=1"
else
	echo "marker=0"
fi
# the chapter's guest package (guest_packages: hello): only the layer over the root has it
if [ "$(hello -g layer 2>/dev/null)" = layer ]; then
	echo "layer=1"
else
	echo "layer=0"
fi
exec /tmp/kb/bin/getpid "${KB_SMOKE_ITERATIONS:-100000}"
