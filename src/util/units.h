/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sizes for people to read. */
#ifndef CKPT_UNITS_H
#define CKPT_UNITS_H

#include <stdio.h>

/* "64.2 MiB", "812 bytes" */
static inline void human_size(char *buf, size_t len, unsigned long long n)
{
	static const char *const units[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu bytes", n);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
}

#endif
