/* SPDX-License-Identifier: MIT */
/*
 * txl-kernels.c - the scalar reference kernels, and the choice of the
 * instruction set by CPU feature.
 *
 * The scalar kernels are the definition the vector ones are tested
 * against (tests/unit/test-kernels.c), and what runs on CPUs without
 * AVX2.  They are written plainly: one accumulator per row, values
 * widened exactly (every F16, BF16 and Q8_0 value is a float), memcpy for
 * loads so that no alignment is assumed.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "txl-kernels.h"
#include "txl-log.h"

static inline uint16_t
load_u16(const uint8_t *p)
{
	uint16_t h;

	memcpy(&h, p, sizeof h);
	return h;
}

static void
widen_f32(float *dst, const void *src, size_t n)
{
	memcpy(dst, src, n * sizeof(float));
}

static void
widen_f16(float *dst, const void *src, size_t n)
{
	const uint8_t *s = src;

	for (size_t i = 0; i < n; i++)
		dst[i] = txl_f16_to_f32(load_u16(s + 2 * i));
}

static void
widen_bf16(float *dst, const void *src, size_t n)
{
	const uint8_t *s = src;

	for (size_t i = 0; i < n; i++)
		dst[i] = txl_bf16_to_f32(load_u16(s + 2 * i));
}

static void
widen_q8_0(float *dst, const void *src, size_t n)
{
	const uint8_t *s = src;

	for (size_t b = 0; b < n / TXL_QK; b++, s += 34) {
		const float d = txl_f16_to_f32(load_u16(s));
		for (int i = 0; i < TXL_QK; i++)
			dst[b * TXL_QK + i] = (float)(int8_t)s[2 + i] * d;
	}
}

/* Value i of a Q4_0 block, q - 8 (txl-dtype.h). */
static inline int
q4_value(const struct txl_block_q4_0 *b, int i)
{
	return (i < TXL_QK / 2 ? b->qs[i] & 15 : b->qs[i - TXL_QK / 2] >> 4) - 8;
}

static void
widen_q4_0(float *dst, const void *src, size_t n)
{
	const uint8_t *s = src;

	for (size_t b = 0; b < n / TXL_QK; b++) {
		struct txl_block_q4_0 blk;

		memcpy(&blk, s + b * sizeof blk, sizeof blk);
		const float d = txl_f16_to_f32(blk.d);
		for (int i = 0; i < TXL_QK; i++)
			dst[b * TXL_QK + i] = (float)q4_value(&blk, i) * d;
	}
}

/* Q4_K (txl-dtype.h): sub-block j's unit u_j = d sc_j / 4 (exact: 17
 * significant bits at most) and value i's int8, 4 q - z_j. */
static inline float
q4k_unit(const struct txl_block_q4_k *b, int j)
{
	return txl_f16_to_f32(b->d) * (float)txl_q4_k_sc(b->sz, j) * 0.25f;
}

static inline int
q4k_nibble(const struct txl_block_q4_k *b, int j, int i)
{
	const int v = b->qs[16 * j + (i & 15)];

	return i < 16 ? v & 15 : v >> 4;
}

static void
widen_q4_k(float *dst, const void *src, size_t n)
{
	const uint8_t *s = src;

	for (size_t b = 0; b < n / TXL_Q4_K_BLOCK; b++) {
		struct txl_block_q4_k blk;

		memcpy(&blk, s + b * sizeof blk, sizeof blk);
		for (int j = 0; j < TXL_Q4_K_SUB; j++) {
			const float u = q4k_unit(&blk, j);

			for (int i = 0; i < TXL_QK; i++)
				dst[(b * TXL_Q4_K_SUB + j) * TXL_QK + i] =
					u * (float)(4 * q4k_nibble(&blk, j, i) -
						    txl_q4_k_z(blk.sz, j));
		}
	}
}

/* unpack_q8 (txl-kernels.h): a block's scale and values as int8 */
static void
unpack_q8_q8_0(float *d, int8_t *q, size_t stride, const void *row, int b)
{
	const uint8_t *s = (const uint8_t *)row +
		(size_t)b * sizeof(struct txl_block_q8_0);

	*d = txl_f16_to_f32(load_u16(s));
	for (int i = 0; i < TXL_QK; i++)
		q[i * stride] = (int8_t)s[2 + i];
}

static void
unpack_q8_q4_0(float *d, int8_t *q, size_t stride, const void *row, int b)
{
	const uint8_t *s = (const uint8_t *)row +
		(size_t)b * sizeof(struct txl_block_q4_0);

	*d = txl_f16_to_f32(load_u16(s));
	for (int i = 0; i < TXL_QK / 2; i++) {
		q[i * stride] = (int8_t)((s[2 + i] & 15) - 8);
		q[(i + TXL_QK / 2) * stride] = (int8_t)((s[2 + i] >> 4) - 8);
	}
}

