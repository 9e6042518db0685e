/* SPDX-License-Identifier: MIT */
/*
 * txl-forward.c - the forward pass of one segment: the adaptive input,
 * the decoder layers (the attention of txl-attn.h, then the position-wise
 * feed-forward, with post- or pre-LayerNorm), and the memory update
 * (_update_mems: the last mem_len positions).  Only the new rows are
 * computed: the K and V of the memory are cached (txl-kv.h says how).
 *
 * A pass computes a segment of one stream (a session), or one segment of
 * each stream of a batch (txl-batch.c): the rows of all of them go
 * through each weight matrix together (txl-rows.h), each stream's through
 * the attention over its own memory.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "txl-alloc.h"
#include "txl-forward.h"
#include "txl-ops.h"
#include "txl-log.h"
#include "txl-products.h"

/* Embedding of stream st's tokens into its rows of f->h
 * (AdaptiveEmbedding.forward): each token's row of its cluster's table,
 * projected to d_model where the cluster has a projection, times
 * sqrt(d_model) (but for the adaptive span's, an nn.Embedding as it
 * is, and for a model of emb_scale false).  Per stream: a cluster's projection of the stream's rows is the
 * product a pass of the stream alone makes. */
static void
embed(const struct txl_forward *f, const struct txl_forward_stream *st)
{
	const struct txl_model *m = f->model;
	const int d = m->hp.d_model, n = st->n;
	const int dx = d > m->hp.d_embed ? d : m->hp.d_embed;
	const int32_t *tok = st->tok;
	float *h = f->h + (size_t)st->first * d;
	float *xn = f->xn + (size_t)st->first * dx;
	float *tmp = f->tmp + (size_t)st->first * d;
	const float scale = sqrtf((float)d);

	for (int c = 0; c < m->n_emb; c++) {
		const struct txl_emb_cluster *ec = &m->emb[c];
		const int e = ec->table.cols;
		int k = 0;

		if (!ec->proj.data) {
			for (int i = 0; i < n; i++)
				if (tok[i] >= ec->lo && tok[i] < ec->hi)
					txl_mat_row(h + (size_t)i * d,
						    &ec->table, tok[i] - ec->lo);
			continue;
		}
		/* gather the cluster's rows, project them together, scatter */
		for (int i = 0; i < n; i++)
			if (tok[i] >= ec->lo && tok[i] < ec->hi)
				txl_mat_row(xn + (size_t)k++ * e,
					    &ec->table, tok[i] - ec->lo);
		if (k == n) {
			txl_mat_mul(h, xn, n, &ec->proj, false, f->rows.compute);
			continue;
		}
		if (k == 0)
			continue;
		txl_mat_mul(tmp, xn, k, &ec->proj, false, f->rows.compute);
		k = 0;
		for (int i = 0; i < n; i++)
			if (tok[i] >= ec->lo && tok[i] < ec->hi)
				memcpy(h + (size_t)i * d,
				       tmp + (size_t)k++ * d,
				       sizeof(float) * d);
	}
	if (st->attn->kind->unscaled_input || !m->emb_scale)
		return;
	for (size_t i = 0; i < (size_t)n * d; i++)
		h[i] *= scale;
}

/* One decoder layer on the rows of f->h: the attention block (each
 * stream's own), then the position-wise feed-forward
 * (RelPartialLearnableDecoderLayer and its siblings: they differ in the
 * attention only). */
