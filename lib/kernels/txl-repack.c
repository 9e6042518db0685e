/* SPDX-License-Identifier: MIT */
/*
 * txl-repack.c - weights repacked at load for the kernels that read them
 * faster so: the interleaved groups of rows of the matrix-vector products
 * (txl-kernels.h says why and how; each type's il_pack kernel places its
 * blocks).
 */
#include <string.h>

#include "txl-kernels.h"
#include "txl-log.h"
#include "txl-repack.h"

bool
txl_interleaves(enum txl_dtype dt)
{
	return txl_type_kernels(dt)->dot_il != NULL;
}

void
txl_interleave(void *dst, enum txl_dtype dt, const void *src, int rows,
	       int K)
{
	const struct txl_type *t = txl_type(dt);
	const txl_il_pack_fn pack = txl_type_kernels(dt)->il_pack;
	const int nb = K / t->block;
	const size_t ld = txl_row_bytes(dt, K);
	const size_t bs = t->bytes;	/* a stored block */
	uint8_t *out = dst;

	TXL_ASSERT(pack);
	memset(dst, 0, txl_il_bytes(dt, rows, K));
	for (int r = 0; r < rows; r++) {
		const uint8_t *row = (const uint8_t *)src + (size_t)r * ld;
		uint8_t *grp = out + txl_il_bytes(dt, r / TXL_IL * TXL_IL, K);
		const int i = r % TXL_IL;

		for (int b = 0; b < nb; b++)
			pack(grp + (size_t)b * TXL_IL * bs, i,
			     row + (size_t)b * bs);
	}
}
