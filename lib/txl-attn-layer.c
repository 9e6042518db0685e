/* SPDX-License-Identifier: MIT */
/*
 * txl-attn-layer.c - a layer's attention: the projections of its input
 * to queries, keys and values, the keys and values into the memory (so
 * that the memory's are computed once), then the attention of the
 * queries over the memory and themselves on one of two paths: a few
 * queries (generation: one) pass over K, R and V once for every head
 * (txl-attn-few.c), longer segments take sgemm (txl-attn-seg.c).
 *
 * Either path scores content and (relative kinds) position, masks
 * causally (with same_length, exactly the last mem_len positions), and
 * weighs the values by the softmax.  K, V and R are held in the memory's
 * type (F32, or F16 / BF16 with --kv-type: half the bytes a token with a
 * long memory reads; Q8_0: a bit more than a quarter, each head's row of
 * d_head values in blocks of 32; Q4_0: the same in 4 bits, a seventh) and
 * read as stored; the queries and scores stay in float.
 */
#include "txl-attn.h"
#include "txl-ops.h"
#include "txl-products.h"

void
txl_attn_positions(const struct txl_attn *a, int l, float *h, int n)
{
	if (a->kind->positions)
		a->kind->positions(a, l, h, n);
}

/* The queries of the n rows h into a->qkv (row stride returned) and their
 * keys and values into rows [start + fill, start + fill + n) of the
 * memory, by the kind's projection (enum txl_attn_proj). */
static int
project(struct txl_attn *a, struct txl_kv *kv, int l, const float *h,
	float *xn, int n)
{
	const struct txl_hparams *hp = &a->model->hp;
	const struct txl_layer *ly = &a->model->layers[l];
	const int d = hp->d_model, hd = hp->n_head * hp->d_head;
	const int at = kv->start + kv->fill;
	const float *src = h;
	const float *kvr;
	int q_stride, kv_stride;

	if (hp->pre_lnorm) {
		txl_layer_norm(xn, h, ly->ln_attn_g, ly->ln_attn_b, n, d);
		src = xn;
	}
	switch (a->kind->proj) {
	case TXL_PROJ_QKV:
		/* w_heads = qkv_net(cat): q, k, v side by side */
		txl_mat_mul(a->qkv, src, n, &ly->qkv, false);
		q_stride = kv_stride = 3 * hd;
		kvr = a->qkv + hd;
		break;
	case TXL_PROJ_Q_KV:
	default: {
		float *kvbuf = a->qkv + (size_t)n * hd;
		txl_mat_mul(a->qkv, h, n, &ly->q_net, false);
		txl_mat_mul(kvbuf, src, n, &ly->kv_net, false);
		q_stride = hd;
		kv_stride = 2 * hd;
		kvr = kvbuf;
		break;
	}
	}
	for (int i = 0; i < n; i++) {
		const float *k = kvr + (size_t)i * kv_stride;
		txl_kv_store(kv, kv->k[l], kv->cap, at + i, k);
		txl_kv_store(kv, kv->v[l], kv->cap, at + i, k + hd);
	}
	return q_stride;
}

void
txl_attn_forward(struct txl_attn *a, struct txl_kv *kv, int l,
		 const float *h, float *xn, float *out, int n)
{
	const int qs = project(a, kv, l, h, xn, n);

	if (n <= TXL_ATTN_FEW_MAX)
		txl_attn_few(a, kv, l, n, qs, out);
	else
		txl_attn_seg(a, kv, l, n, qs, out);
}
