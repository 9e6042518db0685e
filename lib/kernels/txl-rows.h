/* SPDX-License-Identifier: MIT */
/*
 * txl-rows.h - the products of the rows of a batch's step
 * (txl-rows.c): a stream of one token computes each product exactly as
 * it does alone (a matrix-vector product, txl_mat_mul() of one row), its
 * row against each weight matrix read once for all such rows
 * (dot_multi, dot_il_multi); the segments of streams of several tokens
 * go through txl_mat_mul() together.  Not installed.
 */
#ifndef TXL_ROWS_H
#define TXL_ROWS_H

#include <stddef.h>

#include "txl-products.h"

/* The most rows txl_mul_each() takes in one call. */
#define TXL_EACH_MAX 64

/* The rows of a forward pass: n in all, of which the first n_one are
 * streams of one token each, and their scratch. */
struct txl_rows {
	int n, n_one;
	enum txl_compute compute;	/* of BF16 weights (txl.h) */
	float *act;	/* txl_rows_act_floats(n_one, K) floats for the
			   widest K: their activations in int8 blocks */
};

/* Floats of scratch for the activations of n rows of K values. */
size_t txl_rows_act_floats(int n, int K);

/* out[n, w.rows] = a[n, w.cols] . w^T: each of the first n_one rows the
 * floats of txl_mat_mul() of that row alone, the other rows txl_mat_mul()
 * of them together. */
void txl_rows_mul(float *out, const float *a, const struct txl_rows *r,
		  const struct txl_mat *w);

/* y[m][w.rows] = w . x[m][w.cols] for m < M <= TXL_EACH_MAX: each the
 * floats of txl_mat_mul(y[m], x[m], 1, w, false), the weights read once
 * for all of them, their rows split over the pool; act: scratch of
 * txl_rows_act_floats(M, w.cols) floats. */
void txl_mul_each(float *const *y, const float *const *x, int M,
		  const struct txl_mat *w, float *act);

#endif /* TXL_ROWS_H */
