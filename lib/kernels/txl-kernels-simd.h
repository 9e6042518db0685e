/* SPDX-License-Identifier: MIT */
/*
 * txl-kernels-simd.h - the kernels that AVX2 and AVX-512 compute alike
 * but for the width of their vectors: the widening of the 32-value
 * blocks, and those of the interleaved copies (txl-kernels.h): the
 * integer steps of a block against one row of activations, the products
 * of several rows (dot_il_multi), and Q4_K's products (dot_il,
 * dot_il_multi).  Included by txl-kernels-avx2.c and txl-kernels-avx512.c
 * after they define, for their vectors of VL int32 or float lanes:
 *
 *   VI, VF         the integer and float vector types
 *   VI_LOAD(p)     VL * 4 bytes from p (unaligned)
 *   VI_ZERO(), VI_SET1_8(c), VI_SET1_32(c), VI_ADD32(a, b), VI_AND(a, b),
 *   VI_XOR(a, b), VI_SRLI16(v, n), VI_SLLI32(v, n), VI_MULLO32(a, b)
 *   VI_U8(p)       VL bytes from p as int32 lanes (zero-extended)
 *   VI_DPBUSD(s, u, v)  vpdpbusd (in functions of VNNI_ATTR)
 *   VF_ZERO(), VF_ADD(a, b), VF_MUL(a, b), VF_SET1(f), VF_CVT(v) (int32
 *   to float), VF_PH(p) (VL halves from p), VF_STORE(p, v)
 *   BLOCK_SCALE(b) a Q8_0 or Q4_0 block's scale in every lane
 *   Q8_VALS(b, i), Q4_VALS(b, i)  values i .. i + VL - 1 of a Q8_0 or
 *                  Q4_0 block as floats (i a multiple of VL)
 *   VNNI_ATTR      the target attribute of the VNNI set (avxvnni,
 *                  avx512vnni)
 *   IL_AHEAD       bytes ahead of a Q4_K group's block to prefetch (0:
 *                  none)
 *
 * and the steps of their own instruction set: il_step_bw(s, w, x) (s +
 * the int32 sums of 4 signed bytes of w times 4 of x in each lane) and
 * q4_idot_bw(v, qlo, qhi) (the low nibbles of v's bytes times qlo's,
 * the high ones times qhi's, 4 of each in each int32 lane).  A group of
 * TXL_IL rows is IL_HALVES vectors of rows (AVX2: two of 8, AVX-512: one
 * of 16).
 */
#ifndef TXL_KERNELS_SIMD_H
#define TXL_KERNELS_SIMD_H

#include <immintrin.h>
#include <stdint.h>

#include "txl-kernels.h"

#define IL_HALVES (TXL_IL / VL)

/* The blocks of T (Q8_0, Q4_0) widened, exactly: VALS(b, i) (Q8_VALS,
 * Q4_VALS) times the block's scale. */
#define WIDEN_BLOCKS(name, T, VALS)                                          \
static void                                                                  \
name(float *dst, const void *src, size_t n)                                  \
{                                                                            \
	const T *q = src;                                                    \
                                                                             \
	for (size_t b = 0; b < n / TXL_QK; b++, dst += TXL_QK) {             \
		const VF d = BLOCK_SCALE(q + b);                             \
		for (int i = 0; i < TXL_QK; i += VL)                         \
			VF_STORE(dst + i, VF_MUL(VALS(q + b, i), d));        \
	}                                                                    \
}

/* The broadcast of the 4 activation bytes at x */
static inline VI
bcast4(const int8_t *x)
{
	return VI_SET1_32(*(const int32_t *)(const void *)x);
}

/* Q8_0: the eight steps of 4 columns of a block's vector of rows, as
 * stored (il_step_bw's sign transfer for each row of activations), or
 * flipped to unsigned once for vpdpbusd, whose sums start from off. */
