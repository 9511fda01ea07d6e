// SPDX-License-Identifier: GPL-2.0
/*
 * Smoke workload: time N getpid() system calls with the guest TSC and CLOCK_MONOTONIC.
 * Under TCG -icount the TSC counts executed instructions, so tsc_per_call is then a
 * deterministic, machine-independent number. Prints key=value lines; "end=ok" last, so the
 * host can tell a complete output from a truncated one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
	uint64_t t0, t1, c0, c1;
	long i;

	if (n <= 0) {
		fprintf(stderr, "usage: %s ITERATIONS (a positive number)\n", argv[0]);
		return 2;
	}
	syscall(SYS_getpid);	/* warm the path once */
	t0 = now_ns();
	c0 = __rdtsc();
	for (i = 0; i < n; i++)
		syscall(SYS_getpid);
	c1 = __rdtsc();
	t1 = now_ns();
	printf("iterations=%ld\n", n);
	printf("ns_total=%llu\n", (unsigned long long)(t1 - t0));
	printf("tsc_total=%llu\n", (unsigned long long)(c1 - c0));
	printf("ns_per_call=%.3f\n", (double)(t1 - t0) / n);
	printf("tsc_per_call=%.3f\n", (double)(c1 - c0) / n);
	printf("end=ok\n");
	return 0;
}
