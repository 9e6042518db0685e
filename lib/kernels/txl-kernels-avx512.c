/* SPDX-License-Identifier: MIT */
/*
 * txl-kernels-avx512.c - the kernels for AVX-512 (F, BW, VL, DQ:
 * x86-64-v4: Skylake-X, Ice Lake, Sapphire Rapids, Zen 4 and later).
 * Compiled with those flags and called only after txl_kernels_for() has
 * seen the features.  The same scheme as txl-kernels-avx2.c with 16 lanes
 * and masked loads for the tails.
 *
 * Q8_0 weights in matrix-vector products go against activations quantized
 * per block (quantize_q8): integer dot products of two blocks per
 * register, by vpmaddubsw/vpmaddwd here and by vpdpbusd in the
 * avx512vnni set (a CPU with AVX512_VNNI: Ice Lake, Zen 4 and later),
 * the only kernels that differ between the two sets.  AVX-512 BF16
 * (vdpbf16ps) serves the BF16 products of segments alone
 * (txl-gemm-avx512bf16.c, with --compute bf16); AMX is not used.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "txl-kernels.h"
#include "txl-kernels-x86.h"

/* The vectors of txl-kernels-simd.h: 16 lanes */
#define VL 16
#define VI __m512i
#define VF __m512
#define VI_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define VI_ZERO() _mm512_setzero_si512()
#define VI_SET1_8(c) _mm512_set1_epi8(c)
#define VI_SET1_32(c) _mm512_set1_epi32(c)
#define VI_ADD32(a, b) _mm512_add_epi32(a, b)
#define VI_AND(a, b) _mm512_and_si512(a, b)
#define VI_XOR(a, b) _mm512_xor_si512(a, b)
#define VI_SRLI16(v, n) _mm512_srli_epi16(v, n)
#define VI_SLLI32(v, n) _mm512_slli_epi32(v, n)
#define VI_MULLO32(a, b) _mm512_mullo_epi32(a, b)
#define VI_U8(p) _mm512_cvtepu8_epi32(_mm_loadu_si128(                      \
	(const __m128i *)(const void *)(p)))
#define VI_DPBUSD(s, u, v) _mm512_dpbusd_epi32(s, u, v)
#define VF_ZERO() _mm512_setzero_ps()
#define VF_ADD(a, b) _mm512_add_ps(a, b)
#define VF_MUL(a, b) _mm512_mul_ps(a, b)
#define VF_SET1(f) _mm512_set1_ps(f)
#define VF_CVT(v) _mm512_cvtepi32_ps(v)
#define VF_PH(p) _mm512_cvtph_ps(_mm256_loadu_si256(                        \
	(const __m256i *)(const void *)(p)))
#define VF_STORE(p, v) _mm512_storeu_ps(p, v)
#define BLOCK_SCALE(b) block_scale16(b)
#define Q8_VALS(b, i) q8_load16((b)->qs + (i))
#define Q4_VALS(b, i) q4_load16(b, (i) / 16)
#define VNNI_ATTR __attribute__((target("avx512vnni")))

/* [sum(a), sum(b), sum(c), sum(d)] */
static inline __m128
hsum4(__m512 a, __m512 b, __m512 c, __m512 d)
{
	/* fold 512 -> 256 bits, then as AVX2 does */
	__m256 a8 = _mm256_add_ps(_mm512_castps512_ps256(a),
				  _mm512_extractf32x8_ps(a, 1));
	__m256 b8 = _mm256_add_ps(_mm512_castps512_ps256(b),
				  _mm512_extractf32x8_ps(b, 1));
	__m256 c8 = _mm256_add_ps(_mm512_castps512_ps256(c),
				  _mm512_extractf32x8_ps(c, 1));
	__m256 d8 = _mm256_add_ps(_mm512_castps512_ps256(d),
				  _mm512_extractf32x8_ps(d, 1));
	__m256 ab = _mm256_hadd_ps(a8, b8);
	__m256 cd = _mm256_hadd_ps(c8, d8);
	__m256 abcd = _mm256_hadd_ps(ab, cd);

	return _mm_add_ps(_mm256_castps256_ps128(abcd),
			  _mm256_extractf128_ps(abcd, 1));
}

/* Sixteen values of each dtype as floats; the masked forms load only the
 * lanes of m (the tail of a row) and give 0 in the others. */
static inline __m512
load16_f32(const uint8_t *p, __mmask16 m)
{
	return _mm512_maskz_loadu_ps(m, p);
}

static inline __m512
load16_f16(const uint8_t *p, __mmask16 m)
{
	return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

static inline __m512
load16_bf16(const uint8_t *p, __mmask16 m)
{
	__m256i h = _mm256_maskz_loadu_epi16(m, p);

	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h),
						     16));
}

#define FULL ((__mmask16)0xffff)

#define DOT_ROWS(name, size, load16)                                         \
static void                                                                  \
name(float *y, const void *w, size_t ld, const float *x, int n, int K)       \
{                                                                            \
	const uint8_t *base = w;                                             \
	const int K16 = K & ~15, K32 = K & ~31;                              \
	const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1);           \
	int r = 0;                                                           \
                                                                             \
	for (; r + 4 <= n; r += 4) {                                         \
		ROWS4(uint8_t, base, r, ld, w0, w1, w2, w3);                \
		__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;  \
		__m512 b0 = a0, b1 = a0, b2 = a0, b3 = a0;                   \
		int k = 0;                                                   \
		for (; k < K32; k += 32) {                                   \
			__m512 x0 = _mm512_loadu_ps(x + k);                  \
			__m512 x1 = _mm512_loadu_ps(x + k + 16);             \
			const int o0 = k * size, o1 = (k + 16) * size;       \
			a0 = _mm512_fmadd_ps(load16(w0 + o0, FULL), x0, a0); \
			a1 = _mm512_fmadd_ps(load16(w1 + o0, FULL), x0, a1); \
			a2 = _mm512_fmadd_ps(load16(w2 + o0, FULL), x0, a2); \
			a3 = _mm512_fmadd_ps(load16(w3 + o0, FULL), x0, a3); \
			b0 = _mm512_fmadd_ps(load16(w0 + o1, FULL), x1, b0); \
			b1 = _mm512_fmadd_ps(load16(w1 + o1, FULL), x1, b1); \
			b2 = _mm512_fmadd_ps(load16(w2 + o1, FULL), x1, b2); \
			b3 = _mm512_fmadd_ps(load16(w3 + o1, FULL), x1, b3); \
		}                                                            \
		for (; k < K; k += 16) {                                     \
			__mmask16 m = k < K16 ? FULL : tail;                 \
			__m512 x0 = _mm512_maskz_loadu_ps(m, x + k);         \
			const int o0 = k * size;                             \
			a0 = _mm512_fmadd_ps(load16(w0 + o0, m), x0, a0);    \
			a1 = _mm512_fmadd_ps(load16(w1 + o0, m), x0, a1);    \
			a2 = _mm512_fmadd_ps(load16(w2 + o0, m), x0, a2);    \
			a3 = _mm512_fmadd_ps(load16(w3 + o0, m), x0, a3);    \
		}                                                            \
		_mm_storeu_ps(y + r, hsum4(_mm512_add_ps(a0, b0),            \
					   _mm512_add_ps(a1, b1),            \
					   _mm512_add_ps(a2, b2),            \
					   _mm512_add_ps(a3, b3)));          \
	}                                                                    \
	for (; r < n; r++) {                                                 \
		const uint8_t *w0 = base + (size_t)r * ld;                   \
		__m512 a0 = _mm512_setzero_ps();                             \
		for (int k = 0; k < K; k += 16) {                            \
			__mmask16 m = k < K16 ? FULL : tail;                 \
			a0 = _mm512_fmadd_ps(load16(w0 + k * size, m),       \
					     _mm512_maskz_loadu_ps(m, x + k), a0); \
		}                                                            \
		y[r] = _mm512_reduce_add_ps(a0);                             \
	}                                                                    \
}

