/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Identity and prctl state of a task: comm, personality,
 * clear_child_tid, the robust futex list, rseq, subreaper, THP, timer slack;
 * the TSC mode, memory-deny-write-execute and KSM for the whole process,
 * the machine-check kill policy and the speculation controls set by prctl;
 * the NUMA memory policy of each thread (get_mempolicy, set_mempolicy) and
 * of each vma with one of its own (numa_maps shows it; mbind, by the
 * leader after mm). Refused: a vma policy numa_maps shows in a form not
 * known, x86 shadow stacks and linear address masking (status shows them).
 * Each is read by an injected prctl GET and set again by its SET, after
 * mm (memory-deny-write-execute would forbid an executable mapping made
 * after it). Refused too: a task that traces a process outside the tree
 * (strace -p, gdb -p): no ptrace relation is saved (a task of the tree
 * that is traced cannot be seized: checkpoint.c says by whom).
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/mempolicy.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core.pb-c.h"
#include "core/ctx.h"
#include "util/cleanup.h"
#include "util/kernel.h"

enum { TASK_ENTRY = REC_TYPE(KID_task, 1) };

#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif
struct rseq_config {
	uint64_t ptr;
	uint32_t size, sig, flags, pad;
};

struct task_probes;

struct task_ckpt {
	TaskEntry e;
	RseqEntry rseq;
	char comm[32];
	uint64_t nodes[1024 / 64];
	/* the vmas' policies of their own (mbind), e.vma_policies points
	 * into vpol; vnodes[i] the node mask of vpol[i] */
	VmaPolicyEntry *vpol;
	VmaPolicyEntry **vpolp;
	uint64_t (*vnodes)[1024 / 64];
	/* from probe to collect: the calls asked, and /proc/PID/status */
	struct task_probes *pb;
	char *status;
	/* PR_SCHED_CORE_GET failed with EINVAL or ENODEV (a kernel without
	 * core scheduling, a machine without SMT): not asked again for the
	 * process's threads */
	bool no_core_sched;
	/* a process that may trace another (its probe's waitid, below) */
	bool may_trace;
};

#ifndef ARCH_GET_CPUID
#define ARCH_GET_CPUID 0x1011
#endif

#ifndef PR_GET_MDWE
#define PR_SET_MDWE 65
#define PR_GET_MDWE 66
#endif
#ifndef PR_GET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#define PR_GET_MEMORY_MERGE 68
#endif
#ifndef PR_SPEC_L1D_FLUSH
#define PR_SPEC_L1D_FLUSH 2
#endif
#define SPEC_STATE (PR_SPEC_ENABLE | PR_SPEC_DISABLE | PR_SPEC_FORCE_DISABLE | PR_SPEC_DISABLE_NOEXEC)

/* A speculation control set by prctl (v: PR_GET_SPECULATION_CTRL's
 * result): its state, or 0 when it is the default or not a prctl's to set. */
static uint32_t spec_state(long v)
{
	if (v < 0 || !(v & PR_SPEC_PRCTL) || !(v & (SPEC_STATE & ~PR_SPEC_ENABLE)))
		return 0;
	return (uint32_t)v & SPEC_STATE;
}

#define NODE_BITS 1024

struct mempolicy_buf {
	int mode;
	uint64_t nodes[NODE_BITS / 64];
};

/* The policies' names in numa_maps, by mode (the kernel's policy_modes) */
static const char *const mpol_names[] = { "default", "prefer", "bind", "interleave", "local",
					  "prefer (many)", "weighted interleave" };

/* A policy as numa_maps shows it (the kernel's mpol_to_str): "default",
 * "bind:0-1", "interleave=static:0"... */
static void mpol_str(int mode, const uint64_t *nodes, char *buf, size_t len)
{
	int m = mode & ~(MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES | MPOL_F_NUMA_BALANCING);
	size_t o = (size_t)snprintf(buf, len, "%s",
				    m >= 0 && m < (int)ARRAY_SIZE(mpol_names) ? mpol_names[m] : "?");
	if (m == MPOL_DEFAULT || m == MPOL_LOCAL)
		return;
	if (mode & (MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES))
		o += (size_t)snprintf(buf + o, len - o, "=%s",
				      mode & MPOL_F_STATIC_NODES ? "static" : "relative");
	char sep = ':';
	for (int i = 0; i < NODE_BITS && o < len; i++) {
		if (!(nodes[i / 64] >> (i % 64) & 1))
			continue;
		int j = i;
		while (j + 1 < NODE_BITS && nodes[(j + 1) / 64] >> ((j + 1) % 64) & 1)
			j++;
		o += (size_t)(j > i ? snprintf(buf + o, len - o, "%c%d-%d", sep, i, j)
				    : snprintf(buf + o, len - o, "%c%d", sep, i));
		sep = ',';
		i = j;
	}
}

/*
 * The inverse of mpol_str: a policy of numa_maps ("local", "bind:0-1",
 * "interleave=static:0,2", "bind=relative|balancing:1", "prefer (many):0"),
 * up to the space after it, into a mode with its flags and a node mask
 * (nodes zeroed first). -EINVAL for anything else: refused as before.
 */
