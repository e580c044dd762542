/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sealed images through the library: a child checkpointed with
 * ckpt_opts.key into a memfd; ckpt_restart without a key (-ENOKEY), with
 * another key (-EKEYREJECTED), with a key of the wrong length (-EINVAL) and
 * through a struct of the size before the key fields existed (no key:
 * -ENOKEY) all refuse it and create nothing; ckpt_inspect_key reads it,
 * ckpt_inspect does not; the right key restores the child, which exits 42
 * only if its memory is intact.
 */
#include <ckpt.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"

static volatile sig_atomic_t go;
static void on_usr1(int s)
{
	(void)s;
	go = 1;
}

static int failures;
#define CHECK(cond, ...)                               \
	do {                                           \
		if (!(cond)) {                         \
			printf("FAIL: " __VA_ARGS__);  \
			printf("\n");                  \
			failures++;                    \
		}                                      \
	} while (0)

static uint64_t value(int i)
{
	return (uint64_t)i * 0x9e3779b97f4a7c15ull;
}

static pid_t start_child(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		static uint64_t v[1 << 17]; /* 1 MiB: several chunks */
		api_child_quiet();
		for (int i = 0; i < (1 << 17); i++)
			v[i] = value(i);
		signal(SIGUSR1, on_usr1);
		kill(getppid(), SIGUSR2); /* ready */
		while (!go)
			pause();
		for (int i = 0; i < (1 << 17); i++)
			if (v[i] != value(i))
				_exit(3);
		_exit(42);
	}
	return pid;
}

/* A restart that must be refused with want, before any process exists. */
static void refused(int img, struct ckpt_opts *o, int want, pid_t child, const char *what)
{
	char err[256] = "";
	lseek(img, 0, SEEK_SET);
	o->errbuf = err;
	o->errbuf_len = sizeof(err);
	o->flags = RESTART_DETACH;
	o->logfd = -1;
	int r = ckpt_restart_opts(0, img, o);
	CHECK(r == want, "%s: %d '%s', want %d", what, r, err, want);
	CHECK(kill(child, 0) < 0 && errno == ESRCH, "%s: pid %d exists", what, child);
	if (r > 0) {
		kill(r, SIGKILL);
		waitpid(r, NULL, 0);
	}
}

int main(void)
{
	unsigned char key[CKPT_KEY_BYTES], other[CKPT_KEY_BYTES];
	char err[256] = "";
	sigset_t s2;
	int sig, st = 0;

	for (int i = 0; i < CKPT_KEY_BYTES; i++) {
		key[i] = (unsigned char)(i * 7 + 1);
		other[i] = key[i];
	}
	other[0] ^= 1;
	sigemptyset(&s2);
	sigaddset(&s2, SIGUSR2);
	sigprocmask(SIG_BLOCK, &s2, NULL);
	pid_t child = start_child();
	sigwait(&s2, &sig);
	CHECK(api_asleep_in_call(child, "34 ", 10000), "child %d not asleep in pause()", child);

	int img = memfd_create("image", MFD_CLOEXEC);
	struct ckpt_opts o = { .size = sizeof(o), .flags = CKPT_SUBTREE | CKPT_KILL, .logfd = -1,
			       .errbuf = err, .errbuf_len = sizeof(err), .key = key,
			       .key_len = 16 };
	int r = ckpt_checkpoint_opts(child, img, &o);
	CHECK(r == -EINVAL && kill(child, 0) == 0, "a 16-byte key: %d '%s'", r, err);
	o.key_len = sizeof(key);
	r = ckpt_checkpoint_opts(child, img, &o);
	CHECK(r == 0, "ckpt_checkpoint_opts with a key: %d '%s'", r, err);
	waitpid(child, &st, WNOHANG);
	if (r < 0) {
		kill(child, SIGKILL);
		return 1;
	}
	char magic[8] = "";
	CHECK(pread(img, magic, 8, 0) == 8 && !memcmp(magic, "CKPTSEAL", 8), "image is not sealed");

	struct ckpt_opts ro = { .size = sizeof(ro) };
	refused(img, &ro, -ENOKEY, child, "restart without a key");
	ro = (struct ckpt_opts){ .size = sizeof(ro), .key = other, .key_len = sizeof(other) };
	refused(img, &ro, -EKEYREJECTED, child, "restart with another key");
	ro = (struct ckpt_opts){ .size = sizeof(ro), .key = key, .key_len = 31 };
	refused(img, &ro, -EINVAL, child, "restart with a 31-byte key");
	/* a caller built before the key fields: whatever follows is not read */
	ro = (struct ckpt_opts){ .size = CKPT_OPTS_SIZE_V1, .key = key, .key_len = sizeof(key) };
	refused(img, &ro, -ENOKEY, child, "restart through the old struct size");
	ro = (struct ckpt_opts){ .size = CKPT_OPTS_SIZE_V1 - 1 };
	refused(img, &ro, -EINVAL, child, "restart with a struct too small");

	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	lseek(img, 0, SEEK_SET);
	r = ckpt_inspect(img, null, 0, err, sizeof(err));
	CHECK(r == -ENOKEY, "ckpt_inspect of a sealed image: %d '%s'", r, err);
	lseek(img, 0, SEEK_SET);
	r = ckpt_inspect_key(img, null, 0, key, sizeof(key), err, sizeof(err));
	CHECK(r == 0, "ckpt_inspect_key: %d '%s'", r, err);

	lseek(img, 0, SEEK_SET);
	ro = (struct ckpt_opts){ .size = sizeof(ro), .flags = RESTART_DETACH, .logfd = -1,
				 .errbuf = err, .errbuf_len = sizeof(err), .key = key,
				 .key_len = sizeof(key) };
	pid_t got = ckpt_restart_opts(0, img, &ro);
	CHECK(got == child, "restart with the key: %d '%s'", got, err);
	if (got > 0) {
		kill(got, SIGUSR1);
		CHECK(waitpid(got, &st, 0) == got && WIFEXITED(st) && WEXITSTATUS(st) == 42,
		      "restored child ended with status %#x, want exit 42", st);
	}
	if (failures)
		return 1;
	printf("PASS\n");
	return 0;
}
