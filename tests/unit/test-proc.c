/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * /proc parsers: fixed texts copied from a 6.18 kernel (with hand-made
 * tricky cases), garbled inputs, and the live /proc/self of this test.
 */
#include "util/proc.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

/* --- fixtures -------------------------------------------------------- */

static const char smaps_text[] =
	"5580ffaa7000-5580ffaa9000 r--p 00000000 fe:00 247134                     /usr/bin/cat\n"
	"Size:                  8 kB\n"
	"KernelPageSize:        4 kB\n"
	"MMUPageSize:           4 kB\n"
	"Rss:                   8 kB\n"
	"Pss:                   8 kB\n"
	"Pss_Dirty:             0 kB\n"
	"Shared_Clean:          0 kB\n"
	"Shared_Dirty:          0 kB\n"
	"Private_Clean:         8 kB\n"
	"Private_Dirty:         0 kB\n"
	"Referenced:            8 kB\n"
	"Anonymous:             0 kB\n"
	"KSM:                   0 kB\n"
	"LazyFree:              0 kB\n"
	"AnonHugePages:         0 kB\n"
	"ShmemPmdMapped:        0 kB\n"
	"FilePmdMapped:         0 kB\n"
	"Shared_Hugetlb:        0 kB\n"
	"Private_Hugetlb:       0 kB\n"
	"Swap:                  0 kB\n"
	"SwapPss:               0 kB\n"
	"Locked:                0 kB\n"
	"THPeligible:           0\n"
	"ProtectionKey:         0\n"
	"VmFlags: rd mr mw me \n"
	"556b7f719000-556b7f73a000 rw-p 00000000 00:00 0                          [heap]\n"
	"Size:                132 kB\n"
	"Rss:                  32 kB\n"
	"Anonymous:            32 kB\n"
	"Swap:                  0 kB\n"
	"SwapPss:               0 kB\n"
	"THPeligible:           0\n"
	"VmFlags: rd wr mr mw me ac \n"
	"7f2d35d71000-7f2d35d93000 rw-p 00000000 00:00 0 \n"
	"Size:                136 kB\n"
	"Rss:                  12 kB\n"
	"Anonymous:            12 kB\n"
	"Swap:                 40 kB\n"
	"SwapPss:              40 kB\n"
	"VmFlags: rd wr mr mw me ac zz qq \n"
	"7f2d35d93000-7f2d35d9a000 rw-s 00003000 00:01 2049                       /memfd:my buf (deleted)\n"
	"Rss:                   4 kB\n"
	"Anonymous:             0 kB\n"
	"VmFlags: rd wr sh mr mw me ms sd \n"
	"7f2d35e1a000-7f2d35f70000 r-xp 00026000 fe:00 332835                     /tmp/a b/lib c.so\n"
	"Rss:                 900 kB\n"
	"VmFlags: rd ex mr mw me sd \n"
	"7f2d35fe3000-7f2d35fe7000 r--p 00000000 00:00 0                          [vvar]\n"
	"Rss:                   0 kB\n"
	"VmFlags: rd mr pf io de dd \n"
	"7f2d35fe7000-7f2d35fe9000 r--p 00000000 00:00 0                          [vvar_vclock]\n"
	"Rss:                   0 kB\n"
	"VmFlags: rd mr pf io de dd \n"
	"7f2d35fe9000-7f2d35feb000 r-xp 00000000 00:00 0                          [vdso]\n"
	"Rss:                   8 kB\n"
	"VmFlags: rd ex mr mw me de \n"
	"7ffef4291000-7ffef42b2000 rw-p 00000000 00:00 0                          [stack]\n"
	"Rss:                  16 kB\n"
	"Anonymous:            16 kB\n"
	"VmFlags: rd wr mr mw me gd ac \n"
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n"
	"Rss:                   0 kB\n"
	"VmFlags: ex \n";

static const char maps_text[] =
	"55f848851000-55f848853000 r--p 00000000 fe:00 247134                     /usr/bin/cat\n"
	"55f85dde0000-55f85de01000 rw-p 00000000 00:00 0                          [heap]\n"
	"7f2d35d71000-7f2d35d93000 rw-p 00000000 00:00 0 \n"
	"7f2d35fd9000-7f2d35fe0000 r--s 00000000 fe:00 332280                     /usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache\n"
	"7ffef4291000-7ffef42b2000 rw-p 00000000 00:00 0                          [stack]";

static const char status_text[] =
	"Name:\tcat\n"
	"Umask:\t0022\n"
	"State:\tR (running)\n"
	"Tgid:\t2896\n"
	"Ngid:\t0\n"
	"Pid:\t2896\n"
	"PPid:\t2888\n"
	"TracerPid:\t0\n"
	"Uid:\t0\t0\t0\t0\n"
	"Gid:\t0\t0\t0\t0\n"
	"FDSize:\t256\n"
	"Groups:\t \n"
	"NStgid:\t2896\n"
	"NSpid:\t2896\n"
	"NSpgid:\t2888\n"
	"NSsid:\t2341\n"
	"Kthread:\t0\n"
	"VmPeak:\t    3060 kB\n"
	"VmSize:\t    3060 kB\n"
	"VmRSS:\t    1708 kB\n"
	"untag_mask:\t0xffffffffffffffff\n"
	"Threads:\t1\n"
	"SigQ:\t0/96363\n"
	"SigPnd:\t0000000000000000\n"
	"ShdPnd:\t0000000000000000\n"
	"SigBlk:\t0000000000000000\n"
	"SigIgn:\t0000000000000000\n"
	"SigCgt:\t0000000000000000\n"
	"CapInh:\t0000000000000000\n"
	"CapPrm:\t000001fffeffffff\n"
	"CapEff:\t000001fffeffffff\n"
	"CapBnd:\t000001fffeffffff\n"
	"CapAmb:\t0000000000000000\n"
	"NoNewPrivs:\t0\n"
	"Seccomp:\t0\n"
	"Seccomp_filters:\t0\n"
	"Speculation_Store_Bypass:\tvulnerable\n"
	"SpeculationIndirectBranch:\talways enabled\n"
	"Cpus_allowed:\t3\n"
	"Cpus_allowed_list:\t0-1\n"
	"Mems_allowed_list:\t0\n"
	"voluntary_ctxt_switches:\t0\n"
	"nonvoluntary_ctxt_switches:\t0\n";

/* a nested-pidns, unprivileged, seccomp'd task with an odd name */
static const char status_text2[] =
	"Name:\t my prog) (x\\\\y\n"
	"Umask:\t0077\n"
	"State:\tt (tracing stop)\n"
	"Tgid:\t41\n"
	"Pid:\t42\n"
	"PPid:\t1\n"
	"TracerPid:\t7\n"
	"Uid:\t1000\t1001\t1002\t1003\n"
	"Gid:\t100\t101\t102\t4294967294\n"
	"Groups:\t4 24 27 100 \n"
	"NSpid:\t9042\t42\n"
	"NSsid:\t9000\t1\n"
	"Threads:\t3\n"
	"SigPnd:\t0000000000000100\n"
	"ShdPnd:\t8000000000000000\n"
	"SigBlk:\t0000000000010000\n"
	"SigIgn:\t0000000000001000\n"
	"SigCgt:\t0000000180004a02\n"
	"CapInh:\t0000000000000000\n"
	"CapPrm:\t0000000000000000\n"
	"CapEff:\t0000000000000000\n"
	"CapBnd:\t000001ffffffffff\n"
	"CapAmb:\t0000000000000400\n"
	"NoNewPrivs:\t1\n"
	"Seccomp:\t2\n"
	"Seccomp_filters:\t3\n";

static const char stat_text[] =
	"2899 (cat) R 2888 2888 2341 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 63270 3133440 382 "
	"18446744073709551615 93966280388608 93966280408489 140721950005840 0 0 0 0 0 0 0 0 0 17 "
	"1 0 0 0 0 0 93966280424496 93966280426112 93967338647552 140721950009995 140721950010015 "
	"140721950010015 140721950011371 0\n";