static int mpol_parse(const char *s, int *ret_mode, uint64_t *nodes)
{
	static const struct {
		const char *name;
		int flag;
	} flags[] = { { "static", MPOL_F_STATIC_NODES },
		      { "relative", MPOL_F_RELATIVE_NODES },
		      { "balancing", MPOL_F_NUMA_BALANCING } };
	int mode = -1;
	size_t n = 0;
	/* the longest name that matches: "prefer (many)" before "prefer" */
	for (int m = 0; m < (int)ARRAY_SIZE(mpol_names); m++) {
		size_t l = strlen(mpol_names[m]);
		if (l > n && !strncmp(s, mpol_names[m], l) && strchr(":= \n", s[l])) {
			mode = m;
			n = l;
		}
	}
	if (mode <= MPOL_DEFAULT)
		return -EINVAL;
	s += n;
	memset(nodes, 0, NODE_BITS / 8);
	if (*s == '=') {
		do {
			size_t i = 0, l = 0;
			s++;
			while (i < ARRAY_SIZE(flags) &&
			       (l = strlen(flags[i].name), strncmp(s, flags[i].name, l) ||
							       !strchr("|: \n", s[l])))
				i++;
			if (i == ARRAY_SIZE(flags))
				return -EINVAL;
			mode |= flags[i].flag;
			s += l;
		} while (*s == '|');
	}
	if (*s == ':') {
		do {
			char *end;
			unsigned long a = strtoul(s + 1, &end, 10), b = a;
			if (end == s + 1)
				return -EINVAL;
			if (*end == '-')
				b = strtoul(end + 1, &end, 10);
			if (b < a || b >= NODE_BITS)
				return -EINVAL;
			for (unsigned long i = a; i <= b; i++)
				nodes[i / 64] |= 1ull << (i % 64);
			s = end;
		} while (*s == ',');
	}
	if (*s != ' ' && *s != '\n' && *s)
		return -EINVAL;
	*ret_mode = mode;
	return 0;
}

/*
 * Everything task_collect asks the task itself, in the task's probes (one
 * batch with the other kinds'): the calls write their outputs into an area
 * of the scratch area at the offsets of struct probe_area (zeroed first),
 * read back at once.
 */
enum probe { P_TID, P_ROBUST, P_SUBREAPER, P_THP, P_SLACK, P_TSC, P_MCE, P_SPEC,
	     P_MDWE = P_SPEC + 3, P_MERGE, P_MEMPOLICY, P_IOFLUSH, P_CPUID, P_PERSONALITY, P_TRACES,
	     P_N };

#define PROBE_AREA_OFF 0
struct probe_area {
	uint64_t tid, robust, robust_len, subreaper, tsc;
	uint64_t pad[(1024 - PROBE_AREA_OFF) / 8 - 5];
	struct mempolicy_buf mp; /* at 1024 */
};

struct task_probes {
	struct puppet_call c[P_N];
	int at[P_N]; /* index in c, -1 if not asked */
	size_t n;
	int first;     /* the index of c[0] in the task's probes */
	uint64_t area; /* where out is, in the task */
	struct probe_area out;
	bool out_ok; /* out was read back */
	/* numa_maps not read ahead: each vma's own policy, by
	 * get_mempolicy(MPOL_F_ADDR) (calls vm_first.., modes at vm_area) */
	size_t nvm;
	int vm_first;
	uint64_t vm_area;
};

static void probe_add(struct task_probes *b, enum probe which, struct puppet_call call)
{
	b->at[which] = (int)b->n;
	b->c[b->n++] = call;
}

static long probe_ret(const struct task_probes *b, enum probe which)
{
	return b->at[which] < 0 ? -ENOENT : b->c[b->at[which]].ret;
}

/* A probe that wrote its output into the area, and succeeded. */
static bool probe_out(const struct task_probes *b, enum probe which)
{
	return b->out_ok && probe_ret(b, which) == 0;
}

#define AREA(f) (area + offsetof(struct probe_area, f))

/* Is the speculation control whose /proc/PID/status line is field one a
 * prctl may have set? (below) */
static bool spec_per_task(const char *status, const char *field);

static const int spec_which[] = { PR_SPEC_STORE_BYPASS, PR_SPEC_INDIRECT_BRANCH,
				  PR_SPEC_L1D_FLUSH };

/* At most this many vmas have their policies asked in the probes (more:
 * numa_maps is read; a batch of the probes runs 96 calls at a stop) */
#define VMA_POLICIES_MAX 256
#define USER_END 0x800000000000ull /* [vsyscall] is above: no policy */

/* Each vma's policy of its own (MPOL_DEFAULT: none), for collect_numa,
 * where numa_maps was not read ahead (a large process: it walks every
 * page). Nothing asked if there is no room: numa_maps is read then. */
static int add_vma_policies(struct task *t, struct task_probes *b)
{
	size_t n = t->vmas.n;
	uint64_t area = n && n <= VMA_POLICIES_MAX ? task_probe_area(t, n * sizeof(int)) : 0;
	if (!area)
		return 0;
	for (size_t i = 0; i < n; i++) {
		const struct proc_vma *v = &t->vmas.v[i];
		/* above user space: asked of the first vma again, never refused */
		uint64_t at_addr = v->start < USER_END ? v->start : t->vmas.v[0].start;
		int at = task_probe_call(t, PUPPET_CALL(SYS_get_mempolicy, area + i * sizeof(int),
							0, 0, at_addr, MPOL_F_ADDR));
		if (at < 0)
			return at;
		if (i == 0)
			b->vm_first = at;
	}
	b->nvm = n;
	b->vm_area = area;
	return 0;
}

