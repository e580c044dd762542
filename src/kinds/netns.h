/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Network namespaces (netns.c, its restart in netns-rst.c): a tree's own
 * network namespace, its root's, saved and made again. What other kinds
 * ask of it, and the restart ops netns.c registers.
 */
#ifndef CKPT_KINDS_NETNS_H
#define CKPT_KINDS_NETNS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kinds/kinds.h"

struct ckpt_ctx;
struct rst_ctx;
struct rst_task;

/* Checkpoint, once the root is collected: is pid's network namespace one
 * the image holds (ckpt's own, or the root's, which this kind saves)? */
bool netns_saved(struct ckpt_ctx *ctx, pid_t pid);
/* Checkpoint: the tree's network namespace's cookie (SO_NETNS_COOKIE: the
 * root's own, else ckpt's; 0 if the kernel has none); whether socket s is
 * of the namespace of that cookie (a task may make a socket in another
 * namespace, setns there and back). */
uint64_t netns_tree_cookie(struct ckpt_ctx *ctx);
bool netns_sock_saved(uint64_t tree_cookie, int s);

/* Checkpoint, the root collected: is the connection src:sport ->
 * dst:dport of the root's own network namespace (IPv4 or IPv6 addresses,
 * family's length) translated by the NAT of a veth's host end (`ckpt run
 * --nat`)? That is, the host end has NAT, dst is IPv4, not of the
 * namespace's own subnets nor loopback nor an address of ckpt's namespace,
 * and ckpt's namespace's conntrack translated it (or cannot be read). The
 * host end's name in via. ct: the conntrack table, read at the first
 * question and kept for the next ones (zeroed before the first; the
 * caller frees ct->v). */
struct ct_table {
	struct ct_nat *v;
	size_t n;
	int err;
	bool read;
};
bool netns_via_nat(struct ckpt_ctx *ctx, struct ct_table *ct, int family, const uint8_t *src,
		   uint16_t sport, const uint8_t *dst, uint16_t dport, char *via, size_t vialen);

/* Checkpoint, pid collected: the network namespace of pid's sockets, *id
 * 0 if it is the tree's (the root's), else the id of the one the image
 * holds (a task's); *cookie, that namespace's cookie (0 if none).
 * -EOPNOTSUPP for any other (ckpt's while the root has its own). */
int netns_of_task(struct ckpt_ctx *ctx, pid_t pid, uint32_t *id, uint64_t *cookie)
	__attribute__((warn_unused_result));

/* Checkpoint: socket sock (a copy of a task's fd) is of the network
 * namespace of a task of the tree not collected yet (a child's socket its
 * parent holds): that namespace saved now (the task finds it again), its
 * id in *id; -ENOENT if no task of the tree is in it (SIOCGSKNS). */
int netns_of_sock_task(struct ckpt_ctx *ctx, int sock, uint32_t *id)
    __attribute__((warn_unused_result));

/* Checkpoint: the k-th (from 0) namespace the image holds other than the
 * tree's: its id (NetnsEntry.id) and an fd of it (the kind's, not to be
 * closed); -ENOENT past the last. */
int netns_other(struct ckpt_ctx *ctx, size_t k, uint32_t *id, int *fd);
/* Checkpoint: ckpt's calling thread into pid's network namespace, to ask
 * what only a socket there sees (sock_diag, device names); *own is what
 * netns_leave takes it back to (-1: it was there already). */
int netns_enter_task(pid_t pid, int *own) __attribute__((warn_unused_result));
/* The calling thread into the network namespace of fd; *own, its own, for
 * netns_leave. 0 or -errno (*own -1: it stays where it was). */
int netns_enter_fd(int fd, int *own) __attribute__((warn_unused_result));
void netns_leave(int own);

/* Checkpoint: socket s of pid (a copy of its fd) is of pid's namespace,
 * one the image holds: its id in *id as netns_of_task says it; else NULL,
 * the refusal's words. */
const char *netns_sock_of(struct ckpt_ctx *ctx, pid_t pid, int s, uint32_t *id);

/* Checkpoint: fd of pid is a network namespace no task of the image is in
 * (nor ckpt): saved once, as a held namespace; its id in *id. */
int netns_hold(struct ckpt_ctx *ctx, pid_t pid, int fd, uint32_t *id)
	__attribute__((warn_unused_result));

/* netns-conf.c: the namespace's sysctls (NetnsEntry.sysctls). Checkpoint:
 * the calling thread is in the namespace, and is left in a fresh one. */
typedef struct NetnsEntry NetnsEntry;
typedef struct NetnsSysctl NetnsSysctl;
struct ckpt_log;
int netns_sysctls_read(struct ckpt_log *log, pid_t root, NetnsEntry *e);
void netns_sysctls_free(NetnsEntry *e);
/* Restart: a saved one well formed; write those outside the links'
 * directories (early) or the links' own, in the new namespace. */
bool netns_sysctl_ok(const NetnsSysctl *s);
int netns_sysctls_write(struct rst_ctx *ctx, const NetnsEntry *e, bool early);

/* netns-nft.c: the namespace's nftables tables (NetnsEntry.nftables), read
 * in the namespace of ns_fd; checked at load; made in the calling thread's. */
int netns_nft_read(struct ckpt_log *log, pid_t root, int ns_fd, NetnsEntry *e);
bool netns_nft_ok(const char *text);
int netns_nft_write(struct rst_ctx *ctx, const NetnsEntry *e);

/* netns-rules.c: the namespace's policy routing rules and permanent
 * neighbour entries (NetnsEntry.rules, rules_gone, neighs): read through
 * in (its links already in e); checked at load; made through in (after
 * the links and routes). */
struct rtnl;
int netns_rules_read(struct ckpt_log *log, pid_t root, struct rtnl *in, NetnsEntry *e);
void netns_rules_free(NetnsEntry *e);
bool netns_rules_ok(const NetnsEntry *e);
int netns_rules_write(struct rst_ctx *ctx, const NetnsEntry *e, struct rtnl *in);

/* netns-rst.c; the link of that name in e (NULL: none) */
typedef struct NetnsLink NetnsLink;
const NetnsLink *netns_link_named(const NetnsEntry *e, const char *name);
int netns_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec);
int netns_prepare(struct rst_ctx *ctx);
int netns_root_spawned(struct rst_ctx *ctx, struct rst_task *root);
int netns_forked(struct rst_ctx *ctx, struct rst_task *t);
void netns_free_rstate(void *state);
/* Restart: the held namespace of that id (NetnsEntry.id), made at prepare:
 * its fd (ckpt's, not to be closed), or -1. */
int netns_held_fd(struct rst_ctx *ctx, uint32_t id);
/* Restart, after prepare: ckpt's thread into the namespace of that id (0:
 * the root's, where it is from prepare to "spawn root"), to make sockets
 * there; -EINVAL if the image has none such. */
int netns_rst_enter(struct rst_ctx *ctx, uint32_t id) __attribute__((warn_unused_result));
/* Restart, at prepare (ckpt's thread in the root's namespace): fn(ctx, arg)
 * with the thread in the namespace of that id (0: the root's), back in the
 * root's after; a failure to enter or come back logged. */
int netns_rst_call(struct rst_ctx *ctx, uint32_t id, int (*fn)(struct rst_ctx *, void *), void *arg)
    __attribute__((warn_unused_result));

#endif
