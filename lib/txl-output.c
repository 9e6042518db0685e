/* SPDX-License-Identifier: MIT */
/*
 * txl-output.c - the output layer: logits of the final hidden states
 * (ProjectedAdaptiveLogSoftmax without clusters), and dynamic evaluation
 * (txl_session_adapt), which trains the session's own copy of it.
 */
#include <stdlib.h>
#include <string.h>

#include "txl-internal.h"

/* Logits of `rows` rows of s->h starting at row `first`:
 * out_layer(h . P) (ProjectedAdaptiveLogSoftmax._compute_logit). */
void
txl_output_logits(struct txl_session *s, int first, int rows)
{
	const struct txl_model *m = s->model;
	const int d = m->hp.d_model, e = m->hp.d_embed, V = m->hp.n_token;
	const float *src = s->h + (size_t)first * d;

	if (m->out_proj.data) {
		/* proj_hid[e] = h[d] . P[d, e] */
		txl_gemm_nn(s->xn, e, src, d, txl_mat_f32(&m->out_proj), e,
			    rows, d, e);
		src = s->xn;
	}
	txl_mat_mul(s->logits, src, rows, &s->out_w, false);
	txl_add_bias(s->logits, s->out_b, rows, V);
	s->logits_src = src;
}

void
txl_output_reset(struct txl_session *s)
{
	free(s->own_out_w);
	free(s->own_out_b);
	s->own_out_w = s->own_out_b = NULL;
	s->out_w = s->model->out_w;
	s->out_b = s->model->out_b;
}

enum txl_status
txl_session_adapt(struct txl_session *s, const int32_t *targets, int n,
		  float lr)
{
	const struct txl_hparams *hp = &s->model->hp;
	const int V = hp->n_token, E = hp->d_embed;

	if (!(lr >= 0.0f && lr <= (float)TXL_ADAPT_LR_MAX))
		return txl_fail(TXL_ERR_INVALID, "adapt: learning rate %g is "
				"not a number in [0, %g]", (double)lr,
				TXL_ADAPT_LR_MAX);
	if (n < 1 || !targets || n != s->n_logits)
		return txl_fail(TXL_ERR_INVALID, "adapt: %d targets for %d "
				"rows of logits", n, s->n_logits);
	for (int i = 0; i < n; i++)
		if (targets[i] < 0 || targets[i] >= V)
			return txl_fail(TXL_ERR_INVALID, "adapt: token id %d "
					"out of range [0, %d)", targets[i], V);
	if (!s->own_out_w) {
		/* the session's own copy, never the model's (shared) one;
		 * with tied weights the input embedding stays as it is */
		s->own_out_w = txl_alloc_floats((size_t)V * E);
		s->own_out_b = txl_alloc_floats((size_t)V);
		if (!s->own_out_w || !s->own_out_b) {
			free(s->own_out_w);
			free(s->own_out_b);
			s->own_out_w = s->own_out_b = NULL;
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
		}
		for (int j = 0; j < V; j++)
			txl_mat_row(s->own_out_w + (size_t)j * E, &s->out_w, j);
		memcpy(s->own_out_b, s->out_b, sizeof(float) * (size_t)V);
		s->out_w = (struct txl_mat){ .dtype = TXL_F32, .rows = V,
					     .cols = E, .data = s->own_out_w };
		s->out_b = s->own_out_b;
	}
	/* d(mean NLL)/d logits = softmax - onehot, in place of the logits */
	for (int i = 0; i < n; i++) {
		float *g = s->logits + (size_t)i * V;

		txl_softmax_inplace(g, V);
		g[targets[i]] -= 1.0f;
	}
	/* W -= lr/n G^T X,  b -= lr/n sum_i G_i */
	const float alpha = -lr / (float)n;
	txl_gemm_tn_acc(s->own_out_w, E, s->logits, V, s->logits_src, E, V, n,
			E, alpha);
	for (int i = 0; i < n; i++) {
		const float *g = s->logits + (size_t)i * V;
		for (int j = 0; j < V; j++)
			s->own_out_b[j] += alpha * g[j];
	}
	s->n_logits = 0;
	return TXL_OK;
}

