/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Command-line parsing, kept pure so it can be unit-tested: argv in, a
 * struct cli_args out, or an error message. Options may come before or
 * after positional arguments; "--" ends options.
 */
#ifndef CKPT_CLI_OPTS_H
#define CKPT_CLI_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

enum cli_cmd {
	CMD_NONE,
	CMD_CHECKPOINT,
	CMD_RESTART,
	CMD_INSPECT,
	CMD_CHECK,
	CMD_RUN,
	CMD_KEYGEN,
	CMD_MIGRATE,
	CMD_RECEIVE,
	CMD_UNLOCK,
	CMD_HELP,
	CMD_VERSION,
	CMD_MAX,
};

/* An option given several times: its values in order. */
#define CLI_LIST_MAX 32
struct cli_list {
	const char *v[CLI_LIST_MAX];
	int n;
};
#define CLI_MAX_FDS 16 /* --external fd:N and --inherit-fd N:FD, each */

struct cli_args {
	enum cli_cmd cmd;
	pid_t pid;              /* checkpoint, migrate */
	const char *to;         /* migrate --to HOST:PORT */
	const char *rounds;     /* migrate --rounds N: pre-copy rounds at most */
	const char *listen;     /* receive --listen [ADDR:]PORT */
	const char *output;     /* checkpoint -o; "-" is stdout */
	const char *image;      /* restart, inspect; "-" is stdin */
	const char *image2;     /* inspect --diff A B: B */
	bool records, diff;     /* inspect --records, --diff */
	const char *key;        /* checkpoint, restart, inspect --key FILE; keygen FILE */
	const char *log;        /* --log FILE */
	const char *pidfile;    /* restart --pidfile */
	int verbose;            /* -v, repeatable */
	bool kill, leave_frozen;
	bool verify;            /* checkpoint --kill --verify */
	bool detach, frozen, dry_run, tcp_close, pidns, lazy, changed_files;
	bool eager;             /* receive --eager: memory written before it runs */
	bool shell_job;         /* checkpoint, restart: --shell-job */
	const char *external;   /* checkpoint --external KIND[,KIND...] */
	bool ext_unix;          /* ... of which "unix" */
	int ext_fds[CLI_MAX_FDS]; /* ... and "fd:N": the root's fds N */
	size_t n_ext_fds;
	const char *inherit_fd; /* restart --inherit-fd N:FD[,N:FD...] */
	struct cli_fd_pair {
		int fd, local;  /* the image's fd N, the caller's FD */
	} inherit[CLI_MAX_FDS];
	size_t n_inherit;
	bool drop_events;       /* checkpoint --drop-queued-events */
	bool detach_clients;    /* checkpoint: --detach-clients */
	bool compress;          /* checkpoint: --compress */
	bool track;             /* checkpoint: --track */
	const char *parent;     /* checkpoint: --parent FILE */
	bool skip_in_flight;    /* checkpoint: --skip-in-flight */
	bool json;              /* inspect, checkpoint, restart: --json */
	bool quiet;             /* checkpoint, restart: no summary line */
	const char *progress_interval; /* checkpoint, restart: --progress-interval MS */
	bool help;              /* --help after a command */
	enum cli_cmd topic;     /* help COMMAND */
	const char *hostname;   /* run --hostname */
	const char *output_log; /* run --detach --output-log FILE */
	bool keep_fds;          /* run --keep-fds */
	bool net;               /* run --net */
	bool nat;               /* run --net --nat */
	const char *net_addr;   /* run --net-addr NET/LEN */
	const char *net_host_if; /* run --net-host-if NAME */
	const char *cgroup;     /* run --cgroup NAME: under ckpt's cgroup */
	const char *memory_max, *pids_max, *cpu_max; /* run: its limits */
	const char *cgroup_set; /* run --cgroup-set FILE=VALUE[,FILE=VALUE...] */
	const char *root;       /* run --root DIR */
	const char *overlay;    /* run --overlay LOWER[:LOWER...],UPPER,WORK (on DIR) */
	struct cli_list binds;  /* run --bind SRC:DST[:ro], repeatable */
	struct cli_list tmpfs;  /* run --tmpfs DST[:size=N], repeatable */
	char *const *run_argv;  /* run: the command and its arguments */
	int run_argc;
};

/* 0, or -EINVAL with a message in err. */
int cli_parse(int argc, char *const argv[], struct cli_args *ret, char *err, size_t errlen);

extern const char *const cli_cmd_names[CMD_MAX];

/* The help of cmd (its synopsis and options, from the option table), or
 * the list of commands for CMD_NONE or CMD_HELP. */
void cli_usage(FILE *f, enum cli_cmd cmd);
/* The name of option i of the table (NULL past the end), its letter (0 for
 * none) and the commands that take it (bit 1 << enum cli_cmd). */
const char *cli_option(size_t i, char *letter, unsigned *cmds);

#endif
