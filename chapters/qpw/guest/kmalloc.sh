#!/bin/sh
# qpw chapter, kmalloc kernels: the cover letter's benchmark (guest/kmalloc_bench.c, 9 000 000
# allocations of 64 bytes with GFP_ATOMIC, preemption off, TSC around the loop), loaded LOADS
# times on CPU 0 while CPU 1 idles. Each load prints one kmalloc_bench: line. The first load of
# a boot is the first to touch most of the guest's memory, which under TCG also costs the host
# its page faults; the parser keeps it apart from the later ones.
#
# A load that could not allocate everything (failed > 0, or a page allocation failure in the
# log) or that drew an RCU stall report is discarded and counted: its loop did other work than
# the others'. Any other kernel warning, bug or oops fails the boot, and nothing is published:
# a kernel that warns is not the kernel the chapter means to time.
# Stdout: "== environment" (common.sh), "== kmalloc" with one "load=<n> <module line>" or
# "load=<n> discarded=<reason>" per load, then end=ok (chapters/qpw/parse.py).
set -u
. /tmp/kb/bin/common.sh
LOADS=4

environment
section kmalloc
n=1
while [ "$n" -le "$LOADS" ]; do
	mark "load-$n"
	taskset -c 0 insmod $BIN/kmalloc_bench.ko 2> $W/insmod.err ||
		fail "insmod kmalloc_bench.ko (load $n): $(tr '\n' '|' < $W/insmod.err)"
	rmmod kmalloc_bench || fail "rmmod kmalloc_bench (load $n)"
	since "load-$n"
	line=$(sed -n 's/.*kmalloc_bench: \(size=.*\)/\1/p' $W/since)
	[ -n "$line" ] || fail "load $n printed no kmalloc_bench: result line"
	bad=$(warnings_in $W/since)
	case "$bad" in
	"") case "$line" in
		*" failed=0") echo "load=$n $line" ;;
		*) echo "load=$n discarded=allocation-failed $line" ;;
		esac ;;
	*"stall"*|*"page allocation failure"*)
		echo "load=$n discarded=$(echo "$bad" | head -n 1 | tr ' =' '__')" ;;
	*) tail -n 40 $W/since >&2
	   fail "kernel warning during load $n: $(echo "$bad" | head -n 1)" ;;
	esac
	n=$((n + 1))
done
end_section kmalloc
finish
