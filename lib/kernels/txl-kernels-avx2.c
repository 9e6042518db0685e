/* SPDX-License-Identifier: MIT */
/*
 * txl-kernels-avx2.c - the kernels for AVX2 + FMA + F16C (x86-64-v3:
 * Haswell, Zen and later).  Compiled with -mavx2 -mfma -mf16c and called
 * only after txl_kernels_for() has seen those features.
 *
 * Matrix-vector products take four rows at a time, so that each vector of
 * x is loaded once for four rows, with two accumulators per row to hide
 * the FMA latency.  Compact weights are widened in registers, exactly:
 * F16 by vcvtph2ps, BF16 by a 16-bit shift, Q8_0 by sign extension and
 * vcvtdq2ps, with the block's scale applied to the block's partial sum.
 * Generation reads each weight once per token, so these kernels are bound
 * by memory (F32) or by the conversions (compact weights in cache); so
 * Q8_0 weights there go against activations quantized per block instead
 * (dot_rows_q8: integer dot products by vpmaddubsw and vpmaddwd, one
 * conversion per block).  The avxvnni set is this one with those
 * integer products by vpdpbusd on 256-bit vectors (AVX-VNNI: Alder Lake
 * and later Intel cores, which have no AVX-512; Zen 5), called only on
 * CPUs that have it: its structs at the end list only them.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "txl-kernels.h"
#include "txl-kernels-x86.h"

/* The vectors of txl-kernels-simd.h: 8 lanes */
#define VL 8
#define VI __m256i
#define VF __m256
#define VI_LOAD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define VI_ZERO() _mm256_setzero_si256()
#define VI_SET1_8(c) _mm256_set1_epi8(c)
#define VI_SET1_32(c) _mm256_set1_epi32(c)
#define VI_ADD32(a, b) _mm256_add_epi32(a, b)
#define VI_AND(a, b) _mm256_and_si256(a, b)
#define VI_XOR(a, b) _mm256_xor_si256(a, b)
#define VI_SRLI16(v, n) _mm256_srli_epi16(v, n)
#define VI_SLLI32(v, n) _mm256_slli_epi32(v, n)
#define VI_MULLO32(a, b) _mm256_mullo_epi32(a, b)
#define VI_U8(p) _mm256_cvtepu8_epi32(_mm_loadl_epi64(                      \
	(const __m128i *)(const void *)(p)))
#define VI_DPBUSD(s, u, v) _mm256_dpbusd_avx_epi32(s, u, v)
#define VF_ZERO() _mm256_setzero_ps()
#define VF_ADD(a, b) _mm256_add_ps(a, b)
#define VF_MUL(a, b) _mm256_mul_ps(a, b)
#define VF_SET1(f) _mm256_set1_ps(f)
#define VF_CVT(v) _mm256_cvtepi32_ps(v)
#define VF_PH(p) _mm256_cvtph_ps(_mm_loadu_si128(                           \
	(const __m128i *)(const void *)(p)))
#define VF_STORE(p, v) _mm256_storeu_ps(p, v)
#define BLOCK_SCALE(b) block_scale8(b)
#define Q8_VALS(b, i) q8_load8((b)->qs + (i))
#define Q4_VALS(b, i) q4_load8(b, i)
#define VNNI_ATTR __attribute__((target("avxvnni")))

/* [sum(a), sum(b), sum(c), sum(d)] */
static inline __m128
hsum4(__m256 a, __m256 b, __m256 c, __m256 d)
{
	__m256 ab = _mm256_hadd_ps(a, b);
	__m256 cd = _mm256_hadd_ps(c, d);
	__m256 abcd = _mm256_hadd_ps(ab, cd);

	return _mm_add_ps(_mm256_castps256_ps128(abcd),
			  _mm256_extractf128_ps(abcd, 1));
}

static inline float
hsum(__m256 a)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(a),
			      _mm256_extractf128_ps(a, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* Eight values of each dtype as floats, and one value (for tails). */
static inline __m256
load8_f32(const uint8_t *p)
{
	return _mm256_loadu_ps((const float *)(const void *)p);
}

static inline __m256
load8_f16(const uint8_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

static inline __m256
load8_bf16(const uint8_t *p)
{
	__m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);

	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h),
						     16));
}

static inline float
load1_f32(const uint8_t *p)
{
	float f;

	memcpy(&f, p, sizeof f);
	return f;
}

static inline float
load1_f16(const uint8_t *p)
{
	uint16_t h;

	memcpy(&h, p, sizeof h);
	return _cvtsh_ss(h);
}

static inline float
load1_bf16(const uint8_t *p)
{
	uint16_t h;

	memcpy(&h, p, sizeof h);
	return txl_bf16_to_f32(h);
}

/* Asks for the line at p + off, which may lie past the end of p's array
 * (a prefetch never faults; the sum is made as an integer, not as a
 * pointer out of bounds). */
static inline void
prefetch_at(const void *p, size_t off)
{
	_mm_prefetch((const char *)((uintptr_t)p + off), _MM_HINT_T0);
}

/* dot_rows and widen for a dtype of `size` bytes per value: the body is
 * the same for F32, F16 and BF16, only the loads differ.  With prefetch,
 * the next four rows' lines are asked for while these four are summed:
 * F16's and BF16's conversions leave too few loads in flight for the
 * hardware's prefetcher (bench/README.md).  F32 gains nothing. */
#define DOT_ROWS(name, size, load8, load1, prefetch)                         \
static void                                                                  \
name(float *y, const void *w, size_t ld, const float *x, int n, int K)       \
{                                                                            \
	const uint8_t *base = w;                                             \
	const int K8 = K & ~7, K16 = K & ~15;                                \
	int r = 0;                                                           \
                                                                             \
	for (; r + 4 <= n; r += 4) {                                         \
		ROWS4(uint8_t, base, r, ld, w0, w1, w2, w3);                \
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;  \
		__m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;                   \
		int k = 0;                                                   \
		for (; k < K16; k += 16) {                                   \
			if (prefetch && (k * size) % 64 == 0) {              \
				prefetch_at(w3, ld + k * size);              \
				prefetch_at(w3, 2 * ld + k * size);          \
				prefetch_at(w3, 3 * ld + k * size);          \
				prefetch_at(w3, 4 * ld + k * size);          \
			}                                                    \
			__m256 x0 = _mm256_loadu_ps(x + k);                  \
			__m256 x1 = _mm256_loadu_ps(x + k + 8);              \
			a0 = _mm256_fmadd_ps(load8(w0 + k * size), x0, a0);  \
			a1 = _mm256_fmadd_ps(load8(w1 + k * size), x0, a1);  \
			a2 = _mm256_fmadd_ps(load8(w2 + k * size), x0, a2);  \
			a3 = _mm256_fmadd_ps(load8(w3 + k * size), x0, a3);  \
			b0 = _mm256_fmadd_ps(load8(w0 + (k + 8) * size), x1, b0); \
			b1 = _mm256_fmadd_ps(load8(w1 + (k + 8) * size), x1, b1); \
			b2 = _mm256_fmadd_ps(load8(w2 + (k + 8) * size), x1, b2); \
			b3 = _mm256_fmadd_ps(load8(w3 + (k + 8) * size), x1, b3); \
		}                                                            \
		for (; k < K8; k += 8) {                                     \
			__m256 x0 = _mm256_loadu_ps(x + k);                  \
			a0 = _mm256_fmadd_ps(load8(w0 + k * size), x0, a0);  \
			a1 = _mm256_fmadd_ps(load8(w1 + k * size), x0, a1);  \
			a2 = _mm256_fmadd_ps(load8(w2 + k * size), x0, a2);  \
			a3 = _mm256_fmadd_ps(load8(w3 + k * size), x0, a3);  \
		}                                                            \
		__m128 s = hsum4(_mm256_add_ps(a0, b0), _mm256_add_ps(a1, b1), \
				 _mm256_add_ps(a2, b2), _mm256_add_ps(a3, b3)); \
		float t[4];                                                  \
		_mm_storeu_ps(t, s);                                         \
		for (; k < K; k++) {                                         \
			t[0] += load1(w0 + k * size) * x[k];                 \
			t[1] += load1(w1 + k * size) * x[k];                 \
			t[2] += load1(w2 + k * size) * x[k];                 \
			t[3] += load1(w3 + k * size) * x[k];                 \
		}                                                            \
		memcpy(y + r, t, sizeof t);                                  \
	}                                                                    \
	for (; r < n; r++) {                                                 \
		const uint8_t *w0 = base + (size_t)r * ld;                   \
		__m256 a0 = _mm256_setzero_ps();                             \
		int k = 0;                                                   \
		for (; k < K8; k += 8)                                       \
			a0 = _mm256_fmadd_ps(load8(w0 + k * size),           \
					     _mm256_loadu_ps(x + k), a0);    \
		float t = hsum(a0);                                          \
		for (; k < K; k++)                                           \
			t += load1(w0 + k * size) * x[k];                    \
		y[r] = t;                                                    \
	}                                                                    \
}

