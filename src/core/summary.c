/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ckpt inspect's default view and --diff: what an image holds, for people.
 *
 * An image is read once into a struct summary: its header, its process
 * tree (from the tree record, with each process's command name from its
 * task record), what each kind holds (records and bytes), and a digest of
 * every record keyed by (pid, type, position among that task's records of
 * that type). The summary prints that; the diff compares two summaries of
 * one program and prints what changed. Nothing here knows a kind by name:
 * names, descriptions and the command name field come from kinds.def and
 * the records' own descriptors.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/ctx.h"
#include "net/lock.h"
#include "files.pb-c.h"
#include "kinds/mm.h"
#include "util/cleanup.h"
#include "util/units.h"

struct fd_ref {
	uint32_t fd, file_id;
	bool external;          /* --external fd:N: nothing of it in the image */
};

struct proc_row {
	uint32_t pid, ppid, pgid, sid, nthreads;
	bool zombie;
	char comm[20];
	struct fd_ref *fds;     /* its fd table, from its fdtable record */
	size_t nfds;
};

/* an open file's objref and its kind (from the kind's record with an "id") */
struct id_kind {
	uint32_t id;
	int kind;
};

/* one record's digest */
struct rec_sig {
	uint32_t pid;           /* the task whose records it is among (0: none) */
	uint32_t type;
	uint32_t nth;           /* among that task's records of that type */
	uint64_t len;
	uint64_t hash;          /* FNV-1a of the data */
};

struct kind_total {
	uint32_t records;
	uint64_t bytes;
};

struct summary {
	struct img_header hdr;
	uint64_t size;
	struct proc_row *procs;
	size_t nprocs, nthreads;
	uint32_t ns_flags;
	char hostname[72];
	struct kind_total kinds[KIND_MAX + 1]; /* [KIND_MAX]: core records */
	struct rec_sig *sigs;
	size_t nsigs, cap;
	struct id_kind *ids;
	size_t nids, idcap;
	/* page store records (img/pages.h): bytes in memory, in the image */
	uint64_t page_raw, page_stored;
	uint32_t page_records, page_zrecords;
	uint8_t *chain;         /* the first incremental record (mm-chain.c), or NULL */
	size_t chain_len;
};

static void free_procs(struct summary *s)
{
	for (size_t i = 0; s->procs && i < s->nprocs; i++)
		free(s->procs[i].fds);
	free(s->procs);
	s->procs = NULL;
}

static void summary_free(struct summary *s)
{
	free_procs(s);
	free(s->sigs);
	free(s->ids);
	free(s->chain);
}

