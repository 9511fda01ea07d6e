/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_remote: load scx_remote.bpf.c, print its counters every second and once more on exit
 * (sched-ext chapter of the kernel book; the guest script reads the last line).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <signal.h>
#include <libgen.h>
#include <bpf/bpf.h>
#include <scx/common.h>
#include "scx_remote.bpf.skel.h"

const char help_fmt[] =
"A FIFO sched_ext scheduler that dispatches every Nth task to another CPU's local DSQ.\n"
"\n"
"Usage: %s [-n N]\n"
"\n"
"  -n N   every Nth ops.dispatch() moves a task to the next CPU's local DSQ (0: never; 20)\n"
"  -h     Display this help and exit\n";

enum { STAT_DISPATCH, STAT_REMOTE, STAT_REMOTE_NONE, STAT_REENQ, NR_STATS };

static volatile int exit_req;

static void sigint_handler(int sig)
{
	exit_req = 1;
}

static void print_stats(struct scx_remote *skel)
{
	int nr_cpus = libbpf_num_possible_cpus();
	__u64 sum[NR_STATS] = {}, cnts[nr_cpus];
	__u32 idx;
	int cpu;

	for (idx = 0; idx < NR_STATS; idx++) {
		if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.stats), &idx, cnts) < 0)
			continue;
		for (cpu = 0; cpu < nr_cpus; cpu++)
			sum[idx] += cnts[cpu];
	}
	printf("dispatch=%llu remote=%llu remote_none=%llu reenq=%llu\n",
	       sum[STAT_DISPATCH], sum[STAT_REMOTE], sum[STAT_REMOTE_NONE], sum[STAT_REENQ]);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct scx_remote *skel;
	struct bpf_link *link;
	int opt;

	signal(SIGINT, sigint_handler);
	signal(SIGTERM, sigint_handler);

	skel = SCX_OPS_OPEN(remote_ops, scx_remote);
	skel->struct_ops.remote_ops->flags |= SCX_OPS_ALWAYS_ENQ_IMMED;

	while ((opt = getopt(argc, argv, "n:h")) != -1) {
		switch (opt) {
		case 'n':
			skel->rodata->remote_nth = strtoul(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr, help_fmt, basename(argv[0]));
			return opt != 'h';
		}
	}

	SCX_OPS_LOAD(skel, remote_ops, scx_remote, uei);
	link = SCX_OPS_ATTACH(skel, remote_ops, scx_remote);

	while (!exit_req && !UEI_EXITED(skel, uei)) {
		print_stats(skel);
		sleep(1);
	}
	print_stats(skel);

	bpf_link__destroy(link);
	UEI_REPORT(skel, uei);
	scx_remote__destroy(skel);
	return 0;
}
