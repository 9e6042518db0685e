/* SPDX-License-Identifier: MIT */
/*
 * txl-kernels-q4.h - what the vector kernel files share of the 4-bit
 * rows against int8 activations (dot_q8, txl-kernels.h): the product of
 * one Q4_0 row, for the rows left over by their blocks of rows, and
 * Q4_K's rows: four at a time, the integer
 * sums of a super-block's four sub-blocks in 256-bit vectors, then the
 * scalar kernel's float operations in its order, the four rows' lanes
 * side by side (every set computes the same floats).  Included by
 * txl-kernels-avx2.c and txl-kernels-avx512.c, compiled for each one's
 * instruction set.
 */
#ifndef TXL_KERNELS_Q4_H
#define TXL_KERNELS_Q4_H

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "txl-kernels.h"
#include "txl-kernels-x86.h"

/* The low nibbles of v's bytes times qlo's, the high ones times qhi's:
 * in each int32 lane 4 of each, exact (a pair of products is at most
 * 2 * 15 * 128, two pairs fit int16).  Of two Q4_K sub-blocks (v: j's
 * 16 bytes, then j + 1's; qlo the first 16 activations of each, qhi the
 * last 16): 4 lanes of sums for j, then 4 for j + 1. */
static inline __m256i
q4_idot256(__m256i v, __m256i qlo, __m256i qhi)
{
	const __m256i m = _mm256_set1_epi8(15);
	const __m256i p = _mm256_add_epi16(
		_mm256_maddubs_epi16(_mm256_and_si256(v, m), qlo),
		_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4),
						      m), qhi));

	return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static inline __m256i
q4k_idot2(const uint8_t *qs, __m256i xlo, __m256i xhi)
{
	return q4_idot256(_mm256_loadu_si256((const __m256i *)(const void *)qs),
			  xlo, xhi);
}

/* One Q4_0 row, as the scalar kernel computes it (the rows left over
 * by the files' blocks of rows). */
static inline float
q4_row_dot(const uint8_t *row, const struct txl_q8_act *a, int K)
{
	float acc = 0.0f;

	for (int b = 0; b < K / TXL_QK; b++) {
		const uint8_t *blk = row + b * sizeof(struct txl_block_q4_0);
		const int8_t *q = a->q + b * TXL_QK;
		uint16_t d;
		/* the block in the low half (the high one's sums unused) */
		__m128i s = _mm256_castsi256_si128(q4_idot256(
			_mm256_castsi128_si256(_mm_loadu_si128(
				(const __m128i *)(const void *)(blk + 2))),
			_mm256_castsi128_si256(_mm_loadu_si128(
				(const __m128i *)(const void *)q)),
			_mm256_castsi128_si256(_mm_loadu_si128(
				(const __m128i *)(const void *)(q + 16)))));

		s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
		s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
		memcpy(&d, blk, sizeof d);
		acc += (float)(_mm_cvtsi128_si32(s) + a->off[b] / 16) *
			(_cvtsh_ss(d) * a->d[b]);
	}
	return acc;
}

/* The activations of a super-block (128 int8 at x) as q4k_idot2 takes
 * them: xa[0], xa[1] for sub-blocks 0 and 1, xa[2], xa[3] for 2 and 3. */
static inline void
q4k_act(__m256i xa[4], const int8_t *x)
{
	for (int j = 0; j < 4; j += 2) {
		const __m128i *p = (const __m128i *)(const void *)(x + 32 * j);

		xa[j] = _mm256_loadu2_m128i(p + 2, p);
		xa[j + 1] = _mm256_loadu2_m128i(p + 3, p + 1);
	}
}

/* The exact sums of q a of the 4 sub-blocks of two rows' super-blocks (b0,
 * b1): lane j of *s0 sub-block j's of b0, of *s1 b1's. */
static inline void
q4k_isums2(const uint8_t *b0, const uint8_t *b1, const __m256i xa[4],
	   __m128i *s0, __m128i *s1)
{
	const size_t qs = offsetof(struct txl_block_q4_k, qs);
	/* [j 0 0 2 2 | 1 1 3 3] of each row, then [b0's 0 2, b1's 0 2 | b0's
	 * 1 3, b1's 1 3] */
	const __m256i h = _mm256_hadd_epi32(
		_mm256_hadd_epi32(q4k_idot2(b0 + qs, xa[0], xa[1]),
				  q4k_idot2(b0 + qs + 32, xa[2], xa[3])),
		_mm256_hadd_epi32(q4k_idot2(b1 + qs, xa[0], xa[1]),
				  q4k_idot2(b1 + qs + 32, xa[2], xa[3])));
	const __m128i lo = _mm256_castsi256_si128(h);
	const __m128i hi = _mm256_extracti128_si256(h, 1);

	*s0 = _mm_unpacklo_epi32(lo, hi);
	*s1 = _mm_unpackhi_epi32(lo, hi);
}

