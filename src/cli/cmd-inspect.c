/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "cli/cli.h"
#include "util/cleanup.h"

static int open_image(const char *path)
{
	int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : dup(STDIN_FILENO);
	if (fd < 0)
		fprintf(stderr, "ckpt: cannot open '%s': %s\n", path, strerror(errno));
	return fd;
}

int cmd_inspect(const struct cli_args *a)
{
	char err[512] = "";
	_cleanup_(cli_key_wipe) struct cli_key key = { 0 };
	_cleanup_close_ int fd = -1, fd2 = -1;
	const void *k;
	int r;

	if (a->key && cli_key_load(a->key, &key) < 0)
		return 1;
	if ((fd = open_image(a->image)) < 0 || (a->image2 && (fd2 = open_image(a->image2)) < 0))
		return 1;
	fflush(stdout);
	k = cli_key_ptr(&key);
	if (a->diff)
		r = ckpt_inspect_diff(fd, fd2, STDOUT_FILENO, k, sizeof(key.bytes), err, sizeof(err));
	else if (a->records || a->json)
		r = ckpt_inspect_key(fd, STDOUT_FILENO, a->json, k, sizeof(key.bytes), err,
				     sizeof(err));
	else
		r = ckpt_inspect_summary(fd, STDOUT_FILENO, k, sizeof(key.bytes), err, sizeof(err));
	if (r == -ENOKEY) {
		fputs("ckpt: inspect failed: this image is encrypted: use --key FILE\n", stderr);
		return 1;
	}
	if (r < 0) {
		fprintf(stderr, "ckpt: inspect failed: %s\n", err[0] ? err : strerror(-r));
		return 1;
	}
	return r; /* --diff: 1 when the images differ */
}

int cmd_unlock(const struct cli_args *a)
{
	char err[512] = "", name[64] = "";
	_cleanup_(cli_key_wipe) struct cli_key key = { 0 };
	_cleanup_close_ int fd = -1;

	if (a->key && cli_key_load(a->key, &key) < 0)
		return 1;
	if ((fd = open_image(a->image)) < 0)
		return 1;
	int r = ckpt_unlock(fd, cli_key_ptr(&key), sizeof(key.bytes), name, sizeof(name), err,
			    sizeof(err));
	if (r == -ENOKEY) {
		fputs("ckpt: unlock failed: this image is encrypted: use --key FILE\n", stderr);
		return 1;
	}
	if (r < 0) {
		fprintf(stderr, "ckpt: unlock failed: %s\n", err[0] ? err : strerror(-r));
		return 1;
	}
	if (!name[0])
		fputs("ckpt: the image's checkpoint left no network lock\n", stderr);
	else
		fprintf(stderr, "ckpt: network lock %s %s\n", name,
			r ? "removed" : "was not here (removed already, or another host's)");
	return 0;
}
