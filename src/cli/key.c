/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Key files for sealed images (--key FILE, ckpt keygen FILE): 32 random
 * bytes, nothing else, in a file only its owner can read. A key file that
 * other users can read or write is refused, as ssh refuses such a private
 * key: a key others may read seals nothing, one others may write lets them
 * choose the key. The bytes stay in one struct cli_key, wiped with
 * sodium_memzero() on every way out.
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "cli/cli.h"
#include "util/cleanup.h"

_Static_assert(sizeof(((struct cli_key *)0)->bytes) == CKPT_KEY_BYTES, "a key is CKPT_KEY_BYTES");

void cli_key_wipe(struct cli_key *k)
{
	sodium_memzero(k, sizeof(*k));
}

int cli_key_load(const char *path, struct cli_key *ret)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	ssize_t k;

	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		fprintf(stderr, "ckpt: cannot read key file '%s': %s\n", path, strerror(e));
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "ckpt: key file '%s' is not a regular file\n", path);
		return -EINVAL;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		fprintf(stderr, "ckpt: key file '%s' belongs to uid %u, not to you (uid %u) or root\n",
			path, (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (st.st_mode & 077) {
		fprintf(stderr,
			"ckpt: key file '%s' is open to other users (mode %04o): it must be "
			"readable by its owner only (chmod 600)\n",
			path, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	if (st.st_size != CKPT_KEY_BYTES) {
		fprintf(stderr,
			"ckpt: key file '%s' holds %lld bytes, a key is %d (make one with "
			"'ckpt keygen FILE')\n",
			path, (long long)st.st_size, CKPT_KEY_BYTES);
		return -EINVAL;
	}
	do
		k = pread(fd, ret->bytes, sizeof(ret->bytes), 0);
	while (k < 0 && errno == EINTR);
	if (k != (ssize_t)sizeof(ret->bytes)) {
		int e = k < 0 ? errno : EIO;
		fprintf(stderr, "ckpt: cannot read key file '%s': %s\n", path, strerror(e));
		cli_key_wipe(ret);
		return -e;
	}
	ret->set = true;
	return 0;
}

/* ckpt keygen FILE: a new key, in a new file (never over an existing one) */
int cmd_keygen(const struct cli_args *a)
{
	_cleanup_(cli_key_wipe) struct cli_key key = { 0 };
	int fd, e = 0;

	if (sodium_init() < 0) {
		fputs("ckpt: keygen: libsodium cannot be initialised\n", stderr);
		return 1;
	}
	fd = open(a->key, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "ckpt: cannot create key file '%s': %m\n", a->key);
		return 1;
	}
	randombytes_buf(key.bytes, sizeof(key.bytes));
	if (fchmod(fd, 0600) < 0)
		e = errno;
	for (size_t done = 0; !e && done < sizeof(key.bytes);) {
		ssize_t k = write(fd, key.bytes + done, sizeof(key.bytes) - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			e = k < 0 ? errno : EIO;
		else
			done += (size_t)k;
	}
	if (!e && fsync(fd) < 0)
		e = errno;
	if (close(fd) < 0 && !e)
		e = errno;
	if (e) {
		unlink(a->key); /* made by this call (O_EXCL): no half key left */
		fprintf(stderr, "ckpt: cannot write key file '%s': %s\n", a->key, strerror(e));
		return 1;
	}
	return 0;
}
