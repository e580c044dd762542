/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ckpt migrate PID --to HOST:PORT and ckpt receive --listen [ADDR:]PORT:
 * a tree moved to another ckpt over TCP, killed here only once it is
 * restored there, and run there only once it is dead here.
 *
 * Two connections from the source to the target: the control connection
 * carries lines, the data connection the image (the restart reads it to
 * its end, which the source marks by shutting its side down).
 *
 *   source -> target (control)  "ckpt-migrate 1"
 *   target -> source            "ok TOKEN"        (TOKEN: 32 random hex digits)
 *   source -> target (control)  a tree of the source's own network namespace
 *                               only: "addrs from ID" (boot id, netns)
 *   target -> source            "addrs here" (the same namespace: nothing
 *                               moves, skip to the data) or "addrs send"
 *   source -> target            "addr ADDR/PREFIX IFNAME" for each local
 *                               address of its sockets, "addrs end"
 *   target -> source            "addrs ok" (each added to IFNAME if it was
 *                               not here) or "error MESSAGE" (migrate-addr.h)
 *   source -> target (data)     "TOKEN\n", then the image stream
 *   target                      restarts it, frozen (nothing of it runs)
 *   target -> source            "ready PID"  or  "error MESSAGE"
 *   source                      the guardian is told to kill the tree should
 *                               ckpt die, then (committed) ...
 *   source -> target            "commit"
 *   target                      SIGCONT to every task of the copy; each
 *                               address it added announced (gratuitous ARP,
 *                               unsolicited neighbour advertisement)
 *   target -> source            "running PID"
 *   source                      kills its tree (frozen all along), deletes
 *                               the moved addresses, then its lock
 *
 * Pre-copy (protocol "ckpt-migrate 2", the default; --rounds 0 speaks 1):
 * before the frozen round above, rounds of memory sent while the tree runs,
 * each on a data connection of its own that begins with the token:
 *
 *   source -> target (control)  "round K"
 *   source -> target (data)     "TOKEN\n", then a CKPT_PRECOPY image (round 0:
 *                               every tracked page; then the pages written
 *                               since the round before, its id the parent)
 *   target                      keeps it, plain, as DIR/ID (ckpt_unseal)
 *   target -> source            "got K"  or  "error MESSAGE"
 *   ...                         until a round is small or --rounds are sent
 *   source -> target (control)  "final"; then the data connection and the
 *                               frozen image as above, its parent the last
 *                               round's, restored over the chain in DIR
 *                               (RESTART_PLAIN_PARENTS)
 *
 * A pre-copy that fails (the target's "error", a broken connection) leaves
 * the tree running without ckpt's dirty tracking (ckpt_untrack); a target
 * that loses the source removes DIR and whatever it restored.
 *
 * A target that fails answers "error", and the source releases its tree,
 * which runs on (the network lock removed). A source that goes away before
 * "commit" (its guardian then releases the original) makes the target kill
 * its frozen copy; one that dies after its guardian was told of the commit
 * leaves the guardian to say "commit" (ckpt_opts.commit_msg), kill the
 * original, delete the moved addresses and remove the lock. Neither side
 * runs the program while the other may.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <limits.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <linux/userfaultfd.h>

#include "ckpt.h"
#include "cli/cli.h"
#include "cli/migrate-addr.h"
#include "util/cleanup.h"

#define HELLO "ckpt-migrate 1"
#define HELLO_PRECOPY "ckpt-migrate 2"
#define ROUNDS_DEFAULT 8
#define ROUNDS_MAX 64
/* pre-copy ends when a round sent less than this, or did not shrink */
#define ROUND_SMALL (2ull << 20)
#define LINE_MAX_LEN 600
#define TOKEN_HEX 32
#define ACCEPT_TIMEOUT_MS 30000
#define PATH_MAX_LEN 4096
#define ADDRS_MAX 64

static size_t tree_pids(pid_t root, pid_t *out, size_t max);

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/*
 * "HOST:PORT", "[V6ADDR]:PORT" or, for a listener, "PORT" alone (loopback).
 * Numeric addresses and names the resolver knows without the network
 * (localhost, /etc/hosts).
 */
static int resolve(const char *spec, bool passive, struct sockaddr_storage *ret,
		   socklen_t *ret_len)
{
	char host[256] = "127.0.0.1";
	const char *port = strrchr(spec, ':');
	if (port) {
		const char *h = spec;
		size_t n = (size_t)(port - spec);
		if (n >= 2 && h[0] == '[' && h[n - 1] == ']')
			h++, n -= 2;
		if (n == 0 || n >= sizeof(host))
			return -EINVAL;
		memcpy(host, h, n);
		host[n] = '\0';
		port++;
	} else if (passive) {
		port = spec;
	} else {
		return -EINVAL;
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *ai;
	if (!*port || getaddrinfo(host, port, &hints, &ai) != 0)
		return -EINVAL;
	memcpy(ret, ai->ai_addr, ai->ai_addrlen);
	*ret_len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static bool is_loopback(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
	return a->ss_family == AF_INET6 &&
	       IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

static int connect_to(const struct sockaddr_storage *a, socklen_t len)
{
	int fd = socket(a->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)a, len) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int send_line(int fd, const char *fmt, const char *arg)
{
	char line[LINE_MAX_LEN + 2];
	int n = snprintf(line, sizeof(line), fmt, arg);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = (int)sizeof(line) - 1, line[n - 1] = '\n';
	return send(fd, line, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -EPIPE;
}

/* One line (without its newline), read byte by byte so that nothing after
 * it is taken from the socket; -ECONNRESET at EOF, -ETIMEDOUT after
 * timeout_ms (-1: none). */
static int read_line(int fd, char *buf, size_t len, int timeout_ms)
{
	size_t n = 0;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, timeout_ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return -ETIMEDOUT;
		char c;
		ssize_t got = read(fd, &c, 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -ECONNRESET;
		if (c == '\n')
			break;
		if (n + 1 >= len)
			return -EMSGSIZE;
		buf[n++] = c;
	}
	buf[n] = '\0';
	return 0;
}

/*
 * A moment of the migration in the log, at debug level (-v), stamped like
 * the library's lines (CLOCK_MONOTONIC): with the target's log, where the
 * downtime goes (bench/migrate.py --timing).
 */
static void mark(int logfd, int verbose, const char *what, unsigned arg)
{
	struct timespec ts;
	char line[200];
	if (logfd < 0 || !verbose)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int n = snprintf(line, sizeof(line), "(%5ld.%06ld) migrate: debug: %s %u\n",
			 (long)ts.tv_sec, ts.tv_nsec / 1000, what, arg);
	if (n > 0 && write(logfd, line, (size_t)n) < 0) {
	}
}

/* --- the source --------------------------------------------------------- */

struct source {
	int logfd, verbose;             /* for mark() */
	int ctl, data;
	long target_pid;
	int running;                    /* the target's answer to commit: 0 (read into
					 * running_line), -errno */
	uint64_t running_ms;            /* when it came */
	char running_line[LINE_MAX_LEN];
	struct sockaddr_storage addr;
	socklen_t addr_len;
	char token[TOKEN_HEX + 1];
};

/* image_done: the image is all sent; has the target restored it? */
static int target_ready(void *arg, char *why, size_t why_len)
{
	struct source *s = arg;
	char line[LINE_MAX_LEN];
	shutdown(s->data, SHUT_WR); /* the image ends here */
	mark(s->logfd, s->verbose, "final image sent", 0);
	int r = read_line(s->ctl, line, sizeof(line), -1);
	mark(s->logfd, s->verbose, "target answered", 0);
	if (r < 0) {
		snprintf(why, why_len, "the target did not answer: %s", strerror(-r));
		return r;
	}
	if (!strncmp(line, "ready ", 6)) {
		s->target_pid = strtol(line + 6, NULL, 10);
		return 0;
	}
	snprintf(why, why_len, "the target could not restore it: %s",
		 strncmp(line, "error ", 6) ? line : line + 6);
	return -EREMOTEIO;
}

/* The target takes it once; it may come twice (the guardian's copy) */
#define COMMIT_LINE "commit\n"

/* committed: the tree dies here whatever happens now; the copy may run.
 * Its "running" is waited for here, before the frozen original is killed
 * (which takes its time), so that the downtime is the program's. */
static void tell_commit(void *arg)
{
	struct source *s = arg;
	mark(s->logfd, s->verbose, "commit", 0);
	s->running = send_line(s->ctl, COMMIT_LINE, NULL);
	if (s->running >= 0)
		s->running = read_line(s->ctl, s->running_line, sizeof(s->running_line),
				       ACCEPT_TIMEOUT_MS);
	s->running_ms = now_ms();
	mark(s->logfd, s->verbose, "running", 0);
}

/* A data connection, its token sent. */
static int data_connect(struct source *s)
{
	int r = s->data = connect_to(&s->addr, s->addr_len);
	if (r >= 0)
		r = send_line(s->data, "%s\n", s->token);
	return r;
}

/* The moved addresses told to the target and taken there; none of them
 * may be the one the migration itself speaks from. */
static int send_addrs(struct source *s, const struct ckpt_addr *addrs, size_t n, bool *ret_here,
		      char *why, size_t why_len)
{
	struct sockaddr_storage me;
	socklen_t len = sizeof(me);
	char line[LINE_MAX_LEN], id[128];
	/* first: is the target in this very network namespace? then nothing moves */
	int r = migrate_host_id(id, sizeof(id));
	if (r >= 0)
		r = send_line(s->ctl, "addrs from %s\n", id);
	if (r >= 0)
		r = read_line(s->ctl, line, sizeof(line), ACCEPT_TIMEOUT_MS);
	if (r >= 0 && !strcmp(line, "addrs here")) {
		*ret_here = true;
		return 0;
	}
	if (r >= 0 && strcmp(line, "addrs send")) {
		snprintf(why, why_len, "the target cannot take the tree's addresses: %.500s",
			 strncmp(line, "error ", 6) ? line : line + 6);
		return -EREMOTEIO;
	}
	if (r >= 0)
		r = getsockname(s->ctl, (struct sockaddr *)&me, &len) < 0 ? -errno : 0;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		const void *mine = me.ss_family == AF_INET
					   ? (const void *)&((struct sockaddr_in *)&me)->sin_addr
					   : (const void *)&((struct sockaddr_in6 *)&me)->sin6_addr;
		if (addrs[i].family == me.ss_family &&
		    !memcmp(addrs[i].addr, mine, me.ss_family == AF_INET ? 4 : 16)) {
			inet_ntop(addrs[i].family, addrs[i].addr, line, sizeof(line));
			snprintf(why, why_len, "a socket of the tree has the address %.64s, which this "
				 "migration speaks to the target from: it cannot move (give the "
				 "program an address of its own)", line);
			return -EADDRINUSE;
		}
		r = migrate_addr_format(&addrs[i], line, sizeof(line));
		if (r >= 0)
			r = send_line(s->ctl, "%s", line);
	}
	if (r >= 0)
		r = send_line(s->ctl, "addrs end\n", NULL);
	if (r >= 0)
		r = read_line(s->ctl, line, sizeof(line), ACCEPT_TIMEOUT_MS);
	if (r < 0) {
		snprintf(why, why_len, "the target did not take the tree's addresses: %s%s",
			 strerror(-r), r == -ETIMEDOUT ? " (a ckpt receive that moves none?)" : "");
		return r;
	}
	if (strcmp(line, "addrs ok")) {
		snprintf(why, why_len, "the target cannot take the tree's addresses: %.500s",
			 strncmp(line, "error ", 6) ? line : line + 6);
		return -EREMOTEIO;
	}
	return 0;
}

/* The control and data connections, the token read and sent; with
 * addresses to move (addrs not NULL), they are taken by the target first,
 * unless it says it is in this network namespace (*ret_here). */
static int source_connect(const char *to, const char *hello, struct source *s,
			  const struct ckpt_addr *addrs, size_t naddrs, bool *ret_here)
{
	char line[LINE_MAX_LEN];
	if (resolve(to, false, &s->addr, &s->addr_len) < 0) {
		fprintf(stderr, "ckpt: --to '%s': not HOST:PORT\n", to);
		return -EINVAL;
	}
	s->ctl = connect_to(&s->addr, s->addr_len);
	int r = s->ctl < 0 ? s->ctl : send_line(s->ctl, "%s\n", hello);
	if (r >= 0)
		r = read_line(s->ctl, line, sizeof(line), ACCEPT_TIMEOUT_MS);
	if (r >= 0 && (strncmp(line, "ok ", 3) || strlen(line + 3) != TOKEN_HEX))
		r = -EPROTO;
	if (r >= 0 && addrs) {
		char why[2 * LINE_MAX_LEN] = "", token[TOKEN_HEX + 1];
		snprintf(token, sizeof(token), "%s", line + 3);
		r = send_addrs(s, addrs, naddrs, ret_here, why, sizeof(why));
		if (r < 0) {
			fprintf(stderr, "ckpt: migration refused: %s\n", why);
			return r;
		}
		snprintf(line, sizeof(line), "ok %s", token);
	}
	if (r >= 0) {
		memcpy(s->token, line + 3, TOKEN_HEX + 1);
		r = data_connect(s);
	}
	if (r < 0)
		fprintf(stderr, "ckpt: cannot reach a ckpt receive at %s: %s%s\n", to,
			r == -EPROTO ? "it does not speak " : strerror(-r),
			r == -EPROTO ? hello : "");
	return r;
}

struct precopy {
	unsigned rounds;                /* sent */
	unsigned char last[16];         /* the last round's image id */
	unsigned long long bytes;       /* their images' bytes */
	unsigned long long memory;      /* their pages' bytes */
};

/*
 * One pre-copy round on s->data (then closed): the tree's pages (written
 * since round k-1's image, p->last), read while it runs; 1 if it was small
 * enough to be the last, 0 if not, -errno (why in err).
 */
static int precopy_round(const struct cli_args *a, struct source *s, struct precopy *p,
			 const struct cli_key *key, int logfd, char *err, size_t err_len)
{
	char num[16], line[LINE_MAX_LEN];
	unsigned k = p->rounds;
	snprintf(num, sizeof(num), "%u", k);
	mark(logfd, a->verbose, "pre-copy round", k);
	int r = send_line(s->ctl, "round %s\n", num);
	if (r >= 0 && s->data < 0)
		r = data_connect(s);
	if (r < 0) {
		snprintf(err, err_len, "the target went away: %s", strerror(-r));
		return r;
	}
	struct ckpt_opts o = {
		.size = sizeof(o),
		.flags = CKPT_SUBTREE | CKPT_PRECOPY,
		.logfd = logfd,
		.log_level = cli_log_level(a->verbose),
		.errbuf = err,
		.errbuf_len = err_len,
		.key = cli_key_ptr(key),
		.key_len = sizeof(key->bytes),
		.parent_id = k ? p->last : NULL,
	};
	r = ckpt_checkpoint_opts(a->pid, s->data, &o);
	shutdown(s->data, SHUT_WR);
	/* a target that gave up early closed the data connection: its reason
	 * is on the control one */
	if (r < 0 && read_line(s->ctl, line, sizeof(line), 2000) == 0 &&
	    !strncmp(line, "error ", 6))
		snprintf(err, err_len, "the target could not restore it: %s", line + 6);
	if (r >= 0) {
		mark(logfd, a->verbose, "pre-copy round sent", k);
		r = read_line(s->ctl, line, sizeof(line), -1);
		mark(logfd, a->verbose, "pre-copy round taken", k);
		if (r < 0)
			snprintf(err, err_len, "the target did not answer: %s", strerror(-r));
		else if (strncmp(line, "got ", 4) || strtoul(line + 4, NULL, 10) != k) {
			snprintf(err, err_len, "the target could not restore it: %s",
				 strncmp(line, "error ", 6) ? line : line + 6);
			r = -EREMOTEIO;
		}
	}
	close(s->data);
	s->data = -1;
	if (r < 0)
		return r;
	memcpy(p->last, o.image_id, sizeof(p->last));
	p->rounds++;
	p->bytes += o.result.image_bytes;
	p->memory += o.result.memory_bytes;
	if (!a->quiet && a->verbose)
		fprintf(stderr, "ckpt: pre-copy round %u: %.1f MiB in %.0f ms\n", k,
			(double)o.result.memory_bytes / (1 << 20),
			(double)o.result.elapsed_us / 1000);
	return o.result.memory_bytes < ROUND_SMALL;
}

/* The rounds; 0 once they are done, or -errno (the tree untracked). */
static int precopy(const struct cli_args *a, struct source *s, struct precopy *p,
		   unsigned max, const struct cli_key *key, int logfd, char *err, size_t err_len)
{
	unsigned long long before = 0, last = 0;
	for (unsigned k = 0; k < max; k++) {
		int r = precopy_round(a, s, p, key, logfd, err, err_len);
		if (r < 0)
			return r;
		unsigned long long sent = p->memory - before;
		/* small, or not shrinking by a quarter: the program writes about
		 * as fast as the rounds send */
		if (r > 0 || (k > 0 && sent * 4 > last * 3))
			break;
		before = p->memory;
		last = sent;
	}
	return 0;
}

/*
 * The frozen round runs at a raised priority (nice FROZEN_NICE, when ckpt
 * may: CAP_SYS_NICE), the old one back after it: on a loaded host most of
 * the downtime was ckpt waiting for a CPU while the tree was frozen. The
 * source raises it for the frozen checkpoint, the target from the final
 * image's arrival to "running". With SCHED_RESET_ON_FORK, so that nothing
 * ckpt forks meanwhile inherits it (the kernel gives a child of a
 * negative nice 0): not the restored tree (whose nice the sched kind sets
 * from the image anyway), a lazy server, a pid namespace's init, nor
 * ckpt's own threads. Only under SCHED_OTHER. The old nice, or INT_MIN if
 * nothing was changed.
 */
#define FROZEN_NICE (-10)

static int raise_priority(void)
{
	struct sched_param p = { 0 };
	errno = 0;
	int old = getpriority(PRIO_PROCESS, 0);
	if (errno || old <= FROZEN_NICE || sched_getscheduler(0) != SCHED_OTHER ||
	    sched_setscheduler(0, SCHED_OTHER | SCHED_RESET_ON_FORK, &p) < 0)
		return INT_MIN;
	if (setpriority(PRIO_PROCESS, 0, FROZEN_NICE) < 0) {
		sched_setscheduler(0, SCHED_OTHER, &p);
		return INT_MIN;
	}
	return old;
}

static void restore_priority(int old)
{
	struct sched_param p = { 0 };
	if (old == INT_MIN)
		return;
	if (sched_setscheduler(0, SCHED_OTHER, &p) < 0 || setpriority(PRIO_PROCESS, 0, old) < 0) {
	}
}

/* After a failed pre-copy or migration: the tree's dirty tracking removed. */
static void untrack(pid_t pid, int logfd)
{
	char err[512] = "";
	int r = ckpt_untrack(pid, logfd, err, sizeof(err));
	if (r < 0)
		fprintf(stderr, "ckpt: pid %d: cannot remove the dirty tracking of the pre-copy: "
			"%s\n", pid, err[0] ? err : strerror(-r));
}

int cmd_migrate(const struct cli_args *a)
{
	char err[4096] = "", line[LINE_MAX_LEN];
	struct source s = { .ctl = -1, .data = -1 };
	struct precopy pc = { 0 };
	unsigned rounds = ROUNDS_DEFAULT;
	_cleanup_(cli_key_wipe) struct cli_key key = { 0 };
	if (a->rounds) {
		char *end;
		unsigned long v = strtoul(a->rounds, &end, 10);
		if (end == a->rounds || *end || v > ROUNDS_MAX) {
			fprintf(stderr, "ckpt: --rounds '%s': not a number from 0 to %d\n",
				a->rounds, ROUNDS_MAX);
			return 1;
		}
		rounds = (unsigned)v;
	}
	if (a->key && cli_key_load(a->key, &key) < 0)
		return 1;
	/* a tree of this network namespace takes its addresses along */
	struct ckpt_addr addrs[ADDRS_MAX];
	size_t naddrs = 0;
	char path[64];
	struct stat mine, its;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", a->pid);
	bool here = stat(path, &its) == 0 && stat("/proc/self/ns/net", &mine) == 0 &&
		    its.st_ino == mine.st_ino && its.st_dev == mine.st_dev;
	if (here) {
		pid_t pids[4096];
		size_t np = tree_pids(a->pid, pids, sizeof(pids) / sizeof(pids[0]));
		if (migrate_addrs_of_tree(pids, np, addrs, ADDRS_MAX, &naddrs, err, sizeof(err)) < 0) {
			fprintf(stderr, "ckpt: migration refused: pid %d: %s\n", a->pid, err);
			return 1;
		}
	}
	bool same_ns = false;
	if (source_connect(a->to, rounds ? HELLO_PRECOPY : HELLO, &s, here ? addrs : NULL, naddrs,
			   &same_ns) < 0) {
		if (s.ctl >= 0)
			close(s.ctl);
		return 1;
	}
	int logfd = cli_open_log(a->log);
	if (a->log && logfd < 0)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	uint64_t tp = now_ms();
	if (rounds) {
		int r = precopy(a, &s, &pc, rounds, &key, logfd, err, sizeof(err));
		if (r >= 0 && (r = send_line(s.ctl, "final\n", NULL)) >= 0 && s.data < 0)
			r = data_connect(&s);
		if (r < 0) {
			untrack(a->pid, logfd);
			fprintf(stderr, "ckpt: migration failed: pre-copy round %u: %s; pid %d runs "
				"on here\n", pc.rounds, err[0] ? err : strerror(-r), a->pid);
			if (s.data >= 0)
				close(s.data);
			close(s.ctl);
			if (logfd >= 0)
				close(logfd);
			return 1;
		}
	}
	struct ckpt_opts o = {
		.size = sizeof(o),
		.flags = CKPT_SUBTREE | CKPT_KILL,
		.logfd = logfd,
		.log_level = cli_log_level(a->verbose),
		.errbuf = err,
		.errbuf_len = sizeof(err),
		.key = cli_key_ptr(&key),
		.key_len = sizeof(key.bytes),
		.image_done = target_ready,
		.image_done_arg = &s,
		.committed = tell_commit,
		.parent_id = pc.rounds ? pc.last : NULL,
		.target_addrs = here && !same_ns ? addrs : NULL,
		.n_target_addrs = naddrs,
		/* should this ckpt die before it says "commit", its guardian does */
		.commit_fd = s.ctl,
		.commit_msg = COMMIT_LINE,
		.commit_msg_len = strlen(COMMIT_LINE),
	};
	s.logfd = logfd;
	s.verbose = a->verbose;
	mark(logfd, a->verbose, "final round", pc.rounds);
	int nice_was = raise_priority();
	uint64_t t0 = now_ms();
	int r = ckpt_checkpoint_opts(a->pid, s.data, &o);
	restore_priority(nice_was);
	close(s.data);
	if (r < 0 && rounds)
		untrack(a->pid, logfd);
	if (logfd >= 0)
		close(logfd);
	if (r < 0) {
		/* a target that gave up early closed the data connection: its
		 * reason is on the control one */
		if ((r == -EPIPE || r == -ECONNRESET || !err[0]) &&
		    read_line(s.ctl, line, sizeof(line), 2000) == 0 &&
		    !strncmp(line, "error ", 6))
			snprintf(err, sizeof(err), "the target could not restore it: %s", line + 6);
		fprintf(stderr, "ckpt: migration failed: %s; pid %d runs on here\n",
			err[0] ? err : strerror(-r), a->pid);
		close(s.ctl);
		return 1;
	}
	r = s.running;
	uint64_t t1 = s.running_ms;
	snprintf(line, sizeof(line), "%s", s.running_line);
	close(s.ctl);
	if (r < 0 || strncmp(line, "running ", 8)) {
		fprintf(stderr, "ckpt: pid %d was restored at %s as pid %ld and killed here, but "
			"the target did not say it runs (%s): look there\n", a->pid, a->to,
			s.target_pid, r < 0 ? strerror(-r) : line);
		return 1;
	}
	if (!a->quiet)
		fprintf(stderr, "ckpt: migrated pid %d to %s (pid %ld there): %lu process%s, "
			"%.1f MiB image, down %llu ms (frozen here until running there)\n",
			a->pid, a->to, s.target_pid, o.result.processes,
			o.result.processes == 1 ? "" : "es",
			(double)o.result.image_bytes / (1 << 20), (unsigned long long)(t1 - t0));
	if (!a->quiet && rounds)
		fprintf(stderr, "ckpt: pre-copy: %u round%s, %.1f MiB of memory sent while it ran "
			"(%.1f MiB of images); sent in all %.1f MiB in %llu ms\n", pc.rounds,
			pc.rounds == 1 ? "" : "s", (double)pc.memory / (1 << 20),
			(double)pc.bytes / (1 << 20),
			(double)(pc.bytes + o.result.image_bytes) / (1 << 20),
			(unsigned long long)(t1 - tp));
	return 0;
}

/* --- the target --------------------------------------------------------- */

/* Every process of the tree under root, root first (children as /proc
 * lists them); at most max. */
static size_t tree_pids(pid_t root, pid_t *out, size_t max)
{
	size_t n = 0;
	if (max)
		out[n++] = root;
	for (size_t i = 0; i < n; i++) {
		char path[64], *buf = NULL;
		size_t cap = 0;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", out[i], out[i]);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		ssize_t got = getdelim(&buf, &cap, '\0', f);
		fclose(f);
		for (char *p = got > 0 ? buf : NULL, *end; p && n < max; p = end) {
			long v = strtol(p, &end, 10);
			if (end == p)
				break;
			out[n++] = (pid_t)v;
		}
		free(buf);
	}
	return n;
}

/* sig to every process of the tree but those in skip (n_skip of them). */
static void signal_tree(pid_t root, int sig, const pid_t *skip, size_t n_skip)
{
	pid_t pids[4096];
	size_t n = tree_pids(root, pids, sizeof(pids) / sizeof(pids[0]));
	for (size_t i = 0; i < n; i++) {
		bool skipped = false;
		for (size_t j = 0; j < n_skip && !skipped; j++)
			skipped = pids[i] == skip[j];
		if (!skipped)
			kill(pids[i], sig);
	}
}

/* Where lfd listens, "ADDR:PORT", for the user and for a test that asked
 * for port 0. */
static void say_where(int lfd)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);
	char host[INET6_ADDRSTRLEN] = "?", port[16] = "?";
	if (getsockname(lfd, (struct sockaddr *)&a, &len) == 0)
		getnameinfo((struct sockaddr *)&a, len, host, sizeof(host), port, sizeof(port),
			    NI_NUMERICHOST | NI_NUMERICSERV);
	fprintf(stderr, "ckpt: waiting for a migration on %s%s%s:%s\n",
		a.ss_family == AF_INET6 ? "[" : "", host, a.ss_family == AF_INET6 ? "]" : "",
		port);
}

static int listen_on(const char *spec, bool keyed)
{
	struct sockaddr_storage addr;
	socklen_t len;
	if (resolve(spec, true, &addr, &len) < 0) {
		fprintf(stderr, "ckpt: --listen '%s': not [ADDR:]PORT\n", spec);
		return -EINVAL;
	}
	if (!is_loopback(&addr) && !keyed) {
		fprintf(stderr, "ckpt: --listen on '%s', not a loopback address, needs --key: "
			"anyone who can connect could run a program as you\n", spec);
		return -EPERM;
	}
	int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, len) < 0 || listen(fd, 4) < 0) {
		int e = -errno;
		fprintf(stderr, "ckpt: cannot listen on '%s': %s\n", spec, strerror(-e));
		if (fd >= 0)
			close(fd);
		return e;
	}
	return fd;
}

