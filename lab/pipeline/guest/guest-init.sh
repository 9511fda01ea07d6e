#!/bin/sh
# PID 1 of every guest (started by the kernel command line that lab/pipeline/vm.py builds).
# The toolchain root is / (read-only 9p); /tmp/kb is this boot's job directory (read-only 9p,
# holds job.env, the workload scripts and bin/); the host directory for results is mounted
# at /tmp/out. Every step is bounded: the workload runs under `timeout`, and the host kills
# the guest at its boot timeout. The last console line is the marker the host waits for.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sys /sys
# the WARNINGs of the boot itself, read before init runs any program (a shell builtin): counted
# even when the log has lost them; a kernel without CONFIG_BUG prints and counts no WARN()
boot_warn_count=
[ -r /sys/kernel/warn_count ] && read -r boot_warn_count < /sys/kernel/warn_count
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs run /run
mkdir -p /tmp/out /tmp/work
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 kbout /tmp/out
. /tmp/kb/job.env

{
	echo "uname=$(uname -r)"
	echo "cmdline=$(cat /proc/cmdline)"
	echo "nproc=$(grep -c ^processor /proc/cpuinfo)"
	echo "cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
	echo "mem_kb=$(sed -n 's/^MemTotal:[[:space:]]*\([0-9]*\).*/\1/p' /proc/meminfo)"
	echo "numa_nodes=$(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l)"
	echo "boot_warn_count=$boot_warn_count"
} > /tmp/out/guest-info.txt

rc=0
for w in $KB_WORKLOADS; do
	cd /tmp/work
	timeout -s KILL "$KB_WORKLOAD_TIMEOUT" sh "/tmp/kb/workloads/$w.sh" \
		> "/tmp/out/$w.out" 2> "/tmp/out/$w.err"
	wrc=$?
	echo "$w $wrc" >> /tmp/out/status.txt
	[ "$wrc" -ne 0 ] && rc=$wrc
done
# one snapshot of the ring buffer (syslog(2)): /dev/kmsg, dmesg's default, is read until it is
# drained, which never happens on a kernel that warns on every allocation the read makes. The
# 16 MiB read buffer holds the whole ring (128 KiB here); an error lands in the file. busybox's
# dmesg (an Arm guest's) reads syslog(2) always and has no -S.
if [ -L /bin/dmesg ] && [ "$(readlink /bin/dmesg)" = busybox ]; then
	dmesg -s 16777216 > /tmp/out/dmesg.txt 2>&1
else
	dmesg -S -s 16777216 > /tmp/out/dmesg.txt 2>&1
fi
cd /tmp/out && sha256sum -- *.txt *.out *.err > /tmp/work/SHA256SUMS && cp /tmp/work/SHA256SUMS /tmp/out/
cd /
sync
umount /tmp/out
echo "KB-DONE rc=$rc"
# sysrq b resets at once, without draining the console: give the marker line time to leave
# the serial port (a busy host once lost it, and a finished boot looked truncated).
sleep 1
echo b > /proc/sysrq-trigger
