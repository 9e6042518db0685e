/* SPDX-License-Identifier: MIT */
/*
 * txl-kernels.h - the SIMD kernels of libtxl and how one set is chosen.
 *
 * The kernels of a storage type are a struct txl_type_kernels for each
 * instruction set that has its own (the traits table of txl-types.c
 * lists them); the kernels that no type owns (the activations'
 * quantization, exp and max) are a struct txl_kernels per instruction
 * set.  txl-kernels.c holds the scalar reference of everything and the
 * choice of the set, txl-kernels-avx2.c and txl-kernels-avx512.c the
 * vector versions, each compiled for its own target.  txl_kernels()
 * returns the best set the CPU runs, so one binary runs on any x86-64;
 * TXL_ISA=scalar|avx2|avxvnni|avx512|avx512vnni|avx512bf16 in the
 * environment asks
 * for a lower one (for tests and benchmarks).  The kernels are
 * single-threaded; txl-products.c splits the work over the thread pool
 * (txl-pool.c).  Not installed.
 */
#ifndef TXL_KERNELS_H
#define TXL_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "txl-dtype.h"

/* In order of preference; TXL_ISA caps the choice by this order.  A set
 * extends the one txl_isa_base() names: a type's kernel that a set lacks
 * is that set's (avxvnni and avx512vnni have their own integer products
 * only). */
enum txl_isa {
	TXL_ISA_SCALAR, TXL_ISA_AVX2,
	TXL_ISA_AVX2_VNNI,	/* avx2 with vpdpbusd (AVX-VNNI) for Q8_0 */
	TXL_ISA_AVX512,
	TXL_ISA_AVX512_VNNI,	/* avx512 with vpdpbusd for Q8_0 */
	TXL_ISA_AVX512_BF16,	/* avx512vnni with vdpbf16ps (AVX512_BF16)
				   for the BF16 products of segments
				   (txl-gemm.h) */
	TXL_N_ISA
};

/* The set @p isa extends (TXL_N_ISA for the scalar one). */
static inline enum txl_isa
txl_isa_base(enum txl_isa isa)
{
	switch (isa) {
	case TXL_ISA_AVX2_VNNI:
		return TXL_ISA_AVX2;
	case TXL_ISA_AVX512_BF16:
		return TXL_ISA_AVX512_VNNI;
	case TXL_ISA_AVX512_VNNI:
		return TXL_ISA_AVX512;
	case TXL_ISA_AVX512:
		return TXL_ISA_AVX2;
	case TXL_ISA_AVX2:
		return TXL_ISA_SCALAR;
	default:
		return TXL_N_ISA;
	}
}

/* y[r] = w_r . x for r < n, where w_r = the K weights of row r, rows
 * `ld` bytes apart, in the storage type whose kernel it is. */
typedef void (*txl_dot_rows_fn)(float *y, const void *w, size_t ld,
				const float *x, int n, int K);
/* dst[n] = src widened to floats (exactly: every stored value is a
 * float); n is a multiple of TXL_QK for Q8_0 and Q4_0. */
typedef void (*txl_widen_fn)(float *dst, const void *src, size_t n);
/* dst[n] = src rounded to the dtype (F16, BF16: nearest even; Q8_0: n a
 * multiple of TXL_QK, blocks as models/txlfile.py's quantize_q8_0 makes
 * them, see txl_q8_0_scale(); Q4_0: txl_q4_0_scale()). */
typedef void (*txl_narrow_fn)(void *dst, const float *src, size_t n);
/* y[K] += sum_{r < n} a[r] * w_r, rows of w `ld` bytes apart (K a
 * multiple of TXL_QK for Q8_0 and Q4_0): attention's probabilities times
 * V. */
typedef void (*txl_axpy_rows_fn)(float *y, const float *a, const void *w,
				 size_t ld, int n, int K);

