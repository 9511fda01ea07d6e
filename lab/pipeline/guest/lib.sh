# The guest library: a chapter's workload scripts source it (". /tmp/kb/lib.sh") for the output
# layout the shared parsers read (lab/parse/keyvalue.py, lab/parse/sections.py) and for the
# failure rule. The boot stage copies it into every boot's job directory beside guest-init.sh.
#
# A workload prints key=value lines, optionally in sections ("== <name>" ... "== end <name>"),
# and "end=ok" last; a failed step prints "error=<reason>" and exits non-zero, which fails the
# boot, so nothing of it is published. A boot runs only its variant's workloads (chapter.yaml
# variants.<name>.workloads), so no script has to ask which kernel it is on.

# the tools stage's programs, and a scratch directory on the guest's tmpfs
BIN=/tmp/kb/bin
W=/tmp/work
mkdir -p $W

# fail <reason>: the failure rule (on stdout for the parser, on stderr for the boot's error)
fail() {
	echo "error=$*"
	echo "error=$*" >&2
	exit 1
}

# section <name>, end_section <name>: one program's output, read by name
section() {
	echo "== $1"
}
end_section() {
	echo "== end $1"
}

# bounded <seconds> <what> <command...>: run a step with a time bound of its own, shorter than
# the workload's, so a hang names the step that hung
bounded() {
	seconds=$1
	what=$2
	shift 2
	timeout -s KILL "$seconds" "$@"
	rc=$?
	[ $rc -eq 137 ] && fail "$what did not finish within $seconds s"
	return $rc
}

# finish: the end marker; a parser refuses an output without it as truncated
finish() {
	echo "end=ok"
}
