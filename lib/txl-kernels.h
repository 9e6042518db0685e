/* SPDX-License-Identifier: MIT */
/*
 * txl-kernels.h - the SIMD kernels of libtxl and how one set is chosen.
 *
 * Each instruction set has one table of kernels (txl-kernels.c holds the
 * scalar reference, txl-kernels-avx2.c and txl-kernels-avx512.c the
 * vector versions, each compiled for its own target).  txl_kernels()
 * returns the best table the CPU runs, so one binary runs on any x86-64;
 * TXL_ISA=scalar|avx2|avx512 in the environment asks for a lower one (for
 * tests and benchmarks).  The kernels are single-threaded; txl-math.c
 * splits the work over the thread pool (txl-pool.c).  Not installed.
 */
#ifndef TXL_KERNELS_H
#define TXL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "txl-internal.h"

enum txl_isa { TXL_ISA_SCALAR, TXL_ISA_AVX2, TXL_ISA_AVX512, TXL_N_ISA };

/* y[r] = w_r . x for r < n, where w_r = the K weights of row r, rows
 * `ld` bytes apart, in the dtype of the table slot. */
typedef void (*txl_dot_rows_fn)(float *y, const void *w, size_t ld,
				const float *x, int n, int K);
/* dst[n] = src widened to floats (exactly: every stored value is a
 * float); n is a multiple of TXL_QK for Q8_0. */
typedef void (*txl_widen_fn)(float *dst, const void *src, size_t n);
/* dst[n] = src rounded to the dtype (nearest even; F32, F16, BF16). */
typedef void (*txl_narrow_fn)(void *dst, const float *src, size_t n);
/* y[K] += sum_{r < n} a[r] * w_r, rows of w `ld` bytes apart (F32, F16,
 * BF16): attention's probabilities times V. */
typedef void (*txl_axpy_rows_fn)(float *y, const float *a, const void *w,
				 size_t ld, int n, int K);

struct txl_kernels {
	const char *name;	/* "scalar", "avx2", "avx512" */
	txl_dot_rows_fn dot_rows[TXL_N_DTYPES];	/* NULL for U8 */
	txl_widen_fn widen[TXL_N_DTYPES];
	txl_narrow_fn narrow[TXL_N_DTYPES];	/* NULL for U8, Q8_0 */
	txl_axpy_rows_fn axpy_rows[TXL_N_DTYPES]; /* NULL for U8, Q8_0 */
	/* out[i] = exp(x[i] - max) (out may be x, or NULL for the sum
	 * alone); returns the sum, added in double */
	double (*exp_sum)(float *out, const float *x, int n, float max);
	/* the largest of x[n] (-INFINITY for n == 0) */
	float (*max)(const float *x, int n);
};

/* The table in use (chosen once, on first use). */
const struct txl_kernels *txl_kernels(void);
/* The table of one instruction set, or NULL if this CPU (or this build)
 * cannot run it; TXL_ISA_SCALAR always exists. */
const struct txl_kernels *txl_kernels_for(enum txl_isa isa);

/* The vector tables, each in its own file compiled for its target;
 * built on x86-64 only. */
extern const struct txl_kernels txl_kernels_avx2, txl_kernels_avx512;

#endif /* TXL_KERNELS_H */
