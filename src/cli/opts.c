/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "cli/opts.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cli_cmd_names[CMD_MAX] = {
	[CMD_CHECKPOINT] = "checkpoint", [CMD_RESTART] = "restart", [CMD_INSPECT] = "inspect",
	[CMD_CHECK] = "check",		 [CMD_HELP] = "help",	    [CMD_VERSION] = "version",
	[CMD_RUN] = "run",		 [CMD_KEYGEN] = "keygen",   [CMD_MIGRATE] = "migrate",
	[CMD_RECEIVE] = "receive", [CMD_UNLOCK] = "unlock",
};

#define ON(c) (1u << (c))
enum opt_kind { OPT_FLAG, OPT_STRING, OPT_COUNT, OPT_LIST };

/*
 * The one option table: the parser, `ckpt COMMAND --help` and (checked by
 * tests/unit/test-opts.c) docs/ckpt.1 all follow it.
 */
struct opt {
	const char *name;
	char letter;
	enum opt_kind kind;
	unsigned cmds;
	size_t offset;
	const char *arg;        /* OPT_STRING, OPT_LIST: the value's name in the help */
	const char *help;       /* one line or two, lowercase */
};

#define CP ON(CMD_CHECKPOINT)
#define RS ON(CMD_RESTART)
#define MG ON(CMD_MIGRATE)
#define RC ON(CMD_RECEIVE)
#define F(field) offsetof(struct cli_args, field)
static const struct opt opts[] = {
	{ "to", 0, OPT_STRING, MG, F(to), "HOST:PORT",
	  "the ckpt receive to move the tree to" },
	{ "rounds", 0, OPT_STRING, MG, F(rounds), "N",
	  "pre-copy: send the memory while the tree runs, then\n"
	  "what it wrote meanwhile, at most N rounds (default\n"
	  "8; 0: no pre-copy, all memory sent while frozen)" },
	{ "listen", 0, OPT_STRING, RC, F(listen), "[ADDR:]PORT",
	  "wait there for one migration (ADDR: 127.0.0.1 by\n"
	  "default; another address needs --key)" },
	{ "output", 'o', OPT_STRING, CP, F(output), "FILE",
	  "where the image goes, - for stdout (a file gets its\n"
	  "name only once the image is complete)" },
	{ "kill", 0, OPT_FLAG, CP, F(kill), NULL,
	  "kill the tree once the image is complete, after\n"
	  "checking that a restart by this user would work\n"
	  "(if not, nothing is killed)" },
	{ "verify", 0, OPT_FLAG, CP, F(verify), NULL,
	  "with --kill: restart the image as a dry run first\n"
	  "(the image must be a file)" },
	{ "leave-frozen", 0, OPT_FLAG, CP, F(leave_frozen), NULL,
	  "leave the tree stopped (SIGSTOP)" },
	{ "shell-job", 'j', OPT_FLAG, CP | RS, F(shell_job), NULL,
	  "a job of a shell: its terminal is outside the image\n"
	  "(checkpoint); made the foreground job of this\n"
	  "terminal (restart)" },
	{ "external", 0, OPT_STRING, CP, F(external), "unix|fd:N[,...]",
	  "unix: a unix socket whose peer is outside the tree\n"
	  "is saved, to connect again to the peer's name at\n"
	  "restart; fd:N: the root's fd N, held outside the\n"
	  "tree (an inherited pipe), is saved as external, to\n"
	  "be given again at restart with --inherit-fd N:FD" },
	{ "inherit-fd", 0, OPT_STRING, RS, F(inherit_fd), "N:FD[,...]",
	  "this process's fd FD becomes the restored root's\n"
	  "fd N, saved by checkpoint --external fd:N" },
	{ "drop-queued-events", 0, OPT_FLAG, CP, F(drop_events), NULL,
	  "inotify/fanotify events not read yet are left out" },
	{ "detach-clients", 0, OPT_FLAG, CP, F(detach_clients), NULL,
	  "a server's clients outside the tree (tmux attach,\n"
	  "screen -r) are detached: their connections and\n"
	  "terminals come back closed" },
	{ "skip-in-flight", 0, OPT_FLAG, CP, F(skip_in_flight), NULL,
	  "TCP connections a listener has not accepted yet\n"
	  "are left out (with --kill their peers get a reset)" },
	{ "compress", 0, OPT_FLAG, CP, F(compress), NULL,
	  "compress memory contents with zstd where it pays\n"
	  "(restart reads them back by itself)" },
	{ "track", 0, OPT_FLAG, CP, F(track), NULL,
	  "leave dirty tracking in the tree, so that a later\n"
	  "checkpoint --parent saves only the pages written since" },
	{ "parent", 0, OPT_STRING, CP, F(parent), "FILE",
	  "incremental: only the pages written since the tracked\n"
	  "checkpoint whose image is FILE; restart reads FILE too" },
	{ "detach", 'd', OPT_FLAG, RS | ON(CMD_RUN), F(detach), NULL,
	  "print the pid alone on a line and return once it\n"
	  "runs; run: the container's stdin, stdout and stderr\n"
	  "are /dev/null (or --output-log)" },
	{ "pidfile", 0, OPT_STRING, RS | RC | ON(CMD_RUN), F(pidfile), "FILE",
	  "write the pid to FILE once it runs" },
	{ "frozen", 0, OPT_FLAG, RS, F(frozen), NULL,
	  "leave the restored tree stopped; SIGCONT resumes it" },
	{ "dry-run", 'n', OPT_FLAG, RS, F(dry_run), NULL,
	  "validate and build the tree, then tear it down" },
	{ "tcp-close", 0, OPT_FLAG, RS | RC, F(tcp_close), NULL,
	  "established TCP connections come back closed (the\n"
	  "program reads ECONNRESET); listening sockets live" },
	{ "accept-changed-files", 0, OPT_FLAG, RS | RC, F(changed_files), NULL,
	  "a file mapped private that changed since the checkpoint\n"
	  "at the same size, too big (over 32 MiB) for its\n"
	  "contents to be compared, is taken as it is now" },
	{ "lazy", 0, OPT_FLAG, RS | RC, F(lazy), NULL,
	  "return once the process runs: its private memory is\n"
	  "filled on first touch and in the background by a\n"
	  "server process that exits when all of it is in" },
	{ "eager", 0, OPT_FLAG, RC, F(eager), NULL,
	  "write all memory before the tree runs (the default is\n"
	  "--lazy from the received images, where it can)" },
	{ "pidns", 0, OPT_FLAG, RS | RC, F(pidns), NULL,
	  "in a new pid namespace under an init of ckpt's, when\n"
	  "the pids are taken here (without privilege: in a\n"
	  "user namespace of one's own)" },
	{ "output-log", 0, OPT_STRING, ON(CMD_RUN), F(output_log), "FILE",
	  "with --detach: the container's stdout and stderr are\n"
	  "appended to FILE" },
	{ "keep-fds", 0, OPT_FLAG, ON(CMD_RUN), F(keep_fds), NULL,
	  "keep the caller's fds above 2 open in the container" },
	{ "hostname", 0, OPT_STRING, ON(CMD_RUN), F(hostname), "NAME",
	  "the container's host name" },
	{ "net", 0, OPT_FLAG, ON(CMD_RUN), F(net), NULL,
	  "a network namespace of its own, joined to the host by\n"
	  "a veth pair (root only)" },
	{ "net-addr", 0, OPT_STRING, ON(CMD_RUN), F(net_addr), "NET/LEN",
	  "with --net: the veth pair's IPv4 subnet (the host\n"
	  "end takes its first address, the container its\n"
	  "second; default a free /30 of 10.200.0.0/16)" },
	{ "net-host-if", 0, OPT_STRING, ON(CMD_RUN), F(net_host_if), "NAME",
	  "with --net: the host end's name (default ckptPID-h)" },
	{ "nat", 0, OPT_FLAG, ON(CMD_RUN), F(nat), NULL,
	  "with --net: what the container sends beyond the host\n"
	  "leaves with the host's address (masquerade; turns the\n"
	  "host's IPv4 forwarding on)" },
	{ "cgroup", 0, OPT_STRING, ON(CMD_RUN), F(cgroup), "NAME",
	  "the container's cgroup, relative to ckpt's (default\n"
	  "ckpt-PID), with a cgroup namespace rooted there" },
	{ "memory-max", 0, OPT_STRING, ON(CMD_RUN), F(memory_max), "N",
	  "memory.max of the container's cgroup" },
	{ "pids-max", 0, OPT_STRING, ON(CMD_RUN), F(pids_max), "N",
	  "pids.max of the container's cgroup" },
	{ "cpu-max", 0, OPT_STRING, ON(CMD_RUN), F(cpu_max), "'QUOTA PERIOD'",
	  "cpu.max of the container's cgroup" },
	{ "cgroup-set", 0, OPT_STRING, ON(CMD_RUN), F(cgroup_set), "FILE=V[,FILE=V...]",
	  "write other limits of the container's cgroup" },
	{ "root", 0, OPT_STRING, ON(CMD_RUN), F(root), "DIR",
	  "the container's root file system: DIR, with a /dev,\n"
	  "/proc, /sys (read-only), /dev/shm and /dev/mqueue of\n"
	  "its own (pivot_root)" },
	{ "overlay", 0, OPT_STRING, ON(CMD_RUN), F(overlay), "LOWER[:LOWER...],UPPER,WORK",
	  "with --root DIR: the root is an overlay of these\n"
	  "directories mounted on DIR (writes go to UPPER)" },
	{ "bind", 0, OPT_LIST, ON(CMD_RUN), F(binds), "SRC:DST[:ro]",
	  "bind the host's SRC on DST in the root (repeatable)" },
	{ "tmpfs", 0, OPT_LIST, ON(CMD_RUN), F(tmpfs), "DST[:size=N]",
	  "a tmpfs of its own on DST in the root, saved with its\n"
	  "files by a checkpoint (repeatable)" },
	{ "json", 0, OPT_FLAG, CP | RS | ON(CMD_INSPECT), F(json), NULL,
	  "one JSON object on stdout instead of the summary\n"
	  "line (inspect: every record, schema ckpt-inspect\n"
	  "version 1, described in docs/IMAGE.md)" },
	{ "records", 0, OPT_FLAG, ON(CMD_INSPECT), F(records), NULL,
	  "every record, field by field, instead of the summary" },
	{ "diff", 0, OPT_FLAG, ON(CMD_INSPECT), F(diff), NULL,
	  "compare two images: ckpt inspect --diff A B (exit\n"
	  "status 1 when they differ)" },
	{ "quiet", 'q', OPT_FLAG, CP | RS | MG | RC, F(quiet), NULL,
	  "no summary line (nor progress line) on stderr" },
	{ "progress-interval", 0, OPT_STRING, CP | RS, F(progress_interval), "MS",
	  "update the progress line shown on a terminal\n"
	  "every MS milliseconds (default 100)" },
	{ "key", 0, OPT_STRING, CP | RS | MG | RC | ON(CMD_INSPECT) | ON(CMD_UNLOCK), F(key), "KEYFILE",
	  "encrypt the image with the key in KEYFILE\n"
	  "(checkpoint); refuse any image not made with it\n"
	  "(restart, inspect, unlock)" },
	{ "log", 0, OPT_STRING, CP | RS | MG | RC, F(log), "FILE",
	  "append an account of what was done, and why\n"
	  "something failed, to FILE" },
	{ "verbose", 'v', OPT_COUNT, ~0u, F(verbose), NULL, "more detail in the log" },
	{ "help", 'h', OPT_FLAG, ~0u, F(help), NULL, "print this help" },
};
#undef F
#undef CP
#undef RS
#undef MG
#undef RC

