/* SPDX-License-Identifier: MIT */
/*
 * txl-gemm-avx2.c - the kernels of the products of segments for AVX2 with
 * FMA and F16C, compiled with those flags and called only on CPUs that
 * have them (txl-gemm.c chooses).
 *
 * A tile is 6 rows by 16 columns: 12 accumulators of 8 floats, two loads
 * of the panel and six broadcasts of a's values for each k (15 of the 16
 * registers), 12 independent multiply-adds a step for the two units'
 * latency of 4 cycles (Haswell to Zen 3).
 */
#include <immintrin.h>
#include <string.h>

#include "txl-gemm.h"

enum { MR = 6, NV = 2, NR = 8 * NV };

#define F32_MADD(s, x, v) _mm256_fmadd_ps(x, v, s)

static void
f32_tile(float *c, size_t ldc, const float *a, size_t lda, const float *b,
	 int kc, int m, int n, bool add)
{
	__m256 acc[MR][NV];

	TXL_GEMM_TILE(float, __m256, _mm256_setzero_ps, _mm256_load_ps,
		      _mm256_broadcast_ss, F32_MADD, acc, a, lda, b, kc, m);
	for (int i = 0; i < MR && i < m; i++) {
		float *p = c + (size_t)i * ldc;

		if (n == NR) {
			for (int j = 0; j < NV; j++) {
				__m256 v = acc[i][j];
				if (add)
					v = _mm256_add_ps(v, _mm256_loadu_ps(
						p + 8 * j));
				_mm256_storeu_ps(p + 8 * j, v);
			}
			continue;
		}
		/* the matrix's last columns */
		float t[NR];
		_mm256_storeu_ps(t, acc[i][0]);
		_mm256_storeu_ps(t + 8, acc[i][1]);
		for (int j = 0; j < n; j++)
			p[j] = add ? p[j] + t[j] : t[j];
	}
}

static void
widen_f16(float *dst, const void *panel, int k0, int kc, int nr)
{
	const uint16_t *p = (const uint16_t *)panel + (size_t)k0 * nr;
	const size_t n = (size_t)kc * nr;	/* a multiple of 8 */

	for (size_t i = 0; i < n; i += 8)
		_mm256_store_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(
			(const __m128i *)(const void *)(p + i))));
}

/* a pair row's low halves (k even) by a shift, its high ones by a mask */
static void
widen_bf16(float *dst, const void *panel, int k0, int kc, int nr)
{
	const uint32_t *p = (const uint32_t *)panel + (size_t)(k0 / 2) * nr;
	const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);

	for (int k = 0; k < kc; k += 2, p += nr, dst += 2 * nr)
		for (int j = 0; j < nr; j += 8) {
			const __m256i v = _mm256_load_si256(
				(const __m256i *)(const void *)(p + j));

			_mm256_store_ps(dst + j, _mm256_castsi256_ps(
				_mm256_slli_epi32(v, 16)));
			if (k + 1 < kc)
				_mm256_store_ps(dst + nr + j,
						_mm256_castsi256_ps(
						_mm256_and_si256(v, hi)));
		}
}

static void
widen_q8(float *dst, const void *panel, int k0, int kc, int nr)
{
	const uint8_t *blk = (const uint8_t *)panel +
		(size_t)(k0 / TXL_QK) * txl_pack_q8_block(nr);

	for (int b = 0; b < kc / TXL_QK; b++, blk += txl_pack_q8_block(nr)) {
		const float *sc = (const float *)(const void *)blk;
		const int8_t *q = (const int8_t *)(blk + sizeof(float) * nr);

		for (int j = 0; j < nr; j += 8) {
			const __m256 s = _mm256_load_ps(sc + j);

			for (int k = 0; k < TXL_QK; k++) {
				int64_t v;
				memcpy(&v, q + (size_t)k * nr + j, sizeof v);
				_mm256_store_ps(dst + (size_t)k * nr + j,
					_mm256_mul_ps(s, _mm256_cvtepi32_ps(
					_mm256_cvtepi8_epi32(
					_mm_cvtsi64_si128(v)))));
			}
		}
		dst += (size_t)TXL_QK * nr;
	}
}

const struct txl_gemm_kernels txl_gemm_avx2 = {
	.name = "avx2", .mr = MR, .nr = NR, .f32 = f32_tile,
	.widen = {
		[TXL_PACK_F16] = widen_f16,
		[TXL_PACK_BF16] = widen_bf16,
		[TXL_PACK_Q8] = widen_q8,
	},
};
