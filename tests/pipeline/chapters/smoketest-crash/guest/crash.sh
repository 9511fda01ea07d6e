#!/bin/sh
# Failure test (tests/pipeline): panic the guest kernel on purpose via sysrq.
echo "start=crash"
echo c > /proc/sysrq-trigger
