/* SPDX-License-Identifier: MIT */
/*
 * txl-products.c - matrix products: the matrix-vector products of
 * generation on libtxl's own kernels, and sgemm for segments.  The only
 * place that calls BLAS.
 *
 * Weights stay in PyTorch's (out_features, in_features) row-major layout
 * and in the dtype of the file.  A matrix-vector product (generation: one
 * row of activations, bound by reading the weights once per token) runs
 * the kernels of txl-kernels.h, rows split over the thread pool; against
 * a block type's weights the activations are quantized per block first,
 * so that the kernels take integer dot products (the type's act in the
 * traits table of txl-types.h).  A
 * matrix-matrix product (segments: scoring, prompts) is sgemm, its output
 * columns split over the pool, OpenBLAS itself kept to one thread (see
 * txl-pool.c); compact weights are widened to F32 a block of rows at a
 * time into the thread's own buffer first, which costs one pass over the
 * weights per segment, against the M-fold reuse of sgemm.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "txl-kernels.h"
#include "txl-pool.h"
#include "txl-products.h"
#include "txl-repack.h"
#include "txl-types.h"

/* OpenBLAS runs on one thread: the pool splits the sgemm calls (set once,
 * before the first; the setting is the process's). */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void
blas_one_thread(void)
{
	openblas_set_num_threads(1);
}

/* What txl_blas_info() reports (txl.h): OpenBLAS's build and the kernels
 * it chose for this CPU, read once. */
static char blas_info[512];

static void
describe_blas(void)
{
	snprintf(blas_info, sizeof(blas_info), "%s (core %s)",
		 openblas_get_config(), openblas_get_corename());
}

const char *
txl_blas_info(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, describe_blas);
	return blas_info;
}

/* ---- a thread's scratch buffer (widened weights, partial sums) ---- */

/* Two buffers per thread: TASK for the work of pool tasks (widened
 * weights, partial sums), OPERAND for an operand widened or quantized
 * before a task runs (a compact V, the activations for Q8_0 weights). */
enum { SCRATCH_TASK, SCRATCH_OPERAND, N_SCRATCH };

static pthread_key_t scratch_key[N_SCRATCH];
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

struct scratch {
	size_t n;
	float f[];
};

static void
scratch_init(void)
{
	for (int i = 0; i < N_SCRATCH; i++)
		pthread_key_create(&scratch_key[i], free);
}

/* n floats of this thread's buffer `which`, 64-byte aligned, kept for the
 * next call; NULL if out of memory. */
static float *
thread_scratch(int which, size_t n)
{
	struct scratch *s;

	pthread_once(&scratch_once, scratch_init);
	s = pthread_getspecific(scratch_key[which]);
	if (!s || s->n < n) {
		free(s);
		/* the header takes 64 bytes so that f stays aligned */
		s = aligned_alloc(64, 64 + (n * sizeof(float) + 63) / 64 * 64);
		pthread_setspecific(scratch_key[which], s);
		if (!s)
			return NULL;
		s->n = n;
	}
	return (float *)(void *)((char *)s + 64);
}

/* ---- matrix-vector: y[N] = W[N, K] . x (rows `ld` bytes apart) ---- */

struct gemv {
	struct txl_chunks rows;
	const struct txl_type_kernels *k;
	struct txl_act x;	/* in the form the products take */
	enum txl_dtype dt;
	float *y;
	const uint8_t *w;
	const uint8_t *il;	/* W interleaved, read by k->dot_il, or NULL */
	size_t ld;
	int K;
	bool accumulate;
};

