/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ckpt run --net (run-net.c): the container's network namespace and the
 * veth pair joining it to the host. run_net_plan() before the clone
 * (names, subnet, the pipe), run_net_setup() in ckpt once the container
 * exists, run_net_inside() in the container's init, which waits for it.
 * Failures are reported on stderr by run_net_plan and run_net_setup.
 */
#ifndef CKPT_CLI_RUN_NET_H
#define CKPT_CLI_RUN_NET_H

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli/opts.h"

#define RUN_NET_INSIDE "eth0" /* the container's end */

struct run_net {
	bool on;
	bool nat; /* --nat: the host end's traffic to beyond is masqueraded */
	char host_if[IF_NAMESIZE];
	uint32_t net; /* the subnet, host order: host end net+1, container net+2 */
	unsigned plen;
	int go[2]; /* ckpt -> container: the pair exists */
};

int run_net_plan(const struct cli_args *a, struct run_net *n);
int run_net_setup(struct run_net *n, pid_t pid);
int run_net_inside(const struct run_net *n);
void run_net_close(struct run_net *n);
/* The container ended with status st: its NAT goes with it, but after a
 * SIGKILL (checkpoint --kill), for the restart to find. */
void run_net_ended(const struct run_net *n, int st);

#endif
