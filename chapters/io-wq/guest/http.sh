#!/bin/sh
# io-wq chapter, timed kernels: the author's static-file case, our server (guest/httpd.c:
# epoll-driven, every SEND and SPLICE forced async, file->pipe->socket) for a fixed number of
# requests from h2load (common.sh), under `perf record -g -e cpu-clock -F 997`; the flat
# profile, the callers of the spin and unlock symbols, and the recording kept for the host-side
# perf diff (host/perf-diff.sh).
#
# The files: 16 of 8 KiB (one pipe holds one; the author's file sizes are not known), each
# connection requesting them in turn. Stdout as in nop.sh.
set -u
. /tmp/kb/bin/common.sh
REQUESTS=100000

perf_setup
loopback_up
mkdir -p $W/www
paths=
i=0
while [ $i -lt 16 ]; do
	head -c 8192 /dev/urandom > $W/www/f$i
	paths="$paths /f$i"
	i=$((i + 1))
done

serve http.data --root $W/www
load $REQUESTS $paths
unserve
report http.data
callers http.data
keep http.data
finish
