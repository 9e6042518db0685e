/* SPDX-License-Identifier: MIT */
/*
 * txl-hash.c - the content hash of model fingerprints and state files.
 */
#include <string.h>

#include "txl-hash.h"

/* FNV-1a with 8-byte words as its units (eight times fewer steps than
 * bytes; a content identity, not a cryptographic hash). */
#define HASH_SEED 0xcbf29ce484222325ull
#define HASH_PRIME 0x100000001b3ull

void
txl_hash_init(struct txl_hash *hs)
{
	hs->h = HASH_SEED;
	hs->nbuf = 0;
}

void
txl_hash_update(struct txl_hash *hs, const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t w;

	/* complete a word begun by an earlier call */
	while (hs->nbuf > 0 && hs->nbuf < 8 && n > 0) {
		hs->buf[hs->nbuf++] = *b++;
		n--;
	}
	if (hs->nbuf == 8) {
		memcpy(&w, hs->buf, 8);
		hs->h = (hs->h ^ w) * HASH_PRIME;
		hs->nbuf = 0;
	}
	for (; n >= 8; b += 8, n -= 8) {
		memcpy(&w, b, 8);	/* little-endian host */
		hs->h = (hs->h ^ w) * HASH_PRIME;
	}
	memcpy(hs->buf + hs->nbuf, b, n);
	hs->nbuf += (unsigned)n;
}

uint64_t
txl_hash_final(const struct txl_hash *hs)
{
	uint64_t h = hs->h;

	/* the tail bytes one at a time */
	for (unsigned i = 0; i < hs->nbuf; i++)
		h = (h ^ hs->buf[i]) * HASH_PRIME;
	return h;
}