static int accept_within(int lfd, int timeout_ms)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	int r;
	while ((r = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (r <= 0)
		return r < 0 ? -errno : -ETIMEDOUT;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* The next line on ctl (waiting) is the source's "addrs from ...", not a
 * pre-copy's "round 0". */
static bool addrs_next(int ctl)
{
	char peek[5];
	ssize_t n;
	while ((n = recv(ctl, peek, sizeof(peek), MSG_PEEK | MSG_WAITALL)) < 0 && errno == EINTR)
		;
	return n == (ssize_t)sizeof(peek) && !memcmp(peek, "addrs", sizeof(peek));
}

/* "addr" lines up to "addrs end": each address taken (migrate-addr.h),
 * answered "addrs ok" or "error WHY". */
static int take_addrs(int ctl, struct migrate_addr *v, size_t *n)
{
	char line[LINE_MAX_LEN], why[LINE_MAX_LEN] = "", id[128];
	/* a source in this very network namespace: nothing moves */
	int r = read_line(ctl, line, sizeof(line), ACCEPT_TIMEOUT_MS);
	if (r == 0 && strncmp(line, "addrs from ", 11))
		r = -EPROTO;
	if (r == 0)
		r = migrate_host_id(id, sizeof(id));
	if (r == 0 && !strcmp(line + 11, id))
		return send_line(ctl, "addrs here\n", NULL);
	if (r == 0)
		r = send_line(ctl, "addrs send\n", NULL);
	while (r == 0 && (r = read_line(ctl, line, sizeof(line), ACCEPT_TIMEOUT_MS)) == 0 &&
	       strcmp(line, "addrs end")) {
		if (*n == ADDRS_MAX || migrate_addr_parse(line, &v[*n].a) < 0) {
			snprintf(why, sizeof(why), "%s: %.200s", *n == ADDRS_MAX ? "too many addresses"
				 : "not an address line", line);
			r = -EPROTO;
			break;
		}
		(*n)++;
	}
	if (r == 0)
		r = migrate_addrs_take(v, *n, why, sizeof(why));
	if (r < 0) {
		if (!why[0])
			snprintf(why, sizeof(why), "%s", strerror(-r));
		send_line(ctl, "error %s\n", why);
		fprintf(stderr, "ckpt: the migrated tree's addresses: %s\n", why);
		*n = 0;
		return r;
	}
	for (size_t i = 0; i < *n; i++) {
		char text[LINE_MAX_LEN];
		if (migrate_addr_format(&v[i].a, text, sizeof(text)) == 0)
			fprintf(stderr, "ckpt: %s %s", v[i].added ? "added" : "already here:",
				text + 5);
	}
	return send_line(ctl, "addrs ok\n", NULL);
}

/* A data connection that begins with token (others are closed). */
static int accept_data(int lfd, const char *token)
{
	char line[LINE_MAX_LEN];
	for (int tries = 0; tries < 8; tries++) {
		int data = accept_within(lfd, ACCEPT_TIMEOUT_MS);
		if (data < 0)
			return data;
		if (read_line(data, line, sizeof(line), ACCEPT_TIMEOUT_MS) == 0 &&
		    !strcmp(line, token))
			return data;
		close(data);
	}
	return -EPROTO;
}

/* The control connection and the data one that brings its token; the
 * protocol's version (1, or 2: pre-copy), or -errno. */
static int target_accept(int lfd, int *ret_ctl, int *ret_data, char token[TOKEN_HEX + 1],
			 struct migrate_addr *v, size_t *nv)
{
	char line[LINE_MAX_LEN];
	unsigned char raw[TOKEN_HEX / 2];
	int ctl = accept_within(lfd, -1), version = 1;
	if (ctl < 0)
		return ctl;
	int r = read_line(ctl, line, sizeof(line), ACCEPT_TIMEOUT_MS);
	if (r >= 0 && !strcmp(line, HELLO_PRECOPY))
		version = 2;
	else if (r >= 0 && strcmp(line, HELLO))
		r = -EPROTO;
	if (r >= 0 && getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		r = -EIO;
	for (size_t i = 0; r >= 0 && i < sizeof(raw); i++)
		snprintf(token + 2 * i, 3, "%02x", raw[i]);
	if (r >= 0)
		r = send_line(ctl, "ok %s\n", token);
	/* addresses come on the control connection before the data one is made */
	struct pollfd p[2] = { { .fd = lfd, .events = POLLIN }, { .fd = ctl, .events = POLLIN } };
	while (r >= 0 && (r = poll(p, 2, ACCEPT_TIMEOUT_MS)) < 0 && errno == EINTR)
		r = 0;
	if (r == 0)
		r = -ETIMEDOUT;
	else if (r > 0)
		/* the data connection first: a pre-copy's "round 0" may follow it
		 * on the control connection at once (addresses come before it) */
		r = !(p[0].revents & POLLIN) && (p[1].revents & POLLIN) && addrs_next(ctl)
			    ? take_addrs(ctl, v, nv)
			    : 0;
	else
		r = -errno;
	/* a connection without the token is not the source's: closed */
	int data = r < 0 ? r : accept_data(lfd, token);
	if (data >= 0) {
		*ret_ctl = ctl;
		*ret_data = data;
		return version;
	}
	close(ctl);
	migrate_addrs_drop(v, *nv);
	return data;
}

/* --- the target's pre-copy: the rounds kept in a directory ------------- */

/* Removes dir and the images in it (plain names only: ckpt's own). */
static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	for (struct dirent *de; d && (de = readdir(d));)
		if (de->d_name[0] != '.')
			unlinkat(dirfd(d), de->d_name, 0);
	if (d)
		closedir(d);
	rmdir(dir);
}

/*
 * The pre-copy rounds into dir, until "final" (0: *data is then its data
 * connection); -errno with why, after "error" was sent if the source is
 * still there.
 */
static int target_rounds(int lfd, int ctl, int *data, const char *token, const char *dir,
			 const struct cli_key *key, int logfd, int verbose, char *why, size_t why_len)
{
	char line[LINE_MAX_LEN], name[40], err[512] = "";
	for (unsigned k = 0;; k++) {
		int r = read_line(ctl, line, sizeof(line), -1);
		if (r < 0) {
			snprintf(why, why_len, "the source went away: %s", strerror(-r));
			return r;
		}
		if (*data < 0 && (r = *data = accept_data(lfd, token)) < 0) {
			snprintf(why, why_len, "no data connection came: %s", strerror(-r));
			return r;
		}
		mark(logfd, verbose, !strcmp(line, "final") ? "final round comes" : "round comes", k);
		if (!strcmp(line, "final"))
			return 0;
		if (strncmp(line, "round ", 6) || strtoul(line + 6, NULL, 10) != k) {
			snprintf(why, why_len, "the source said '%.64s', not round %u", line, k);
			send_line(ctl, "error %s\n", why);
			return -EPROTO;
		}
		unsigned char id[16];
		char from[PATH_MAX_LEN], to[PATH_MAX_LEN];
		snprintf(from, sizeof(from), "%s/round", dir);
		int out = open(from, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		long long n = out < 0 ? -errno
				      : ckpt_unseal(*data, out, cli_key_ptr(key), sizeof(key->bytes), id,
						    err, sizeof(err));
		if (out >= 0 && close(out) < 0 && n >= 0)
			n = -errno;
		close(*data);
		*data = -1;
		for (size_t i = 0; n >= 0 && i < 16; i++)
			snprintf(name + 2 * i, 3, "%02x", id[i]);
		snprintf(to, sizeof(to), "%s/%.32s", dir, name);
		if (n >= 0 && rename(from, to) < 0)
			n = -errno;
		if (n < 0) {
			snprintf(why, why_len, "pre-copy round %u: %s", k,
				 err[0] ? err : strerror((int)-n));
			send_line(ctl, "error %s\n", why);
			return (int)n;
		}
		snprintf(name, sizeof(name), "%u", k);
		mark(logfd, verbose, "round kept", k);
		if ((r = send_line(ctl, "got %s\n", name)) < 0) {
			snprintf(why, why_len, "the source went away: %s", strerror(-r));
			return r;
		}
	}
}

/* Restored frozen; run once the source says its tree dies, else removed.
 * The processes the image had in a job-control stop (o->stopped) stay
 * stopped. */
static int target_finish(int ctl, pid_t pid, const struct ckpt_opts *o,
			 struct migrate_addr *v, size_t nv, int logfd, int verbose)
{
	char line[LINE_MAX_LEN];
	char num[32];
	snprintf(num, sizeof(num), "%d", pid);
	mark(logfd, verbose, "ready", 0);
	int r = send_line(ctl, "ready %s\n", num);
	if (r >= 0)
		r = read_line(ctl, line, sizeof(line), -1);
	mark(logfd, verbose, "commit came", 0);
	if (r < 0 || strcmp(line, "commit")) {
		signal_tree(pid, SIGKILL, NULL, 0);
		migrate_addrs_drop(v, nv);
		fprintf(stderr, "ckpt: the source went away before it gave up its tree (%s): "
			"the restored copy (pid %d) is removed; the program runs on at the "
			"source\n", r < 0 ? strerror(-r) : "an unexpected answer", pid);
		return -ECONNRESET;
	}
	signal_tree(pid, SIGCONT, o->stopped,
		    o->n_stopped < o->stopped_max ? o->n_stopped : o->stopped_max);
	migrate_addrs_announce(v, nv);
	send_line(ctl, "running %s\n", num);
	mark(logfd, verbose, "running", 0);
	return 0;
}

/*
 * Lazy by default. With pre-copy every page of the tree is on this host
 * before the final image comes (the rounds' files; without pre-copy, the
 * image read whole): nothing the lazy server serves depends on the source
 * any more, so the tree can run before its memory is written, as restart
 * --lazy does, and the fill (1 GiB by UFFDIO_COPY: 0.3-0.65 s here) leaves
 * the downtime. --eager writes it all first. The lazy server needs a
 * userfaultfd that also serves the kernel's own accesses and takes the
 * fork, remap, remove and unmap events (mm-lazy.c): where this ckpt
 * cannot make one (not root, vm.unprivileged_userfaultfd=0), the restart
 * would fail, so it is eager, and says why.
 */
static bool lazy_possible(char *why, size_t why_len)
{
	struct uffdio_api api = {
		.api = UFFD_API,
		.features = UFFD_FEATURE_EVENT_FORK | UFFD_FEATURE_EVENT_REMAP |
			    UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP,
	};
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		snprintf(why, why_len, "no userfaultfd that serves the kernel's accesses too "
			 "(root, or vm.unprivileged_userfaultfd=1): %s", strerror(errno));
		return false;
	}
	bool ok = ioctl(fd, UFFDIO_API, &api) == 0;
	if (!ok)
		snprintf(why, why_len, "userfaultfd lacks the fork, remap, remove and unmap "
			 "events (CAP_SYS_PTRACE): %s", strerror(errno));
	close(fd);
	return ok;
}

static bool receive_lazy(const struct cli_args *a)
{
	char why[256];
	if (a->eager)
		return false;
	if (lazy_possible(why, sizeof(why)))
		return true;
	if (a->lazy) /* asked for: the restart says why it cannot */
		return true;
	if (!a->quiet)
		fprintf(stderr, "ckpt: the memory is written before the tree runs (not lazily: "
			"%s)\n", why);
	return false;
}

int cmd_receive(const struct cli_args *a)
{
	char err[512] = "", token[TOKEN_HEX + 1], dir[PATH_MAX_LEN] = "";
	pid_t stopped[256];
	_cleanup_(cli_key_wipe) struct cli_key key = { 0 };
	if (a->lazy && a->eager) {
		fprintf(stderr, "ckpt: receive: --lazy and --eager: give one\n");
		return 1;
	}
	if (a->key && cli_key_load(a->key, &key) < 0)
		return 1;
	bool lazy = receive_lazy(a);
	int lfd = listen_on(a->listen, a->key != NULL), ctl, data;
	if (lfd < 0)
		return 1;
	say_where(lfd);
	signal(SIGPIPE, SIG_IGN);
	struct migrate_addr addrs[ADDRS_MAX] = { 0 };
	size_t naddrs = 0;
	int version = target_accept(lfd, &ctl, &data, token, addrs, &naddrs);
	if (version < 0) {
		close(lfd);
		fprintf(stderr, "ckpt: no migration came in: %s\n", strerror(-version));
		return 1;
	}
	int r = 0, logfd = cli_open_log(a->log);
	if (version == 2) {
		const char *tmp = getenv("TMPDIR");
		snprintf(dir, sizeof(dir), "%s/ckpt-receive.XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(dir)) {
			r = -errno;
			snprintf(err, sizeof(err), "cannot make a directory for the pre-copy rounds "
				 "(%s): %s", dir, strerror(errno));
			send_line(ctl, "error %s\n", err);
			dir[0] = '\0';
		} else {
			r = target_rounds(lfd, ctl, &data, token, dir, &key, logfd, a->verbose, err,
					  sizeof(err));
		}
	}
	close(lfd);
	if (r < 0) {
		if (logfd >= 0)
			close(logfd);
		if (data >= 0)
			close(data);
		close(ctl);
		if (dir[0])
			remove_dir(dir);
		migrate_addrs_drop(addrs, naddrs);
		fprintf(stderr, "ckpt: the migration failed: %s; everything received is removed "
			"(the source keeps the program)\n", err);
		return 1;
	}
	int nice_was = raise_priority();
	struct ckpt_opts o = {
		.size = sizeof(o),
		.flags = RESTART_DETACH | RESTART_CALLER_EXITS | RESTART_FROZEN | (a->pidns ? RESTART_PIDNS : 0) |
			 (a->tcp_close ? RESTART_CONN_RESET : 0) |
			 (a->changed_files ? RESTART_CHANGED_FILES : 0) |
			 (dir[0] ? RESTART_PLAIN_PARENTS : 0) | (lazy ? RESTART_LAZY : 0),
		.logfd = logfd,
		.log_level = cli_log_level(a->verbose),
		.errbuf = err,
		.errbuf_len = sizeof(err),
		.pidfile = a->pidfile,
		.key = cli_key_ptr(&key),
		.key_len = sizeof(key.bytes),
		.stopped = stopped,
		.stopped_max = sizeof(stopped) / sizeof(stopped[0]),
		.parent = dir[0] ? dir : NULL,
	};
	r = ckpt_restart_opts(0, data, &o);
	close(data);
	if (r < 0)
		restore_priority(nice_was);
	if (r < 0) {
		const char *why = err[0] ? err : strerror(-r);
		if (dir[0])
			remove_dir(dir);
		send_line(ctl, "error %s\n", why);
		close(ctl);
		if (logfd >= 0)
			close(logfd);
		migrate_addrs_drop(addrs, naddrs);
		fprintf(stderr, "ckpt: restart of the migrated tree failed: %s (the source keeps "
			"it)\n", why);
		return 1;
	}
	pid_t pid = r;
	r = target_finish(ctl, pid, &o, addrs, naddrs, logfd, a->verbose);
	restore_priority(nice_was);
	close(ctl);
	/* the restored tree has its memory (a lazy server maps what it serves
	 * from, which stays until it is done): the rounds go, once the tree
	 * runs (removing 1 GiB of them took 12-45 ms, which was downtime) */
	if (dir[0])
		remove_dir(dir);
	if (logfd >= 0)
		close(logfd);
	if (r < 0)
		return 1;
	printf("%d\n", pid); /* like restart --detach: scripts read the pid here */
	fflush(stdout);
	if (!a->quiet)
		fprintf(stderr, "ckpt: received and restored %lu process%s, pid %d; running%s\n",
			o.result.processes, o.result.processes == 1 ? "" : "es", pid,
			lazy ? " (its memory filled lazily, from this host's copy)" : "");
	return 0;
}