/* comm ") (x y)", an RT task (priority -51), exited with status 0x100 */
static const char stat_tricky[] =
	"77 () (x y)) Z 1 77 77 34816 77 4227084 5 6 7 8 9 10 -11 -12 -51 -5 4 0 123456789 0 0 "
	"18446744073709551615 1 2 3 4 5 6 7 8 9 0 0 0 17 0 50 1 0 0 0 11 12 13 14 15 16 17 256\n";

/* a 3.2-era kernel: 44 fields */
static const char stat_old[] =
	"5 (kworker/u:0) S 2 0 0 0 -1 69238880 0 0 0 0 0 10 0 0 20 0 1 0 7 0 0 "
	"18446744073709551615 0 0 0 0 0 0 0 2147483647 0 18446744071579256214 0 0 17 0 0 0 0 0 0\n";

static const char limits_text[] =
	"Limit                     Soft Limit           Hard Limit           Units     \n"
	"Max cpu time              unlimited            unlimited            seconds   \n"
	"Max file size             unlimited            unlimited            bytes     \n"
	"Max data size             unlimited            unlimited            bytes     \n"
	"Max stack size            8388608              unlimited            bytes     \n"
	"Max core file size        0                    unlimited            bytes     \n"
	"Max resident set          unlimited            unlimited            bytes     \n"
	"Max processes             96363                96363                processes \n"
	"Max open files            20000                20000                files     \n"
	"Max locked memory         8388608              8388608              bytes     \n"
	"Max address space         unlimited            unlimited            bytes     \n"
	"Max file locks            unlimited            unlimited            locks     \n"
	"Max pending signals       96363                96363                signals   \n"
	"Max msgqueue size         819200               819200               bytes     \n"
	"Max nice priority         0                    0                    \n"
	"Max realtime priority     0                    0                    \n"
	"Max realtime timeout      unlimited            unlimited            us        \n";

static const char fdinfo_text[] = "pos:\t0\nflags:\t0100002\nmnt_id:\t24\nino:\t3\n";
static const char fdinfo_eventfd[] =
	"pos:\t0\nflags:\t02004002\nmnt_id:\t15\nino:\t1057\neventfd-count:                5\n"
	"eventfd-id: 7\neventfd-semaphore: 0\n";
static const char fdinfo_epoll[] =
	"pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t1057\n"
	"tfd:        5 events:       19 data:                5  pos:99 ino:3 sdev:e\n";

/* task/TID/children of a thread with many children (a text of over two
 * seq_file pages: a short read after the first is not its end; a reader
 * that took it for the end, as proc_read_single may, lost a third of the
 * 2,000) and with none, read as proc_read reads them. */
TEST(read_records_children)
{
	enum { KIDS = 2000 };
	static pid_t kids[KIDS];
	size_t n = 0;
	int ready[2];
	CHECK(pipe(ready) == 0);
	for (; n < KIDS; n++) {
		kids[n] = fork();
		if (kids[n] == 0) {
			close(ready[0]);
			close(ready[1]);
			pause();
			_exit(0);
		}
		if (kids[n] < 0)
			break;
	}
	CHECK_EQ(n, KIDS);
	char name[64], *a = NULL, *b = NULL;
	snprintf(name, sizeof(name), "task/%d/children", (int)getpid());
	CHECK(proc_read(getpid(), name, &a, NULL) == 0);
	snprintf(name, sizeof(name), "/proc/%d/task/%d/children", (int)getpid(), (int)getpid());
	CHECK(proc_read_records(AT_FDCWD, name, &b) == 0);
	CHECK(a && b && strlen(a) > 8192 && !strcmp(a, b));
	size_t words = 0;
	for (const char *p = b; p && *p; p++)
		words += *p == ' ';
	CHECK_EQ(words, n);
	for (size_t i = 0; i < n; i++)
		kill(kids[i], SIGKILL);
	for (size_t i = 0; i < n; i++)
		waitpid(kids[i], NULL, 0);
	free(a);
	free(b);
	b = NULL;
	CHECK(proc_read_records(AT_FDCWD, name, &b) == 0);
	CHECK_STR(b, "");
	free(b);
	CHECK(proc_read_records(AT_FDCWD, "/proc/self/nonexistent", &b) == -ENOENT);
	close(ready[0]);
	close(ready[1]);
}

/* --- maps lines ------------------------------------------------------ */

/* A pre-copy round's read of pages one of which was unmapped since: the
 * pages after the hole are still read. */
TEST(mem_read_gone)
{
	const size_t pg = 4096;
	uint8_t *m = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	memset(m, 'a', pg);
	memset(m + 2 * pg, 'c', pg);
	CHECK(munmap(m + pg, pg) == 0);
	int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	uint8_t *buf = malloc(3 * pg);
	memset(buf, 'x', 3 * pg);
	CHECK(proc_mem_read_gone(fd, (uintptr_t)m, 3 * pg, buf) == pg);
	CHECK(buf[0] == 'a' && buf[pg - 1] == 'a');
	CHECK(buf[pg] == 0 && buf[2 * pg - 1] == 0);
	CHECK(buf[2 * pg] == 'c' && buf[3 * pg - 1] == 'c');
	/* the hole first, then the task gone */
	memset(buf, 'x', 3 * pg);
	CHECK(proc_mem_read_gone(fd, (uintptr_t)m + pg, 2 * pg, buf) == pg);
	CHECK(buf[0] == 0 && buf[pg] == 'c');
	CHECK(proc_mem_read_gone(-1, (uintptr_t)m, 2 * pg, buf) == 2 * pg && buf[pg] == 0);
	close(fd);
	free(buf);
	munmap(m, pg);
	munmap(m + 2 * pg, pg);
}

TEST(maps_line)
{
	struct proc_vma v;

	CHECK_EQ(proc_parse_maps_line("5580ffaa9000-5580ffaae000 r-xp 00002000 fe:00 247134     "
				      "                /usr/bin/cat\n",
				      &v),
		 0);
	CHECK_EQ(v.start, 0x5580ffaa9000ull);
	CHECK_EQ(v.end, 0x5580ffaae000ull);
	CHECK_EQ(v.pgoff, 0x2000);
	CHECK_EQ(v.prot, PROT_READ | PROT_EXEC);
	CHECK(!v.shared);
	CHECK_EQ(v.dev_major, 0xfe);
	CHECK_EQ(v.dev_minor, 0);
	CHECK_EQ(v.ino, 247134);
	CHECK_STR(v.path, "/usr/bin/cat");
	CHECK(!v.deleted);
	CHECK_EQ(v.vmflags, 0);
	free(v.path);

	/* anonymous, with the kernel's trailing space */
	CHECK_EQ(proc_parse_maps_line("7f2d35d71000-7f2d35d93000 rw-p 00000000 00:00 0 ", &v), 0);
	CHECK_EQ(v.prot, PROT_READ | PROT_WRITE);
	CHECK_STR(v.path, "");
	CHECK(!v.deleted);
	free(v.path);

	/* anonymous, no trailing space at all */
	CHECK_EQ(proc_parse_maps_line("1000-2000 ---p 00000000 00:00 0", &v), 0);
	CHECK_EQ(v.prot, 0);
	CHECK_STR(v.path, "");
	free(v.path);

	/* shared, deleted, spaces in the name, big device numbers */
	CHECK_EQ(proc_parse_maps_line("7f0000000000-7f0000001000 rw-s 7ffff000 103:1a 18446744073709551615"
				      "    /dev/shm/a b (c) (deleted)",
				      &v),
		 0);
	CHECK(v.shared);
	CHECK_EQ(v.pgoff, 0x7ffff000);
	CHECK_EQ(v.dev_major, 0x103);
	CHECK_EQ(v.dev_minor, 0x1a);
	CHECK(v.ino == UINT64_MAX);
	CHECK_STR(v.path, "/dev/shm/a b (c)");
	CHECK(v.deleted);
	free(v.path);

	/* a file literally named " (deleted)" in / reads as deleted "/" */
	CHECK_EQ(proc_parse_maps_line("1000-2000 r--p 00000000 08:01 12  / (deleted)", &v), 0);
	CHECK_STR(v.path, "/");
	CHECK(v.deleted);
	free(v.path);

	CHECK_EQ(proc_parse_maps_line("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0    "
				      "              [vsyscall]",
				      &v),
		 0);
	CHECK_EQ(v.start, 0xffffffffff600000ull);
	CHECK_EQ(v.prot, PROT_EXEC);
	CHECK_STR(v.path, "[vsyscall]");
	free(v.path);
}

