/* SPDX-License-Identifier: MIT */
/*
 * txl-repack.c - weights repacked at load for the kernels that read them
 * faster so: the interleaved groups of rows of the matrix-vector products
 * (txl-kernels.h says why and how).
 */
#include <string.h>

#include "txl-log.h"
#include "txl-repack.h"

/* Row i of a group, block b (at blk): its scale at half i of the block,
 * then Q8_0: values 4 j .. 4 j + 3 at bytes (j * TXL_IL + i) * 4;
 * Q4_0: values 8 j + t (t < 4) in the low nibbles of bytes
 * (j * TXL_IL + i) * 4 + t, values 8 j + 4 + t in their high ones. */
static void
interleave_q8(uint8_t *blk, int i, const struct txl_block_q8_0 *q)
{
	memcpy(blk + 2 * i, &q->d, 2);
	for (int j = 0; j < TXL_QK / 4; j++)
		memcpy(blk + TXL_IL_SCALES + (j * TXL_IL + i) * 4,
		       q->qs + 4 * j, 4);
}

static void
interleave_q4(uint8_t *blk, int i, const struct txl_block_q4_0 *q)
{
	uint8_t v[TXL_QK];

	for (int c = 0; c < TXL_QK / 2; c++) {
		v[c] = q->qs[c] & 15;
		v[c + TXL_QK / 2] = q->qs[c] >> 4;
	}
	memcpy(blk + 2 * i, &q->d, 2);
	for (int j = 0; j < TXL_QK / 8; j++)
		for (int t = 0; t < 4; t++)
			blk[TXL_IL_SCALES + (j * TXL_IL + i) * 4 + t] =
				(uint8_t)(v[8 * j + t] | v[8 * j + 4 + t] << 4);
}

void
txl_interleave(void *dst, enum txl_dtype dt, const void *src, int rows,
	       int K)
{
	const int nb = K / TXL_QK;
	const size_t ld = txl_row_bytes(dt, K);
	const size_t bs = txl_row_bytes(dt, TXL_QK);	/* a stored block */
	uint8_t *out = dst;

	TXL_ASSERT(txl_dtype_blocked(dt));
	memset(dst, 0, txl_il_bytes(dt, rows, K));
	for (int r = 0; r < rows; r++) {
		const uint8_t *row = (const uint8_t *)src + (size_t)r * ld;
		uint8_t *grp = out + txl_il_bytes(dt, r / TXL_IL * TXL_IL, K);
		const int i = r % TXL_IL;

		for (int b = 0; b < nb; b++) {
			uint8_t *blk = grp + (size_t)b * TXL_IL * bs;
			const void *q = row + (size_t)b * bs;

			if (dt == TXL_Q4_0)
				interleave_q4(blk, i, q);
			else
				interleave_q8(blk, i, q);
		}
	}
}
