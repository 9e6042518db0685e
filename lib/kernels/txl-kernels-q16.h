/* SPDX-License-Identifier: MIT */
/*
 * txl-kernels-q16.h - dot_rows_q16 (txl-kernels.h) for the vector kernel
 * files, included by txl-kernels-avx2.c and txl-kernels-avx512.c and so
 * compiled for each one's instruction set.  The file defines first:
 *
 *   q16_query_t                a block of the int16 query, in registers;
 *   q16_query(const int16_t *) loads one;
 *   q16_block_idot(b, query)   a Q8_0 block of a row times it: __m256i of
 *                              8 int32 partial sums, exact.
 *
 * Eight rows at a time, a block at a time: the integer sums of the rows in
 * one vector, then one float product and sum per row and block, as the
 * scalar kernel does them, so that every set computes the same floats.
 */
#ifndef TXL_KERNELS_Q16_H
#define TXL_KERNELS_Q16_H

#include <immintrin.h>
#include <string.h>

#include "txl-kernels.h"

/* [sum(p0), ..., sum(p7)] of int32 lanes (exact) */
static inline __m256i
hsum8_epi32(__m256i p0, __m256i p1, __m256i p2, __m256i p3, __m256i p4,
	    __m256i p5, __m256i p6, __m256i p7)
{
	/* rows 0..3 (then 4..7): the sums of lanes 0..3 in the low half,
	 * of lanes 4..7 in the high one */
	const __m256i t0 = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1),
					     _mm256_hadd_epi32(p2, p3));
	const __m256i t1 = _mm256_hadd_epi32(_mm256_hadd_epi32(p4, p5),
					     _mm256_hadd_epi32(p6, p7));

	return _mm256_add_epi32(_mm256_permute2x128_si256(t0, t1, 0x20),
				_mm256_permute2x128_si256(t0, t1, 0x31));
}

/* The scale of a block at p, its 16 bits in an int. */
static inline int
q8_scale_bits(const uint8_t *p)
{
	uint16_t d;

	memcpy(&d, p, sizeof d);
	return d;
}

/* The 16-bit scales of the blocks of rows rows[0..7], `ld` bytes apart
 * from p, in lanes 0..7 (inserted one by one: an array of them is
 * stored, then loaded whole, stalls; a gather is slower still) */
static inline __m128i
scale_bits8(const uint8_t *p, size_t ld, const int rows[8])
{
#define AT(i) q8_scale_bits(p + (size_t)rows[i] * ld)
	__m128i v = _mm_cvtsi32_si128(AT(0));

	v = _mm_insert_epi16(v, AT(1), 1);
	v = _mm_insert_epi16(v, AT(2), 2);
	v = _mm_insert_epi16(v, AT(3), 3);
	v = _mm_insert_epi16(v, AT(4), 4);
	v = _mm_insert_epi16(v, AT(5), 5);
	v = _mm_insert_epi16(v, AT(6), 6);
	v = _mm_insert_epi16(v, AT(7), 7);
#undef AT
	return v;
}

/* The scales of 8 blocks `ld` bytes apart, as floats */
static inline __m256
q8_scales8(const uint8_t *p, size_t ld)
{
	static const int rows[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };

	return _mm256_cvtph_ps(scale_bits8(p, ld, rows));
}

static void
dot_rows_q16(float *y, const void *w, size_t ld, const struct txl_q16_act *a,
	     int n, int K)
{
	const uint8_t *base = w;
	const size_t bs = sizeof(struct txl_block_q8_0);
	const int nb = K / TXL_QK;
	int r = 0;

	for (; r + 8 <= n; r += 8) {
		const uint8_t *w0 = base + (size_t)r * ld;
		__m256 acc = _mm256_setzero_ps();

		for (int b = 0; b < nb; b++) {
			const q16_query_t qa = q16_query(a->q + b * TXL_QK);
			const uint8_t *wb = w0 + b * bs;
#define ROW(i) q16_block_idot((const void *)(wb + (i) * ld), qa)
			const __m256i s = hsum8_epi32(ROW(0), ROW(1), ROW(2),
				ROW(3), ROW(4), ROW(5), ROW(6), ROW(7));
#undef ROW
			const __m256 d = _mm256_mul_ps(q8_scales8(wb, ld),
						       _mm256_set1_ps(a->d[b]));

			acc = _mm256_add_ps(acc, _mm256_mul_ps(
				_mm256_cvtepi32_ps(s), d));
		}
		_mm256_storeu_ps(y + r, acc);
	}
	for (; r < n; r++) {
		const uint8_t *wr = base + (size_t)r * ld;
		float acc = 0.0f;

		for (int b = 0; b < nb; b++) {
			const __m256i p = q16_block_idot((const void *)(wr + b * bs),
				q16_query(a->q + b * TXL_QK));
			__m128i h = _mm_add_epi32(_mm256_castsi256_si128(p),
						  _mm256_extracti128_si256(p, 1));

			h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
			h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
			acc += (float)_mm_cvtsi128_si32(h) *
				(_cvtsh_ss((unsigned short)q8_scale_bits(wr + b * bs)) *
				 a->d[b]);
		}
		y[r] = acc;
	}
}

#endif /* TXL_KERNELS_Q16_H */