static void
unpack_q8_q4_k(float *d, int8_t *q, size_t stride, const void *row, int b)
{
	struct txl_block_q4_k blk;
	const int j = b % TXL_Q4_K_SUB;

	memcpy(&blk, (const uint8_t *)row + (size_t)(b / TXL_Q4_K_SUB) *
	       sizeof blk, sizeof blk);
	*d = q4k_unit(&blk, j);
	for (int i = 0; i < TXL_QK; i++)
		q[i * stride] = (int8_t)(4 * q4k_nibble(&blk, j, i) -
					 txl_q4_k_z(blk.sz, j));
}

/* The dot products widen a row at a time into a buffer: the definition,
 * not the fast way (the vector kernels fuse the two). */
#define ROW_CHUNK 256

/* How a type stores its values: `bytes` bytes per block of `block`
 * values (the plain types: blocks of 1). */
struct layout {
	int block;
	size_t bytes;
};

#define LAYOUT_F32 ((struct layout){ 1, 4 })
#define LAYOUT_HALF ((struct layout){ 1, 2 })
#define LAYOUT_Q8_0                                                          \
	((struct layout){ TXL_QK, sizeof(struct txl_block_q8_0) })
#define LAYOUT_Q4_0                                                          \
	((struct layout){ TXL_QK, sizeof(struct txl_block_q4_0) })
#define LAYOUT_Q4_K                                                          \
	((struct layout){ TXL_Q4_K_BLOCK, sizeof(struct txl_block_q4_k) })

/* The bytes of k values (k a multiple of the block) */
static inline size_t
bytes_of(struct layout t, int k)
{
	return (size_t)k / (size_t)t.block * t.bytes;
}

static void
dot_rows_with(txl_widen_fn widen, struct layout t, float *y,
	      const void *w, size_t ld, const float *x, int n, int K)
{
	float buf[ROW_CHUNK];
	const size_t chunk_bytes = bytes_of(t, ROW_CHUNK);

	for (int r = 0; r < n; r++) {
		const uint8_t *row = (const uint8_t *)w + (size_t)r * ld;
		float acc = 0.0f;

		for (int k0 = 0; k0 < K; k0 += ROW_CHUNK) {
			int len = K - k0 < ROW_CHUNK ? K - k0 : ROW_CHUNK;

			widen(buf, row + (size_t)k0 / ROW_CHUNK * chunk_bytes,
			      (size_t)len);
			for (int k = 0; k < len; k++)
				acc += buf[k] * x[k0 + k];
		}
		y[r] = acc;
	}
}

/* The largest magnitude of a block's TXL_QK values, NaN if one of them is
 * NaN or inf. */
static float
block_amax(const float *x)
{
	float amax = 0.0f, nan = 0.0f;

	for (int i = 0; i < TXL_QK; i++) {
		/* not fmaxf: a call to libm at -O2 */
		amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
		nan += x[i] - x[i];	/* NaN for a NaN or inf */
	}
	return amax + nan;
}

static void
quantize_q8(struct txl_q8_act *a, const float *x, int K)
{
	for (int b = 0; b < K / TXL_QK; b++) {
		const float *xb = x + b * TXL_QK;
		int8_t *q = a->q + b * TXL_QK;
		/* a NaN or inf in x makes the block's products NaN, as with
		 * float activations */
		const float d = block_amax(xb) / 127.0f;
		const float id = d > 0.0f ? 1.0f / d : 0.0f;
		int32_t sum = 0;

		for (int i = 0; i < TXL_QK; i++) {
			/* |xb[i] * id| <= 127 (1 + 2^-22): rounds into range
			 * (lrintf: a NaN is no undefined behaviour) */
			q[i] = (int8_t)lrintf(xb[i] * id);
			sum += q[i];
		}
		a->d[b] = d;
		a->off[b] = -128 * sum;
	}
}

/* Q8_0 rows against a quantized activation (struct txl_q8_act, or the
 * int16 struct txl_q16_act): per block, the exact integer sum, then the
 * two scales; the same code for both. */
