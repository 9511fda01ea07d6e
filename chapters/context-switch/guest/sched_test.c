// SPDX-License-Identifier: GPL-2.0
/*
 * Context-switch workload for the finish_task_switch() chapter.
 *
 * Two processes pinned to one CPU hand it to each other N times, so that
 * almost every context switch on that CPU goes from one mm to another
 * (switch_mm runs, and with it any spectre_v2_user mitigation). The kernel
 * side is patches/context-switch/instrument/: a counter probe around the
 * finish_task_switch() call point, controlled by the sched_test system
 * call, which prints "sched_test: cpu=... switches=... cycles=...
 * avg_x100=..." lines to the kernel log. This program turns the probe on
 * before the hand-offs and off after them.
 *
 * Modes:
 *   pipe    one byte goes back and forth through two pipes (default)
 *   yield   both processes call sched_yield()
 *   kernel  both processes call sched_test(SCHED_TEST_PINGPONG): the
 *           postings' workload, hand-offs inside the kernel with no
 *           return to user space in between
 *
 * Prints key=value lines on stdout (numbers only), "end=ok" last; messages
 * go to stderr. Exits 0 on success, 1 on a failure, 2 on bad usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * The counter of the kernel probe, read the same plain way (no fence, no
 * isb), for tsc_total and tsc_per_switch: the TSC on x86-64; CNTVCT, the
 * virtual count of the Arm Generic Timer, on aarch64 and 32-bit arm, where
 * the kernel's timer driver lets user space read it (the vDSO does) and it
 * ticks at CNTFRQ, not at the CPU clock.
 */
#if defined(__x86_64__)
#include <x86intrin.h>
#define read_counter()	__rdtsc()
#elif defined(__aarch64__)
static inline uint64_t read_counter(void)
{
	uint64_t v;

	__asm__ __volatile__("mrs %0, cntvct_el0" : "=r" (v));
	return v;
}
#elif defined(__arm__)
static inline uint64_t read_counter(void)
{
	uint64_t v;

	__asm__ __volatile__("mrrc p15, 1, %Q0, %R0, c14" : "=r" (v));
	return v;
}
#else
#error "no counter read for this architecture (x86-64, aarch64, arm)"
#endif

/*
 * The ABI of the instrument patch (kernel/sched/core.c, sys_sched_test()),
 * the same number on x86-64, aarch64 and arm.
 */
#define SCHED_TEST_NR		472
#define SCHED_TEST_STOP		0
#define SCHED_TEST_START	1
#define SCHED_TEST_RESET	2
#define SCHED_TEST_PINGPONG	3
#define SCHED_TEST_SHIFT_MAX	32

/* The most -n accepts: 2^40, or LONG_MAX where long has 32 bits (arm). */
#if LONG_MAX > (1LL << 40)
#define SWITCHES_MAX		(1L << 40)
#else
#define SWITCHES_MAX		LONG_MAX
#endif

enum mode { MODE_PIPE, MODE_YIELD, MODE_KERNEL };
static const char *const mode_names[] = { "pipe", "yield", "kernel" };

struct options {
	int cpu;		/* CPU both processes are pinned to */
	long switches;		/* context switches to cause (about) */
	enum mode mode;
	unsigned int shift;	/* log2 of switches per kernel log line */
	long nr;		/* system call number of sched_test */
	int control;		/* 0: do not call sched_test START/STOP */
	unsigned int timeout;	/* seconds before SIGALRM ends the run */
};

static const char *prog = "sched_test";

static void usage(void)
{
	fprintf(stderr,
		"usage: %s [-c CPU] [-n SWITCHES] [-m pipe|yield|kernel] [-s SHIFT]\n"
		"          [-N SYSCALL_NR] [-S] [-t SECONDS]\n"
		"  -c CPU       pin both processes to CPU (default: the last online CPU)\n"
		"  -n SWITCHES  context switches to cause, even, >= 2 (default 4194304)\n"
		"  -m MODE      pipe (default), yield or kernel (in-kernel ping-pong)\n"
		"  -s SHIFT     kernel prints a line every 2^SHIFT switches, 1..%d\n"
		"               (default 0: the kernel's default, 20)\n"
		"  -N NR        number of the sched_test system call (default %d)\n"
		"  -S           do not start/stop the kernel probe (kernels without it)\n"
		"  -t SECONDS   end the run with SIGALRM after SECONDS, 0 = never\n"
		"               (default 600)\n",
		prog, SCHED_TEST_SHIFT_MAX, SCHED_TEST_NR);
}