static inline void
il8_prep_bw(VI v[8], const uint8_t *qs)
{
#pragma GCC unroll 8
	for (int j = 0; j < 8; j++)
		v[j] = VI_LOAD(qs + 64 * j);
}

static inline VI
il8_sum_bw(const VI v[8], const int8_t *x, int32_t off)
{
	VI s0 = VI_ZERO(), s1 = s0;

	(void)off;
#pragma GCC unroll 8
	for (int j = 0; j < 8; j += 2) {
		s0 = il_step_bw(s0, v[j], bcast4(x + 4 * j));
		s1 = il_step_bw(s1, v[j + 1], bcast4(x + 4 * j + 4));
	}
	return VI_ADD32(s0, s1);
}

VNNI_ATTR static inline void
il8_prep_vnni(VI v[8], const uint8_t *qs)
{
#pragma GCC unroll 8
	for (int j = 0; j < 8; j++)
		v[j] = VI_XOR(VI_LOAD(qs + 64 * j), VI_SET1_8(-128));
}

VNNI_ATTR static inline VI
il8_sum_vnni(const VI v[8], const int8_t *x, int32_t off)
{
	VI s0 = VI_SET1_32(off), s1 = VI_ZERO();

#pragma GCC unroll 8
	for (int j = 0; j < 8; j += 2) {
		s0 = VI_DPBUSD(s0, v[j], bcast4(x + 4 * j));
		s1 = VI_DPBUSD(s1, v[j + 1], bcast4(x + 4 * j + 4));
	}
	return VI_ADD32(s0, s1);
}

/* Q4_0 (and Q4_K's sub-blocks): the four steps of 8 columns as stored
 * (q4_idot_bw for each row of activations), or their low and high
 * nibbles split once for vpdpbusd; from off / 16. */
static inline void
il4_prep_bw(VI v[8], const uint8_t *qs)
{
#pragma GCC unroll 8
	for (int j = 0; j < 4; j++)
		v[j] = VI_LOAD(qs + 64 * j);
}

static inline VI
il4_sum_bw(const VI v[8], const int8_t *x, int32_t off)
{
	VI s0 = VI_SET1_32(off / 16), s1 = VI_ZERO();

#pragma GCC unroll 8
	for (int j = 0; j < 4; j += 2) {
		s0 = VI_ADD32(s0, q4_idot_bw(v[j], bcast4(x + 8 * j),
					     bcast4(x + 8 * j + 4)));
		s1 = VI_ADD32(s1, q4_idot_bw(v[j + 1], bcast4(x + 8 * j + 8),
					     bcast4(x + 8 * j + 12)));
	}
	return VI_ADD32(s0, s1);
}

VNNI_ATTR static inline void
il4_prep_vnni(VI v[8], const uint8_t *qs)
{
	const VI m = VI_SET1_8(15);

#pragma GCC unroll 8
	for (int j = 0; j < 4; j++) {
		const VI q = VI_LOAD(qs + 64 * j);

		v[2 * j] = VI_AND(q, m);
		v[2 * j + 1] = VI_AND(VI_SRLI16(q, 4), m);
	}
}

VNNI_ATTR static inline VI
il4_sum_vnni(const VI v[8], const int8_t *x, int32_t off)
{
	VI s0 = VI_SET1_32(off / 16), s1 = VI_ZERO();

#pragma GCC unroll 8
	for (int j = 0; j < 4; j++) {
		s0 = VI_DPBUSD(s0, v[2 * j], bcast4(x + 8 * j));
		s1 = VI_DPBUSD(s1, v[2 * j + 1], bcast4(x + 8 * j + 4));
	}
	return VI_ADD32(s0, s1);
}

/*
 * The interleaved copy against several rows of activations: per group,
 * each vector of its rows in turn, and per block the vector's weights
 * made ready once (PREP: nv vectors in registers), then for each row of
 * activations its integer sum from them (SUM: exact, in any order) and
 * the float steps of DOT_IL (each file's) in its order, lane by lane,
 * into the row's sums of the even and the odd blocks.
 */
