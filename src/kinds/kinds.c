/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "kinds/kinds.h"

#include "kinds/fdobj.h"

#include <stdio.h>

const struct kind_info kinds[KIND_MAX] = {
#define KIND(name, id, desc) [KIND_##name] = { #name, id, desc, &name##_ops },
#include "kinds/kinds.def"
#undef KIND
};

const struct kind_info *kind_by_rec(uint32_t type, enum kind *ret_kind)
{
	uint32_t id = REC_KIND_ID(type);
	for (int k = 0; k < KIND_MAX; k++) {
		if (kinds[k].id == id) {
			if (ret_kind)
				*ret_kind = k;
			return &kinds[k];
		}
	}
	return NULL;
}

const char *rec_type_name(uint32_t type, char *buf, size_t len)
{
	const struct kind_info *ki = kind_by_rec(type, NULL);
	if (type == REC_CORE_TREE)
		snprintf(buf, len, "tree");
	else if (type == REC_CORE_TASK)
		snprintf(buf, len, "task-begin");
	else if (type == IMG_REC_TRAILER)
		snprintf(buf, len, "trailer");
	else if (type == IMG_REC_INDEX)
		snprintf(buf, len, "index");
	else if (ki)
		snprintf(buf, len, "%s/%u", ki->name, REC_SUB(type));
	else
		snprintf(buf, len, "unknown type 0x%x", type);
	return buf;
}

size_t kind_claim_order(enum kind order[KIND_MAX])
{
	size_t n = 0;
	for (int k = 0; k < KIND_MAX; k++) {
		if (!kinds[k].ops->fd_claim && !kinds[k].ops->file)
			continue;
		/* insertion by rank, 0 last; kinds.def order among equals */
		unsigned rk = kinds[k].ops->fd_claim_rank ? kinds[k].ops->fd_claim_rank : ~0u;
		size_t i = n;
		for (; i > 0; i--) {
			unsigned ri = kinds[order[i - 1]].ops->fd_claim_rank;
			if ((ri ? ri : ~0u) <= rk)
				break;
			order[i] = order[i - 1];
		}
		order[i] = (enum kind)k;
		n++;
	}
	return n;
}
