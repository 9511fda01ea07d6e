# Sourced by the io-wq chapter's workload scripts (a tools-stage program, so in /tmp/kb/bin):
# the role check, the failure rule and the perf set-up they share.
#
# A kernel's role comes from its command line (iowq.role=timed|race, chapter.yaml variants):
# a workload of another role prints "ran=0" and "end=ok" and stops, so every boot's output
# says what ran on it. Any failure prints "error=<reason>" and exits non-zero: the boot fails
# and nothing is published.
BIN=/tmp/kb/bin
W=/tmp/work

fail() {
	echo "error=$*"
	echo "error=$*" >&2
	exit 1
}

# only_role <role>: continue only on a kernel booted with iowq.role=<role>
only_role() {
	role=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^iowq\.role=//p')
	[ -n "$role" ] || fail "no iowq.role= on the kernel command line (chapter.yaml variants)"
	echo "role=$role"
	if [ "$role" != "$1" ]; then
		echo "ran=0"
		echo "end=ok"
		exit 0
	fi
	echo "ran=1"
	mkdir -p $W
}

# perf_setup: symbols and samples for root without restrictions, and a check that the
# kernel's symbols are readable (else every row would be an address)
perf_setup() {
	echo 0 > /proc/sys/kernel/kptr_restrict
	echo -1 > /proc/sys/kernel/perf_event_paranoid
	grep -q ' io_wq_submit_work$' /proc/kallsyms ||
		fail "io_wq_submit_work is not in /proc/kallsyms (CONFIG_KALLSYMS, CONFIG_IO_URING)"
	echo "perf_version=$(perf --version | sed 's/^perf version //')"
}

# report <perf.data>: the flat profile in perf's field-separated layout: overhead, samples,
# shared object, symbol (kernel and user rows alike; no call graph, no children)
report() {
	echo "== report $1"
	perf report -i "$W/$1" --stdio -q -g none --no-children -n --sort dso,sym \
		--percent-limit 0 -t ';' 2> "$W/$1.report.err" ||
		fail "perf report -i $1 failed: $(tail -n 3 "$W/$1.report.err" | tr '\n' '|')"
	echo "== end report $1"
}
