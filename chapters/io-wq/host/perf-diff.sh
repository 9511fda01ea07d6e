#!/bin/sh
# io-wq chapter, host side (compare: in chapter.yaml): `perf diff` of each recording the two
# boots of one repetition kept (nop.data, http.data, php.data), the baseline kernel's
# ($A/keep) against the patched one's ($B/keep), with the perf of the toolchain root both
# guests recorded with.
# Each recording's kernel symbols come from that kernel's vmlinux ($A_BUILD, $B_BUILD), put
# where perf looks first: in the build-id cache the boot kept, under the build id the
# recording names; the script stops unless the two ids match. (perf 7.2 would read a cached
# kallsyms only after /proc/kallsyms, which here is this host's.)
# perf diff's own layout (-t ';'): baseline share; delta in points; shared object; symbol,
# in perf's default order (-c delta-abs -o 1: largest absolute change first).
# Stdout: key=value lines, a section "== diff <recording>" ... "== end diff <recording>" per
# recording, then "end=ok" (chapters/io-wq/parse.py, parser perfdiff).
set -eu
fail() {
	echo "error=$*"
	echo "error=$*" >&2
	exit 1
}
bid=/tmp/buildid
mkdir -p $bid
echo "perf_version=$(perf --version | sed 's/^perf version //')"
for pair in "$A $A_BUILD baseline" "$B $B_BUILD patched"; do
	set -- $pair
	[ -d "$1/keep/buildid" ] ||
		fail "$1/keep/buildid is missing: did the workloads keep their recordings?"
	cp -a "$1/keep/buildid/." $bid/
	vmlinux_id=$(perf buildid-list -i "$2/vmlinux")
	[ -n "$vmlinux_id" ] || fail "$2/vmlinux has no build id"
	echo "$3_vmlinux=$vmlinux_id"
	for data in nop.data http.data php.data; do
		[ -f "$1/keep/$data" ] || fail "$1/keep/$data is missing"
		kernel=$(perf buildid-list -f -i "$1/keep/$data" |
			sed -n 's/^\([0-9a-f]*\) \[kernel.kallsyms\]$/\1/p')
		[ "$kernel" = "$vmlinux_id" ] ||
			fail "$1/keep/$data was recorded on kernel '$kernel', not on $2/vmlinux ($vmlinux_id)"
	done
	mkdir -p "$bid/[kernel.kallsyms]/$vmlinux_id"
	ln -sf "$2/vmlinux" "$bid/[kernel.kallsyms]/$vmlinux_id/elf"
done
for data in nop.data http.data php.data; do
	echo "== diff $data"
	perf --buildid-dir $bid diff -f -t ';' "$A/keep/$data" "$B/keep/$data" 2> /tmp/diff.err ||
		fail "perf diff of $data failed: $(tail -n 3 /tmp/diff.err | tr '\n' '|')"
	echo "== end diff $data"
done
echo "end=ok"
