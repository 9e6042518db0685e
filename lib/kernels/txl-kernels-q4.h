/* SPDX-License-Identifier: MIT */
/*
 * txl-kernels-q4.h - what the vector kernel files share of dot_rows_q4
 * (txl-kernels.h): the product of one Q4_0 row, for the rows left over
 * by their blocks of rows.  Included by txl-kernels-avx2.c and
 * txl-kernels-avx512.c, compiled for each one's instruction set.
 */
#ifndef TXL_KERNELS_Q4_H
#define TXL_KERNELS_Q4_H

#include <immintrin.h>
#include <string.h>

#include "txl-kernels.h"

/* The 16 bytes of a Q4_0 block times the query's 32 int8 values: 4 int32
 * lanes, each 4 low nibbles (values 0..15) and 4 high ones (16..31) times
 * their query bytes, exact (|q a| <= 15 * 127, pairs of pairs within
 * int16). */
static inline __m128i
q4_idot128(__m128i v, __m128i qlo, __m128i qhi)
{
	const __m128i m = _mm_set1_epi8(15);
	const __m128i p = _mm_add_epi16(
		_mm_maddubs_epi16(_mm_and_si128(v, m), qlo),
		_mm_maddubs_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), m), qhi));

	return _mm_madd_epi16(p, _mm_set1_epi16(1));
}

/* One row, as the scalar kernel computes it. */
static inline float
q4_row_dot(const uint8_t *row, const struct txl_q8_act *a, int K)
{
	float acc = 0.0f;

	for (int b = 0; b < K / TXL_QK; b++) {
		const uint8_t *blk = row + b * sizeof(struct txl_block_q4_0);
		const int8_t *q = a->q + b * TXL_QK;
		uint16_t d;
		__m128i s = q4_idot128(
			_mm_loadu_si128((const __m128i *)(const void *)(blk + 2)),
			_mm_loadu_si128((const __m128i *)(const void *)q),
			_mm_loadu_si128((const __m128i *)(const void *)(q + 16)));

		s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
		s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
		memcpy(&d, blk, sizeof d);
		acc += (float)(_mm_cvtsi128_si32(s) + a->off[b] / 16) *
			(_cvtsh_ss(d) * a->d[b]);
	}
	return acc;
}

#endif /* TXL_KERNELS_Q4_H */