#define DOT_ROWS_INT(name, act_type)                                         \
static void                                                                  \
name(float *y, const void *w, size_t ld, const act_type *a, int n, int K)    \
{                                                                            \
	for (int r = 0; r < n; r++) {                                        \
		const struct txl_block_q8_0 *blk =                           \
			(const void *)((const uint8_t *)w + (size_t)r * ld); \
		float acc = 0.0f;                                            \
                                                                             \
		for (int b = 0; b < K / TXL_QK; b++) {                       \
			int32_t s = 0;                                       \
                                                                             \
			for (int i = 0; i < TXL_QK; i++)                     \
				s += blk[b].qs[i] * a->q[b * TXL_QK + i];    \
			acc += (float)s * (txl_f16_to_f32(load_u16(          \
				(const uint8_t *)&blk[b].d)) * a->d[b]);     \
		}                                                            \
		y[r] = acc;                                                  \
	}                                                                    \
}

DOT_ROWS_INT(dot_rows_q8, struct txl_q8_act)
DOT_ROWS_INT(dot_rows_q16, struct txl_q16_act)

/* Q4_0 rows against an int8 query (txl-kernels.h). */
static void
dot_rows_q4(float *y, const void *w, size_t ld, const struct txl_q8_act *a,
	    int n, int K)
{
	for (int r = 0; r < n; r++) {
		const uint8_t *row = (const uint8_t *)w + (size_t)r * ld;
		float acc = 0.0f;

		for (int b = 0; b < K / TXL_QK; b++) {
			struct txl_block_q4_0 blk;
			int32_t s = 0;

			memcpy(&blk, row + b * sizeof blk, sizeof blk);
			for (int i = 0; i < TXL_QK; i++)
				s += q4_value(&blk, i) * a->q[b * TXL_QK + i];
			acc += (float)s * (txl_f16_to_f32(blk.d) * a->d[b]);
		}
		y[r] = acc;
	}
}

/* Q4_K rows against int8 activations (txl-kernels.h): per sub-block j
 * of a super-block, the exact sum of (4 q - z) a (4 times that of q a,
 * less z times the activations' sum, -off / 128), rounded to float, times
 * (u_j times a's scale), added to a sum that starts at 0. */
static void
dot_rows_q4k(float *y, const void *w, size_t ld, const struct txl_q8_act *a,
	     int n, int K)
{
	for (int r = 0; r < n; r++) {
		const uint8_t *row = (const uint8_t *)w + (size_t)r * ld;
		float acc = 0.0f;

		for (int sb = 0; sb < K / TXL_Q4_K_BLOCK; sb++) {
			struct txl_block_q4_k blk;

			memcpy(&blk, row + sb * sizeof blk, sizeof blk);
			for (int j = 0; j < TXL_Q4_K_SUB; j++) {
				const int b = sb * TXL_Q4_K_SUB + j;
				int32_t s = 0;

				for (int i = 0; i < TXL_QK; i++)
					s += q4k_nibble(&blk, j, i) *
					     a->q[b * TXL_QK + i];
				s = 4 * s + txl_q4_k_z(blk.sz, j) *
					(a->off[b] / 128);
				acc += (float)s * (q4k_unit(&blk, j) * a->d[b]);
			}
		}
		y[r] = acc;
	}
}

void
txl_quantize_q16(struct txl_q16_act *a, const float *x, int K)
{
	for (int b = 0; b < K / TXL_QK; b++) {
		const float *xb = x + b * TXL_QK;
		const float d = block_amax(xb) / 32767.0f;

		for (int i = 0; i < TXL_QK; i++) {
			/* a division, not a product by 1 / d: that is inf
			 * for the smallest d.  A NaN d leaves the values 0
			 * and makes the block's products NaN */
			float v = d > 0.0f ? xb[i] / d : 0.0f;
			v = v > 32767.0f ? 32767.0f : v < -32767.0f ? -32767.0f
				: v;
			a->q[b * TXL_QK + i] = (int16_t)lrintf(v);
		}
		a->d[b] = d;
	}
}

/* Interleaved Q8_0 (txl-kernels.h): row i of a group, block b, has its
 * scale at half i of the block and its values j * 4 .. j * 4 + 3 at
 * bytes (j * TXL_IL + i) * 4 of what follows the scales. */