/* An activation vector of K values (K a multiple of TXL_QK) quantized as
 * Q8_0 weights are, for integer dot products with them: block b holds
 * q[32b .. 32b + 31] (int8 in [-127, 127]) and the scale d[b]
 * (max |x| / 127 of the block, float: finer than the weights' F16), value
 * i = q[i] * d[i / TXL_QK]; off[b] = -128 * the sum of the block's q (the
 * VNNI kernel multiplies the weights plus 128, unsigned, and takes this
 * back). */
struct txl_q8_act {
	int8_t *q;
	float *d;
	int32_t *off;
};

/* x[K] quantized into a (round to nearest even); every set computes
 * the same values and scales (a NaN or an inf in a block makes its scale
 * NaN, and so its products). */
typedef void (*txl_quantize_q8_fn)(struct txl_q8_act *a, const float *x,
				   int K);

/* y[r] = w_r . a for r < n, rows of a block type `ld` bytes apart,
 * against activations quantized to int8 blocks (struct txl_q8_act): per
 * block, the exact integer dot product of the row's values and the
 * activations' int8, times the two scales, summed in float.  Q8_0: the
 * order of the float sums is each set's own.  Q4_0 (its keys against an
 * int8 query: where the keys have 4 bits, the query's rounding is 16
 * times finer): every set computes the same floats: per row, for each
 * block in turn, the exact integer sum of (q_i - 8) a_i (the sum of
 * q_i a_i, plus a's off / 16), rounded to float, times (the row's scale
 * times a's), added to a sum that starts at 0; no fused multiply-add. */
typedef void (*txl_dot_rows_q8_fn)(float *y, const void *w, size_t ld,
				   const struct txl_q8_act *a, int n, int K);

/* A query of K values (K a multiple of TXL_QK) quantized to int16 for
 * the attention's products with a Q8_0 memory, where the keys are the
 * rounded side: block b holds q[32b .. 32b + 31] in [-32767, 32767] and
 * the scale d[b] = max |x| / 32767 of the block (float), value i =
 * q[i] * d[i / TXL_QK], within d / 2 of x (a 2^-16 of the block's largest
 * value, 258 times finer than the keys' blocks).  txl_quantize_q16(). */
struct txl_q16_act {
	int16_t *q;
	float *d;
};

/* y[r] = w_r . a for r < n, Q8_0 rows `ld` bytes apart, against an
 * int16 query.  Every set computes the same floats: per row, for each
 * block in turn, the exact integer dot product of the row's int8 and the
 * query's int16 values (|sum| < 2^27), rounded to float, times (the
 * row's scale times a's), added to a sum that starts at 0; no fused
 * multiply-add. */
typedef void (*txl_dot_rows_q16_fn)(float *y, const void *w, size_t ld,
				    const struct txl_q16_act *a, int n,
				    int K);

/* x[K] into a, as struct txl_q16_act says (one function for every
 * set: a query is 64 or 128 values a head).  A NaN or an inf in a
 * block makes its scale NaN, and so its products, as with a float query;
 * values quantize as x / d rounded to nearest even, clipped (and to 0
 * where d is 0). */
void txl_quantize_q16(struct txl_q16_act *a, const float *x, int K);

/* Narrowing to Q8_0 (every set's narrow kernel of Q8_0), one block of
 * values whose largest magnitude is amax (NaN if the block holds a NaN or
 * an inf): stores the block's scale in *d, amax / 127 in float rounded to
 * F16 to nearest even, as models/txlfile.py's quantize_q8_0 (numpy's
 * float32 -> float16), and returns the factor 1 / d that takes a value to
 * its int8, q = the product rounded half away from zero (|v| + 0.5
 * truncated), clipped to [-127, 127] (a normal scale rounded down puts
 * |v| up to 127 (1 + 2^-11), a subnormal one below 191).  The value
 * then widens to within half a step, d / 2, of x, when d is a normal F16
 * (amax >= 127 * 2^-14; below, within d / 2 + 127 * 2^-25 = 4e-6: the
 * subnormals' spacing).  It
 * returns 0 when the block's values are all to be 0: a zero
 * scale, a NaN one (the block then widens to NaNs, as the memory of
 * another kv_type would hold them), or past F16's range (amax above
 * 65504 * 127: an infinite scale, the block widens to NaNs where F16
 * would hold infinities). */
