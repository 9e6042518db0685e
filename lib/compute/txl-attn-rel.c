/* SPDX-License-Identifier: MIT */
/*
 * txl-attn-rel.c - the relative attentions of mem_transformer.py and
 * their tables of position terms, one row per distance, computed once
 * per session:
 *
 *   0  RelPartialLearnableMultiHeadAttn, Transformer-XL's own: scores of
 *      content (q + r_w_bias).k and position (q + r_r_bias).R[distance],
 *      R = r_net(sinusoid(distance));
 *   1  RelLearnableMultiHeadAttn (Shaw et al.): content (q + r_w_bias).k,
 *      position q.r_emb[distance] + r_bias[distance], learned tables.
 *
 * The tables are held in the memory's type, head-major as its keys, and
 * read by the paths as the keys are (txl-attn-few.c, txl-attn-seg.c).
 */
#include <stdlib.h>
#include <string.h>

#include "txl-alloc.h"
#include "txl-attn.h"
#include "txl-log.h"
#include "txl-ops.h"
#include "txl-products.h"

/* attn_type 0: distances 0 .. clamp_len: pos_seq.clamp_(max=clamp_len) */
static int
n_dist_partial(const struct txl_model *m, int clamp_len, int mem_len,
	       int klen_max)
{
	const int rows = clamp_len > 0 ? clamp_len + 1 : klen_max;

	(void)m;
	(void)mem_len;
	return rows < klen_max ? rows : klen_max;
}

/* attn_type 1: the table cut to its last clamp_len rows
 * (r_emb[-clamp_len:]); distances past its end use its first row */
static int
n_dist_learned(const struct txl_model *m, int clamp_len, int mem_len,
	       int klen_max)
{
	const int K = m->hp.max_klen;
	const int rows = clamp_len > 0 && clamp_len < K ? clamp_len : K;

	(void)mem_len;
	return rows < klen_max ? rows : klen_max;
}

/* attn_type 0: R[l] = r_net_l(sinusoid(distance)), distances 0 ..
 * n_dist-1: the relative-position term depends on the distance only, so
 * it is computed once per session. */
static enum txl_status
init_partial(struct txl_attn *a, const struct txl_kv *kv)
{
	const struct txl_hparams *hp = &a->model->hp;
	const int d = hp->d_model, hd = hp->n_head * hp->d_head;
	float *pe = txl_alloc_floats((size_t)a->n_dist * (size_t)d);

	if (!pe)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	for (int t = 0; t < a->n_dist; t++)
		txl_sinusoid(pe + (size_t)t * d, (float)t, d);
	float *rf = txl_alloc_floats((size_t)a->n_dist * (size_t)hd);

	if (!rf) {
		free(pe);
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	}
	for (int l = 0; l < hp->n_layer; l++) {
		a->r[l] = txl_kv_alloc(kv, (size_t)a->n_dist);
		if (!a->r[l]) {
			free(pe);
			free(rf);
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
		}
		/* in floats, then head-major in the memory's type */
		txl_mat_mul(rf, pe, a->n_dist, &a->model->layers[l].r_net,
			    false, a->shape.compute);
		for (int t = 0; t < a->n_dist; t++)
			txl_kv_store(kv, a->r[l], a->n_dist, t,
				     rf + (size_t)t * hd);
	}
	free(pe);
	free(rf);
	return TXL_OK;
}

/* attn_type 1: the rows of r_emb and r_bias by distance.  After the cut
 * to the last clamp_len rows and the padding with the first row
 * (RelLearnableMultiHeadAttn.forward), distance t is row max_klen-1-t of
 * the model's table, and every distance from n_dist-1 on is row
 * max_klen - n_dist when the cut table is shorter than the window. */
static enum txl_status
init_learned(struct txl_attn *a, const struct txl_kv *kv)
{
	const struct txl_hparams *hp = &a->model->hp;
	const int H = hp->n_head, hd = H * hp->d_head, K = hp->max_klen;

	a->r_bias = calloc((size_t)hp->n_layer, sizeof *a->r_bias);
	if (!a->r_bias)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	for (int l = 0; l < hp->n_layer; l++) {
		const struct txl_layer *ly = &a->model->layers[l];

		a->r[l] = txl_kv_alloc(kv, (size_t)a->n_dist);
		a->r_bias[l] = txl_alloc_floats((size_t)a->n_dist * (size_t)H);
		if (!a->r[l] || !a->r_bias[l])
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
		for (int t = 0; t < a->n_dist; t++) {
			size_t row = (size_t)(K - 1 - t);
			txl_kv_store(kv, a->r[l], a->n_dist, t,
				     ly->r_emb + row * hd);
			memcpy(a->r_bias[l] + (size_t)t * H,
			       ly->r_bias + row * H, sizeof(float) * H);
		}
	}
	return TXL_OK;
}

const struct txl_attn_kind txl_attn_rel_partial = {
	.name = "relative positions with global biases (Transformer-XL)",
	.memory = true,
	.proj = TXL_PROJ_QKV,
	.relative = true,
	.w_bias = true,
	.r_query_bias = true,
	.n_dist = n_dist_partial,
	.init = init_partial,
};

const struct txl_attn_kind txl_attn_rel_learned = {
	.name = "learnable relative positions (Shaw et al.)",
	.memory = true,
	.proj = TXL_PROJ_QKV,
	.relative = true,
	.w_bias = true,
	.r_bias = true,
	.n_dist = n_dist_learned,
	.init = init_learned,
};
