/* SPDX-License-Identifier: MIT */
/*
 * txl-rows.c - the products of a batch's streams of one token
 * (txl-rows.h).
 *
 * A stream of one token reads every weight once per token; N of them
 * stepped together read each weight matrix once for the N.  Each row
 * must still get the numbers it gets alone (a sample is the same
 * whatever the number of samples beside it), so these products do what
 * the matrix-vector product of txl-products.c does for one row, for
 * every row: the activations quantized per row for the types that take
 * int8 blocks (the same quantizer), the interleaved copy where that
 * product reads it, the rows of W split over the pool in chunks of whole
 * interleaved groups, and per chunk the kernels of several rows
 * (dot_multi, dot_il_multi: each row the floats of the one-row kernel).
 */
#include <stdatomic.h>
#include <string.h>

#include "txl-kernels.h"
#include "txl-pool.h"
#include "txl-rows.h"
#include "txl-types.h"

size_t
txl_rows_act_floats(int n, int K)
{
	return (size_t)n * txl_act_floats(TXL_ACT_Q8, K);
}

struct each {
	struct txl_chunks rows;
	const struct txl_type_kernels *k;
	enum txl_dtype dt;
	const uint8_t *w;
	const uint8_t *il;	/* the interleaved copy, read by dot_il_multi,
				   or NULL */
	size_t ld;
	int M, K;
	float *const *y;
	const float *const *x;	/* floats, or */
	struct txl_q8_act *a;	/* int8 blocks (NULL: floats), which
					   the task quantizes first: rows
					   handed out from q_next, q_done of
					   them done */
	atomic_int q_next, q_done;
};

/* Rows [lo, hi) of W (lo a multiple of TXL_IL) against rows
 * [m0, m0 + M) of activations, M <= TXL_ROWS_MAX. */
static void
each_block(const struct each *e, int m0, int M, int lo, int hi)
{
	const struct txl_type_kernels *k = e->k;
	float *y[TXL_ROWS_MAX];

	for (int m = 0; m < M; m++)
		y[m] = e->y[m0 + m] + lo;
	if (e->il) {
		const int full = (hi - lo) / TXL_IL;
		const uint8_t *il = e->il + txl_il_bytes(e->dt, lo, e->K);

		k->dot_il_multi(y, il, full, e->a + m0, M, e->K);
		if (full * TXL_IL < hi - lo) {
			/* the matrix's last group: its padding rows into
			 * tail */
			float tail[TXL_ROWS_MAX][TXL_IL], *t[TXL_ROWS_MAX];

			for (int m = 0; m < M; m++)
				t[m] = tail[m];
			k->dot_il_multi(t, il + txl_il_bytes(e->dt, full *
							     TXL_IL, e->K),
					1, e->a + m0, M, e->K);
			for (int m = 0; m < M; m++)
				memcpy(y[m] + full * TXL_IL, tail[m],
				       sizeof(float) *
				       (size_t)(hi - lo - full * TXL_IL));
		}
		return;
	}
	const uint8_t *w = e->w + (size_t)lo * e->ld;
	if (e->a) {
		for (int m = 0; m < M; m++)
			k->dot_q8(y[m], w, e->ld, &e->a[m0 + m], hi - lo, e->K);
	} else if (k->dot_multi) {
		k->dot_multi(y, w, e->ld, e->x + m0, M, hi - lo, e->K);
	} else {
		for (int m = 0; m < M; m++)
			k->dot(y[m], w, e->ld, e->x[m0 + m], hi - lo, e->K);
	}
}

static void
each_task(void *p, int ith, int nth)
{
	struct each *e = p;
	int lo, hi;

	(void)ith;
	(void)nth;
	if (e->a) {
		const txl_quantize_q8_fn quantize = txl_kernels()->quantize_q8;
		int m;

		/* each row quantized as the matrix-vector product quantizes
		 * it (txl_act_quantize), before any product */
		while ((m = atomic_fetch_add_explicit(&e->q_next, 1,
				memory_order_relaxed)) < e->M) {
			quantize(&e->a[m], e->x[m], e->K);
			atomic_fetch_add_explicit(&e->q_done, 1,
						  memory_order_release);
		}
		for (unsigned w = 0; atomic_load_explicit(&e->q_done,
				memory_order_acquire) < e->M; w++)
			txl_pool_spin_wait(w);
	}
	while (txl_chunks_take(&e->rows, &lo, &hi))
		for (int m0 = 0; m0 < e->M; m0 += TXL_ROWS_MAX)
			each_block(e, m0, e->M - m0 < TXL_ROWS_MAX ?
				   e->M - m0 : TXL_ROWS_MAX, lo, hi);
}

void
txl_mul_each(float *const *y, const float *const *x, int M,
	     const struct txl_mat *w, float *act)
{
	const int N = w->rows, K = w->cols;
	const enum txl_act_type at = txl_type(w->dtype)->act;
	struct txl_q8_act a[TXL_EACH_MAX];
	struct each e = {
		.k = txl_type_kernels(w->dtype), .dt = w->dtype, .w = w->data,
		.ld = txl_row_bytes(w->dtype, K), .M = M, .K = K, .y = y,
		.x = x,
	};
	const double macs = (double)M * N * K;

	TXL_ASSERT(M >= 1 && M <= TXL_EACH_MAX);
	if (M == 1) {
		/* (one row: the same in either compute) */
		txl_mat_mul(y[0], x[0], 1, w, false, TXL_COMPUTE_F32);
		return;
	}
	if (at == TXL_ACT_Q8) {
		/* each row's int8 blocks (quantized by each_task) */
		for (int m = 0; m < M; m++)
			a[m] = txl_act_view(TXL_ACT_Q8, act + (size_t)m *
				txl_act_floats(TXL_ACT_Q8, K), x[m], K).q8;
		e.a = a;
		/* the interleaved copy where that product reads it */
		if (w->il && e.k->dot_il)
			e.il = w->il;
	}
	atomic_init(&e.q_next, 0);
	atomic_init(&e.q_done, 0);
	txl_chunks_init(&e.rows, N, TXL_IL, txl_pool_threads_for(macs));
	txl_pool_run_for(each_task, &e, macs);
}

void
txl_rows_mul(float *out, const float *a, const struct txl_rows *r,
	     const struct txl_mat *w)
{
	const size_t N = (size_t)w->rows, K = (size_t)w->cols;

	for (int m0 = 0; m0 < r->n_one; m0 += TXL_EACH_MAX) {
		const int M = r->n_one - m0 < TXL_EACH_MAX ? r->n_one - m0
			: TXL_EACH_MAX;
		float *y[TXL_EACH_MAX];
		const float *x[TXL_EACH_MAX];

		for (int m = 0; m < M; m++) {
			y[m] = out + (size_t)(m0 + m) * N;
			x[m] = a + (size_t)(m0 + m) * K;
		}
		txl_mul_each(y, x, M, w, r->act);
	}
	if (r->n > r->n_one)
		txl_mat_mul(out + (size_t)r->n_one * N,
			    a + (size_t)r->n_one * K, r->n - r->n_one, w,
			    false, r->compute);
}
