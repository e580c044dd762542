/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The mm's fields: /proc/self/cmdline, environ, auxv, the exe link and the
 * address fields of /proc/self/stat (start_code, end_code, start_stack,
 * start_data, end_data, start_brk, arg_start, arg_end, env_start, env_end)
 * are identical before and after.
 */
#include "lib.h"

#include <string.h>
#include <unistd.h>

struct snap {
	char cmdline[8192], environ[65536], auxv[4096], exe[4096];
	ssize_t cmdline_len, environ_len, auxv_len;
	unsigned long long stat[7 + 3];
};

static const int stat_fields[] = {26, 27, 28, 45, 46, 47, 48, 49, 50, 51};
static const char *const stat_names[] = {"start_code", "end_code",  "start_stack", "start_data",
					 "end_data",   "start_brk", "arg_start",   "arg_end",
					 "env_start",  "env_end"};
#define NSTAT 10

static void take(struct snap *s)
{
	s->cmdline_len = test_read_file("/proc/self/cmdline", s->cmdline, sizeof(s->cmdline));
	s->environ_len = test_read_file("/proc/self/environ", s->environ, sizeof(s->environ));
	s->auxv_len = test_read_file("/proc/self/auxv", s->auxv, sizeof(s->auxv));
	ssize_t n = readlink("/proc/self/exe", s->exe, sizeof(s->exe) - 1);
	s->exe[n > 0 ? n : 0] = 0;
	for (int i = 0; i < NSTAT; i++)
		s->stat[i] = test_stat_field(stat_fields[i]);
}

static void cmp_blob(const char *what, const char *a, ssize_t al, const char *b, ssize_t bl)
{
	expect(al == bl && al >= 0 && !memcmp(a, b, (size_t)al),
	       "/proc/self/%s differs (%zd vs %zd bytes)", what, al, bl);
}

static struct snap before, after;

int main(void)
{
	take(&before);
	if (before.cmdline_len <= 0 || before.environ_len <= 0 || before.auxv_len <= 0 ||
	    !before.exe[0] || !before.stat[0])
		fail("cannot read the mm fields before the checkpoint");

	test_ready();
	test_wait();

	take(&after);
	cmp_blob("cmdline", before.cmdline, before.cmdline_len, after.cmdline, after.cmdline_len);
	cmp_blob("environ", before.environ, before.environ_len, after.environ, after.environ_len);
	cmp_blob("auxv", before.auxv, before.auxv_len, after.auxv, after.auxv_len);
	expect(!strcmp(before.exe, after.exe), "exe is '%s', was '%s'", after.exe, before.exe);
	for (int i = 0; i < NSTAT; i++)
		expect(before.stat[i] == after.stat[i], "stat %s is %llx, was %llx", stat_names[i],
		       after.stat[i], before.stat[i]);
	pass();
}
