/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A socket's classic BPF filter (SO_ATTACH_FILTER), for the socket kinds
 * (inet, unix): read back with SO_GET_FILTER, which gives the program as
 * it was attached, and attached again at restart, with SO_LOCK_FILTER. An
 * eBPF program (SO_ATTACH_BPF) has no such copy: the kinds refuse it.
 * Library-like: no log.
 */
#ifndef CKPT_KINDS_SK_FILTER_H
#define CKPT_KINDS_SK_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The filter of s as bytes of struct sock_filter (malloc'd; NULL and 0
 * when there is none) and whether it is locked; -EACCES for an eBPF one. */
int sk_filter_read(int s, uint8_t **ret, size_t *ret_len, bool *ret_locked)
	__attribute__((warn_unused_result));
/* Well formed for sk_filter_apply: whole instructions, 1 to 4096 of them. */
bool sk_filter_ok(size_t len);
/* Attaches it to s (the kernel checks the program), then locks it if asked. */
int sk_filter_apply(int s, const uint8_t *prog, size_t len, bool locked)
	__attribute__((warn_unused_result));

#endif
