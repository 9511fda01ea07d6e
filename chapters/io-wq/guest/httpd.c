// SPDX-License-Identifier: GPL-2.0
/*
 * HTTP workload of the io-wq chapter: a static-file HTTP/1.1 server on one
 * io_uring, shaped like the server behind the series' HTTP numbers, for
 * loopback load such as `wrk -t1 -c16 -d20s http://127.0.0.1:PORT/NAME`.
 *
 * A multishot ACCEPT takes connections; each connection has one RECV or one
 * response in flight at a time. A 200 response is a linked chain
 *
 *	SEND header (MSG_MORE) -> SPLICE file->pipe -> SPLICE pipe->socket
 *
 * whose two splices carry IOSQE_ASYNC, so every response passes through the
 * unbound io-wq accounting twice: that is the io_wq_acct traffic under test.
 * The files are opened once at start and must each fit into one pipe, so one
 * splice moves a whole body; every connection has its own pipe.
 *
 * usage: httpd --port P --root DIR [--seconds S]
 *
 * Serves for S seconds (default 20) or until SIGINT/SIGTERM, then prints
 * key=value statistics and exits 0. A fatal error prints one error= line
 * and exits 1 (2 on bad usage).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS	64
#define MAX_FILES	256
#define REQ_BUF_SIZE	4096
/* 3 SQEs per connection at most, plus accept, timer and signal: never full. */
#define RING_ENTRIES	256
#define CQ_ENTRIES	1024

enum op {
	OP_ACCEPT = 1,
	OP_RECV,
	OP_SEND,
	OP_SPLICE_IN,
	OP_SPLICE_OUT,
	OP_TIMER,
	OP_SIGNAL,
};

/* Why a response chain broke; the worse reason wins. */
enum chain_fail {
	CHAIN_OK,
	CHAIN_SHORT,	/* short transfer or cancelled link: count as error */
	CHAIN_RESET,	/* the peer went away: count as reset */
};

struct file_entry {
	char name[NAME_MAX + 1];
	int fd;
	unsigned int size;
};

struct conn {
	int fd;			/* -1: slot free */
	int pipe[2];
	char buf[REQ_BUF_SIZE];	/* received, not yet answered bytes */
	size_t len;
	char hdr[128];		/* header of the response in flight */
	unsigned int hdr_len;
	const struct file_entry *file;	/* body of that response, or NULL */
	int pending;		/* CQEs of that response still to come */
	enum chain_fail fail;
	bool close_after;
};

static struct io_uring ring;
static struct file_entry files[MAX_FILES];
static int nr_files;
static int max_size;		/* of the files: what each pipe must hold */
static struct conn conns[MAX_CONNS];
static int listen_fd;
static bool stop;

/*
 * requests: responses sent whole, whatever their status; not_found: the 404s
 * among them; bytes: response bytes sent; errors: 400s, short transfers and
 * connections refused for want of a slot; resets: connections that ended in
 * ECONNRESET or EPIPE.
 */
static struct {
	unsigned long requests, not_found, bytes, errors, resets, connections;
} stats;

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

static uint64_t tag(enum op op, int idx)
{
	return (uint64_t)op << 32 | (uint32_t)idx;
}

/* Makes room for n SQEs, so that a link chain never straddles two submits. */
static void reserve_sqes(unsigned int n)
{
	int ret;

	if (io_uring_sq_space_left(&ring) >= n)
		return;
	ret = io_uring_submit(&ring);
	if (ret < 0)
		die("io_uring_submit: %s", strerror(-ret));
}

static struct io_uring_sqe *get_sqe(void)
{
	reserve_sqes(1);
	return io_uring_get_sqe(&ring);
}

/* After the prep helper: older liburing (2.3) clears sqe->flags in it. */
static void tag_sqe(struct io_uring_sqe *sqe, enum op op, int idx, unsigned int flags)
{
	io_uring_sqe_set_data64(sqe, tag(op, idx));
	io_uring_sqe_set_flags(sqe, flags);
}

static void arm_accept(void)
{
	struct io_uring_sqe *sqe = get_sqe();

	io_uring_prep_multishot_accept(sqe, listen_fd, NULL, NULL, SOCK_CLOEXEC);
	tag_sqe(sqe, OP_ACCEPT, 0, 0);
}

