// SPDX-License-Identifier: GPL-2.0
/*
 * Lost-wakeup test for patch 8/8 of the series ("io_uring: skip redundant
 * poll wakeups"). That patch makes io_poll_wq_wake() call __wake_up() only
 * if it can exchange ctx->poll_wq_waiting from 1 to 0, and sets the flag to
 * 1 in io_uring_poll() *before* poll_wait() queues the caller. The race, in
 * the roles this program gives its two threads:
 *
 *   B: poll(ring fd)                      A: submit NOP (CQE_SKIP_SUCCESS)
 *   ---------------------------------     ---------------------------------
 *   io_uring_poll()
 *     poll_wq_waiting = 1
 *                                         completion flush, no CQE posted
 *                                         io_poll_wq_wake()
 *                                           wq_has_sleeper(): true, epoll's
 *                                             entry is queued
 *                                           xchg(poll_wq_waiting, 0) == 1
 *                                           __wake_up(): wakes epoll only
 *     poll_wait(): B's entry queued
 *     CQ empty: mask 0, B sleeps
 *                                         submit one NOP that posts a CQE
 *                                         io_poll_wq_wake()
 *                                           xchg(poll_wq_waiting, 0) == 0
 *                                           no __wake_up(): B sleeps on
 *
 * poll() calls ->poll() again only after a wakeup, so nothing sets the flag
 * back and the CQE goes unnoticed. Two details decide the setup:
 *  - Without a second entry on poll_wq, wq_has_sleeper() is false in the
 *    window and the xchg is never reached; so the ring fd is registered in
 *    an epoll instance (EPOLLIN) that nobody ever waits on.
 *  - The waiter must be poll(), not epoll_wait(): epoll keeps its entry on
 *    poll_wq for good, every wakeup of it puts the ring on the ready list,
 *    and epoll_wait() then calls ->poll() (setting the flag again) before it
 *    sleeps. The vulnerable window is poll()'s first pass, the only one that
 *    queues an entry.
 *
 * One trial: A releases B through a spinning handshake and submits one
 * skip-success NOP per io_uring_enter() (each runs io_poll_wq_wake() once)
 * until B announces that it is about to call poll(), then --burst more, so
 * the wakeups straddle B's first io_uring_poll(). A then waits until B is
 * asleep (its /proc stat state is S), posts one CQE and gives B --bound-ms
 * to report back through an eventfd. A B still asleep then is a lost
 * wakeup: A interrupts B's poll() with SIGUSR1, drains the CQE and goes on.
 *
 * Without patch 8 every wakeup reaches B, so lost=0. The window is a few
 * instructions wide: a miss is rare even with the patch, unless a delay is
 * put between the flag and poll_wait().
 *
 * usage: lostwake [--trials N] [--bound-ms M] [--burst K]
 * Prints key=value lines and exits 0 whatever the count of losses; a setup
 * or runtime failure prints error= and exits 1 (2 on bad usage).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static struct io_uring ring;
static int done_efd;		/* B -> A: "my poll() returned" */
static unsigned long trials = 2000;

static atomic_ulong go;		/* A -> B: trial number B may start */
static atomic_ulong entering;	/* B -> A: trial whose poll() B enters now */
static atomic_int b_tid;

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
	va_list ap;

	fputs("error=", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	exit(1);
}

/*
 * A and B get a CPU each: sharing one, B would only run while A is
 * preempted, and A's wakeups could never land inside B's io_uring_poll().
 */
