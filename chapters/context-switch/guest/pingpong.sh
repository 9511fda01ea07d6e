#!/bin/sh
# Context-switch chapter (guest side): the postings' in-kernel ping-pong (sched_test -m kernel)
# on the isolated CPU, with the instrument patch's rdtsc probe on. Prints what decides the
# numbers (isolated CPUs, spectre_v2 mitigation state, the CPU's IBPB/STIBP flags), then the
# program's key=value output, then the kernel's probe lines of this run; end=ok last
# (parser: chapters/context-switch/parse.py).
#
# Sizes: the postings print every 2^20 switches. Under TCG a switch costs microseconds, so
# 2^SHIFT = 2^17 switches a line and 4 lines a boot (measured: see ../chapter.yaml).
SHIFT=${CS_SHIFT:-17}
SWITCHES=${CS_SWITCHES:-$((4 << SHIFT))}
CPU=$(cat /sys/devices/system/cpu/isolated 2>/dev/null)
case "$CPU" in
"" | *[!0-9]*) CPU=$(($(nproc --all) - 1)) ;;
esac

echo "text.isolated=$(cat /sys/devices/system/cpu/isolated 2>/dev/null)"
# Arm: the frequency of the counter the probe reads, as the kernel found it (62.5 MHz on
# QEMU's virt machine, 19.2 MHz on the cover letter's Raspberry Pi 3b); x86 prints none
dmesg | sed -n 's/.*arch_timer: .* running at \([0-9.]*\)MHz.*/\1/p' | head -n 1 |
	awk '{ printf "counter_hz=%.0f\n", $1 * 1000000 }'
echo "text.spectre_v2=$(cat /sys/devices/system/cpu/vulnerabilities/spectre_v2 2>/dev/null)"
flags=$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
for f in ibpb stibp ibrs ibrs_enhanced retpoline pti; do
	case " $flags " in
	*" $f "*) echo "cpu_flag.$f=1" ;;
	*) echo "cpu_flag.$f=0" ;;
	esac
done

mark="kb-context-switch: begin pingpong"
echo "$mark" > /dev/kmsg
/tmp/kb/bin/sched_test -m kernel -c "$CPU" -n "$SWITCHES" -s "$SHIFT" > /tmp/work/pp.out ||
	{ cat /tmp/work/pp.out; exit 1; }
grep -v '^end=ok$' /tmp/work/pp.out
echo "shift=$SHIFT"
dmesg | sed -n "\\|$mark|,\$p" | grep 'sched_test: '
grep -q '^end=ok$' /tmp/work/pp.out && echo "end=ok"