/* Did the probes find that no vma has a policy of its own? */
static bool vmas_without_policy(const struct task *t, const struct task_probes *b)
{
	size_t n = b->nvm == t->vmas.n ? b->nvm : 0;
	const int *mode = n ? task_probe_out(t, b->vm_area, n * sizeof(int)) : NULL;
	for (size_t i = 0; mode && i < n; i++)
		if (task_probe_ret(t, b->vm_first + (int)i) != 0 || mode[i] != MPOL_DEFAULT)
			return false;
	return mode != NULL;
}

static int add_probes(struct task *t, const char *status, struct task_probes *b)
{
	const char *field[] = { "\nSpeculation_Store_Bypass:", "\nSpeculationIndirectBranch:",
				NULL };

	memset(b, 0, sizeof(*b));
	for (int i = 0; i < P_N; i++)
		b->at[i] = -1;
	uint64_t area = b->area = task_probe_area(t, sizeof(b->out));
	if (!area || task_probe_zero(t, area, sizeof(b->out)) < 0)
		return -EFAULT;
	probe_add(b, P_TID, PUPPET_CALL(SYS_prctl, PR_GET_TID_ADDRESS, AREA(tid)));
	/* get_robust_list(0, &head, &len): two outputs */
	probe_add(b, P_ROBUST, PUPPET_CALL(SYS_get_robust_list, 0, AREA(robust), AREA(robust_len)));
	probe_add(b, P_SLACK, PUPPET_CALL(SYS_prctl, PR_GET_TIMERSLACK, 0, 0, 0, 0));
	probe_add(b, P_TSC, PUPPET_CALL(SYS_prctl, PR_GET_TSC, AREA(tsc)));
	probe_add(b, P_MCE, PUPPET_CALL(SYS_prctl, PR_MCE_KILL_GET, 0, 0, 0, 0));
	for (size_t i = 0; i < ARRAY_SIZE(spec_which); i++)
		if (!field[i] || spec_per_task(status, field[i]))
			probe_add(b, P_SPEC + i, PUPPET_CALL(SYS_prctl, PR_GET_SPECULATION_CTRL,
							     spec_which[i], 0, 0, 0));
	/* these belong to the process (its signal_struct or its mm): asked of
	 * its leader only, which sets them again for all (a thread's were two
	 * calls more in each of a thousand threads' batches) */
	if (!t->leader) {
		probe_add(b, P_SUBREAPER,
			  PUPPET_CALL(SYS_prctl, PR_GET_CHILD_SUBREAPER, AREA(subreaper)));
		probe_add(b, P_THP, PUPPET_CALL(SYS_prctl, PR_GET_THP_DISABLE, 0, 0, 0, 0));
		probe_add(b, P_MDWE, PUPPET_CALL(SYS_prctl, PR_GET_MDWE, 0, 0, 0, 0));
		probe_add(b, P_MERGE, PUPPET_CALL(SYS_prctl, PR_GET_MEMORY_MERGE, 0, 0, 0, 0));
		/* ECHILD: no tracee in any of its threads (a tracee is always
		 * eligible; a child forked with SIGCHLD, any child of the
		 * tree's, is not with __WCLONE); WNOWAIT, WNOHANG: nothing
		 * taken, nothing waited for (task_collect_end) */
		probe_add(b, P_TRACES,
			  PUPPET_CALL(SYS_waitid, P_ALL, 0, 0,
				      WEXITED | WSTOPPED | WCONTINUED | WNOHANG | WNOWAIT | __WCLONE,
				      0));
	}
	probe_add(b, P_MEMPOLICY, PUPPET_CALL(SYS_get_mempolicy, AREA(mp.mode), AREA(mp.nodes),
					      NODE_BITS, 0, 0));
	/* not saved: refused when set (refuse_unsaved) */
	probe_add(b, P_IOFLUSH, PUPPET_CALL(SYS_prctl, PR_GET_IO_FLUSHER, 0, 0, 0, 0));
	probe_add(b, P_CPUID, PUPPET_CALL(SYS_arch_prctl, ARCH_GET_CPUID, 0));
	/* personality(0xffffffff) only reads it: no /proc/PID/personality read
	 * of each thread */
	probe_add(b, P_PERSONALITY, PUPPET_CALL(SYS_personality, 0xffffffff));
	b->first = -1;
	for (size_t i = 0; i < b->n; i++) {
		int at = task_probe_call(t, b->c[i]);
		if (at < 0)
			return at;
		if (i == 0)
			b->first = at;
	}
	return t->leader || t->numa_text ? 0 : add_vma_policies(t, b);
}

static int task_probe(struct ckpt_ctx *ctx, struct task *t)
{
	struct task_ckpt *k = task_state(t, KIND_task, sizeof(*k));
	(void)ctx;
	if (!k)
		return -ENOMEM;
	/* read a moment ago by ckpt (step "collect"), or now */
	k->status = TAKE_PTR(t->status_text);
	if (!k->status && proc_read_one(t->pid, "status", &k->status) < 0)
		k->status = NULL;
	k->pb = malloc(sizeof(*k->pb));
	if (!k->pb)
		return -ENOMEM;
	if (add_probes(t, k->status, k->pb) < 0) {
		k->pb->n = 0; /* none asked: collect finds no result */
		for (int i = 0; i < P_N; i++)
			k->pb->at[i] = -1;
	}
	return 0;
}

/* The results of the probes, after they ran; < 0 if they could not run. */
static int probe_results(struct task *t, struct task_probes *b)
{
	for (size_t i = 0; i < b->n; i++)
		b->c[i].ret = task_probe_ret(t, b->first + (int)i);
	const void *out = b->n ? task_probe_out(t, b->area, sizeof(b->out)) : NULL;
	if (out)
		memcpy(&b->out, out, sizeof(b->out));
	b->out_ok = out != NULL;
	long r = b->n ? b->c[0].ret : 0;
	return r == -EPIPE || r == -ESRCH ? (int)r : 0;
}