DOT_ROWS(dot_rows_f32, 4, load8_f32, load1_f32, 0)
DOT_ROWS(dot_rows_f16, 2, load8_f16, load1_f16, 1)
DOT_ROWS(dot_rows_bf16, 2, load8_bf16, load1_bf16, 1)

#define WIDEN(name, size, load8, load1)                                      \
static void                                                                  \
name(float *dst, const void *src, size_t n)                                  \
{                                                                            \
	const uint8_t *s = src;                                              \
	size_t i = 0;                                                        \
                                                                             \
	for (; i + 8 <= n; i += 8)                                           \
		_mm256_storeu_ps(dst + i, load8(s + i * size));              \
	for (; i < n; i++)                                                   \
		dst[i] = load1(s + i * size);                                \
}

WIDEN(widen_f16, 2, load8_f16, load1_f16)
WIDEN(widen_bf16, 2, load8_bf16, load1_bf16)

/* Q8_0: eight int8 values of a block as floats. */
static inline __m256
q8_load8(const int8_t *q)
{
	__m128i b = _mm_loadl_epi64((const __m128i *)(const void *)q);

	return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

/* The block's 32 values . x[32], unscaled. */
static inline __m256
q8_block_dot(const struct txl_block_q8_0 *b, __m256 x0, __m256 x1, __m256 x2,
	     __m256 x3)
{
	__m256 t = _mm256_mul_ps(q8_load8(b->qs), x0);

	t = _mm256_fmadd_ps(q8_load8(b->qs + 8), x1, t);
	t = _mm256_fmadd_ps(q8_load8(b->qs + 16), x2, t);
	return _mm256_fmadd_ps(q8_load8(b->qs + 24), x3, t);
}

/* A block's scale in every lane (Q8_0 and Q4_0 start with it). */
static inline __m256
block_scale8(const void *p)
{
	uint16_t d;

	memcpy(&d, p, sizeof d);
	return _mm256_cvtph_ps(_mm_set1_epi16((short)d));
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
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;

		for (int b = 0; b < nb; b++) {
			const float *xb = x + b * TXL_QK;
			__m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8);
			__m256 x2 = _mm256_loadu_ps(xb + 16);
			__m256 x3 = _mm256_loadu_ps(xb + 24);
			a0 = _mm256_fmadd_ps(q8_block_dot(q0 + b, x0, x1, x2, x3),
					     block_scale8(q0 + b), a0);
			a1 = _mm256_fmadd_ps(q8_block_dot(q1 + b, x0, x1, x2, x3),
					     block_scale8(q1 + b), a1);
			a2 = _mm256_fmadd_ps(q8_block_dot(q2 + b, x0, x1, x2, x3),
					     block_scale8(q2 + b), a2);
			a3 = _mm256_fmadd_ps(q8_block_dot(q3 + b, x0, x1, x2, x3),
					     block_scale8(q3 + b), a3);
		}
		_mm_storeu_ps(y + r, hsum4(a0, a1, a2, a3));
	}
	for (; r < n; r++) {
		const struct txl_block_q8_0 *q = (const void *)(base +
								(size_t)r * ld);
		__m256 acc = _mm256_setzero_ps();

		for (int b = 0; b < nb; b++) {
			const float *xb = x + b * TXL_QK;
			acc = _mm256_fmadd_ps(
				q8_block_dot(q + b, _mm256_loadu_ps(xb),
					     _mm256_loadu_ps(xb + 8),
					     _mm256_loadu_ps(xb + 16),
					     _mm256_loadu_ps(xb + 24)),
				block_scale8(q + b), acc);
		}
		y[r] = hsum(acc);
	}
}

/* Q4_0: values i .. i + 7 of a block (i a multiple of 8) as floats. */
static inline __m256
q4_load8(const struct txl_block_q4_0 *b, int i)
{
	__m128i x = _mm_loadl_epi64((const __m128i *)(const void *)
				    (b->qs + i % 16));

	x = _mm_and_si128(i >= 16 ? _mm_srli_epi16(x, 4) : x, _mm_set1_epi8(15));
	return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(x),
						   _mm256_set1_epi32(8)));
}

/* A block's 32 values into v[4]; their largest magnitude (exact), NaN if
 * one of them is NaN or inf. */
static inline float
block_amax(const float *xb, __m256 v[4])
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 m, bad;

	for (int i = 0; i < 4; i++)
		v[i] = _mm256_loadu_ps(xb + 8 * i);
	m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]),
					_mm256_andnot_ps(sign, v[1])),
			  _mm256_max_ps(_mm256_andnot_ps(sign, v[2]),
					_mm256_andnot_ps(sign, v[3])));
	/* x - x is NaN where x is NaN or inf */
	bad = _mm256_add_ps(_mm256_add_ps(_mm256_sub_ps(v[0], v[0]),
					  _mm256_sub_ps(v[1], v[1])),
			    _mm256_add_ps(_mm256_sub_ps(v[2], v[2]),
					  _mm256_sub_ps(v[3], v[3])));
	__m128 h = _mm_max_ps(_mm256_castps256_ps128(m),
			      _mm256_extractf128_ps(m, 1));
	h = _mm_max_ps(h, _mm_movehl_ps(h, h));
	h = _mm_max_ss(h, _mm_movehdup_ps(h));
	return _mm256_movemask_ps(_mm256_cmp_ps(bad, bad, _CMP_UNORD_Q)) ?
		NAN : _mm_cvtss_f32(h);
}

/* 32 int32 values of q[4] as int8 at dst, saturated.  The packs work
 * within 128-bit lanes, so the groups of four values come out as 0 2 4 6
 * 1 3 5 7 and are put back in order. */
static inline void
store_q32(int8_t *dst, const __m256i q[4])
{
	__m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]),
				       _mm256_packs_epi32(q[2], q[3]));

	p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6,
							     3, 7));
	_mm256_storeu_si256((__m256i *)(void *)dst, p);
}

/* The scalar quantize_q8 (txl-kernels.c) a block at a time, the same
 * operations in the same order but the max (exact in any order): the same
 * values; a NaN or an inf in the block makes its scale NaN. */