static inline float
txl_q8_0_scale(float amax, uint16_t *d)
{
	/* one NaN whatever the block's NaNs: the same bits in every set */
	*d = amax == amax ? txl_f32_to_f16(amax / 127.0f) : 0x7e00;
	const float df = txl_f16_to_f32(*d);

	return df > 0.0f && df <= 65504.0f ? 1.0f / df : 0.0f;
}

/* Narrowing to Q4_0 (its narrow kernel), one block whose value of
 * largest magnitude is m (the first of them; NaN if the block holds a NaN
 * or an inf): stores the scale in *d, m / -8 in float rounded to F16 to
 * nearest even, so that m itself is q = 0, and returns the factor 1 / d (0 as
 * txl_q8_0_scale() says: a zero, NaN or infinite scale).  A value's q is
 * then v = x / d + 8.5 truncated, clipped to [0, 15]: the nearest of the
 * 16 steps (halves up), within d / 2 of x but for values of m's opposite
 * sign beyond 7.5 steps, which take 7 (the scheme of GGUF's Q4_0). */
static inline float
txl_q4_0_scale(float m, uint16_t *d)
{
	/* a zero block's scale +0, not -0 */
	*d = m != m ? 0x7e00 : m == 0.0f ? 0 : txl_f32_to_f16(m / -8.0f);
	const float df = txl_f16_to_f32(*d);
	const float a = df < 0.0f ? -df : df;

	return a > 0.0f && a <= 65504.0f ? 1.0f / df : 0.0f;
}

/* The scalar narrowing to Q4_0: the scalar set's, and the vector sets'
 * for a block with a NaN or an inf. */
void txl_narrow_q4_0(void *dst, const float *src, size_t n);
/* Narrowing to Q4_K, every set's (txl-kernels.c says how). */
void txl_narrow_q4_k(void *dst, const float *src, size_t n);
/* A stored Q4_K block's scale not negative (the loader refuses a file
 * with one that is). */
bool txl_q4_k_block_ok(const void *block);

/* Q8_0 weights interleaved for matrix-vector products (the copy that the
 * model loader makes of every Q8_0 and Q4_0 matrix, txl_interleave() of
 * txl-repack.h): groups of TXL_IL rows (the last padded with zero
 * rows), and in a group, for each block b of TXL_QK columns, TXL_IL_BLOCK
 * bytes: the TXL_IL rows' scales (IEEE halves, as stored), then for each
 * 4 columns the 4 int8 values of every row in turn.  So a kernel reads
 * one forward stream of as many bytes as the stored rows, and each 4
 * bytes of the activations multiply a whole vector of rows (vpdpbusd
 * with a broadcast operand), where the stored layout takes a horizontal
 * sum per row.  Q4_0 weights alike, TXL_IL_BLOCK_Q4 bytes a block: the
 * scales, then for each 8 columns 8 j .. 8 j + 7 the 4 bytes of every
 * row in turn, byte t holding value 8 j + t (0..15, unsigned, as stored)
 * in its low nibble and value 8 j + 4 + t in its high one: a mask and a
 * shift make two vectors of bytes of the Q8_0 layout. */

/* y[TXL_IL g + i] for g < ng = the rows of ng interleaved groups against
 * a (K columns).  Every set computes the same floats: per row, the
 * exact integer sum of each block, times the weights' scale times the
 * activations' (a rounded product), added to one of two sums (even and
 * odd blocks), then the two added; no fused multiply-add.  For Q4_0 the
 * integer sum is that of (q - 8) a: the sum of q a plus a's off / 16. */
