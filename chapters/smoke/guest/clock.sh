#!/bin/sh
# Smoke workload on the guest library (lab/pipeline/guest/lib.sh): the guest kernel's
# clocksource and uptime in one section, around a bounded step. Only the icount variant runs
# it (chapter.yaml variants), so the test sees a boot run its variant's workloads alone.
. /tmp/kb/lib.sh
section clock
clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource) ||
	fail "no current clocksource in sysfs"
[ "$clocksource" = tsc ] && echo "tsc=1" || echo "tsc=0"
bounded 10 "a short sleep" sleep 0.1
echo "uptime_s=$(cut -d ' ' -f 1 /proc/uptime)"
end_section clock
finish
