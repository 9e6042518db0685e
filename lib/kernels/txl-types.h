/* SPDX-License-Identifier: MIT */
/*
 * txl-types.h - the traits of the storage types (txl-types.c): one row of
 * one table per type, with all that libtxl asks of a type (its name in
 * files, its blocks, the activations its products take, its kernels on
 * each instruction set), and the conversions between types.  Not
 * installed.
 *
 * A new storage type is its line in the list and its block (txl-dtype.h),
 * its row of the table and its kernels (at least the scalar ones,
 * txl-kernels.c): CONTRIBUTING.md says how.
 */
#ifndef TXL_TYPES_H
#define TXL_TYPES_H

#include <stdbool.h>
#include <stddef.h>

#include "txl-dtype.h"
#include "txl-kernels.h"

/* The products of a type's kernels that every instruction set computes
 * to the same floats as the scalar set (the integer sums and then the
 * same float operations in the same order; struct txl_type's
 * same_floats), against the float kernels' bounded rounding. */
#define TXL_SAME_DOT_Q8 (1u << TXL_ACT_Q8)
#define TXL_SAME_DOT_Q16 (1u << TXL_ACT_Q16)
#define TXL_SAME_DOT_IL (1u << TXL_N_ACT)

struct txl_type {
	const char *name;	/* as model files and messages spell it */
	int block;		/* values per block: 1 for the plain types */
	size_t bytes;		/* bytes per block */
	/* what one row of activations meets a matrix of this type as (its
	 * matrix-vector products), and what a query meets a memory of it
	 * as (the attention's few-query path): floats, or quantized for
	 * integer products */
	enum txl_act_type act, query_act;
	/* what the products of segments pack a matrix of it as (txl-gemm.h;
	 * TXL_PACK_Q8 through its scalar kernels' unpack_q8) */
	enum txl_pack_fmt pack;
	unsigned same_floats;	/* TXL_SAME_* */
	/* a block type's check of a stored block beside its F16 scale's
	 * (fields in range), or NULL */
	bool (*block_ok)(const void *block);
	/* its kernels on each instruction set that has its own; NULL: the
	 * set's base's (txl_isa_base()); none at all: bytes that are not
	 * numbers (U8) */
	const struct txl_type_kernels *isa[TXL_N_ISA];
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

/* A block type: its rows are K / block blocks. */
static inline bool
txl_dtype_blocked(enum txl_dtype dt)
{
	return txl_types[dt].block > 1;
}

/* A type the kernels compute with (every one but U8). */
static inline bool
txl_dtype_computable(enum txl_dtype dt)
{
	return txl_types[dt].isa[TXL_ISA_SCALAR] != NULL;
}

/* txl_dtype_name(), txl_dtype_from_name() and txl_dtype_uses() are
 * txl.h's. */

/* The type named @p name (as a file spells it, exactly); false if none. */
bool txl_dtype_parse(const char *name, enum txl_dtype *dt);
/* "A, B or C": the names of the types that are computable (or all, if
 * not computable_only) and unblocked (or all, if blocked_too), into buf
 * (cut at cap bytes). */
void txl_dtype_names(char *buf, size_t cap, bool computable_only,
		     bool blocked_too);

/* The kernels of dt on the set in use (txl_kernels()), each from the set
 * itself or the nearest it extends; and on any set @p isa (false if this
 * CPU cannot run it). */
const struct txl_type_kernels *txl_type_kernels(enum txl_dtype dt);
bool txl_type_kernels_on(enum txl_dtype dt, enum txl_isa isa,
			 struct txl_type_kernels *out);

/* dst[n] = n values of dtype dt at src, as floats (exact). */
void txl_widen(float *dst, const void *src, enum txl_dtype dt, size_t n);
/* dst[n] = src rounded to dt (the plain types: nearest even; the block
 * types: n a multiple of the block, by their narrow kernel). */
void txl_narrow(void *dst, const float *src, enum txl_dtype dt, size_t n);
/* dst[n] in dtype dd = src[n] in dtype sd (n a multiple of their blocks):
 * widened exactly, then narrowed to dd (exact if dd holds every value of
 * sd); a copy if they are equal. */
void txl_convert(void *dst, enum txl_dtype dd, const void *src,
		 enum txl_dtype sd, size_t n);

#endif /* TXL_TYPES_H */
