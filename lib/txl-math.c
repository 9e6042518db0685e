/* SPDX-License-Identifier: MIT */
/*
 * txl-math.c - the math of the forward pass: matrix products and the
 * element-wise kernels.  The only place that calls BLAS.
 *
 * Weights stay in PyTorch's (out_features, in_features) row-major layout
 * and in the dtype of the file.  A matrix-vector product (generation: one
 * row of activations, bound by reading the weights once per token) runs
 * the kernels of txl-kernels.h, rows split over the thread pool; against
 * Q8_0 weights the activations are quantized per block first, so that the
 * kernels take integer dot products (quantize_q8).  A
 * matrix-matrix product (segments: scoring, prompts) is sgemm, its output
 * columns split over the pool, OpenBLAS itself kept to one thread (see
 * txl-pool.c); compact weights are widened to F32 a block of rows at a
 * time into the thread's own buffer first, which costs one pass over the
 * weights per segment, against the M-fold reuse of sgemm.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "txl-internal.h"
#include "txl-kernels.h"

/* Below this many multiply-adds a product runs on the calling thread:
 * handing it to the pool costs about a microsecond. */
#define PARALLEL_MIN 32768

int
txl_threads_of(int n)
{
	if (n <= 0)
		n = txl_n_cpus();
	return n < TXL_MAX_THREADS ? n : TXL_MAX_THREADS;
}