#define DOT_IL_MULTI(name, PREP, SUM, nv, bsz, attr)                         \
attr static void                                                             \
name(float *const *y, const void *w, int ng, const struct txl_q8_act *a,      \
     int M, int K)                                                           \
{                                                                            \
	const int nb = K / TXL_QK;                                           \
	VF acc[2][TXL_ROWS_MAX];                                             \
                                                                             \
	for (int g = 0; g < ng; g++) {                                       \
		const uint8_t *grp = (const uint8_t *)w + (size_t)g * nb * (bsz); \
		for (int h = 0; h < IL_HALVES; h++) {                        \
			for (int m = 0; m < M; m++)                          \
				acc[0][m] = acc[1][m] = VF_ZERO();           \
			for (int b = 0; b < nb; b++) {                       \
				const uint8_t *blk = grp + (size_t)b * (bsz); \
				const VF sc = VF_PH(blk + 2 * VL * h);       \
				VI v[nv];                                    \
				PREP(v, blk + TXL_IL_SCALES + 4 * VL * h);   \
				for (int m = 0; m < M; m++) {                \
					const VI s = SUM(v, a[m].q + b * TXL_QK, \
							 a[m].off[b]);       \
					acc[b & 1][m] = VF_ADD(acc[b & 1][m], \
						VF_MUL(VF_CVT(s), VF_MUL(sc, \
						VF_SET1(a[m].d[b]))));       \
				}                                            \
			}                                                    \
			for (int m = 0; m < M; m++)                          \
				VF_STORE(y[m] + g * TXL_IL + VL * h,         \
					 VF_ADD(acc[0][m], acc[1][m]));      \
		}                                                            \
	}                                                                    \
}

/* ---- interleaved Q4_K (txl-kernels.h) ---- */

/* The scales and zero points of the TXL_IL rows of a group's super-block
 * (from pl, the planes of their sz bytes): sub-block j's of row i at
 * sc[j][i] and z[j][i]. */
static inline void
q4k_il_planes(const uint8_t *pl, uint8_t sc[TXL_Q4_K_SUB][TXL_IL],
	      uint8_t z[TXL_Q4_K_SUB][TXL_IL])
{
	const __m128i m3 = _mm_set1_epi8(3), m15 = _mm_set1_epi8(15);
	const __m128i h4 = _mm_loadu_si128((const __m128i *)(const void *)
					   (pl + 64));
	const __m128i h5 = _mm_loadu_si128((const __m128i *)(const void *)
					   (pl + 80));
	/* the top 4 bits of z: planes 4 (j 0, 1) and 5 (j 2, 3), the low
	 * nibbles for even j */
	const __m128i top[TXL_Q4_K_SUB] = {
		_mm_and_si128(h4, m15), _mm_and_si128(_mm_srli_epi16(h4, 4), m15),
		_mm_and_si128(h5, m15), _mm_and_si128(_mm_srli_epi16(h5, 4), m15),
	};

#pragma GCC unroll 4
	for (int j = 0; j < TXL_Q4_K_SUB; j++) {
		const __m128i p = _mm_loadu_si128((const __m128i *)(const void *)
						  (pl + 16 * j));

		_mm_storeu_si128((__m128i *)(void *)sc[j],
				 _mm_and_si128(p, _mm_set1_epi8(63)));
		_mm_storeu_si128((__m128i *)(void *)z[j], _mm_or_si128(
			_mm_and_si128(_mm_srli_epi16(p, 6), m3),
			_mm_slli_epi16(top[j], 2)));
	}
}

/*
 * Q4_K's interleaved copy against M rows of activations (name_multi) and
 * against one (name, dot_il): per super-block and sub-block j, for each
 * vector of rows its values made ready once (PREP, Q4_0's layout), then
 * for each row of activations the sums of q a (SUM, from 0), 4 of them
 * less z times the activations' sum, times (d / 4 times sc, exact as the
 * scalar kernel's d sc / 4, times a's scale), into the row's sum of the
 * even or the odd sub-blocks: the scalar kernel's floats in its order.
 */
