/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sealed images: the whole image stream (header, records, trailer, as in
 * img.h) encrypted and authenticated with a 32-byte key, by libsodium's
 * crypto_secretstream_xchacha20poly1305. It is a layer under the framing:
 * the writer sends its bytes through a seal, the reader decrypts the whole
 * stream into an anonymous mapping and then checks it as a plain image.
 *
 *   outer header  struct img_seal_header (64 bytes, in clear)
 *   chunks        chunk_size plaintext bytes each, sent as one secretstream
 *                 message of chunk_size + IMG_SEAL_ABYTES bytes; the last
 *                 one is shorter (0..chunk_size bytes of plaintext) and is
 *                 the only one tagged TAG_FINAL
 *
 * Invariants:
 * - The first chunk authenticates the outer header (it is the first
 *   message's additional data); every chunk authenticates its position
 *   (secretstream chains its nonces), so a chunk modified, dropped,
 *   reordered or repeated, or a stream cut short, fails to open.
 * - key_id is derived from the key (crypto_kdf, subkey 2) and names it
 *   without revealing it: an image made with another key is told apart
 *   from a damaged one. The stream key is another subkey (1).
 * - The reader hands out no byte that has not been authenticated: the
 *   image is decrypted to its end, TAG_FINAL included, before
 *   img_reader_adopt() sees it.
 * - Key material (the subkeys, the secretstream state) and plaintext
 *   buffers are wiped with sodium_memzero() when freed. Nothing here logs.
 */
#ifndef CKPT_IMG_SEAL_H
#define CKPT_IMG_SEAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "img/img.h"

#define IMG_SEAL_MAGIC "CKPTSEAL"
#define IMG_SEAL_VERSION 1
#define IMG_KEY_BYTES 32u
#define IMG_SEAL_ABYTES 17u          /* crypto_secretstream_xchacha20poly1305_ABYTES */
#define IMG_SEAL_CHUNK (256u << 10)  /* plaintext bytes per chunk the writer uses */
#define IMG_SEAL_CHUNK_MIN 4096u     /* what a reader accepts */
#define IMG_SEAL_CHUNK_MAX (16u << 20)

struct img_seal_header {
	char magic[8];          /* IMG_SEAL_MAGIC */
	uint32_t version;       /* IMG_SEAL_VERSION */
	uint32_t header_size;   /* sizeof(struct img_seal_header) */
	uint32_t chunk_size;    /* plaintext bytes of every chunk but the last */
	uint32_t flags;         /* reserved, 0 */
	uint8_t key_id[16];     /* crypto_kdf subkey 2 of the key */
	uint8_t stream[24];     /* the secretstream header */
} __attribute__((packed));

/* An encrypting sink over an fd; the writer owns none of it. */
struct img_seal;

/*
 * Writes the outer header to fd and returns a seal that encrypts what is
 * written through it. key is IMG_KEY_BYTES long; the seal keeps only
 * subkeys, so the caller may wipe key as soon as this returns.
 */
int img_seal_new(struct img_seal **ret, int fd, const uint8_t *key, size_t key_len)
	__attribute__((warn_unused_result));
/* head[0..nhead) then iov[0..cnt), as writev would; *offset counts plaintext. */
int img_seal_write(struct img_seal *s, const struct iovec *head, size_t nhead,
		   const struct iovec *iov, size_t cnt, uint64_t *offset)
	__attribute__((warn_unused_result));
/* Sends what is buffered as the final chunk; nothing may be written after. */
int img_seal_finish(struct img_seal *s) __attribute__((warn_unused_result));
/* Wipes and frees; accepts NULL. */
void img_seal_free(struct img_seal *s);

/* True if buf (size bytes, the start of a stream) begins as a sealed image. */
bool img_seal_detect(const void *buf, size_t size);

/*
 * img_reader_open() for a sealed image: reads fd to its end, authenticating
 * and decrypting as it goes, then checks the plaintext header. Errors:
 * -EKEYREJECTED an image not made with this key, or not sealed at all;
 * -EBADMSG a damaged, modified or truncated one; -EINVAL a bad key length.
 */
int img_reader_open_sealed(struct img_reader *r, int fd, const uint8_t *key, size_t key_len,
			   struct img_error *err) __attribute__((warn_unused_result));
/* With a key: img_reader_open_sealed; without (NULL): img_reader_open. */
int img_reader_open_key(struct img_reader *r, int fd, const uint8_t *key, size_t key_len,
			struct img_error *err) __attribute__((warn_unused_result));

#endif