TEST(maps_line_malformed)
{
	static const char *const bad[] = {
		"",
		"\n",
		"garbage",
		"1000-2000",
		"1000-2000 ",
		"1000-2000 rw-p",
		"1000-2000 rw-p 0",
		"1000-2000 rw-p 0 00:00",
		"1000-2000 rw-p 0 00:00 ",
		"1000-2000 rwxq 0 00:00 0",
		"1000-2000 rw-p- 0 00:00 0",
		"1000-2000 rw 0 00:00 0",
		"1000-2000 Rw-p 0 00:00 0",
		"1000 2000 rw-p 0 00:00 0",
		"-2000 rw-p 0 00:00 0",
		"1000- rw-p 0 00:00 0",
		"2000-1000 rw-p 0 00:00 0",
		"1000-1000 rw-p 0 00:00 0",
		"1000-2000 rw-p 0 0000 0",
		"1000-2000 rw-p 0 00: 0",
		"1000-2000 rw-p 0 :00 0",
		"1000-2000 rw-p 0 100000000:00 0",
		"1000-2000 rw-p g 00:00 0",
		"1000-2000 rw-p 0 00:00 0x",
		"1000-2000 rw-p 0 00:00 1a /x",
		"1000-2000 rw-p 0 00:00 -1",
		"10000000000000000-10000000000000001 rw-p 0 00:00 0",
		"1000-2000 rw-p 0 00:00 99999999999999999999 /x",
		" 1000-2000 rw-p 0 00:00 0",
	};
	struct proc_vma v = { .path = (char *)"untouched" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = proc_parse_maps_line(bad[i], &v);

		if (r != -EINVAL)
			fprintf(stderr, "accepted: '%s'\n", bad[i]);
		CHECK_EQ(r, -EINVAL);
	}
	CHECK_STR(v.path, "untouched");
}

/* --- smaps ----------------------------------------------------------- */

static const struct proc_vma *find_vma(const struct proc_vmas *vs, uint64_t addr)
{
	for (size_t i = 0; i < vs->n; i++)
		if (addr >= vs->v[i].start && addr < vs->v[i].end)
			return &vs->v[i];
	return NULL;
}

TEST(smaps)
{
	struct proc_vmas vs;
	const struct proc_vma *v;

	CHECK_EQ(proc_parse_smaps(smaps_text, &vs), 0);
	CHECK_EQ(vs.n, 10);
	if (vs.n != 10) {
		proc_vmas_free(&vs);
		return;
	}

	v = &vs.v[0];
	CHECK_STR(v->path, "/usr/bin/cat");
	CHECK_EQ(v->rss_kb, 8);
	CHECK_EQ(v->anon_kb, 0);
	CHECK_EQ(v->vmflags, VMF_RD | VMF_MR | VMF_MW | VMF_ME);
	CHECK_STR(v->unknown_flags, "");

	v = &vs.v[1];
	CHECK_STR(v->path, "[heap]");
	CHECK_EQ(v->rss_kb, 32);
	CHECK_EQ(v->anon_kb, 32);
	CHECK_EQ(v->swap_kb, 0);
	CHECK_EQ(v->vmflags, VMF_RD | VMF_WR | VMF_MR | VMF_MW | VMF_ME | VMF_AC);

	v = &vs.v[2];
	CHECK_STR(v->path, "");
	CHECK_EQ(v->rss_kb, 12);
	CHECK_EQ(v->swap_kb, 40); /* SwapPss must not overwrite Swap */
	CHECK_EQ(v->vmflags, VMF_RD | VMF_WR | VMF_MR | VMF_MW | VMF_ME | VMF_AC);
	CHECK_STR(v->unknown_flags, "zz qq");

	v = &vs.v[3];
	CHECK_STR(v->path, "/memfd:my buf");
	CHECK(v->deleted);
	CHECK(v->shared);
	CHECK_EQ(v->pgoff, 0x3000);
	CHECK_EQ(v->dev_minor, 1);
	CHECK_EQ(v->ino, 2049);
	CHECK_EQ(v->vmflags, VMF_RD | VMF_WR | VMF_SH | VMF_MR | VMF_MW | VMF_ME | VMF_MS | VMF_SD);

	v = &vs.v[4];
	CHECK_STR(v->path, "/tmp/a b/lib c.so");
	CHECK_EQ(v->prot, PROT_READ | PROT_EXEC);
	CHECK_EQ(v->rss_kb, 900);
	CHECK_EQ(v->anon_kb, 0);

	CHECK_STR(vs.v[5].path, "[vvar]");
	CHECK_EQ(vs.v[5].vmflags, VMF_RD | VMF_MR | VMF_PF | VMF_IO | VMF_DE | VMF_DD);
	CHECK_STR(vs.v[6].path, "[vvar_vclock]");
	CHECK_STR(vs.v[7].path, "[vdso]");
	CHECK_EQ(vs.v[7].vmflags, VMF_RD | VMF_EX | VMF_MR | VMF_MW | VMF_ME | VMF_DE);
	CHECK_STR(vs.v[8].path, "[stack]");
	CHECK(vs.v[8].vmflags & VMF_GD);
	CHECK_EQ(vs.v[8].anon_kb, 16);
	CHECK_STR(vs.v[9].path, "[vsyscall]");
	CHECK_EQ(vs.v[9].vmflags, VMF_EX);

	proc_vmas_free(&vs);
	CHECK(vs.v == NULL);
	CHECK_EQ(vs.n, 0);
	proc_vmas_free(&vs); /* again: an empty struct */
	proc_vmas_free(NULL);
}

TEST(smaps_all_flags)
{
	static const char text[] = "1000-2000 rw-p 00000000 00:00 0 \n"
				   "VmFlags: rd wr ex sh mr mw me ms gd pf lo io sr rr dc de ac nr "
				   "ht sf ar wf dd sd mm hg nh mg um uw ss dp\n"
				   "3000-4000 rw-p 00000000 00:00 0 \n"
				   "VmFlags: a1 b2 c3 d4 e5 f6 g7 h8 i9 j0 k1 rd toolongtoken xx q\n";
	struct proc_vmas vs;

	CHECK_EQ(proc_parse_smaps(text, &vs), 0);
	CHECK_EQ(vs.n, 2);
	if (vs.n == 2) {
		CHECK(vs.v[0].vmflags == UINT32_MAX);
		CHECK_STR(vs.v[0].unknown_flags, "");
		CHECK_EQ(vs.v[1].vmflags, VMF_RD);
		/* whole tokens kept while they fit in 31 characters; "q" would, but
		 * the list was cut at "k1" */
		CHECK_STR(vs.v[1].unknown_flags, "a1 b2 c3 d4 e5 f6 g7 h8 i9 j0");
		CHECK(strlen(vs.v[1].unknown_flags) < sizeof(vs.v[1].unknown_flags));
	}
	proc_vmas_free(&vs);
}

TEST(smaps_plain_maps)
{
	struct proc_vmas vs;

	CHECK_EQ(proc_parse_smaps(maps_text, &vs), 0);
	CHECK_EQ(vs.n, 5);
	if (vs.n == 5) {
		CHECK_STR(vs.v[0].path, "/usr/bin/cat");
		CHECK_STR(vs.v[1].path, "[heap]");
		CHECK_STR(vs.v[2].path, "");
		CHECK(vs.v[3].shared);
		CHECK_STR(vs.v[3].path, "/usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache");
		CHECK_STR(vs.v[4].path, "[stack]"); /* last line without '\n' */
		for (size_t i = 0; i < vs.n; i++) {
			CHECK_EQ(vs.v[i].vmflags, 0);
			CHECK_EQ(vs.v[i].rss_kb, 0);
		}
	}
	proc_vmas_free(&vs);

	/* no mappings at all (a zombie) */
	CHECK_EQ(proc_parse_smaps("", &vs), 0);
	CHECK_EQ(vs.n, 0);
	proc_vmas_free(&vs);
}

