// SPDX-License-Identifier: GPL-2.0
/*
 * NOP workload of the io-wq chapter: one thread, one ring, a fixed number of
 * IORING_OP_NOP requests, submitted 16 to a system call with at most 64 in
 * flight.
 *
 * With --async every SQE carries IOSQE_ASYNC, so each NOP is queued to the
 * task's io-wq and completed by an iou-wrk worker: the submitter and the
 * workers meet on the bound io_wq_acct's lock, which is what the patch series
 * under test shortens. Without it the NOPs complete inline during submission
 * and never touch io-wq: the control.
 *
 * Prints key=value lines on stdout; errors are a single error= line. Exits 0
 * on success, 1 on a failure (including --timeout), 2 on bad usage.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RING_DEPTH	64
#define BATCH		16
/*
 * Workers are counted in the submitting thread every SAMPLE_EVERY completions
 * rather than by a sampler thread: on a 2-vCPU guest a third runnable thread
 * would compete with the submitter and the workers for the CPUs and show up
 * in the profile. Idle workers stay for seconds (WORKER_IDLE_TIMEOUT), so a
 * coarse period plus one count after the last completion still sees the peak.
 */
#define SAMPLE_EVERY	8192

static volatile unsigned long done;
static unsigned int timeout_s;

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [--ops N] [--async] [--timeout S]\n"
		"  --ops N      NOPs to complete (default 1000000)\n"
		"  --async      set IOSQE_ASYNC on every SQE (io-wq path)\n"
		"  --timeout S  fail after S seconds, 0 = never (default 600)\n",
		prog);
}

/* Appends the decimal form of v to p; the alarm handler cannot use printf. */
static char *put_ulong(char *p, unsigned long v)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = '0' + v % 10;
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

static char *put_str(char *p, const char *s)
{
	while (*s)
		*p++ = *s++;
	return p;
}

static void on_alarm(int sig)
{
	char msg[96], *p = msg;

	(void)sig;
	p = put_str(p, "error=timeout after ");
	p = put_ulong(p, timeout_s);
	p = put_str(p, " s (done=");
	p = put_ulong(p, done);
	p = put_str(p, ")\n");
	if (write(STDOUT_FILENO, msg, p - msg) < 0)
		_exit(1);
	_exit(1);
}

/* Number of this process's threads whose name starts with "iou-wrk". */
static int count_workers(void)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	if (!dir)
		return -1;
	while ((de = readdir(dir))) {
		char path[sizeof(de->d_name) + 8], comm[16];
		ssize_t len;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/comm", de->d_name);
		fd = openat(dirfd(dir), path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;	/* the thread has exited meanwhile */
		len = read(fd, comm, sizeof(comm));
		close(fd);
		if (len >= 7 && !memcmp(comm, "iou-wrk", 7))
			n++;
	}
	closedir(dir);
	return n;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int parse_ulong(const char *s, unsigned long max, unsigned long *v)
{
	char *end;

	errno = 0;
	*v = strtoul(s, &end, 10);
	return !errno && end != s && !*end && *s != '-' && *v <= max ? 0 : -1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ops", required_argument, NULL, 'n' },
		{ "async", no_argument, NULL, 'a' },
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long ops = 1000000, submitted = 0, inflight = 0, v;
	unsigned long next_sample = SAMPLE_EVERY;
	unsigned int sqe_flags = 0;
	int peak = 0, workers, opt, ret;
	struct io_uring ring;
	struct sigaction sa;
	double t0, t1;

	timeout_s = 600;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			if (parse_ulong(optarg, ~0UL, &ops) || !ops) {
				printf("error=--ops wants a positive integer, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'a':
			sqe_flags = IOSQE_ASYNC;
			break;
		case 't':
			if (parse_ulong(optarg, 86400, &v)) {
				printf("error=--timeout wants seconds in 0..86400, got '%s'\n",
				       optarg);
				return 2;
			}
			timeout_s = v;
			break;
		default:
			usage(argv[0]);
			printf("error=bad usage\n");
			return 2;
		}
	}
	if (optind != argc) {
		usage(argv[0]);
		printf("error=unexpected argument '%s'\n", argv[optind]);
		return 2;
	}

	ret = io_uring_queue_init(RING_DEPTH, &ring, 0);
	if (ret < 0) {
		printf("error=io_uring_queue_init(%d): -%d (%s)\n", RING_DEPTH, -ret,
		       strerror(-ret));
		return 1;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	alarm(timeout_s);

	t0 = now();
	while (done < ops) {
		struct io_uring_cqe *cqe;
		unsigned int head, seen = 0;

		if (submitted < ops && inflight + BATCH <= RING_DEPTH) {
			unsigned long n = ops - submitted < BATCH ? ops - submitted : BATCH;

			for (unsigned long i = 0; i < n; i++) {
				struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

				io_uring_prep_nop(sqe);
				sqe->flags |= sqe_flags;
			}
			submitted += n;
			inflight += n;
		}
		/*
		 * Block only when another batch would not fit or none is left.
		 * A stop and continue (a debugger, perf) ends a wait with -EINTR.
		 */
		ret = io_uring_submit_and_wait(&ring, submitted == ops ||
					       inflight + BATCH > RING_DEPTH);
		if (ret < 0 && ret != -EINTR) {
			printf("error=io_uring_submit_and_wait: -%d (%s) (done=%lu)\n",
			       -ret, strerror(-ret), done);
			return 1;
		}
		io_uring_for_each_cqe(&ring, head, cqe) {
			if (cqe->res != 0) {
				printf("error=NOP completed with res=%d (%s) (done=%lu)\n",
				       cqe->res, cqe->res < 0 ? strerror(-cqe->res) :
				       "positive result", done);
				return 1;
			}
			seen++;
		}
		io_uring_cq_advance(&ring, seen);
		done += seen;
		inflight -= seen;
		if (done >= next_sample) {
			workers = count_workers();
			if (workers > peak)
				peak = workers;
			next_sample += SAMPLE_EVERY;
		}
	}
	t1 = now();
	alarm(0);
	workers = count_workers();
	if (workers > peak)
		peak = workers;
	if (workers < 0) {
		printf("error=cannot read /proc/self/task: %s\n", strerror(errno));
		return 1;
	}

	printf("mode=%s\n", sqe_flags ? "async" : "inline");
	printf("ops=%lu\n", done);
	printf("seconds=%.6f\n", t1 - t0);
	printf("ops_per_second=%.1f\n", done / (t1 - t0));
	printf("peak_workers=%d\n", peak);
	printf("ring_entries=%u\n", ring.sq.ring_entries);
	printf("batch=%d\n", BATCH);
	io_uring_queue_exit(&ring);
	return 0;
}
