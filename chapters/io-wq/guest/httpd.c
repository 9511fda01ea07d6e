// SPDX-License-Identifier: GPL-2.0
/*
 * HTTP workload of the io-wq chapter: an HTTP/1.1 server on one io_uring,
 * shaped like the server behind the series' HTTP and PHP numbers, for loopback
 * load such as `h2load --h1 -n 100000 -c 16 -t 1 http://127.0.0.1:PORT/NAME`.
 *
 * Like the author's server it is single-threaded, waits in epoll_wait() on an
 * epoll instance that watches the ring's fd (its completions wake the waiter
 * through ep_poll_callback()), and forces every SEND async, so the sends run
 * on io-wq's unbound workers as his did. A multishot ACCEPT takes connections;
 * each connection has one RECV or one response in flight at a time.
 *
 * A static file's 200 response is a linked chain
 *
 *	SEND header (MSG_MORE) -> SPLICE file->pipe -> SPLICE pipe->socket
 *
 * all three with IOSQE_ASYNC: three unbound io-wq items per response. The
 * files are opened once at start and must each fit into one pipe, so one
 * splice moves a whole body; every connection has its own pipe.
 *
 * With --php, a request for NAME.php goes to a pool of persistent php-cgi
 * processes running the worker script: the server writes the path to a free
 * worker's stdin; the worker answers on its stdout pipe with one write of a
 * fixed-size length line and the body; the server reads the length line and
 * answers with
 *
 *	SEND header (MSG_MORE) -> SPLICE pipe->socket
 *
 * both IOSQE_ASYNC: a tiny script's output spliced pipe->TCP.
 *
 * usage: httpd --port P --root DIR [--php WORKER --php-cgi PATH --php-workers N]
 *
 * Serves until SIGINT/SIGTERM, then prints key=value statistics and exits 0.
 * A fatal error prints one error= line and exits 1 (2 on bad usage).
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
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS	64
#define MAX_FILES	256
#define MAX_WORKERS	64
/* "%15u\n": the length line that precedes each body on a worker's stdout */
#define LEN_LINE	16
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
	OP_PHP_WRITE,
	OP_PHP_READ,
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

/* A php-cgi process that runs the worker script, one request at a time. */
struct php_worker {
	pid_t pid;
	int in;			/* its stdin: request paths, one per line */
	int out;		/* its stdout: length line and body, the body spliced */
	char len_line[LEN_LINE + 1];
	bool busy;
};

struct conn {
	int fd;			/* -1: slot free */
	int pipe[2];
	char buf[REQ_BUF_SIZE];	/* received, not yet answered bytes */
	size_t len;
	char hdr[128];		/* header of the response in flight */
	unsigned int hdr_len;
	char path[NAME_MAX + 3];	/* "/NAME\n" for the PHP worker */
	unsigned int path_len;
	const struct file_entry *file;	/* body of a static response, or NULL */
	struct php_worker *php;	/* worker of a PHP response, or NULL */
	unsigned int body_len;
	int pending;		/* CQEs of that response still to come */
	enum chain_fail fail;
	bool close_after;
};

static struct io_uring ring;
static struct file_entry files[MAX_FILES];
static int nr_files;
static int max_size;		/* of the files: what each pipe must hold */
static struct conn conns[MAX_CONNS];
static struct php_worker workers[MAX_WORKERS];
static int nr_workers;
static int listen_fd;
static bool stop;

/*
 * requests: responses sent whole, whatever their status; php_requests: the
 * PHP ones among them; not_found: the 404s; bytes: response bytes sent;
 * errors: 400s, 503s (no free PHP worker), short transfers and connections
 * refused for want of a slot; resets: connections that ended in ECONNRESET or
 * EPIPE; epoll_waits: how often the loop called epoll_wait(); async_items: the
 * requests submitted with IOSQE_ASYNC, each run by io-wq (a linked chain's head
 * is queued through io_wq_enqueue(), and again if a send is retried after a
 * poll; the rest follow on its worker).
 */