DOT_ROWS(dot_rows_f32, 4, load16_f32)
DOT_ROWS(dot_rows_f16, 2, load16_f16)
DOT_ROWS(dot_rows_bf16, 2, load16_bf16)

#define WIDEN(name, size, load16)                                            \
static void                                                                  \
name(float *dst, const void *src, size_t n)                                  \
{                                                                            \
	const uint8_t *s = src;                                              \
	size_t i = 0;                                                        \
                                                                             \
	for (; i + 16 <= n; i += 16)                                         \
		_mm512_storeu_ps(dst + i, load16(s + i * size, FULL));       \
	if (i < n) {                                                         \
		__mmask16 m = (__mmask16)((1u << (n - i)) - 1);              \
		_mm512_mask_storeu_ps(dst + i, m, load16(s + i * size, m));  \
	}                                                                    \
}

WIDEN(widen_f16, 2, load16_f16)
WIDEN(widen_bf16, 2, load16_bf16)

/* Q8_0: sixteen int8 values of a block as floats. */
static inline __m512
q8_load16(const int8_t *q)
{
	__m128i b = _mm_loadu_si128((const __m128i *)(const void *)q);

	return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
}

/* A block's scale in every lane (Q8_0 and Q4_0 start with it). */
static inline __m512
block_scale16(const void *p)
{
	uint16_t d;

	memcpy(&d, p, sizeof d);
	return _mm512_cvtph_ps(_mm256_set1_epi16((short)d));
}

static void
dot_rows_q8_0(float *y, const void *w, size_t ld, const float *x, int n,
	      int K)
{
	const uint8_t *base = w;
	const int nb = K / TXL_QK;
	int r = 0;

	for (; r + 4 <= n; r += 4) {
		/* four rows, each with its own accumulator, written out */
		ROWS4(struct txl_block_q8_0, base, r, ld, q0, q1, q2, q3);
		__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;

		for (int b = 0; b < nb; b++) {
			__m512 x0 = _mm512_loadu_ps(x + b * TXL_QK);
			__m512 x1 = _mm512_loadu_ps(x + b * TXL_QK + 16);
#define ROW(q, a)                                                            \
			do {                                                 \
				__m512 t = _mm512_mul_ps(q8_load16(q[b].qs), x0); \
				t = _mm512_fmadd_ps(q8_load16(q[b].qs + 16), x1, t); \
				a = _mm512_fmadd_ps(t, block_scale16(q + b), a);  \
			} while (0)
			ROW(q0, a0);
			ROW(q1, a1);
			ROW(q2, a2);
			ROW(q3, a3);
#undef ROW
		}
		_mm_storeu_ps(y + r, hsum4(a0, a1, a2, a3));
	}
	for (; r < n; r++) {
		const struct txl_block_q8_0 *q = (const void *)(base +
								(size_t)r * ld);
		__m512 acc = _mm512_setzero_ps();

		for (int b = 0; b < nb; b++) {
			__m512 t = _mm512_mul_ps(q8_load16(q[b].qs),
						 _mm512_loadu_ps(x + b * TXL_QK));
			t = _mm512_fmadd_ps(q8_load16(q[b].qs + 16),
					    _mm512_loadu_ps(x + b * TXL_QK + 16), t);
			acc = _mm512_fmadd_ps(t, block_scale16(q + b), acc);
		}
		y[r] = _mm512_reduce_add_ps(acc);
	}
}

/* Q4_0: sixteen values of a block (half h: values 16 h .. 16 h + 15) as
 * floats. */
static inline __m512
q4_load16(const struct txl_block_q4_0 *b, int h)
{
	__m128i x = _mm_loadu_si128((const __m128i *)(const void *)b->qs);

	x = _mm_and_si128(h ? _mm_srli_epi16(x, 4) : x, _mm_set1_epi8(15));
	/* q - 8 by a look-up, one permute where a subtraction and a
	 * conversion took two */
	return _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(x), _mm512_setr_ps(
		-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7));
}

/* ---- Q8_0 against quantized activations ----
 *
 * Two blocks per register: the 64 int8 products of blocks b and b + 1 of
 * a row summed by fours into 16 int32 lanes (8 per block, exact), turned
 * into floats and multiplied by each block's two scales.  An odd last
 * block goes alone, its partner's lanes zero. */

/* A block's 32 values into *x0, *x1; their largest magnitude (exact),
 * NaN if one of them is NaN or inf. */
static inline float
block_amax(const float *xb, __m512 *x0, __m512 *x1)
{
	*x0 = _mm512_loadu_ps(xb);
	*x1 = _mm512_loadu_ps(xb + 16);
	/* x - x is NaN where x is NaN or inf */
	return _mm512_cmp_ps_mask(_mm512_sub_ps(*x0, *x0),
				  _mm512_sub_ps(*x1, *x1), _CMP_UNORD_Q) ? NAN
		: _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(*x0),
						     _mm512_abs_ps(*x1)));
}

/* The scalar quantize_q8 (txl-kernels.c) a block at a time, the same
 * operations in the same order but the max (exact in any order): the same
 * values; a NaN or an inf in the block makes its scale NaN. */
static void
quantize_q8(struct txl_q8_act *a, const float *x, int K)
{
	for (int b = 0; b < K / TXL_QK; b++) {
		__m512 x0, x1;
		float d = block_amax(x + b * TXL_QK, &x0, &x1) / 127.0f;
		__m512 id = _mm512_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
		/* nearest even, as lrintf (MXCSR's default) */
		__m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, id));
		__m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, id));

		_mm_storeu_si128((__m128i *)(void *)(a->q + b * TXL_QK),
				 _mm512_cvtsepi32_epi8(q0));
		_mm_storeu_si128((__m128i *)(void *)(a->q + b * TXL_QK + 16),
				 _mm512_cvtsepi32_epi8(q1));
		a->d[b] = d;
		/* the sum of the values stored, saturated: a NaN's lane is
		 * INT_MIN, and the sum of those would overflow */
		const __m512i lo = _mm512_set1_epi32(-128);
		const __m512i hi = _mm512_set1_epi32(127);
		q0 = _mm512_max_epi32(_mm512_min_epi32(q0, hi), lo);
		q1 = _mm512_max_epi32(_mm512_min_epi32(q1, hi), lo);
		a->off[b] = -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
	}
}

/* The int8 values of a row's blocks b and b + 1 (two loads: a block's
 * values are 34 bytes after the previous block's); b alone if `one`. */
static inline __m512i
q8_qs2(const struct txl_block_q8_0 *q, bool one)
{
	__m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)q[0].qs);

	if (one)
		return _mm512_zextsi256_si512(lo);
	return _mm512_inserti64x4(_mm512_castsi256_si512(lo),
				  _mm256_loadu_si256((const __m256i *)(const void *)q[1].qs),
				  1);
}

/* [d(b) x 8, d(b + 1) x 8] of a row's blocks (0 for b + 1 if `one`) */
static inline __m512
q8_scale2(const struct txl_block_q8_0 *q, bool one)
{
	uint16_t d0, d1 = 0;

	memcpy(&d0, &q[0].d, sizeof d0);
	if (!one)
		memcpy(&d1, &q[1].d, sizeof d1);
	return _mm512_cvtph_ps(_mm256_mask_set1_epi16(_mm256_set1_epi16((short)d0),
						      0xff00, (short)d1));
}

