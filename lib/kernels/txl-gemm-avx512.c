/* SPDX-License-Identifier: MIT */
/*
 * txl-gemm-avx512.c - the kernels of the products of segments for
 * AVX-512 (F, BW, VL, DQ), compiled with those flags and called only on
 * CPUs that have them (txl-gemm.c chooses).
 *
 * A tile is 8 rows by 48 columns: 24 accumulators of 16 floats, three
 * loads of the panel and eight broadcasts of a's values (folded into the
 * multiply-adds) for each k, so that the 24 independent multiply-adds of
 * a step hide the latency of each (4 cycles, two units on Intel and
 * AMD's double-pumped ones alike): with the panels in cache the scoring
 * shapes run at the core's peak of multiply-adds (bench-kernels).
 */
#include <immintrin.h>
#include <string.h>

#include "txl-gemm-avx512.h"

#define F32_BCAST(p) _mm512_set1_ps(*(p))
#define F32_MADD(s, x, v) _mm512_fmadd_ps(x, v, s)

void
txl_gemm_avx512_f32(float *c, size_t ldc, const float *a, size_t lda,
		    const float *b, int kc, int m, int n, bool add)
{
	__m512 acc[MR][NV];

	TXL_GEMM_TILE(float, __m512, _mm512_setzero_ps, _mm512_load_ps,
		      F32_BCAST, F32_MADD, acc, a, lda, b, kc, m);
	STORE_TILE(acc, c, ldc, m, n, add);
}

void
txl_gemm_avx512_widen_f16(float *dst, const void *panel, int k0, int kc,
			  int nr)
{
	const uint16_t *p = (const uint16_t *)panel + (size_t)k0 * nr;
	const size_t n = (size_t)kc * nr;	/* a multiple of 16 */

	for (size_t i = 0; i < n; i += 16)
		_mm512_store_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(
			(const __m256i *)(const void *)(p + i))));
}

/* a pair row's low halves (k even) by a shift, its high ones by a mask */
void
txl_gemm_avx512_widen_bf16(float *dst, const void *panel, int k0, int kc,
			   int nr)
{
	const uint32_t *p = (const uint32_t *)panel + (size_t)(k0 / 2) * nr;
	const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);

	for (int k = 0; k < kc; k += 2, p += nr, dst += 2 * nr)
		for (int j = 0; j < nr; j += 16) {
			const __m512i v = _mm512_load_si512(p + j);

			_mm512_store_ps(dst + j, _mm512_castsi512_ps(
				_mm512_slli_epi32(v, 16)));
			if (k + 1 < kc)
				_mm512_store_ps(dst + nr + j,
						_mm512_castsi512_ps(
						_mm512_and_si512(v, hi)));
		}
}

void
txl_gemm_avx512_widen_q8(float *dst, const void *panel, int k0, int kc,
			 int nr)
{
	const uint8_t *blk = (const uint8_t *)panel +
		(size_t)(k0 / TXL_QK) * txl_pack_q8_block(nr);

	for (int b = 0; b < kc / TXL_QK; b++, blk += txl_pack_q8_block(nr)) {
		const float *sc = (const float *)(const void *)blk;
		const int8_t *q = (const int8_t *)(blk + sizeof(float) * nr);

		for (int j = 0; j < nr; j += 16) {
			const __m512 s = _mm512_load_ps(sc + j);

			for (int k = 0; k < TXL_QK; k++)
				_mm512_store_ps(dst + (size_t)k * nr + j,
					_mm512_mul_ps(s, _mm512_cvtepi32_ps(
					_mm512_cvtepi8_epi32(_mm_loadu_si128(
					(const __m128i *)(const void *)
					(q + (size_t)k * nr + j))))));
		}
		dst += (size_t)TXL_QK * nr;
	}
}

const struct txl_gemm_kernels txl_gemm_avx512 = {
	.name = "avx512", .mr = MR, .nr = NR, .f32 = txl_gemm_avx512_f32,
	.widen = {
		[TXL_PACK_F16] = txl_gemm_avx512_widen_f16,
		[TXL_PACK_BF16] = txl_gemm_avx512_widen_bf16,
		[TXL_PACK_Q8] = txl_gemm_avx512_widen_q8,
	},
};
