/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * puppet_asleep_wait: a task let go in a call is waited for until it is in
 * a call again. Threads of this process stand for such tasks: one asleep
 * in read(2) is there at once; one that spins, or one asleep in a page
 * fault (a userfaultfd page nobody serves: its syscall file says "-1 SP
 * PC", as a task's does while it faults in the page of the `syscall`
 * instruction it was let go at) is not, until the fault is served and it
 * reads; nor one whose PC is the `syscall` instruction it was let go at. A
 * task not in a restartable call is not waited for at all, nor one that
 * blocks every signal its process has a handler for.
 */
#include "puppet/puppet.h"
#include "util/kernel.h"
#include "unit.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* a task expected asleep is waited for until it is (on a loaded machine,
 * up to the long bound); one expected not is looked at for the short one */
#define SHORT_MS 100
#define LONG_MS 10000

struct th {
	int pipe[2];            /* the thread reads one byte of it, then ends */
	volatile char *fault;   /* touched first, if set */
	atomic_bool spin;       /* spins while set */
	atomic_int tid;
	pthread_t pt;
};

static void *body(void *arg)
{
	struct th *t = arg;
	atomic_store(&t->tid, (int)syscall(SYS_gettid));
	while (atomic_load(&t->spin))
		;
	if (t->fault)
		(void)*t->fault;
	char c;
	while (read(t->pipe[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static void start(struct th *t)
{
	CHECK(pipe(t->pipe) == 0);
	CHECK(pthread_create(&t->pt, NULL, body, t) == 0);
	while (!atomic_load(&t->tid))
		usleep(100);
}

static void end(struct th *t)
{
	atomic_store(&t->spin, false);
	CHECK(write(t->pipe[1], "x", 1) == 1);
	pthread_join(t->pt, NULL);
	close(t->pipe[0]);
	close(t->pipe[1]);
}

/* a puppet as seized in a call the kernel restarts (or not) */
static struct puppet seized(pid_t tid, long ax)
{
	struct puppet p = {.pid = tid};
	p.regs0.orig_rax = SYS_read;
	p.regs0.rax = (unsigned long)ax;
	return p;
}

static size_t wait_ip(pid_t tid, long ax, uint64_t ip, int max_ms)
{
	struct puppet_asleep w = {0};
	struct puppet p = seized(tid, ax);
	p.regs0.rip = ip;
	puppet_asleep_add(&w, &p);
	return puppet_asleep_wait(&w, max_ms);
}

/* seized after a `syscall` instruction elsewhere */
static size_t wait_one(pid_t tid, long ax, int max_ms)
{
	return wait_ip(tid, ax, 0x1000, max_ms);
}

/* the PC of tid's call (the instruction after its `syscall`), 0 if none */
static uint64_t call_pc(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *pc = strrchr(buf, ' ');
	return buf[0] >= '0' && buf[0] <= '9' && pc ? strtoull(pc + 1, NULL, 16) : 0;
}

/* in read(2): asleep in a call, or soon */
TEST(in_call)
{
	struct th t = {0};
	start(&t);
	CHECK_EQ(wait_one(atomic_load(&t.tid), -KERN_ERESTARTSYS, LONG_MS), 0);
	/* as one seized in this call: asleep in it; as one let go at the
	 * `syscall` instruction it sleeps after (PC there: not yet entered
	 * again), not */
	uint64_t pc = call_pc(atomic_load(&t.tid));
	CHECK(pc != 0);
	CHECK_EQ(wait_ip(atomic_load(&t.tid), -KERN_ERESTARTSYS, pc, LONG_MS), 0);
	CHECK_EQ(wait_ip(atomic_load(&t.tid), -KERN_ERESTARTSYS, pc + 2, SHORT_MS), 1);
	end(&t);
}

/* running: not asleep within SHORT_MS; but a task that was not let go in a
 * restartable call is not waited for */
TEST(running)
{
	struct th t = {0};
	atomic_store(&t.spin, true);
	start(&t);
	CHECK_EQ(wait_one(atomic_load(&t.tid), -KERN_ERESTARTNOHAND, SHORT_MS), 1);
	CHECK_EQ(wait_one(atomic_load(&t.tid), 0, SHORT_MS), 0);
	end(&t);
}

/* a spinning task (never asleep in a call) as released with mask and
 * no_handler: how many of it the wait holds after SHORT_MS */
static size_t wait_masked(pid_t tid, uint64_t mask, uint64_t no_handler)
{
	struct puppet_asleep w = {0};
	struct puppet p = seized(tid, -KERN_ERESTARTSYS);
	p.regs0.rip = 0x1000;
	p.sigmask0 = mask;
	p.no_handler = no_handler;
	puppet_asleep_add(&w, &p);
	return puppet_asleep_wait(&w, SHORT_MS);
}

/* only a task that could run a handler before its call is waited for:
 * one with a signal its process catches (not in no_handler) that it does
 * not block; no_handler 0 (not known) counts every signal as caught */
TEST(handlers)
{
	const uint64_t usr1 = 1ull << (SIGUSR1 - 1), usr2 = 1ull << (SIGUSR2 - 1);
	struct th t = {0};
	atomic_store(&t.spin, true);
	start(&t);
	pid_t tid = atomic_load(&t.tid);
	CHECK_EQ(wait_masked(tid, 0, 0), 1);                 /* nothing known */
	CHECK_EQ(wait_masked(tid, ~0ull, 0), 0);             /* all blocked */
	CHECK_EQ(wait_masked(tid, 0, ~0ull), 0);             /* no handler */
	CHECK_EQ(wait_masked(tid, 0, ~usr1), 1);             /* SIGUSR1 caught */
	CHECK_EQ(wait_masked(tid, usr1, ~usr1), 0);          /* and blocked */
	CHECK_EQ(wait_masked(tid, usr1, ~(usr1 | usr2)), 1); /* SIGUSR2 not */
	end(&t);
}

/* asleep in a page fault: not in its call until the page comes */
TEST(in_fault)
{
	int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
	if (uffd < 0) {
		fprintf(stderr, "in_fault: userfaultfd: %s\n", strerror(errno));
		CHECK(uffd >= 0);
		return;
	}
	struct uffdio_api api = {.api = UFFD_API};
	CHECK(ioctl(uffd, UFFDIO_API, &api) == 0);
	long pg = sysconf(_SC_PAGESIZE);
	char *page = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	CHECK(page != MAP_FAILED);
	struct uffdio_register reg = {
		.range = {.start = (unsigned long)page, .len = (unsigned long)pg},
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	CHECK(ioctl(uffd, UFFDIO_REGISTER, &reg) == 0);

	struct th t = {.fault = page};
	start(&t);
	/* the fault is queued: the thread sleeps in it (or is about to) */
	struct pollfd pfd = {.fd = uffd, .events = POLLIN};
	CHECK_EQ(poll(&pfd, 1, 10000), 1);
	struct uffd_msg msg;
	CHECK_EQ(read(uffd, &msg, sizeof(msg)), (long)sizeof(msg));
	CHECK_EQ(msg.event, UFFD_EVENT_PAGEFAULT);

	CHECK_EQ(wait_one(atomic_load(&t.tid), -KERN_ERESTARTSYS, SHORT_MS), 1);

	struct uffdio_zeropage zp = {.range = {.start = (unsigned long)page, .len = (unsigned long)pg}};
	CHECK(ioctl(uffd, UFFDIO_ZEROPAGE, &zp) == 0);
	CHECK_EQ(wait_one(atomic_load(&t.tid), -KERN_ERESTARTSYS, LONG_MS), 0);
	end(&t);
	munmap(page, (size_t)pg);
	close(uffd);
}

int main(void)
{
	RUN(in_call);
	RUN(running);
	RUN(in_fault);
	RUN(handlers);
	return unit_done();
}
