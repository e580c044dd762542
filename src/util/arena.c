/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "util/arena.h"

#if defined(__SANITIZE_ADDRESS__)
#define ARENA_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_MALLOC 1
#endif
#endif

#define ARENA_FIRST (64u << 10)
#define ARENA_MAX (2u << 20)

struct arena_block {
	struct arena_block *next;
	size_t size; /* mapped, this header included */
	size_t used;
	char pad[8];
};

#ifdef ARENA_MALLOC
void *arena_alloc(struct arena *a, size_t size)
{
	struct arena_block *b = size < SIZE_MAX - sizeof(*b) ? malloc(sizeof(*b) + size) : NULL;
	if (!b)
		return NULL;
	b->next = a->blocks;
	a->blocks = b;
	return b + 1;
}

void arena_free(struct arena *a)
{
	for (struct arena_block *b = a->blocks, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	*a = (struct arena){ .dontfork = a->dontfork };
}
#else
static struct arena_block *arena_map(struct arena *a, size_t need)
{
	size_t size = a->next_size ? a->next_size : ARENA_FIRST;
	if (size < ARENA_MAX)
		a->next_size = size * 2;
	bool big = need > size - sizeof(struct arena_block);
	if (big && need > SIZE_MAX - sizeof(struct arena_block) - 4095)
		return NULL;
	if (big)
		size = (need + sizeof(struct arena_block) + 4095) & ~(size_t)4095;
	/* faulted in by the one call (a page fault each costs more here);
	 * not a large piece, which may be a forged count's */
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (big ? 0 : MAP_POPULATE), -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	if (a->dontfork)
		(void)madvise(m, size, MADV_DONTFORK);
	struct arena_block *b = m;
	b->size = size;
	b->used = sizeof(*b);
	return b;
}

void *arena_alloc(struct arena *a, size_t size)
{
	if (size > SIZE_MAX - 15)
		return NULL;
	size = (size + 15) & ~(size_t)15;
	struct arena_block *b = a->blocks;
	if (!b || b->size - b->used < size) {
		struct arena_block *nb = arena_map(a, size);
		if (!nb)
			return NULL;
		/* a block of its own for a large piece: the current one goes on */
		if (b && nb->size - nb->used - size < b->size - b->used) {
			nb->next = b->next;
			b->next = nb;
			b = nb;
		} else {
			nb->next = b;
			a->blocks = b = nb;
		}
	}
	void *p = (char *)b + b->used;
	b->used += size;
	return p;
}

void arena_free(struct arena *a)
{
	for (struct arena_block *b = a->blocks, *next; b; b = next) {
		next = b->next;
		munmap(b, b->size);
	}
	*a = (struct arena){ .dontfork = a->dontfork };
}
#endif

static void *pb_alloc(void *data, size_t size)
{
	return arena_alloc(data, size);
}

static void pb_free(void *data, void *ptr)
{
	(void)data;
	(void)ptr;
}

ProtobufCAllocator arena_protobuf(struct arena *a)
{
	return (ProtobufCAllocator){ .alloc = pb_alloc, .free = pb_free, .allocator_data = a };
}
