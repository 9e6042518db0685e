/* SPDX-License-Identifier: MIT */
/*
 * txl-repack.h - weights repacked at load for the kernels that read them
 * (txl-repack.c).  Not installed.
 */
#ifndef TXL_REPACK_H
#define TXL_REPACK_H

#include <stdbool.h>
#include <stddef.h>

#include "txl-dtype.h"
#include "txl-types.h"

/* Whether matrices of dt have an interleaved copy for the matrix-vector
 * products (its kernels have a dot_il). */
bool txl_interleaves(enum txl_dtype dt);

/* The bytes of `rows` rows of K values interleaved by groups of TXL_IL
 * (txl-dtype.h; a partial group takes a whole one), and the copy of
 * `rows` rows of a stored matrix of such a type. */
static inline size_t
txl_il_bytes(enum txl_dtype dt, int rows, int K)
{
	return (size_t)((rows + TXL_IL - 1) / TXL_IL) * TXL_IL *
	       txl_row_bytes(dt, K);
}

void txl_interleave(void *dst, enum txl_dtype dt, const void *src, int rows,
		    int K);

#endif /* TXL_REPACK_H */
