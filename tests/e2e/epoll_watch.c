/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An epoll instance watching three pipes: the read end of one holding a
 * byte, edge-triggered, whose edge has not been taken (epoll_wait must
 * report it after restart, once, with its data); the read end of an empty
 * one, level-triggered; and a write end with EPOLLONESHOT that fired before
 * the checkpoint (it must stay disarmed though the pipe is writable). The
 * watches listed in fdinfo (fd, events, data) must be the same; then
 * EPOLL_CTL_ADD/MOD/DEL by the task's own fd numbers behave as before.
 */
#include "lib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define D_ET  0xfeedface12345678ull
#define D_LT  0x1111ull
#define D_ONE 0x2222ull
#define D_MOD 0x3333ull

static int ep;

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* fdinfo's "tfd events data" lines, sorted, into buf */
static void watches(char *buf, size_t size)
{
	char path[64], text[8192], *lines[64];
	size_t n = 0;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ep);
	if (test_read_file(path, text, sizeof(text)) < 0)
		fail("read %s: %m", path);
	for (char *l = strtok(text, "\n"); l && n < 64; l = strtok(NULL, "\n")) {
		char *pos = strstr(l, " pos:");
		if (!strncmp(l, "tfd:", 4) && pos) {
			*pos = '\0';
			lines[n++] = l;
		}
	}
	qsort(lines, n, sizeof(*lines), cmpstr);
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++)
		snprintf(buf + strlen(buf), size - strlen(buf), "%s;", lines[i]);
}

static void add(int fd, uint32_t events, uint64_t data)
{
	struct epoll_event ev = {.events = events, .data.u64 = data};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		fail("EPOLL_CTL_ADD %d: %m", fd);
}

int main(void)
{
	int et[2], lt[2], one[2];
	struct epoll_event ev[8];
	char before[2048], after[2048];

	if (pipe(et) || pipe(lt) || pipe(one))
		fail("pipe: %m");
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		fail("epoll_create1: %m");
	add(one[1], EPOLLOUT | EPOLLONESHOT, D_ONE);
	if (epoll_wait(ep, ev, 8, 0) != 1 || ev[0].data.u64 != D_ONE)
		fail("the ONESHOT watch did not fire");
	add(et[0], EPOLLIN | EPOLLET, D_ET);
	add(lt[0], EPOLLIN, D_LT);
	if (write(et[1], "e", 1) != 1)
		fail("write: %m");
	watches(before, sizeof(before));

	test_ready();
	test_wait();

	watches(after, sizeof(after));
	expect(!strcmp(before, after), "watches differ:\n  before %s\n  after  %s", before, after);
	int n = epoll_wait(ep, ev, 8, 0);
	expect(n == 1 && ev[0].data.u64 == D_ET && ev[0].events == EPOLLIN,
	       "first epoll_wait: %d events (data %#llx events %#x), want the ET pipe's", n,
	       n > 0 ? (unsigned long long)ev[0].data.u64 : 0ull, n > 0 ? ev[0].events : 0);
	n = epoll_wait(ep, ev, 8, 0);
	expect(n == 0, "second epoll_wait: %d events, want none (edge taken, ONESHOT disarmed)", n);
	if (write(lt[1], "l", 1) != 1)
		fail("write: %m");
	n = epoll_wait(ep, ev, 8, 100);
	expect(n == 1 && ev[0].data.u64 == D_LT, "level-triggered pipe: %d events", n);
	char c;
	if (read(lt[0], &c, 1) != 1)
		fail("read: %m");
	struct epoll_event mod = {.events = EPOLLOUT | EPOLLONESHOT, .data.u64 = D_MOD};
	expect(epoll_ctl(ep, EPOLL_CTL_MOD, one[1], &mod) == 0, "EPOLL_CTL_MOD of fd %d: %m",
	       one[1]);
	n = epoll_wait(ep, ev, 8, 0);
	expect(n == 1 && ev[0].data.u64 == D_MOD && (ev[0].events & EPOLLOUT),
	       "re-armed ONESHOT watch: %d events", n);
	expect(epoll_ctl(ep, EPOLL_CTL_ADD, lt[0], &mod) < 0 && errno == EEXIST,
	       "EPOLL_CTL_ADD of watched fd %d did not say EEXIST", lt[0]);
	expect(epoll_ctl(ep, EPOLL_CTL_DEL, et[0], NULL) == 0, "EPOLL_CTL_DEL of fd %d: %m", et[0]);
	expect(epoll_ctl(ep, EPOLL_CTL_DEL, et[0], NULL) < 0 && errno == ENOENT,
	       "second EPOLL_CTL_DEL of fd %d did not say ENOENT", et[0]);
	if (write(et[1], "f", 1) != 1)
		fail("write: %m");
	expect(epoll_wait(ep, ev, 8, 0) == 0, "a deleted watch still reports");
	pass();
}