static void
layer_forward(const struct txl_forward *f, int l)
{
	const struct txl_hparams *hp = &f->model->hp;
	const struct txl_layer *ly = &f->model->layers[l];
	const int d = hp->d_model, I = hp->d_inner, n = f->rows.n;
	const int hd = hp->n_head * hp->d_head;
	const bool post = !hp->pre_lnorm;
	const double eps = f->model->ln_eps;
	struct txl_qkv p;
	const float *src;

	/* attn_out = o_net(attention(h, memory)); residual, post- or
	 * pre-LayerNorm */
	txl_attn_project(f->st[0].attn, l, f->h, f->xn, f->qkv, &f->rows, &p);
	if (f->n_st == 1) {
		txl_attn_rows(f->st[0].attn, f->st[0].kv, l, &p, 0, n, f->att);
	} else {
		/* the streams of a few queries in pool tasks of many (a
		 * hand-over to the threads per stream costs more than a
		 * token's attention over a short memory) */
		struct txl_attn_few_job few[TXL_ATTN_FEW_JOBS];
		int n_few = 0;

		for (int i = 0; i < f->n_st; i++) {
			const struct txl_forward_stream *st = &f->st[i];
			float *out = f->att + (size_t)st->first * hd;

			if (st->n > TXL_ATTN_FEW_MAX) {
				txl_attn_rows(st->attn, st->kv, l, &p,
					      st->first, st->n, out);
				continue;
			}
			few[n_few++] = (struct txl_attn_few_job){
				.a = st->attn, .kv = st->kv, .n = st->n,
				.q = p.q + (size_t)st->first * p.qs,
				.qs = p.qs, .out = out,
				.p = &p, .first = st->first,
			};
			if (n_few == TXL_ATTN_FEW_JOBS) {
				txl_attn_few_many(few, n_few, l);
				n_few = 0;
			}
		}
		txl_attn_few_many(few, n_few, l);
	}
	txl_rows_mul(f->tmp, f->att, &f->rows, &ly->o_net);
	txl_residual(f->h, f->tmp, post ? ly->ln_attn_g : NULL,
		     ly->ln_attn_b, n, d, eps);

	/* PositionwiseFF: Linear, ReLU, Linear; residual and LayerNorm */
	src = f->h;
	if (hp->pre_lnorm) {
		txl_layer_norm(f->xn, f->h, ly->ln_ff_g, ly->ln_ff_b, n, d,
			       eps);
		src = f->xn;
	}
	txl_rows_mul(f->ff, src, &f->rows, &ly->ff1);
	txl_add_bias_relu(f->ff, ly->ff1_b, n, I);
	txl_rows_mul(f->tmp, f->ff, &f->rows, &ly->ff2);
	txl_add_bias(f->tmp, ly->ff2_b, n, d);
	txl_residual(f->h, f->tmp, post ? ly->ln_ff_g : NULL, ly->ln_ff_b, n,
		     d, eps);
}

/* true if a stream's abort callback asks to stop */
static bool
aborted(const struct txl_forward *f)
{
	for (int i = 0; i < f->n_st; i++)
		if (f->st[i].abort_cb && f->st[i].abort_cb(f->st[i].abort_data))
			return true;
	return false;
}

enum txl_status
txl_forward(const struct txl_forward *f)
{
	const int d = f->model->hp.d_model;

	for (int i = 0; i < f->n_st; i++) {
		const struct txl_forward_stream *st = &f->st[i];

		TXL_ASSERT(st->first + st->n <= f->rows.n &&
			   (st->n == 1) == (st->first < f->rows.n_one));
		txl_kv_make_room(st->kv, st->n);
		embed(f, st);
	}
	for (int l = 0; l < f->model->hp.n_layer; l++) {
		/* the memories stay as they were until the segment
		 * completes */
		if (aborted(f))
			return TXL_ABORTED;
		for (int i = 0; i < f->n_st; i++) {
			const struct txl_forward_stream *st = &f->st[i];

			txl_attn_positions(st->attn, l, f->h +
					   (size_t)st->first * d, st->n);
		}
		layer_forward(f, l);
	}
	/* _update_mems: keep the last mem_len positions */
	for (int i = 0; i < f->n_st; i++)
		txl_kv_keep(f->st[i].kv, f->st[i].n);
	return TXL_OK;
}

bool
txl_seg_rows_alloc(struct txl_seg_rows *r, const struct txl_hparams *hp,
		   size_t n)
{
	const size_t hd = (size_t)hp->n_head * hp->d_head;
	const size_t dx = hp->d_model > hp->d_embed ? hp->d_model
		: hp->d_embed;

	r->h = txl_alloc_floats(n * hp->d_model);
	r->xn = txl_alloc_floats(n * dx);
	r->att = txl_alloc_floats(n * hd);
	r->tmp = txl_alloc_floats(n * hp->d_model);
	r->ff = txl_alloc_floats(n * hp->d_inner);
	return r->h && r->xn && r->att && r->tmp && r->ff;
}

void
txl_seg_rows_free(struct txl_seg_rows *r)
{
	free(r->h);
	free(r->xn);
	free(r->att);
	free(r->tmp);
	free(r->ff);
	*r = (struct txl_seg_rows){ 0 };
}
