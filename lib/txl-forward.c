/* SPDX-License-Identifier: MIT */
/*
 * txl-forward.c - the forward pass of one segment: the adaptive input,
 * the decoder layers (the attention of txl-attn.c, then the position-wise
 * feed-forward, with post- or pre-LayerNorm), and the memory update
 * (_update_mems: the last mem_len positions).  Only the new rows are
 * computed: the K and V of the memory are cached (txl-session.c says how).
 */
#include <math.h>
#include <string.h>

#include "txl-forward.h"
#include "txl-attn.h"
#include "txl-log.h"
#include "txl-ops.h"
#include "txl-products.h"

/* Embedding of n tokens into s->h (AdaptiveEmbedding.forward): each
 * token's row of its cluster's table, projected to d_model where the
 * cluster has a projection, times sqrt(d_model). */
static void
embed(struct txl_session *s, const int32_t *tok, int n)
{
	const struct txl_model *m = s->model;
	const int d = m->hp.d_model;
	const float scale = sqrtf((float)d);

	for (int c = 0; c < m->n_emb; c++) {
		const struct txl_emb_cluster *ec = &m->emb[c];
		const int e = ec->table.cols;
		int k = 0;

		if (!ec->proj.data) {
			for (int i = 0; i < n; i++)
				if (tok[i] >= ec->lo && tok[i] < ec->hi)
					txl_mat_row(s->h + (size_t)i * d,
						    &ec->table, tok[i] - ec->lo);
			continue;
		}
		/* gather the cluster's rows, project them together, scatter */
		for (int i = 0; i < n; i++)
			if (tok[i] >= ec->lo && tok[i] < ec->hi)
				txl_mat_row(s->xn + (size_t)k++ * e,
					    &ec->table, tok[i] - ec->lo);
		if (k == n) {
			txl_mat_mul(s->h, s->xn, n, &ec->proj, false);
			continue;
		}
		if (k == 0)
			continue;
		txl_mat_mul(s->tmp, s->xn, k, &ec->proj, false);
		k = 0;
		for (int i = 0; i < n; i++)
			if (tok[i] >= ec->lo && tok[i] < ec->hi)
				memcpy(s->h + (size_t)i * d,
				       s->tmp + (size_t)k++ * d,
				       sizeof(float) * d);
	}
	for (size_t i = 0; i < (size_t)n * d; i++)
		s->h[i] *= scale;
}

/* One decoder layer on the n rows of s->h: the attention block, then the
 * position-wise feed-forward (RelPartialLearnableDecoderLayer and its
 * siblings: they differ in the attention only). */
static void
layer_forward(struct txl_session *s, int l, int n, int base)
{
	const struct txl_hparams *hp = &s->model->hp;
	const struct txl_layer *ly = &s->model->layers[l];
	const int d = hp->d_model, I = hp->d_inner;
	const bool post = !hp->pre_lnorm;
	const float *src;

	/* attn_out = o_net(attention(h, memory)); residual, post- or
	 * pre-LayerNorm */
	txl_attn_forward(s, l, n, base);
	txl_mat_mul(s->tmp, s->attn, n, &ly->o_net, false);
	txl_residual(s->h, s->tmp, post ? ly->ln_attn_g : NULL,
		     ly->ln_attn_b, n, d);

	/* PositionwiseFF: Linear, ReLU, Linear; residual and LayerNorm */
	src = s->h;
	if (hp->pre_lnorm) {
		txl_layer_norm(s->xn, s->h, ly->ln_ff_g, ly->ln_ff_b, n, d);
		src = s->xn;
	}
	txl_mat_mul(s->ff, src, n, &ly->ff1, false);
	txl_add_bias_relu(s->ff, ly->ff1_b, n, I);
	txl_mat_mul(s->tmp, s->ff, n, &ly->ff2, false);
	txl_add_bias(s->tmp, ly->ff2_b, n, d);
	txl_residual(s->h, s->tmp, post ? ly->ln_ff_g : NULL, ly->ln_ff_b, n,
		     d);
}

enum txl_status
txl_forward_segment(struct txl_session *s, const int32_t *tok, int n)
{
	const struct txl_hparams *hp = &s->model->hp;
	const size_t bytes = s->kv_row * (size_t)s->mlen;

	if (s->kv_start + s->mlen + n > s->cap) {
		/* move the memory to the front of every head's buffer */
		for (int l = 0; l < hp->n_layer; l++) {
			for (int h = 0; h < hp->n_head; h++) {
				memmove(txl_kv_row(s, s->k[l], s->cap, h, 0),
					txl_kv_row(s, s->k[l], s->cap, h,
						   s->kv_start), bytes);
				memmove(txl_kv_row(s, s->v[l], s->cap, h, 0),
					txl_kv_row(s, s->v[l], s->cap, h,
						   s->kv_start), bytes);
			}
		}
		s->kv_start = 0;
	}
	TXL_ASSERT(s->kv_start + s->mlen + n <= s->cap);

	embed(s, tok, n);
	for (int l = 0; l < hp->n_layer; l++) {
		/* the memory stays as it was until the segment completes */
		if (txl_aborted(s))
			return TXL_ABORTED;
		txl_attn_positions(s, l, n);
		layer_forward(s, l, n, s->kv_start);
	}
	memcpy(s->last_h, s->h + (size_t)(n - 1) * hp->d_model,
	       sizeof(float) * hp->d_model);
	s->have_last = true;

	/* _update_mems: keep the last mem_len positions */
	int total = s->mlen + n;
	int keep = total < s->mem_len ? total : s->mem_len;
	s->kv_start += total - keep;
	s->mlen = keep;
	return TXL_OK;
}