/* What each command takes and does, for its --help and `ckpt --help`. */
static const struct {
	const char *synopsis;
	const char *summary;    /* one line, for `ckpt --help` */
	const char *text;       /* more, for `ckpt COMMAND --help` */
} cmd_help[CMD_MAX] = {
	[CMD_CHECKPOINT] = { "PID -o FILE [OPTIONS]", "save a process tree to an image",
			     "save process PID, its threads and its children to FILE; the tree\n"
			     "keeps running unless --kill; anything that cannot be saved is\n"
			     "refused before a byte is written, and the tree runs on unharmed\n" },
	[CMD_RESTART] = { "FILE [OPTIONS]", "bring a tree back from an image",
			  "bring the tree of FILE (- for stdin) back with its pids, as a child\n"
			  "of ckpt; without --detach wait for it and exit with its status\n" },
	[CMD_INSPECT] = { "FILE [OPTIONS]", "say what an image holds",
			  "say what the image FILE (- for stdin) holds: its processes as a tree,\n"
			  "its namespaces, its bytes by kind; --records prints every record,\n"
			  "--diff A B compares two images\n" },
	[CMD_CHECK] = { "", "say whether this kernel and user can use ckpt",
			"say which kernel features ckpt needs are present\n" },
	[CMD_RUN] = { "[OPTIONS] -- CMD [ARGS...]",
		      "run a command in a container that can always be restarted",
		      "run CMD as pid 1 of new pid, mount (own /proc), uts and ipc namespaces\n"
		      "(and a user namespace for a user without privilege): a container whose\n"
		      "pids are always free at restart; fds above 2 are closed unless\n"
		      "--keep-fds; being pid 1 inside, CMD ignores signals it has no\n"
		      "handler for (a plain kill PID): use kill -KILL, or its own way to stop\n" },
	[CMD_KEYGEN] = { "KEYFILE", "write a new random key for --key",
			 "write a new random key for --key to KEYFILE (a new file, mode 0600)\n" },
	[CMD_MIGRATE] = { "PID --to HOST:PORT [OPTIONS]",
			  "move a tree to a ckpt receive on another host",
			  "checkpoint the tree of PID into a ckpt receive at HOST:PORT, which\n"
			  "restores it stopped; the tree is killed here once it is restored\n"
			  "there, and runs there once it is dead here; if the target fails,\n"
			  "the tree runs on here; prints the downtime. By default the memory\n"
			  "is sent first while the tree runs (pre-copy rounds, --rounds), and\n"
			  "the tree is frozen only for what it wrote since and the rest\n" },
	[CMD_RECEIVE] = { "--listen [ADDR:]PORT [OPTIONS]", "restore one tree sent by ckpt migrate",
			  "wait for one ckpt migrate, restore its tree, run it once the source\n"
			  "has given it up, print its pid and exit; the tree is removed again\n"
			  "if the source goes away first\n" },
	[CMD_UNLOCK] = { "FILE [OPTIONS]", "remove the network lock an image's checkpoint left",
			 "remove the network lock that checkpoint --kill of FILE left on this\n"
			 "host, once the image has been restarted on another host (a restart\n"
			 "on this host removes it by itself)\n" },
	[CMD_HELP] = { "[COMMAND]", "print help (of one command)", "" },
	[CMD_VERSION] = { "", "print the version", "" },
};