TEST(smaps_many)
{
	/* more mappings than the initial capacity */
	size_t n = 1000, len = 0;
	char *text = malloc(n * 64);
	struct proc_vmas vs;

	CHECK(text != NULL);
	if (!text)
		return;
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(text + len, "%zx000-%zx000 r--p 0 00:00 0 \nRss: %zu kB\n",
				       i + 1, i + 2, i);
	CHECK_EQ(proc_parse_smaps(text, &vs), 0);
	CHECK_EQ(vs.n, n);
	if (vs.n == n) {
		CHECK_EQ(vs.v[999].start, 1000 * 0x1000);
		CHECK_EQ(vs.v[999].rss_kb, 999);
	}
	proc_vmas_free(&vs);
	free(text);
}

TEST(smaps_malformed)
{
	static const char *const bad[] = {
		"Rss: 4 kB\n",                                  /* key before any mapping */
		"1000-2000 rw-p 0 00:00 0\nRss: four kB\n",     /* bad value */
		"1000-2000 rw-p 0 00:00 0\nRss: 4 MB\n",        /* bad unit */
		"1000-2000 rw-p 0 00:00 0\nAnonymous:\n",       /* no value */
		"1000-2000 rw-p 0 00:00 0\nSwap: -1 kB\n",      /* negative */
		"1000-2000 rw-p 0 00:00 0\nthis is junk\n",     /* neither kind of line */
		"1000-2000 rw-p 0 00:00 0\n2000-3000 rw-p\n",   /* bad second header */
		"1000-2000 rw-p 0 00:00 0\n: 4 kB\n",           /* empty key */
		"1000-2000 rw-p 0 00:00 0\nRss 4 kB\n",         /* no colon */
	};
	struct proc_vmas vs = { .n = 77 };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = proc_parse_smaps(bad[i], &vs);

		if (r != -EINVAL)
			fprintf(stderr, "accepted: '%s'\n", bad[i]);
		CHECK_EQ(r, -EINVAL);
	}
	CHECK_EQ(vs.n, 77); /* untouched */
}

/* --- status ---------------------------------------------------------- */

TEST(status)
{
	struct proc_status st;

	memset(&st, 0xaa, sizeof(st));
	CHECK_EQ(proc_parse_status(status_text, &st), 0);
	CHECK_STR(st.name, "cat");
	CHECK_EQ(st.state, 'R');
	CHECK_EQ(st.tgid, 2896);
	CHECK_EQ(st.pid, 2896);
	CHECK_EQ(st.ppid, 2888);
	CHECK_EQ(st.tracer_pid, 0);
	CHECK_EQ(st.umask, 022);
	CHECK_EQ(st.uid[0], 0);
	CHECK_EQ(st.uid[3], 0);
	CHECK_EQ(st.gid[2], 0);
	CHECK_EQ(st.ngroups, 0);
	CHECK_EQ(st.nspid_n, 1);
	CHECK_EQ(st.nspid[0], 2896);
	CHECK_EQ(st.nssid_n, 1);
	CHECK_EQ(st.nssid[0], 2341);
	CHECK_EQ(st.threads, 1);
	CHECK_EQ(st.sig_pnd, 0);
	CHECK_EQ(st.sig_cgt, 0);
	CHECK_EQ(st.cap_inh, 0);
	CHECK_EQ(st.cap_prm, 0x1fffeffffffull);
	CHECK_EQ(st.cap_eff, 0x1fffeffffffull);
	CHECK_EQ(st.cap_bnd, 0x1fffeffffffull);
	CHECK_EQ(st.cap_amb, 0);
	CHECK_EQ(st.no_new_privs, 0);
	CHECK_EQ(st.seccomp, 0);
	CHECK_EQ(st.seccomp_filters, 0);
	CHECK_EQ(st.groups[0], 0); /* zeroed, not left over */
}

TEST(status_tricky)
{
	struct proc_status st;

	CHECK_EQ(proc_parse_status(status_text2, &st), 0);
	CHECK_STR(st.name, " my prog) (x\\\\y"); /* leading space and escapes kept */
	CHECK_EQ(st.state, 't');
	CHECK_EQ(st.tgid, 41);
	CHECK_EQ(st.pid, 42);
	CHECK_EQ(st.ppid, 1);
	CHECK_EQ(st.tracer_pid, 7);
	CHECK_EQ(st.umask, 077);
	CHECK_EQ(st.uid[0], 1000);
	CHECK_EQ(st.uid[1], 1001);
	CHECK_EQ(st.uid[2], 1002);
	CHECK_EQ(st.uid[3], 1003);
	CHECK_EQ(st.gid[0], 100);
	CHECK_EQ(st.gid[3], 4294967294u);
	CHECK_EQ(st.ngroups, 4);
	CHECK_EQ(st.groups[0], 4);
	CHECK_EQ(st.groups[3], 100);
	CHECK_EQ(st.nspid_n, 2);
	CHECK_EQ(st.nspid[0], 9042);
	CHECK_EQ(st.nspid[1], 42);
	CHECK_EQ(st.nssid_n, 2);
	CHECK_EQ(st.nssid[1], 1);
	CHECK_EQ(st.threads, 3);
	CHECK_EQ(st.sig_pnd, 0x100);
	CHECK(st.shd_pnd == 0x8000000000000000ull);
	CHECK_EQ(st.sig_blk, 0x10000);
	CHECK_EQ(st.sig_ign, 0x1000);
	CHECK_EQ(st.sig_cgt, 0x180004a02ull);
	CHECK_EQ(st.cap_bnd, 0x1ffffffffffull);
	CHECK_EQ(st.cap_amb, 0x400);
	CHECK_EQ(st.no_new_privs, 1);
	CHECK_EQ(st.seccomp, 2);
	CHECK_EQ(st.seccomp_filters, 3);
}

TEST(status_minimal_and_caps)
{
	struct proc_status st;
	char *text = malloc(8192);
	size_t len;

	/* only the three required fields: the rest stay zero */
	CHECK_EQ(proc_parse_status("Name:\tx\nPid:\t5\nUid:\t1\t2\t3\t4", &st), 0);
	CHECK_STR(st.name, "x");
	CHECK_EQ(st.pid, 5);
	CHECK_EQ(st.uid[3], 4);
	CHECK_EQ(st.state, 0);
	CHECK_EQ(st.gid[0], 0);
	CHECK_EQ(st.nspid_n, 0);

	/* a long name is cut to fit */
	CHECK_EQ(proc_parse_status("Name:\taaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
				   "aaaaaaaaaa\nPid:\t5\nUid:\t1\t2\t3\t4\n",
				   &st),
		 0);
	CHECK_EQ(strlen(st.name), sizeof(st.name) - 1);

	/* 300 groups and 40 pid levels: capped, not overflowing */
	CHECK(text != NULL);
	if (!text)
		return;
	len = (size_t)sprintf(text, "Name:\tx\nPid:\t5\nUid:\t1\t2\t3\t4\nGroups:\t");
	for (int i = 0; i < 300; i++)
		len += (size_t)sprintf(text + len, "%d ", i + 1);
	len += (size_t)sprintf(text + len, "\nNSpid:");
	for (int i = 0; i < 40; i++)
		len += (size_t)sprintf(text + len, "\t%d", i + 100);
	sprintf(text + len, "\n");
	CHECK_EQ(proc_parse_status(text, &st), 0);
	CHECK_EQ(st.ngroups, 256);
	CHECK_EQ(st.ngroups_total, 300);
	CHECK_EQ(st.groups[255], 256);
	CHECK_EQ(st.nspid_n, 32);
	CHECK_EQ(st.nspid[31], 131);
	/* the groups past 256, read again by whoever needs them (creds) */
	uint32_t all[300] = { 0 };
	CHECK_EQ(proc_status_groups(text, all, 300), 300);
	CHECK_EQ(all[299], 300);
	CHECK_EQ(proc_status_groups(text, all, 10), 300);
	CHECK_EQ(proc_status_groups("Name:\tx\nPid:\t5\n", all, 10), -ENOENT);
	CHECK_EQ(proc_status_groups("Groups:\t1 x\n", all, 10), -EINVAL);
	free(text);
}

