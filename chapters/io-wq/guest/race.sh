#!/bin/sh
# io-wq chapter, race kernels: patch 8/8's lost wakeup, tried TRIALS times (guest/lostwake.c):
# an epoll-watched ring, one thread completing requests while another enters the wait, then
# one completion that must wake it within BOUND_MS. Both race kernels widen io_uring_poll()'s
# window (patches/io-wq/instrument/0001); they differ only in 8/8. Stdout as in nop.sh.
set -u
. /tmp/kb/bin/common.sh
TRIALS=200
BOUND_MS=100

section lostwake
$BIN/lostwake --trials $TRIALS --bound-ms $BOUND_MS || fail "lostwake failed"
end_section lostwake
finish
