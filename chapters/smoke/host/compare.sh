#!/bin/sh
# Smoke comparison (host side, in the toolchain root, after both boots): the marker in each
# kernel's log, read from the files the guests kept ($A, $B: their /tmp/out), and that the two
# getpid outputs differ. It exists to test the compare stage, as getpid.sh tests a boot.
set -eu
marker() {
	grep -c "kernel-book smoke: patched kernel" "$1/keep/dmesg.txt" || true
}
echo "baseline_marker=$(marker "$A")"
echo "patched_marker=$(marker "$B")"
if cmp -s "$A/getpid.out" "$B/getpid.out"; then echo "outputs_differ=0"; else echo "outputs_differ=1"; fi
echo "end=ok"