static void task_free_state(void *state)
{
	struct task_ckpt *k = state;
	if (k) {
		free(k->pb);
		free(k->status);
		free(k->vpol);
		free(k->vpolp);
		free(k->vnodes);
		free(k);
	}
}

/*
 * The policy of its own (numa_maps text pol) of the vma at start, saved in
 * k->e.vma_policies: OpenBLAS mbinds its buffers "local" (MPOL_PREFERRED
 * without nodes), and numpy's every process has them. -EINVAL if the vma
 * or the policy is not one ckpt knows.
 */
static int add_vma_policy(const struct task *t, struct task_ckpt *k, uint64_t start,
			  const char *pol)
{
	const struct proc_vma *v = NULL;
	for (size_t i = 0; i < t->vmas.n && !v; i++)
		if (t->vmas.v[i].start == start)
			v = &t->vmas.v[i];
	if (!v || v->start >= USER_END)
		return -EINVAL;
	size_t n = k->e.n_vma_policies;
	if (!k->vpol) {
		/* at most one a vma */
		k->vpol = calloc(t->vmas.n, sizeof(*k->vpol));
		k->vpolp = calloc(t->vmas.n, sizeof(*k->vpolp));
		k->vnodes = calloc(t->vmas.n, sizeof(*k->vnodes));
		if (!k->vpol || !k->vpolp || !k->vnodes)
			return -ENOMEM;
	}
	if (n >= t->vmas.n)
		return -EINVAL;
	int mode;
	if (mpol_parse(pol, &mode, k->vnodes[n]) < 0)
		return -EINVAL;
	VmaPolicyEntry *p = &k->vpol[n];
	vma_policy_entry__init(p);
	p->start = v->start;
	p->end = v->end;
	p->mode = (uint32_t)mode;
	if ((mode & ~MPOL_MODE_FLAGS) != MPOL_LOCAL) {
		p->has_nodes = true;
		p->nodes.data = (uint8_t *)k->vnodes[n];
		p->nodes.len = sizeof(k->vnodes[n]);
	}
	k->vpolp[n] = p;
	k->e.vma_policies = k->vpolp;
	k->e.n_vma_policies = n + 1;
	return 0;
}

/* The thread's NUMA policy (get_mempolicy, in the probes); vma policies
 * (numa_maps) and the x86 features ckpt cannot restore are refused. */
static int collect_numa(struct ckpt_ctx *ctx, struct task *t, struct task_ckpt *k,
			const char *status, const struct task_probes *pb)
{
	struct mempolicy_buf b = pb->out.mp;
	if (probe_out(pb, P_MEMPOLICY) && b.mode != MPOL_DEFAULT) {
		k->e.has_mempolicy_mode = k->e.has_mempolicy_nodes = true;
		k->e.mempolicy_mode = (uint32_t)b.mode;
		memcpy(k->nodes, b.nodes, sizeof(k->nodes));
		k->e.mempolicy_nodes.data = (uint8_t *)k->nodes;
		k->e.mempolicy_nodes.len = sizeof(k->nodes);
	}
	_cleanup_free_ char *numa = NULL;
	if (status) {
		const char *f = strstr(status, "\nx86_Thread_features:");
		if (f && f[22 + strspn(f + 22, " \t")] != '\n')
			return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d: x86 thread features (%.*s) "
					"are on (shadow stack): not supported yet", t->pid,
					(int)strcspn(f + 22, "\n"), f + 22);
		const char *u = strstr(status, "\nuntag_mask:");
		if (u && strtoull(u + 12, NULL, 16) != UINT64_MAX)
			return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d: linear address masking "
					"(LAM) is on: not supported yet", t->pid);
	}
	numa = TAKE_PTR(t->numa_text); /* read ahead (checkpoint.c, snapshot_read) */
	if (t->leader)
		return 0;
	/* not read ahead: the probes asked each vma; if one has a policy of
	 * its own (or a probe failed), numa_maps says which and what */
	if (!numa && vmas_without_policy(t, pb))
		return 0;
	if (!numa && proc_read(t->pid, "numa_maps", &numa, NULL) < 0)
		return 0;
	/* a vma without a policy of its own shows the task's */
	char own[256];
	mpol_str(b.mode, b.nodes, own, sizeof(own));
	size_t n = strlen(own);
	for (char *l = numa; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		char *pol = strchr(l, ' ');
		if (pol && (strncmp(pol + 1, own, n) || (pol[1 + n] != ' ' && pol[1 + n] != '\n'))) {
			int r = add_vma_policy(t, k, strtoull(l, NULL, 16), pol + 1);
			if (r == -ENOMEM)
				return r;
			if (r < 0)
				return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d vma %.*s: a memory "
						"policy of its own (mbind: %.*s) is not supported yet",
						t->pid, (int)(pol - l), l,
						(int)strcspn(pol + 1, " \n"), pol + 1);
		}
	}
	return 0;
}

/*
 * Per-thread settings ckpt does not save, refused when they differ from a
 * fresh thread's: syscall user dispatch (PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG),
 * a core-scheduling cookie (PR_SCHED_CORE_GET), PR_SET_IO_FLUSHER and CPUID
 * faulting (ARCH_SET_CPUID 0), these two asked in the probes.
 */
