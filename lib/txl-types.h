/* SPDX-License-Identifier: MIT */
/*
 * txl-types.h - the traits of each storage type (txl-types.c): one row of
 * one table per type, with what the rest of libtxl asks of a type (its
 * name in files, its block size and bytes).  Not installed.
 */
#ifndef TXL_TYPES_H
#define TXL_TYPES_H

#include <stdbool.h>
#include <stddef.h>

#include "txl-dtype.h"

struct txl_type {
	const char *name;	/* as model files and messages spell it */
	int block;		/* values per block: 1 for the plain types */
	size_t bytes;		/* bytes per block */
};

extern const struct txl_type txl_types[TXL_N_DTYPES];

static inline const struct txl_type *
txl_type(enum txl_dtype dt)
{
	return &txl_types[dt];
}

/* The bytes of one row of K values (K a multiple of the block size). */
static inline size_t
txl_row_bytes(enum txl_dtype dt, int K)
{
	return (size_t)K / (size_t)txl_types[dt].block * txl_types[dt].bytes;
}

/* A block type (Q8_0, Q4_0): its rows are K / block blocks, and one row
 * of activations meets it quantized (txl-kernels.h). */
static inline bool
txl_dtype_blocked(enum txl_dtype dt)
{
	return txl_types[dt].block > 1;
}

static inline const char *
txl_dtype_name(enum txl_dtype dt)
{
	return txl_types[dt].name;
}

/* dst[n] = n values of dtype dt at src, as floats (exact). */
void txl_widen(float *dst, const void *src, enum txl_dtype dt, size_t n);
/* dst[n] = src rounded to dt (F32, F16, BF16: nearest even; Q8_0: n a
 * multiple of TXL_QK, txl_q8_0_scale() in txl-kernels.h). */
void txl_narrow(void *dst, const float *src, enum txl_dtype dt, size_t n);
/* dst[n] in dtype dd = src[n] in dtype sd (F32, F16, BF16 or Q8_0, n a
 * multiple of TXL_QK then): widened exactly, then narrowed to dd (exact
 * if dd holds every value of sd); a copy if they are equal. */
void txl_convert(void *dst, enum txl_dtype dd, const void *src,
		 enum txl_dtype sd, size_t n);
/* The type named @p name (as a file spells it); false if none. */
bool txl_dtype_parse(const char *name, enum txl_dtype *dt);

#endif /* TXL_TYPES_H */
