/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Scope-bound cleanup, in the manner of systemd's fd-util.h/alloc-util.h:
 * a variable marked _cleanup_close_ is closed when it goes out of scope;
 * TAKE_FD/TAKE_PTR hand ownership out and leave -1/NULL behind. Every
 * destructor accepts -1/NULL.
 */
#ifndef CKPT_CLEANUP_H
#define CKPT_CLEANUP_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
static inline void freep(void *p)
{
	free(*(void **)p);
}
static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

static inline void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_closedir_ _cleanup_(closedirp)

#define TAKE_FD(fd)                    \
	({                             \
		int _fd_ = (fd);       \
		(fd) = -1;             \
		_fd_;                  \
	})
#define TAKE_PTR(p)                        \
	({                                 \
		typeof(p) _p_ = (p);       \
		(p) = NULL;                \
		_p_;                       \
	})

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define ALIGN_UP(x, a) (((x) + (a)-1) & ~((typeof(x))(a)-1))
#define _wur_ __attribute__((warn_unused_result))

#endif
