#!/bin/sh
# Workqueue chapter (guest side): the CPU topology the guest kernel built from QEMU's, which
# decides the unbound workqueue's pods per affinity scope (smt: a core's threads; cache: CPUs
# sharing the last-level cache; numa: a node). Sizes as key=value for the keyvalue parser;
# the CPU lists themselves go to stderr, kept with the run's raw outputs.
count() {	# number of CPUs in a cpulist such as 0-3,6
	echo "$1" | tr ',' '\n' | awk -F- 'NF == 2 { n += $2 - $1 + 1; next }
		$1 != "" { n++ } END { print n + 0 }'
}
cpu=/sys/devices/system/cpu
echo "online_cpus=$(count "$(cat $cpu/online)")"
echo "numa_nodes=$(ls -d /sys/devices/system/node/node[0-9]* | wc -l)"
for c in 0 4; do
	t=$cpu/cpu$c/topology
	echo "cpu$c.smt_cpus=$(count "$(cat $t/thread_siblings_list)")"
	echo "cpu$c.package_cpus=$(count "$(cat $t/core_siblings_list)")"
	echo "cpu$c.package_id=$(cat $t/physical_package_id)"
	echo "cpu$c.core_id=$(cat $t/core_id)"
	echo "cpu$c: threads $(cat $t/thread_siblings_list) package $(cat $t/core_siblings_list)" >&2
	llc=$(ls -d $cpu/cpu$c/cache/index[0-9]* 2>/dev/null | tail -n 1)
	if [ -n "$llc" ]; then
		echo "cpu$c.llc_level=$(cat "$llc/level")"
		echo "cpu$c.llc_cpus=$(count "$(cat "$llc/shared_cpu_list")")"
		echo "cpu$c: L$(cat "$llc/level") shared with $(cat "$llc/shared_cpu_list")" >&2
	fi
done
for n in /sys/devices/system/node/node[0-9]*; do
	echo "$(basename "$n").cpus=$(count "$(cat "$n/cpulist")")"
	echo "$(basename "$n"): cpus $(cat "$n/cpulist")" >&2
done
echo "end=ok"