static void print_option(FILE *f, const struct opt *o)
{
	const char *indent = "\n                          ";
	char head[64];
	int n;
	if (o->letter)
		n = snprintf(head, sizeof(head), "  -%c, --%s%s%s", o->letter, o->name,
			     o->arg ? " " : "", o->arg ? o->arg : "");
	else /* aligned with the names after "-x, " */
		n = snprintf(head, sizeof(head), "      --%s%s%s", o->name, o->arg ? " " : "",
			     o->arg ? o->arg : "");
	fprintf(f, "%-26s%s", head, n >= 26 ? indent : "");
	for (const char *p = o->help; *p; p++) {
		if (*p == '\n')
			fputs(indent, f);
		else
			fputc(*p, f);
	}
	fputc('\n', f);
}

void cli_usage(FILE *f, enum cli_cmd cmd)
{
	if (cmd <= CMD_NONE || cmd >= CMD_MAX || cmd == CMD_HELP || cmd == CMD_VERSION) {
		fputs("usage: ckpt COMMAND [OPTIONS]\n\ncommands:\n", f);
		for (int c = 1; c < CMD_MAX; c++)
			fprintf(f, "  %-12s%s\n", cli_cmd_names[c], cmd_help[c].summary);
		fputs("\n'ckpt COMMAND --help' lists a command's options; the manual is 'man ckpt'\n"
		      "('man ./docs/ckpt.1' in the source tree)\n", f);
		return;
	}
	fprintf(f, "usage: ckpt %s%s%s\n\n%s", cli_cmd_names[cmd],
		*cmd_help[cmd].synopsis ? " " : "", cmd_help[cmd].synopsis, cmd_help[cmd].text);
	fputs("\noptions:\n", f);
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		if (opts[i].cmds & ON(cmd))
			print_option(f, &opts[i]);
}