/* y[n] = rows [r, r + n) of W . x; r is a multiple of TXL_IL. */
static void
gemv_rows(const struct gemv *g, float *y, int r, int n)
{
	if (g->il) {
		const uint8_t *il = g->il + txl_il_bytes(g->dt, r, g->K);
		const int full = n / TXL_IL;
		float tail[TXL_IL];

		g->k->dot_il(y, il, full, &g->x.q8, g->K);
		if (full * TXL_IL < n) {
			/* the matrix's last group: its padding rows into
			 * tail */
			g->k->dot_il(tail, il + txl_il_bytes(g->dt,
							     full * TXL_IL,
							     g->K),
				     1, &g->x.q8, g->K);
			memcpy(y + full * TXL_IL, tail,
			       sizeof(float) * (size_t)(n - full * TXL_IL));
		}
	} else {
		txl_dot_act(g->k, y, g->w + (size_t)r * g->ld, g->ld, &g->x, n,
			    g->K);
	}
}

static void
gemv_task(void *p, int ith, int nth)
{
	struct gemv *g = p;
	float part[256];
	int lo, hi;

	while (txl_chunks_take(&g->rows, &lo, &hi)) {
		if (!g->accumulate) {
			gemv_rows(g, g->y + lo, lo, hi - lo);
			continue;
		}
		for (int r = lo; r < hi; r += 256) {
			int n = hi - r < 256 ? hi - r : 256;
			gemv_rows(g, part, r, n);
			for (int i = 0; i < n; i++)
				g->y[r + i] += part[i];
		}
	}
}

/* The activations in the form the type's products take (its act):
 * quantized once for all the rows, into the caller's OPERAND buffer (for
 * int8 blocks: per block a scale and an offset, then the K int8 values);
 * out of memory, as floats. */
static void
take_activations(struct gemv *g, const float *x)
{
	const enum txl_act_type at = txl_type(g->dt)->act;
	float *buf = at == TXL_ACT_F32 ? NULL :
		thread_scratch(SCRATCH_OPERAND, txl_act_floats(at, g->K));

	g->x = txl_act_view(buf ? at : TXL_ACT_F32, buf, x, g->K);
	txl_act_quantize(&g->x, x, g->K);
}

/* y[N] = W . x, W's rows ld bytes apart (il: W interleaved, or NULL) */
static void
gemv(float *y, const void *w, const void *il, enum txl_dtype dt, size_t ld,
     const float *x, int N, int K, bool accumulate)
{
	struct gemv g = {
		.k = txl_type_kernels(dt), .dt = dt, .y = y, .w = w, .ld = ld,
		.K = K, .accumulate = accumulate,
	};
	double macs = (double)N * K;

	take_activations(&g, x);
	/* the interleaved copy, where there is one and the activations are
	 * the int8 blocks its kernel takes */
	if (il && g.k->dot_il && g.x.type == TXL_ACT_Q8)
		g.il = il;

	/* rows in multiples of TXL_IL (an interleaved group; 4 rows are
	 * the other kernels' unit), enough of them to be worth a chunk */
	txl_chunks_init(&g.rows, N, TXL_IL, txl_pool_threads_for(macs));
	txl_pool_run_for(gemv_task, &g, macs);
}

/* cblas_sgemm into a block of out (rows x cols, rows ldo apart) that
 * beta 0 overwrites: the block zeroed here and sgemm told to add to it.
 * OpenBLAS otherwise clears C first in a pass of its own, element by
 * element when C is a block of a wider matrix. */
static void
sgemm_block(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int rows, int cols,
	    int K, float alpha, const float *a, int lda, const float *b,
	    int ldb, float beta, float *out, int ldo)
{
	if (beta == 0.0f) {
		for (int r = 0; r < rows; r++)
			memset(out + (size_t)r * ldo, 0,
			       sizeof(float) * (size_t)cols);
		beta = 1.0f;
	}
	cblas_sgemm(CblasRowMajor, ta, tb, rows, cols, K, alpha, a, lda, b,
		    ldb, beta, out, ldo);
}

/* ---- matrix-matrix: out[M, N] (ldo) = a[M, K] (lda) . W[N, K]^T
 * (+ out if beta is 1) ---- */

