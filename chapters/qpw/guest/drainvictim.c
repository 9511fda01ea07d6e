// SPDX-License-Identifier: GPL-2.0
/*
 * drainvictim: how often a drain of per-CPU caches, requested on a housekeeping
 * CPU, interrupts a SCHED_FIFO loop on an isolated CPU.
 *
 *   drainvictim <victim cpu> <trigger cpu> <rounds> <tmpfs dir> [<pause ms>]
 *
 * A child process on the victim CPU runs at SCHED_FIFO 1 and, each round,
 * first dirties its per-CPU state by writing one new page of a tmpfs file
 * (the folio waits in that CPU's LRU batch), then spins on rdtsc until the
 * round ends, keeping the longest gap between two reads and how many gaps
 * exceed GAP_NS.  The parent, on the trigger CPU, waits for the page, marks
 * the round in the trace buffer, writes 1 to /proc/sys/vm/drop_caches (which
 * calls lru_add_drain_all() first) and times that write.  Dirtying before
 * every round matters: a drain only goes to CPUs whose batches hold
 * something, so a single write before the loop would make only the first
 * round find work.  With a pause, the parent waits that long after the page
 * is written before it triggers: requests spaced more than the fair
 * server's period apart (1 s) each find its deadline passed and wait out a
 * new deferral, where back-to-back requests restart it before its deadline.
 *
 * Output, one line per round, then totals (chapters/qpw/parse.py):
 *   round=<n> trigger_ns=<write latency> max_gap_ns=<n> gaps=<n> nvcsw=<n> nivcsw=<n>
 * The context switches are the victim's own (getrusage, per round).  The
 * trace markers "kb-round <n> begin/end" let the parser attribute the
 * kernel's events on the victim CPU to rounds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define GAP_NS 20000		/* a gap a real-time loop would notice: 20 us */
#define PAGE 4096
#define MAX_ROUNDS 1000

struct round {
	uint64_t max_gap_ns, gaps;
	long nvcsw, nivcsw;
};

struct shared {
	int seq;	/* 2n+1: round n's page written; 2n+2: round n over (atomics) */
	double tsc_per_ns;
	struct round round[MAX_ROUNDS];
};

static void die(const char *what)
{
	printf("error=%s: %s\n", what, strerror(errno));
	fflush(stdout);
	exit(1);
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

/* TSC ticks per nanosecond, measured over 100 ms of CLOCK_MONOTONIC */
static double tsc_rate(void)
{
	uint64_t t0 = now_ns(), c0 = __rdtsc();

	while (now_ns() - t0 < 100000000u)
		;
	return (double)(__rdtsc() - c0) / (double)(now_ns() - t0);
}

static void victim(struct shared *sh, int cpu, int rounds, const char *dir)
{
	struct sched_param sp = { .sched_priority = 1 };
	char page[PAGE], path[4096];
	struct rusage ru0, ru1;
	int fd, n;

	pin(cpu);
	if (sched_setscheduler(0, SCHED_FIFO, &sp))
		die("sched_setscheduler(SCHED_FIFO)");
	snprintf(path, sizeof(path), "%s/dirtied.dat", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		die("open tmpfs file");
	memset(page, 'x', sizeof(page));
	sh->tsc_per_ns = tsc_rate();

	for (n = 0; n < rounds; n++) {
		uint64_t limit = (uint64_t)(GAP_NS * sh->tsc_per_ns);
		uint64_t prev, t, gap, max_gap = 0, gaps = 0;

		if (pwrite(fd, page, PAGE, (off_t)n * PAGE) != PAGE)
			die("pwrite tmpfs page");
		getrusage(RUSAGE_SELF, &ru0);
		__atomic_store_n(&sh->seq, 2 * n + 1, __ATOMIC_RELEASE);
		prev = __rdtsc();
		while (__atomic_load_n(&sh->seq, __ATOMIC_ACQUIRE) != 2 * n + 2) {
			t = __rdtsc();
			gap = t - prev;
			prev = t;
			if (gap > max_gap)
				max_gap = gap;
			gaps += gap > limit;
		}
		getrusage(RUSAGE_SELF, &ru1);
		sh->round[n] = (struct round) {
			.max_gap_ns = (uint64_t)(max_gap / sh->tsc_per_ns),
			.gaps = gaps,
			.nvcsw = ru1.ru_nvcsw - ru0.ru_nvcsw,
			.nivcsw = ru1.ru_nivcsw - ru0.ru_nivcsw,
		};
	}
	exit(0);
}

static void mark(int fd, int n, const char *what)
{
	char line[64];
	int len = snprintf(line, sizeof(line), "kb-round %d %s\n", n, what);

	if (write(fd, line, len) != len)
		die("write trace_marker");
}

int main(int argc, char **argv)
{
	int vcpu, tcpu, rounds, pause_ms = 0, marker, status, n;
	struct shared *sh;
	pid_t child;

	if (argc != 5 && argc != 6) {
		fprintf(stderr,
			"usage: %s <victim cpu> <trigger cpu> <rounds> <tmpfs dir> [<pause ms>]\n",
			argv[0]);
		return 2;
	}
	if (argc == 6)
		pause_ms = atoi(argv[5]);
	vcpu = atoi(argv[1]);
	tcpu = atoi(argv[2]);
	rounds = atoi(argv[3]);
	if (rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "rounds must be 1..%d\n", MAX_ROUNDS);
		return 2;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap");
	marker = open("/sys/kernel/tracing/trace_marker", O_WRONLY);
	if (marker < 0)
		die("open trace_marker");
	pin(tcpu);
	child = fork();
	if (child < 0)
		die("fork");
	if (!child)
		victim(sh, vcpu, rounds, argv[4]);

	printf("victim_cpu=%d\ntrigger_cpu=%d\nrounds=%d\ngap_threshold_ns=%d\npause_ms=%d\n",
	       vcpu, tcpu, rounds, GAP_NS, pause_ms);
	for (n = 0; n < rounds; n++) {
		uint64_t t0, t1;
		int fd;

		while (__atomic_load_n(&sh->seq, __ATOMIC_ACQUIRE) != 2 * n + 1) {
			if (waitpid(child, &status, WNOHANG) == child) {
				printf("error=victim exited before round %d\n", n);
				return 1;
			}
			usleep(100);	/* the trigger CPU also runs the drain's flush */
		}
		if (pause_ms)
			usleep(pause_ms * 1000);
		mark(marker, n, "begin");
		t0 = now_ns();
		fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
		if (fd < 0 || write(fd, "1", 1) != 1)
			die("write /proc/sys/vm/drop_caches");
		close(fd);
		t1 = now_ns();
		mark(marker, n, "end");
		__atomic_store_n(&sh->seq, 2 * n + 2, __ATOMIC_RELEASE);
		printf("round=%d trigger_ns=%llu\n", n, (unsigned long long)(t1 - t0));
	}
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		die("victim did not finish");
	printf("tsc_per_ns=%.6f\n", sh->tsc_per_ns);
	for (n = 0; n < rounds; n++)
		printf("round=%d max_gap_ns=%llu gaps=%llu nvcsw=%ld nivcsw=%ld\n", n,
		       (unsigned long long)sh->round[n].max_gap_ns,
		       (unsigned long long)sh->round[n].gaps,
		       sh->round[n].nvcsw, sh->round[n].nivcsw);
	return 0;
}