static void die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(errno));
	exit(1);
}

static long parse_long(const char *s, const char *opt, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || end == s || *end || v < min || v > max) {
		fprintf(stderr, "%s: %s %s: want an integer in %ld..%ld\n",
			prog, opt, s, min, max);
		usage();
		exit(2);
	}
	return v;
}

static void parse_options(int argc, char **argv, struct options *o)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int c;

	o->cpu = ncpu > 0 ? (int)ncpu - 1 : 0;
	o->switches = 1L << 22;
	o->mode = MODE_PIPE;
	o->shift = 0;
	o->nr = SCHED_TEST_NR;
	o->control = 1;
	o->timeout = 600;
	while ((c = getopt(argc, argv, "c:n:m:s:N:St:h")) != -1) {
		switch (c) {
		case 'c':
			o->cpu = parse_long(optarg, "-c", 0, CPU_SETSIZE - 1);
			break;
		case 'n':
			o->switches = parse_long(optarg, "-n", 2, SWITCHES_MAX);
			break;
		case 'm':
			if (!strcmp(optarg, "pipe")) {
				o->mode = MODE_PIPE;
			} else if (!strcmp(optarg, "yield")) {
				o->mode = MODE_YIELD;
			} else if (!strcmp(optarg, "kernel")) {
				o->mode = MODE_KERNEL;
			} else {
				fprintf(stderr, "%s: -m %s: want pipe, yield or kernel\n",
					prog, optarg);
				usage();
				exit(2);
			}
			break;
		case 's':
			o->shift = parse_long(optarg, "-s", 0, SCHED_TEST_SHIFT_MAX);
			break;
		case 'N':
			o->nr = parse_long(optarg, "-N", 0, 4095);
			break;
		case 'S':
			o->control = 0;
			break;
		case 't':
			o->timeout = parse_long(optarg, "-t", 0, 86400);
			break;
		case 'h':
			usage();
			exit(0);
		default:
			usage();
			exit(2);
		}
	}
	if (optind != argc) {
		fprintf(stderr, "%s: unexpected argument %s\n", prog, argv[optind]);
		usage();
		exit(2);
	}
	if (o->switches % 2) {
		fprintf(stderr, "%s: -n %ld: want an even number (two per round)\n",
			prog, o->switches);
		exit(2);
	}
	if (o->mode == MODE_KERNEL && !o->control) {
		fprintf(stderr, "%s: -m kernel needs the sched_test system call; drop -S\n",
			prog);
		exit(2);
	}
}

static long sched_test(const struct options *o, unsigned int cmd, unsigned long arg)
{
	long ret = syscall(o->nr, cmd, arg);

	if (ret < 0) {
		if (errno == ENOSYS)
			fprintf(stderr, "%s: system call %ld does not exist: is the "
				"instrument patch applied? (-S runs without it)\n",
				prog, o->nr);
		else
			fprintf(stderr, "%s: sched_test(%u, %lu): %s\n",
				prog, cmd, arg, strerror(errno));
		exit(1);
	}
	return ret;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
}

static void put_byte(int fd, char c)
{
	ssize_t n = write(fd, &c, 1);

	if (n != 1) {
		if (n >= 0)
			errno = EIO;
		die("write to pipe");
	}
}

static char get_byte(int fd)
{
	char c;
	ssize_t n = read(fd, &c, 1);

	if (n != 1) {
		if (n == 0)
			fprintf(stderr, "%s: the other process went away\n", prog);
		else
			fprintf(stderr, "%s: read from pipe: %s\n", prog, strerror(errno));
		exit(1);
	}
	return c;
}

