#!/bin/sh
# Failure test (tests/pipeline): write half an output, then reset the guest before it ends,
# as a guest that dies mid-run would.
echo "iterations=100000"
echo "ns_total=12"
sync
echo b > /proc/sysrq-trigger