const char *cli_option(size_t i, char *letter, unsigned *cmds)
{
	if (i >= sizeof(opts) / sizeof(opts[0]))
		return NULL;
	*letter = opts[i].letter;
	*cmds = opts[i].cmds;
	return opts[i].name;
}

static __attribute__((format(printf, 3, 4))) int fail(char *err, size_t len, const char *fmt,
							 ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static const struct opt *find(const char *name, size_t nlen, char letter)
{
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		if (letter ? opts[i].letter == letter
			   : strlen(opts[i].name) == nlen && !strncmp(opts[i].name, name, nlen))
			return &opts[i];
	}
	return NULL;
}

static int apply(const struct opt *o, struct cli_args *a, const char *value)
{
	char *p = (char *)a + o->offset;
	switch (o->kind) {
	case OPT_FLAG:
		*(bool *)p = true;
		break;
	case OPT_COUNT:
		(*(int *)p)++;
		break;
	case OPT_STRING:
		if (*(const char **)p && (o->offset == offsetof(struct cli_args, external) ||
					  o->offset == offsetof(struct cli_args, inherit_fd)))
			return -EEXIST; /* a list: given once, comma-separated */
		*(const char **)p = value;
		break;
	case OPT_LIST: {
		struct cli_list *l = (struct cli_list *)p;
		if (l->n == CLI_LIST_MAX)
			return -E2BIG;
		l->v[l->n++] = value;
		break;
	}
	}
	return 0;
}

