# Sourced by the qpw chapter's workload scripts (a tools-stage program, so in /tmp/kb/bin): the
# facts about the booted kernel that every workload prints and the kernel-log helpers, over the
# guest library (lab/pipeline/guest/lib.sh: fail, sections, finish). A boot runs only its
# variant's workloads (chapter.yaml variants). Any failure prints "error=<reason>" and exits
# non-zero: the boot fails and nothing is published.
. /tmp/kb/lib.sh

# dmesg reads one snapshot of the kernel's ring buffer (syslog(2)). Its default, /dev/kmsg, is
# read until drained, and on a kernel that warns on every slab refill (v4's lockdep assertion)
# each read raises new warnings, so the read chases its own tail for minutes.
dmesg() {
	command dmesg -S -s 16777216 "$@"
}

# environment: what this boot is (preemption model, PW locks, TSC), checked against what the
# command line asked for. A pwlocks= the kernel did not take fails the boot: pwlocks= parses
# integers only and warns otherwise, and a kernel without CONFIG_PWLOCKS lists it among the
# unknown parameters.
environment() {
	section environment
	config=$(zcat /proc/config.gz) || fail "no /proc/config.gz (CONFIG_IKCONFIG_PROC)"
	for opt in CONFIG_PREEMPT_RT CONFIG_PREEMPT_DYNAMIC CONFIG_PREEMPT_LAZY CONFIG_PWLOCKS \
		CONFIG_PWLOCKS_DEFAULT CONFIG_PROVE_LOCKING CONFIG_DEBUG_ATOMIC_SLEEP CONFIG_FAILSLAB \
		CONFIG_JUMP_LABEL CONFIG_SLUB_TINY; do
		echo "$config" | grep -q "^$opt=y" && echo "$opt=1" || echo "$opt=0"
	done
	want=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^pwlocks=//p')
	echo "pwlocks=${want:--1}"
	# one read of the log for every fact below. The boot's own lines are gone once the log has
	# wrapped (a kernel that warns at every slab refill): then the model is unknown and
	# pwlocks= cannot be checked
	dmesg > $W/environment-log
	head -n 1 $W/environment-log | grep -q '^\[ *0\.000000\]' && from_boot=1 || from_boot=0
	[ -n "$want" ] && [ $from_boot = 0 ] &&
		fail "the kernel log wrapped before pwlocks=$want could be checked"
	grep -q "PWLOCKS: invalid pwlocks parameter" $W/environment-log &&
		fail "the kernel rejected pwlocks=$want (it takes 0 or 1)"
	if [ -n "$want" ] && ! echo "$config" | grep -q '^CONFIG_PWLOCKS=y'; then
		fail "pwlocks=$want on the command line of a kernel without CONFIG_PWLOCKS"
	fi
	# "Dynamic Preempt: <model>" (PREEMPT_DYNAMIC kernels only)
	model=$(sed -n 's/.*Dynamic Preempt: \([a-z]*\).*/\1/p' $W/environment-log | tail -n 1)
	[ $from_boot = 1 ] || model=unknown
	echo "preempt_model=${model:-none}"
	# the refined calibration when the kernel did one, else the detected frequency (MHz with
	# three decimals, printed as kHz)
	mhz='\([0-9]*\)\.\([0-9]\{3\}\) MHz'
	khz=$(sed -n -e "s/.*tsc: Refined TSC clocksource calibration: $mhz.*/\\1\\2/p" \
		-e "s/.*tsc: Detected $mhz processor.*/\\1\\2/p" $W/environment-log | tail -n 1)
	echo "tsc_khz=$khz"
	echo "isolated=$(cat /sys/devices/system/cpu/isolated)"
	end_section environment
}

# mark <name>: a line in the kernel log that since() finds again (KERN_DEBUG, so it stays off
# the console). A mark rather than a count of lines: once the log has wrapped, a count no
# longer says where a load began.
mark() {
	echo "<7>kb-mark $1" > /dev/kmsg || fail "cannot write mark $1 to /dev/kmsg"
}

# since <name>: the kernel log after mark <name>, into $W/since, from one read of the log. A
# mark the log no longer holds fails the boot, so no warning after it can go unseen.
since() {
	dmesg > $W/log-now
	grep -q " kb-mark $1\$" $W/log-now ||
		fail "mark $1 is not in the kernel log (it wrapped past it, or /dev/kmsg dropped it)"
	sed -n "/ kb-mark $1\$/,\$p" $W/log-now | tail -n +2 > $W/since
}

# warnings_in <file>: its kernel log lines that would make a result unusable
warnings_in() {
	bad='WARNING:|BUG:|Oops|rcu: INFO: .* stall|self-detected stall'
	bad="$bad|page allocation failure|scheduling while atomic|Call Trace:"
	grep -E "$bad" "$1"
}