static void
dot_il(float *y, const void *w, int ng, const struct txl_q8_act *a, int K)
{
	const int nb = K / TXL_QK;

	for (int g = 0; g < ng; g++) {
		const uint8_t *grp = (const uint8_t *)w +
			(size_t)g * nb * TXL_IL_BLOCK;
		float acc[2][TXL_IL] = { { 0 } };

		for (int b = 0; b < nb; b++) {
			const uint8_t *blk = grp + (size_t)b * TXL_IL_BLOCK;
			const int8_t *qs = (const int8_t *)(blk + TXL_IL_SCALES);
			const int8_t *x = a->q + b * TXL_QK;

			for (int i = 0; i < TXL_IL; i++) {
				int32_t s = 0;

				for (int j = 0; j < TXL_QK / 4; j++)
					for (int t = 0; t < 4; t++)
						s += qs[(j * TXL_IL + i) * 4 + t] *
						     x[4 * j + t];
				acc[b % 2][i] += (float)s *
					(txl_f16_to_f32(load_u16(blk + 2 * i)) *
					 a->d[b]);
			}
		}
		for (int i = 0; i < TXL_IL; i++)
			y[g * TXL_IL + i] = acc[0][i] + acc[1][i];
	}
}

/* The integer sum of row i of an interleaved Q4_0 block (its values qs)
 * and the activations x: sum (q - 8) x, from off / 16. */
static int32_t
il_q4_sum(const uint8_t *qs, int i, const int8_t *x, int32_t off)
{
	int32_t s = off / 16;

	for (int j = 0; j < TXL_QK / 8; j++)
		for (int t = 0; t < 4; t++) {
			const int v = qs[(j * TXL_IL + i) * 4 + t];

			s += (v & 15) * x[8 * j + t] +
			     (v >> 4) * x[8 * j + 4 + t];
		}
	return s;
}

/* Interleaved Q4_0 (txl-kernels.h): row i of a group, block b, has its
 * scale at half i of the block, values 8 j + t and 8 j + 4 + t in the
 * nibbles of byte (j * TXL_IL + i) * 4 + t of what follows the scales. */
static void
dot_il_q4(float *y, const void *w, int ng, const struct txl_q8_act *a, int K)
{
	const int nb = K / TXL_QK;

	for (int g = 0; g < ng; g++) {
		const uint8_t *grp = (const uint8_t *)w +
			(size_t)g * nb * TXL_IL_BLOCK_Q4;
		float acc[2][TXL_IL] = { { 0 } };

		for (int b = 0; b < nb; b++) {
			const uint8_t *blk = grp + (size_t)b * TXL_IL_BLOCK_Q4;
			const uint8_t *qs = blk + TXL_IL_SCALES;
			const int8_t *x = a->q + b * TXL_QK;

			for (int i = 0; i < TXL_IL; i++) {
				const int32_t s =
					il_q4_sum(qs, i, x, a->off[b]);

				acc[b % 2][i] += (float)s *
					(txl_f16_to_f32(load_u16(blk + 2 * i)) *
					 a->d[b]);
			}
		}
		for (int i = 0; i < TXL_IL; i++)
			y[g * TXL_IL + i] = acc[0][i] + acc[1][i];
	}
}

/* Interleaved Q4_K (txl-kernels.h): a group's super-block holds the 16
 * rows' d (halves), then planes p = 0..5 of 16 bytes, byte i of plane p
 * row i's sz[p], then each sub-block's values in Q4_0's interleaved
 * layout (TXL_IL_Q4K_VALUES); per row and sub-block, the exact sum of
 * (4 q - z) a, times (u times a's scale), into the even or odd blocks'
 * sum. */
static void
dot_il_q4k(float *y, const void *w, int ng, const struct txl_q8_act *a,
	   int K)
{
	const int nsb = K / TXL_Q4_K_BLOCK;

	for (int g = 0; g < ng; g++) {
		const uint8_t *grp = (const uint8_t *)w +
			(size_t)g * nsb * TXL_IL * TXL_Q4_K_BYTES;
		float acc[2][TXL_IL] = { { 0 } };

		for (int sb = 0; sb < nsb; sb++) {
			const uint8_t *blk = grp +
				(size_t)sb * TXL_IL * TXL_Q4_K_BYTES;

			for (int j = 0; j < TXL_Q4_K_SUB; j++) {
				const int b = sb * TXL_Q4_K_SUB + j;
				const uint8_t *qs = blk + TXL_IL_Q4K_VALUES +
					j * TXL_IL * TXL_QK / 2;

				for (int i = 0; i < TXL_IL; i++) {
					uint8_t sz[6];

					for (int p = 0; p < 6; p++)
						sz[p] = blk[2 * TXL_IL + 16 * p + i];
					const int32_t t = 4 * il_q4_sum(qs, i,
						a->q + b * TXL_QK, 0) +
						txl_q4_k_z(sz, j) * (a->off[b] / 128);
					const float u = txl_f16_to_f32(load_u16(
						blk + 2 * i)) *
						(float)txl_q4_k_sc(sz, j) * 0.25f;

					acc[b % 2][i] += (float)t * (u * a->d[b]);
				}
			}
		}
		for (int i = 0; i < TXL_IL; i++)
			y[g * TXL_IL + i] = acc[0][i] + acc[1][i];
	}
}