static int refuse_unsaved(struct ckpt_ctx *ctx, struct task *t, const struct task_probes *pb)
{
	struct {
		uint64_t mode, offset, len, selector;
	} sud = { 0 };
	uint64_t cookie = 0;
	const char *what = NULL;
	const struct task_ckpt *lk = t->leader ? t->leader->kstate[KIND_task] : NULL;
	struct task_ckpt *k = t->kstate[KIND_task];
	int core = -1;

	if (!(lk && lk->no_core_sched)) {
		core = prctl(PR_SCHED_CORE, PR_SCHED_CORE_GET, t->pid, 0 /* PIDTYPE_PID */,
			     (unsigned long)&cookie);
		if (core < 0 && (errno == EINVAL || errno == ENODEV) && k)
			k->no_core_sched = true;
	}
	if (puppet_sud_config(&t->pup, &sud, sizeof(sud)) > 0 && sud.mode)
		what = "syscall user dispatch (PR_SET_SYSCALL_USER_DISPATCH) is on";
	else if (core == 0 && cookie)
		what = "it has a core-scheduling cookie (PR_SCHED_CORE), which cannot be made "
		       "again with its value";
	else if (probe_ret(pb, P_IOFLUSH) == 1)
		what = "it is an I/O flusher (PR_SET_IO_FLUSHER)";
	else if (probe_ret(pb, P_CPUID) == 0)
		what = "CPUID faulting is on (ARCH_SET_CPUID 0)";
	return what ? log_fail(&ctx->log, -EOPNOTSUPP, "pid %d: %s: not supported yet", t->pid,
			       what)
		    : 0;
}

/*
 * Is the speculation control whose /proc/PID/status line is field one a
 * prctl may have set? "thread ..." (store bypass) or "conditional ..."
 * (indirect branch) say so; anything else ("vulnerable", "not vulnerable",
 * "always enabled"...) is the system's, and costs no injected call. A
 * kernel without the line is asked.
 */
static bool spec_per_task(const char *status, const char *field)
{
	const char *f = status ? strstr(status, field) : NULL;
	if (!f)
		return true;
	f += strlen(field);
	f += strspn(f, " \t");
	return !strncmp(f, "thread", 6) || !strncmp(f, "conditional", 11);
}

static void collect_prctls(struct task *t, TaskEntry *e, const struct task_probes *pb)
{
	if (probe_out(pb, P_TSC) && (int)pb->out.tsc == PR_TSC_SIGSEGV) {
		e->has_tsc = true;
		e->tsc = PR_TSC_SIGSEGV;
	}
	long mce = probe_ret(pb, P_MCE);
	if (mce == PR_MCE_KILL_EARLY || mce == PR_MCE_KILL_LATE) {
		e->has_mce_kill = true;
		e->mce_kill = (uint32_t)mce;
	}
	uint32_t *spec[] = { &e->spec_store_bypass, &e->spec_indirect_branch, &e->spec_l1d_flush };
	protobuf_c_boolean *has[] = { &e->has_spec_store_bypass, &e->has_spec_indirect_branch,
				      &e->has_spec_l1d_flush };
	for (size_t i = 0; i < ARRAY_SIZE(spec_which); i++)
		if (pb->at[P_SPEC + i] >= 0)
			*has[i] = (*spec[i] = spec_state(probe_ret(pb, P_SPEC + i))) != 0;
	if (t->leader) /* the rest belong to the process */
		return;
	long mdwe = probe_ret(pb, P_MDWE);
	if (mdwe > 0) {
		e->has_mdwe = true;
		e->mdwe = (uint32_t)mdwe;
	}
	if (probe_ret(pb, P_MERGE) == 1)
		e->has_memory_merge = e->memory_merge = true;
}