static void
quantize_q8(struct txl_q8_act *a, const float *x, int K)
{
	for (int b = 0; b < K / TXL_QK; b++) {
		__m256 v[4];
		__m256i q[4];
		float d = block_amax(x + b * TXL_QK, v) / 127.0f;
		__m256 id = _mm256_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);

		/* nearest even, as lrintf (MXCSR's default) */
		for (int i = 0; i < 4; i++)
			q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));
		store_q32(a->q + b * TXL_QK, q);
		/* the sum of the values stored, saturated: a NaN's lane is
		 * INT_MIN, and the sum of those would overflow */
		for (int i = 0; i < 4; i++)
			q[i] = _mm256_max_epi32(_mm256_min_epi32(q[i],
					_mm256_set1_epi32(127)),
					_mm256_set1_epi32(-128));
		__m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]),
					     _mm256_add_epi32(q[2], q[3]));
		__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s),
					   _mm256_extracti128_si256(s, 1));
		s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
		s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
		a->d[b] = d;
		a->off[b] = -128 * _mm_cvtsi128_si32(s4);
	}
}

/* Q8_0 against quantized activations: the integer products of block b of
 * a row and the activations' block xq, in 8 lanes (exact, as floats): |w|
 * (unsigned: 128 for -128) times x with w's sign, by pairs (at most
 * 2 * 128 * 127 < 2^15), then by fours.  (off: for the VNNI version.) */
static inline __m256i
q8_block_idot_bw(const struct txl_block_q8_0 *b, __m256i xq, __m256i off)
{
	__m256i w = _mm256_loadu_si256((const __m256i *)(const void *)b->qs);

	(void)off;
	return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w),
						      _mm256_sign_epi8(xq, w)),
				 _mm256_set1_epi16(1));
}

/* The same by vpdpbusd, which multiplies unsigned by signed bytes: w + 128
 * (w with its sign bit flipped) times x, from off (-128 sum(x) in one
 * lane). */
__attribute__((target("avxvnni")))
static inline __m256i
q8_block_idot_vnni(const struct txl_block_q8_0 *b, __m256i xq, __m256i off)
{
	__m256i w = _mm256_loadu_si256((const __m256i *)(const void *)b->qs);

	return _mm256_dpbusd_avx_epi32(off, _mm256_xor_si256(w,
				       _mm256_set1_epi8(-128)), xq);
}

/* acc += block b of a row times the activations' block (xq, scale d) */
#define Q8_BLOCK_ACC(idot, b, xq, d, off, acc)                               \
	_mm256_fmadd_ps(_mm256_cvtepi32_ps(idot(b, xq, off)),                \
			_mm256_mul_ps(block_scale8(b), d), acc)

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
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;  \
                                                                             \
		for (int b = 0; b < nb; b++) {                               \
			__m256i xq = _mm256_loadu_si256((const __m256i *)(const void *) \
							(a->q + b * TXL_QK)); \
			__m256 d = _mm256_set1_ps(a->d[b]);                  \
			__m256i off = _mm256_setr_epi32(a->off[b], 0, 0, 0,  \
							0, 0, 0, 0);         \
			a0 = Q8_BLOCK_ACC(idot, q0 + b, xq, d, off, a0);     \
			a1 = Q8_BLOCK_ACC(idot, q1 + b, xq, d, off, a1);     \
			a2 = Q8_BLOCK_ACC(idot, q2 + b, xq, d, off, a2);     \
			a3 = Q8_BLOCK_ACC(idot, q3 + b, xq, d, off, a3);     \
		}                                                            \
		_mm_storeu_ps(y + r, hsum4(a0, a1, a2, a3));                 \
	}                                                                    \
	for (; r < n; r++) {                                                 \
		const struct txl_block_q8_0 *q = (const void *)(base +       \
							(size_t)r * ld);     \
		__m256 acc = _mm256_setzero_ps();                            \
                                                                             \
		for (int b = 0; b < nb; b++)                                 \
			acc = Q8_BLOCK_ACC(idot, q + b, _mm256_loadu_si256(  \
				(const __m256i *)(const void *)(a->q + b * TXL_QK)), \
				_mm256_set1_ps(a->d[b]),                     \
				_mm256_setr_epi32(a->off[b], 0, 0, 0, 0, 0, 0, 0), \
				acc);                                        \
		y[r] = hsum(acc);                                            \
	}                                                                    \
}

DOT_ROWS_Q8(dot_rows_q8, q8_block_idot_bw, )
DOT_ROWS_Q8(dot_rows_q8_vnni, q8_block_idot_vnni, __attribute__((target("avxvnni"))))

/* Q8_0 rows against an int16 query (txl-kernels-q16.h): a block of the
 * query in two registers (values 0..15, 16..31), a block of a row times
 * it by pairs into 8 int32 lanes (exact: |w a| <= 128 * 32767). */
typedef struct {
	__m256i lo, hi;
} q16_query_t;

static inline q16_query_t
q16_query(const int16_t *q)
{
	return (q16_query_t){
		_mm256_loadu_si256((const __m256i *)(const void *)q),
		_mm256_loadu_si256((const __m256i *)(const void *)(q + 16)),
	};
}

static inline __m256i
q16_block_idot(const struct txl_block_q8_0 *b, q16_query_t a)
{
	const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(
		(const __m128i *)(const void *)b->qs));
	const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(
		(const __m128i *)(const void *)(b->qs + 16)));

	return _mm256_add_epi32(_mm256_madd_epi16(w0, a.lo),
				_mm256_madd_epi16(w1, a.hi));
}

#include "txl-kernels-q16.h"
#include "txl-kernels-q4.h"

/* ---- Q4_0 memory against an int8 query ----
 *
 * As txl-kernels-avx512.c's, eight rows at a time: two rows' blocks to a
 * register, the 8 rows' lanes summed by a 4 x 4 transpose within each
 * half, row 2 g + k in lane 4 k + g. */

/* The lane of each row (the permutation that puts the rows back) */
#define Q4_ROW_LANES _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)

/* The low nibbles of v's bytes times qlo's, the high ones times qhi's,
 * 4 of each in each int32 lane: txl-kernels-q4.h's */
#define q4_idot_bw q4_idot256

/* The blocks (16 value bytes) of two rows, ld bytes apart. */
static inline __m256i
q4_idot(const uint8_t *p, size_t ld, __m256i qlo, __m256i qhi)
{
	return q4_idot_bw(_mm256_loadu2_m128i(
		(const __m128i *)(const void *)(p + ld),
		(const __m128i *)(const void *)p), qlo, qhi);
}

/* [sum of a's lanes of row k, b's, c's, d's] in each half k */
static inline __m256i
sum_lanes4x4(__m256i a, __m256i b, __m256i c, __m256i d)
{
	const __m256i t0 = _mm256_add_epi32(_mm256_unpacklo_epi32(a, b),
					    _mm256_unpackhi_epi32(a, b));
	const __m256i t1 = _mm256_add_epi32(_mm256_unpacklo_epi32(c, d),
					    _mm256_unpackhi_epi32(c, d));

	return _mm256_add_epi32(_mm256_unpacklo_epi64(t0, t1),
				_mm256_unpackhi_epi64(t0, t1));
}

/* The scales of 8 blocks ld bytes apart, lane 4 k + g that of row 2 g + k */
static inline __m256
q4_scales8(const uint8_t *p, size_t ld)
{
	static const int rows[8] = { 0, 2, 4, 6, 1, 3, 5, 7 };

	return _mm256_cvtph_ps(scale_bits8(p, ld, rows));
}