/* A fd number at p (n bytes): 0 and up, below 2^20; -1 if not one. */
static int fd_number(const char *p, size_t n)
{
	char buf[16], *end;
	if (!n || n >= sizeof(buf) || p[0] < '0' || p[0] > '9')
		return -1;
	memcpy(buf, p, n);
	buf[n] = '\0';
	errno = 0;
	long v = strtol(buf, &end, 10);
	return errno || *end || v >= (1 << 20) ? -1 : (int)v;
}

/* --external KIND[,KIND...]: unix, or fd:N (the root's fd N) */
static int parse_external(struct cli_args *a, char *err, size_t len)
{
	for (const char *p = a->external; p;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		int fd = n > 3 && !strncmp(p, "fd:", 3) ? fd_number(p + 3, n - 3) : -1;
		if (n == 4 && !strncmp(p, "unix", 4)) {
			a->ext_unix = true;
		} else if (fd >= 0) {
			for (size_t i = 0; i < a->n_ext_fds; i++)
				if (a->ext_fds[i] == fd)
					return fail(err, len, "--external '%s': fd %d given twice",
						    a->external, fd);
			if (a->n_ext_fds == CLI_MAX_FDS)
				return fail(err, len, "--external '%s': more than %d fds",
					    a->external, CLI_MAX_FDS);
			a->ext_fds[a->n_ext_fds++] = fd;
		} else {
			return fail(err, len, "--external '%s': each item is 'unix' or 'fd:N' (N "
				    "a number of the root's fd)", a->external);
		}
		p = end ? end + 1 : NULL;
	}
	return 0;
}

