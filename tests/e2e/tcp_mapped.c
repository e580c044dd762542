/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* tcp_pair.c over a dual-stack IPv6 listener, v4-mapped */
#define FAMILY 46
#include "tcp_pair.c"
