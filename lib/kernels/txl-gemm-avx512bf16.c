/* SPDX-License-Identifier: MIT */
/*
 * txl-gemm-avx512bf16.c - the BF16 products of segments by vdpbf16ps
 * (AVX512_BF16: Cooper Lake, Sapphire Rapids, Zen 4 and later), compiled
 * with that flag and called only on CPUs that have it (txl-gemm.c
 * chooses).  The rest of the set is AVX-512's (txl-gemm-avx512.c), whose
 * tile it shares: 8 rows by 48 columns, each step a pair of k, so that
 * an instruction takes twice the multiply-adds of vfmadd231ps at the
 * same rate.
 *
 * vdpbf16ps adds to each lane of the sum the products of a pair of BF16
 * values (exact in float), rounding to nearest even, with subnormal
 * inputs and results flushed to zero.
 */
#include <immintrin.h>

#include "txl-gemm-avx512.h"

#define BF16_LOAD(p) ((__m512bh)_mm512_load_si512(p))
#define BF16_BCAST(p) ((__m512bh)_mm512_set1_epi32((int)*(p)))
#define BF16_MADD(s, x, v) _mm512_dpbf16_ps(s, x, v)

static void
bf16_tile(float *c, size_t ldc, const uint32_t *a, size_t lda,
	  const uint32_t *b, int kp, int m, int n, bool add)
{
	__m512 acc[MR][NV];

	TXL_GEMM_TILE(uint32_t, __m512bh, _mm512_setzero_ps,
		      BF16_LOAD, BF16_BCAST, BF16_MADD, acc, a, lda, b, kp, m);
	STORE_TILE(acc, c, ldc, m, n, add);
}

/* vcvtne2ps2bf16 rounds to nearest even (flushing subnormal inputs, as
 * vdpbf16ps would): 32 values a step, in order, so that value k is
 * half k % 2 of pair k / 2 */
static void
to_pairs(uint32_t *dst, size_t ldd, const float *a, size_t lda, int M, int K)
{
	for (int i = 0; i < M; i++) {
		const float *x = a + (size_t)i * lda;
		uint16_t *d = (uint16_t *)(void *)(dst + (size_t)i * ldd);
		int k = 0;

		for (; k + 32 <= K; k += 32)
			_mm512_storeu_si512(d + k, (__m512i)_mm512_cvtne2ps_pbh(
				_mm512_loadu_ps(x + k + 16),
				_mm512_loadu_ps(x + k)));
		if (k < K) {
			/* the tail, to the end of its last pair */
			const int n = K - k, w = (n + 1) / 2 * 2;
			const __m512bh v = _mm512_cvtne2ps_pbh(
				_mm512_maskz_loadu_ps(
					n > 16 ? (__mmask16)((1u << (n - 16)) - 1)
					       : 0, x + k + 16),
				_mm512_maskz_loadu_ps(
					n >= 16 ? 0xffff
						: (__mmask16)((1u << n) - 1),
					x + k));
			_mm512_mask_storeu_epi16(d + k,
				       w >= 32 ? 0xffffffffu
					       : (__mmask32)((1u << w) - 1),
				       (__m512i)v);
		}
	}
}

const struct txl_gemm_kernels txl_gemm_avx512bf16 = {
	.name = "avx512bf16", .mr = MR, .nr = NR, .f32 = txl_gemm_avx512_f32,
	.bf16 = bf16_tile, .pairs = to_pairs,
	.widen = {
		[TXL_PACK_F16] = txl_gemm_avx512_widen_f16,
		[TXL_PACK_BF16] = txl_gemm_avx512_widen_bf16,
		[TXL_PACK_Q8] = txl_gemm_avx512_widen_q8,
	},
};