/* --inherit-fd N:FD[,N:FD...]: this process's FD becomes the root's fd N */
static int parse_inherit(struct cli_args *a, char *err, size_t len)
{
	for (const char *p = a->inherit_fd; p;) {
		const char *end = strchr(p, ','), *colon = strchr(p, ':');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		if (!colon || (size_t)(colon - p) >= n)
			colon = NULL;
		int fd = colon ? fd_number(p, (size_t)(colon - p)) : -1;
		int local = colon ? fd_number(colon + 1, n - (size_t)(colon - p) - 1) : -1;
		if (fd < 0 || local < 0)
			return fail(err, len, "--inherit-fd '%s': each item is N:FD (the image's "
				    "fd N, this process's fd FD)", a->inherit_fd);
		for (size_t i = 0; i < a->n_inherit; i++)
			if (a->inherit[i].fd == fd)
				return fail(err, len, "--inherit-fd '%s': fd %d given twice",
					    a->inherit_fd, fd);
		if (a->n_inherit == CLI_MAX_FDS)
			return fail(err, len, "--inherit-fd '%s': more than %d fds", a->inherit_fd,
				    CLI_MAX_FDS);
		a->inherit[a->n_inherit++] = (struct cli_fd_pair){ fd, local };
		p = end ? end + 1 : NULL;
	}
	return 0;
}

static int positional(struct cli_args *a, const char *arg, int *npos, char *err, size_t len)
{
	if ((a->cmd == CMD_CHECKPOINT || a->cmd == CMD_MIGRATE) && *npos == 0) {
		char *end;
		long v = strtol(arg, &end, 10);
		if (!*arg || *end || v <= 0 || v > 0x3fffffff)
			return fail(err, len, "'%s' is not a pid", arg);
		a->pid = (pid_t)v;
	} else if ((a->cmd == CMD_RESTART || a->cmd == CMD_INSPECT || a->cmd == CMD_UNLOCK) &&
		   *npos == 0) {
		a->image = arg;
	} else if (a->cmd == CMD_INSPECT && *npos == 1) {
		a->image2 = arg;
	} else if (a->cmd == CMD_HELP && *npos == 0) {
		for (int c = 1; c < CMD_MAX; c++)
			if (!strcmp(arg, cli_cmd_names[c]))
				a->topic = c;
		if (a->topic == CMD_NONE)
			return fail(err, len, "no command '%s'; try 'ckpt help'", arg);
	} else if (a->cmd == CMD_KEYGEN && *npos == 0) {
		a->key = arg;
	} else {
		return fail(err, len, "unexpected argument '%s'", arg);
	}
	(*npos)++;
	return 0;
}

/* argv[1]: the command (or --help, --version) */
static enum cli_cmd parse_command(const char *arg)
{
	for (int c = 1; c < CMD_MAX; c++)
		if (!strcmp(arg, cli_cmd_names[c]))
			return c;
	if (!strcmp(arg, "--help") || !strcmp(arg, "-h"))
		return CMD_HELP;
	if (!strcmp(arg, "--version"))
		return CMD_VERSION;
	return CMD_NONE;
}

