/* SPDX-License-Identifier: MIT */
/*
 * txl-ops.h - the element-wise functions of the forward pass (txl-ops.c).
 * Not installed.
 */
#ifndef TXL_OPS_H
#define TXL_OPS_H

/* x[n] = softmax(x)[n]. */
void txl_softmax_inplace(float *x, int n);
/* The element-wise functions split many rows over the pool. */
/* x[n] += b[n] for each of rows rows. */
void txl_add_bias(float *x, const float *b, int rows, int n);
/* LayerNorm over the last dimension with epsilon eps (the model's
 * ln_eps); out may equal x. */
void txl_layer_norm(float *out, const float *x, const float *g,
		    const float *b, int rows, int n, double eps);
/* The residual: x[rows, n] += y, then LayerNorm (epsilon eps) in place
 * if g is not NULL (post-LayerNorm). */
void txl_residual(float *x, const float *y, const float *g, const float *b,
		  int rows, int n, double eps);
/* x[n] = max(x[n] + b[n], 0) for each of rows rows. */
void txl_add_bias_relu(float *x, const float *b, int rows, int n);
/* out[n] = exp(x[n] - max) (out may be x or NULL); returns the sum,
 * added in double: the core of softmax and logsumexp. */
double txl_exp_sum(float *out, const float *x, int n, float max);
/* The sinusoidal position encoding of position pos into out[d]:
 * out[k] = sin(pos f_k), out[k + d/2] = cos(pos f_k) with f_k = 1 /
 * 10000^(2k/d), in float like the original's PositionalEmbedding (so that
 * large positions round the same way). */
void txl_sinusoid(float *out, float pos, int d);

#endif /* TXL_OPS_H */