static void arm_recv(struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe();

	io_uring_prep_recv(sqe, c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
	tag_sqe(sqe, OP_RECV, c - conns, 0);
}

static void close_conn(struct conn *c)
{
	close(c->fd);
	close(c->pipe[0]);
	close(c->pipe[1]);
	c->fd = -1;
}

/*
 * Queues the response held in c->hdr (and c->file). Without a body the header
 * is the whole response: one SEND. MSG_WAITALL makes io_uring retry a partial
 * send instead of completing it short and letting the chain go on.
 */
static void respond(struct conn *c)
{
	int idx = c - conns;
	unsigned int size = c->file ? c->file->size : 0;
	struct io_uring_sqe *sqe;

	c->fail = CHAIN_OK;
	if (!size) {
		sqe = get_sqe();
		io_uring_prep_send(sqe, c->fd, c->hdr, c->hdr_len, MSG_WAITALL);
		tag_sqe(sqe, OP_SEND, idx, 0);
		c->pending = 1;
		return;
	}
	reserve_sqes(3);
	/* MSG_MORE holds the header back until the body follows it. */
	sqe = get_sqe();
	io_uring_prep_send(sqe, c->fd, c->hdr, c->hdr_len, MSG_MORE | MSG_WAITALL);
	tag_sqe(sqe, OP_SEND, idx, IOSQE_IO_LINK);
	/* Offset 0, not the file position: all connections share one fd. */
	sqe = get_sqe();
	io_uring_prep_splice(sqe, c->file->fd, 0, c->pipe[1], -1, size, 0);
	tag_sqe(sqe, OP_SPLICE_IN, idx, IOSQE_IO_LINK | IOSQE_ASYNC);
	sqe = get_sqe();
	io_uring_prep_splice(sqe, c->pipe[0], -1, c->fd, -1, size, 0);
	tag_sqe(sqe, OP_SPLICE_OUT, idx, IOSQE_ASYNC);
	c->pending = 3;
}

static const struct file_entry *find_file(const char *name, size_t len)
{
	for (int i = 0; i < nr_files; i++)
		if (strlen(files[i].name) == len && !memcmp(files[i].name, name, len))
			return &files[i];
	return NULL;
}

/* status: the status line's tail, optionally followed by more header lines */
static void set_header(struct conn *c, const char *status, unsigned int length)
{
	c->hdr_len = snprintf(c->hdr, sizeof(c->hdr),
			      "HTTP/1.1 %s\r\nContent-Length: %u\r\n\r\n", status, length);
}

/*
 * Answers the first complete request in c->buf, or asks for more bytes.
 * Only `GET /NAME HTTP/1.1` is understood; anything else gets a 400 and the
 * connection is closed after it, since its framing can no longer be trusted.
 * Bytes after the request (a pipelined one) stay in the buffer for later.
 */
static void serve(struct conn *c)
{
	static const char get[] = "GET /", http11[] = " HTTP/1.1";
	const size_t fixed = sizeof(get) - 1 + sizeof(http11) - 1;
	char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
	const char *name = c->buf + sizeof(get) - 1;
	size_t req_len, line_len = 0, name_len = 0;

	if (!end && c->len < sizeof(c->buf)) {
		arm_recv(c);
		return;
	}
	/* A header that fills the whole buffer is answered with a 400. */
	req_len = end ? (size_t)(end + 4 - c->buf) : c->len;
	if (end)
		line_len = (char *)memchr(c->buf, '\r', req_len) - c->buf;
	if (line_len >= fixed)
		name_len = line_len - fixed;
	c->file = NULL;
	if (line_len < fixed || memcmp(c->buf, get, sizeof(get) - 1) ||
	    memcmp(name + name_len, http11, sizeof(http11) - 1) ||
	    memchr(name, ' ', name_len)) {
		set_header(c, "400 Bad Request\r\nConnection: close", 0);
		c->close_after = true;
		stats.errors++;
	} else {
		c->file = find_file(name, name_len);
		if (c->file) {
			set_header(c, "200 OK", c->file->size);
		} else {
			set_header(c, "404 Not Found", 0);
			stats.not_found++;
		}
	}
	c->len -= req_len;
	memmove(c->buf, c->buf + req_len, c->len);
	respond(c);
}

static void on_accept(struct io_uring_cqe *cqe)
{
	int one = 1, fd = cqe->res;
	struct conn *c = NULL;
	int pipe_size;

	if (!(cqe->flags & IORING_CQE_F_MORE))
		arm_accept();
	if (fd < 0)
		die("accept: %s", strerror(-fd));
	for (int i = 0; i < MAX_CONNS && !c; i++)
		if (conns[i].fd < 0)
			c = &conns[i];
	if (!c) {
		close(fd);
		stats.errors++;
		return;
	}
	/* Responses are complete when sent; Nagle would only delay the next. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (pipe2(c->pipe, O_CLOEXEC))
		die("pipe2: %s", strerror(errno));
	/* Pipes past pipe-user-pages-soft get one page: a body would not fit. */
	pipe_size = fcntl(c->pipe[1], F_GETPIPE_SZ);
	if (pipe_size < max_size)
		die("pipe of connection %lu holds %d bytes, a file has %d; raise /proc/sys/fs/pipe-user-pages-soft",
		    stats.connections, pipe_size, max_size);
	c->fd = fd;
	c->len = 0;
	c->close_after = false;
	stats.connections++;
	arm_recv(c);
}

static bool is_reset(int err)
{
	return err == -ECONNRESET || err == -EPIPE;
}

static void on_recv(struct conn *c, int res)
{
	if (res > 0) {
		c->len += res;
		serve(c);
		return;
	}
	if (res < 0 && !is_reset(res))
		die("recv: %s", strerror(-res));
	if (res < 0)
		stats.resets++;
	close_conn(c);
}

static void on_chain(struct conn *c, enum op op, int res)
{
	unsigned int want = op == OP_SEND ? c->hdr_len : c->file->size;
	enum chain_fail fail = CHAIN_OK;

	if (is_reset(res))
		fail = CHAIN_RESET;
	else if (res == -ECANCELED || (res >= 0 && (unsigned int)res != want))
		fail = CHAIN_SHORT;
	else if (res < 0)
		die("%s: %s", op == OP_SEND ? "send" : "splice", strerror(-res));
	else if (op != OP_SPLICE_IN)
		stats.bytes += res;
	if (fail > c->fail)
		c->fail = fail;
	if (--c->pending)
		return;

	if (c->fail == CHAIN_RESET)
		stats.resets++;
	else if (c->fail == CHAIN_SHORT)
		stats.errors++;
	else
		stats.requests++;
	/* A broken chain may have left bytes in the pipe: start afresh. */
	if (c->fail || c->close_after)
		close_conn(c);
	else
		serve(c);
}

static void on_cqe(struct io_uring_cqe *cqe)
{
	enum op op = cqe->user_data >> 32;
	struct conn *c = &conns[(uint32_t)cqe->user_data];

	switch (op) {
	case OP_ACCEPT:
		on_accept(cqe);
		break;
	case OP_RECV:
		on_recv(c, cqe->res);
		break;
	case OP_SEND:
	case OP_SPLICE_IN:
	case OP_SPLICE_OUT:
		on_chain(c, op, cqe->res);
		break;
	case OP_TIMER:
	case OP_SIGNAL:
		stop = true;
		break;
	}
}

/* Opens every regular file of root that one pipe can hold whole. */
static void load_files(const char *root)
{
	int dfd, pipe_fds[2], pipe_size;
	struct dirent *de;
	DIR *dir;

	if (pipe2(pipe_fds, O_CLOEXEC))
		die("pipe2: %s", strerror(errno));
	pipe_size = fcntl(pipe_fds[1], F_GETPIPE_SZ);
	close(pipe_fds[0]);
	close(pipe_fds[1]);

	dir = opendir(root);
	if (!dir)
		die("cannot open --root %s: %s", root, strerror(errno));
	dfd = dirfd(dir);
	while ((de = readdir(dir))) {
		struct file_entry *f = &files[nr_files];
		struct stat st;

		/* A FIFO or device could block open() or splice: regular files only. */
		if (de->d_name[0] == '.' ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (nr_files == MAX_FILES)
			die("%s holds more than %d files", root, MAX_FILES);
		if (st.st_size > pipe_size)
			die("%s/%s has %lld bytes, more than a pipe holds (%d)", root,
			    de->d_name, (long long)st.st_size, pipe_size);
		f->fd = openat(dfd, de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (f->fd < 0)
			die("cannot open %s/%s: %s", root, de->d_name, strerror(errno));
		strcpy(f->name, de->d_name);
		f->size = st.st_size;
		if (max_size < (int)f->size)
			max_size = f->size;
		nr_files++;
	}
	closedir(dir);
	if (!nr_files)
		die("no regular file in --root %s", root);
}

static void open_listener(int port)
{
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int one = 1;

	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0)
		die("socket: %s", strerror(errno));
	setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(listen_fd, (struct sockaddr *)&addr, sizeof(addr)))
		die("cannot bind 127.0.0.1:%d: %s", port, strerror(errno));
	if (listen(listen_fd, 128))
		die("listen: %s", strerror(errno));
}

/* SIGINT and SIGTERM arrive as a readable signalfd, so no wait can miss them. */
static int open_signalfd(void)
{
	sigset_t set;
	int fd;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	fd = signalfd(-1, &set, SFD_CLOEXEC);
	if (fd < 0)
		die("signalfd: %s", strerror(errno));
	return fd;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s --port P --root DIR [--seconds S]\n"
		"  --port P     TCP port on 127.0.0.1\n"
		"  --root DIR   directory whose regular files are served\n"
		"  --seconds S  serve for S seconds (default 20)\n", prog);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "root", required_argument, NULL, 'r' },
		{ "seconds", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	struct io_uring_params params = {
		.flags = IORING_SETUP_CQSIZE,
		.cq_entries = CQ_ENTRIES,
	};
	struct __kernel_timespec duration = { .tv_sec = 20 };
	const char *root = NULL;
	int port = 0, opt, ret, sfd;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	double t0, t1;
	char *end;
	long v;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
		case 's':
			v = strtol(optarg, &end, 10);
			if (end == optarg || *end || v <= 0 || v > 65535) {
				usage(argv[0]);
				printf("error=bad number '%s'\n", optarg);
				return 2;
			}
			if (opt == 'p')
				port = v;
			else
				duration.tv_sec = v;
			break;
		case 'r':
			root = optarg;
			break;
		default:
			usage(argv[0]);
			printf("error=bad usage\n");
			return 2;
		}
	}
	if (!port || !root || optind != argc) {
		usage(argv[0]);
		printf("error=--port and --root are required\n");
		return 2;
	}

	/* A splice into a reset socket raises SIGPIPE in the io-wq worker. */
	signal(SIGPIPE, SIG_IGN);
	sfd = open_signalfd();
	load_files(root);
	open_listener(port);
	for (int i = 0; i < MAX_CONNS; i++)
		conns[i].fd = -1;
	ret = io_uring_queue_init_params(RING_ENTRIES, &ring, &params);
	if (ret < 0)
		die("io_uring_queue_init: -%d (%s)", -ret, strerror(-ret));

	arm_accept();
	sqe = get_sqe();
	io_uring_prep_timeout(sqe, &duration, 0, 0);
	tag_sqe(sqe, OP_TIMER, 0, 0);
	sqe = get_sqe();
	io_uring_prep_poll_add(sqe, sfd, POLLIN);
	tag_sqe(sqe, OP_SIGNAL, 0, 0);
	t0 = now();
	while (!stop) {
		ret = io_uring_submit_and_wait(&ring, 1);
		if (ret < 0 && ret != -EINTR)
			die("io_uring_submit_and_wait: %s", strerror(-ret));
		while (!stop && !io_uring_peek_cqe(&ring, &cqe)) {
			on_cqe(cqe);
			io_uring_cqe_seen(&ring, cqe);
		}
	}
	t1 = now();

	printf("requests=%lu\n", stats.requests);
	printf("not_found=%lu\n", stats.not_found);
	printf("bytes=%lu\n", stats.bytes);
	printf("errors=%lu\n", stats.errors);
	printf("resets=%lu\n", stats.resets);
	printf("connections=%lu\n", stats.connections);
	printf("seconds=%.3f\n", t1 - t0);
	return 0;
}