/* The 4 sub-blocks' terms of one row's super-block (blk) as the scalar
 * kernel computes them: 4 s less z times the activations' sum (asum),
 * times (d sc / 4 times a's scale, ad). */
static inline __m128
q4k_terms(const uint8_t *blk, __m128i s, __m128i asum, __m128 ad)
{
	uint16_t dh;
	const __m128i h = _mm_loadl_epi64((const __m128i *)(const void *)blk);
	/* sz[0..3], and sz[4], sz[4], sz[5], sz[5]: z's top 4 bits, the low
	 * nibbles for even j */
	const __m128i lo = _mm_cvtepu8_epi32(_mm_srli_si128(h, 2));
	const __m128i top = _mm_and_si128(_mm_srlv_epi32(_mm_cvtepu8_epi32(
		_mm_shuffle_epi8(h, _mm_setr_epi8(6, 6, 7, 7, -1, -1, -1, -1,
			-1, -1, -1, -1, -1, -1, -1, -1))),
		_mm_setr_epi32(0, 4, 0, 4)), _mm_set1_epi32(15));
	const __m128i z = _mm_or_si128(_mm_srli_epi32(lo, 6),
				       _mm_slli_epi32(top, 2));
	const __m128i sc = _mm_and_si128(lo, _mm_set1_epi32(63));

	memcpy(&dh, blk, sizeof dh);
	const __m128i t = _mm_add_epi32(_mm_slli_epi32(s, 2),
					_mm_mullo_epi32(z, asum));
	const __m128 u = _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(_cvtsh_ss(dh)),
					       _mm_cvtepi32_ps(sc)),
				    _mm_set1_ps(0.25f));

	return _mm_mul_ps(_mm_cvtepi32_ps(t), _mm_mul_ps(u, ad));
}

/* Four rows at a time, each the scalar kernel's floats: their terms
 * turned to one vector of the four rows per sub-block, added in order;
 * the rows left one at a time. */
static void
dot_rows_q4k(float *y, const void *w, size_t ld, const struct txl_q8_act *a,
	     int n, int K)
{
	const int nsb = K / TXL_Q4_K_BLOCK;
	int r = 0;

	for (; r + 4 <= n; r += 4) {
		ROWS4(uint8_t, (const uint8_t *)w, r, ld, w0, w1, w2, w3);
		__m128 acc = _mm_setzero_ps();

		for (int sb = 0; sb < nsb; sb++) {
			const size_t o = (size_t)sb * TXL_Q4_K_BYTES;
			const int b = sb * TXL_Q4_K_SUB;
			/* off is -128 times the activations' sum: exact
			 * shifts */
			const __m128i asum = _mm_srai_epi32(_mm_loadu_si128(
				(const __m128i *)(const void *)(a->off + b)), 7);
			const __m128 ad = _mm_loadu_ps(a->d + b);
			__m256i xa[4];
			__m128i s0, s1, s2, s3;

			q4k_act(xa, a->q + b * TXL_QK);
			q4k_isums2(w0 + o, w1 + o, xa, &s0, &s1);
			q4k_isums2(w2 + o, w3 + o, xa, &s2, &s3);
			__m128 t0 = q4k_terms(w0 + o, s0, asum, ad);
			__m128 t1 = q4k_terms(w1 + o, s1, asum, ad);
			__m128 t2 = q4k_terms(w2 + o, s2, asum, ad);
			__m128 t3 = q4k_terms(w3 + o, s3, asum, ad);
			_MM_TRANSPOSE4_PS(t0, t1, t2, t3);
			acc = _mm_add_ps(_mm_add_ps(_mm_add_ps(_mm_add_ps(acc,
				t0), t1), t2), t3);
		}
		_mm_storeu_ps(y + r, acc);
	}
	for (; r < n; r++) {
		const uint8_t *row = (const uint8_t *)w + (size_t)r * ld;
		float acc = 0.0f;

		for (int sb = 0; sb < nsb; sb++) {
			const uint8_t *blk = row + (size_t)sb * TXL_Q4_K_BYTES;
			const int b = sb * TXL_Q4_K_SUB;
			__m256i xa[4];
			__m128i s, s_again;
			float p[4];

			q4k_act(xa, a->q + b * TXL_QK);
			q4k_isums2(blk, blk, xa, &s, &s_again);
			_mm_storeu_ps(p, q4k_terms(blk, s, _mm_srai_epi32(
				_mm_loadu_si128((const __m128i *)(const void *)
						(a->off + b)), 7),
				_mm_loadu_ps(a->d + b)));
			acc += p[0];
			acc += p[1];
			acc += p[2];
			acc += p[3];
		}
		y[r] = acc;
	}
}

#endif /* TXL_KERNELS_Q4_H */