struct gemm {
	struct txl_chunks part;	/* of N (rows of W), or of M if split_m */
	bool split_m;
	float *out;
	int ldo;
	const float *a;
	int lda;
	const uint8_t *w;	/* rows ldw bytes apart */
	enum txl_dtype dt;
	size_t ldw;
	int M, N, K;
	float beta;
};

/* Rows [lo, hi) of W, widened into this thread's buffer if compact. */
static void
gemm_cols(const struct gemm *g, int lo, int hi)
{
	const struct txl_type_kernels *k = txl_type_kernels(g->dt);
	const uint8_t *w = g->w + (size_t)lo * g->ldw;
	float *buf;

	if (g->dt == TXL_F32) {
		sgemm_block(CblasNoTrans, CblasTrans, g->M, hi - lo, g->K,
			    1.0f, g->a, g->lda, (const float *)(const void *)w,
			    (int)(g->ldw / sizeof(float)), g->beta, g->out + lo,
			    g->ldo);
		return;
	}
	buf = thread_scratch(SCRATCH_TASK, (size_t)(hi - lo) * g->K);
	if (!buf) {
		/* out of memory for the buffer: one dot product at a time */
		for (int m = 0; m < g->M; m++) {
			for (int r = lo; r < hi; r++) {
				float v, *o = g->out + (size_t)m * g->ldo + r;
				k->dot(&v, g->w + (size_t)r * g->ldw, g->ldw,
				       g->a + (size_t)m * g->lda, 1, g->K);
				*o = g->beta * *o + v;
			}
		}
		return;
	}
	for (int r = 0; r < hi - lo; r++)
		k->widen(buf + (size_t)r * g->K, w + (size_t)r * g->ldw,
			 (size_t)g->K);
	sgemm_block(CblasNoTrans, CblasTrans, g->M, hi - lo, g->K, 1.0f, g->a,
		    g->lda, buf, g->K, g->beta, g->out + lo, g->ldo);
}

static void
gemm_task(void *p, int ith, int nth)
{
	struct gemm *g = p;
	int lo, hi;

	while (txl_chunks_take(&g->part, &lo, &hi)) {
		if (!g->split_m) {
			gemm_cols(g, lo, hi);
			continue;
		}
		/* rows [lo, hi) of a and out; W is F32 */
		sgemm_block(CblasNoTrans, CblasTrans, hi - lo, g->N, g->K,
			    1.0f, g->a + (size_t)lo * g->lda, g->lda,
			    (const float *)(const void *)g->w,
			    (int)(g->ldw / sizeof(float)), g->beta,
			    g->out + (size_t)lo * g->ldo, g->ldo);
	}
}

static void
gemm(float *out, int ldo, const float *a, int lda, const void *w,
     enum txl_dtype dt, size_t ldw, int M, int N, int K, bool accumulate)
{
	struct gemm g = {
		.out = out, .ldo = ldo, .a = a, .lda = lda, .w = w, .dt = dt,
		.ldw = ldw, .M = M, .N = N, .K = K,
		.beta = accumulate ? 1.0f : 0.0f,
	};
	double macs = (double)M * N * K;
	int nth = txl_pool_threads_for(macs);

	pthread_once(&blas_once, blas_one_thread);
	/* split the longer side; compact weights always by their rows, so
	 * that each is widened once */
	g.split_m = dt == TXL_F32 && M > N;
	if (g.split_m) {
		txl_chunks_init_per(&g.part, M, 16, nth, 1);
	} else {
		/* compact: blocks of rows small enough to stay in cache */
		txl_chunks_init_per(&g.part, N, 16, nth, 1);
		if (dt != TXL_F32) {
			int cap = (65536 / (K > 0 ? K : 1)) / 16 * 16;
			if (cap < 16)
				cap = 16;
			if (g.part.size > cap)
				g.part.size = cap;
		}
	}
	txl_pool_run_for(gemm_task, &g, macs);
}

/* ---- y[N] = a[K] . b[K, N] (rows ldb bytes apart): the weighted sum
 * of rows ---- */

#define MAX_PARTS 256

