/* SPDX-License-Identifier: MIT */
/*
 * txl-ops.c - the element-wise functions of the forward pass, rows split
 * over the pool, and the softmax family on the vector kernels.
 */
#include <math.h>

#include "txl.h"
#include "txl-kernels.h"
#include "txl-ops.h"
#include "txl-pool.h"

/* the operands of the functions below: x[rows, n] and its vectors */
struct elementwise {
	float *x;
	const float *src, *g, *b;
	int n;
	double eps;		/* LayerNorm's epsilon */
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

/* (x - mean) / sqrt(var + eps) * g + b, with the biased variance, as
 * torch.nn.LayerNorm; statistics in double. */
static void
norm_row(float *o, const float *x, const float *g, const float *b, int n,
	 double eps)
{
	double mean = 0, var = 0;

	for (int i = 0; i < n; i++)
		mean += x[i];
	mean /= n;
	for (int i = 0; i < n; i++)
		var += ((double)x[i] - mean) * ((double)x[i] - mean);
	var /= n;
	float rstd = (float)(1.0 / sqrt(var + eps));
	float fmean = (float)mean;
	for (int i = 0; i < n; i++)
		o[i] = (x[i] - fmean) * rstd * g[i] + b[i];
}

static void
layer_norm_rows(void *p, int lo, int hi)
{
	const struct elementwise *e = p;

	for (size_t r = (size_t)lo; r < (size_t)hi; r++)
		norm_row(e->x + r * e->n, e->src + r * e->n, e->g, e->b, e->n,
			 e->eps);
}

void
txl_layer_norm(float *out, const float *x, const float *g, const float *b,
	       int rows, int n, double eps)
{
	struct elementwise e = { .x = out, .src = x, .g = g, .b = b, .n = n,
				 .eps = eps };

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
			norm_row(x, x, e->g, e->b, e->n, e->eps);
	}
}

void
txl_residual(float *x, const float *y, const float *g, const float *b,
	     int rows, int n, double eps)
{
	struct elementwise e = { .x = x, .src = y, .g = g, .b = b, .n = n,
				 .eps = eps };

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

void
txl_sinusoid(float *out, float pos, int d)
{
	int half = (d + 1) / 2;

	for (int k = 0; k < half; k++) {
		float expo = (float)(2 * k) / (float)d;
		float inv_freq = 1.0f / powf(10000.0f, expo);
		float a = pos * inv_freq;
		out[k] = sinf(a);
		if (half + k < d)
			out[half + k] = cosf(a);
	}
}
