/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A bump allocator for many small objects freed together: arena_alloc()
 * hands out 16-byte aligned pieces of blocks it maps (the first 64 KiB,
 * each next one twice the size, up to 2 MiB; a larger request gets a block
 * of its own), each block faulted in by one call rather than a page at a
 * time; nothing is freed before arena_free(), which unmaps the blocks
 * without touching them. With dontfork, the blocks are not copied into a
 * child forked meanwhile (MADV_DONTFORK): the child must not use them, and
 * writing to them costs no copy-on-write fault. arena_protobuf() is a ProtobufCAllocator over it
 * whose free does nothing.
 *
 * Under AddressSanitizer every piece is a malloc of its own (kept in a
 * list, freed by arena_free), so that the sanitizer still sees each
 * object's bounds. A zeroed struct arena is empty and ready. No global,
 * nothing logged.
 */
#ifndef CKPT_ARENA_H
#define CKPT_ARENA_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

struct arena_block;

struct arena {
	struct arena_block *blocks; /* the newest first */
	size_t next_size;           /* of the next block mapped */
	bool dontfork;              /* blocks left out of a fork's child */
};

/* size bytes, 16-byte aligned, uninitialised; NULL when out of memory. */
void *arena_alloc(struct arena *a, size_t size);
/* Everything arena_alloc gave, at once; a is empty again. */
void arena_free(struct arena *a);
/* An allocator for protobuf_c_message_unpack() into a (valid while a is). */
ProtobufCAllocator arena_protobuf(struct arena *a);

#endif