/* The rounds of one process; returns the rounds done. */
static long run(const struct options *o, int in, int out, int first, long rounds)
{
	long i;

	switch (o->mode) {
	case MODE_PIPE:
		for (i = 0; i < rounds; i++) {
			if (first) {
				put_byte(out, 'p');
				get_byte(in);
			} else {
				get_byte(in);
				put_byte(out, 'p');
			}
		}
		return rounds;
	case MODE_YIELD:
		for (i = 0; i < rounds; i++)
			sched_yield();
		return rounds;
	case MODE_KERNEL:
		return sched_test(o, SCHED_TEST_PINGPONG, rounds);
	}
	return -1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int p2c[2], c2p[2], res[2];
	struct rusage ru0, ru1, ruc;
	long rounds, done, child_done;
	uint64_t t0, t1, c0, c1;
	struct options o;
	int status = 0;
	pid_t pid;

	if (argc > 0 && argv[0][0])
		prog = argv[0];
	parse_options(argc, argv, &o);
	rounds = o.switches / 2;

	if (pipe(p2c) || pipe(c2p) || pipe(res))
		die("pipe");
	pin(o.cpu);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(p2c[1]);
		close(c2p[0]);
		close(res[0]);
		if (o.timeout)
			alarm(o.timeout);
		put_byte(c2p[1], 'r');	/* ready: pinned (inherited) */
		get_byte(p2c[0]);	/* go */
		child_done = run(&o, p2c[0], c2p[1], 0, rounds);
		if (write(res[1], &child_done, sizeof(child_done)) != sizeof(child_done))
			die("write result");
		_exit(0);
	}
	close(p2c[0]);
	close(c2p[1]);
	close(res[1]);
	if (o.timeout)
		alarm(o.timeout);
	get_byte(c2p[0]);

	if (o.control)
		sched_test(&o, SCHED_TEST_START, o.shift);
	getrusage(RUSAGE_SELF, &ru0);
	t0 = now_ns();
	c0 = read_counter();
	put_byte(p2c[1], 'g');
	done = run(&o, c2p[0], p2c[1], 1, rounds);
	if (o.mode == MODE_YIELD && waitpid(pid, &status, 0) != pid)
		die("waitpid");
	c1 = read_counter();
	t1 = now_ns();
	getrusage(RUSAGE_SELF, &ru1);
	if (o.control)
		sched_test(&o, SCHED_TEST_STOP, 0);

	if (read(res[0], &child_done, sizeof(child_done)) != sizeof(child_done)) {
		fprintf(stderr, "%s: the child reported no result\n", prog);
		child_done = -1;
	}
	if (o.mode != MODE_YIELD && waitpid(pid, &status, 0) != pid)
		die("waitpid");
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "%s: the child failed (wait status 0x%x)\n", prog, status);
		return 1;
	}
	getrusage(RUSAGE_CHILDREN, &ruc);

	fprintf(stderr, "%s: mode %s, cpu %d, %ld rounds of 2 switches\n",
		prog, mode_names[o.mode], o.cpu, rounds);
	printf("cpu=%d\n", o.cpu);
	printf("rounds=%ld\n", rounds);
	printf("rounds_parent=%ld\n", done);
	printf("rounds_child=%ld\n", child_done);
	printf("switches=%ld\n", 2 * rounds);
	printf("ns_total=%llu\n", (unsigned long long)(t1 - t0));
	printf("tsc_total=%llu\n", (unsigned long long)(c1 - c0));
	printf("ns_per_switch=%.3f\n", (double)(t1 - t0) / (2.0 * rounds));
	printf("tsc_per_switch=%.3f\n", (double)(c1 - c0) / (2.0 * rounds));
	printf("nvcsw_parent=%ld\n", ru1.ru_nvcsw - ru0.ru_nvcsw);
	printf("nivcsw_parent=%ld\n", ru1.ru_nivcsw - ru0.ru_nivcsw);
	printf("nvcsw_child=%ld\n", ruc.ru_nvcsw);
	printf("nivcsw_child=%ld\n", ruc.ru_nivcsw);

	/*
	 * In the in-kernel ping-pong the first process to finish releases the
	 * other one round early; anything shorter means a round went missing.
	 */
	if (done < rounds - 1 || child_done < rounds - 1) {
		fprintf(stderr, "%s: only %ld (parent) and %ld (child) of %ld rounds done\n",
			prog, done, child_done, rounds);
		return 1;
	}
	printf("end=ok\n");
	return 0;
}
