/* SPDX-License-Identifier: MIT */
/*
 * txl-dtype.h - the storage types of libtxl: their list (enum txl_dtype
 * of txl.h is written from it) and their bytes: the layout of their
 * blocks (stored, and interleaved for the matrix-vector kernels) and the
 * conversions of half-precision values.
 * What each type is and which kernels compute with it is the traits
 * table's (txl-types.h).  Not installed.
 */
#ifndef TXL_DTYPE_H
#define TXL_DTYPE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The storage types, the one list of them: X(NAME, number) each, in the
 * order of their numbers.  The build writes enum txl_dtype, TXL_<NAME> =
 * number, from it (lib/dtype-enum.py: txl-dtype-enum.h, installed beside
 * txl.h, which includes it), and the Python tools read it
 * (models/txlgen/loadable.py).  A number is the ABI: it never changes, and
 * a new type takes the next one, at the end. */
#define TXL_DTYPES(X)							\
	X(F32, 0)							\
	X(F16, 1)							\
	X(BF16, 2)							\
	X(Q8_0, 3)							\
	X(Q4_0, 4)							\
	X(U8, 5)							\
	X(Q4_K, 6)

#include "txl.h"

/* Each type's block: its values (1: a plain type) and its bytes,
 * TXL_<NAME>_BLOCK and TXL_<NAME>_BYTES, which the traits table
 * (txl-types.c) and loadable.py read.  A block type's block begins with
 * its F16 scale, then holds its values' bytes. */
#define TXL_QK 32		/* values per Q8_0 and Q4_0 block */
#define TXL_F32_BLOCK 1
#define TXL_F32_BYTES 4
#define TXL_F16_BLOCK 1
#define TXL_F16_BYTES 2
#define TXL_BF16_BLOCK 1
#define TXL_BF16_BYTES 2
#define TXL_U8_BLOCK 1
#define TXL_U8_BYTES 1
#define TXL_Q8_0_BLOCK TXL_QK
#define TXL_Q8_0_BYTES 34
#define TXL_Q4_0_BLOCK TXL_QK
#define TXL_Q4_0_BYTES 18
#define TXL_Q4_K_BLOCK 128
#define TXL_Q4_K_BYTES 72
#define TXL_Q4_K_SUB (TXL_Q4_K_BLOCK / TXL_QK)	/* sub-blocks of 32 */

/* Q8_0, as GGUF's block_q8_0: value i = qs[i] * d. */
struct txl_block_q8_0 {
	uint16_t d;		/* the scale, IEEE half */
	int8_t qs[TXL_QK];	/* value i = qs[i] * d */
};
_Static_assert(sizeof(struct txl_block_q8_0) == TXL_Q8_0_BYTES, "packed");

/* 32 values in 4 bits: value i = (q_i - 8) * d, q_i in [0, 15] the low
 * nibble of qs[i] for i < 16 and the high one of qs[i - 16] above (so a
 * load of the 16 bytes, masked and shifted, gives the values in order);
 * the layout of GGUF's block_q4_0.  txl_q4_0_scale() in txl-kernels.h. */
struct txl_block_q4_0 {
	uint16_t d;		/* the scale, IEEE half */
	uint8_t qs[TXL_QK / 2];
};
_Static_assert(sizeof(struct txl_block_q4_0) == TXL_Q4_0_BYTES, "packed");

/* 128 values in 4 bits, 4.5 bits a value: a super-block of 4
 * sub-blocks of 32 with one F16 scale d and, per sub-block j, a 6-bit
 * scale sc_j (0..63) and a 6-bit zero point z_j (0..63) in quarters of a
 * step, packed in sz: the low 6 bits of sz[j] are sc_j, its top 2 bits
 * z_j's low 2, and z_j's top 4 are nibble j % 2 of sz[4 + j / 2] (low
 * for even j).  Value i of sub-block j is u_j (4 q_i - z_j), u_j = d sc_j
 * / 4, q_i in [0, 15] the nibble of qs[16 j + i] (low for i < 16, high
 * for i - 16 above: each sub-block's 16 bytes as a Q4_0 block's); so a
 * sub-block is an int8 block (4 q - z, in [-63, 60]) of scale u_j, and
 * every value a float (11 + 6 + 6 significant bits).  d is finite and not
 * negative (the loader refuses a block that is not: a damaged file).  Not
 * GGUF's block_q4_K, whose minimums are any multiple of their own scale. */
