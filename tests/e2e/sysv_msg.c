/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SysV message queues in a container's ipc namespace (run under `ckpt
 * run`). Queue Q (key KEY, mode 0620, msg_qbytes lowered to 10000) holds
 * messages of types 1 and 2 (one 4000 bytes long, one empty) and queue P
 * (IPC_PRIVATE) is empty. After restart: the same ids, key, mode, qbytes
 * and counts; msgrcv by type gives each type's messages in order, then the
 * rest in queue order; sending and receiving still work.
 */
#include "lib.h"

#include <errno.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>

#define KEY 0x5c5a0002
#define BIG 4000

struct m {
	long type;
	char text[8192];
};

static const struct {
	long type;
	const char *text;
} sent[] = {{1, "alpha"}, {2, "beta"}, {1, "gamma"}, {2, ""}, {2, "delta"}};

static uint8_t big[BIG];

static void snd(int q, long type, const void *text, size_t len)
{
	struct m m = {.type = type};
	memcpy(m.text, text, len);
	if (msgsnd(q, &m, len, IPC_NOWAIT) < 0)
		fail("msgsnd: %m");
}

static void expect_msg(int q, long type, long want_type, const void *want, size_t len)
{
	struct m m;
	ssize_t n = msgrcv(q, &m, sizeof(m.text), type, IPC_NOWAIT);
	if (n < 0) {
		test_failf("msgrcv(type %ld): %m, want a message of %zu bytes", type, len);
		return;
	}
	expect(m.type == want_type && (size_t)n == len && !memcmp(m.text, want, len),
	       "msgrcv(type %ld): type %ld, %zd bytes ('%.*s'), want type %ld, %zu bytes", type,
	       m.type, n, (int)(n > 20 ? 20 : n), m.text, want_type, len);
}

int main(void)
{
	int old = msgget(KEY, 0);
	if (old >= 0)
		msgctl(old, IPC_RMID, NULL);
	int q = msgget(KEY, IPC_CREAT | IPC_EXCL | 0620), p = msgget(IPC_PRIVATE, 0600);
	if (q < 0 || p < 0)
		fail("msgget: %m");
	struct msqid_ds ds;
	if (msgctl(q, IPC_STAT, &ds) < 0)
		fail("IPC_STAT: %m");
	ds.msg_qbytes = 10000;
	if (msgctl(q, IPC_SET, &ds) < 0)
		fail("IPC_SET: %m");
	test_fill_random(big, sizeof(big), 9);
	snd(q, 1, sent[0].text, strlen(sent[0].text));
	snd(q, 1, big, sizeof(big));
	for (size_t i = 1; i < sizeof(sent) / sizeof(sent[0]); i++)
		snd(q, sent[i].type, sent[i].text, strlen(sent[i].text));

	test_ready();
	test_wait();

	expect(msgget(KEY, 0) == q, "key %#x is msg id %d, was %d", KEY, msgget(KEY, 0), q);
	expect(msgctl(q, IPC_STAT, &ds) == 0, "IPC_STAT: %m");
	expect(ds.msg_qnum == 6 && ds.msg_qbytes == 10000 && (ds.msg_perm.mode & 0777) == 0620 &&
		   ds.__msg_cbytes == BIG + 19,
	       "queue: %lu messages, %lu bytes, qbytes %lu, mode %o", (unsigned long)ds.msg_qnum,
	       (unsigned long)ds.__msg_cbytes, (unsigned long)ds.msg_qbytes, ds.msg_perm.mode);
	expect(msgctl(p, IPC_STAT, &ds) == 0 && ds.msg_qnum == 0, "the private queue: %m");
	/* type 2 in order, then the rest in queue order */
	expect_msg(q, 2, 2, "beta", 4);
	expect_msg(q, 2, 2, "", 0);
	expect_msg(q, 2, 2, "delta", 5);
	expect_msg(q, 0, 1, "alpha", 5);
	expect_msg(q, 0, 1, big, BIG);
	expect_msg(q, 0, 1, "gamma", 5);
	struct m m;
	expect(msgrcv(q, &m, sizeof(m.text), 0, IPC_NOWAIT) < 0 && errno == ENOMSG,
	       "the queue holds more messages");
	snd(p, 7, "again", 5);
	expect_msg(p, 7, 7, "again", 5);
	msgctl(q, IPC_RMID, NULL);
	msgctl(p, IPC_RMID, NULL);
	pass();
}
