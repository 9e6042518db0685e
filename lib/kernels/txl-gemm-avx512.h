/* SPDX-License-Identifier: MIT */
/*
 * txl-gemm-avx512.h - what the AVX-512 tiles of the products of segments
 * share (txl-gemm-avx512.c, txl-gemm-avx512bf16.c): the tile's shape and
 * its store.  Not installed.
 */
#ifndef TXL_GEMM_AVX512_H
#define TXL_GEMM_AVX512_H

#include <immintrin.h>

#include "txl-gemm.h"

/* 8 rows by 48 columns: 24 accumulators of 16 floats */
enum { MR = 8, NV = 3, NR = 16 * NV };

/* The mask of the first n (0..16) lanes. */
static inline __mmask16
lanes(int n)
{
	return n >= 16 ? 0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* Stores a tile's accumulators: rows < m, columns < n. */
#define STORE_TILE(acc, c, ldc, m, n, add)                                  \
	do {                                                                \
		for (int i_ = 0; i_ < MR && i_ < (m); i_++) {               \
			for (int j_ = 0; j_ < NV; j_++) {                   \
				const __mmask16 k_ = lanes((n) - 16 * j_);  \
				float *p_ = (c) + (size_t)i_ * (ldc) +      \
					16 * j_;                            \
				__m512 v_ = (acc)[i_][j_];                  \
				if (add)                                    \
					v_ = _mm512_add_ps(v_,              \
						_mm512_maskz_loadu_ps(k_,   \
								      p_)); \
				_mm512_mask_storeu_ps(p_, k_, v_);          \
			}                                                   \
		}                                                           \
	} while (0)

#endif /* TXL_GEMM_AVX512_H */
