/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* tcp_pair.c over IPv6 (::1) */
#define FAMILY 6
#include "tcp_pair.c"