#define DOT_IL_Q4K(name, PREP, SUM, attr)                                    \
attr static inline __attribute__((always_inline)) void                       \
name##_rows(float *const *y, const void *w, int ng,                          \
	    const struct txl_q8_act *a, int M, int K)                        \
{                                                                            \
	const int nsb = K / TXL_Q4_K_BLOCK;                                  \
	const uint8_t *blk = w;                                              \
                                                                             \
	for (int g = 0; g < ng; g++) {                                       \
		VF acc[2][IL_HALVES][TXL_ROWS_MAX];                          \
		for (int h = 0; h < IL_HALVES; h++)                          \
			for (int m = 0; m < M; m++)                          \
				acc[0][h][m] = acc[1][h][m] = VF_ZERO();     \
		for (int sb = 0; sb < nsb; sb++,                             \
		     blk += TXL_IL * TXL_Q4_K_BYTES) {                       \
			uint8_t sc[TXL_Q4_K_SUB][TXL_IL];                    \
			uint8_t z[TXL_Q4_K_SUB][TXL_IL];                     \
			for (int l = 0; IL_AHEAD &&                          \
			     l < TXL_IL * TXL_Q4_K_BYTES; l += 64)           \
				_mm_prefetch((const char *)(uintptr_t)       \
					     ((uintptr_t)blk + IL_AHEAD + l), \
					     _MM_HINT_T0);                   \
			q4k_il_planes(blk + 2 * TXL_IL, sc, z);              \
			_Pragma("GCC unroll 4")                              \
			for (int j = 0; j < TXL_Q4_K_SUB; j++) {             \
				const int b = sb * TXL_Q4_K_SUB + j;         \
				const uint8_t *qs = blk + TXL_IL_Q4K_VALUES + \
					j * TXL_IL * TXL_QK / 2;             \
				_Pragma("GCC unroll 2")                      \
				for (int h = 0; h < IL_HALVES; h++) {        \
					const VF u = VF_MUL(VF_MUL(VF_PH(    \
						blk + 2 * VL * h),           \
						VF_SET1(0.25f)),             \
						VF_CVT(VI_U8(sc[j] + VL * h))); \
					const VI zv = VI_U8(z[j] + VL * h);  \
					VI v[8];                             \
					PREP(v, qs + 4 * VL * h);            \
					for (int m = 0; m < M; m++) {        \
						const VI t = VI_ADD32(VI_SLLI32( \
							SUM(v, a[m].q + b * TXL_QK, \
							    0), 2),          \
							VI_MULLO32(zv, VI_SET1_32( \
							a[m].off[b] / 128))); \
						acc[j & 1][h][m] = VF_ADD(   \
							acc[j & 1][h][m],    \
							VF_MUL(VF_CVT(t), VF_MUL(u, \
							VF_SET1(a[m].d[b])))); \
					}                                    \
				}                                            \
			}                                                    \
		}                                                            \
		for (int h = 0; h < IL_HALVES; h++)                          \
			for (int m = 0; m < M; m++)                          \
				VF_STORE(y[m] + g * TXL_IL + VL * h,         \
					 VF_ADD(acc[0][h][m], acc[1][h][m])); \
	}                                                                    \
}                                                                            \
                                                                             \
attr static void                                                             \
name##_multi(float *const *y, const void *w, int ng,                         \
	     const struct txl_q8_act *a, int M, int K)                       \
{                                                                            \
	name##_rows(y, w, ng, a, M, K);                                      \
}                                                                            \
                                                                             \
attr static void                                                             \
name(float *y, const void *w, int ng, const struct txl_q8_act *a, int K)     \
{                                                                            \
	float *const one[1] = { y };                                         \
                                                                             \
	name##_rows(one, w, ng, a, 1, K);                                    \
}

#endif /* TXL_KERNELS_SIMD_H */