static struct {
	unsigned long requests, php_requests, not_found, bytes, errors, resets,
		connections, epoll_waits, async_items;
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
	if (flags & IOSQE_ASYNC)
		stats.async_items++;
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
 * status: the status line's tail, optionally followed by more header lines;
 * length: the body's, which the response then carries.
 */
static void set_header(struct conn *c, const char *status, unsigned int length)
{
	c->hdr_len = snprintf(c->hdr, sizeof(c->hdr),
			      "HTTP/1.1 %s\r\nContent-Length: %u\r\n\r\n", status, length);
	c->body_len = length;
}

static bool is_php(const char *name, size_t len)
{
	return nr_workers && len > 4 && !memcmp(name + len - 4, ".php", 4);
}

/*
 * Queues the response held in c->hdr and c->body_len bytes of body: from
 * c->file through the connection's pipe, or from c->php's stdout pipe.
 * Without a body the header is the whole response: one SEND. MSG_WAITALL
 * makes io_uring retry a partial send instead of completing it short and
 * letting the chain go on. Every item is IOSQE_ASYNC: it runs on io-wq.
 */
static void respond(struct conn *c)
{
	int idx = c - conns, src;
	struct io_uring_sqe *sqe;

	c->fail = CHAIN_OK;
	if (!c->body_len) {
		sqe = get_sqe();
		io_uring_prep_send(sqe, c->fd, c->hdr, c->hdr_len, MSG_WAITALL);
		tag_sqe(sqe, OP_SEND, idx, IOSQE_ASYNC);
		c->pending = 1;
		return;
	}
	reserve_sqes(3);
	/* MSG_MORE holds the header back until the body follows it. */
	sqe = get_sqe();
	io_uring_prep_send(sqe, c->fd, c->hdr, c->hdr_len, MSG_MORE | MSG_WAITALL);
	tag_sqe(sqe, OP_SEND, idx, IOSQE_IO_LINK | IOSQE_ASYNC);
	if (c->file) {
		/* Offset 0, not the file position: all connections share one fd. */
		sqe = get_sqe();
		io_uring_prep_splice(sqe, c->file->fd, 0, c->pipe[1], -1, c->body_len, 0);
		tag_sqe(sqe, OP_SPLICE_IN, idx, IOSQE_IO_LINK | IOSQE_ASYNC);
		src = c->pipe[0];
		c->pending = 3;
	} else {
		src = c->php->out;
		c->pending = 2;
	}
	sqe = get_sqe();
	io_uring_prep_splice(sqe, src, -1, c->fd, -1, c->body_len, 0);
	tag_sqe(sqe, OP_SPLICE_OUT, idx, IOSQE_ASYNC);
}

/*
 * Hands the path to a free PHP worker and reads its length line, which comes
 * in one write with the body: when the read completes, the body is in the
 * pipe. With every worker busy the answer is a 503.
 */
static void run_php(struct conn *c, const char *name, size_t name_len)
{
	int idx = c - conns;
	struct io_uring_sqe *sqe;

	for (int i = 0; i < nr_workers && !c->php; i++)
		if (!workers[i].busy)
			c->php = &workers[i];
	if (!c->php) {
		set_header(c, "503 Service Unavailable", 0);
		stats.errors++;
		respond(c);
		return;
	}
	c->php->busy = true;
	c->path_len = snprintf(c->path, sizeof(c->path), "/%.*s\n", (int)name_len, name);
	reserve_sqes(2);
	sqe = get_sqe();
	io_uring_prep_write(sqe, c->php->in, c->path, c->path_len, -1);
	tag_sqe(sqe, OP_PHP_WRITE, idx, IOSQE_IO_LINK);
	sqe = get_sqe();
	io_uring_prep_read(sqe, c->php->out, c->php->len_line, LEN_LINE, -1);
	tag_sqe(sqe, OP_PHP_READ, idx, 0);
	c->fail = CHAIN_OK;
	c->pending = 2;
}

static const struct file_entry *find_file(const char *name, size_t len)
{
	for (int i = 0; i < nr_files; i++)
		if (strlen(files[i].name) == len && !memcmp(files[i].name, name, len))
			return &files[i];
	return NULL;
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
	c->php = NULL;
	if (line_len < fixed || memcmp(c->buf, get, sizeof(get) - 1) ||
	    memcmp(name + name_len, http11, sizeof(http11) - 1) ||
	    memchr(name, ' ', name_len) || name_len > NAME_MAX) {
		set_header(c, "400 Bad Request\r\nConnection: close", 0);
		c->close_after = true;
		stats.errors++;
	} else if (is_php(name, name_len)) {
		run_php(c, name, name_len);
		c->len -= req_len;
		memmove(c->buf, c->buf + req_len, c->len);
		return;
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

/* Empties a worker's stdout of a body a broken chain left in it. */
static void drain_worker(struct php_worker *w)
{
	struct pollfd pfd = { .fd = w->out, .events = POLLIN };
	char sink[4096];

	while (poll(&pfd, 1, 0) > 0 && read(w->out, sink, sizeof(sink)) > 0)
		;
}

/* The worker's length line arrived: its body is in the pipe, answer. */
static void on_php(struct conn *c, enum op op, int res)
{
	char *end;
	long len;

	if (op == OP_PHP_WRITE) {
		if (res != (int)c->path_len)
			die("write to PHP worker %d: %s", (int)c->php->pid,
			    res < 0 ? strerror(-res) : "short");
		--c->pending;
		return;
	}
	if (res == 0)
		die("PHP worker %d exited (its stderr is the server's)", (int)c->php->pid);
	if (res < 0)
		die("read from PHP worker %d: %s", (int)c->php->pid, strerror(-res));
	c->php->len_line[res] = '\0';
	len = strtol(c->php->len_line, &end, 10);
	if (res != LEN_LINE || end == c->php->len_line || *end != '\n' || len <= 0)
		die("PHP worker %d wrote '%s', not a %d-byte length line", (int)c->php->pid,
		    c->php->len_line, LEN_LINE);
	--c->pending;
	set_header(c, "200 OK\r\nContent-Type: text/html", len);
	respond(c);
}

static void on_chain(struct conn *c, enum op op, int res)
{
	unsigned int want = op == OP_SEND ? c->hdr_len : c->body_len;
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
	if (c->php) {
		if (c->fail)
			drain_worker(c->php);
		else
			stats.php_requests++;
		c->php->busy = false;
		c->php = NULL;
	}
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
	case OP_PHP_WRITE:
	case OP_PHP_READ:
		on_php(c, op, cqe->res);
		break;
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

/*
 * Starts the PHP pool: n php-cgi processes, each running the worker script
 * with its stdin and stdout on pipes of ours (stderr is the server's). Before
 * the ring exists, so no child inherits it.
 */
static void start_workers(const char *php_cgi, const char *script, int n)
{
	for (int i = 0; i < n; i++) {
		struct php_worker *w = &workers[i];
		int in[2], out[2];

		if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
			die("pipe2: %s", strerror(errno));
		w->pid = fork();
		if (w->pid < 0)
			die("fork: %s", strerror(errno));
		if (!w->pid) {
			/* dup2() clears O_CLOEXEC on the copies: only 0, 1 and 2 stay */
			if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
				_exit(127);
			execl(php_cgi, php_cgi, "-q", "-d", "max_execution_time=0", "-d",
			      "display_errors=stderr", script, (char *)NULL);
			_exit(127);
		}
		close(in[0]);
		close(out[1]);
		w->in = in[1];
		w->out = out[0];
	}
	nr_workers = n;
}

/*
 * Waits for each worker's ready line (a length of 0), so that the load, and
 * the profile the workload script enables once the server listens, never
 * include php-cgi's start-up.
 */
static void await_workers(void)
{
	for (int i = 0; i < nr_workers; i++) {
		char line[LEN_LINE + 1];
		ssize_t got = 0, n;

		while (got < LEN_LINE) {
			n = read(workers[i].out, line + got, LEN_LINE - got);
			if (n <= 0)
				die("PHP worker %d did not start (its stderr is the server's)",
				    (int)workers[i].pid);
			got += n;
		}
		line[LEN_LINE] = '\0';
		if (strtol(line, NULL, 10) != 0 || line[LEN_LINE - 1] != '\n')
			die("PHP worker %d wrote '%s', not its ready line", (int)workers[i].pid,
			    line);
	}
}

/* Closes each worker's stdin, which ends its loop; counts the unclean exits. */
static int stop_workers(void)
{
	int failed = 0, status;

	for (int i = 0; i < nr_workers; i++) {
		close(workers[i].in);
		if (waitpid(workers[i].pid, &status, 0) < 0 ||
		    !WIFEXITED(status) || WEXITSTATUS(status))
			failed++;
	}
	return failed;
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
	fprintf(stderr, "usage: %s --port P --root DIR [--php WORKER --php-cgi PATH --php-workers N]\n"
		"  --port P          TCP port on 127.0.0.1\n"
		"  --root DIR        directory whose regular files are served\n"
		"  --php WORKER      php script run by each PHP worker (NAME.php requests)\n"
		"  --php-cgi PATH    the php-cgi binary\n"
		"  --php-workers N   how many workers (default 16)\n", prog);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "root", required_argument, NULL, 'r' },
		{ "php", required_argument, NULL, 'w' },
		{ "php-cgi", required_argument, NULL, 'c' },
		{ "php-workers", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	struct io_uring_params params = {
		.flags = IORING_SETUP_CQSIZE,
		.cq_entries = CQ_ENTRIES,
	};
	struct epoll_event ev = { .events = EPOLLIN };
	const char *root = NULL, *php = NULL, *php_cgi = NULL;
	int port = 0, n_workers = 16, opt, ret, sfd, epfd, seen, failed = 0;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	double t0, t1;
	char *end;
	long v;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
		case 'n':
			v = strtol(optarg, &end, 10);
			if (end == optarg || *end || v <= 0 ||
			    v > (opt == 'p' ? 65535 : MAX_WORKERS)) {
				usage(argv[0]);
				printf("error=bad number '%s'\n", optarg);
				return 2;
			}
			if (opt == 'p')
				port = v;
			else
				n_workers = v;
			break;
		case 'r':
			root = optarg;
			break;
		case 'w':
			php = optarg;
			break;
		case 'c':
			php_cgi = optarg;
			break;
		default:
			usage(argv[0]);
			printf("error=bad usage\n");
			return 2;
		}
	}
	if (!port || !root || optind != argc || !php != !php_cgi) {
		usage(argv[0]);
		printf("error=--port and --root are required, --php and --php-cgi go together\n");
		return 2;
	}

	/* A splice into a reset socket raises SIGPIPE in the io-wq worker. */
	signal(SIGPIPE, SIG_IGN);
	sfd = open_signalfd();
	load_files(root);
	if (php) {
		start_workers(php_cgi, php, n_workers);
		await_workers();
	}
	open_listener(port);
	for (int i = 0; i < MAX_CONNS; i++)
		conns[i].fd = -1;
	ret = io_uring_queue_init_params(RING_ENTRIES, &ring, &params);
	if (ret < 0)
		die("io_uring_queue_init: -%d (%s)", -ret, strerror(-ret));

	/* The ring's fd is readable while completions wait: the one thing epoll watches. */
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		die("epoll_create1: %s", strerror(errno));
	ev.data.fd = ring.ring_fd;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, ring.ring_fd, &ev))
		die("epoll_ctl: %s", strerror(errno));