TEST(status_malformed)
{
	static const char *const bad[] = {
		"",
		"garbage",
		"Pid:\t5\nUid:\t1\t2\t3\t4\n",                  /* no Name */
		"Name:\tx\nUid:\t1\t2\t3\t4\n",                 /* no Pid */
		"Name:\tx\nPid:\t5\n",                          /* no Uid */
		"Name:\tx\nPid:\t5\nUid:\t1\t2\t3\n",           /* 3 uids */
		"Name:\tx\nPid:\t5\nUid:\t1\t2\t3\t4\t5\n",     /* 5 uids */
		"Name:\tx\nPid:\tfive\nUid:\t1\t2\t3\t4\n",
		"Name:\tx\nPid:\t-5\nUid:\t1\t2\t3\t4\n",
		"Name:\tx\nPid:\t5x\nUid:\t1\t2\t3\t4\n",
		"Name:\tx\nPid:\t\nUid:\t1\t2\t3\t4\n",
		"Name:\tx\nPid:\t99999999999\nUid:\t1\t2\t3\t4\n",
		"Name:\tx\nPid:\t5\nUid:\t1\t2\t3\t4294967296\n",
		"Name:\tx\nPid:\t5\nUid:\t1\t2\t3\t4\nUmask:\t0089\n",
		"Name:\tx\nPid:\t5\nUid:\t1\t2\t3\t4\nSigBlk:\t00000000000000000g\n",
		"Name:\tx\nPid:\t5\nUid:\t1\t2\t3\t4\nCapEff:\t10000000000000000\n",
		"Name:\tx\nPid:\t5\nUid:\t1\t2\t3\t4\nGroups:\t1 2a 3\n",
		"Name:\tx\nPid:\t5\nUid:\t1\t2\t3\t4\nNSpid:\t1 -2\n",
		"Name:\tx\nPid:\t5\nUid:\t1\t2\t3\t4\nno colon here\n",
	};
	struct proc_status st = { .pid = 1234 };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = proc_parse_status(bad[i], &st);

		if (r != -EINVAL)
			fprintf(stderr, "accepted: '%s'\n", bad[i]);
		CHECK_EQ(r, -EINVAL);
	}
	CHECK_EQ(st.pid, 1234); /* untouched */
}

/* --- stat ------------------------------------------------------------ */

TEST(stat)
{
	struct proc_stat st;

	CHECK_EQ(proc_parse_stat(stat_text, &st), 0);
	CHECK_EQ(st.pid, 2899);
	CHECK_STR(st.comm, "cat");
	CHECK_EQ(st.state, 'R');
	CHECK_EQ(st.ppid, 2888);
	CHECK_EQ(st.pgrp, 2888);
	CHECK_EQ(st.session, 2341);
	CHECK_EQ(st.tty_nr, 0);
	CHECK_EQ(st.tpgid, -1);
	CHECK_EQ(st.flags, 4194304);
	CHECK_EQ(st.priority, 20);
	CHECK_EQ(st.nice, 0);
	CHECK_EQ(st.num_threads, 1);
	CHECK_EQ(st.start_time, 63270);
	CHECK_EQ(st.start_code, 93966280388608ll);
	CHECK_EQ(st.end_code, 93966280408489ll);
	CHECK_EQ(st.start_stack, 140721950005840ll);
	CHECK_EQ(st.start_data, 93966280424496ll);
	CHECK_EQ(st.end_data, 93966280426112ll);
	CHECK_EQ(st.start_brk, 93967338647552ll);
	CHECK_EQ(st.arg_start, 140721950009995ll);
	CHECK_EQ(st.arg_end, 140721950010015ll);
	CHECK_EQ(st.env_start, 140721950010015ll);
	CHECK_EQ(st.env_end, 140721950011371ll);
	CHECK_EQ(st.exit_code, 0);
}

TEST(stat_tricky)
{
	struct proc_stat st;

	CHECK_EQ(proc_parse_stat(stat_tricky, &st), 0);
	CHECK_EQ(st.pid, 77);
	CHECK_STR(st.comm, ") (x y)");
	CHECK_EQ(st.state, 'Z');
	CHECK_EQ(st.ppid, 1);
	CHECK_EQ(st.tty_nr, 34816);
	CHECK_EQ(st.tpgid, 77);
	CHECK_EQ(st.priority, -51);
	CHECK_EQ(st.nice, -5);
	CHECK_EQ(st.num_threads, 4);
	CHECK_EQ(st.start_time, 123456789);
	CHECK_EQ(st.start_code, 1);
	CHECK_EQ(st.start_stack, 3);
	CHECK_EQ(st.start_data, 11);
	CHECK_EQ(st.env_end, 17);
	CHECK_EQ(st.exit_code, 256);

	/* a comm with a newline and an empty comm */
	CHECK_EQ(proc_parse_stat("9 (a\nb) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5\n", &st), 0);
	CHECK_STR(st.comm, "a\nb");
	CHECK_EQ(st.start_time, 5);
	CHECK_EQ(st.start_code, 0);
	CHECK_EQ(proc_parse_stat("9 () S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", &st), 0);
	CHECK_STR(st.comm, "");

	/* a long kthread name is cut to fit */
	CHECK_EQ(proc_parse_stat("9 (kworker/u8:3-events_unbound_and_more) I 2 0 0 0 -1 0 0 0 0 0 0 "
				 "0 0 0 20 0 1 0 5\n",
				 &st),
		 0);
	CHECK_EQ(strlen(st.comm), sizeof(st.comm) - 1);

	/* fields past exit_code (a future kernel) are ignored */
	CHECK_EQ(proc_parse_stat("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 9 10 11 12 "
				 "13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 "
				 "34 35 36 37 38 77 123 456\n",
				 &st),
		 0);
	CHECK_EQ(st.exit_code, 77);
}

TEST(stat_old_kernel)
{
	struct proc_stat st;

	memset(&st, 0x55, sizeof(st));
	CHECK_EQ(proc_parse_stat(stat_old, &st), 0);
	CHECK_EQ(st.pid, 5);
	CHECK_STR(st.comm, "kworker/u:0");
	CHECK_EQ(st.state, 'S');
	CHECK_EQ(st.ppid, 2);
	CHECK_EQ(st.start_time, 7);
	CHECK_EQ(st.start_data, 0);
	CHECK_EQ(st.arg_start, 0);
	CHECK_EQ(st.exit_code, 0);
}