typedef void (*txl_dot_il_fn)(float *y, const void *w, int ng,
			      const struct txl_q8_act *a, int K);
/* One stored block (of row i of its group) into its place in the
 * interleaved block blk of the group, as the dot_il kernels read it. */
typedef void (*txl_il_pack_fn)(uint8_t *blk, int i, const void *block);

/* ---- several rows of activations: a batch's streams of one token ---- */

/* The most rows of activations one call of the kernels below takes. */
#define TXL_ROWS_MAX 16

/* y[m][r] = w_r . x[m] for m < M <= TXL_ROWS_MAX, r < n: for each m, the
 * floats the set's dot gives x[m] alone over the same rows (the same
 * operations in the same order, rows grouped from w as dot groups
 * them), each weight read once for all M.  So a stream of a batch
 * computes what it computes alone. */
typedef void (*txl_dot_multi_fn)(float *const *y, const void *w, size_t ld,
				 const float *const *x, int M, int n, int K);
/* y[m][TXL_IL g + i] for g < ng, m < M <= TXL_ROWS_MAX: the floats of the
 * type's dot_il against a[m] (every set's: see txl_dot_il_fn). */
typedef void (*txl_dot_il_multi_fn)(float *const *y, const void *w, int ng,
				    const struct txl_q8_act *a, int M, int K);
/* A block type packed as TXL_PACK_Q8: the scale of values 32 b .. 32 b
 * + 31 of a row as a float and those TXL_QK values as int8, value i at
 * q[i * stride] (v = q d, exact). */
typedef void (*txl_unpack_q8_fn)(float *d, int8_t *q, size_t stride,
				 const void *row, int b);

/* ---- activations: the forms a product takes its vector in ---- */

enum txl_act_type {
	TXL_ACT_F32,		/* floats */
	TXL_ACT_Q8,		/* int8 blocks (struct txl_q8_act) */
	TXL_ACT_Q16,		/* int16 blocks (struct txl_q16_act) */
	TXL_N_ACT
};

/* The forms of a matrix packed for the products of segments (txl-gemm.h
 * says each): what a type's row of the traits table packs it as. */
enum txl_pack_fmt { TXL_PACK_F32, TXL_PACK_F16, TXL_PACK_BF16, TXL_PACK_Q8,
		    TXL_N_PACK };

/* A vector of K values in one of those forms. */
struct txl_act {
	enum txl_act_type type;
	const float *x;		/* TXL_ACT_F32 */
	struct txl_q8_act q8;	/* TXL_ACT_Q8 */
	struct txl_q16_act q16;	/* TXL_ACT_Q16 */
};

/* Floats of room for K values quantized to type (0 for floats, held
 * where they are). */
static inline size_t
txl_act_floats(enum txl_act_type type, int K)
{
	const size_t nb = (size_t)K / TXL_QK;

	switch (type) {
	case TXL_ACT_Q8:	/* d, off, then K bytes */
		return 2 * nb + (size_t)K / 4;
	case TXL_ACT_Q16:	/* d, then K int16 */
		return nb + (size_t)K / 2;
	default:
		return 0;
	}
}

/* A vector of K values of type over buf (txl_act_floats(type, K) floats,
 * or none for floats: x then). */
static inline struct txl_act
txl_act_view(enum txl_act_type type, float *buf, const float *x, int K)
{
	const size_t nb = (size_t)K / TXL_QK;
	struct txl_act a = { .type = type, .x = x };

	if (type == TXL_ACT_Q8) {
		a.q8.d = buf;
		a.q8.off = (int32_t *)(void *)(buf + nb);
		a.q8.q = (int8_t *)(void *)(buf + 2 * nb);
	} else if (type == TXL_ACT_Q16) {
		a.q16.d = buf;
		a.q16.q = (int16_t *)(void *)(buf + nb);
	}
	return a;
}

/* ---- the kernels of a storage type on one instruction set ---- */

