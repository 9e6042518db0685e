/* SPDX-License-Identifier: MIT */
/*
 * txl-products.h - weight matrices and matrix products (txl-products.c,
 * the only place that calls BLAS).  Not installed.
 */
#ifndef TXL_PRODUCTS_H
#define TXL_PRODUCTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "txl.h"
#include "txl-dtype.h"
#include "txl-gemm.h"
#include "txl-log.h"
#include "txl-repack.h"
#include "txl-types.h"

/* A weight matrix as the file stores it, in PyTorch's (out_features,
 * in_features) row-major layout: rows x cols, in a type the kernels
 * compute with, used in place (the mapped file) and computed as stored:
 * the kernels widen each value to float exactly and accumulate in float
 * (except the block types against one row of activations, which are
 * quantized for integer dot products: quantize_q8 in txl-kernels.h). */
struct txl_mat {
	enum txl_dtype dtype;
	int rows, cols;
	const void *data;	/* NULL: absent (e.g. no projection) */
	const void *il;		/* block types: the rows interleaved for
				   matrix-vector products (txl_interleave()),
				   or NULL */
	struct txl_pack_slot *pack; /* the model's: where the copy packed
				       for the products of segments is
				       kept (txl-gemm.h), or NULL: none */
};

/* Rows [first, first + n) of w as a matrix of its own (a cluster of an
 * output layer). */
static inline struct txl_mat
txl_mat_rows(const struct txl_mat *w, int first, int n)
{
	const size_t row = txl_row_bytes(w->dtype, w->cols);

	TXL_ASSERT(first >= 0 && n >= 0 && first + n <= w->rows);
	return (struct txl_mat){ .dtype = w->dtype, .rows = n, .cols = w->cols,
				 .data = w->data ? (const uint8_t *)w->data +
					 row * (size_t)first : NULL,
				 /* interleaved groups start at multiples of
				  * TXL_IL rows */
				 .il = w->il && first % TXL_IL == 0
					 ? (const uint8_t *)w->il +
					   txl_il_bytes(w->dtype, first,
							w->cols)
					 : NULL };
}

/* The matrix as F32 floats, for the BLAS calls that need them. */
static inline const float *
txl_mat_f32(const struct txl_mat *w)
{
	TXL_ASSERT(w->dtype == TXL_F32);
	return (const float *)w->data;
}

/* out[M, w.rows] = a[M, w.cols] . w^T (+ out if accumulate): a linear
 * layer without bias, in any weight dtype.  M == 1: the kernels of
 * txl-kernels.h, rows split over the thread pool; M >= TXL_PACK_MIN_ROWS
 * (and every M > 1 of a BF16 product): the kernels of txl-gemm.h on the
 * matrix's packed copy, made on first use; else sgemm (compact weights
 * widened to F32 a block of rows at a time).  compute: how BF16 weights
 * compute when M > 1 (enum txl_compute, txl.h). */
void txl_mat_mul(float *out, const float *a, int M, const struct txl_mat *w,
		 bool accumulate, enum txl_compute compute);
/* txl_mat_mul() with float activations whatever M: one row meets a block
 * type's weights as more rows do (sgemm), not quantized.  For the rows of a
 * segment of several tokens that a product takes a few at a time (the
 * adaptive softmax's tail clusters: the targets that fall in each), so
 * that a segment's result does not depend on how many there are. */
void txl_mat_mul_float(float *out, const float *a, int M,
		       const struct txl_mat *w, bool accumulate,
		       enum txl_compute compute);
/* The rows of a product from which the weights are packed for it: fewer
 * (a short prompt of generation) leave the matrices as they are. */
#define TXL_PACK_MIN_ROWS 32
/* Row @p row of w as floats into out[w.cols] (an embedding lookup). */
void txl_mat_row(float *out, const struct txl_mat *w, int row);
/* out[M,N] (ldo) = a[M,K] (lda) . b[K,N] (ldb). */
void txl_gemm_nn(float *out, int ldo, const float *a, int lda,
		 const float *b, int ldb, int M, int K, int N);
/* out[M,N] (ldo) = a[M,K] (lda) . b[N,K]^T (ldb), and the same as
 * txl_gemm_nn, with b in dtype dt (ldb in values): the attention's
 * products with its K, V or R. */
void txl_gemm_nt_dt(float *out, int ldo, const float *a, int lda,
		    const void *b, enum txl_dtype dt, int ldb, int M, int K,
		    int N);
void txl_gemm_nn_dt(float *out, int ldo, const float *a, int lda,
		    const void *b, enum txl_dtype dt, int ldb, int M, int K,
		    int N);
/* out[M,N] (ldo) += alpha * a[K,M]^T (lda) . b[K,N] (ldb). */
void txl_gemm_tn_acc(float *out, int ldo, const float *a, int lda,
		     const float *b, int ldb, int M, int K, int N, float alpha);

#endif /* TXL_PRODUCTS_H */