static void
dot_rows_q4(float *y, const void *w, size_t ld, const struct txl_q8_act *a,
	    int n, int K)
{
	const uint8_t *base = w;
	const size_t bs = sizeof(struct txl_block_q4_0);
	int r = 0;

	for (; r + 8 <= n; r += 8) {
		const uint8_t *w0 = base + (size_t)r * ld;
		__m256 acc = _mm256_setzero_ps();

		for (int b = 0; b < K / TXL_QK; b++) {
			const uint8_t *wb = w0 + b * bs, *v = wb + 2;
			const int8_t *q = a->q + b * TXL_QK;
			const __m256i qlo = _mm256_broadcastsi128_si256(
				_mm_loadu_si128((const __m128i *)(const void *)q));
			const __m256i qhi = _mm256_broadcastsi128_si256(
				_mm_loadu_si128((const __m128i *)(const void *)(q + 16)));
			__m256i s = sum_lanes4x4(q4_idot(v, ld, qlo, qhi),
				q4_idot(v + 2 * ld, ld, qlo, qhi),
				q4_idot(v + 4 * ld, ld, qlo, qhi),
				q4_idot(v + 6 * ld, ld, qlo, qhi));
			const __m256 d = _mm256_mul_ps(q4_scales8(wb, ld),
						       _mm256_set1_ps(a->d[b]));

			s = _mm256_add_epi32(s, _mm256_set1_epi32(a->off[b] / 16));
			acc = _mm256_add_ps(acc, _mm256_mul_ps(
				_mm256_cvtepi32_ps(s), d));
		}
		_mm256_storeu_ps(y + r, _mm256_permutevar8x32_ps(acc,
								 Q4_ROW_LANES));
	}
	for (; r < n; r++)
		y[r] = q4_row_dot(base + (size_t)r * ld, a, K);
}

/* Interleaved Q8_0 (txl-kernels.h): a group's 16 rows in two halves of 8
 * lanes.  The 4 columns j of 8 rows, 32 bytes, times the activations' 4
 * bytes broadcast, by sign transfer and pairs as q8_block_idot_bw, or by
 * vpdpbusd from off as q8_block_idot_vnni (every lane a row: off in each);
 * a block's eight steps into two sums (integer: exact in any order). */
static inline __m256i
il_step_bw(__m256i s, __m256i w, __m256i xb)
{
	return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(
		_mm256_sign_epi8(w, w), _mm256_sign_epi8(xb, w)),
		_mm256_set1_epi16(1)));
}

__attribute__((target("avxvnni")))
static inline __m256i
il_step_vnni(__m256i s, __m256i w, __m256i xb)
{
	return _mm256_dpbusd_avx_epi32(s, _mm256_xor_si256(w,
		_mm256_set1_epi8(-128)), xb);
}

/* The integer sums of a block (qs, the activations' x) into lo (rows
 * 0..7) and hi (8..15), from init in each lane (sums and accumulators in
 * named variables: GCC keeps arrays of them in memory, and each step then
 * waits for the store of the last). */
#define IL_IDOT(step, qs, x, init, lo, hi)                                   \
	do {                                                                 \
		__m256i l0 = init, h0 = init, l1 = _mm256_setzero_si256(),   \
			h1 = l1;                                             \
		for (int j = 0; j < TXL_QK / 4; j += 2) {                    \
			__m256i x0 = _mm256_set1_epi32(*(const int32_t *)(const void *) \
						       ((x) + 4 * j));       \
			__m256i x1 = _mm256_set1_epi32(*(const int32_t *)(const void *) \
						       ((x) + 4 * j + 4));   \
			l0 = step(l0, VI_LOAD((qs) + 64 * j), x0);           \
			h0 = step(h0, VI_LOAD((qs) + 64 * j + 32), x0);      \
			l1 = step(l1, VI_LOAD((qs) + 64 * j + 64), x1);      \
			h1 = step(h1, VI_LOAD((qs) + 64 * j + 96), x1);      \
		}                                                            \
		lo = _mm256_add_epi32(l0, l1);                               \
		hi = _mm256_add_epi32(h0, h1);                               \
	} while (0)

/* acc_lo, acc_hi += block b at blk: rows 0..7 and 8..15, their integer
 * sums (IDOT: IL_IDOT, IL4_IDOT) times their scales (halves) times the
 * activations' */
#define IL_BLOCK(IDOT, step, init, blk, b, acc_lo, acc_hi)                   \
	do {                                                                 \
		const __m256 dx = _mm256_set1_ps(a->d[b]);                   \
		__m256i lo, hi;                                              \
		IDOT(step, (blk) + TXL_IL_SCALES, a->q + (b) * TXL_QK,       \
		     init, lo, hi);                                          \
		acc_lo = _mm256_add_ps(acc_lo, _mm256_mul_ps(_mm256_cvtepi32_ps(lo), \
			_mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(       \
				(const __m128i *)(const void *)(blk))), dx))); \
		acc_hi = _mm256_add_ps(acc_hi, _mm256_mul_ps(_mm256_cvtepi32_ps(hi), \
			_mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(       \
				(const __m128i *)(const void *)((blk) + 16))), dx))); \
	} while (0)

/* IDOT: IL_IDOT or IL4_IDOT, blocks of bsz bytes (TXL_IL_BLOCK,
 * TXL_IL_BLOCK_Q4); init: the sums' start for block b (zero; off for
 * vpdpbusd; off / 16 for Q4_0).  The lines 4 KB ahead are prefetched:
 * from L3 the integer products had otherwise too few loads in flight
 * (bench/README.md). */
#define IL_PREFETCH 4096
#define DOT_IL(name, IDOT, step, init, bsz, attr)                            \
attr static void                                                             \
name(float *y, const void *w, int ng, const struct txl_q8_act *a, int K)     \
{                                                                            \
	const int nb = K / TXL_QK;                                           \
	const uint8_t *blk = w;                                              \
                                                                             \
	for (int g = 0; g < ng; g++) {                                       \
		/* even and odd blocks */                                    \
		__m256 e_lo = _mm256_setzero_ps(), e_hi = e_lo, o_lo = e_lo, \
		       o_hi = e_lo;                                          \
		int b = 0;                                                   \
                                                                             \
		for (; b + 2 <= nb; b += 2, blk += 2 * (bsz)) {              \
			for (int l = 0; l < 2 * (bsz); l += 64)              \
				prefetch_at(blk, IL_PREFETCH + l);           \
			IL_BLOCK(IDOT, step, init(b), blk, b, e_lo, e_hi);   \
			IL_BLOCK(IDOT, step, init(b + 1), blk + (bsz), b + 1, \
				 o_lo, o_hi);                                \
		}                                                            \
		if (b < nb) {                                                \
			IL_BLOCK(IDOT, step, init(b), blk, b, e_lo, e_hi);   \
			blk += (bsz);                                        \
		}                                                            \
		_mm256_storeu_ps(y + g * TXL_IL, _mm256_add_ps(e_lo, o_lo)); \
		_mm256_storeu_ps(y + g * TXL_IL + 8, _mm256_add_ps(e_hi, o_hi)); \
	}                                                                    \
}

#define IL_ZERO(b) _mm256_setzero_si256()
#define IL_OFF(b) _mm256_set1_epi32(a->off[b])
DOT_IL(dot_il, IL_IDOT, il_step_bw, IL_ZERO, TXL_IL_BLOCK, )
DOT_IL(dot_il_vnni, IL_IDOT, il_step_vnni, IL_OFF, TXL_IL_BLOCK,
       __attribute__((target("avxvnni"))))

/* Interleaved Q4_0 (txl-kernels.h): 8 columns of 8 rows, 32 bytes, a
 * mask and a shift from two vectors of the Q8_0 layout's unsigned bytes,
 * each times 4 bytes of the activations broadcast: by pairs
 * (q4_idot_bw), or by vpdpbusd; from off / 16 in every lane. */
