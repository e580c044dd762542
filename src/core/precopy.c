/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Live migration's pre-copy, the target's part: each round's image arrives
 * as a stream (sealed, between hosts) and is kept as a plain image file,
 * named by its id, in a directory of the target's; the final image's chain
 * (MmTrack.parent_path: the parent's id in hex) is resolved there at
 * restart (RESTART_PLAIN_PARENTS, mm-chain.c). The source's part is the
 * CKPT_PRECOPY checkpoint (sequence.c's "live" steps, mm.c's dump_live).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/ctx.h"
#include "img/seal.h"

long long ckpt_unseal(int fd, int out_fd, const void *key, size_t key_len, unsigned char id[16],
		      char *errbuf, size_t errbuf_len)
{
	struct img_reader r = {0};
	struct img_error err = {0};
	long long ret;

	if (errbuf && errbuf_len)
		errbuf[0] = '\0';
	if (key && key_len != IMG_KEY_BYTES)
		return -EINVAL;
	ret = img_reader_open_key(&r, fd, key, key_len, &err);
	if (ret == 0)
		ret = img_reader_validate(&r, &err);
	if (ret < 0) {
		if (errbuf && errbuf_len)
			snprintf(errbuf, errbuf_len, "%s",
				 err.reason[0] ? err.reason : strerror((int)-ret));
		img_reader_close(&r);
		return ret;
	}
	memcpy(id, r.hdr.image_id, 16);
	for (size_t done = 0; done < r.size;) {
		ssize_t n = write(out_fd, r.base + done, r.size - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			if (errbuf && errbuf_len)
				snprintf(errbuf, errbuf_len, "cannot write the plain image: %s",
					 strerror((int)-ret));
			break;
		}
		done += (size_t)n;
	}
	if (ret == 0)
		ret = (long long)r.size;
	img_reader_close(&r);
	return ret;
}
