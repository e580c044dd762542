/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* mm's restart state, shared by mm.c and mm-lazy.c only. */
#ifndef CKPT_MM_RST_H
#define CKPT_MM_RST_H

#include <stdbool.h>
#include <stdint.h>

#include "img/img.h"
#include "img/pages.h"
#include "mm.pb-c.h"

enum {
	MM_ENTRY = REC_TYPE(KID_mm, 1),
	/* 2 and 3 were a pagemap and its pages, before the page store */
	MM_PAGES = REC_TYPE(KID_mm, 4), /* a page store record (img/pages.h) */
	MM_TRACK = REC_TYPE(KID_mm, 5), /* MmTrack: incremental (mm-dirty.c, mm-chain.c) */
};

#define PAGE 4096ull
#define TASK_SIZE_MAX 0x7ffffffff000ull

/* fds passed into the puppet for its mappings, by file objref or shmem id */
struct remote_files {
	uint64_t key[64];
	int fd[64];
	int n;
};

/* A page record's data and checksum (RESTART_LAZY: checked before use). */
struct mm_rec {
	const uint8_t *data;
	uint64_t len;
	uint32_t crc;
	bool crc_ok;            /* the lazy server's: checked */
	uint32_t part;          /* the crc32c of the first `checked` bytes: the
				 * server checks a record a step at a time */
	uint64_t checked;
	/* a record found by the image's index (img_record.late): its frame,
	 * pad and last bytes checked against the file first, then NULL */
	const struct img_reader *late;
	uint32_t index;
	uint64_t offset;
};

struct mm_rst {
	MmEntry *e;
	struct pages_set pages; /* its private pages, from the page store */
	struct pages_check **checks; /* an eager restart: its page records,
				      * checked as their pages go in */
	size_t nchecks;
	struct mm_rec *recs;    /* RESTART_LAZY: per chunk of pages, its record
				 * (NULL once all are checked: mm_lazy_settle) */
	uint8_t **tails;        /* RESTART_LAZY: per record, its table read by
				 * pread (the chunks' extents point there), or
				 * NULL: the table is the image index's */
	size_t ntails;
	struct remote_files rf; /* while it is restored */
	bool eager;             /* RESTART_LAZY, but restored before its children
				 * are forked: filled now */
	struct mm_chain *chain; /* its parent images (mm-chain.c), or NULL */
	struct vma_calls *calls; /* while its vmas are mapped: the calls queued
				  * to run as batches (mm.c), or NULL */
	bool *kept;             /* while it is restored: per vma, a file vma left
				 * as its fork made it (mm.c, mark_kept), or NULL */
	bool *as_is;            /* while it is restored: per vma, one kept from the
				 * fork with no page of its own and already at its
				 * protection (mm.c, mark_as_is), or NULL */
};

#endif