static inline __m256i
il4_step_bw(__m256i s, const uint8_t *w8, __m256i x0, __m256i x1)
{
	return _mm256_add_epi32(s, q4_idot_bw(_mm256_loadu_si256(
		(const __m256i *)(const void *)w8), x0, x1));
}

__attribute__((target("avxvnni")))
static inline __m256i
il4_step_vnni(__m256i s, const uint8_t *w8, __m256i x0, __m256i x1)
{
	const __m256i m = _mm256_set1_epi8(15);
	__m256i w = _mm256_loadu_si256((const __m256i *)(const void *)w8);

	s = _mm256_dpbusd_avx_epi32(s, _mm256_and_si256(w, m), x0);
	return _mm256_dpbusd_avx_epi32(s, _mm256_and_si256(
		_mm256_srli_epi16(w, 4), m), x1);
}

/* The integer sums of a Q4_0 block (qs, the activations' x) into lo
 * (rows 0..7) and hi (8..15), from init, as IL_IDOT */
#define IL4_IDOT(step, qs, x, init, lo, hi)                                  \
	do {                                                                 \
		lo = hi = (init);                                            \
		for (int j = 0; j < TXL_QK / 8; j++) {                       \
			__m256i x0 = _mm256_set1_epi32(*(const int32_t *)(const void *) \
						       ((x) + 8 * j));       \
			__m256i x1 = _mm256_set1_epi32(*(const int32_t *)(const void *) \
						       ((x) + 8 * j + 4));   \
			lo = step(lo, (qs) + 64 * j, x0, x1);                \
			hi = step(hi, (qs) + 64 * j + 32, x0, x1);           \
		}                                                            \
	} while (0)

#define IL_OFF16(b) _mm256_set1_epi32(a->off[b] / 16)
DOT_IL(dot_il_q4, IL4_IDOT, il4_step_bw, IL_OFF16, TXL_IL_BLOCK_Q4, )

DOT_IL(dot_il_q4_vnni, IL4_IDOT, il4_step_vnni, IL_OFF16, TXL_IL_BLOCK_Q4,
       __attribute__((target("avxvnni"))))

/* y[K] += sum_r a[r] * w_r: 64 columns at a time held in registers
 * (written out: GCC keeps an array of accumulators in memory, and each
 * multiply-add then waits for the store of the last). */
#define AXPY_ROWS(name, size, load8, load1)                                  \
static void                                                                  \
name(float *y, const float *a, const void *w, size_t ld, int n, int K)      \
{                                                                            \
	const uint8_t *base = w;                                             \
	int k0 = 0;                                                          \
                                                                             \
	for (; k0 + 64 <= K; k0 += 64) {                                     \
		__m256 c0 = _mm256_loadu_ps(y + k0);                         \
		__m256 c1 = _mm256_loadu_ps(y + k0 + 8);                     \
		__m256 c2 = _mm256_loadu_ps(y + k0 + 16);                    \
		__m256 c3 = _mm256_loadu_ps(y + k0 + 24);                    \
		__m256 c4 = _mm256_loadu_ps(y + k0 + 32);                    \
		__m256 c5 = _mm256_loadu_ps(y + k0 + 40);                    \
		__m256 c6 = _mm256_loadu_ps(y + k0 + 48);                    \
		__m256 c7 = _mm256_loadu_ps(y + k0 + 56);                    \
		for (int r = 0; r < n; r++) {                                \
			const uint8_t *wr = base + (size_t)r * ld + k0 * size; \
			__m256 ar = _mm256_broadcast_ss(a + r);              \
			c0 = _mm256_fmadd_ps(ar, load8(wr), c0);             \
			c1 = _mm256_fmadd_ps(ar, load8(wr + 8 * size), c1);  \
			c2 = _mm256_fmadd_ps(ar, load8(wr + 16 * size), c2); \
			c3 = _mm256_fmadd_ps(ar, load8(wr + 24 * size), c3); \
			c4 = _mm256_fmadd_ps(ar, load8(wr + 32 * size), c4); \
			c5 = _mm256_fmadd_ps(ar, load8(wr + 40 * size), c5); \
			c6 = _mm256_fmadd_ps(ar, load8(wr + 48 * size), c6); \
			c7 = _mm256_fmadd_ps(ar, load8(wr + 56 * size), c7); \
		}                                                            \
		_mm256_storeu_ps(y + k0, c0);                                \
		_mm256_storeu_ps(y + k0 + 8, c1);                            \
		_mm256_storeu_ps(y + k0 + 16, c2);                           \
		_mm256_storeu_ps(y + k0 + 24, c3);                           \
		_mm256_storeu_ps(y + k0 + 32, c4);                           \
		_mm256_storeu_ps(y + k0 + 40, c5);                           \
		_mm256_storeu_ps(y + k0 + 48, c6);                           \
		_mm256_storeu_ps(y + k0 + 56, c7);                           \
	}                                                                    \
	for (; k0 + 8 <= K; k0 += 8) {                                       \
		__m256 acc = _mm256_loadu_ps(y + k0);                        \
		for (int r = 0; r < n; r++)                                  \
			acc = _mm256_fmadd_ps(_mm256_broadcast_ss(a + r),    \
					      load8(base + (size_t)r * ld + k0 * size), \
					      acc);                          \
		_mm256_storeu_ps(y + k0, acc);                               \
	}                                                                    \
	for (; k0 < K; k0++) {                                               \
		float acc = y[k0];                                           \
		for (int r = 0; r < n; r++)                                  \
			acc += a[r] * load1(base + (size_t)r * ld + k0 * size); \
		y[k0] = acc;                                                 \
	}                                                                    \
}

AXPY_ROWS(axpy_rows_f32, 4, load8_f32, load1_f32)
AXPY_ROWS(axpy_rows_f16, 2, load8_f16, load1_f16)
AXPY_ROWS(axpy_rows_bf16, 2, load8_bf16, load1_bf16)

/* Q8_0 rows: per block, a[r] times its scale, then its values widened
 * (exactly) and multiplied by that as AXPY_ROWS does, 64 columns (two
 * blocks) at a time in registers, then a last odd block. */

/* the 32 floats at y into c0..c3; c0..c3 back */
#define LOAD4(y, c0, c1, c2, c3)                                             \
	do {                                                                 \
		c0 = _mm256_loadu_ps(y);                                     \
		c1 = _mm256_loadu_ps((y) + 8);                               \
		c2 = _mm256_loadu_ps((y) + 16);                              \
		c3 = _mm256_loadu_ps((y) + 24);                              \
	} while (0)
#define STORE4(y, c0, c1, c2, c3)                                            \
	do {                                                                 \
		_mm256_storeu_ps(y, c0);                                     \
		_mm256_storeu_ps((y) + 8, c1);                               \
		_mm256_storeu_ps((y) + 16, c2);                              \
		_mm256_storeu_ps((y) + 24, c3);                              \
	} while (0)
/* c0..c3 += d times the 32 values of block q */
#define BLOCK_FMA(d, q, c0, c1, c2, c3)                                      \
	do {                                                                 \
		c0 = _mm256_fmadd_ps(d, q8_load8((q)->qs), c0);              \
		c1 = _mm256_fmadd_ps(d, q8_load8((q)->qs + 8), c1);          \
		c2 = _mm256_fmadd_ps(d, q8_load8((q)->qs + 16), c2);         \
		c3 = _mm256_fmadd_ps(d, q8_load8((q)->qs + 24), c3);         \
	} while (0)