/* One option at argv[*i] (its value may be the next argument). */
static int parse_option(struct cli_args *a, int argc, char *const argv[], int *i, char *err,
			size_t len)
{
	const char *arg = argv[*i], *value = NULL;
	const struct opt *o;

	if (arg[1] == '-') {
		const char *eq = strchr(arg + 2, '=');
		size_t nlen = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
		o = find(arg + 2, nlen, 0);
		value = eq ? eq + 1 : NULL;
	} else {
		o = arg[2] ? NULL : find(NULL, 0, arg[1]);
	}
	if (!o || !(o->cmds & ON(a->cmd)))
		return fail(err, len, "unknown option '%s' (see 'ckpt %s --help')", arg,
			    cli_cmd_names[a->cmd]);
	if ((o->kind == OPT_STRING || o->kind == OPT_LIST) && !value) {
		if (*i + 1 >= argc)
			return fail(err, len, "option '%s' needs a value", arg);
		value = argv[++*i];
	} else if (o->kind != OPT_STRING && o->kind != OPT_LIST && value) {
		return fail(err, len, "option '%s' takes no value", arg);
	}
	if (apply(o, a, value) < 0)
		return fail(err, len, o->kind == OPT_LIST ? "option '--%s' is given more than 32 times"
						  : "option '--%s' given twice: give its items once, "
						    "separated by commas",
			    o->name);
	return 0;
}