static int task_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct task_ckpt *k = task_state(t, KIND_task, sizeof(*k));
	char *text = NULL;
	int r;

	if (!k)
		return -ENOMEM;
	task_entry__init(&k->e);
	k->e.pid = t->vpid;
	k->e.ppid = t->vppid;
	k->e.pgid = t->vpgid;
	k->e.sid = t->vsid;
	snprintf(k->comm, sizeof(k->comm), "%s", t->stat.comm);
	k->e.comm = k->comm;
	/* a SIGSTOP not acted on yet stops it as soon as it runs */
	uint64_t stop = 1ull << (SIGSTOP - 1);
	if (t->pup.group_stopped || t->stat.state == 'T' ||
	    ((t->status.shd_pnd | t->status.sig_pnd) & stop)) {
		k->e.has_stopped = true;
		k->e.stopped = true;
	}
	/* a stop by ^Z or a background read (SIGTSTP, SIGTTIN, SIGTTOU) is
	 * what its parent's waitpid and a shell's job table tell apart */
	if (t->pup.group_stopped && t->pup.group_stopped != SIGSTOP) {
		k->e.has_stop_signal = true;
		k->e.stop_signal = t->pup.group_stopped;
	}

	_cleanup_free_ char *status = TAKE_PTR(k->status);
	_cleanup_free_ struct task_probes *pbp = TAKE_PTR(k->pb);
	if (!pbp)
		return -ENOMEM;
	struct task_probes pb = *pbp;
	r = probe_results(t, &pb);
	if (r == -EPIPE || r == -ESRCH)
		return log_fail(&ctx->log, r, "pid %d: cannot inject calls: %s", t->pid,
				strerror(-r));
	long pers = probe_ret(&pb, P_PERSONALITY);
	if (pers < 0) {
		r = proc_read(t->pid, "personality", &text, NULL);
		if (r < 0)
			return log_fail(&ctx->log, r, "pid %d: cannot read personality", t->pid);
		pers = (long)strtoul(text, NULL, 16);
		free(text);
	}
	k->e.has_personality = true;
	k->e.personality = (uint32_t)pers;
	if (probe_out(&pb, P_TID)) {
		k->e.has_tid_address = true;
		k->e.tid_address = pb.out.tid;
	}
	if (probe_out(&pb, P_ROBUST)) {
		k->e.has_robust_list = k->e.has_robust_list_len = true;
		k->e.robust_list = pb.out.robust;
		k->e.robust_list_len = pb.out.robust_len;
	}
	if (probe_out(&pb, P_SUBREAPER)) {
		k->e.has_child_subreaper = true;
		k->e.child_subreaper = (int)pb.out.subreaper != 0;
	}
	long thp = probe_ret(&pb, P_THP);
	if (thp >= 0) {
		k->e.has_thp_disable = true;
		k->e.thp_disable = (uint32_t)thp;
	}
	long slack = probe_ret(&pb, P_SLACK);
	if (slack >= 0) {
		k->e.has_timer_slack_ns = true;
		k->e.timer_slack_ns = (uint64_t)slack;
	}
	k->may_trace = !t->leader && probe_ret(&pb, P_TRACES) != -ECHILD;
	collect_prctls(t, &k->e, &pb);
	r = refuse_unsaved(ctx, t, &pb);
	if (r >= 0)
		r = collect_numa(ctx, t, k, status, &pb);
	if (r < 0)
		return r;

	struct rseq_config rc = { 0 };
	if (puppet_get_rseq(&t->pup, &rc, sizeof(rc)) > 0 && rc.ptr) {
		rseq_entry__init(&k->rseq);
		k->rseq.ptr = rc.ptr;
		k->rseq.len = rc.size;
		k->rseq.sig = rc.sig;
		k->rseq.has_flags = true;
		k->rseq.flags = rc.flags;
		k->e.rseq = &k->rseq;
	}
	return 0;
}

static int task_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct task_ckpt *k = t->kstate[KIND_task];
	return ctx_write_msg(ctx, TASK_ENTRY, &k->e.base);
}

static int task_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	TaskEntry *e = rctx_load_one(ctx, t, rec, KIND_task, TASK_ENTRY, &task_entry__descriptor);
	if (!e)
		return -EINVAL;
	if ((pid_t)e->pid != t->pid)
		return log_fail(&ctx->log, -EINVAL, "record %u: task entry of pid %u inside pid %d",
				rec->index, e->pid, t->pid);
	return 0;
}

/* Every task and thread has one; one in a job-control stop is released stopped. */
/*
 * A policy's node mask (len bytes of it) against the nodes memory may come
 * from here (allowed: ckpt's cpuset's, of nodes with memory): the kernel
 * keeps only the nodes of the mask that are allowed, and fails the call
 * (EINVAL) when none is, which was at "task state", the original gone; so
 * that is refused now, at "check", and a mask that loses nodes is said.
 * A relative mask (MPOL_F_RELATIVE_NODES) is folded onto the allowed nodes:
 * never empty. what: "its memory policy", "the policy of its memory at ...".
 */
static int check_nodes(struct rst_ctx *ctx, const struct rst_task *t, const char *what, int mode,
		       const uint8_t *data, size_t len, const uint64_t *allowed)
{
	uint64_t nodes[NODE_BITS / 64] = { 0 };
	memcpy(nodes, data, MIN(len, sizeof(nodes)));
	bool any = false, all = true, some = false;
	for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
		any |= nodes[i] != 0;
		some |= (nodes[i] & allowed[i]) != 0;
		all &= (nodes[i] & ~allowed[i]) == 0;
	}
	if (!any || all || (mode & MPOL_F_RELATIVE_NODES))
		return 0;
	char pol[160], here[160];
	mpol_str(mode, nodes, pol, sizeof(pol));
	mpol_str(MPOL_BIND, allowed, here, sizeof(here));
	const char *has = strchr(here, ':') ? strchr(here, ':') + 1 : "none";
	if (!some)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: %s is %s, which names only NUMA nodes that this machine "
				"does not have or that ckpt's cpuset does not allow (nodes with "
				"memory here: %s)",
				t->pid, what, pol, has);
	log_warn(&ctx->log, "pid %d: %s is %s, which names NUMA nodes this machine does not "
		 "have; it keeps only those it has (%s)", t->pid, what, pol, has);
	return 0;
}

/* Every node mask of t's policies (its own, its vmas') against this
 * machine's nodes, before anything is made. */
static int check_policies(struct rst_ctx *ctx, const struct rst_task *t, const TaskEntry *e)
{
	bool nodes = e->has_mempolicy_nodes && e->mempolicy_nodes.len;
	for (size_t i = 0; i < e->n_vma_policies && !nodes; i++)
		nodes = e->vma_policies[i]->has_nodes && e->vma_policies[i]->nodes.len;
	if (!nodes)
		return 0;
	uint64_t allowed[NODE_BITS / 64] = { 0 };
	if (syscall(SYS_get_mempolicy, NULL, allowed, NODE_BITS, NULL, MPOL_F_MEMS_ALLOWED) < 0)
		return 0; /* no NUMA here: the kernel has no policy to refuse */
	int r = 0;
	if (e->has_mempolicy_mode && e->has_mempolicy_nodes)
		r = check_nodes(ctx, t, "its memory policy", (int)e->mempolicy_mode,
				e->mempolicy_nodes.data, e->mempolicy_nodes.len, allowed);
	for (size_t i = 0; i < e->n_vma_policies && r >= 0; i++) {
		const VmaPolicyEntry *v = e->vma_policies[i];
		char what[96];
		snprintf(what, sizeof(what), "the policy of its memory at %llx-%llx (mbind)",
			 (unsigned long long)v->start, (unsigned long long)v->end);
		if (v->has_nodes)
			r = check_nodes(ctx, t, what, (int)v->mode, v->nodes.data, v->nodes.len,
					allowed);
	}
	return r;
}