/* The activations' blocks b and b + 1 (b alone if `one`, the rest 0):
 * values, scales as q8_scale2's, off(b) in lane 0 and off(b + 1) in
 * lane 8. */
static inline __m512i
q8_act2(const struct txl_q8_act *a, int b, bool one, __m512 *d, __m512i *off)
{
	*d = _mm512_insertf32x8(_mm512_set1_ps(a->d[b]),
				_mm256_set1_ps(one ? 0.0f : a->d[b + 1]), 1);
	*off = _mm512_mask_set1_epi32(_mm512_maskz_set1_epi32(1, a->off[b]),
				      0x100, one ? 0 : a->off[b + 1]);
	return _mm512_maskz_loadu_epi8(one ? 0xffffffffull : ~0ull,
				       a->q + b * TXL_QK);
}

/* The integer products, in 16 lanes: |w| (unsigned: 128 for -128) times
 * x with w's sign, by pairs (at most 2 * 128 * 127 < 2^15), then by
 * fours. */
static inline __m512i
q8_idot_bw(__m512i w, __m512i x, __m512i off)
{
	__m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w),
					  _mm512_setzero_si512(), x);

	(void)off;
	return _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w), sx),
				 _mm512_set1_epi16(1));
}

/* The same by vpdpbusd, which multiplies unsigned by signed bytes: w + 128
 * (w with its sign bit flipped) times x, from off = -128 sum(x). */
__attribute__((target("avx512vnni")))
static inline __m512i
q8_idot_vnni(__m512i w, __m512i x, __m512i off)
{
	return _mm512_dpbusd_epi32(off, _mm512_xor_si512(w, _mm512_set1_epi8(-128)),
				   x);
}

/* acc += the products of row q's blocks b (and b + 1) as floats, scaled */
#define Q8_ROW(idot, q, b, one, x, d, off, acc)                              \
	acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(idot(q8_qs2((q) + (b), one), \
						      x, off)),              \
			      _mm512_mul_ps(q8_scale2((q) + (b), one), d), acc)

/* Four rows at a time, the activations' blocks loaded once for the four. */
#define Q8_STEP4(idot, b, one)                                               \
	do {                                                                 \
		__m512 d;                                                    \
		__m512i off, x = q8_act2(a, b, one, &d, &off);               \
		Q8_ROW(idot, q0, b, one, x, d, off, a0);                     \
		Q8_ROW(idot, q1, b, one, x, d, off, a1);                     \
		Q8_ROW(idot, q2, b, one, x, d, off, a2);                     \
		Q8_ROW(idot, q3, b, one, x, d, off, a3);                     \
	} while (0)

#define DOT_ROWS_Q8(name, idot, attr)                                        \
attr static void                                                             \
name(float *y, const void *w, size_t ld, const struct txl_q8_act *a, int n,  \
     int K)                                                                  \
{                                                                            \
	const uint8_t *base = w;                                             \
	const int nb = K / TXL_QK;                                           \
	int r = 0;                                                           \
                                                                             \
	for (; r + 4 <= n; r += 4) {                                         \
		ROWS4(struct txl_block_q8_0, base, r, ld, q0, q1, q2, q3);    \
		__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;  \
		int b = 0;                                                   \
		for (; b + 2 <= nb; b += 2)                                  \
			Q8_STEP4(idot, b, false);                            \
		if (b < nb)                                                  \
			Q8_STEP4(idot, b, true);                             \
		_mm_storeu_ps(y + r, hsum4(a0, a1, a2, a3));                 \
	}                                                                    \
	for (; r < n; r++) {                                                 \
		const struct txl_block_q8_0 *q = (const void *)(base + (size_t)r * ld); \
		__m512 acc = _mm512_setzero_ps(), d;                         \
		__m512i x, off;                                              \
		for (int b = 0; b < nb; b += 2) {                            \
			const bool one = b + 1 == nb;                        \
			x = q8_act2(a, b, one, &d, &off);                    \
			Q8_ROW(idot, q, b, one, x, d, off, acc);             \
		}                                                            \
		y[r] = _mm512_reduce_add_ps(acc);                            \
	}                                                                    \
}

DOT_ROWS_Q8(dot_rows_q8_bw, q8_idot_bw, )
DOT_ROWS_Q8(dot_rows_q8_vnni, q8_idot_vnni, __attribute__((target("avx512vnni"))))

/* Q8_0 rows against an int16 query (txl-kernels-q16.h): a block of the
 * query in one register, a block of a row times it by pairs into 16 int32
 * lanes folded to 8 (exact: |w a| <= 128 * 32767). */
typedef __m512i q16_query_t;

static inline q16_query_t
q16_query(const int16_t *q)
{
	return _mm512_loadu_si512(q);
}

static inline __m256i
q16_block_idot(const struct txl_block_q8_0 *b, q16_query_t a)
{
	const __m512i p = _mm512_madd_epi16(_mm512_cvtepi8_epi16(
		_mm256_loadu_si256((const __m256i *)(const void *)b->qs)), a);

	return _mm256_add_epi32(_mm512_castsi512_si256(p),
				_mm512_extracti64x4_epi64(p, 1));
}

#include "txl-kernels-q16.h"
#include "txl-kernels-q4.h"

/* ---- Q4_0 memory against an int8 query ----
 *
 * Sixteen rows at a time, a block at a time: the 16 bytes of each row's
 * block, four rows to a register; their low and high nibbles times the
 * query's bytes into 4 int32 lanes per row (vpdpbusd, or vpmaddubsw and
 * vpmaddwd), exact; the 16 rows' lanes summed by a 4 x 4 transpose into
 * one register, row 4 g + k in lane 4 k + g (Q4_LANE_ROWS); then the
 * float steps of the scalar kernel in those lanes, the rows put back in
 * order when stored. */
#define Q4_LANE_ROWS _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, \
				       14, 3, 7, 11, 15)

/* The 16 value bytes of a block of 4 rows, ld bytes apart. */
static inline __m512i
q4_rows4(const uint8_t *p, size_t ld)
{
	__m512i v = _mm512_castsi128_si512(_mm_loadu_si128(
		(const __m128i *)(const void *)p));

	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)
						  (p + ld)), 1);
	v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)
						  (p + 2 * ld)), 2);
	return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)
						     (p + 3 * ld)), 3);
}

static inline __m512i
q4_idot_bw(__m512i v, __m512i qlo, __m512i qhi)
{
	const __m512i m = _mm512_set1_epi8(15);
	const __m512i p = _mm512_add_epi16(
		_mm512_maddubs_epi16(_mm512_and_si512(v, m), qlo),
		_mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(v, 4),
						      m), qhi));

	return _mm512_madd_epi16(p, _mm512_set1_epi16(1));
}

__attribute__((target("avx512vnni")))
static inline __m512i
q4_idot_vnni(__m512i v, __m512i qlo, __m512i qhi)
{
	const __m512i m = _mm512_set1_epi8(15);

	return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(),
		_mm512_and_si512(v, m), qlo),
		_mm512_and_si512(_mm512_srli_epi16(v, 4), m), qhi);
}

/* [sum of a's lanes of row k, b's, c's, d's] in each 128-bit lane k */
static inline __m512i
sum_lanes4x4(__m512i a, __m512i b, __m512i c, __m512i d)
{
	const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b),
					    _mm512_unpackhi_epi32(a, b));
	const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d),
					    _mm512_unpackhi_epi32(c, d));

	return _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1),
				_mm512_unpackhi_epi64(t0, t1));
}

/* The scales of 16 blocks ld bytes apart, lane 4 k + g that of row
 * 4 g + k (Q4_LANE_ROWS) */
