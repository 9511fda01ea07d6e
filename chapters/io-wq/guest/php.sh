#!/bin/sh
# io-wq chapter, timed kernels: the author's PHP case. The same server (guest/httpd.c) hands
# every request for a .php path to one of 16 persistent php-cgi processes (Debian's, a guest
# package) running guest/phpworker.php, which runs the tiny script guest/page.php and answers
# through a pipe that the server splices to the socket (pipe->socket, SEND and SPLICE forced
# async). A fixed number of requests from h2load (common.sh) under
# `perf record -g -e cpu-clock -F 997`, which follows the server's children: the PHP processes
# are in the profile too. The flat profile, the callers of the spin and unlock symbols, and the
# recording kept for the host-side perf diff. Stdout as in nop.sh.
set -u
. /tmp/kb/bin/common.sh
REQUESTS=20000

perf_setup
loopback_up
php_cgi=$(ls /usr/bin/php-cgi[0-9]* 2>/dev/null | head -n 1)
[ -x "$php_cgi" ] || fail "no php-cgi in the guest's root (chapter.yaml guest_packages)"
echo "php_cgi=$php_cgi"
# the server wants a directory of static files; one small page, never requested
mkdir -p $W/www
echo '<!DOCTYPE html><title>io-wq</title>' > $W/www/index.html

serve php.data --root $W/www --php $BIN/phpworker.php --php-cgi "$php_cgi" --php-workers 16
load $REQUESTS /index.php
unserve
report php.data
callers php.data
keep php.data
finish