	arm_accept();
	sqe = get_sqe();
	io_uring_prep_poll_add(sqe, sfd, POLLIN);
	tag_sqe(sqe, OP_SIGNAL, 0, 0);
	t0 = now();
	while (!stop) {
		ret = io_uring_submit(&ring);
		if (ret < 0 && ret != -EINTR)
			die("io_uring_submit: %s", strerror(-ret));
		seen = 0;
		while (!stop && !io_uring_peek_cqe(&ring, &cqe)) {
			on_cqe(cqe);
			io_uring_cqe_seen(&ring, cqe);
			seen++;
		}
		if (seen || stop)
			continue;
		/* Interrupted when a completion's task work is due: run it, look again. */
		if (epoll_wait(epfd, &ev, 1, -1) < 0 && errno != EINTR)
			die("epoll_wait: %s", strerror(errno));
		stats.epoll_waits++;
	}
	t1 = now();
	if (nr_workers)
		failed = stop_workers();

	printf("requests=%lu\n", stats.requests);
	printf("php_requests=%lu\n", stats.php_requests);
	printf("php_workers=%d\n", nr_workers);
	printf("php_worker_failures=%d\n", failed);
	printf("epoll_waits=%lu\n", stats.epoll_waits);
	printf("async_items=%lu\n", stats.async_items);
	printf("not_found=%lu\n", stats.not_found);
	printf("bytes=%lu\n", stats.bytes);
	printf("errors=%lu\n", stats.errors);
	printf("resets=%lu\n", stats.resets);
	printf("connections=%lu\n", stats.connections);
	printf("seconds=%.3f\n", t1 - t0);
	return 0;
}