static inline __m512
q4_scales16(const uint8_t *p, size_t ld)
{
	static const int rows[16] = { 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14,
				      3, 7, 11, 15 };

	return _mm512_cvtph_ps(_mm256_set_m128i(scale_bits8(p, ld, rows + 8),
						scale_bits8(p, ld, rows)));
}

#define DOT_ROWS_Q4(name, idot, attr)                                        \
attr static void                                                             \
name(float *y, const void *w, size_t ld, const struct txl_q8_act *a, int n,  \
     int K)                                                                  \
{                                                                            \
	const uint8_t *base = w;                                             \
	const size_t bs = sizeof(struct txl_block_q4_0);                     \
	int r = 0;                                                           \
                                                                             \
	for (; r + 16 <= n; r += 16) {                                       \
		const uint8_t *w0 = base + (size_t)r * ld;                   \
		__m512 acc = _mm512_setzero_ps();                            \
                                                                             \
		for (int b = 0; b < K / TXL_QK; b++) {                       \
			const uint8_t *wb = w0 + b * bs, *v = wb + 2;        \
			const int8_t *q = a->q + b * TXL_QK;                 \
			const __m512i qlo = _mm512_broadcast_i32x4(          \
				_mm_loadu_si128((const __m128i *)(const void *)q)); \
			const __m512i qhi = _mm512_broadcast_i32x4(          \
				_mm_loadu_si128((const __m128i *)(const void *)(q + 16))); \
			__m512i s = sum_lanes4x4(                            \
				idot(q4_rows4(v, ld), qlo, qhi),             \
				idot(q4_rows4(v + 4 * ld, ld), qlo, qhi),    \
				idot(q4_rows4(v + 8 * ld, ld), qlo, qhi),    \
				idot(q4_rows4(v + 12 * ld, ld), qlo, qhi));  \
			const __m512 d = _mm512_mul_ps(q4_scales16(wb, ld),  \
				_mm512_set1_ps(a->d[b]));                    \
                                                                             \
			s = _mm512_add_epi32(s, _mm512_set1_epi32(a->off[b] / 16)); \
			acc = _mm512_add_ps(acc, _mm512_mul_ps(              \
				_mm512_cvtepi32_ps(s), d));                  \
		}                                                            \
		/* lane 4 k + g holds row 4 g + k: the same swap back */     \
		_mm512_storeu_ps(y + r, _mm512_permutexvar_ps(Q4_LANE_ROWS, acc)); \
	}                                                                    \
	for (; r < n; r++)                                                   \
		y[r] = q4_row_dot(base + (size_t)r * ld, a, K);              \
}

DOT_ROWS_Q4(dot_rows_q4_bw, q4_idot_bw, )
DOT_ROWS_Q4(dot_rows_q4_vnni, q4_idot_vnni, __attribute__((target("avx512vnni"))))

/* Interleaved Q8_0 (txl-kernels.h): the 4 columns j of every row of a
 * group, 64 bytes, times the activations' 4 bytes broadcast, summed into
 * the 16 rows' lanes.  By sign transfer and pairs, as q8_idot_bw; by
 * vpdpbusd from off as q8_idot_vnni.  The eight steps of a block go to
 * two sums (integer: exact in any order). */
static inline __m512i
il_step_bw(__m512i s, __m512i w, __m512i xb)
{
	__m512i sx = _mm512_mask_sub_epi8(xb, _mm512_movepi8_mask(w),
					  _mm512_setzero_si512(), xb);

	return _mm512_add_epi32(s, _mm512_madd_epi16(
		_mm512_maddubs_epi16(_mm512_abs_epi8(w), sx),
		_mm512_set1_epi16(1)));
}

static inline __m512i
il_idot_bw_step(__m512i s, const uint8_t *qs, const int8_t *x, int j)
{
	return il_step_bw(s, _mm512_loadu_si512(qs + 64 * j),
			  _mm512_set1_epi32(*(const int32_t *)(const void *)
					    (x + 4 * j)));
}

/* (the sums in named variables: GCC keeps an array indexed by j % 2 in
 * memory, and each step then waits for the store of the last) */
static inline __m512i
il_idot_bw(const uint8_t *qs, const int8_t *x, int32_t off)
{
	__m512i s0 = _mm512_setzero_si512(), s1 = s0;

	(void)off;
	for (int j = 0; j < TXL_QK / 4; j += 2) {
		s0 = il_idot_bw_step(s0, qs, x, j);
		s1 = il_idot_bw_step(s1, qs, x, j + 1);
	}
	return _mm512_add_epi32(s0, s1);
}

__attribute__((target("avx512vnni")))
static inline __m512i
il_idot_vnni_step(__m512i s, const uint8_t *qs, const int8_t *x, int j)
{
	return _mm512_dpbusd_epi32(s, _mm512_xor_si512(
		_mm512_loadu_si512(qs + 64 * j), _mm512_set1_epi8(-128)),
		_mm512_set1_epi32(*(const int32_t *)(const void *)(x + 4 * j)));
}

__attribute__((target("avx512vnni")))
static inline __m512i
il_idot_vnni(const uint8_t *qs, const int8_t *x, int32_t off)
{
	__m512i s0 = _mm512_set1_epi32(off), s1 = _mm512_setzero_si512();

	for (int j = 0; j < TXL_QK / 4; j += 2) {
		s0 = il_idot_vnni_step(s0, qs, x, j);
		s1 = il_idot_vnni_step(s1, qs, x, j + 1);
	}
	return _mm512_add_epi32(s0, s1);
}

/* acc += block b of the group at blk: its integer sums times the scales */
#define IL_BLOCK(idot, blk, b, acc)                                          \
	acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(           \
		idot((blk) + TXL_IL_SCALES, a->q + (b) * TXL_QK,             \
		     a->off[b])),                                            \
		_mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(            \
				(const __m256i *)(const void *)(blk))),      \
			      _mm512_set1_ps(a->d[b]))))

/* bsz: the bytes of a group's block (TXL_IL_BLOCK, TXL_IL_BLOCK_Q4) */
#define DOT_IL(name, idot, bsz, attr)                                        \
attr static void                                                             \
name(float *y, const void *w, int ng, const struct txl_q8_act *a, int K)     \
{                                                                            \
	const int nb = K / TXL_QK;                                           \
	const uint8_t *blk = w;                                              \
                                                                             \
	for (int g = 0; g < ng; g++) {                                       \
		__m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;              \
		int b = 0;                                                   \
		for (; b + 2 <= nb; b += 2, blk += 2 * (bsz)) {              \
			IL_BLOCK(idot, blk, b, acc0);                        \
			IL_BLOCK(idot, blk + (bsz), b + 1, acc1);            \
		}                                                            \
		if (b < nb) {                                                \
			IL_BLOCK(idot, blk, b, acc0);                        \
			blk += (bsz);                                        \
		}                                                            \
		_mm512_storeu_ps(y + g * TXL_IL, _mm512_add_ps(acc0, acc1)); \
	}                                                                    \
}

DOT_IL(dot_il_bw, il_idot_bw, TXL_IL_BLOCK, )
DOT_IL(dot_il_vnni, il_idot_vnni, TXL_IL_BLOCK,
       __attribute__((target("avx512vnni"))))

/* Interleaved Q4_0 (txl-kernels.h): 8 columns of the 16 rows, 64 bytes,
 * a mask and a shift from two vectors of the Q8_0 layout's unsigned
 * bytes, each times 4 bytes of the activations broadcast (q4_idot_bw or
 * q4_idot_vnni, as the memory's rows); from off / 16 in every lane, the
 * even and odd steps in sums of their own. */
