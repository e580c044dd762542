/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "ckpt.h"
#include "util/features.h"

int ckpt_check(int out_fd)
{
	struct features f;
	int missing = 0, denied = 0;
	char line[256];

	features_probe(&f);
	for (int i = 0; i < FEAT_MAX; i++) {
		const struct feature_result *r = &f.f[i];
		int n = snprintf(line, sizeof(line), "%-8s %s%s%s%s\n",
				 r->present ? "present" : r->denied ? "DENIED" : "MISSING",
				 feature_names[i],
				 r->required ? "" : " (optional)", r->detail[0] ? ": " : "",
				 r->detail);
		if (write(out_fd, line, n) < 0)
			return -errno;
		if (!r->present && r->required && r->denied)
			denied++;
		else if (!r->present && r->required)
			missing++;
	}
	return missing ? -ENOTSUP : denied ? -EPERM : 0;
}