struct axpy {
	struct txl_chunks rows;
	txl_axpy_rows_fn fn;
	const float *a;
	const uint8_t *b;
	size_t ldb;
	int N;
	float *y;
	float *part[MAX_PARTS];	/* each thread's sum (thread 0's is y) */
};

static void
axpy_task(void *p, int ith, int nth)
{
	struct axpy *x = p;
	float *acc;
	int lo, hi;

	if (ith >= MAX_PARTS)
		return;		/* the others take the rows */
	acc = ith == 0 ? x->y : thread_scratch(SCRATCH_TASK, (size_t)x->N);
	x->part[ith] = acc;
	if (!acc)
		return;
	memset(acc, 0, sizeof(float) * (size_t)x->N);
	while (txl_chunks_take(&x->rows, &lo, &hi))
		x->fn(acc, x->a + lo, x->b + (size_t)lo * x->ldb, x->ldb,
		      hi - lo, x->N);
}

static void
axpy(float *y, const float *a, const void *b, enum txl_dtype dt, size_t ldb,
     int K, int N)
{
	struct axpy x = {
		.fn = txl_type_kernels(dt)->axpy_rows, .a = a, .b = b, .ldb = ldb,
		.N = N, .y = y,
	};
	double macs = (double)K * N;
	int nth = txl_pool_threads_for(macs);

	txl_chunks_init(&x.rows, K, 16, nth);
	if (nth == 1) {
		axpy_task(&x, 0, 1);
		return;
	}
	txl_pool_run(axpy_task, &x);
	for (int t = 1; t < nth && t < MAX_PARTS; t++)
		if (x.part[t])
			for (int i = 0; i < N; i++)
				y[i] += x.part[t][i];
}

/* ---- the entry points ---- */

/* out = a . w^T on w's packed copy (txl-gemm.h), if the product is one
 * that takes it: true if done. */
static bool
packed_mul(float *out, const float *a, int M, const struct txl_mat *w,
	   bool accumulate, enum txl_compute compute)
{
	const bool bf16 = compute == TXL_COMPUTE_BF16 && w->dtype == TXL_BF16;
	const struct txl_packed *p;

	if (!w->pack || (M < TXL_PACK_MIN_ROWS && !bf16))
		return false;
	p = txl_pack_get(w->pack, w->dtype, w->data, w->rows, w->cols);
	return p && txl_gemm_packed(out, w->rows, a, w->cols, M, p, bf16,
				    accumulate);
}

void
txl_mat_mul(float *out, const float *a, int M, const struct txl_mat *w,
	    bool accumulate, enum txl_compute compute)
{
	/* out[M, N] = a[M, K] . w[N, K]^T */
	const int N = w->rows, K = w->cols;
	const size_t ld = txl_row_bytes(w->dtype, K);

	if (M == 1)
		gemv(out, w->data, w->il, w->dtype, ld, a, N, K, accumulate);
	else if (!packed_mul(out, a, M, w, accumulate, compute))
		gemm(out, N, a, K, w->data, w->dtype, ld, M, N, K, accumulate);
}

void
txl_mat_mul_float(float *out, const float *a, int M, const struct txl_mat *w,
		  bool accumulate, enum txl_compute compute)
{
	if (packed_mul(out, a, M, w, accumulate, compute))
		return;
	if (M == 1 && txl_type(w->dtype)->act == TXL_ACT_F32) {
		txl_mat_mul(out, a, M, w, accumulate, TXL_COMPUTE_F32);
		return;
	}
	gemm(out, w->rows, a, w->cols, w->data, w->dtype,
	     txl_row_bytes(w->dtype, w->cols), M, w->rows, w->cols,
	     accumulate);
}

void
txl_mat_row(float *out, const struct txl_mat *w, int row)
{
	const size_t ld = txl_row_bytes(w->dtype, w->cols);

	TXL_ASSERT(row >= 0 && row < w->rows);
	txl_type_kernels(w->dtype)->widen(out, (const uint8_t *)w->data +
					  (size_t)row * ld, (size_t)w->cols);
}