#define IL4_STEP(idot, qs, x, j)                                             \
	idot(_mm512_loadu_si512((qs) + 64 * (j)),                            \
	     _mm512_set1_epi32(*(const int32_t *)(const void *)((x) + 8 * (j))), \
	     _mm512_set1_epi32(*(const int32_t *)(const void *)              \
			       ((x) + 8 * (j) + 4)))
/* (the sums in named variables, as il_idot_bw's) */
#define IL4_IDOT(name, idot, attr)                                           \
attr static inline __m512i                                                   \
name(const uint8_t *qs, const int8_t *x, int32_t off)                        \
{                                                                            \
	__m512i s0 = _mm512_set1_epi32(off / 16), s1 = _mm512_setzero_si512(); \
                                                                             \
	for (int j = 0; j < TXL_QK / 8; j += 2) {                            \
		s0 = _mm512_add_epi32(s0, IL4_STEP(idot, qs, x, j));         \
		s1 = _mm512_add_epi32(s1, IL4_STEP(idot, qs, x, j + 1));     \
	}                                                                    \
	return _mm512_add_epi32(s0, s1);                                     \
}

IL4_IDOT(il4_idot_bw, q4_idot_bw, )
IL4_IDOT(il4_idot_vnni, q4_idot_vnni, __attribute__((target("avx512vnni"))))

DOT_IL(dot_il_q4_bw, il4_idot_bw, TXL_IL_BLOCK_Q4, )
DOT_IL(dot_il_q4_vnni, il4_idot_vnni, TXL_IL_BLOCK_Q4,
       __attribute__((target("avx512vnni"))))

#define AXPY_ROWS(name, size, load16)                                        \
static void                                                                  \
name(float *y, const float *a, const void *w, size_t ld, int n, int K)      \
{                                                                            \
	const uint8_t *base = w;                                             \
                                                                             \
	for (int k0 = 0; k0 < K; k0 += 64) {                                 \
		__mmask16 m0, m1, m2, m3;                                    \
		__m512 acc0, acc1, acc2, acc3;                               \
		m0 = mask_of(K - k0);                                        \
		m1 = mask_of(K - k0 - 16);                                   \
		m2 = mask_of(K - k0 - 32);                                   \
		m3 = mask_of(K - k0 - 48);                                   \
		acc0 = _mm512_maskz_loadu_ps(m0, y + k0);                    \
		acc1 = _mm512_maskz_loadu_ps(m1, y + k0 + 16);               \
		acc2 = _mm512_maskz_loadu_ps(m2, y + k0 + 32);               \
		acc3 = _mm512_maskz_loadu_ps(m3, y + k0 + 48);               \
		for (int r = 0; r < n; r++) {                                \
			const uint8_t *wr = base + (size_t)r * ld + k0 * size; \
			__m512 ar = _mm512_set1_ps(a[r]);                    \
			acc0 = _mm512_fmadd_ps(ar, load16(wr, m0), acc0);    \
			acc1 = _mm512_fmadd_ps(ar, load16(wr + 16 * size, m1), acc1); \
			acc2 = _mm512_fmadd_ps(ar, load16(wr + 32 * size, m2), acc2); \
			acc3 = _mm512_fmadd_ps(ar, load16(wr + 48 * size, m3), acc3); \
		}                                                            \
		_mm512_mask_storeu_ps(y + k0, m0, acc0);                     \
		_mm512_mask_storeu_ps(y + k0 + 16, m1, acc1);                \
		_mm512_mask_storeu_ps(y + k0 + 32, m2, acc2);                \
		_mm512_mask_storeu_ps(y + k0 + 48, m3, acc3);                \
	}                                                                    \
}

/* The lanes of a tail of `left` values (all 16 if left >= 16). */
static inline __mmask16
mask_of(int left)
{
	return left >= 16 ? FULL : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
}

AXPY_ROWS(axpy_rows_f32, 4, load16_f32)
AXPY_ROWS(axpy_rows_f16, 2, load16_f16)
AXPY_ROWS(axpy_rows_bf16, 2, load16_bf16)

/* Q8_0 rows: per block, a[r] times its scale, then its values widened
 * (exactly) and multiplied by that as AXPY_ROWS does, 64 columns (two
 * blocks) at a time, two rows at a time into two sets of sums (one chain
 * of multiply-adds waits for the last), then a last odd block. */
static void
axpy_rows_q8_0(float *y, const float *a, const void *w, size_t ld, int n,
	       int K)
{
	const uint8_t *base = w;
	const int nb = K / TXL_QK;
	int b = 0;

	for (; b + 2 <= nb; b += 2) {
		float *yb = y + b * TXL_QK;
		__m512 c0 = _mm512_loadu_ps(yb), c1 = _mm512_loadu_ps(yb + 16);
		__m512 c2 = _mm512_loadu_ps(yb + 32);
		__m512 c3 = _mm512_loadu_ps(yb + 48);
		__m512 e0 = _mm512_setzero_ps(), e1 = e0, e2 = e0, e3 = e0;
		int r = 0;

#define ROW(q, d0, d1, s0, s1, s2, s3)                                       \
		do {                                                         \
			s0 = _mm512_fmadd_ps(d0, q8_load16(q[0].qs), s0);    \
			s1 = _mm512_fmadd_ps(d0, q8_load16(q[0].qs + 16), s1); \
			s2 = _mm512_fmadd_ps(d1, q8_load16(q[1].qs), s2);    \
			s3 = _mm512_fmadd_ps(d1, q8_load16(q[1].qs + 16), s3); \
		} while (0)
		for (; r + 2 <= n; r += 2) {
			const struct txl_block_q8_0 *q = (const void *)(base +
					(size_t)r * ld + (size_t)b * sizeof *q);
			const struct txl_block_q8_0 *p = (const void *)
				((const uint8_t *)q + ld);
			const __m512 ar = _mm512_set1_ps(a[r]);
			const __m512 ap = _mm512_set1_ps(a[r + 1]);
			const __m512 d0 = _mm512_mul_ps(ar, block_scale16(q));
			const __m512 d1 = _mm512_mul_ps(ar, block_scale16(q + 1));
			const __m512 f0 = _mm512_mul_ps(ap, block_scale16(p));
			const __m512 f1 = _mm512_mul_ps(ap, block_scale16(p + 1));
			ROW(q, d0, d1, c0, c1, c2, c3);
			ROW(p, f0, f1, e0, e1, e2, e3);
		}
		if (r < n) {
			const struct txl_block_q8_0 *q = (const void *)(base +
					(size_t)r * ld + (size_t)b * sizeof *q);
			const __m512 ar = _mm512_set1_ps(a[r]);
			const __m512 d0 = _mm512_mul_ps(ar, block_scale16(q));
			const __m512 d1 = _mm512_mul_ps(ar, block_scale16(q + 1));
			ROW(q, d0, d1, c0, c1, c2, c3);
		}
#undef ROW
		_mm512_storeu_ps(yb, _mm512_add_ps(c0, e0));
		_mm512_storeu_ps(yb + 16, _mm512_add_ps(c1, e1));
		_mm512_storeu_ps(yb + 32, _mm512_add_ps(c2, e2));
		_mm512_storeu_ps(yb + 48, _mm512_add_ps(c3, e3));
	}
	if (b < nb) {
		float *yb = y + b * TXL_QK;
		__m512 c0 = _mm512_loadu_ps(yb), c1 = _mm512_loadu_ps(yb + 16);
		for (int r = 0; r < n; r++) {
			const struct txl_block_q8_0 *q = (const void *)(base +
					(size_t)r * ld + (size_t)b * sizeof *q);
			const __m512 d = _mm512_mul_ps(_mm512_set1_ps(a[r]),
						       block_scale16(q));
			c0 = _mm512_fmadd_ps(d, q8_load16(q[0].qs), c0);
			c1 = _mm512_fmadd_ps(d, q8_load16(q[0].qs + 16), c1);
		}
		_mm512_storeu_ps(yb, c0);
		_mm512_storeu_ps(yb + 16, c1);
	}
}