void
txl_set_threads(int n)
{
	n = txl_threads_of(n);
	if (n == txl_pool_threads() && n > 1)
		return;
	/* one thread for OpenBLAS: the pool splits the sgemm calls */
	openblas_set_num_threads(1);
	txl_pool_set_threads(n);
	txl_log(TXL_LOG_INFO, "kernels: %s, %d thread%s", txl_kernels()->name,
		txl_pool_threads(), txl_pool_threads() == 1 ? "" : "s");
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

/* ---- splitting work ---- */

/* Chunks of `align` items, about `per` a thread, handed out in order;
 * one thread takes it all in one.  Two a thread rather than four: with
 * 3,800 positions of Q4_0 memory a token ran 3-5% faster side by side on
 * a 2-core Zen 5 (longer streams for the prefetchers, fewer hand-overs);
 * one a thread was no better there, and leaves a late thread's share to
 * wait.  The sgemm calls of matrix products take one a thread: each call
 * packs the activations again, and scoring ran 2-3% faster so (AMD EPYC,
 * avx2). */
struct chunks {
	atomic_int next;
	int n, size;
};

static void
chunks_init_per(struct chunks *c, int n, int align, int nth_hint, int per)
{
	const int parts = nth_hint > 1 ? per * nth_hint : 1;
	int size = (n + parts - 1) / parts;

	size = (size + align - 1) / align * align;
	atomic_init(&c->next, 0);
	c->n = n;
	c->size = size > 0 ? size : align;
}

static void
chunks_init(struct chunks *c, int n, int align, int nth_hint)
{
	chunks_init_per(c, n, align, nth_hint, 2);
}

/* The next chunk [*lo, *hi), or false when none is left. */
static bool
chunks_take(struct chunks *c, int *lo, int *hi)
{
	int i = atomic_fetch_add_explicit(&c->next, c->size,
					  memory_order_relaxed);
	if (i >= c->n)
		return false;
	*lo = i;
	*hi = i + c->size < c->n ? i + c->size : c->n;
	return true;
}

static int
threads_for(double macs)
{
	return macs < PARALLEL_MIN || txl_pool_in_task() ? 1
		: txl_pool_threads();
}

/* Run fn on the pool, or on the caller alone for small work. */
static void
run(txl_task_fn fn, void *ctx, double macs)
{
	if (threads_for(macs) > 1)
		txl_pool_run(fn, ctx);
	else
		fn(ctx, 0, 1);
}

void
txl_pool_run_for(txl_task_fn fn, void *ctx, double macs)
{
	run(fn, ctx, macs);
}

/* ---- matrix-vector: y[N] = W[N, K] . x (rows `ld` bytes apart) ---- */

struct gemv {
	struct chunks rows;
	txl_dot_rows_fn dot;
	txl_dot_rows_q8_fn dot_q8;	/* instead of dot, against xq (Q8_0:
					   dot_rows_q8, Q4_0: dot_rows_q4) */
	txl_dot_il_fn dot_il;		/* instead of dot_q8, on il */
	struct txl_q8_act xq;
	enum txl_dtype dt;
	float *y;
	const uint8_t *w;
	const uint8_t *il;	/* W interleaved (Q8_0, Q4_0), or NULL */
	size_t ld;
	const float *x;
	int K;
	bool accumulate;
};

/* y[n] = rows [r, r + n) of W . x; r is a multiple of TXL_IL. */
static void
gemv_rows(const struct gemv *g, float *y, int r, int n)
{
	const uint8_t *w = g->w + (size_t)r * g->ld;

	if (g->dot_il) {
		const uint8_t *il = g->il + txl_il_bytes(g->dt, r, g->K);
		const int full = n / TXL_IL;
		float tail[TXL_IL];

		g->dot_il(y, il, full, &g->xq, g->K);
		if (full * TXL_IL < n) {
			/* the matrix's last group: its padding rows into
			 * tail */
			g->dot_il(tail, il + txl_il_bytes(g->dt, full * TXL_IL,
							  g->K),
				  1, &g->xq, g->K);
			memcpy(y + full * TXL_IL, tail,
			       sizeof(float) * (size_t)(n - full * TXL_IL));
		}
	} else if (g->dot_q8) {
		g->dot_q8(y, w, g->ld, &g->xq, n, g->K);
	} else {
		g->dot(y, w, g->ld, g->x, n, g->K);
	}
}

static void
gemv_task(void *p, int ith, int nth)
{
	struct gemv *g = p;
	float part[256];
	int lo, hi;

	while (chunks_take(&g->rows, &lo, &hi)) {
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

/* Q8_0 and Q4_0 weights: x quantized once for all the rows, into the
 * caller's OPERAND buffer (per block a scale and an offset, then the K
 * int8 values); out of memory, dot_q8 stays NULL and the float kernel
 * runs. */
static void
quantize_operand(struct gemv *g)
{
	const struct txl_kernels *k = txl_kernels();
	const int nb = g->K / TXL_QK;
	float *buf = thread_scratch(SCRATCH_OPERAND,
				    (size_t)g->K / 4 + 2 * (size_t)nb);

	if (!buf)
		return;
	g->xq.d = buf;
	g->xq.off = (int32_t *)(void *)(buf + nb);
	g->xq.q = (int8_t *)(void *)(buf + 2 * nb);
	k->quantize_q8(&g->xq, g->x, g->K);
	g->dot_q8 = g->dt == TXL_Q4_0 ? k->dot_rows_q4 : k->dot_rows_q8;
	if (g->il)
		g->dot_il = g->dt == TXL_Q4_0 ? k->dot_il_q4 : k->dot_il;
}

/* y[N] = W . x, W's rows ld bytes apart (il: W interleaved, Q8_0 or Q4_0) */
static void
gemv(float *y, const void *w, const void *il, enum txl_dtype dt, size_t ld,
     const float *x, int N, int K, bool accumulate)
{
	struct gemv g = {
		.dot = txl_kernels()->dot_rows[dt], .dt = dt, .y = y, .w = w,
		.il = il, .ld = ld, .x = x, .K = K, .accumulate = accumulate,
	};
	double macs = (double)N * K;

	if (txl_dtype_blocked(dt))
		quantize_operand(&g);

	/* rows in multiples of TXL_IL (an interleaved group; 4 rows are
	 * the other kernels' unit), enough of them to be worth a chunk */
	chunks_init(&g.rows, N, TXL_IL, threads_for(macs));
	run(gemv_task, &g, macs);
}

/* Row i of a group, block b (at blk): its scale at half i of the block,
 * then Q8_0: values 4 j .. 4 j + 3 at bytes (j * TXL_IL + i) * 4;
 * Q4_0: values 8 j + t (t < 4) in the low nibbles of bytes
 * (j * TXL_IL + i) * 4 + t, values 8 j + 4 + t in their high ones. */
static void
interleave_q8(uint8_t *blk, int i, const struct txl_block_q8_0 *q)
{
	memcpy(blk + 2 * i, &q->d, 2);
	for (int j = 0; j < TXL_QK / 4; j++)
		memcpy(blk + TXL_IL_SCALES + (j * TXL_IL + i) * 4,
		       q->qs + 4 * j, 4);
}

static void
interleave_q4(uint8_t *blk, int i, const struct txl_block_q4_0 *q)
{
	uint8_t v[TXL_QK];

	for (int c = 0; c < TXL_QK / 2; c++) {
		v[c] = q->qs[c] & 15;
		v[c + TXL_QK / 2] = q->qs[c] >> 4;
	}
	memcpy(blk + 2 * i, &q->d, 2);
	for (int j = 0; j < TXL_QK / 8; j++)
		for (int t = 0; t < 4; t++)
			blk[TXL_IL_SCALES + (j * TXL_IL + i) * 4 + t] =
				(uint8_t)(v[8 * j + t] | v[8 * j + 4 + t] << 4);
}

void
txl_interleave(void *dst, enum txl_dtype dt, const void *src, int rows,
	       int K)
{
	const int nb = K / TXL_QK;
	const size_t ld = txl_row_bytes(dt, K);
	const size_t bs = txl_row_bytes(dt, TXL_QK);	/* a stored block */
	uint8_t *out = dst;

	TXL_ASSERT(txl_dtype_blocked(dt));
	memset(dst, 0, txl_il_bytes(dt, rows, K));
	for (int r = 0; r < rows; r++) {
		const uint8_t *row = (const uint8_t *)src + (size_t)r * ld;
		uint8_t *grp = out + txl_il_bytes(dt, r / TXL_IL * TXL_IL, K);
		const int i = r % TXL_IL;

		for (int b = 0; b < nb; b++) {
			uint8_t *blk = grp + (size_t)b * TXL_IL * bs;
			const void *q = row + (size_t)b * bs;

			if (dt == TXL_Q4_0)
				interleave_q4(blk, i, q);
			else
				interleave_q8(blk, i, q);
		}
	}
}

/* cblas_sgemm into a block of out (rows x cols, rows ldo apart) that
 * beta 0 overwrites: the block zeroed here and sgemm told to add to it.
 * OpenBLAS otherwise clears C first in a pass of its own, element by
 * element when C is a block of a wider matrix, which cost 3% of scoring
 * (AMD EPYC, avx2). */
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
	struct chunks part;	/* of N (rows of W), or of M if split_m */
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
	const struct txl_kernels *k = txl_kernels();
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
				k->dot_rows[g->dt](&v, g->w + (size_t)r * g->ldw,
						   g->ldw, g->a + (size_t)m * g->lda,
						   1, g->K);
				*o = g->beta * *o + v;
			}
		}
		return;
	}
	for (int r = 0; r < hi - lo; r++)
		k->widen[g->dt](buf + (size_t)r * g->K, w + (size_t)r * g->ldw,
				(size_t)g->K);
	sgemm_block(CblasNoTrans, CblasTrans, g->M, hi - lo, g->K, 1.0f, g->a,
		    g->lda, buf, g->K, g->beta, g->out + lo, g->ldo);
}

