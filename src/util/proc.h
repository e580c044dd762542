/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Parsers for /proc/PID files. Each parser takes the file's text, so it can
 * be tested without a process; proc_read() fetches the text. Parsers return
 * 0 or -EINVAL (text not in the expected form); they never log.
 */
#ifndef CKPT_PROC_H
#define CKPT_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads /proc/<pid>/<name> (pid 0: /proc/self) into a NUL-terminated
 * malloc'd buffer. */
int proc_read(pid_t pid, const char *name, char **ret_text, size_t *ret_len)
	__attribute__((warn_unused_result));

/* Reads name (relative to dirfd, which may be AT_FDCWD) of a /proc file the
 * kernel shows as one record (single_open: /proc/PID/fdinfo/FD, status...):
 * a read that does not fill the buffer had the whole text, so there is no
 * read to see its end (one system call less a file). NUL-terminated,
 * malloc'd. */
int proc_read_single(int dirfd, const char *name, char **ret_text)
	__attribute__((warn_unused_result));
/* Reads name (relative to dirfd) of a /proc seq_file of small records
 * (task/TID/children): a first read of under 1 KiB that comes back short
 * had the whole text (one system call less a file); a longer text is read
 * to its end. NUL-terminated, malloc'd. */
int proc_read_records(int dirfd, const char *name, char **ret_text)
	__attribute__((warn_unused_result));
/* The same for /proc/PID/NAME (pid > 0), a file of one record (status,
 * stat, task/TID/stat, cgroup, loginuid...), read into a buffer of 2 KiB
 * first; the text keeps no room unused. */
int proc_read_one(pid_t pid, const char *name, char **ret_text)
	__attribute__((warn_unused_result));

/* --- maps / smaps ---------------------------------------------------- */

/* VmFlags of smaps, one bit each */
enum {
	VMF_RD = 1u << 0, VMF_WR = 1u << 1, VMF_EX = 1u << 2, VMF_SH = 1u << 3,
	VMF_MR = 1u << 4, VMF_MW = 1u << 5, VMF_ME = 1u << 6, VMF_MS = 1u << 7,
	VMF_GD = 1u << 8, VMF_PF = 1u << 9, VMF_LO = 1u << 10, VMF_IO = 1u << 11,
	VMF_SR = 1u << 12, VMF_RR = 1u << 13, VMF_DC = 1u << 14, VMF_DE = 1u << 15,
	VMF_AC = 1u << 16, VMF_NR = 1u << 17, VMF_HT = 1u << 18, VMF_SF = 1u << 19,
	VMF_AR = 1u << 20, VMF_WF = 1u << 21, VMF_DD = 1u << 22, VMF_SD = 1u << 23,
	VMF_MM = 1u << 24, VMF_HG = 1u << 25, VMF_NH = 1u << 26, VMF_MG = 1u << 27,
	VMF_UM = 1u << 28, VMF_UW = 1u << 29, VMF_SS = 1u << 30, VMF_DP = 1u << 31,
};
/* Flags not listed above are collected as their two letters in
 * proc_vma.unknown_flags ("xx yy"). */

struct proc_vma {
	uint64_t start, end;    /* [start, end) */
	uint64_t pgoff;         /* file offset in bytes */
	uint32_t prot;          /* PROT_READ|PROT_WRITE|PROT_EXEC */
	bool shared;            /* 's' in the perms column */
	uint32_t dev_major, dev_minor;
	uint64_t ino;
	char *path;             /* malloc'd, "" for anonymous; "[heap]", "[vdso]"...;
				 * a trailing " (deleted)" is removed and
				 * deleted set */
	bool deleted;
	uint32_t vmflags;       /* VMF_*, only from smaps */
	char unknown_flags[32];
	uint64_t rss_kb, anon_kb, swap_kb; /* from smaps */
	uint64_t page_kb;       /* smaps' KernelPageSize (2048 for 2 MiB hugetlb) */
};

struct proc_vmas {
	struct proc_vma *v;
	size_t n;
};

/* One line of /proc/PID/maps. ret->path is malloc'd. */
int proc_parse_maps_line(const char *line, struct proc_vma *ret)
	__attribute__((warn_unused_result));
/* All of /proc/PID/smaps (or maps: then vmflags stay 0). */
int proc_parse_smaps(const char *text, struct proc_vmas *ret) __attribute__((warn_unused_result));
void proc_vmas_free(struct proc_vmas *v);

/* --- status ---------------------------------------------------------- */