/* Q4_0 rows, two blocks (64 columns) and two rows at a time, the tail
 * block alone: a block's 16 bytes widened once to 16 int32, its low
 * nibbles (values 0..15) and high ones (16..31) taken from them and
 * converted, q times the row's a d summed, and the sum of a d (times 8)
 * taken back at the end. */
static inline void
q4_block_fma(const uint8_t *blk, float a, __m512 *c0, __m512 *c1,
	     __m512 *sum)
{
	uint16_t d;

	memcpy(&d, blk, sizeof d);
	const __m512 s = _mm512_set1_ps(a * _cvtsh_ss(d));
	const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(
		(const __m128i *)(const void *)(blk + 2)));

	*c0 = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(
		_mm512_and_si512(v, _mm512_set1_epi32(15))), *c0);
	*c1 = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)),
			      *c1);
	*sum = _mm512_add_ps(*sum, s);
}

/* y + c - 8 sum, stored to y */
static inline void
q4_store(float *y, __m512 c, __m512 sum)
{
	_mm512_storeu_ps(y, _mm512_add_ps(_mm512_loadu_ps(y),
		_mm512_fnmadd_ps(_mm512_set1_ps(8.0f), sum, c)));
}

static void
axpy_rows_q4_0(float *y, const float *a, const void *w, size_t ld, int n,
	       int K)
{
	const uint8_t *base = w;
	const size_t bs = sizeof(struct txl_block_q4_0);
	const int nb = K / TXL_QK;
	int b = 0;

	for (; b + 2 <= nb; b += 2) {
		__m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
		__m512 e0 = c0, e1 = c0, e2 = c0, e3 = c0, s0 = c0, s1 = c0;
		__m512 t0 = c0, t1 = c0;
		float *yb = y + b * TXL_QK;
		int r = 0;

		for (; r + 2 <= n; r += 2) {
			const uint8_t *q = base + (size_t)r * ld + b * bs;
			const uint8_t *p = q + ld;

			q4_block_fma(q, a[r], &c0, &c1, &s0);
			q4_block_fma(q + bs, a[r], &c2, &c3, &s1);
			q4_block_fma(p, a[r + 1], &e0, &e1, &t0);
			q4_block_fma(p + bs, a[r + 1], &e2, &e3, &t1);
		}
		if (r < n) {
			const uint8_t *q = base + (size_t)r * ld + b * bs;

			q4_block_fma(q, a[r], &c0, &c1, &s0);
			q4_block_fma(q + bs, a[r], &c2, &c3, &s1);
		}
		s0 = _mm512_add_ps(s0, t0);
		s1 = _mm512_add_ps(s1, t1);
		q4_store(yb, _mm512_add_ps(c0, e0), s0);
		q4_store(yb + 16, _mm512_add_ps(c1, e1), s0);
		q4_store(yb + 32, _mm512_add_ps(c2, e2), s1);
		q4_store(yb + 48, _mm512_add_ps(c3, e3), s1);
	}
	if (b < nb) {
		__m512 c0 = _mm512_setzero_ps(), c1 = c0, s0 = c0;
		float *yb = y + b * TXL_QK;

		for (int r = 0; r < n; r++)
			q4_block_fma(base + (size_t)r * ld + b * bs, a[r], &c0,
				     &c1, &s0);
		q4_store(yb, c0, s0);
		q4_store(yb + 16, c1, s0);
	}
}

static void
narrow_f16(void *dst, const float *src, size_t n)
{
	uint8_t *d = dst;

	for (size_t i = 0; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? FULL : mask_of((int)(n - i));
		_mm256_mask_storeu_epi16(d + 2 * i, m,
			_mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i),
					_MM_FROUND_TO_NEAREST_INT));
	}
}

static void
narrow_bf16(void *dst, const float *src, size_t n)
{
	const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
	uint8_t *d = dst;

	for (size_t i = 0; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? FULL : mask_of((int)(n - i));
		__m512i x = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, src + i));
		/* nearest even: add 0x7fff + the lowest bit kept; NaNs quiet */
		__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), one);
		__m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, bias),
							       lsb), 16);
		__mmask16 nan = _mm512_cmpgt_epi32_mask(
			_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)),
			_mm512_set1_epi32(0x7f800000));
		r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(x, 16),
					 _mm512_set1_epi32(0x40));
		_mm256_mask_storeu_epi16(d + 2 * i, m, _mm512_cvtepi32_epi16(r));
	}
}

/* The scalar narrow_q8_0 (txl-kernels.c) a block at a time: the same
 * operations but the max (exact in any order), the same blocks. */
static void
narrow_q8_0(void *dst, const float *src, size_t n)
{
	const __m512 half = _mm512_set1_ps(0.5f);
	const __m512i top = _mm512_set1_epi32(127);
	struct txl_block_q8_0 *blk = dst;

	for (size_t b = 0; b < n / TXL_QK; b++) {
		__m512 x0, x1;
		uint16_t d;
		const float id = txl_q8_0_scale(block_amax(src + b * TXL_QK, &x0,
							   &x1), &d);

		memcpy(&blk[b].d, &d, sizeof d);
		if (!(id > 0.0f)) {
			memset(blk[b].qs, 0, TXL_QK);
			continue;
		}
		for (int i = 0; i < 2; i++) {
			/* half away from zero: |v| + 0.5 truncated, clipped,
			 * negated where v is negative */
			__m512 t = _mm512_mul_ps(i ? x1 : x0, _mm512_set1_ps(id));
			__m512i q = _mm512_min_epi32(_mm512_cvttps_epi32(
				_mm512_add_ps(_mm512_abs_ps(t), half)), top);
			q = _mm512_mask_sub_epi32(q, _mm512_movepi32_mask(
					_mm512_castps_si512(t)),
					_mm512_setzero_si512(), q);
			_mm_storeu_si128((__m128i *)(void *)(blk[b].qs + 16 * i),
					 _mm512_cvtepi32_epi8(q));
		}
	}
}

/* The scalar txl_narrow_q4_0 (txl-kernels.c) a block at a time: the same
 * largest value (the first of largest magnitude, found by comparing
 * with the exact max), the same operations (a product, then a sum,
 * truncated: no fused multiply-add); a block with a NaN or an inf goes
 * to the scalar function itself. */
static void
narrow_q4_0(void *dst, const float *src, size_t n)
{
	const __m512 half8 = _mm512_set1_ps(8.5f);
	const __m512i zero = _mm512_setzero_si512(), top = _mm512_set1_epi32(15);
	uint8_t *out = dst;

	for (size_t b = 0; b < n / TXL_QK; b++) {
		const float *xb = src + b * TXL_QK;
		uint8_t *o = out + b * sizeof(struct txl_block_q4_0);
		__m512 x0, x1;
		const float amax = block_amax(xb, &x0, &x1);

		if (amax != amax) {
			txl_narrow_q4_0(o, xb, TXL_QK);
			continue;
		}
		const __m512 am = _mm512_set1_ps(amax);
		const uint32_t eq = _mm512_cmp_ps_mask(_mm512_abs_ps(x0), am,
						       _CMP_EQ_OQ) |
			(uint32_t)_mm512_cmp_ps_mask(_mm512_abs_ps(x1), am,
						     _CMP_EQ_OQ) << 16;
		uint16_t d;
		const float id = txl_q4_0_scale(xb[__builtin_ctz(eq)], &d);

		memcpy(o, &d, sizeof d);
		if (id == 0.0f) {
			memset(o + 2, 0x88, TXL_QK / 2);
			continue;
		}
		const __m512 vid = _mm512_set1_ps(id);
		__m512i q0 = _mm512_cvttps_epi32(_mm512_add_ps(
			_mm512_mul_ps(x0, vid), half8));
		__m512i q1 = _mm512_cvttps_epi32(_mm512_add_ps(
			_mm512_mul_ps(x1, vid), half8));

		q0 = _mm512_min_epi32(_mm512_max_epi32(q0, zero), top);
		q1 = _mm512_min_epi32(_mm512_max_epi32(q1, zero), top);
		_mm_storeu_si128((__m128i *)(void *)(o + 2), _mm_or_si128(
			_mm512_cvtepi32_epi8(q0),
			_mm_slli_epi16(_mm512_cvtepi32_epi8(q1), 4)));
	}
}