static uint64_t fnv1a(const uint8_t *p, uint64_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (uint64_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static int load_tree(struct summary *s, const struct img_record *rec)
{
	TreeEntry *t = tree_entry__unpack(NULL, rec->len, rec->data);
	if (!t)
		return -EBADMSG;
	free_procs(s);
	s->procs = calloc(t->n_tasks ? t->n_tasks : 1, sizeof(*s->procs));
	if (!s->procs) {
		tree_entry__free_unpacked(t, NULL);
		return -ENOMEM;
	}
	s->nprocs = t->n_tasks;
	s->nthreads = 0;
	for (size_t i = 0; i < t->n_tasks; i++) {
		const TreeTask *tt = t->tasks[i];
		s->procs[i] = (struct proc_row){ .pid = tt->pid,
						 .ppid = tt->ppid,
						 .pgid = tt->pgid,
						 .sid = tt->sid,
						 .nthreads = (uint32_t)tt->n_tids + 1,
						 .zombie = tt->has_zombie && tt->zombie };
		s->nthreads += tt->n_tids + 1;
	}
	if (t->ns) {
		s->ns_flags = t->ns->flags;
		if (t->ns->hostname)
			snprintf(s->hostname, sizeof(s->hostname), "%s", t->ns->hostname);
	}
	tree_entry__free_unpacked(t, NULL);
	return 0;
}

/* The "comm" string of a task's record, if its message has one. */
static void take_comm(struct summary *s, uint32_t pid, const struct img_record *rec)
{
	const ProtobufCMessageDescriptor *d = inspect_descriptor_of(rec->type);
	const ProtobufCFieldDescriptor *f =
		d ? protobuf_c_message_descriptor_get_field_by_name(d, "comm") : NULL;
	if (!f || f->type != PROTOBUF_C_TYPE_STRING || f->label == PROTOBUF_C_LABEL_REPEATED)
		return;
	for (size_t i = 0; i < s->nprocs; i++) {
		if (s->procs[i].pid != pid)
			continue;
		ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, rec->len, rec->data);
		const char *c = m ? *(const char *const *)((const char *)m + f->offset) : NULL;
		if (c)
			snprintf(s->procs[i].comm, sizeof(s->procs[i].comm), "%s", c);
		if (m)
			protobuf_c_message_free_unpacked(m, NULL);
		return;
	}
}

/* A record of namespaces (the ns kind's, the root's): what the summary shows. */
static int take_ns(struct summary *s, const struct img_record *rec)
{
	NamespacesEntry *e = namespaces_entry__unpack(NULL, rec->len, rec->data);
	if (!e)
		return -EBADMSG;
	s->ns_flags = e->flags;
	if (e->hostname)
		snprintf(s->hostname, sizeof(s->hostname), "%s", e->hostname);
	namespaces_entry__free_unpacked(e, NULL);
	return 0;
}

/* The "id" of a record of a kind that holds open files: an objref its
 * fds may name (other kinds' ids are not objrefs of fds). */
static int take_id(struct summary *s, enum kind k, const struct img_record *rec)
{
	const ProtobufCMessageDescriptor *d = inspect_descriptor_of(rec->type);
	const ProtobufCFieldDescriptor *f =
		d ? protobuf_c_message_descriptor_get_field_by_name(d, "id") : NULL;
	if (!f || f->type != PROTOBUF_C_TYPE_UINT32 || f->label == PROTOBUF_C_LABEL_REPEATED ||
	    (!kinds[k].ops->fd_claim && !kinds[k].ops->file))
		return 0;
	ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, rec->len, rec->data);
	if (!m)
		return -EBADMSG;
	uint32_t id = *(const uint32_t *)((const char *)m + f->offset);
	protobuf_c_message_free_unpacked(m, NULL);
	if (s->nids == s->idcap) {
		size_t cap = s->idcap ? 2 * s->idcap : 64;
		struct id_kind *n = realloc(s->ids, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		s->ids = n;
		s->idcap = cap;
	}
	s->ids[s->nids++] = (struct id_kind){ id, (int)k };
	return 0;
}

/* A task's fd table: kept with its process row. */
static int take_fds(struct summary *s, uint32_t pid, const struct img_record *rec)
{
	struct proc_row *p = NULL;
	for (size_t i = 0; i < s->nprocs && !p; i++)
		if (s->procs[i].pid == pid)
			p = &s->procs[i];
	if (!p || p->fds)
		return 0;
	FdTableEntry *e = fd_table_entry__unpack(NULL, rec->len, rec->data);
	if (!e)
		return -EBADMSG;
	p->fds = calloc(e->n_fds ? e->n_fds : 1, sizeof(*p->fds));
	if (!p->fds) {
		fd_table_entry__free_unpacked(e, NULL);
		return -ENOMEM;
	}
	for (size_t i = 0; i < e->n_fds; i++)
		p->fds[i] = (struct fd_ref){ e->fds[i]->fd, e->fds[i]->file_id,
					     e->fds[i]->external };
	p->nfds = e->n_fds;
	fd_table_entry__free_unpacked(e, NULL);
	return 0;
}

static int add_sig(struct summary *s, uint32_t pid, const struct img_record *rec)
{
	uint32_t nth = 0;
	/* the same task's records of one type are together or close: look back */
	for (size_t i = s->nsigs; i-- > 0 && s->sigs[i].pid == pid;)
		if (s->sigs[i].type == rec->type) {
			nth = s->sigs[i].nth + 1;
			break;
		}
	if (s->nsigs == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		struct rec_sig *n = realloc(s->sigs, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		s->sigs = n;
		s->cap = cap;
	}
	s->sigs[s->nsigs++] = (struct rec_sig){ pid, rec->type, nth, rec->len,
						fnv1a(rec->data, rec->len) };
	return 0;
}

/* A record that parses as a page store record is counted as one; whatever
 * else it is (no other record ends with the store's magic) is left alone. */
static void count_pages(struct summary *s, const struct img_record *rec)
{
	struct pages_chunk c;
	if (rec->len < sizeof(struct pages_head) || (uintptr_t)rec->data % IMG_PAGE_SIZE ||
	    pages_parse(rec, &c) < 0)
		return;
	s->page_records++;
	s->page_raw += c.bytes;
	s->page_stored += c.z ? c.zlen : c.bytes;
	s->page_zrecords += c.z != NULL;
}

static int add_record(struct summary *s, uint32_t *pid, const struct img_record *rec)
{
	enum kind k = KIND_MAX;
	int r = 0;

	if (rec->type == REC_CORE_TREE)
		r = load_tree(s, rec);
	if (rec->type == REC_CORE_TASK) {
		TaskBegin *tb = task_begin__unpack(NULL, rec->len, rec->data);
		if (!tb)
			return -EBADMSG;
		*pid = tb->pid;
		task_begin__free_unpacked(tb, NULL);
	}
	if (r < 0)
		return r;
	if (rec->type != REC_CORE_TREE && rec->type != REC_CORE_TASK &&
	    !kind_by_rec(rec->type, &k))
		k = KIND_MAX;
	s->kinds[k].records++;
	s->kinds[k].bytes += rec->len;
	count_pages(s, rec);
	if (rec->type == MM_REC_TRACK && !s->chain && (s->chain = malloc(rec->len ? rec->len : 1))) {
		memcpy(s->chain, rec->data, rec->len);
		s->chain_len = rec->len;
	}
	if (k != KIND_MAX && *pid)
		take_comm(s, *pid, rec);
	if (k != KIND_MAX && (r = take_id(s, k, rec)) < 0)
		return r;
	if (k != KIND_MAX && *pid && inspect_descriptor_of(rec->type) == &fd_table_entry__descriptor &&
	    (r = take_fds(s, *pid, rec)) < 0)
		return r;
	if (k != KIND_MAX && inspect_descriptor_of(rec->type) == &namespaces_entry__descriptor &&
	    (r = take_ns(s, rec)) < 0)
		return r;
	return add_sig(s, *pid, rec);
}

/* Read the whole image into s; err says where it went wrong. */
static int summary_load(struct summary *s, int fd, const void *key, size_t key_len,
			struct img_error *err)
{
	struct img_reader r = { 0 };
	struct img_record rec;
	uint32_t pid = 0;
	int ret = img_reader_open_key(&r, fd, key, key_len, err);

	if (ret == 0)
		ret = img_reader_validate(&r, err);
	if (ret == 0) {
		s->hdr = r.hdr;
		s->size = r.size;
	}
	while (ret == 0 && (ret = img_reader_next(&r, &rec, err)) == 0) {
		if ((ret = add_record(s, &pid, &rec)) < 0) {
			snprintf(err->reason, sizeof(err->reason), "cannot decode it");
			err->index = rec.index;
			err->offset = rec.offset;
			err->type = rec.type;
		}
	}
	img_reader_close(&r);
	return ret == -ENODATA ? 0 : ret;
}

static const char *kind_label(int k)
{
	return k == KIND_MAX ? "core" : kinds[k].name;
}

static const char *kind_desc(int k)
{
	return k == KIND_MAX ? "the process tree, where each task's records begin" : kinds[k].desc;
}

static int kind_of_id(const struct summary *s, uint32_t id)
{
	for (size_t i = 0; i < s->nids; i++)
		if (s->ids[i].id == id)
			return s->ids[i].kind;
	return KIND_MAX;
}

/* "fds: 5 (file_reg 3, pipe 1, tty 1); external: fd 5 (--inherit-fd 5:FD)" */
static void print_fds(FILE *f, const struct summary *s, const struct proc_row *p, int depth)
{
	uint32_t count[KIND_MAX + 1] = { 0 };
	size_t next = 0;
	const char *sep = " (";
	for (size_t i = 0; i < p->nfds; i++)
		if (!p->fds[i].external)
			count[kind_of_id(s, p->fds[i].file_id)]++;
		else
			next++;
	fprintf(f, "  %*s        fds: %zu", 2 * depth, "", p->nfds - next);
	for (int k = 0; k <= KIND_MAX; k++)
		if (count[k]) {
			fprintf(f, "%s%s %" PRIu32, sep, k == KIND_MAX ? "?" : kinds[k].name, count[k]);
			sep = ", ";
		}
	fputs(*sep == ',' ? ")" : "", f);
	sep = "; external (restart needs --inherit-fd N:FD): fd ";
	for (size_t i = 0; i < p->nfds; i++)
		if (p->fds[i].external) {
			fprintf(f, "%s%" PRIu32, sep, p->fds[i].fd);
			sep = ", ";
		}
	fputc('\n', f);
}

/* a process, then its children (the tree record has parents first) */
static void print_proc(FILE *f, const struct summary *s, size_t i, int depth)
{
	const struct proc_row *p = &s->procs[i];
	fprintf(f, "  %*s%-7" PRIu32 " %-16s", 2 * depth, "", p->pid, p->comm[0] ? p->comm : "?");
	if (p->zombie)
		fputs(" zombie", f);
	else
		fprintf(f, " %" PRIu32 " thread%s", p->nthreads, p->nthreads == 1 ? "" : "s");
	fprintf(f, ", session %" PRIu32 ", group %" PRIu32 "\n", p->sid, p->pgid);
	if (p->fds)
		print_fds(f, s, p, depth);
	for (size_t j = i + 1; j < s->nprocs && depth < 64; j++)
		if (s->procs[j].ppid == p->pid)
			print_proc(f, s, j, depth + 1);
}

static void print_namespaces(FILE *f, const struct summary *s)
{
	static const struct {
		uint32_t flag;
		const char *name;
	} ns[] = { { CLONE_NEWPID, "pid" }, { CLONE_NEWNS, "mount" }, { CLONE_NEWUTS, "uts" },
		   { CLONE_NEWIPC, "ipc" }, { CLONE_NEWUSER, "user" }, { CLONE_NEWCGROUP, "cgroup" },
		   { CLONE_NEWNET, "net" }, { CLONE_NEWTIME, "time" } };
	const char *sep = "";
	if (!s->ns_flags)
		return;
	/* a plain tree's root may have some of its own too (uts, mount, net) */
	fputs(s->ns_flags & CLONE_NEWPID ? "container: namespaces " : "namespaces of its own: ", f);
	for (size_t i = 0; i < ARRAY_SIZE(ns); i++)
		if (s->ns_flags & ns[i].flag) {
			fprintf(f, "%s%s", sep, ns[i].name);
			sep = ", ";
		}
	if (s->hostname[0])
		fprintf(f, "; hostname %s", s->hostname);
	fputc('\n', f);
}

static int cmp_bytes(const void *a, const void *b, void *arg)
{
	const struct summary *s = arg;
	uint64_t x = s->kinds[*(const int *)a].bytes, y = s->kinds[*(const int *)b].bytes;
	return (x < y) - (x > y);
}

static void print_summary(FILE *f, const struct summary *s)
{
	char size[32], when[40] = "?";
	time_t secs = (time_t)(s->hdr.created_ns / 1000000000ull);
	struct tm tm;
	int order[KIND_MAX + 1];
	size_t n = 0;

	human_size(size, sizeof(size), s->size);
	if (gmtime_r(&secs, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
	fprintf(f, "image: %zu process%s, %zu thread%s, %s; made %s on Linux %.65s\n", s->nprocs,
		s->nprocs == 1 ? "" : "es", s->nthreads, s->nthreads == 1 ? "" : "s", size, when,
		s->hdr.kernel_release);
	print_namespaces(f, s);
	fputs("id: ", f);
	for (size_t i = 0; i < sizeof(s->hdr.image_id); i++)
		fprintf(f, "%02x", s->hdr.image_id[i]);
	fputc('\n', f);
	if (s->chain)
		mm_chain_print(f, s->chain, s->chain_len);
	if (s->page_records) {
		char raw[32], stored[32];
		human_size(raw, sizeof(raw), s->page_raw);
		human_size(stored, sizeof(stored), s->page_stored);
		fprintf(f, "pages: %s in memory, %s in the image", raw, stored);
		if (s->hdr.flags & IMG_HDR_ZSTD)
			fprintf(f, ", zstd: %" PRIu32 " of %" PRIu32 " records compressed",
				s->page_zrecords, s->page_records);
		fputc('\n', f);
	}
	fputs("processes (pid, command, threads; open fds by kind):\n", f);
	if (s->nprocs)
		print_proc(f, s, 0, 0);
	for (int k = 0; k <= KIND_MAX; k++)
		if (s->kinds[k].records)
			order[n++] = k;
	qsort_r(order, n, sizeof(order[0]), cmp_bytes, (void *)s);
	fputs("what it holds (kind, bytes, records):\n", f);
	for (size_t i = 0; i < n; i++) {
		const struct kind_total *t = &s->kinds[order[i]];
		human_size(size, sizeof(size), t->bytes);
		fprintf(f, "  %-13s %11s %6" PRIu32 "  %s\n", kind_label(order[i]), size, t->records,
			kind_desc(order[i]));
	}
}

static void error_text(const struct img_error *err, const char *which, char *buf, size_t len)
{
	char name[48];
	if (!buf || !len)
		return;
	if (err->index < 0)
		snprintf(buf, len, "%simage header: %s", which, err->reason);
	else
		snprintf(buf, len, "%simage record %lld (%s) at offset %llu: %s", which,
			 (long long)err->index, rec_type_name(err->type, name, sizeof(name)),
			 (unsigned long long)err->offset, err->reason);
}

static FILE *out_stream(int out_fd)
{
	int fd = dup(out_fd);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f && fd >= 0)
		close(fd);
	return f;
}

int ckpt_inspect_summary(int fd, int out_fd, const void *key, size_t key_len, char *errbuf,
			 size_t errbuf_len)
{
	struct summary s = { 0 };
	struct img_error err = { .index = -1 };
	int r = summary_load(&s, fd, key, key_len, &err);

	if (r < 0) {
		error_text(&err, "", errbuf, errbuf_len);
	} else {
		FILE *f = out_stream(out_fd);
		if (!f)
			r = -errno;
		else {
			print_summary(f, &s);
			fclose(f);
		}
	}
	summary_free(&s);
	return r;
}

/* --- diff -------------------------------------------------------------- */

static int cmp_sig(const void *a, const void *b)
{
	const struct rec_sig *x = a, *y = b;
	if (x->pid != y->pid)
		return (x->pid > y->pid) - (x->pid < y->pid);
	if (x->type != y->type)
		return (x->type > y->type) - (x->type < y->type);
	return (x->nth > y->nth) - (x->nth < y->nth);
}

static const struct proc_row *find_proc(const struct summary *s, uint32_t pid)
{
	for (size_t i = 0; i < s->nprocs; i++)
		if (s->procs[i].pid == pid)
			return &s->procs[i];
	return NULL;
}

static size_t diff_procs(FILE *f, const struct summary *a, const struct summary *b)
{
	size_t n = 0;
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct proc_row *p = &a->procs[i], *q = find_proc(b, p->pid);
		if (!q)
			fprintf(f, "- process %" PRIu32 " (%s)\n", p->pid, p->comm), n++;
		else if (strcmp(p->comm, q->comm) || p->nthreads != q->nthreads ||
			 p->ppid != q->ppid || p->pgid != q->pgid || p->sid != q->sid)
			fprintf(f, "~ process %" PRIu32 ": %s, %" PRIu32 " threads -> %s, %" PRIu32
				   " threads\n",
				p->pid, p->comm, p->nthreads, q->comm, q->nthreads),
				n++;
	}
	for (size_t i = 0; i < b->nprocs; i++)
		if (!find_proc(a, b->procs[i].pid))
			fprintf(f, "+ process %" PRIu32 " (%s)\n", b->procs[i].pid, b->procs[i].comm),
				n++;
	return n;
}

/* For each (pid, type): how many of its records were added, removed, changed. */
static size_t diff_records(FILE *f, const struct summary *a, const struct summary *b)
{
	size_t i = 0, j = 0, n = 0;
	while (i < a->nsigs || j < b->nsigs) {
		const struct rec_sig *x = i < a->nsigs ? &a->sigs[i] : NULL;
		const struct rec_sig *y = j < b->nsigs ? &b->sigs[j] : NULL;
		const struct rec_sig *g = !y || (x && cmp_sig(x, y) <= 0) ? x : y;
		size_t gone = 0, added = 0, changed = 0, same = 0;
		while (i < a->nsigs || j < b->nsigs) {
			x = i < a->nsigs ? &a->sigs[i] : NULL;
			y = j < b->nsigs ? &b->sigs[j] : NULL;
			bool xg = x && x->pid == g->pid && x->type == g->type;
			bool yg = y && y->pid == g->pid && y->type == g->type;
			if (!xg && !yg)
				break;
			int c = xg && yg ? cmp_sig(x, y) : (xg ? -1 : 1);
			if (c < 0)
				gone++, i++;
			else if (c > 0)
				added++, j++;
			else {
				if (x->len != y->len || x->hash != y->hash)
					changed++;
				else
					same++;
				i++, j++;
			}
		}
		if (!gone && !added && !changed)
			continue;
		char name[48];
		rec_type_name(g->type, name, sizeof(name));
		fprintf(f, "~ pid %" PRIu32 " %s: %zu changed, %zu added, %zu removed, %zu same\n",
			g->pid, name, changed, added, gone, same);
		n++;
	}
	return n;
}

static void diff_kinds(FILE *f, const struct summary *a, const struct summary *b)
{
	const char *head = "by kind:\n";
	for (int k = 0; k <= KIND_MAX; k++) {
		const struct kind_total *x = &a->kinds[k], *y = &b->kinds[k];
		if (x->records == y->records && x->bytes == y->bytes)
			continue;
		fputs(head, f);
		head = "";
		fprintf(f, "  %-13s %" PRIu64 " -> %" PRIu64 " bytes, %" PRIu32 " -> %" PRIu32
			   " records\n",
			kind_label(k), x->bytes, y->bytes, x->records, y->records);
	}
}

int ckpt_inspect_diff(int fd_a, int fd_b, int out_fd, const void *key, size_t key_len,
		      char *errbuf, size_t errbuf_len)
{
	struct summary a = { 0 }, b = { 0 };
	struct img_error err = { .index = -1 };
	int r = summary_load(&a, fd_a, key, key_len, &err);
	FILE *f = NULL;

	if (r < 0)
		error_text(&err, "first ", errbuf, errbuf_len);
	else if ((r = summary_load(&b, fd_b, key, key_len, &err)) < 0)
		error_text(&err, "second ", errbuf, errbuf_len);
	else if (!(f = out_stream(out_fd)))
		r = -errno;
	if (f) {
		qsort(a.sigs, a.nsigs, sizeof(*a.sigs), cmp_sig);
		qsort(b.sigs, b.nsigs, sizeof(*b.sigs), cmp_sig);
		size_t n = diff_procs(f, &a, &b) + diff_records(f, &a, &b);
		if (n)
			diff_kinds(f, &a, &b);
		fprintf(f, "%s\n", n ? "the images differ" : "the images hold the same records");
		fclose(f);
		r = n ? 1 : 0;
	}
	summary_free(&a);
	summary_free(&b);
	return r;
}

/* A lock name ckpt made (netlock_name): "ckpt_lock_" then digits, '_' and
 * hex digits; anything else in an image is not removed. */
static bool lock_name_ok(const char *s)
{
	if (strncmp(s, "ckpt_lock_", 10) || strlen(s) > 63 || !s[10])
		return false;
	for (s += 10; *s; s++)
		if (!isxdigit((unsigned char)*s) && *s != '_')
			return false;
	return true;
}

int ckpt_unlock(int fd, const void *key, size_t key_len, char *name, size_t name_len,
		char *errbuf, size_t errbuf_len)
{
	struct img_reader r = { 0 };
	struct img_error err = { 0 };
	struct img_record rec;
	char lock[64] = "";
	int ret = img_reader_open_key(&r, fd, key, key_len, &err);

	if (errbuf && errbuf_len)
		errbuf[0] = '\0';
	if (name && name_len)
		name[0] = '\0';
	if (ret == 0)
		ret = img_reader_validate(&r, &err);
	while (ret == 0 && (ret = img_reader_next(&r, &rec, &err)) == 0) {
		if (rec.type != REC_CORE_TREE)
			continue;
		TreeEntry *t = tree_entry__unpack(NULL, rec.len, rec.data);
		if (!t) {
			snprintf(err.reason, sizeof(err.reason), "cannot decode it");
			err.index = rec.index;
			err.offset = rec.offset;
			err.type = rec.type;
			ret = -EBADMSG;
			break;
		}
		snprintf(lock, sizeof(lock), "%s", t->netlock ? t->netlock : "");
		tree_entry__free_unpacked(t, NULL);
		break;
	}
	img_reader_close(&r);
	if (ret < 0 && ret != -ENODATA) {
		error_text(&err, "", errbuf, errbuf_len);
		return ret;
	}
	if (!lock[0])
		return 0;
	if (name && name_len)
		snprintf(name, name_len, "%s", lock);
	if (!lock_name_ok(lock)) {
		if (errbuf && errbuf_len)
			snprintf(errbuf, errbuf_len, "the image names a lock '%.63s' ckpt did not make",
				 lock);
		return -EBADMSG;
	}
	ret = netlock_remove_name(-1, lock);
	if (ret == -ENOENT)
		return 0;
	if (ret < 0 && errbuf && errbuf_len)
		snprintf(errbuf, errbuf_len, "network lock %s: cannot remove it: %s", lock,
			 strerror(-ret));
	return ret < 0 ? ret : 1;
}