/* Each slot NULL where the type has no such kernel, or where this set
 * has none of its own (the set below's: txl_isa_base()); the traits
 * table of txl-types.c lists a type's struct for each set. */
struct txl_type_kernels {
	txl_widen_fn widen;
	txl_narrow_fn narrow;
	txl_axpy_rows_fn axpy_rows;
	/* rows against an activation vector of each form */
	txl_dot_rows_fn dot;		/* TXL_ACT_F32 */
	txl_dot_rows_q8_fn dot_q8;	/* TXL_ACT_Q8 */
	txl_dot_rows_q16_fn dot_q16;	/* TXL_ACT_Q16 */
	/* the interleaved copy (against the type's activations) */
	txl_dot_il_fn dot_il;
	txl_il_pack_fn il_pack;
	/* several rows of activations, each as dot or dot_il computes it
	 * alone: a set that has its own dot has its own dot_multi */
	txl_dot_multi_fn dot_multi;
	txl_dot_il_multi_fn dot_il_multi;
	txl_unpack_q8_fn unpack_q8;	/* pack TXL_PACK_Q8 (scalar only) */
};

/* The kernels of a float type (f32, f16, bf16) in a file that names
 * them by their suffix: widen_f32, narrow_f32, axpy_rows_f32,
 * dot_rows_f32, dot_multi_f32. */
#define TXL_FLOAT_KERNELS(t)                                                 \
	{ .widen = widen_##t, .narrow = narrow_##t,                          \
	  .axpy_rows = axpy_rows_##t, .dot = dot_rows_##t,                   \
	  .dot_multi = dot_multi_##t }

/* y[r] = w_r . a for r < n by the kernel of a's form. */
static inline void
txl_dot_act(const struct txl_type_kernels *k, float *y, const void *w,
	    size_t ld, const struct txl_act *a, int n, int K)
{
	switch (a->type) {
	case TXL_ACT_Q8:
		k->dot_q8(y, w, ld, &a->q8, n, K);
		break;
	case TXL_ACT_Q16:
		k->dot_q16(y, w, ld, &a->q16, n, K);
		break;
	default:
		k->dot(y, w, ld, a->x, n, K);
		break;
	}
}

/* ---- the kernels no type owns, one set per instruction set ---- */

struct txl_kernels {
	const char *name;	/* "scalar", "avx2", "avxvnni", "avx512",
				   "avx512vnni", "avx512bf16" */
	enum txl_isa isa;
	/* x[K] quantized to int8 blocks (txl_quantize_q8_fn) */
	txl_quantize_q8_fn quantize_q8;
	/* out[i] = exp(x[i] - max) (out may be x, or NULL for the sum
	 * alone); returns the sum, added in double */
	double (*exp_sum)(float *out, const float *x, int n, float max);
	/* the largest of x[n] (-INFINITY for n == 0) */
	float (*max)(const float *x, int n);
};

/* exp_sum's values from i to n, one at a time, added to sum (the scalar
 * set's whole, a vector set's last ones). */
double txl_exp_sum_tail(float *out, const float *x, int i, int n, float max,
			double sum);

/* The set in use (chosen once, on first use). */
const struct txl_kernels *txl_kernels(void);
/* The set of one instruction set, or NULL if this CPU (or this build)
 * cannot run it; TXL_ISA_SCALAR always exists. */
const struct txl_kernels *txl_kernels_for(enum txl_isa isa);

/* x (K values) into a, in a's form: quantized by the set in use's
 * quantize_q8 or by txl_quantize_q16(); floats: a->x = x. */
void txl_act_quantize(struct txl_act *a, const float *x, int K);

/* The vector sets, each in its own file compiled for its target; built
 * on x86-64 only. */
extern const struct txl_kernels txl_kernels_avx2, txl_kernels_avx2_vnni,
	txl_kernels_avx512, txl_kernels_avx512_vnni, txl_kernels_avx512_bf16;

#endif /* TXL_KERNELS_H */