static void
narrow_f32(void *dst, const float *src, size_t n)
{
	memcpy(dst, src, n * sizeof(float));
}

static void
narrow_f16(void *dst, const float *src, size_t n)
{
	uint8_t *d = dst;

	for (size_t i = 0; i < n; i++) {
		uint16_t h = txl_f32_to_f16(src[i]);
		memcpy(d + 2 * i, &h, 2);
	}
}

static void
narrow_bf16(void *dst, const float *src, size_t n)
{
	uint8_t *d = dst;

	for (size_t i = 0; i < n; i++) {
		uint16_t h = txl_f32_to_bf16(src[i]);
		memcpy(d + 2 * i, &h, 2);
	}
}

static void
narrow_q8_0(void *dst, const float *src, size_t n)
{
	struct txl_block_q8_0 *blk = dst;

	for (size_t b = 0; b < n / TXL_QK; b++) {
		const float *x = src + b * TXL_QK;
		uint16_t d;
		const float id = txl_q8_0_scale(block_amax(x), &d);

		memcpy(&blk[b].d, &d, sizeof d);
		for (int i = 0; i < TXL_QK; i++) {
			/* id > 0: every x finite, |v| < 191 (127 (1 + 2^-11)
			 * for a normal scale, 1.5 times 127 at most for a
			 * subnormal one), so within int */
			const float v = x[i] * id;
			int q = id > 0.0f ? (int)(fabsf(v) + 0.5f) : 0;

			q = q < 127 ? q : 127;
			blk[b].qs[i] = (int8_t)(v < 0.0f ? -q : q);
		}
	}
}

void
txl_narrow_q4_0(void *dst, const float *src, size_t n)
{
	uint8_t *out = dst;

	for (size_t b = 0; b < n / TXL_QK; b++) {
		const float *x = src + b * TXL_QK;
		struct txl_block_q4_0 blk;
		float m = 0.0f, nan = 0.0f;

		for (int i = 0; i < TXL_QK; i++) {
			m = fabsf(x[i]) > fabsf(m) ? x[i] : m;
			nan += x[i] - x[i];	/* NaN for a NaN or inf */
		}
		const float id = txl_q4_0_scale(m + nan, &blk.d);
		for (int i = 0; i < TXL_QK / 2; i++) {
			int q[2];

			for (int j = 0; j < 2; j++) {
				/* id != 0: every x finite, |x id| < 12 (8 for
				 * a normal scale, 1.5 times that at most for
				 * a subnormal one) */
				const float v = x[i + j * TXL_QK / 2] * id + 8.5f;
				q[j] = id != 0.0f ? (int)v : 8;
				q[j] = q[j] < 0 ? 0 : q[j] > 15 ? 15 : q[j];
			}
			blk.qs[i] = (uint8_t)(q[0] | q[1] << 4);
		}
		memcpy(out + b * sizeof blk, &blk, sizeof blk);
	}
}

static void
narrow_q4_0(void *dst, const float *src, size_t n)
{
	txl_narrow_q4_0(dst, src, n);
}

/* Narrowing to Q4_K (the memory's, and txl_convert's; the converter's
 * weights are chosen with more care, models/txlgen/txlfile.py): per
 * sub-block the range [min(x, 0), max(x, 0)] in 15 steps s_j, d =
 * max s_j / 63 rounded to F16, sc_j = s_j / d rounded up (so that the
 * range fits), u_j = d sc_j / 4, z_j = -min / u_j rounded to nearest,
 * q = (x / u_j + z_j) / 4 rounded to nearest and clipped to [0, 15].  A
 * super-block with a NaN or an inf has a NaN d and widens to NaNs, as
 * Q4_0's; one whose d would be past F16's range, too. */
