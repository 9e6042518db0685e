/* SPDX-License-Identifier: MIT */
/*
 * txl-math.c - the kernels of the forward pass.  All matrix products go
 * through OpenBLAS here and nowhere else: sgemm for segments, sgemv for a
 * single row (generation is bound by reading the weights once per token).
 * Weights stay in PyTorch's (out_features, in_features) row-major layout.
 */
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "txl-internal.h"

void
txl_set_threads(int n)
{
	if (n > 0)
		openblas_set_num_threads(n);
}

void
txl_mat_mul(float *out, const float *a, int M, const struct txl_mat *w,
	    bool accumulate)
{
	/* out[M, N] = a[M, K] . w[N, K]^T */
	const int N = w->rows, K = w->cols;
	const float *wf = txl_mat_f32(w);

	if (M == 1)
		cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, wf, K, a,
			    1, accumulate ? 1.0f : 0.0f, out, 1);
	else
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K,
			    1.0f, a, K, wf, K, accumulate ? 1.0f : 0.0f, out, N);
}

void
txl_mat_row(float *out, const struct txl_mat *w, int row)
{
	TXL_ASSERT(row >= 0 && row < w->rows);
	memcpy(out, txl_mat_f32(w) + (size_t)row * w->cols,
	       sizeof(float) * (size_t)w->cols);
}

void
txl_gemm_nt(float *out, int ldo, const float *a, int lda, const float *b,
	    int ldb, int M, int K, int N)
{
	/* out[M,N] = a[M,K] . b[N,K]^T */
	if (M == 1)
		cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, b, ldb, a,
			    1, 0.0f, out, 1);
	else
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K,
			    1.0f, a, lda, b, ldb, 0.0f, out, ldo);
}

void
txl_gemm_nn(float *out, int ldo, const float *a, int lda, const float *b,
	    int ldb, int M, int K, int N)
{
	/* out[M,N] = a[M,K] . b[K,N] */
	if (M == 1)
		cblas_sgemv(CblasRowMajor, CblasTrans, K, N, 1.0f, b, ldb, a, 1,
			    0.0f, out, 1);
	else
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K,
			    1.0f, a, lda, b, ldb, 0.0f, out, ldo);
}

void
txl_gemm_tn_acc(float *out, int ldo, const float *a, int lda, const float *b,
		int ldb, int M, int K, int N, float alpha)
{
	/* out[M,N] += alpha * a[K,M]^T . b[K,N] */
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, M, N, K, alpha,
		    a, lda, b, ldb, 1.0f, out, ldo);
}

void
txl_add_bias(float *x, const float *b, int rows, int n)
{
	/* x[rows, n] += b[n] */
	for (int r = 0; r < rows; r++)
		for (int i = 0; i < n; i++)
			x[(size_t)r * n + i] += b[i];
}

void
txl_layer_norm(float *out, const float *x, const float *g, const float *b,
	       int rows, int n)
{
	/* x, out [rows, n]: (x - mean) / sqrt(var + 1e-5) * g + b, with the
	 * biased variance, as torch.nn.LayerNorm; statistics in double. */
	for (int r = 0; r < rows; r++) {
		const float *xr = x + (size_t)r * n;
		float *o = out + (size_t)r * n;
		double mean = 0, var = 0;

		for (int i = 0; i < n; i++)
			mean += xr[i];
		mean /= n;
		for (int i = 0; i < n; i++)
			var += ((double)xr[i] - mean) * ((double)xr[i] - mean);
		var /= n;
		float rstd = (float)(1.0 / sqrt(var + 1e-5));
		float fmean = (float)mean;
		for (int i = 0; i < n; i++)
			o[i] = (xr[i] - fmean) * rstd * g[i] + b[i];
	}
}

void
txl_add_bias_relu(float *x, const float *b, int rows, int n)
{
	/* x[rows, n] = max(x + b[n], 0), branch-free so that it vectorizes */
	for (int r = 0; r < rows; r++) {
		float *xr = x + (size_t)r * n;
		for (int i = 0; i < n; i++) {
			float v = xr[i] + b[i];
			xr[i] = v > 0.0f ? v : 0.0f;
		}
	}
}

double
txl_logsumexp(const float *x, int n)
{
	float max = -INFINITY;
	double sum = 0;

	for (int i = 0; i < n; i++)
		max = x[i] > max ? x[i] : max;
	/* expf is several times faster than exp and exact enough for terms
	 * <= 1; the sum is kept in double */
	for (int i = 0; i < n; i++)
		sum += expf(x[i] - max);
	return max + log(sum);
}

void
txl_softmax_inplace(float *x, int n)
{
	float max = -INFINITY, inv;
	double sum = 0;

	/* one expf per element: txl_logsumexp() then exp(x - lse) would
	 * take two */
	for (int i = 0; i < n; i++)
		max = x[i] > max ? x[i] : max;
	for (int i = 0; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	inv = (float)(1.0 / sum);
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
