/* SPDX-License-Identifier: MIT */
/*
 * txl-hash.h - a streaming 64-bit FNV-1a over 8-byte little-endian words
 * (txl-hash.c): the content hash of model fingerprints and state-file
 * checksums.  The result depends only on the bytes, not on how they are
 * split.  Not installed.
 */
#ifndef TXL_HASH_H
#define TXL_HASH_H

#include <stddef.h>
#include <stdint.h>

struct txl_hash {
	uint64_t h;
	uint8_t buf[8];
	unsigned nbuf;
};

void txl_hash_init(struct txl_hash *hs);
void txl_hash_update(struct txl_hash *hs, const void *p, size_t n);
uint64_t txl_hash_final(const struct txl_hash *hs);

#endif /* TXL_HASH_H */
