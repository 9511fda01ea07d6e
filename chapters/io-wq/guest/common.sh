# Sourced by the io-wq chapter's workload scripts (a tools-stage program, so in /tmp/kb/bin):
# the perf set-up and the HTTP servers they share, over the guest library (lab/pipeline/guest/
# lib.sh: fail, sections, finish). A boot runs only its variant's workloads (chapter.yaml
# variants): the timed kernels the profiles, the race kernels the lost-wakeup test, the
# lock-statistics kernels the flood on /proc/lock_stat. Any failure prints "error=<reason>" and
# exits non-zero: the boot fails and nothing is published.
. /tmp/kb/lib.sh

# perf record's sampling rate: co-prime with HZ=1000, so samples do not fall in step with the tick
FREQ=997
# where the symbols whose samples say where a CPU spun or waited with interrupts off: the
# qspinlock slowpath (spinning with interrupts on) and the functions that enable interrupts
# again (a cpu-clock sample is an hrtimer interrupt, taken only then)
SPIN_SYMBOLS=queued_spin_lock_slowpath,_raw_spin_unlock_irq,_raw_spin_unlock_irqrestore,finish_task_switch.isra.0

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
	section "report $1"
	perf report -i "$W/$1" --stdio -q -g none --no-children -n --sort dso,sym \
		--percent-limit 0 -t ';' 2> "$W/$1.report.err" ||
		fail "perf report -i $1 failed: $(tail -n 3 "$W/$1.report.err" | tr '\n' '|')"
	end_section "report $1"
}

# callers <perf.data>: for each of $SPIN_SYMBOLS, its call chains folded into one line each
# with their sample counts (perf report -g folded,...,count), callee first, 8 frames at most:
# which function's lock the samples spun on, or which unlock let the timer in
callers() {
	section "callers $1"
	perf report -i "$W/$1" --stdio -q --no-children -n --sort sym -t ';' --max-stack 8 \
		-g folded,0,callee,function,count --percent-limit 0 --percentage absolute \
		-S "$SPIN_SYMBOLS" 2> "$W/$1.callers.err" ||
		fail "perf report -g folded -i $1 failed: $(tail -n 3 "$W/$1.callers.err" | tr '\n' '|')"
	end_section "callers $1"
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

# The HTTP workloads (http.sh, php.sh): our server (httpd.c) on 127.0.0.1:$PORT under perf
# record, driven by Debian's h2load (a guest package, chapter.yaml guest_packages) for a fixed
# number of requests over 16 keep-alive HTTP/1.1 connections from one thread, so every boot
# does the same work; the load generator shares the two vCPUs with the server, as nothing else
# can here.
PORT=8080
CONNECTIONS=16

# loopback_up: guest-init leaves the loopback interface down; up it through SIOCSIFFLAGS (no
# ip(8) in the root, but its python3)
loopback_up() {
	python3 -c '
import fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))
' || fail "cannot bring the loopback interface up"
}

# serve <recording> <httpd options...>: start the server under perf record with its events
# disabled (-D -1), wait until it listens (it listens once every PHP worker is ready), then
# enable them through perf's control FIFO and wait for perf's ack: the profile covers the load
# and not the start-up. SERVER_PID is perf's, whose child the server is.
serve() {
	rec=$1
	shift
	rm -f $W/perf.ctl $W/perf.ack
	mkfifo $W/perf.ctl $W/perf.ack || fail "cannot make perf's control FIFOs"
	# held open read-write, so neither side of the ack FIFO blocks on open
	exec 4<> $W/perf.ack
	perf --buildid-dir $W/buildid record -q -g -e cpu-clock -F $FREQ -o $W/$rec -D -1 \
		--control fifo:$W/perf.ctl,$W/perf.ack -- \
		$BIN/httpd --port $PORT "$@" > $W/httpd.out 2> $W/record.err &
	SERVER_PID=$!
	n=40
	until grep -q ":$(printf '%04X' $PORT) 00000000:0000 0A" /proc/net/tcp; do
		kill -0 $SERVER_PID 2>/dev/null ||
			fail "httpd exited before listening: $(tail -n 3 $W/record.err $W/httpd.out | tr '\n' '|')"
		n=$((n - 1))
		[ $n -le 0 ] && fail "httpd does not listen on port $PORT after 20 s"
		sleep 0.5
	done
	echo enable > $W/perf.ctl
	read -r ack <&4
	[ "$ack" = ack ] || fail "perf record did not acknowledge 'enable' (got '$ack')"
	exec 4<&-
}

# load <requests> <path...>: h2load's run, the paths requested in turn on each connection
load() {
	count=$1
	shift
	urls=
	for p in "$@"; do
		urls="$urls http://127.0.0.1:$PORT$p"
	done
	section load
	h2load --h1 -n "$count" -c $CONNECTIONS -t 1 $urls 2> $W/load.err | grep -v '^progress:' ||
		fail "h2load failed: $(tail -n 3 $W/load.err | tr '\n' '|')"
	end_section load
}

# unserve: stop the server (SIGTERM: it prints its counts and exits 0), then perf record
unserve() {
	pkill -TERM -x httpd || fail "no httpd to stop: $(tail -n 3 $W/record.err | tr '\n' '|')"
	wait $SERVER_PID
	rc=$?
	section server
	cat $W/httpd.out
	[ $rc -eq 0 ] || fail "perf record -- httpd exited $rc: $(tail -n 3 $W/record.err | tr '\n' '|')"
	end_section server
}
