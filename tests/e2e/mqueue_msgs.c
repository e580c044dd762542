/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * POSIX message queues. A named queue (mq_maxmsg 7, mq_msgsize 100, mode
 * 0640) holds five messages of priorities 3, 9, 3, 0, 9 and is open twice
 * (O_RDWR | O_NONBLOCK, and O_RDONLY); an unlinked queue holds two. After
 * restart: the attributes and each open file's mq_flags are as they were,
 * the five messages come in priority order (first in first out within a
 * priority) with their priorities and contents, then the queue is empty;
 * a message sent through one open file comes out of the other; the
 * unlinked queue still links "(deleted)" and holds its two.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
	unsigned int prio;
	const char *text;
} sent[] = {{3, "three-a"}, {9, "nine-a"}, {3, "three-b"}, {0, "zero"}, {9, "nine-b"}};
static const int order[] = {1, 4, 0, 2, 3}; /* as mq_receive gives them */

int main(void)
{
	char name[64], gone[64];
	struct mq_attr a = {.mq_maxmsg = 7, .mq_msgsize = 100}, g;

	snprintf(name, sizeof(name), "/ckpt-e2e-mq-%d", getpid());
	snprintf(gone, sizeof(gone), "/ckpt-e2e-mqd-%d", getpid());
	mq_unlink(name);
	mq_unlink(gone);
	mode_t old = umask(0);
	mqd_t q = mq_open(name, O_RDWR | O_CREAT | O_EXCL | O_NONBLOCK, 0640, &a);
	mqd_t d = mq_open(gone, O_RDWR | O_CREAT | O_EXCL, 0600, &a);
	umask(old);
	if (q < 0 || d < 0) {
		if (errno == ENOSYS)
			skip("no POSIX message queues");
		fail("mq_open: %m");
	}
	mqd_t r = mq_open(name, O_RDONLY);
	if (r < 0)
		fail("mq_open: %m");
	for (size_t i = 0; i < 5; i++)
		if (mq_send(q, sent[i].text, strlen(sent[i].text), sent[i].prio) < 0)
			fail("mq_send: %m");
	if (mq_send(d, "d1", 2, 1) < 0 || mq_send(d, "d2", 2, 2) < 0 || mq_unlink(gone) < 0)
		fail("the unlinked queue: %m");

	test_ready();
	test_wait();
	mq_unlink(name);

	expect(mq_getattr(q, &g) == 0 && g.mq_maxmsg == 7 && g.mq_msgsize == 100 &&
		   g.mq_curmsgs == 5 && (g.mq_flags & O_NONBLOCK),
	       "attributes: maxmsg %ld msgsize %ld curmsgs %ld flags %#lx", g.mq_maxmsg,
	       g.mq_msgsize, g.mq_curmsgs, g.mq_flags);
	expect(mq_getattr(r, &g) == 0 && !(g.mq_flags & O_NONBLOCK),
	       "the read-only open file is non-blocking");
	struct stat st;
	expect(fstat(q, &st) == 0 && (st.st_mode & 07777) == 0640 && st.st_uid == getuid(),
	       "mode %o uid %d", st.st_mode & 07777, st.st_uid);
	for (size_t i = 0; i < 5; i++) {
		char buf[100];
		unsigned int prio = 99;
		ssize_t n = mq_receive(r, buf, sizeof(buf), &prio);
		const char *want = sent[order[i]].text;
		expect(n == (ssize_t)strlen(want) && !memcmp(buf, want, (size_t)n) &&
			   prio == sent[order[i]].prio,
		       "message %zu: %zd bytes '%.*s' prio %u, want '%s' prio %u", i, n,
		       (int)(n > 0 ? n : 0), buf, prio, want, sent[order[i]].prio);
	}
	char buf[100];
	unsigned int prio;
	errno = 0;
	expect(mq_receive(q, buf, sizeof(buf), &prio) < 0 && errno == EAGAIN,
	       "more messages than were sent (%m)");
	expect(mq_send(q, "x", 1, 5) == 0 && mq_receive(r, buf, sizeof(buf), &prio) == 1 &&
		   buf[0] == 'x' && prio == 5,
	       "the two open files are not of one queue");
	expect(mq_send(r, "x", 1, 5) < 0 && errno == EBADF, "the read-only open file can send");

	char path[64], link[128] = "";
	snprintf(path, sizeof(path), "/proc/self/fd/%d", d);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = '\0';
	expect(strstr(link, gone) && strstr(link, "(deleted)"), "the unlinked queue links '%s'",
	       link);
	expect(mq_getattr(d, &g) == 0 && g.mq_curmsgs == 2 && !(g.mq_flags & O_NONBLOCK),
	       "the unlinked queue: %ld messages", g.mq_curmsgs);
	expect(mq_receive(d, buf, sizeof(buf), &prio) == 2 && !memcmp(buf, "d2", 2) && prio == 2,
	       "the unlinked queue's first message");
	expect(mq_receive(d, buf, sizeof(buf), &prio) == 2 && !memcmp(buf, "d1", 2) && prio == 1,
	       "the unlinked queue's second message");
	pass();
}
