#!/bin/sh
# io-wq chapter, timed kernels: an HTTP analogue of the author's static-file server, our
# io_uring server (guest/httpd.c: SEND, then SPLICE file->pipe->socket with IOSQE_ASYNC, so
# the splices run on io-wq's unbound workers) under Debian's wrk over loopback, the server
# under `perf record -g -e cpu-clock -F 997` (chapters/io-wq/), its recording kept for the
# host-side perf diff (host/perf-diff.sh).
#
# The files: 16 of 8 KiB (one pipe holds one; the author's file sizes are not known). wrk runs
# one thread and 16 connections for WRK_SECONDS; the server runs a little longer, so the
# profile covers the whole load. Stdout as in nop.sh.
set -u
. /tmp/kb/bin/common.sh
PORT=8080
WRK_SECONDS=20

only_role timed
perf_setup
# guest-init leaves the loopback interface down; up it through SIOCSIFFLAGS (no ip(8) in the
# root, but its python3)
python3 -c '
import fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))
' || fail "cannot bring the loopback interface up"
mkdir -p $W/www
i=0
while [ $i -lt 16 ]; do
	head -c 8192 /dev/urandom > $W/www/f$i
	i=$((i + 1))
done

perf --buildid-dir $W/buildid record -q -g -e cpu-clock -F $FREQ -o $W/http.data -- \
	$BIN/httpd --port $PORT --root $W/www --seconds $((WRK_SECONDS + 8)) \
	> $W/httpd.out 2> $W/record.err &
PERF_PID=$!
n=40
until grep -q ":$(printf '%04X' $PORT) 00000000:0000 0A" /proc/net/tcp; do
	kill -0 $PERF_PID 2>/dev/null ||
		fail "httpd exited before listening: $(tail -n 3 $W/record.err $W/httpd.out | tr '\n' '|')"
	n=$((n - 1))
	[ $n -le 0 ] && fail "httpd does not listen on port $PORT after 20 s"
	sleep 0.5
done

echo "== wrk"
wrk -t1 -c16 -d${WRK_SECONDS}s --latency http://127.0.0.1:$PORT/f0 2> $W/wrk.err ||
	fail "wrk failed: $(tail -n 3 $W/wrk.err | tr '\n' '|')"
echo "== end wrk"
wait $PERF_PID
rc=$?
echo "== server"
cat $W/httpd.out
[ $rc -eq 0 ] || fail "perf record -- httpd exited $rc: $(tail -n 3 $W/record.err | tr '\n' '|')"
echo "== end server"
report http.data
keep http.data
echo "end=ok"
