/* SPDX-License-Identifier: MIT */
/*
 * txl-dtype.h - the storage types of libtxl as bytes: their names in the
 * code, the layout of their blocks (stored, and interleaved for the
 * matrix-vector kernels) and the conversions of half-precision values.
 * What each type is and which kernels compute with it is the traits
 * table's (txl-types.h).  Not installed.
 */
#ifndef TXL_DTYPE_H
#define TXL_DTYPE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Storage types.  Q8_0 is a block type (below): one F16 scale per 32
 * int8 values along the last dimension, as GGUF's block_q8_0.  Q4_0, the
 * same in 4 bits (GGUF's block_q4_0), holds weight matrices and the
 * attention's memory (--kv-type Q4_0).  The blocks of a block type begin
 * with their F16 scale, then hold their values' bytes.  U8 is for bytes
 * that are not numbers (the tokenizer, padding).  What each type is to
 * the rest of libtxl is its row of the traits table (txl-types.h). */
enum txl_dtype {
	TXL_F32, TXL_F16, TXL_BF16, TXL_Q8_0, TXL_Q4_0, TXL_U8, TXL_N_DTYPES
};

#define TXL_QK 32		/* values per Q8_0 and Q4_0 block */
struct txl_block_q8_0 {
	uint16_t d;		/* the scale, IEEE half */
	int8_t qs[TXL_QK];	/* value i = qs[i] * d */
};
_Static_assert(sizeof(struct txl_block_q8_0) == 34, "block_q8_0 is packed");

/* 32 values in 4 bits: value i = (q_i - 8) * d, q_i in [0, 15] the low
 * nibble of qs[i] for i < 16 and the high one of qs[i - 16] above (so a
 * load of the 16 bytes, masked and shifted, gives the values in order);
 * the layout of GGUF's block_q4_0.  txl_q4_0_scale() in txl-kernels.h. */
struct txl_block_q4_0 {
	uint16_t d;		/* the scale, IEEE half */
	uint8_t qs[TXL_QK / 2];
};
_Static_assert(sizeof(struct txl_block_q4_0) == 18, "block_q4_0 is packed");

/* Q8_0 and Q4_0 rows interleaved by groups of TXL_IL for the
 * matrix-vector kernels (txl-kernels.h says how; txl-repack.h makes the
 * copy): a block of a group holds the same bytes as the TXL_IL rows'
 * blocks: their scales (IEEE halves), then their values. */
#define TXL_IL 16
#define TXL_IL_SCALES (TXL_IL * 2)
#define TXL_IL_BLOCK (TXL_IL_SCALES + TXL_IL * TXL_QK)		/* Q8_0 */
#define TXL_IL_BLOCK_Q4 (TXL_IL_SCALES + TXL_IL * TXL_QK / 2)	/* Q4_0 */

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