struct txl_block_q4_k {
	uint16_t d;		/* the super-block's scale, IEEE half */
	uint8_t sz[6];		/* the sub-blocks' scales and zero points */
	uint8_t qs[TXL_Q4_K_BLOCK / 2];
};
_Static_assert(sizeof(struct txl_block_q4_k) == TXL_Q4_K_BYTES, "packed");

/* Sub-block j's scale and zero point from a Q4_K block's sz. */
static inline int
txl_q4_k_sc(const uint8_t *sz, int j)
{
	return sz[j] & 63;
}

static inline int
txl_q4_k_z(const uint8_t *sz, int j)
{
	return sz[j] >> 6 | (sz[4 + j / 2] >> 4 * (j & 1) & 15) << 2;
}

/* Q8_0 and Q4_0 rows interleaved by groups of TXL_IL for the
 * matrix-vector kernels (txl-kernels.h says how; txl-repack.h makes the
 * copy): a block of a group holds the same bytes as the TXL_IL rows'
 * blocks: their scales (IEEE halves), then their values. */
#define TXL_IL 16
#define TXL_IL_SCALES (TXL_IL * 2)
#define TXL_IL_BLOCK (TXL_IL_SCALES + TXL_IL * TXL_QK)		/* Q8_0 */
#define TXL_IL_BLOCK_Q4 (TXL_IL_SCALES + TXL_IL * TXL_QK / 2)	/* Q4_0 */
/* Q4_K: a group's super-block (TXL_IL times its bytes): the rows' d,
 * then planes of their sz bytes, then each sub-block's values as Q4_0's
 * interleaved values, from this offset (txl-kernels.h) */
#define TXL_IL_Q4K_VALUES (TXL_IL * 8)

/* ---- half-precision values: exact widening, narrowing rounded to
 * nearest even (NaNs stay NaNs) ---- */

static inline float
txl_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
	float f;

	if (exp == 0x1f) {
		bits = sign | 0x7f800000 | (man << 13);
	} else if (exp != 0) {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	} else if (man == 0) {
		bits = sign;
	} else {
		/* subnormal: value = man * 2^-24 */
		f = (float)man * 0x1p-24f;
		return sign ? -f : f;
	}
	memcpy(&f, &bits, sizeof f);
	return f;
}

static inline uint16_t
txl_f32_to_f16(float f)
{
	uint32_t x, sign, abs;

	memcpy(&x, &f, sizeof x);
	sign = (x >> 16) & 0x8000;
	abs = x & 0x7fffffff;
	if (abs > 0x7f800000)			/* NaN, kept quiet */
		return (uint16_t)(sign | 0x7e00 | ((abs >> 13) & 0x3ff));
	if (abs >= 0x477ff000)			/* >= 65520: infinity */
		return (uint16_t)(sign | 0x7c00);
	if (abs < 0x38800000) {			/* below 2^-14: subnormal */
		float a;
		memcpy(&a, &abs, sizeof a);
		return (uint16_t)(sign | (uint32_t)lrintf(a * 0x1p24f));
	}
	/* rebias the exponent (127 - 15), round the 13 bits dropped to
	 * nearest even; a carry into the exponent is right */
	abs -= 112u << 23;
	return (uint16_t)(sign | ((abs + 0xfff + ((abs >> 13) & 1)) >> 13));
}

static inline uint16_t
txl_f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof x);
	if ((x & 0x7fffffff) > 0x7f800000)	/* NaN, kept quiet */
		return (uint16_t)((x >> 16) | 0x40);
	return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

static inline float
txl_bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;

	memcpy(&f, &bits, sizeof f);
	return f;
}

#endif /* TXL_DTYPE_H */