void
txl_narrow_q4_k(void *dst, const float *src, size_t n)
{
	uint8_t *out = dst;

	for (size_t b = 0; b < n / TXL_Q4_K_BLOCK; b++) {
		const float *x = src + b * TXL_Q4_K_BLOCK;
		struct txl_block_q4_k blk;
		float lo[TXL_Q4_K_SUB], step[TXL_Q4_K_SUB], smax = 0.0f;
		float nan = 0.0f;

		for (int j = 0; j < TXL_Q4_K_SUB; j++) {
			float mn = 0.0f, mx = 0.0f;

			for (int i = 0; i < TXL_QK; i++) {
				const float v = x[j * TXL_QK + i];

				mn = v < mn ? v : mn;
				mx = v > mx ? v : mx;
				nan += v - v;	/* NaN for a NaN or inf */
			}
			lo[j] = mn;
			step[j] = (mx - mn) / 15.0f;
			smax = step[j] > smax ? step[j] : smax;
		}
		const float dd = smax / 63.0f;

		blk.d = nan != 0.0f || !(dd <= 65504.0f) ? 0x7e00 :
			txl_f32_to_f16(dd);
		memset(blk.sz, 0, sizeof blk.sz);
		memset(blk.qs, 0, sizeof blk.qs);
		const float d = txl_f16_to_f32(blk.d);
		for (int j = 0; j < TXL_Q4_K_SUB; j++) {
			int sc = d > 0.0f ? (int)ceilf(step[j] / d) : 0;
			float u, iu;
			int z;

			sc = sc > 63 ? 63 : sc;
			u = d * (float)sc * 0.25f;
			iu = u > 0.0f ? 1.0f / u : 0.0f;
			z = iu > 0.0f ? (int)lrintf(-lo[j] * iu) : 0;
			z = z > 63 ? 63 : z;
			blk.sz[j] = (uint8_t)(sc | (z & 3) << 6);
			blk.sz[4 + j / 2] |= (uint8_t)((z >> 2) << 4 * (j & 1));
			for (int i = 0; i < TXL_QK; i++) {
				int q = iu > 0.0f ? (int)lrintf(
					(x[j * TXL_QK + i] * iu + (float)z) *
					0.25f) : 0;

				q = q < 0 ? 0 : q > 15 ? 15 : q;
				blk.qs[16 * j + (i & 15)] |=
					(uint8_t)(i < 16 ? q : q << 4);
			}
		}
		memcpy(out + b * sizeof blk, &blk, sizeof blk);
	}
}

/* A Q4_K block's scale not negative (every 6-bit field is in range) */
bool
txl_q4_k_block_ok(const void *block)
{
	const uint8_t *p = block;

	return (p[1] & 0x80) == 0;
}

static void
axpy_rows_with(txl_widen_fn widen, struct layout t, float *y,
	       const float *a, const void *w, size_t ld, int n, int K)
{
	float buf[ROW_CHUNK];

	for (int k0 = 0; k0 < K; k0 += ROW_CHUNK) {
		int len = K - k0 < ROW_CHUNK ? K - k0 : ROW_CHUNK;
		for (int r = 0; r < n; r++) {
			widen(buf, (const uint8_t *)w + (size_t)r * ld +
			      bytes_of(t, k0), (size_t)len);
			for (int k = 0; k < len; k++)
				y[k0 + k] += a[r] * buf[k];
		}
	}
}

/* A type's dot and axpy_rows (suffix t): its widening by chunks.  (Q4_0
 * and Q8_0 weights against float activations, every set's Q4_0 kernel:
 * the matrix-vector products quantize the activations (dot_q8), this
 * runs only where there was no memory for that.) */
#define WITH_WIDEN(t, widen, layout)                                         \
	static void                                                          \
	dot_rows_##t(float *y, const void *w, size_t ld, const float *x,     \
		     int n, int K)                                           \
	{                                                                    \
		dot_rows_with(widen, layout, y, w, ld, x, n, K);             \
	}                                                                    \
	static void                                                          \
	axpy_rows_##t(float *y, const float *a, const void *w, size_t ld,    \
		      int n, int K)                                          \
	{                                                                    \
		axpy_rows_with(widen, layout, y, a, w, ld, n, K);            \
	}

WITH_WIDEN(f32, widen_f32, LAYOUT_F32)
WITH_WIDEN(f16, widen_f16, LAYOUT_HALF)
WITH_WIDEN(bf16, widen_bf16, LAYOUT_HALF)
WITH_WIDEN(q8_0, widen_q8_0, LAYOUT_Q8_0)
WITH_WIDEN(q4_0, widen_q4_0, LAYOUT_Q4_0)
WITH_WIDEN(q4_k, widen_q4_k, LAYOUT_Q4_K)

double
txl_exp_sum_tail(float *out, const float *x, int i, int n, float max,
		 double sum)
{
	for (; i < n; i++) {
		float e = expf(x[i] - max);
		if (out)
			out[i] = e;
		sum += e;
	}
	return sum;
}

static double
exp_sum(float *out, const float *x, int n, float max)
{
	return txl_exp_sum_tail(out, x, 0, n, max, 0.0);
}

static float
max_of(const float *x, int n)
{
	float m = -INFINITY;

	for (int i = 0; i < n; i++)
		m = x[i] > m ? x[i] : m;
	return m;
}