static void
axpy_rows_q8_0(float *y, const float *a, const void *w, size_t ld, int n,
	       int K)
{
	const uint8_t *base = w;
	const int nb = K / TXL_QK;
	int b = 0;

	for (; b + 2 <= nb; b += 2) {
		float *yb = y + b * TXL_QK;
		__m256 c0, c1, c2, c3, c4, c5, c6, c7;
		LOAD4(yb, c0, c1, c2, c3);
		LOAD4(yb + 32, c4, c5, c6, c7);
		for (int r = 0; r < n; r++) {
			const struct txl_block_q8_0 *q = (const void *)(base +
					(size_t)r * ld + (size_t)b * sizeof *q);
			const __m256 ar = _mm256_broadcast_ss(a + r);
			BLOCK_FMA(_mm256_mul_ps(ar, block_scale8(q)), q, c0, c1, c2, c3);
			BLOCK_FMA(_mm256_mul_ps(ar, block_scale8(q + 1)), q + 1, c4,
				  c5, c6, c7);
		}
		STORE4(yb, c0, c1, c2, c3);
		STORE4(yb + 32, c4, c5, c6, c7);
	}
	if (b < nb) {
		float *yb = y + b * TXL_QK;
		__m256 c0, c1, c2, c3;
		LOAD4(yb, c0, c1, c2, c3);
		for (int r = 0; r < n; r++) {
			const struct txl_block_q8_0 *q = (const void *)(base +
					(size_t)r * ld + (size_t)b * sizeof *q);
			BLOCK_FMA(_mm256_mul_ps(_mm256_broadcast_ss(a + r),
						block_scale8(q)), q, c0, c1, c2, c3);
		}
		STORE4(yb, c0, c1, c2, c3);
	}
}

/* Q4_0 rows, as txl-kernels-avx512.c's: a block's bytes widened once (in
 * two halves of 8), the nibbles converted, q times the row's a d summed
 * into c[4] (values 0..7, 8..15, 16..23, 24..31), 8 times the sum of a d
 * taken back at the end; a block column at a time, two rows at a time. */
static inline void
q4_block_fma(const uint8_t *blk, float a, __m256 c[4], __m256 *sum)
{
	uint16_t d;

	memcpy(&d, blk, sizeof d);
	const __m256 s = _mm256_set1_ps(a * _cvtsh_ss(d));
	const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(blk + 2));
	const __m256i v0 = _mm256_cvtepu8_epi32(x);
	const __m256i v1 = _mm256_cvtepu8_epi32(_mm_unpackhi_epi64(x, x));
	const __m256i m = _mm256_set1_epi32(15);

	c[0] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(_mm256_and_si256(v0, m)), c[0]);
	c[1] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(_mm256_and_si256(v1, m)), c[1]);
	c[2] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(_mm256_srli_epi32(v0, 4)), c[2]);
	c[3] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(_mm256_srli_epi32(v1, 4)), c[3]);
	*sum = _mm256_add_ps(*sum, s);
}

static void
axpy_rows_q4_0(float *y, const float *a, const void *w, size_t ld, int n,
	       int K)
{
	const uint8_t *base = w;
	const size_t bs = sizeof(struct txl_block_q4_0);

	for (int b = 0; b < K / TXL_QK; b++) {
		__m256 c[4], e[4], s = _mm256_setzero_ps(), t = s;
		float *yb = y + b * TXL_QK;
		int r = 0;

		for (int i = 0; i < 4; i++)
			c[i] = e[i] = s;
		for (; r + 2 <= n; r += 2) {
			const uint8_t *q = base + (size_t)r * ld + b * bs;

			q4_block_fma(q, a[r], c, &s);
			q4_block_fma(q + ld, a[r + 1], e, &t);
		}
		if (r < n)
			q4_block_fma(base + (size_t)r * ld + b * bs, a[r], c, &s);
		s = _mm256_mul_ps(_mm256_set1_ps(8.0f), _mm256_add_ps(s, t));
		for (int i = 0; i < 4; i++)
			_mm256_storeu_ps(yb + 8 * i, _mm256_add_ps(
				_mm256_loadu_ps(yb + 8 * i),
				_mm256_sub_ps(_mm256_add_ps(c[i], e[i]), s)));
	}
}

#undef LOAD4
#undef STORE4
#undef BLOCK_FMA

static void
narrow_f16(void *dst, const float *src, size_t n)
{
	uint8_t *d = dst;
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(void *)(d + 2 * i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
						 _MM_FROUND_TO_NEAREST_INT));
	for (; i < n; i++) {
		uint16_t h = txl_f32_to_f16(src[i]);
		memcpy(d + 2 * i, &h, 2);
	}
}

static void
narrow_bf16(void *dst, const float *src, size_t n)
{
	const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
	const __m256i inf = _mm256_set1_epi32(0x7f800000);
	const __m256i abs = _mm256_set1_epi32(0x7fffffff);
	uint8_t *d = dst;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256i x = _mm256_castps_si256(_mm256_loadu_ps(src + i));
		/* nearest even: add 0x7fff + the lowest bit kept */
		__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
		__m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, bias),
							       lsb), 16);
		__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs), inf);
		__m256i q = _mm256_or_si256(_mm256_srli_epi32(x, 16),
					    _mm256_set1_epi32(0x40));
		r = _mm256_blendv_epi8(r, q, nan);
		/* 8 x 32 -> 8 x 16 bits: pack within lanes, then gather the
		 * two lanes' halves */
		r = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
		_mm_storeu_si128((__m128i *)(void *)(d + 2 * i),
				 _mm256_castsi256_si128(r));
	}
	for (; i < n; i++) {
		uint16_t h = txl_f32_to_bf16(src[i]);
		memcpy(d + 2 * i, &h, 2);
	}
}

/* The scalar narrow_q8_0 (txl-kernels.c) a block at a time: the same
 * operations but the max (exact in any order), the same blocks. */
static void
narrow_q8_0(void *dst, const float *src, size_t n)
{
	const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f);
	struct txl_block_q8_0 *blk = dst;

	for (size_t b = 0; b < n / TXL_QK; b++) {
		__m256 v[4];
		__m256i q[4];
		uint16_t d;
		const float id = txl_q8_0_scale(block_amax(src + b * TXL_QK, v),
						&d);

		memcpy(&blk[b].d, &d, sizeof d);
		if (!(id > 0.0f)) {
			memset(blk[b].qs, 0, TXL_QK);
			continue;
		}
		for (int i = 0; i < 4; i++) {
			/* half away from zero: |v| + 0.5 truncated, clipped,
			 * v's sign put back (vpsignd: v's bits as an int have
			 * its sign) */
			__m256 t = _mm256_mul_ps(v[i], _mm256_set1_ps(id));
			__m256i a = _mm256_cvttps_epi32(_mm256_add_ps(
				_mm256_andnot_ps(sign, t), half));
			q[i] = _mm256_sign_epi32(_mm256_min_epi32(a,
					_mm256_set1_epi32(127)),
					_mm256_castps_si256(t));
		}
		store_q32(blk[b].qs, q);
	}
}

/* The scalar txl_narrow_q4_0 (txl-kernels.c) a block at a time, as
 * txl-kernels-avx512.c's. */
