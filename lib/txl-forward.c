/* SPDX-License-Identifier: MIT */
/*
 * txl-forward.c - the forward pass of one segment: the adaptive input,
 * the decoder layers (the attention of txl-attn.h, then the position-wise
 * feed-forward, with post- or pre-LayerNorm), and the memory update
 * (_update_mems: the last mem_len positions).  Only the new rows are
 * computed: the K and V of the memory are cached (txl-kv.h says how).
 */
#include <math.h>
#include <string.h>

#include "txl-forward.h"
#include "txl-ops.h"
#include "txl-products.h"

/* Embedding of n tokens into f->h (AdaptiveEmbedding.forward): each
 * token's row of its cluster's table, projected to d_model where the
 * cluster has a projection, times sqrt(d_model). */
static void
embed(const struct txl_forward *f, const int32_t *tok, int n)
{
	const struct txl_model *m = f->model;
	const int d = m->hp.d_model;
	const float scale = sqrtf((float)d);

	for (int c = 0; c < m->n_emb; c++) {
		const struct txl_emb_cluster *ec = &m->emb[c];
		const int e = ec->table.cols;
		int k = 0;

		if (!ec->proj.data) {
			for (int i = 0; i < n; i++)
				if (tok[i] >= ec->lo && tok[i] < ec->hi)
					txl_mat_row(f->h + (size_t)i * d,
						    &ec->table, tok[i] - ec->lo);
			continue;
		}
		/* gather the cluster's rows, project them together, scatter */
		for (int i = 0; i < n; i++)
			if (tok[i] >= ec->lo && tok[i] < ec->hi)
				txl_mat_row(f->xn + (size_t)k++ * e,
					    &ec->table, tok[i] - ec->lo);
		if (k == n) {
			txl_mat_mul(f->h, f->xn, n, &ec->proj, false);
			continue;
		}
		if (k == 0)
			continue;
		txl_mat_mul(f->tmp, f->xn, k, &ec->proj, false);
		k = 0;
		for (int i = 0; i < n; i++)
			if (tok[i] >= ec->lo && tok[i] < ec->hi)
				memcpy(f->h + (size_t)i * d,
				       f->tmp + (size_t)k++ * d,
				       sizeof(float) * d);
	}
	for (size_t i = 0; i < (size_t)n * d; i++)
		f->h[i] *= scale;
}

/* One decoder layer on the n rows of f->h: the attention block, then the
 * position-wise feed-forward (RelPartialLearnableDecoderLayer and its
 * siblings: they differ in the attention only). */
static void
layer_forward(const struct txl_forward *f, int l, int n)
{
	const struct txl_hparams *hp = &f->model->hp;
	const struct txl_layer *ly = &f->model->layers[l];
	const int d = hp->d_model, I = hp->d_inner;
	const bool post = !hp->pre_lnorm;
	const float *src;

	/* attn_out = o_net(attention(h, memory)); residual, post- or
	 * pre-LayerNorm */
	txl_attn_forward(f->attn, f->kv, l, f->h, f->xn, f->att, n);
	txl_mat_mul(f->tmp, f->att, n, &ly->o_net, false);
	txl_residual(f->h, f->tmp, post ? ly->ln_attn_g : NULL,
		     ly->ln_attn_b, n, d);

	/* PositionwiseFF: Linear, ReLU, Linear; residual and LayerNorm */
	src = f->h;
	if (hp->pre_lnorm) {
		txl_layer_norm(f->xn, f->h, ly->ln_ff_g, ly->ln_ff_b, n, d);
		src = f->xn;
	}
	txl_mat_mul(f->ff, src, n, &ly->ff1, false);
	txl_add_bias_relu(f->ff, ly->ff1_b, n, I);
	txl_mat_mul(f->tmp, f->ff, n, &ly->ff2, false);
	txl_add_bias(f->tmp, ly->ff2_b, n, d);
	txl_residual(f->h, f->tmp, post ? ly->ln_ff_g : NULL, ly->ln_ff_b, n,
		     d);
}

enum txl_status
txl_forward_segment(const struct txl_forward *f, const int32_t *tok, int n)
{
	txl_kv_make_room(f->kv, n);
	embed(f, tok, n);
	for (int l = 0; l < f->model->hp.n_layer; l++) {
		/* the memory stays as it was until the segment completes */
		if (f->abort_cb && f->abort_cb(f->abort_data))
			return TXL_ABORTED;
		txl_attn_positions(f->attn, l, f->h, n);
		layer_forward(f, l, n);
	}
	/* _update_mems: keep the last mem_len positions */
	txl_kv_keep(f->kv, n, f->mem_len);
	return TXL_OK;
}