/* exp(x) for x <= 0, as exp8() of txl-kernels-avx2.c. */
static inline __m512
exp16(__m512 x)
{
	const __m512 lo = _mm512_set1_ps(-87.33654f);
	__mmask16 ok = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
					_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
	__m512 p = _mm512_set1_ps(1.9875691500e-4f);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
	p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
	/* p * 2^n, exactly (n >= -126 wherever ok) */
	return _mm512_maskz_scalef_ps(ok, p, n);
}

static double
exp_sum(float *out, const float *x, int n, float max)
{
	const __m512 m = _mm512_set1_ps(max);
	__m512d s0 = _mm512_setzero_pd(), s1 = s0;

	for (int i = 0; i < n; i += 16) {
		__mmask16 k = n - i >= 16 ? FULL : (__mmask16)((1u << (n - i)) - 1);
		__m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), m));
		e = _mm512_maskz_mov_ps(k, e);
		if (out)
			_mm512_mask_storeu_ps(out + i, k, e);
		s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
		s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
	}
	return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

static float
max_of(const float *x, int n)
{
	__m512 m = _mm512_set1_ps(-INFINITY);

	for (int i = 0; i < n; i += 16) {
		__mmask16 k = n - i >= 16 ? FULL : (__mmask16)((1u << (n - i)) - 1);
		m = _mm512_mask_max_ps(m, k, m, _mm512_maskz_loadu_ps(k, x + i));
	}
	return _mm512_reduce_max_ps(m);
}

/* ---- several rows of activations (txl_dot_multi_fn): a batch ---- */

/*
 * One row of W, a row of a group of four of DOT_ROWS, against eight rows
 * of activations (x[0..7]) into out[0..7]: per row of activations the
 * sums, steps and final additions of DOT_ROWS in its order (hsum4 adds
 * the lanes of each of its four vectors alike), each weight vector
 * loaded once for the eight.  The row of W streams from memory once
 * while the activations, read again for every row, stay in L1 and L2:
 * read group by group, pair of activation rows after pair, the weights
 * came from DRAM in the first pass only and the arithmetic of the
 * others left DRAM idle.  The weights ROW8_AHEAD bytes on are fetched
 * as it goes: the loads of eight rows of activations between two of
 * weights leave the core too few misses in flight to stream from DRAM
 * (rows of W are contiguous, so the stream runs on into the next row;
 * bench/README.md has the distances measured).
 */
#define ROW8_AHEAD 2048
#define DOT_ROW8(name, size, load16)                                         \
static inline void                                                           \
name(float *out, const uint8_t *w, const float *const *x, int K)             \
{                                                                            \
	const int K16 = K & ~15, K32 = K & ~31;                              \
	const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1);           \
	__m512 a[8], b[8];                                                   \
	int k = 0;                                                           \
                                                                             \
	_Pragma("GCC unroll 8")                                              \
	for (int i = 0; i < 8; i++)                                          \
		a[i] = b[i] = _mm512_setzero_ps();                           \
	for (; k < K32; k += 32) {                                           \
		const __m512 v0 = load16(w + k * size, FULL);                \
		const __m512 v1 = load16(w + (k + 16) * size, FULL);         \
		/* past the matrix's end too: harmless for a prefetch, the  \
		 * address computed as an integer */                        \
		const uintptr_t ahead = (uintptr_t)w + (uintptr_t)k * size + \
			ROW8_AHEAD;                                          \
		_mm_prefetch((const char *)ahead, _MM_HINT_T0);              \
		if (size == 4)                                               \
			_mm_prefetch((const char *)(ahead + 64), _MM_HINT_T0); \
		_Pragma("GCC unroll 8")                                      \
		for (int i = 0; i < 8; i++) {                                \
			a[i] = _mm512_fmadd_ps(v0, _mm512_loadu_ps(x[i] + k), \
					       a[i]);                        \
			b[i] = _mm512_fmadd_ps(v1,                           \
					       _mm512_loadu_ps(x[i] + k + 16), \
					       b[i]);                        \
		}                                                            \
	}                                                                    \
	for (; k < K; k += 16) {                                             \
		const __mmask16 m = k < K16 ? FULL : tail;                   \
		const __m512 v0 = load16(w + k * size, m);                   \
		_Pragma("GCC unroll 8")                                      \
		for (int i = 0; i < 8; i++)                                  \
			a[i] = _mm512_fmadd_ps(v0,                           \
				_mm512_maskz_loadu_ps(m, x[i] + k), a[i]);   \
	}                                                                    \
	_mm_storeu_ps(out, hsum4(_mm512_add_ps(a[0], b[0]),                  \
				 _mm512_add_ps(a[1], b[1]),                  \
				 _mm512_add_ps(a[2], b[2]),                  \
				 _mm512_add_ps(a[3], b[3])));                \
	_mm_storeu_ps(out + 4, hsum4(_mm512_add_ps(a[4], b[4]),              \
				     _mm512_add_ps(a[5], b[5]),              \
				     _mm512_add_ps(a[6], b[6]),              \
				     _mm512_add_ps(a[7], b[7])));            \
}

DOT_ROW8(dot_row8_f32, 4, load16_f32)
DOT_ROW8(dot_row8_f16, 2, load16_f16)
DOT_ROW8(dot_row8_bf16, 2, load16_bf16)

/*
 * Each group of four rows of DOT_ROWS against eight rows of activations
 * at a time by row8 (above), then against two at a time
 * the rest: per row of activations the sums, steps and final additions
 * of DOT_ROWS in its order, each weight vector loaded once for the two
 * (16 sums); a last odd row of activations, and the rows past the last
 * group of four, by dot itself.
 */
/* Rows w0..w3's 16 values at byte o (mask mk) times p and q: into
 * A0..A3 and C0..C3 (the sums of two rows of activations) */
#define PAIR4(load16, o, mk, p, q, A, C)                                     \
	do {                                                                 \
		__m512 v_ = load16(w0 + (o), mk);                            \
		A##0 = _mm512_fmadd_ps(v_, p, A##0);                         \
		C##0 = _mm512_fmadd_ps(v_, q, C##0);                         \
		v_ = load16(w1 + (o), mk);                                   \
		A##1 = _mm512_fmadd_ps(v_, p, A##1);                         \
		C##1 = _mm512_fmadd_ps(v_, q, C##1);                         \
		v_ = load16(w2 + (o), mk);                                   \
		A##2 = _mm512_fmadd_ps(v_, p, A##2);                         \
		C##2 = _mm512_fmadd_ps(v_, q, C##2);                         \
		v_ = load16(w3 + (o), mk);                                   \
		A##3 = _mm512_fmadd_ps(v_, p, A##3);                         \
		C##3 = _mm512_fmadd_ps(v_, q, C##3);                         \
	} while (0)