TEST(stat_malformed)
{
	static const char *const bad[] = {
		"",
		"garbage",
		"1 cat R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"1 (cat R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"1 cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		") 1 (cat R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"x (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"(cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"1(cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"1 (cat)R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"1 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0",   /* 21 fields */
		"1 (cat)",
		"1 (cat) ",
		"1 (cat) RR 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"1 (cat) R x 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"1 (cat) R 1 1 1 0 -2 0 0 0 0 0 0 0 0 0 20 0 1 0 5", /* pid -2 */
		"1 (cat) R 1 1 1 0 -1 -1 0 0 0 0 0 0 0 0 20 0 1 0 5", /* flags < 0 */
		"1 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5",
		"1 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5x",
		"1 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 18446744073709551616",
		"1 (cat) R 4294967296 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"1 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 - 1",
		"1 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 1 1 1 q", /* bad start_code */
		"99999999999 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
	};
	struct proc_stat st = { .pid = 4321 };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = proc_parse_stat(bad[i], &st);

		if (r != -EINVAL)
			fprintf(stderr, "accepted: '%s'\n", bad[i]);
		CHECK_EQ(r, -EINVAL);
	}
	CHECK_EQ(st.pid, 4321);
}

/* --- limits ---------------------------------------------------------- */

TEST(limits)
{
	struct proc_limits l;

	CHECK_EQ(proc_parse_limits(limits_text, &l), 0);
	CHECK(l.soft[RLIMIT_CPU] == PROC_RLIM_INFINITY);
	CHECK(l.hard[RLIMIT_CPU] == PROC_RLIM_INFINITY);
	CHECK_EQ(l.soft[RLIMIT_STACK], 8388608);
	CHECK(l.hard[RLIMIT_STACK] == PROC_RLIM_INFINITY);
	CHECK_EQ(l.soft[RLIMIT_CORE], 0);
	CHECK(l.hard[RLIMIT_CORE] == PROC_RLIM_INFINITY);
	CHECK_EQ(l.soft[RLIMIT_NPROC], 96363);
	CHECK_EQ(l.soft[RLIMIT_NOFILE], 20000);
	CHECK_EQ(l.hard[RLIMIT_NOFILE], 20000);
	CHECK_EQ(l.soft[RLIMIT_MEMLOCK], 8388608);
	CHECK(l.soft[RLIMIT_LOCKS] == PROC_RLIM_INFINITY);
	CHECK_EQ(l.hard[RLIMIT_SIGPENDING], 96363);
	CHECK_EQ(l.soft[RLIMIT_MSGQUEUE], 819200);
	CHECK_EQ(l.soft[RLIMIT_NICE], 0);
	CHECK_EQ(l.hard[RLIMIT_RTPRIO], 0);
	CHECK(l.hard[RLIMIT_RTTIME] == PROC_RLIM_INFINITY);
}

TEST(limits_loose)
{
	/* shuffled order, odd spacing, no header, an unknown future limit */
	static const char text[] =
		"Max realtime timeout 5 6 us\n"
		"Max cpu time\t1\t2\tseconds\n"
		"Max file size 3 4\n"
		"Max data size 3 4\n"
		"Max stack size 3 4\n"
		"Max core file size 3 4\n"
		"Max resident set 3 4\n"
		"Max processes 3 4\n"
		"Max open files 1024 1048576 files\n"
		"Max locked memory 3 4\n"
		"Max address space 3 4\n"
		"Max file locks 3 unlimited\n"
		"Max pending signals 3 4\n"
		"Max quantum flux 9 9 flux\n"
		"Max msgqueue size 3 4\n"
		"Max nice priority 40 40\n"
		"Max realtime priority 99 99";
	struct proc_limits l;

	CHECK_EQ(proc_parse_limits(text, &l), 0);
	CHECK_EQ(l.soft[RLIMIT_CPU], 1);
	CHECK_EQ(l.hard[RLIMIT_CPU], 2);
	CHECK_EQ(l.soft[RLIMIT_RTTIME], 5);
	CHECK_EQ(l.hard[RLIMIT_RTTIME], 6);
	CHECK_EQ(l.soft[RLIMIT_NOFILE], 1024);
	CHECK_EQ(l.hard[RLIMIT_NOFILE], 1048576);
	CHECK(l.hard[RLIMIT_LOCKS] == PROC_RLIM_INFINITY);
	CHECK_EQ(l.soft[RLIMIT_NICE], 40);
	CHECK_EQ(l.hard[RLIMIT_RTPRIO], 99);
}

static char *replace_once(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
	char *out = malloc(n);

	if (!at || !out) {
		free(out);
		return NULL;
	}
	snprintf(out, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	return out;
}

TEST(limits_malformed)
{
	static const char *const edits[][2] = {
		{ "Max nice priority         0                    0                    \n", "" },
		{ "Max cpu time              unlimited", "Max cpu time              unlimitedx" },
		{ "Max cpu time              unlimited", "Max cpu time              infinite" },
		{ "Max open files            20000", "Max open files            -20000" },
		{ "Max open files            20000", "Max open files            2e4" },
		{ "Max open files            20000                20000",
		  "Max open files            20000" },
		{ "Max open files            20000", "Max open files            99999999999999999999" },
		{ "Max processes             96363", "Max processes" },
		{ "Max file locks    ", "Max file locks \nMax file locks    " },
		{ "Max realtime timeout      unlimited            unlimited            us        \n",
		  "Max realtime timeout      unlimited            unlimited            us        \n"
		  "Max realtime timeout      1 1\n" },
		{ "Max stack size ", "Max stack sizes" },
	};
	struct proc_limits l = { .soft = { 12345 } };

	CHECK_EQ(proc_parse_limits("", &l), -EINVAL);
	CHECK_EQ(proc_parse_limits("garbage\n", &l), -EINVAL);
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		char *text = replace_once(limits_text, edits[i][0], edits[i][1]);
		int r;

		CHECK(text != NULL);
		if (!text)
			continue;
		r = proc_parse_limits(text, &l);
		if (r != -EINVAL)
			fprintf(stderr, "accepted edit %zu\n", i);
		CHECK_EQ(r, -EINVAL);
		free(text);
	}
	CHECK_EQ(l.soft[0], 12345);
}

/* --- fdinfo ---------------------------------------------------------- */

TEST(fdinfo)
{
	struct proc_fdinfo fi;

	CHECK_EQ(proc_parse_fdinfo(fdinfo_text, &fi), 0);
	CHECK_EQ(fi.pos, 0);
	CHECK_EQ(fi.flags, 0100002);
	CHECK_EQ(fi.mnt_id, 24);
	CHECK_EQ(fi.ino, 3);

	CHECK_EQ(proc_parse_fdinfo(fdinfo_eventfd, &fi), 0);
	CHECK_EQ(fi.flags, 02004002);
	CHECK_EQ(fi.mnt_id, 15);
	CHECK_EQ(fi.ino, 1057);

	/* "pos:99" inside a tfd line is not the file's pos */
	CHECK_EQ(proc_parse_fdinfo(fdinfo_epoll, &fi), 0);
	CHECK_EQ(fi.pos, 0);
	CHECK_EQ(fi.ino, 1057);
	CHECK_EQ(fi.flags, 02);

	/* only pos and flags: mnt_id and ino stay zero */
	CHECK_EQ(proc_parse_fdinfo("pos:\t12345678901\nflags:\t02000000\n", &fi), 0);
	CHECK_EQ(fi.pos, 12345678901ll);
	CHECK_EQ(fi.flags, O_CLOEXEC);
	CHECK_EQ(fi.mnt_id, 0);
	CHECK_EQ(fi.ino, 0);

	/* an offset past INT64_MAX is printed as %lli */
	CHECK_EQ(proc_parse_fdinfo("pos:\t-4096\nflags:\t0\n", &fi), 0);
	CHECK(fi.pos == (uint64_t)-4096);
}

TEST(fdinfo_malformed)
{
	static const char *const bad[] = {
		"",
		"garbage",
		"pos:\t0\n",
		"flags:\t02\n",
		"pos:\t0\nflags:\t08\n",
		"pos:\t0\nflags:\t\n",
		"pos:\tx\nflags:\t02\n",
		"pos:\t0\nflags:\t040000000000\n",
		"pos:\t0\nflags:\t02\nmnt_id:\tabc\n",
		"pos:\t0\nflags:\t02\nino:\t-1\n",
		"pos:\t99999999999999999999\nflags:\t02\n",
	};
	struct proc_fdinfo fi = { .mnt_id = 999 };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = proc_parse_fdinfo(bad[i], &fi);

		if (r != -EINVAL)
			fprintf(stderr, "accepted: '%s'\n", bad[i]);
		CHECK_EQ(r, -EINVAL);
	}
	CHECK_EQ(fi.mnt_id, 999);
}

/* --- garbage: every prefix and random corruptions, under ASan -------- */

static void feed_all(const char *buf)
{
	struct proc_vmas vs;
	struct proc_vma v;
	struct proc_status st;
	struct proc_stat sa;
	struct proc_limits l;
	struct proc_fdinfo fi;

	if (proc_parse_smaps(buf, &vs) == 0)
		proc_vmas_free(&vs);
	if (proc_parse_maps_line(buf, &v) == 0)
		free(v.path);
	(void)!proc_parse_status(buf, &st);
	(void)!proc_parse_stat(buf, &sa);
	(void)!proc_parse_limits(buf, &l);
	(void)!proc_parse_fdinfo(buf, &fi);
}