static void
gemm_task(void *p, int ith, int nth)
{
	struct gemm *g = p;
	int lo, hi;

	while (chunks_take(&g->part, &lo, &hi)) {
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
	int nth = threads_for(macs);

	/* split the longer side; compact weights always by their rows, so
	 * that each is widened once */
	g.split_m = dt == TXL_F32 && M > N;
	if (g.split_m) {
		chunks_init_per(&g.part, M, 16, nth, 1);
	} else {
		/* compact: blocks of rows small enough to stay in cache */
		chunks_init_per(&g.part, N, 16, nth, 1);
		if (dt != TXL_F32) {
			int cap = (65536 / (K > 0 ? K : 1)) / 16 * 16;
			if (cap < 16)
				cap = 16;
			if (g.part.size > cap)
				g.part.size = cap;
		}
	}
	run(gemm_task, &g, macs);
}

/* ---- y[N] = a[K] . b[K, N] (rows ldb bytes apart): the weighted sum
 * of rows ---- */

#define MAX_PARTS 256

struct axpy {
	struct chunks rows;
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
	while (chunks_take(&x->rows, &lo, &hi))
		x->fn(acc, x->a + lo, x->b + (size_t)lo * x->ldb, x->ldb,
		      hi - lo, x->N);
}

static void
axpy(float *y, const float *a, const void *b, enum txl_dtype dt, size_t ldb,
     int K, int N)
{
	struct axpy x = {
		.fn = txl_kernels()->axpy_rows[dt], .a = a, .b = b, .ldb = ldb,
		.N = N, .y = y,
	};
	double macs = (double)K * N;
	int nth = threads_for(macs);

	chunks_init(&x.rows, K, 16, nth);
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

void
txl_mat_mul(float *out, const float *a, int M, const struct txl_mat *w,
	    bool accumulate)
{
	/* out[M, N] = a[M, K] . w[N, K]^T */
	const int N = w->rows, K = w->cols;
	const size_t ld = txl_row_bytes(w->dtype, K);

	if (M == 1)
		gemv(out, w->data, w->il, w->dtype, ld, a, N, K, accumulate);
	else
		gemm(out, N, a, K, w->data, w->dtype, ld, M, N, K, accumulate);
}

void
txl_mat_mul_float(float *out, const float *a, int M, const struct txl_mat *w,
		  bool accumulate)
{
	if (M == 1 && !txl_dtype_blocked(w->dtype)) {
		txl_mat_mul(out, a, M, w, accumulate);
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
	txl_kernels()->widen[w->dtype](out, (const uint8_t *)w->data +
				       (size_t)row * ld, (size_t)w->cols);
}

void
txl_widen(float *dst, const void *src, enum txl_dtype dt, size_t n)
{
	txl_kernels()->widen[dt](dst, src, n);
}

void
txl_narrow(void *dst, const float *src, enum txl_dtype dt, size_t n)
{
	txl_kernels()->narrow[dt](dst, src, n);
}

void
txl_convert(void *dst, enum txl_dtype dd, const void *src, enum txl_dtype sd,
	    size_t n)
{
	/* chunks of whole Q8_0 blocks */
	float buf[1024];
	const uint8_t *s = src;
	uint8_t *d = dst;

	for (size_t i = 0; i < n; i += 1024) {
		const int len = n - i < 1024 ? (int)(n - i) : 1024;

		if (dd == sd) {
			memcpy(d, s, txl_row_bytes(sd, len));
		} else {
			txl_widen(buf, s, sd, (size_t)len);
			txl_narrow(d, buf, dd, (size_t)len);
		}
		s += txl_row_bytes(sd, 1024);
		d += txl_row_bytes(dd, 1024);
	}
}

void
txl_gemm_nt(float *out, int ldo, const float *a, int lda, const float *b,
	    int ldb, int M, int K, int N)
{
	txl_gemm_nt_dt(out, ldo, a, lda, b, TXL_F32, ldb, M, K, N);
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
	struct chunks part;	/* of M */
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

	while (chunks_take(&g->part, &lo, &hi))
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

	chunks_init(&g.part, M, 16, threads_for(macs));
	run(gemm_nn_task, &g, macs);
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

/* ---- element-wise, rows split over the pool ---- */

struct rows {
	struct chunks part;
	txl_rows_fn fn;
	void *ctx;
};

static void
rows_task(void *p, int ith, int nth)
{
	struct rows *r = p;
	int lo, hi;

	while (chunks_take(&r->part, &lo, &hi))
		r->fn(r->ctx, lo, hi);
}

void
txl_pool_rows(txl_rows_fn fn, void *ctx, int rows, double cost)
{
	struct rows r = { .fn = fn, .ctx = ctx };
	double work = (double)rows * cost;

	chunks_init(&r.part, rows, 1, threads_for(work));
	run(rows_task, &r, work);
}

/* the operands of the functions below: x[rows, n] and its vectors */
struct elementwise {
	float *x;
	const float *src, *g, *b;
	int n;
};

static void
add_bias_rows(void *p, int lo, int hi)
{
	const struct elementwise *e = p;

	for (int r = lo; r < hi; r++)
		for (int i = 0; i < e->n; i++)
			e->x[(size_t)r * e->n + i] += e->b[i];
}

void
txl_add_bias(float *x, const float *b, int rows, int n)
{
	struct elementwise e = { .x = x, .b = b, .n = n };

	txl_pool_rows(add_bias_rows, &e, rows, n);
}

/* (x - mean) / sqrt(var + 1e-5) * g + b, with the biased variance, as
 * torch.nn.LayerNorm; statistics in double. */
static void
norm_row(float *o, const float *x, const float *g, const float *b, int n)
{
	double mean = 0, var = 0;

	for (int i = 0; i < n; i++)
		mean += x[i];
	mean /= n;
	for (int i = 0; i < n; i++)
		var += ((double)x[i] - mean) * ((double)x[i] - mean);
	var /= n;
	float rstd = (float)(1.0 / sqrt(var + 1e-5));
	float fmean = (float)mean;
	for (int i = 0; i < n; i++)
		o[i] = (x[i] - fmean) * rstd * g[i] + b[i];
}

static void
layer_norm_rows(void *p, int lo, int hi)
{
	const struct elementwise *e = p;

	for (size_t r = (size_t)lo; r < (size_t)hi; r++)
		norm_row(e->x + r * e->n, e->src + r * e->n, e->g, e->b, e->n);
}

void
txl_layer_norm(float *out, const float *x, const float *g, const float *b,
	       int rows, int n)
{
	struct elementwise e = { .x = out, .src = x, .g = g, .b = b, .n = n };

	txl_pool_rows(layer_norm_rows, &e, rows, 3.0 * n);
}

static void
residual_rows(void *p, int lo, int hi)
{
	const struct elementwise *e = p;

	for (size_t r = (size_t)lo; r < (size_t)hi; r++) {
		float *x = e->x + r * e->n;
		for (int i = 0; i < e->n; i++)
			x[i] += e->src[r * e->n + i];
		if (e->g)
			norm_row(x, x, e->g, e->b, e->n);
	}
}

void
txl_residual(float *x, const float *y, const float *g, const float *b,
	     int rows, int n)
{
	struct elementwise e = { .x = x, .src = y, .g = g, .b = b, .n = n };

	txl_pool_rows(residual_rows, &e, rows, (g ? 4.0 : 1.0) * n);
}

static void
add_bias_relu_rows(void *p, int lo, int hi)
{
	const struct elementwise *e = p;

	/* branch-free so that it vectorizes */
	for (int r = lo; r < hi; r++) {
		float *xr = e->x + (size_t)r * e->n;
		for (int i = 0; i < e->n; i++) {
			float v = xr[i] + e->b[i];
			xr[i] = v > 0.0f ? v : 0.0f;
		}
	}
}

void
txl_add_bias_relu(float *x, const float *b, int rows, int n)
{
	struct elementwise e = { .x = x, .b = b, .n = n };

	txl_pool_rows(add_bias_relu_rows, &e, rows, n);
}

double
txl_exp_sum(float *out, const float *x, int n, float max)
{
	return txl_kernels()->exp_sum(out, x, n, max);
}

double
txl_logsumexp(const float *x, int n)
{
	const struct txl_kernels *k = txl_kernels();
	float max = k->max(x, n);

	/* the terms are <= 1, their sum is kept in double */
	return max + log(k->exp_sum(NULL, x, n, max));
}

void
txl_softmax_inplace(float *x, int n)
{
	const struct txl_kernels *k = txl_kernels();
	float max = k->max(x, n), inv;

	/* one exp per element: txl_logsumexp() then exp(x - lse) would
	 * take two */
	inv = (float)(1.0 / k->exp_sum(x, x, n, max));
	for (int i = 0; i < n; i++)
		x[i] *= inv;
}

void
txl_log_softmax(const float *logits, float *out, int n)
{
	float lse = (float)txl_logsumexp(logits, n);

	for (int i = 0; i < n; i++)
		out[i] = logits[i] - lse;
}