static void
narrow_q4_0(void *dst, const float *src, size_t n)
{
	const __m256 sign = _mm256_set1_ps(-0.0f), half8 = _mm256_set1_ps(8.5f);
	const __m256i zero = _mm256_setzero_si256(), top = _mm256_set1_epi32(15);
	uint8_t *out = dst;

	for (size_t b = 0; b < n / TXL_QK; b++) {
		const float *xb = src + b * TXL_QK;
		uint8_t *o = out + b * sizeof(struct txl_block_q4_0);
		__m256 v[4];
		__m256i q[4];
		const float amax = block_amax(xb, v);

		if (amax != amax) {
			txl_narrow_q4_0(o, xb, TXL_QK);
			continue;
		}
		const __m256 am = _mm256_set1_ps(amax);
		uint32_t eq = 0;
		for (int i = 0; i < 4; i++)
			eq |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(
				_mm256_andnot_ps(sign, v[i]), am, _CMP_EQ_OQ))
				<< 8 * i;
		uint16_t d;
		const float id = txl_q4_0_scale(xb[__builtin_ctz(eq)], &d);

		memcpy(o, &d, sizeof d);
		if (id == 0.0f) {
			memset(o + 2, 0x88, TXL_QK / 2);
			continue;
		}
		for (int i = 0; i < 4; i++)
			q[i] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvttps_epi32(
				_mm256_add_ps(_mm256_mul_ps(v[i], _mm256_set1_ps(id)),
					      half8)), zero), top);
		/* value j (< 16) in the low nibble of byte j, j + 16 in its
		 * high one; the packs keep the order within 128 bits */
		const __m256i t0 = _mm256_or_si256(q[0], _mm256_slli_epi32(q[2], 4));
		const __m256i t1 = _mm256_or_si256(q[1], _mm256_slli_epi32(q[3], 4));
		_mm_storeu_si128((__m128i *)(void *)(o + 2), _mm_packus_epi16(
			_mm_packs_epi32(_mm256_castsi256_si128(t0),
					_mm256_extracti128_si256(t0, 1)),
			_mm_packs_epi32(_mm256_castsi256_si128(t1),
					_mm256_extracti128_si256(t1, 1))));
	}
}

/* exp(x) for x <= 0 (Cephes' expf: x = n ln2 + r, |r| <= ln2/2, a degree
 * 6 polynomial for exp(r), times 2^n; about 1 ulp); 0 below -87.3, where
 * expf's results are subnormal. */
static inline __m256
exp8(__m256 x)
{
	const __m256 lo = _mm256_set1_ps(-87.33654f);
	__m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
	x = _mm256_max_ps(x, lo);
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
				   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	__m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),
						       _mm256_set1_epi32(127)), 23);
	p = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
	return _mm256_andnot_ps(under, p);
}

static double
exp_sum(float *out, const float *x, int n, float max)
{
	const __m256 m = _mm256_set1_ps(max);
	__m256d s0 = _mm256_setzero_pd(), s1 = s0;
	int i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
		if (out)
			_mm256_storeu_ps(out + i, e);
		s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
		s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
	}
	double t[4], sum;
	_mm256_storeu_pd(t, _mm256_add_pd(s0, s1));
	sum = (t[0] + t[1]) + (t[2] + t[3]);
	return txl_exp_sum_tail(out, x, i, n, max, sum);
}

static float
max_of(const float *x, int n)
{
	__m256 m = _mm256_set1_ps(-INFINITY);
	float r;
	int i = 0;

	for (; i + 8 <= n; i += 8)
		m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
	__m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
	h = _mm_max_ps(h, _mm_movehl_ps(h, h));
	h = _mm_max_ss(h, _mm_movehdup_ps(h));
	r = _mm_cvtss_f32(h);
	for (; i < n; i++)
		r = x[i] > r ? x[i] : r;
	return r;
}

/* ---- several rows of activations (txl_dot_multi_fn): a batch ---- */

/*
 * One row of W, a row of a group of four of DOT_ROWS, against four rows
 * of activations (x[0..3]) into out[0..3]: per row of activations the
 * sums, steps and final additions of DOT_ROWS in its order (hsum4 sums
 * each of its four vectors alike, then the scalar tail), each weight
 * vector loaded once for the four (8 sums: AVX2 has 16 registers).  The
 * row streams from memory once (for eight rows of activations, read
 * again at once from L1), the weights ROW4_AHEAD bytes on prefetched:
 * read a group at a time against pairs of activation rows, the weights
 * came from DRAM in the first pass only and the arithmetic of the others
 * left DRAM idle (bench/README.md).
 */
#define ROW4_AHEAD 2048
#define DOT_ROW4(name, size, load8, load1)                                   \
static inline void                                                           \
name(float *out, const uint8_t *w, const float *const *x, int K)             \
{                                                                            \
	const int K8 = K & ~7, K16 = K & ~15;                                \
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;          \
	__m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, v;                        \
	int k = 0;                                                           \
                                                                             \
	for (; k < K16; k += 16) {                                           \
		if ((k * size) % 64 == 0)                                    \
			prefetch_at(w, (size_t)k * size + ROW4_AHEAD);       \
		v = load8(w + k * size);                                     \
		a0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x[0] + k), a0);      \
		a1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x[1] + k), a1);      \
		a2 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x[2] + k), a2);      \
		a3 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x[3] + k), a3);      \
		v = load8(w + (k + 8) * size);                               \
		b0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x[0] + k + 8), b0);  \
		b1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x[1] + k + 8), b1);  \
		b2 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x[2] + k + 8), b2);  \
		b3 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x[3] + k + 8), b3);  \
	}                                                                    \
	for (; k < K8; k += 8) {                                             \
		v = load8(w + k * size);                                     \
		a0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x[0] + k), a0);      \
		a1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x[1] + k), a1);      \
		a2 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x[2] + k), a2);      \
		a3 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x[3] + k), a3);      \
	}                                                                    \
	_mm_storeu_ps(out, hsum4(_mm256_add_ps(a0, b0), _mm256_add_ps(a1, b1), \
				 _mm256_add_ps(a2, b2), _mm256_add_ps(a3, b3))); \
	for (; k < K; k++) {                                                 \
		const float wk = load1(w + k * size);                        \
		for (int i = 0; i < 4; i++)                                  \
			out[i] += wk * x[i][k];                              \
	}                                                                    \
}

DOT_ROW4(dot_row4_f32, 4, load8_f32, load1_f32)
DOT_ROW4(dot_row4_f16, 2, load8_f16, load1_f16)
DOT_ROW4(dot_row4_bf16, 2, load8_bf16, load1_bf16)

/*
 * Each group of four rows of DOT_ROWS against four rows of activations
 * at a time by row4 (above), each row of W once for each four; then two
 * rows at a time, against two rows of activations at a time (8 sums: per
 * row of activations the sums, steps and final additions of DOT_ROWS in
 * its order (hsum4 sums each of its four vectors alone), each weight
 * vector loaded once for the two; a last odd row of activations, and the
 * rows past the last group of four, by dot itself.
 */
