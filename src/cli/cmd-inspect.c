/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "cli/cli.h"
#include "util/cleanup.h"

int cmd_inspect(const struct cli_args *a)
{
	char err[512] = "";
	_cleanup_(cli_key_wipe) struct cli_key key = { 0 };

	if (a->key && cli_key_load(a->key, &key) < 0)
		return 1;
	int fd = strcmp(a->image, "-") ? open(a->image, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;

	if (fd < 0) {
		fprintf(stderr, "ckpt: cannot open '%s': %s\n", a->image, strerror(errno));
		return 1;
	}
	fflush(stdout);
	int r = ckpt_inspect_key(fd, STDOUT_FILENO, a->json, cli_key_ptr(&key), sizeof(key.bytes),
				 err, sizeof(err));
	if (fd != STDIN_FILENO)
		close(fd);
	if (r == -ENOKEY) {
		fputs("ckpt: inspect failed: this image is encrypted: use --key FILE\n", stderr);
		return 1;
	}
	if (r < 0) {
		fprintf(stderr, "ckpt: inspect failed: %s\n", err[0] ? err : strerror(-r));
		return 1;
	}
	return 0;
}