/* The interleaved layouts made (txl-kernels.h): row i of a group, block b
 * (at blk): its scale at half i of the block,
 * then Q8_0: values 4 j .. 4 j + 3 at bytes (j * TXL_IL + i) * 4;
 * Q4_0: values 8 j + t (t < 4) in the low nibbles of bytes
 * (j * TXL_IL + i) * 4 + t, values 8 j + 4 + t in their high ones. */
static void
il_pack_q8_0(uint8_t *blk, int i, const void *block)
{
	const struct txl_block_q8_0 *q = block;

	memcpy(blk + 2 * i, &q->d, 2);
	for (int j = 0; j < TXL_QK / 4; j++)
		memcpy(blk + TXL_IL_SCALES + (j * TXL_IL + i) * 4,
		       q->qs + 4 * j, 4);
}

static void
il_pack_q4_0(uint8_t *blk, int i, const void *block)
{
	const struct txl_block_q4_0 *q = block;
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

static void
il_pack_q4_k(uint8_t *blk, int i, const void *block)
{
	const struct txl_block_q4_k *q = block;

	memcpy(blk + 2 * i, &q->d, 2);
	for (int p = 0; p < 6; p++)
		blk[2 * TXL_IL + 16 * p + i] = q->sz[p];
	for (int j = 0; j < TXL_Q4_K_SUB; j++) {
		uint8_t *o = blk + TXL_IL_Q4K_VALUES + j * TXL_IL * TXL_QK / 2;
		uint8_t v[TXL_QK];

		for (int c = 0; c < TXL_QK / 2; c++) {
			v[c] = q->qs[16 * j + c] & 15;
			v[c + TXL_QK / 2] = q->qs[16 * j + c] >> 4;
		}
		for (int c = 0; c < TXL_QK / 8; c++)
			for (int t = 0; t < 4; t++)
				o[(c * TXL_IL + i) * 4 + t] = (uint8_t)(v[8 * c + t] |
					v[8 * c + 4 + t] << 4);
	}
}

/* ---- several rows of activations: the definition, each row by the
 * one-row kernel ---- */

#define DOT_MULTI(name, dot)                                                 \
static void                                                                  \
name(float *const *y, const void *w, size_t ld, const float *const *x, int M, \
     int n, int K)                                                           \
{                                                                            \
	for (int m = 0; m < M; m++)                                          \
		dot(y[m], w, ld, x[m], n, K);                                \
}

DOT_MULTI(dot_multi_f32, dot_rows_f32)
DOT_MULTI(dot_multi_f16, dot_rows_f16)
DOT_MULTI(dot_multi_bf16, dot_rows_bf16)

#define DOT_IL_MULTI(name, dot_il)                                           \
static void                                                                  \
name(float *const *y, const void *w, int ng, const struct txl_q8_act *a,      \
     int M, int K)                                                           \
{                                                                            \
	for (int m = 0; m < M; m++)                                          \
		dot_il(y[m], w, ng, &a[m], K);                               \
}

DOT_IL_MULTI(dot_il_multi, dot_il)
DOT_IL_MULTI(dot_il_multi_q4, dot_il_q4)
DOT_IL_MULTI(dot_il_multi_q4k, dot_il_q4k)

const struct txl_type_kernels txl_scalar_f32 = TXL_FLOAT_KERNELS(f32);
const struct txl_type_kernels txl_scalar_f16 = TXL_FLOAT_KERNELS(f16);
const struct txl_type_kernels txl_scalar_bf16 = TXL_FLOAT_KERNELS(bf16);
/* (Q8_0 and Q4_0 meet float activations only without memory for their
 * int8 form: no dot_multi, one row at a time then) */
const struct txl_type_kernels txl_scalar_q8_0 = {
	.widen = widen_q8_0, .narrow = narrow_q8_0,
	.axpy_rows = axpy_rows_q8_0, .dot = dot_rows_q8_0,
	.dot_q8 = dot_rows_q8, .dot_q16 = dot_rows_q16, .dot_il = dot_il,
	.il_pack = il_pack_q8_0, .dot_il_multi = dot_il_multi,
	.unpack_q8 = unpack_q8_q8_0,
};
const struct txl_type_kernels txl_scalar_q4_0 = {
	.widen = widen_q4_0, .narrow = narrow_q4_0,
	.axpy_rows = axpy_rows_q4_0, .dot = dot_rows_q4_0,
	.dot_q8 = dot_rows_q4, .dot_il = dot_il_q4, .il_pack = il_pack_q4_0,
	.dot_il_multi = dot_il_multi_q4, .unpack_q8 = unpack_q8_q4_0,
};

const struct txl_type_kernels txl_scalar_q4_k = {
	.widen = widen_q4_k, .narrow = txl_narrow_q4_k,
	.axpy_rows = axpy_rows_q4_k, .dot = dot_rows_q4_k,
	.dot_q8 = dot_rows_q4k, .dot_il = dot_il_q4k, .il_pack = il_pack_q4_k,
	.dot_il_multi = dot_il_multi_q4k, .unpack_q8 = unpack_q8_q4_k,
};

static const struct txl_kernels kernels_scalar = {
	.name = "scalar", .isa = TXL_ISA_SCALAR, .quantize_q8 = quantize_q8,
	.exp_sum = exp_sum, .max = max_of,
};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86_KERNELS 1
#include <cpuid.h>

/* F16C from CPUID itself: clang before 15 has no "f16c" for
 * __builtin_cpu_supports (the fuzzing build uses clang 14) */
static bool
cpu_has_f16c(void)
{
	unsigned a, b, c, d;

	return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

const struct txl_kernels *
txl_kernels_for(enum txl_isa isa)
{
	switch (isa) {
	case TXL_ISA_SCALAR:
		return &kernels_scalar;
#ifdef HAVE_X86_KERNELS
	case TXL_ISA_AVX2:
		/* __builtin_cpu_supports checks that the OS saves the
		 * registers (XGETBV) as well */
		__builtin_cpu_init();
		if (__builtin_cpu_supports("avx2") &&
		    __builtin_cpu_supports("fma") && cpu_has_f16c())
			return &txl_kernels_avx2;
		return NULL;
	case TXL_ISA_AVX2_VNNI: {
		/* AVX-VNNI: CPUID leaf 7, subleaf 1, EAX bit 4 (clang 14
		 * has no name for it in __builtin_cpu_supports) */
		unsigned a, b, c, d;
		if (txl_kernels_for(TXL_ISA_AVX2) &&
		    __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)))
			return &txl_kernels_avx2_vnni;
		return NULL;
	}
	case TXL_ISA_AVX512:
		__builtin_cpu_init();
		if (__builtin_cpu_supports("avx512f") &&
		    __builtin_cpu_supports("avx512bw") &&
		    __builtin_cpu_supports("avx512vl") &&
		    __builtin_cpu_supports("avx512dq") &&
		    __builtin_cpu_supports("fma") && cpu_has_f16c())
			return &txl_kernels_avx512;
		return NULL;
	case TXL_ISA_AVX512_VNNI:
		if (txl_kernels_for(TXL_ISA_AVX512) &&
		    __builtin_cpu_supports("avx512vnni"))
			return &txl_kernels_avx512_vnni;
		return NULL;
	case TXL_ISA_AVX512_BF16: {
		/* AVX512_BF16: CPUID leaf 7, subleaf 1, EAX bit 5 (the OS's
		 * saving of the registers is avx512f's, checked above) */
		unsigned a, b, c, d;
		if (txl_kernels_for(TXL_ISA_AVX512_VNNI) &&
		    __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5)))
			return &txl_kernels_avx512_bf16;
		return NULL;
	}