TEST(garbage)
{
	static const char *const fixtures[] = {
		smaps_text,  maps_text,	   status_text,	 status_text2,	 stat_text,
		stat_tricky, stat_old,	   limits_text,	 fdinfo_text,	 fdinfo_epoll,
	};
	static const char noise[] = "\n\t :-()0123456789abcdefxkBdeleted\xff";
	uint32_t seed = 12345;

	for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++) {
		size_t len = strlen(fixtures[f]);

		/* every prefix, in a buffer of exactly that size */
		for (size_t n = 0; n <= len; n++) {
			char *buf = malloc(n + 1);

			if (!buf)
				continue;
			memcpy(buf, fixtures[f], n);
			buf[n] = '\0';
			feed_all(buf);
			free(buf);
		}
		/* random byte corruptions */
		for (int round = 0; round < 300; round++) {
			char *buf = malloc(len + 1);

			if (!buf)
				continue;
			memcpy(buf, fixtures[f], len + 1);
			for (int k = 0; k < 4 && len; k++) {
				seed = seed * 1103515245u + 12345u;
				size_t at = (seed >> 8) % len;

				seed = seed * 1103515245u + 12345u;
				buf[at] = noise[(seed >> 8) % (sizeof(noise) - 1)];
			}
			feed_all(buf);
			free(buf);
		}
	}
	/* reaching here under ASan/UBSan is the check */
	CHECK(1);
}

/* --- live: this very process ----------------------------------------- */

TEST(read_errors)
{
	char *text = (char *)"untouched";
	size_t len = 77;

	CHECK_EQ(proc_read(0, "no-such-file", &text, &len), -ENOENT);
	CHECK_EQ(proc_read(INT_MAX, "status", &text, &len), -ENOENT);
	CHECK_EQ(proc_read(-1, "status", &text, &len), -EINVAL);
	CHECK_EQ(proc_read(0, "", &text, &len), -EINVAL);
	CHECK_STR(text, "untouched");
	CHECK_EQ(len, 77);
}

TEST(live_smaps)
{
	int local = 1;
	char *text = NULL;
	size_t len = 0;
	struct proc_vmas vs = {};
	const struct proc_vma *v;
	void *anon, *file = MAP_FAILED;
	char path[] = "/tmp/ckpt proc (test).XXXXXX";
	struct stat sb;
	int fd;

	anon = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(anon != MAP_FAILED);
	if (anon == MAP_FAILED)
		return;
	memset(anon, 1, 2 * 4096); /* two of three pages resident */

	fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK_EQ(ftruncate(fd, 2 * 4096), 0);
		CHECK_EQ(fstat(fd, &sb), 0);
		file = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 4096);
		CHECK(file != MAP_FAILED);
		unlink(path);
		close(fd);
	}

	CHECK_EQ(proc_read(0, "smaps", &text, &len), 0);
	CHECK(text != NULL);
	CHECK(len > 4096); /* the buffer had to grow */
	CHECK_EQ(strlen(text), len);
	CHECK_EQ(proc_parse_smaps(text, &vs), 0);
	CHECK(vs.n > 5);

	v = find_vma(&vs, (uint64_t)(uintptr_t)&local);
	CHECK(v != NULL);
	if (v) {
		CHECK_STR(v->path, "[stack]");
		CHECK_EQ(v->prot, PROT_READ | PROT_WRITE);
		CHECK(v->vmflags & VMF_RD);
		CHECK(v->vmflags & VMF_WR);
		CHECK(v->vmflags & VMF_GD);
		CHECK(v->rss_kb > 0);
	}

	v = find_vma(&vs, (uint64_t)(uintptr_t)&test_live_smaps);
	CHECK(v != NULL);
	if (v) {
		CHECK(v->prot & PROT_EXEC);
		CHECK(v->vmflags & VMF_EX);
		CHECK(v->path[0] == '/');
		CHECK(v->ino != 0);
	}

	v = find_vma(&vs, (uint64_t)(uintptr_t)anon);
	CHECK(v != NULL);
	if (v) {
		CHECK(v->start <= (uint64_t)(uintptr_t)anon); /* may merge with a neighbour */
		CHECK(v->end >= (uint64_t)(uintptr_t)anon + 3 * 4096);
		CHECK_STR(v->path, "");
		CHECK(v->anon_kb >= 8);
		CHECK(v->rss_kb >= 8);
	}

	/* a deleted file with spaces in its name */
	if (file != MAP_FAILED) {
		v = find_vma(&vs, (uint64_t)(uintptr_t)file);
		CHECK(v != NULL);
		if (v) {
			CHECK_STR(v->path, path);
			CHECK(v->deleted);
			CHECK(v->shared);
			CHECK_EQ(v->prot, PROT_READ);
			CHECK_EQ(v->pgoff, 4096);
			CHECK_EQ(v->ino, sb.st_ino);
			CHECK_EQ(v->dev_major, major(sb.st_dev));
			CHECK_EQ(v->dev_minor, minor(sb.st_dev));
			CHECK(v->vmflags & VMF_SH);
			CHECK(v->vmflags & VMF_MS);
		}
	}

	/* sorted, non-overlapping */
	for (size_t i = 1; i < vs.n; i++)
		CHECK(vs.v[i - 1].end <= vs.v[i].start);

	proc_vmas_free(&vs);
	free(text);
	text = NULL;

	/* and plain maps gives the same ranges without flags */
	CHECK_EQ(proc_read(0, "maps", &text, &len), 0);
	CHECK_EQ(proc_parse_smaps(text, &vs), 0);
	v = find_vma(&vs, (uint64_t)(uintptr_t)&local);
	CHECK(v != NULL);
	if (v) {
		CHECK_STR(v->path, "[stack]");
		CHECK_EQ(v->vmflags, 0);
	}
	proc_vmas_free(&vs);
	free(text);
	munmap(anon, 3 * 4096);
	if (file != MAP_FAILED)
		munmap(file, 4096);
}

TEST(live_status)
{
	char *text = NULL;
	size_t len;
	struct proc_status st;
	gid_t groups[256];
	int ng;

	CHECK_EQ(proc_read(0, "status", &text, &len), 0);
	CHECK_EQ(proc_parse_status(text, &st), 0);
	CHECK_EQ(st.pid, getpid());
	CHECK_EQ(st.tgid, getpid());
	CHECK_EQ(st.ppid, getppid());
	CHECK_EQ(st.uid[0], getuid());
	CHECK_EQ(st.uid[1], geteuid());
	CHECK_EQ(st.gid[0], getgid());
	CHECK_EQ(st.gid[1], getegid());
	CHECK_EQ(st.state, 'R');
	CHECK(st.threads >= 1);
	CHECK(st.nspid_n >= 1);
	if (st.nspid_n >= 1)
		CHECK_EQ(st.nspid[st.nspid_n - 1], getpid());
	CHECK(st.nssid_n >= 1);
	if (st.nssid_n >= 1)
		CHECK_EQ(st.nssid[st.nssid_n - 1], getsid(0));
	ng = getgroups(256, groups);
	if (ng >= 0) {
		CHECK_EQ(st.ngroups, ng);
		for (int i = 0; i < ng && i < 256; i++)
			CHECK_EQ(st.groups[i], groups[i]);
	}
	{
		mode_t m = umask(0);

		umask(m);
		CHECK_EQ(st.umask, m);
	}
	free(text);
}

