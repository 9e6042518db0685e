/* SPDX-License-Identifier: MIT */
/*
 * txl-forward.c - the forward pass of one segment: the embedding, the
 * decoder layers (attention, then the position-wise feed-forward, with
 * post- or pre-LayerNorm), the logits asked for, and the memory update
 * (_update_mems: the last mem_len positions).  Only the new rows are
 * computed: the K and V of the memory are cached (txl-session.c says how).
 */
#include <math.h>
#include <string.h>

#include "txl-internal.h"

/* Embedding of n tokens into s->h: adaptive input with div_val 1, then
 * times sqrt(d_model) (AdaptiveEmbedding.forward). */
static void
embed(struct txl_session *s, const int32_t *tok, int n)
{
	const struct txl_model *m = s->model;
	const int d = m->hp.d_model, e = m->hp.d_embed;
	const float scale = sqrtf((float)d);

	if (m->emb_proj.data) {
		for (int i = 0; i < n; i++)
			txl_mat_row(s->xn + (size_t)i * e, &m->word_emb, tok[i]);
		txl_mat_mul(s->h, s->xn, n, &m->emb_proj, false);
	} else {
		for (int i = 0; i < n; i++)
			txl_mat_row(s->h + (size_t)i * d, &m->word_emb, tok[i]);
	}
	for (size_t i = 0; i < (size_t)n * d; i++)
		s->h[i] *= scale;
}

/* One decoder layer on the n rows of s->h (RelPartialLearnableDecoderLayer:
 * attention, then the position-wise feed-forward). */
static void
layer_forward(struct txl_session *s, int l, int n, int base)
{
	const struct txl_hparams *hp = &s->model->hp;
	const struct txl_layer *ly = &s->model->layers[l];
	const int d = hp->d_model, hd = hp->n_head * hp->d_head;
	const int I = hp->d_inner;
	const size_t nd = (size_t)n * d;
	const float *src = s->h;

	/* w_heads = qkv_net(layer_norm(cat) if pre_lnorm else cat); only the
	 * new rows are computed, memory rows are cached */
	if (hp->pre_lnorm) {
		txl_layer_norm(s->xn, s->h, ly->ln_attn_g, ly->ln_attn_b, n, d);
		src = s->xn;
	}
	txl_mat_mul(s->qkv, src, n, &ly->qkv, false);
	for (int i = 0; i < n; i++) {
		size_t row = (size_t)(base + s->mlen + i) * hd;
		const float *kv = s->qkv + (size_t)i * 3 * hd + hd;
		memcpy(s->k[l] + row, kv, sizeof(float) * hd);
		memcpy(s->v[l] + row, kv + hd, sizeof(float) * hd);
	}
	txl_attn_forward(s, l, n, base);

	/* attn_out = o_net(attn_vec); residual, post- or pre-LayerNorm */
	txl_mat_mul(s->tmp, s->attn, n, &ly->o_net, false);
	for (size_t i = 0; i < nd; i++)
		s->h[i] += s->tmp[i];
	if (!hp->pre_lnorm)
		txl_layer_norm(s->h, s->h, ly->ln_attn_g, ly->ln_attn_b, n, d);

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
	for (size_t i = 0; i < nd; i++)
		s->h[i] += s->tmp[i];
	if (!hp->pre_lnorm)
		txl_layer_norm(s->h, s->h, ly->ln_ff_g, ly->ln_ff_b, n, d);
}

enum txl_status
txl_forward_segment(struct txl_session *s, const int32_t *tok, int n,
		    enum txl_logits want)
{
	const struct txl_hparams *hp = &s->model->hp;
	const int hd = hp->n_head * hp->d_head;

	if (s->kv_start + s->mlen + n > s->cap) {
		/* move the memory to the front of every buffer */
		for (int l = 0; l < hp->n_layer; l++) {
			memmove(s->k[l], s->k[l] + (size_t)s->kv_start * hd,
				sizeof(float) * (size_t)s->mlen * hd);
			memmove(s->v[l], s->v[l] + (size_t)s->kv_start * hd,
				sizeof(float) * (size_t)s->mlen * hd);
		}
		s->kv_start = 0;
	}
	TXL_ASSERT(s->kv_start + s->mlen + n <= s->cap);

	embed(s, tok, n);
	for (int l = 0; l < hp->n_layer; l++) {
		/* the memory stays as it was until the segment completes */
		if (txl_aborted(s))
			return TXL_ABORTED;
		layer_forward(s, l, n, s->kv_start);
	}
	if (want == TXL_LOGITS_ALL)
		txl_output_logits(s, 0, n);
	else if (want == TXL_LOGITS_LAST)
		txl_output_logits(s, n - 1, 1);
	s->n_logits = want == TXL_LOGITS_ALL ? n : want == TXL_LOGITS_LAST;
	memcpy(s->last_h, s->h + (size_t)(n - 1) * hp->d_model,
	       sizeof(float) * hp->d_model);
	s->have_last = true;

	/* _update_mems: keep the last mem_len positions */
	int total = s->mlen + n;
	int keep = total < s->mem_len ? total : s->mem_len;
	s->kv_start += total - keep;
	s->mlen = keep;
	s->n_past += n;
	return TXL_OK;
}