/* Every argument after the command: options, positionals, run's command. */
static int parse_args(struct cli_args *a, int argc, char *const argv[], char *err, size_t len)
{
	bool only_pos = false;
	int npos = 0;

	for (int i = 2; i < argc; i++) {
		const char *arg = argv[i];
		int r;
		if (a->cmd == CMD_RUN && (only_pos || arg[0] != '-')) {
			/* the command: the rest is its own */
			a->run_argv = argv + i;
			a->run_argc = argc - i;
			break;
		}
		if (only_pos || arg[0] != '-' || !strcmp(arg, "-")) {
			r = positional(a, arg, &npos, err, len);
		} else if (!strcmp(arg, "--")) {
			only_pos = true;
			continue;
		} else {
			r = parse_option(a, argc, argv, &i, err, len);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static bool is_stdout(const char *path)
{
	return path && !strcmp(path, "-");
}

static int check_checkpoint(const struct cli_args *a, char *err, size_t len)
{
	if (!a->pid)
		return fail(err, len, "%s", "checkpoint needs a pid");
	if (!a->output)
		return fail(err, len, "%s", "checkpoint needs -o FILE (or -o - for stdout)");
	if (a->kill && a->leave_frozen)
		return fail(err, len, "%s", "--kill and --leave-frozen exclude each other");
	if (a->verify && !a->kill)
		return fail(err, len, "%s", "--verify goes with --kill");
	if (a->verify && is_stdout(a->output))
		return fail(err, len, "%s", "--verify needs the image in a file, not on stdout");
	if (a->json && is_stdout(a->output))
		return fail(err, len, "%s",
			    "--json writes to stdout, where -o - writes the image: use -o FILE");
	return 0;
}

static int check_run(const struct cli_args *a, char *err, size_t len)
{
	const char *cg = a->cgroup;
	if (!a->run_argc)
		return fail(err, len, "%s",
			    "run needs a command: ckpt run [OPTIONS] -- CMD [ARGS...]");
	if (a->output_log && !a->detach)
		return fail(err, len, "%s", "--output-log goes with --detach");
	if (cg && (!cg[0] || cg[0] == '/' || strstr(cg, "..") || strlen(cg) > 255))
		return fail(err, len, "cgroup name '%s' is not a relative path", cg);
	if (a->hostname && strlen(a->hostname) > 64)
		return fail(err, len, "hostname '%s' is longer than 64 bytes", a->hostname);
	if ((a->binds.n || a->tmpfs.n || a->overlay) && !a->root)
		return fail(err, len, "%s", "--bind, --tmpfs and --overlay go with --root");
	const char *c1 = a->overlay ? strchr(a->overlay, ',') : NULL;
	const char *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
	if (a->overlay && (!c2 || c1 == a->overlay || c2 == c1 + 1 || !c2[1] || strchr(c2 + 1, ',')))
		return fail(err, len, "--overlay '%s' is not LOWER[:LOWER...],UPPER,WORK", a->overlay);
	for (int i = 0; i < a->binds.n; i++) {
		const char *b = a->binds.v[i], *c = strchr(b, ':');
		const char *o = c ? strchr(c + 1, ':') : NULL;
		if (!c || c == b || c[1] != '/' || (o && strcmp(o, ":ro")))
			return fail(err, len, "--bind '%s' is not SRC:/DST or SRC:/DST:ro", b);
	}
	for (int i = 0; i < a->tmpfs.n; i++) {
		const char *t = a->tmpfs.v[i], *c = strchr(t, ':');
		if (t[0] != '/' || (c && strncmp(c, ":size=", 6)))
			return fail(err, len, "--tmpfs '%s' is not /DST or /DST:size=N", t);
	}
	if ((a->net_addr || a->net_host_if || a->nat) && !a->net)
		return fail(err, len, "%s", "--net-addr, --net-host-if and --nat go with --net");
	if (a->net_host_if && (!a->net_host_if[0] || strlen(a->net_host_if) > 15 ||
			       strpbrk(a->net_host_if, "/: \t\n\"\\")))
		return fail(err, len, "'%s' is not a link name (1-15 bytes, no '/', ':' or space)",
			    a->net_host_if);
	return 0;
}

/* What a parsed command line must not be, command by command. */
static int check_args(struct cli_args *a, char *err, size_t len)
{
	if (a->cmd == CMD_CHECKPOINT && check_checkpoint(a, err, len) < 0)
		return -EINVAL;
	if (parse_external(a, err, len) < 0 || parse_inherit(a, err, len) < 0)
		return -EINVAL;
	if ((a->cmd == CMD_RESTART || a->cmd == CMD_INSPECT || a->cmd == CMD_UNLOCK) && !a->image)
		return fail(err, len, "%s needs an image file (or - for stdin)",
			    cli_cmd_names[a->cmd]);
	if (a->cmd == CMD_KEYGEN && (!a->key || is_stdout(a->key)))
		return fail(err, len, "%s", "keygen needs a file to write the key to");
	if (a->key && (!*a->key || is_stdout(a->key)))
		return fail(err, len, "%s",
			    "--key needs a file name (the key is not read from stdin)");
	if (a->cmd == CMD_RUN && check_run(a, err, len) < 0)
		return -EINVAL;
	if (a->cmd == CMD_MIGRATE && (!a->pid || !a->to))
		return fail(err, len, "%s", "migrate needs a pid and --to HOST:PORT");
	if (a->cmd == CMD_RECEIVE && !a->listen)
		return fail(err, len, "%s", "receive needs --listen [ADDR:]PORT");
	if (a->cmd == CMD_INSPECT && (a->diff != !!a->image2))
		return fail(err, len, "%s", "inspect takes two images with --diff, else one");
	if (a->diff && (a->json || a->records))
		return fail(err, len, "%s", "--diff prints a comparison: not with --json or --records");
	if (a->cmd == CMD_RESTART && a->frozen && a->dry_run)
		return fail(err, len, "%s", "--frozen and --dry-run exclude each other");
	return 0;
}

int cli_parse(int argc, char *const argv[], struct cli_args *ret, char *err, size_t len)
{
	struct cli_args a = {.cmd = CMD_NONE};
	int r;

	if (argc < 2)
		return fail(err, len, "%s", "no command given; try 'ckpt help'");
	a.cmd = parse_command(argv[1]);
	if (a.cmd == CMD_NONE)
		return fail(err, len, "unknown command '%s'; try 'ckpt help'", argv[1]);
	if ((r = parse_args(&a, argc, argv, err, len)) < 0)
		return r;
	/* help and check need nothing else */
	bool bare = a.help || a.cmd == CMD_HELP || a.cmd == CMD_VERSION || a.cmd == CMD_CHECK;
	if (!bare && (r = check_args(&a, err, len)) < 0)
		return r;
	*ret = a;
	return 0;
}