#define DOT_MULTI(name, dot, row8, size, load16)                             \
static void                                                                  \
name(float *const *y, const void *w, size_t ld, const float *const *x, int M, \
     int n, int K)                                                           \
{                                                                            \
	const uint8_t *base = w;                                             \
	const int K16 = K & ~15, K32 = K & ~31;                              \
	const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1);           \
	int r = 0;                                                           \
                                                                             \
	for (; r + 4 <= n; r += 4) {                                         \
		ROWS4(uint8_t, base, r, ld, w0, w1, w2, w3);                \
		int m = 0;                                                   \
		for (; m + 8 <= M; m += 8)                                   \
			for (int j = 0; j < 4; j++) {                        \
				float out[8];                                \
				row8(out, w0 + (size_t)j * ld, x + m, K);    \
				for (int i = 0; i < 8; i++)                  \
					y[m + i][r + j] = out[i];            \
			}                                                    \
		for (; m + 2 <= M; m += 2) {                                 \
			const float *p = x[m], *q = x[m + 1];                \
			__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0;   \
			__m512 a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;  \
			__m512 c0 = a0, c1 = a0, c2 = a0, c3 = a0;           \
			__m512 d0 = a0, d1 = a0, d2 = a0, d3 = a0;           \
			int k = 0;                                           \
			for (; k < K32; k += 32) {                           \
				const __m512 p0 = _mm512_loadu_ps(p + k);    \
				const __m512 p1 = _mm512_loadu_ps(p + k + 16); \
				const __m512 q0 = _mm512_loadu_ps(q + k);    \
				const __m512 q1 = _mm512_loadu_ps(q + k + 16); \
				const int o0 = k * size, o1 = (k + 16) * size; \
				PAIR4(load16, o0, FULL, p0, q0, a, c);       \
				PAIR4(load16, o1, FULL, p1, q1, b, d);       \
			}                                                    \
			for (; k < K; k += 16) {                             \
				const __mmask16 mk = k < K16 ? FULL : tail;  \
				const __m512 p0 = _mm512_maskz_loadu_ps(mk, p + k); \
				const __m512 q0 = _mm512_maskz_loadu_ps(mk, q + k); \
				PAIR4(load16, k * size, mk, p0, q0, a, c);   \
			}                                                    \
			_mm_storeu_ps(y[m] + r, hsum4(_mm512_add_ps(a0, b0), \
				_mm512_add_ps(a1, b1), _mm512_add_ps(a2, b2), \
				_mm512_add_ps(a3, b3)));                     \
			_mm_storeu_ps(y[m + 1] + r, hsum4(_mm512_add_ps(c0, d0), \
				_mm512_add_ps(c1, d1), _mm512_add_ps(c2, d2), \
				_mm512_add_ps(c3, d3)));                     \
		}                                                            \
		if (m < M)                                                   \
			dot(y[m] + r, w0, ld, x[m], 4, K);                   \
	}                                                                    \
	if (r < n)                                                           \
		for (int m = 0; m < M; m++)                                  \
			dot(y[m] + r, base + (size_t)r * ld, ld, x[m], n - r, K); \
}

DOT_MULTI(dot_multi_f32, dot_rows_f32, dot_row8_f32, 4, load16_f32)
DOT_MULTI(dot_multi_f16, dot_rows_f16, dot_row8_f16, 2, load16_f16)
DOT_MULTI(dot_multi_bf16, dot_rows_bf16, dot_row8_bf16, 2, load16_bf16)

/* the interleaved copies' kernels AVX2 shares */
#define IL_AHEAD 0
#include "txl-kernels-simd.h"

WIDEN_BLOCKS(widen_q8_0, struct txl_block_q8_0, Q8_VALS)
WIDEN_BLOCKS(widen_q4_0, struct txl_block_q4_0, Q4_VALS)

DOT_IL_Q4K(dot_il_q4k_bw, il4_prep_bw, il4_sum_bw, )
DOT_IL_Q4K(dot_il_q4k_vnni, il4_prep_vnni, il4_sum_vnni, VNNI_ATTR)

DOT_IL_MULTI(dot_il_multi_bw, il8_prep_bw, il8_sum_bw, 8, TXL_IL_BLOCK, )
DOT_IL_MULTI(dot_il_multi_vnni, il8_prep_vnni, il8_sum_vnni, 8, TXL_IL_BLOCK,
	     __attribute__((target("avx512vnni"))))
DOT_IL_MULTI(dot_il_multi_q4_bw, il4_prep_bw, il4_sum_bw, 8,
	     TXL_IL_BLOCK_Q4, )
DOT_IL_MULTI(dot_il_multi_q4_vnni, il4_prep_vnni, il4_sum_vnni, 8,
	     TXL_IL_BLOCK_Q4, __attribute__((target("avx512vnni"))))

const struct txl_type_kernels txl_avx512_f32 = TXL_FLOAT_KERNELS(f32);
const struct txl_type_kernels txl_avx512_f16 = TXL_FLOAT_KERNELS(f16);
const struct txl_type_kernels txl_avx512_bf16 = TXL_FLOAT_KERNELS(bf16);
const struct txl_type_kernels txl_avx512_q8_0 = {
	.widen = widen_q8_0, .narrow = narrow_q8_0,
	.axpy_rows = axpy_rows_q8_0, .dot = dot_rows_q8_0,
	.dot_q8 = dot_rows_q8_bw, .dot_q16 = dot_rows_q16,
	.dot_il = dot_il_bw, .dot_il_multi = dot_il_multi_bw,
};
/* against float activations: the scalar kernel (txl-kernels.c) */
const struct txl_type_kernels txl_avx512_q4_0 = {
	.widen = widen_q4_0, .narrow = narrow_q4_0,
	.axpy_rows = axpy_rows_q4_0, .dot_q8 = dot_rows_q4_bw,
	.dot_il = dot_il_q4_bw, .dot_il_multi = dot_il_multi_q4_bw,
};
/* avx512vnni: AVX-512's kernels but the integer products of vpdpbusd */
const struct txl_type_kernels txl_avx512vnni_q8_0 = {
	.dot_q8 = dot_rows_q8_vnni, .dot_il = dot_il_vnni,
	.dot_il_multi = dot_il_multi_vnni,
};
const struct txl_type_kernels txl_avx512vnni_q4_0 = {
	.dot_q8 = dot_rows_q4_vnni, .dot_il = dot_il_q4_vnni,
	.dot_il_multi = dot_il_multi_q4_vnni,
};

/* Q4_K: the integer products of each super-block in vectors */
const struct txl_type_kernels txl_avx512_q4_k = {
	.dot_q8 = dot_rows_q4k, .dot_il = dot_il_q4k_bw,
	.dot_il_multi = dot_il_q4k_bw_multi,
};
const struct txl_type_kernels txl_avx512vnni_q4_k = {
	.dot_il = dot_il_q4k_vnni, .dot_il_multi = dot_il_q4k_vnni_multi,
};

const struct txl_kernels txl_kernels_avx512 = {
	.name = "avx512", .isa = TXL_ISA_AVX512, .quantize_q8 = quantize_q8,
	.exp_sum = exp_sum, .max = max_of,
};
const struct txl_kernels txl_kernels_avx512_vnni = {
	.name = "avx512vnni", .isa = TXL_ISA_AVX512_VNNI,
	.quantize_q8 = quantize_q8, .exp_sum = exp_sum, .max = max_of,
};
/* avx512bf16: avx512vnni's kernels; its own are the BF16 products of
 * segments (txl-gemm-avx512bf16.c) */
const struct txl_kernels txl_kernels_avx512_bf16 = {
	.name = "avx512bf16", .isa = TXL_ISA_AVX512_BF16,
	.quantize_q8 = quantize_q8, .exp_sum = exp_sum, .max = max_of,
};