static void pin_threads(pthread_attr_t *b_attr)
{
	cpu_set_t allowed, set;
	int cpu[2], n = 0;

	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		die("sched_getaffinity: %s", strerror(errno));
	for (int i = 0; i < CPU_SETSIZE && n < 2; i++)
		if (CPU_ISSET(i, &allowed))
			cpu[n++] = i;
	if (n < 2)
		die("needs two CPUs to run its threads in parallel, has %d", n);
	CPU_ZERO(&set);
	CPU_SET(cpu[0], &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity: %s", strerror(errno));
	CPU_ZERO(&set);
	CPU_SET(cpu[1], &set);
	pthread_attr_init(b_attr);
	n = pthread_attr_setaffinity_np(b_attr, sizeof(set), &set);
	if (n)
		die("pthread_attr_setaffinity_np: %s", strerror(n));
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Only there so that SIGUSR1 interrupts poll() instead of killing B. */
static void on_usr1(int sig)
{
	(void)sig;
}

static void *poller(void *arg)
{
	struct pollfd pfd = { .fd = ring.ring_fd, .events = POLLIN };

	(void)arg;
	atomic_store(&b_tid, gettid());
	for (unsigned long t = 1; t <= trials; t++) {
		/* Spin, not sleep: A must see B leave this loop at once. */
		while (atomic_load_explicit(&go, memory_order_acquire) != t)
			;
		atomic_store_explicit(&entering, t, memory_order_release);
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			die("poll(ring fd): %s", strerror(errno));
		if (eventfd_write(done_efd, 1))
			die("eventfd_write: %s", strerror(errno));
	}
	return NULL;
}

static void submit_nop(unsigned int flags, unsigned long user_data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	int ret;

	io_uring_prep_nop(sqe);
	sqe->flags |= flags;
	sqe->user_data = user_data;
	ret = io_uring_submit(&ring);
	if (ret != 1)
		die("io_uring_submit: %d (%s)", ret, ret < 0 ? strerror(-ret) : "short");
}

/* B's scheduler state letter from /proc/self/task/TID/stat. */
static char task_state(int stat_fd)
{
	char buf[512], *p;
	ssize_t len = pread(stat_fd, buf, sizeof(buf) - 1, 0);

	if (len <= 0)
		die("cannot read B's /proc stat: %s", strerror(errno));
	buf[len] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static unsigned long parse_ulong(const char *opt, const char *s, unsigned long max)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || !v || v > max) {
		fprintf(stderr, "usage: lostwake [--trials N] [--bound-ms M] [--burst K]\n");
		printf("error=%s wants an integer in 1..%lu, got '%s'\n", opt, max, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "trials", required_argument, NULL, 't' },
		{ "bound-ms", required_argument, NULL, 'b' },
		{ "burst", required_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 },
	};
	struct epoll_event ev = { .events = EPOLLIN };
	unsigned long bound_ms = 200, burst = 64;
	unsigned long lost = 0, not_asleep = 0, skip_nops = 0;
	struct sigaction sa = { .sa_handler = on_usr1 };
	struct pollfd done_pfd;
	char path[64];
	int epfd, stat_fd, opt, ret;
	pthread_attr_t b_attr;
	pthread_t b;
	double t0;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 't':
			trials = parse_ulong("--trials", optarg, 100000000);
			break;
		case 'b':
			bound_ms = parse_ulong("--bound-ms", optarg, 60000);
			break;
		case 'k':
			burst = parse_ulong("--burst", optarg, 1000000);
			break;
		default:
			fprintf(stderr, "usage: %s [--trials N] [--bound-ms M] [--burst K]\n",
				argv[0]);
			printf("error=bad usage\n");
			return 2;
		}
	}
	if (optind != argc) {
		printf("error=unexpected argument '%s'\n", argv[optind]);
		return 2;
	}

	ret = io_uring_queue_init(8, &ring, 0);
	if (ret < 0)
		die("io_uring_queue_init: -%d (%s)", -ret, strerror(-ret));
	if (!(ring.features & IORING_FEAT_CQE_SKIP))
		die("kernel lacks IORING_FEAT_CQE_SKIP");
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, ring.ring_fd, &ev))
		die("epoll on the ring fd: %s", strerror(errno));
	done_efd = eventfd(0, EFD_CLOEXEC);
	if (done_efd < 0)
		die("eventfd: %s", strerror(errno));
	done_pfd = (struct pollfd){ .fd = done_efd, .events = POLLIN };
	if (sigaction(SIGUSR1, &sa, NULL))
		die("sigaction: %s", strerror(errno));

	pin_threads(&b_attr);
	ret = pthread_create(&b, &b_attr, poller, NULL);
	if (ret)
		die("pthread_create: %s", strerror(ret));
	while (!atomic_load(&b_tid))
		;
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", atomic_load(&b_tid));
	stat_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (stat_fd < 0)
		die("cannot open %s: %s", path, strerror(errno));

	t0 = now();
	for (unsigned long t = 1; t <= trials; t++) {
		unsigned long after = 0;
		struct io_uring_cqe *cqe;
		eventfd_t one;
		double limit;

		atomic_store_explicit(&go, t, memory_order_release);
		while (after < burst) {
			if (atomic_load_explicit(&entering, memory_order_acquire) == t)
				after++;
			submit_nop(IOSQE_CQE_SKIP_SUCCESS, 0);
			skip_nops++;
		}
		/* The CQE must come after B's check of the CQ, or B never sleeps. */
		limit = now() + bound_ms / 1e3;
		while (task_state(stat_fd) != 'S')
			if (now() > limit) {
				not_asleep++;
				break;
			}
		submit_nop(0, t);
		ret = poll(&done_pfd, 1, bound_ms);
		if (ret < 0)
			die("poll(eventfd): %s", strerror(errno));
		if (!ret) {
			lost++;
			pthread_kill(b, SIGUSR1);
		}
		if (eventfd_read(done_efd, &one))
			die("eventfd_read: %s", strerror(errno));

		ret = io_uring_wait_cqe(&ring, &cqe);
		if (ret < 0)
			die("io_uring_wait_cqe: %s", strerror(-ret));
		if (cqe->user_data != t || cqe->res != 0)
			die("trial %lu: unexpected CQE user_data=%llu res=%d", t,
			    (unsigned long long)cqe->user_data, cqe->res);
		io_uring_cqe_seen(&ring, cqe);
		if (io_uring_cq_ready(&ring))
			die("trial %lu: a skip-success NOP posted a CQE", t);
	}
	pthread_join(b, NULL);

	printf("trials=%lu\n", trials);
	printf("lost=%lu\n", lost);
	printf("bound_ms=%lu\n", bound_ms);
	printf("seconds=%.3f\n", now() - t0);
	printf("burst=%lu\n", burst);
	printf("skip_nops=%lu\n", skip_nops);
	printf("not_asleep=%lu\n", not_asleep);
	return 0;
}