#endif
	default:
		return NULL;
	}
}

static const struct txl_kernels *chosen;

static void
choose(void)
{
	static const char *names[TXL_N_ISA] = { "scalar", "avx2", "avxvnni",
						"avx512", "avx512vnni",
						"avx512bf16" };
	const char *want = getenv("TXL_ISA");
	int top = TXL_N_ISA - 1;

	/* TXL_ISA caps the choice (an unknown name is ignored: a library
	 * has nowhere to report it) */
	for (int i = 0; want && i < TXL_N_ISA; i++)
		if (strcmp(want, names[i]) == 0)
			top = i;
	for (int i = top; i >= 0 && !chosen; i--)
		chosen = txl_kernels_for((enum txl_isa)i);
	txl_log(TXL_LOG_DEBUG, "kernels: %s", chosen->name);
}

const struct txl_kernels *
txl_kernels(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, choose);
	return chosen;
}

/* txl.h: the set txl_kernels() chose, for --version and benchmarks. */
const char *
txl_isa_name(void)
{
	return txl_kernels()->name;
}

void
txl_act_quantize(struct txl_act *a, const float *x, int K)
{
	switch (a->type) {
	case TXL_ACT_Q8:
		txl_kernels()->quantize_q8(&a->q8, x, K);
		break;
	case TXL_ACT_Q16:
		txl_quantize_q16(&a->q16, x, K);
		break;
	default:
		a->x = x;
		break;
	}
}