struct proc_status {
	char name[64];
	char state;             /* 'R', 'S', 'T', 't', 'Z', ... */
	pid_t tgid, pid, ppid, tracer_pid;
	uint32_t umask;
	uint32_t uid[4], gid[4]; /* real, effective, saved, fs */
	uint32_t ngroups;        /* how many are in groups (at most 256) */
	uint32_t ngroups_total;  /* how many the task has: more are read by proc_status_groups */
	uint32_t groups[256];
	pid_t nspid[32];        /* NSpid: outermost first */
	uint32_t nspid_n;
	pid_t nspgid[32];       /* NSpgid */
	uint32_t nspgid_n;
	pid_t nssid[32];
	uint32_t nssid_n;
	uint32_t threads;
	uint64_t sig_pnd, shd_pnd, sig_blk, sig_ign, sig_cgt;
	uint64_t cap_inh, cap_prm, cap_eff, cap_bnd, cap_amb;
	int no_new_privs;
	int seccomp;            /* 0 off, 1 strict, 2 filter */
	int seccomp_filters;
};

int proc_parse_status(const char *text, struct proc_status *ret)
	__attribute__((warn_unused_result));
/* The supplementary groups of a status text, all of them where struct
 * proc_status keeps 256: the first cap to arr; how many there are, or
 * -errno (-ENOENT: no Groups line) */
long proc_status_groups(const char *text, uint32_t *arr, uint32_t cap)
	__attribute__((warn_unused_result));

/* --- stat ------------------------------------------------------------ */

struct proc_stat {
	pid_t pid;
	char comm[32];
	char state;
	pid_t ppid, pgrp, session;
	int tty_nr;
	pid_t tpgid;
	uint64_t flags;
	int64_t priority, nice, num_threads;
	uint64_t start_time;
	uint64_t start_code, end_code, start_stack;
	uint64_t start_data, end_data, start_brk;
	uint64_t arg_start, arg_end, env_start, env_end;
	int exit_signal;        /* sent to the parent when it exits */
	int exit_code;
};

/* Handles a comm with spaces and parentheses ("(a) b)"). */
int proc_parse_stat(const char *text, struct proc_stat *ret) __attribute__((warn_unused_result));

/* --- limits ---------------------------------------------------------- */

#define PROC_RLIM_INFINITY UINT64_MAX
#define PROC_NLIMITS 16
struct proc_limits {
	uint64_t soft[PROC_NLIMITS], hard[PROC_NLIMITS]; /* indexed by RLIMIT_* */
};

int proc_parse_limits(const char *text, struct proc_limits *ret)
	__attribute__((warn_unused_result));

/* --- fdinfo ---------------------------------------------------------- */

struct proc_fdinfo {
	uint64_t pos;
	uint32_t flags;         /* octal "flags:" field, O_CLOEXEC included */
	int mnt_id;
	uint64_t ino;
};

int proc_parse_fdinfo(const char *text, struct proc_fdinfo *ret)
	__attribute__((warn_unused_result));

/* --- who holds a file ------------------------------------------------ */

struct proc_holder {
	pid_t pid;
	int fd;
	uint32_t flags;         /* its fdinfo flags (O_ACCMODE...) */
	char comm[16];
};

/*
 * Scans /proc/PID/fd of every process for fds open on the file (dev, ino)
 * (a pipe, a FIFO: what stat() of the fd says), skipping the processes for
 * which skip(arg, pid) is true. Fills up to max holders in ret, and returns
 * how many were found (possibly more than max); processes that may not be
 * looked at are passed over.
 */
typedef bool (*proc_skip_fn)(void *arg, pid_t pid);
int proc_find_holders(uint64_t dev, uint64_t ino, proc_skip_fn skip, void *arg,
		      struct proc_holder *ret, size_t max);

/*
 * [off, off + len) (whole pages) of a running task's /proc/PID/mem (fd; -1
 * when the task is gone) into dst: each page that cannot be read (unmapped
 * since) is zeros, every other page is read, also after such a hole. The
 * number of bytes of zeros.
 */
uint64_t proc_mem_read_gone(int fd, uint64_t off, uint64_t len, uint8_t *dst);

struct stat;
/* stat of /proc/PID/ns/NAME (pid 0: /proc/self) into st: 0, or -errno. */
int proc_ns_stat(pid_t pid, const char *name, struct stat *st);
/* Are a and b (0: this process) in the same namespace NAME? false when
 * either cannot be read. */
bool proc_ns_same(pid_t a, pid_t b, const char *name);
/* Is pid in ckpt's own network namespace? */
bool proc_same_netns(pid_t pid);

/* Is process group pgrp (as ckpt's pid namespace has it) orphaned? (Also
 * when /proc cannot tell.) */
bool proc_pgrp_orphaned(pid_t pgrp);

#endif