TEST(live_stat)
{
	char *text = NULL;
	size_t len;
	struct proc_stat st;
	int local = 0;

	CHECK_EQ(proc_read(0, "stat", &text, &len), 0);
	CHECK_EQ(proc_parse_stat(text, &st), 0);
	CHECK_EQ(st.pid, getpid());
	CHECK_EQ(st.ppid, getppid());
	CHECK_EQ(st.pgrp, getpgrp());
	CHECK_EQ(st.session, getsid(0));
	CHECK_EQ(st.state, 'R');
	CHECK(st.num_threads >= 1);
	CHECK(st.start_time > 0);
	/* the stack grows down from start_stack, past our local */
	CHECK(st.start_stack > (uint64_t)(uintptr_t)&local);
	CHECK(st.start_code <= (uint64_t)(uintptr_t)&test_live_stat);
	CHECK(st.end_code > (uint64_t)(uintptr_t)&test_live_stat);
	CHECK(st.arg_start < st.arg_end);
	CHECK(st.env_start <= st.env_end);
	CHECK(st.start_brk >= st.end_data);
	free(text);
}

TEST(live_limits)
{
	char *text = NULL;
	size_t len;
	struct proc_limits l;

	CHECK_EQ(proc_read(0, "limits", &text, &len), 0);
	CHECK_EQ(proc_parse_limits(text, &l), 0);
	for (int i = 0; i < PROC_NLIMITS; i++) {
		struct rlimit rl;

		CHECK_EQ(getrlimit(i, &rl), 0);
		if (l.soft[i] != rl.rlim_cur || l.hard[i] != rl.rlim_max)
			fprintf(stderr, "limit %d differs\n", i);
		CHECK(l.soft[i] == rl.rlim_cur);
		CHECK(l.hard[i] == rl.rlim_max);
	}
	free(text);
}

TEST(live_fdinfo)
{
	char *text = NULL, name[64];
	size_t len;
	struct proc_fdinfo fi;
	struct stat sb;
	int fd;

	/* fd 0, whatever it is, if it is open */
	if (fcntl(0, F_GETFD) >= 0) {
		int fl = fcntl(0, F_GETFL);

		CHECK_EQ(proc_read(0, "fdinfo/0", &text, &len), 0);
		CHECK_EQ(proc_parse_fdinfo(text, &fi), 0);
		CHECK_EQ(fi.flags & (O_ACCMODE | O_APPEND | O_NONBLOCK),
			 fl & (O_ACCMODE | O_APPEND | O_NONBLOCK));
		if (fstat(0, &sb) == 0)
			CHECK_EQ(fi.ino, sb.st_ino);
		free(text);
		text = NULL;
	}

	/* a file of our own with a known offset and flags */
	fd = memfd_create("test-proc", MFD_CLOEXEC);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK_EQ(write(fd, "hello world", 11), 11);
	CHECK_EQ(lseek(fd, 5, SEEK_SET), 5);
	snprintf(name, sizeof(name), "fdinfo/%d", fd);
	CHECK_EQ(proc_read(0, name, &text, &len), 0);
	CHECK_EQ(proc_parse_fdinfo(text, &fi), 0);
	CHECK_EQ(fi.pos, 5);
	CHECK(fi.flags & O_CLOEXEC);
	CHECK_EQ(fi.flags & O_ACCMODE, O_RDWR);
	CHECK_EQ(fstat(fd, &sb), 0);
	CHECK_EQ(fi.ino, sb.st_ino);
	free(text);
	close(fd);

	fd = open("/dev/null", O_WRONLY | O_APPEND | O_NONBLOCK);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	snprintf(name, sizeof(name), "fdinfo/%d", fd);
	CHECK_EQ(proc_read(0, name, &text, &len), 0);
	CHECK_EQ(proc_parse_fdinfo(text, &fi), 0);
	CHECK_EQ(fi.flags & O_ACCMODE, O_WRONLY);
	CHECK(fi.flags & O_APPEND);
	CHECK(fi.flags & O_NONBLOCK);
	CHECK(!(fi.flags & O_CLOEXEC));
	{
		struct statx stx;

		if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) == 0 &&
		    (stx.stx_mask & STATX_MNT_ID))
			CHECK_EQ(fi.mnt_id, stx.stx_mnt_id);
		CHECK(fi.mnt_id > 0);
	}
	free(text);
	close(fd);
}

TEST(live_other_pid)
{
	char *text = NULL;
	size_t len;
	struct proc_status st;

	/* by number rather than "self" */
	CHECK_EQ(proc_read(getpid(), "status", &text, &len), 0);
	CHECK_EQ(proc_parse_status(text, &st), 0);
	CHECK_EQ(st.pid, getpid());
	free(text);
}

/* proc_read_single (one read while it does not fill the buffer) gives
 * what proc_read (reads to end of file) gives: small fdinfo texts, one
 * with lock lines, and an epoll's of more than the first buffer (1 KiB). */
TEST(read_single)
{
	char tmpl[] = "/tmp/ckpt-test-proc-XXXXXX", name[32];
	int f = mkstemp(tmpl), ep = epoll_create1(EPOLL_CLOEXEC), ev[64];
	CHECK(f >= 0 && ep >= 0);
	unlink(tmpl);
	CHECK_EQ(flock(f, LOCK_EX), 0);
	for (int i = 0; i < 64; i++) {
		ev[i] = eventfd(0, EFD_CLOEXEC);
		struct epoll_event e = { .events = EPOLLIN, .data.u64 = (uint64_t)i };
		CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, ev[i], &e), 0);
	}
	int dir = open("/proc/self/fdinfo", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(dir >= 0);
	int fds[] = { 0, f, ep, ev[0] };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		char *a = NULL, *b = NULL;
		snprintf(name, sizeof(name), "fdinfo/%d", fds[i]);
		CHECK_EQ(proc_read(0, name, &a, NULL), 0);
		snprintf(name, sizeof(name), "%d", fds[i]);
		CHECK_EQ(proc_read_single(dir, name, &b), 0);
		CHECK_STR(a, b);
		if (fds[i] == f)
			CHECK(b && strstr(b, "\nlock:"));
		if (fds[i] == ep)
			CHECK(b && strlen(b) > 2048);
		free(a);
		free(b);
	}
	char *c = NULL;
	CHECK_EQ(proc_read_single(dir, "999999", &c), -ENOENT);
	CHECK(!c);
	close(dir);
	for (int i = 0; i < 64; i++)
		close(ev[i]);
	close(ep);
	close(f);
}

/* namespace links: this process by pid and as 0, its parent (the test
 * runner shares its namespaces), a pid that does not exist */
TEST(ns_links)
{
	struct stat a, b;
	CHECK_EQ(proc_ns_stat(getpid(), "net", &a), 0);
	CHECK_EQ(proc_ns_stat(0, "net", &b), 0);
	CHECK(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	CHECK(proc_ns_same(getpid(), 0, "mnt"));
	CHECK(proc_ns_same(getpid(), getppid(), "pid"));
	CHECK(proc_same_netns(getpid()));
	CHECK(!proc_same_netns(0));
	CHECK_EQ(proc_ns_stat(getpid(), "no_such_ns", &a), -ENOENT);
	CHECK(!proc_ns_same(getpid(), 0, "no_such_ns"));
	/* pid_max is at most 4194304: this one never exists */
	CHECK_EQ(proc_ns_stat(INT_MAX, "net", &a), -ENOENT);
	CHECK(!proc_ns_same(INT_MAX, 0, "net"));
}

int main(void)
{
	RUN(ns_links);
	RUN(mem_read_gone);
	RUN(read_records_children);
	RUN(maps_line);
	RUN(maps_line_malformed);
	RUN(smaps);
	RUN(smaps_all_flags);
	RUN(smaps_plain_maps);
	RUN(smaps_many);
	RUN(smaps_malformed);
	RUN(status);
	RUN(status_tricky);
	RUN(status_minimal_and_caps);
	RUN(status_malformed);
	RUN(stat);
	RUN(stat_tricky);
	RUN(stat_old_kernel);
	RUN(stat_malformed);
	RUN(limits);
	RUN(limits_loose);
	RUN(limits_malformed);
	RUN(fdinfo);
	RUN(fdinfo_malformed);
	RUN(garbage);
	RUN(read_errors);
	RUN(live_smaps);
	RUN(live_status);
	RUN(live_stat);
	RUN(live_limits);
	RUN(live_fdinfo);
	RUN(live_other_pid);
	RUN(read_single);
	return unit_done();
}