static int task_loaded(struct rst_ctx *ctx, struct rst_task *t)
{
	TaskEntry *e = t->kstate[KIND_task];
	if (!e)
		return rst_require(ctx, t, KIND_task);
	int r = check_policies(ctx, t, e);
	if (r < 0)
		return r;
	t->stopped = e->has_stopped && e->stopped;
	t->stop_sig = SIGSTOP;
	if (e->has_stop_signal) {
		int sig = (int)e->stop_signal;
		if (sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU)
			return log_fail(&ctx->log, -EINVAL,
					"pid %d: stopped by signal %u, which is not a stop signal "
					"(damaged image)",
					t->pid, e->stop_signal);
		t->stop_sig = sig;
	}
	return 0;
}

static int restore_prctls(struct rst_ctx *ctx, struct rst_task *t, const TaskEntry *e)
{
	struct puppet *p = &t->pup;
	long r = 0;
	if (e->has_tsc && (r = puppet_syscall(p, SYS_prctl, PR_SET_TSC, e->tsc, 0, 0, 0)) < 0)
		return rst_check(ctx, t, r, "PR_SET_TSC");
	if (e->has_mce_kill &&
	    (r = puppet_syscall(p, SYS_prctl, PR_MCE_KILL, PR_MCE_KILL_SET, e->mce_kill, 0, 0)) < 0)
		return rst_check(ctx, t, r, "PR_MCE_KILL");
	const uint32_t spec[] = { e->spec_store_bypass, e->spec_indirect_branch, e->spec_l1d_flush };
	const int which[] = { PR_SPEC_STORE_BYPASS, PR_SPEC_INDIRECT_BRANCH, PR_SPEC_L1D_FLUSH };
	for (size_t i = 0; i < ARRAY_SIZE(which); i++) {
		/* FORCE_DISABLE reads back with DISABLE set: set it alone */
		uint32_t v = spec[i] & PR_SPEC_FORCE_DISABLE ? PR_SPEC_FORCE_DISABLE
			     : spec[i] & PR_SPEC_DISABLE_NOEXEC ? PR_SPEC_DISABLE_NOEXEC
								 : spec[i];
		if (v && (r = puppet_syscall(p, SYS_prctl, PR_SET_SPECULATION_CTRL, which[i], v, 0,
					     0)) < 0)
			return rst_check(ctx, t, r, "PR_SET_SPECULATION_CTRL");
	}
	if (e->has_memory_merge && e->memory_merge &&
	    (r = puppet_syscall(p, SYS_prctl, PR_SET_MEMORY_MERGE, 1, 0, 0, 0)) < 0)
		return rst_check(ctx, t, r, "PR_SET_MEMORY_MERGE");
	if (e->has_mempolicy_mode) {
		size_t len = MIN(e->mempolicy_nodes.len, sizeof(uint64_t) * NODE_BITS / 64);
		uint64_t nodes = puppet_scratch_put(p, 1024, e->mempolicy_nodes.data, len);
		r = nodes ? puppet_syscall(p, SYS_set_mempolicy, e->mempolicy_mode, nodes, len * 8)
			  : -EFAULT;
		if (r < 0)
			return rst_check(ctx, t, r, "set_mempolicy");
	}
	for (size_t i = 0; i < e->n_vma_policies; i++) {
		const VmaPolicyEntry *v = e->vma_policies[i];
		size_t len = v->has_nodes ? MIN(v->nodes.len, sizeof(uint64_t) * NODE_BITS / 64) : 0;
		uint64_t nodes = len ? puppet_scratch_put(p, 1024, v->nodes.data, len) : 0;
		r = len && !nodes ? -EFAULT
				  : v->end <= v->start ? -EINVAL
						       : puppet_syscall(p, SYS_mbind, v->start,
									v->end - v->start, v->mode,
									nodes, len * 8, 0);
		if (r < 0)
			return rst_check(ctx, t, r, "mbind");
	}
	/* last: it forbids making memory executable */
	if (e->has_mdwe && (r = puppet_syscall(p, SYS_prctl, PR_SET_MDWE, e->mdwe, 0, 0, 0)) < 0)
		return rst_check(ctx, t, r, "PR_SET_MDWE");
	return 0;
}