#define DOT_MULTI(name, dot, row4, size, load8, load1)                       \
static void                                                                  \
name(float *const *y, const void *w, size_t ld, const float *const *x, int M, \
     int n, int K)                                                           \
{                                                                            \
	const uint8_t *base = w;                                             \
	const int K8 = K & ~7, K16 = K & ~15;                                \
	const int M4 = M & ~3;                                               \
	int r = 0;                                                           \
                                                                             \
	for (; r + 4 <= n; r += 4) {                                         \
		int m = M4;                                                  \
		for (int j = 0; j < 4; j++)                                  \
			for (int m4 = 0; m4 < M4; m4 += 4) {                 \
				float out[4];                                \
				row4(out, base + (size_t)(r + j) * ld,       \
				     x + m4, K);                             \
				for (int i = 0; i < 4; i++)                  \
					y[m4 + i][r + j] = out[i];           \
			}                                                    \
		for (; m + 2 <= M; m += 2) {                                 \
			const float *p = x[m], *q = x[m + 1];                \
			for (int i = 0; i < 4; i += 2) {                     \
				const uint8_t *w0 = base + (size_t)(r + i) * ld; \
				const uint8_t *w1 = w0 + ld;                 \
				__m256 a0 = _mm256_setzero_ps(), a1 = a0;    \
				__m256 b0 = a0, b1 = a0, c0 = a0, c1 = a0;   \
				__m256 d0 = a0, d1 = a0, v;                  \
				int k = 0;                                   \
				for (; k < K16; k += 16) {                   \
					const __m256 p0 = _mm256_loadu_ps(p + k); \
					const __m256 p1 = _mm256_loadu_ps(p + k + 8); \
					const __m256 q0 = _mm256_loadu_ps(q + k); \
					const __m256 q1 = _mm256_loadu_ps(q + k + 8); \
					v = load8(w0 + k * size);            \
					a0 = _mm256_fmadd_ps(v, p0, a0);     \
					c0 = _mm256_fmadd_ps(v, q0, c0);     \
					v = load8(w1 + k * size);            \
					a1 = _mm256_fmadd_ps(v, p0, a1);     \
					c1 = _mm256_fmadd_ps(v, q0, c1);     \
					v = load8(w0 + (k + 8) * size);      \
					b0 = _mm256_fmadd_ps(v, p1, b0);     \
					d0 = _mm256_fmadd_ps(v, q1, d0);     \
					v = load8(w1 + (k + 8) * size);      \
					b1 = _mm256_fmadd_ps(v, p1, b1);     \
					d1 = _mm256_fmadd_ps(v, q1, d1);     \
				}                                            \
				for (; k < K8; k += 8) {                     \
					const __m256 p0 = _mm256_loadu_ps(p + k); \
					const __m256 q0 = _mm256_loadu_ps(q + k); \
					v = load8(w0 + k * size);            \
					a0 = _mm256_fmadd_ps(v, p0, a0);     \
					c0 = _mm256_fmadd_ps(v, q0, c0);     \
					v = load8(w1 + k * size);            \
					a1 = _mm256_fmadd_ps(v, p0, a1);     \
					c1 = _mm256_fmadd_ps(v, q0, c1);     \
				}                                            \
				float t[4];                                  \
				_mm_storeu_ps(t, hsum4(_mm256_add_ps(a0, b0), \
					_mm256_add_ps(a1, b1),               \
					_mm256_add_ps(c0, d0),               \
					_mm256_add_ps(c1, d1)));             \
				for (; k < K; k++) {                         \
					t[0] += load1(w0 + k * size) * p[k]; \
					t[1] += load1(w1 + k * size) * p[k]; \
					t[2] += load1(w0 + k * size) * q[k]; \
					t[3] += load1(w1 + k * size) * q[k]; \
				}                                            \
				y[m][r + i] = t[0];                          \
				y[m][r + i + 1] = t[1];                      \
				y[m + 1][r + i] = t[2];                      \
				y[m + 1][r + i + 1] = t[3];                  \
			}                                                    \
		}                                                            \
		if (m < M)                                                   \
			dot(y[m] + r, base + (size_t)r * ld, ld, x[m], 4, K); \
	}                                                                    \
	if (r < n)                                                           \
		for (int m = 0; m < M; m++)                                  \
			dot(y[m] + r, base + (size_t)r * ld, ld, x[m], n - r, K); \
}

DOT_MULTI(dot_multi_f32, dot_rows_f32, dot_row4_f32, 4, load8_f32, load1_f32)
DOT_MULTI(dot_multi_f16, dot_rows_f16, dot_row4_f16, 2, load8_f16, load1_f16)
DOT_MULTI(dot_multi_bf16, dot_rows_bf16, dot_row4_bf16, 2, load8_bf16,
	  load1_bf16)

/* the interleaved copies' kernels AVX-512 shares (from L3 the integer
 * products of Q4_K had too few loads in flight without the prefetch) */
#define IL_AHEAD IL_PREFETCH
#include "txl-kernels-simd.h"

WIDEN_BLOCKS(widen_q8_0, struct txl_block_q8_0, Q8_VALS)
WIDEN_BLOCKS(widen_q4_0, struct txl_block_q4_0, Q4_VALS)

DOT_IL_Q4K(dot_il_q4k, il4_prep_bw, il4_sum_bw, )
DOT_IL_Q4K(dot_il_q4k_vnni, il4_prep_vnni, il4_sum_vnni, VNNI_ATTR)

DOT_IL_MULTI(dot_il_multi, il8_prep_bw, il8_sum_bw, 8, TXL_IL_BLOCK, )
DOT_IL_MULTI(dot_il_multi_vnni, il8_prep_vnni, il8_sum_vnni, 8, TXL_IL_BLOCK,
	     __attribute__((target("avxvnni"))))
DOT_IL_MULTI(dot_il_multi_q4, il4_prep_bw, il4_sum_bw, 8, TXL_IL_BLOCK_Q4, )
DOT_IL_MULTI(dot_il_multi_q4_vnni, il4_prep_vnni, il4_sum_vnni, 8,
	     TXL_IL_BLOCK_Q4, __attribute__((target("avxvnni"))))

const struct txl_type_kernels txl_avx2_f32 = TXL_FLOAT_KERNELS(f32);
const struct txl_type_kernels txl_avx2_f16 = TXL_FLOAT_KERNELS(f16);
const struct txl_type_kernels txl_avx2_bf16 = TXL_FLOAT_KERNELS(bf16);
const struct txl_type_kernels txl_avx2_q8_0 = {
	.widen = widen_q8_0, .narrow = narrow_q8_0,
	.axpy_rows = axpy_rows_q8_0, .dot = dot_rows_q8_0,
	.dot_q8 = dot_rows_q8, .dot_q16 = dot_rows_q16, .dot_il = dot_il,
	.dot_il_multi = dot_il_multi,
};
/* against float activations: the scalar kernel (txl-kernels.c) */
const struct txl_type_kernels txl_avx2_q4_0 = {
	.widen = widen_q4_0, .narrow = narrow_q4_0,
	.axpy_rows = axpy_rows_q4_0, .dot_q8 = dot_rows_q4,
	.dot_il = dot_il_q4, .dot_il_multi = dot_il_multi_q4,
};
/* avxvnni: AVX2's kernels but the integer products of vpdpbusd */
const struct txl_type_kernels txl_avxvnni_q8_0 = {
	.dot_q8 = dot_rows_q8_vnni, .dot_il = dot_il_vnni,
	.dot_il_multi = dot_il_multi_vnni,
};
const struct txl_type_kernels txl_avxvnni_q4_0 = {
	.dot_il = dot_il_q4_vnni, .dot_il_multi = dot_il_multi_q4_vnni,
};

/* Q4_K: the integer products of each super-block in vectors */
const struct txl_type_kernels txl_avx2_q4_k = {
	.dot_q8 = dot_rows_q4k, .dot_il = dot_il_q4k,
	.dot_il_multi = dot_il_q4k_multi,
};
const struct txl_type_kernels txl_avxvnni_q4_k = {
	.dot_il = dot_il_q4k_vnni, .dot_il_multi = dot_il_q4k_vnni_multi,
};

const struct txl_kernels txl_kernels_avx2 = {
	.name = "avx2", .isa = TXL_ISA_AVX2, .quantize_q8 = quantize_q8,
	.exp_sum = exp_sum, .max = max_of,
};
const struct txl_kernels txl_kernels_avx2_vnni = {
	.name = "avxvnni", .isa = TXL_ISA_AVX2_VNNI,
	.quantize_q8 = quantize_q8, .exp_sum = exp_sum, .max = max_of,
};