void
txl_gemm_nt_dt(float *out, int ldo, const float *a, int lda, const void *b,
	       enum txl_dtype dt, int ldb, int M, int K, int N)
{
	/* out[M,N] = a[M,K] . b[N,K]^T */
	const size_t ld = txl_row_bytes(dt, ldb);

	if (M == 1)
		gemv(out, b, NULL, dt, ld, a, N, K, false);
	else
		gemm(out, ldo, a, lda, b, dt, ld, M, N, K, false);
}

struct gemm_nn {
	struct txl_chunks part;	/* of M */
	float *out;
	const float *a, *b;
	int ldo, lda, ldb, K, N;
	float alpha, beta;
	bool trans_a;		/* a is [K, M] */
};

static void
gemm_nn_task(void *p, int ith, int nth)
{
	struct gemm_nn *g = p;
	int lo, hi;

	while (txl_chunks_take(&g->part, &lo, &hi))
		sgemm_block(g->trans_a ? CblasTrans : CblasNoTrans,
			    CblasNoTrans, hi - lo, g->N, g->K, g->alpha,
			    g->trans_a ? g->a + lo : g->a + (size_t)lo * g->lda,
			    g->lda, g->b, g->ldb, g->beta,
			    g->out + (size_t)lo * g->ldo, g->ldo);
}

/* out[M,N] = alpha op(a) . b + beta out, rows of out split over the pool */
static void
gemm_rows(float *out, int ldo, const float *a, int lda, bool trans_a,
	  const float *b, int ldb, int M, int K, int N, float alpha,
	  float beta)
{
	struct gemm_nn g = {
		.out = out, .a = a, .b = b, .ldo = ldo, .lda = lda, .ldb = ldb,
		.K = K, .N = N, .alpha = alpha, .beta = beta,
		.trans_a = trans_a,
	};
	double macs = (double)M * N * K;

	pthread_once(&blas_once, blas_one_thread);
	txl_chunks_init(&g.part, M, 16, txl_pool_threads_for(macs));
	txl_pool_run_for(gemm_nn_task, &g, macs);
}

void
txl_gemm_nn(float *out, int ldo, const float *a, int lda, const float *b,
	    int ldb, int M, int K, int N)
{
	txl_gemm_nn_dt(out, ldo, a, lda, b, TXL_F32, ldb, M, K, N);
}

void
txl_gemm_nn_dt(float *out, int ldo, const float *a, int lda, const void *b,
	       enum txl_dtype dt, int ldb, int M, int K, int N)
{
	/* out[M,N] = a[M,K] . b[K,N] */
	const size_t ld = txl_row_bytes(dt, ldb);
	const float *bf = b;

	if (M == 1) {
		axpy(out, a, b, dt, ld, K, N);
		return;
	}
	if (dt != TXL_F32) {
		/* K rows of N values, widened once for all the rows of a */
		float *buf = thread_scratch(SCRATCH_OPERAND, (size_t)K * N);
		if (!buf) {
			for (int m = 0; m < M; m++)
				axpy(out + (size_t)m * ldo, a + (size_t)m * lda,
				     b, dt, ld, K, N);
			return;
		}
		for (int k = 0; k < K; k++)
			txl_widen(buf + (size_t)k * N, (const uint8_t *)b +
				  (size_t)k * ld, dt, (size_t)N);
		bf = buf;
		ldb = N;
	}
	gemm_rows(out, ldo, a, lda, false, bf, ldb, M, K, N, 1.0f, 0.0f);
}

void
txl_gemm_tn_acc(float *out, int ldo, const float *a, int lda, const float *b,
		int ldb, int M, int K, int N, float alpha)
{
	/* out[M,N] += alpha * a[K,M]^T . b[K,N] */
	gemm_rows(out, ldo, a, lda, true, b, ldb, M, K, N, alpha, 1.0f);
}
