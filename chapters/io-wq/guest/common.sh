# Sourced by the io-wq chapter's workload scripts (a tools-stage program, so in /tmp/kb/bin):
# the role check, the failure rule and the perf set-up they share.
#
# A kernel's role comes from its command line (iowq.role=timed|race, chapter.yaml variants):
# a workload of another role prints "ran=0" and "end=ok" and stops, so every boot's output
# says what ran on it. Any failure prints "error=<reason>" and exits non-zero: the boot fails
# and nothing is published.
BIN=/tmp/kb/bin
W=/tmp/work
# perf record's sampling rate: co-prime with HZ=1000, so samples do not fall in step with the tick
FREQ=997
# where the symbols whose samples say where a CPU spun or waited with interrupts off: the
# qspinlock slowpath (spinning with interrupts on) and the functions that enable interrupts
# again (a cpu-clock sample is an hrtimer interrupt, taken only then)
SPIN_SYMBOLS=queued_spin_lock_slowpath,_raw_spin_unlock_irq,_raw_spin_unlock_irqrestore,finish_task_switch.isra.0

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

# callers <perf.data>: for each of $SPIN_SYMBOLS, its call chains folded into one line each
# with their sample counts (perf report -g folded,...,count), callee first, 8 frames at most:
# which function's lock the samples spun on, or which unlock let the timer in
callers() {
	echo "== callers $1"
	perf report -i "$W/$1" --stdio -q --no-children -n --sort sym -t ';' --max-stack 8 \
		-g folded,0,callee,function,count --percent-limit 0 --percentage absolute \
		-S "$SPIN_SYMBOLS" 2> "$W/$1.callers.err" ||
		fail "perf report -g folded -i $1 failed: $(tail -n 3 "$W/$1.callers.err" | tr '\n' '|')"
	echo "== end callers $1"
}

# keep <perf.data>: the recording and the build-id cache perf record filled (the kernel's
# kallsyms, the programs and libraries it sampled) go to keep/ of the boot's output, which the
# host-side comparison reads and the published run never holds
keep() {
	mkdir -p /tmp/out/keep
	cp "$W/$1" /tmp/out/keep/ && cp -a "$W/buildid" /tmp/out/keep/ ||
		fail "cannot keep $1 for the host-side perf diff"
	ls "$W/buildid/[kernel.kallsyms]"/*/kallsyms > /dev/null 2>&1 ||
		fail "perf record cached no kallsyms of this kernel: perf diff could not name its symbols"
}