static int task_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	TaskEntry *e = t->kstate[KIND_task];

	uint64_t comm = rst_put(ctx, t, 0, e->comm, strnlen(e->comm, 15) + 1);
	if (!comm)
		return -EFAULT;
	/* its name, personality, tid address, robust list, rseq and the
	 * prctls whose failure is not one: one batch */
	struct puppet_call c[8];
	const char *what[8];
	size_t n = 0;
	what[n] = NULL;
	c[n++] = PUPPET_CALL(SYS_prctl, PR_SET_NAME, comm);
	if (e->has_personality) {
		what[n] = "personality";
		c[n++] = PUPPET_CALL(SYS_personality, e->personality);
	}
	if (e->has_tid_address) {
		what[n] = NULL;
		c[n++] = PUPPET_CALL(SYS_set_tid_address, e->tid_address);
	}
	if (e->has_robust_list) {
		what[n] = "set_robust_list";
		c[n++] = PUPPET_CALL(SYS_set_robust_list, e->robust_list, e->robust_list_len);
	}
	if (e->rseq) {
		what[n] = "rseq registration";
		c[n++] = PUPPET_CALL(SYS_rseq, e->rseq->ptr, e->rseq->len, 0, e->rseq->sig);
	}
	if (e->has_child_subreaper && e->child_subreaper) {
		what[n] = NULL;
		c[n++] = PUPPET_CALL(SYS_prctl, PR_SET_CHILD_SUBREAPER, 1);
	}
	if (e->has_thp_disable && e->thp_disable) {
		what[n] = NULL;
		c[n++] = PUPPET_CALL(SYS_prctl, PR_SET_THP_DISABLE, 1, 0, 0, 0);
	}
	if (e->has_timer_slack_ns) {
		what[n] = NULL;
		c[n++] = PUPPET_CALL(SYS_prctl, PR_SET_TIMERSLACK, e->timer_slack_ns, 0, 0, 0);
	}
	/* a thread's are queued, run with its siblings' (core/calls.c) */
	int r = rst_calls(ctx, t, c, what, NULL, n);
	return r < 0 ? r : restore_prctls(ctx, t, e);
}

/* pid's TracerPid (0 if none or unknown); *ret_tgid: pid's process,
 * *ret_threads: its threads */
static pid_t tracer_of(pid_t pid, pid_t *ret_tgid, uint32_t *ret_threads)
{
	_cleanup_free_ char *text = NULL;
	struct proc_status st;
	if (proc_read(pid, "status", &text, NULL) < 0 || proc_parse_status(text, &st) < 0)
		return 0;
	if (ret_tgid)
		*ret_tgid = st.tgid;
	if (ret_threads)
		*ret_threads = st.threads;
	return st.tracer_pid;
}

/* A thread of process pid (its main thread first) with a tracer, whose tid
 * is put in *ret_tid; 0 if none. A thread traced alone (strace -p TID,
 * gdb attached to one thread) is seen only in its own status. */
static pid_t traced_thread(pid_t pid, pid_t *ret_tid)
{
	uint32_t threads = 1;
	pid_t tracer = tracer_of(pid, NULL, &threads);
	*ret_tid = pid;
	if (tracer || threads < 2)
		return tracer;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	_cleanup_closedir_ DIR *d = opendir(path);
	for (struct dirent *de; d && (de = readdir(d));) {
		char *end;
		long tid = strtol(de->d_name, &end, 10);
		if (*end || end == de->d_name || tid <= 0 || tid == pid ||
		    !(tracer = tracer_of((pid_t)tid, NULL, NULL)))
			continue;
		*ret_tid = (pid_t)tid;
		return tracer;
	}
	return 0;
}

/*
 * A process outside the tree that a task of the tree traces. The relation
 * is not saved: after a restart the tracer waits for a tracee it no
 * longer has (strace ended on "wait4(__WALL): No child processes") and
 * the tracee, detached by the kill, runs on untraced. Only the tracee's
 * status names its tracer, and reading every process's costs 20-30 us
 * each (5 ms for 200): done only when a process's probe found it may
 * trace one. A process of several threads whose main thread is not
 * traced has each other thread's status read too.
 */
static int task_collect_end(struct ckpt_ctx *ctx)
{
	bool any = false;
	for (size_t i = 0; i < ctx->ntasks && !any; i++) {
		const struct task_ckpt *k = ctx->tasks[i].kstate[KIND_task];
		any = k && k->may_trace;
	}
	if (!any)
		return 0;
	_cleanup_closedir_ DIR *d = opendir("/proc");
	int err = 0;
	for (struct dirent *de; d && (de = readdir(d));) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		pid_t tracer, tid;
		if (*end || end == de->d_name || pid <= 0 || ctx_find_task(ctx, (pid_t)pid) ||
		    !(tracer = traced_thread((pid_t)pid, &tid)))
			continue;
		/* the tracer may be a thread: its process */
		pid_t tracer_tgid = tracer;
		if (!ctx_find_task(ctx, tracer)) {
			(void)tracer_of(tracer, &tracer_tgid, NULL);
			if (!ctx_find_task(ctx, tracer_tgid))
				continue;
		}
		_cleanup_free_ char *comm = NULL;
		size_t len = 0;
		if (proc_read((pid_t)pid, "comm", &comm, &len) >= 0)
			comm[strcspn(comm, "\n")] = '\0';
		char thread[48] = "";
		if (tid != pid)
			snprintf(thread, sizeof(thread), "thread %d of ", tid);
		err = log_fail(&ctx->log, -EOPNOTSUPP,
			       "pid %d: traces %spid %ld (%s), outside the tree (strace -p, gdb -p?): "
			       "a ptrace relation is not saved; not supported yet (checkpoint the "
			       "tracer once it has detached)",
			       tracer, thread, pid, comm ? comm : "?");
	}
	return err;
}

static const ProtobufCMessageDescriptor *task_descriptor(uint32_t sub)
{
	return sub == REC_SUB(TASK_ENTRY) ? &task_entry__descriptor : NULL;
}

const struct kind_ops task_ops = {
	.per_thread = true,
	.probe = task_probe,
	.collect = task_collect,
	.collect_end = task_collect_end,
	.dump = task_dump,
	.load = task_load,
	.loaded = task_loaded,
	.restore = task_restore,
	.free_state = task_free_state,
	.descriptor = task_descriptor,
};
