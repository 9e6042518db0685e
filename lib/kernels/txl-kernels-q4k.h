/* SPDX-License-Identifier: MIT */
/*
 * txl-kernels-q4k.h - the Q4_K rows against int8 activations (dot_q8,
 * txl-kernels.h) of the vector sets: the integer sums of a super-block's
 * four sub-blocks in vectors, then the scalar kernel's float operations
 * in its order (every set computes the same floats).  Included by
 * txl-kernels-avx2.c and txl-kernels-avx512.c, compiled for each one's
 * instruction set (AVX-512: two sub-blocks a 512-bit product).
 */
#ifndef TXL_KERNELS_Q4K_H
#define TXL_KERNELS_Q4K_H

#include <immintrin.h>
#include <string.h>

#include "txl-kernels.h"

/* A sub-block's 16 bytes as its 32 values (0..15) in order: the low
 * nibbles, then the high ones. */
static inline __m256i
q4k_values(const uint8_t *qs)
{
	const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)qs);
	const __m128i m = _mm_set1_epi8(15);

	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m),
				_mm_and_si128(v, m));
}

/* The 4 exact sums of q a of a super-block's sub-blocks (blk) against
 * the activations' 128 int8 values (x). */
static inline __m128i
q4k_isums(const uint8_t *qs, const int8_t *x)
{
	const __m256i one = _mm256_set1_epi16(1);
	__m256i s[4];

#if defined(__AVX512BW__)
	for (int j = 0; j < 4; j += 2) {
		const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(
			q4k_values(qs + 16 * j)), q4k_values(qs + 16 * j + 16),
			1);
		const __m512i p = _mm512_madd_epi16(_mm512_maddubs_epi16(q,
			_mm512_loadu_si512((const void *)(x + 32 * j))),
			_mm512_set1_epi16(1));

		s[j] = _mm512_castsi512_si256(p);
		s[j + 1] = _mm512_extracti64x4_epi64(p, 1);
	}
	(void)one;
#else
	for (int j = 0; j < 4; j++)
		s[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(
			q4k_values(qs + 16 * j), _mm256_loadu_si256(
				(const __m256i *)(const void *)(x + 32 * j))),
			one);
#endif
	const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]),
					    _mm256_hadd_epi32(s[2], s[3]));

	return _mm_add_epi32(_mm256_castsi256_si128(h),
			     _mm256_extracti128_si256(h, 1));
}

/* One row, as the scalar kernel computes it. */
static inline float
q4k_row_dot(const uint8_t *row, const struct txl_q8_act *a, int K)
{
	float acc = 0.0f;

	for (int sb = 0; sb < K / TXL_Q4_K_BLOCK; sb++) {
		const uint8_t *blk = row + (size_t)sb * TXL_Q4_K_BYTES;
		const uint8_t *sz = blk + 2;
		const int b = sb * TXL_Q4_K_SUB;
		uint16_t dh;
		float p[4];

		memcpy(&dh, blk, sizeof dh);
		const __m128i sc = _mm_setr_epi32(
			txl_q4_k_sc(sz, 0), txl_q4_k_sc(sz, 1),
			txl_q4_k_sc(sz, 2), txl_q4_k_sc(sz, 3));
		const __m128i z = _mm_setr_epi32(
			txl_q4_k_z(sz, 0), txl_q4_k_z(sz, 1),
			txl_q4_k_z(sz, 2), txl_q4_k_z(sz, 3));
		/* off is -128 times the activations' sum: exact shifts */
		const __m128i asum = _mm_srai_epi32(_mm_loadu_si128(
			(const __m128i *)(const void *)(a->off + b)), 7);
		const __m128i t = _mm_add_epi32(_mm_slli_epi32(q4k_isums(
			blk + 8, a->q + b * TXL_QK), 2), _mm_mullo_epi32(z, asum));
		const __m128 u = _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(
			_cvtsh_ss(dh)), _mm_cvtepi32_ps(sc)), _mm_set1_ps(0.25f));

		_mm_storeu_ps(p, _mm_mul_ps(_mm_cvtepi32_ps(t), _mm_mul_ps(u,
			_mm_loadu_ps(a->d + b))));
		acc += p[0];
		acc += p[1];
		acc += p[2];
		acc += p[3];
	}
	return acc;
}

static void
dot_rows_q4k(float *y, const void *w, size_t ld, const struct txl_q8_act *a,
	     int n, int K)
{
	for (int r = 0; r < n; r++)
		y[r] = q4k_row_dot((const uint8_t *)w + (size_t)r * ld, a, K);
}

#endif /* TXL_KERNELS_Q4K_H */
