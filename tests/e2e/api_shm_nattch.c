/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * When the restored tree runs, ckpt holds no SysV segment attached of its
 * own. A child attaches a removed segment of the host's ipc namespace
 * (IPC_PRIVATE, IPC_RMID'd: gone with the killed original, so its id is
 * free again) and is checkpointed with CKPT_KILL; ckpt_restart_opts'
 * running callback, called once the tree runs and before ckpt's teardown,
 * reads the segment's shm_nattch: 1, the child's. ckpt attaches every
 * segment it makes to fill it, and held that attachment until its
 * teardown: the callback read 2, and a restored program counting its
 * attachers could too (e2e sysv_shm_host, on a loaded machine). Then the
 * child is told to check its data and exit 42.
 */
#include <ckpt.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"

#define SIZE (64u << 10)

static volatile sig_atomic_t go;
static void on_usr1(int s)
{
	(void)s;
	go = 1;
}

/* the child: attach, fill, remove, say ready, wait, check */
static void child(int id)
{
	api_child_quiet();
	unsigned char *a = shmat(id, NULL, 0);
	if (a == (void *)-1)
		_exit(2);
	for (size_t i = 0; i < SIZE; i++)
		a[i] = (unsigned char)(i * 7);
	signal(SIGUSR1, on_usr1);
	kill(getppid(), SIGUSR2); /* ready */
	while (!go)
		pause();
	for (size_t i = 0; i < SIZE; i++)
		if (a[i] != (unsigned char)(i * 7))
			_exit(3);
	_exit(42);
}

struct seen {
	int id;
	int calls;
	long nattch; /* -1: IPC_STAT failed */
};

static void on_running(void *arg, pid_t root)
{
	struct seen *s = arg;
	struct shmid_ds ds;
	(void)root;
	s->calls++;
	s->nattch = shmctl(s->id, IPC_STAT, &ds) == 0 ? (long)ds.shm_nattch : -1;
}

int main(void)
{
	sigset_t s2;
	int sig;
	api_ready_block(&s2);
	int id = shmget(IPC_PRIVATE, SIZE, IPC_CREAT | 0600);
	if (id < 0) {
		printf("FAIL: shmget: %m\n");
		return 1;
	}
	pid_t pid = fork();
	if (pid == 0)
		child(id);
	if (pid < 0) {
		printf("FAIL: fork: %m\n");
		shmctl(id, IPC_RMID, NULL);
		return 1;
	}
	sigwait(&s2, &sig);
	if (!api_asleep_in_call(pid, "34 ", 10000)) {
		printf("FAIL: child %d not asleep in pause()\n", pid);
		kill(pid, SIGKILL);
		shmctl(id, IPC_RMID, NULL);
		return 1;
	}
	/* attached by the child only, removed: gone when it is killed */
	shmctl(id, IPC_RMID, NULL);

	char err[256] = "";
	int img = memfd_create("image", MFD_CLOEXEC);
	struct ckpt_opts o = { .size = sizeof(o), .flags = CKPT_SUBTREE | CKPT_KILL, .logfd = -1,
			       .errbuf = err, .errbuf_len = sizeof(err) };
	int r = img < 0 ? -errno : ckpt_checkpoint_opts(pid, img, &o);
	if (r < 0) {
		printf("FAIL: checkpoint: %d '%s'\n", r, err);
		kill(pid, SIGKILL);
		return 1;
	}
	waitpid(pid, NULL, 0); /* the original, killed */
	lseek(img, 0, SEEK_SET);
	struct seen seen = { .id = id, .nattch = -2 };
	struct ckpt_opts ro = { .size = sizeof(ro), .flags = RESTART_DETACH, .logfd = -1,
				.errbuf = err, .errbuf_len = sizeof(err), .running = on_running,
				.running_arg = &seen };
	pid_t got = ckpt_restart_opts(0, img, &ro);
	if (got != pid) {
		printf("FAIL: restart: %d '%s', want pid %d\n", got, err, pid);
		return 1;
	}
	int failures = 0;
	if (seen.calls != 1 || seen.nattch != 1) {
		printf("FAIL: when the tree ran, shm id %d had %ld attacher(s) (%d call(s)), want 1: "
		       "the child's alone\n", id, seen.nattch, seen.calls);
		failures++;
	}
	kill(got, SIGUSR1);
	int st = 0;
	if (waitpid(got, &st, 0) != got || !WIFEXITED(st) || WEXITSTATUS(st) != 42) {
		printf("FAIL: restored child ended with status %#x, want exit 42\n", st);
		failures++;
	}
	if (failures)
		return 1;
	printf("PASS\n");
	return 0;
}
