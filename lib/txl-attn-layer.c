/* SPDX-License-Identifier: MIT */
/*
 * txl-attn-layer.c - a layer's attention: the projections of its input
 * to queries, keys and values (for the rows of every stream of a forward
 * pass at once), then for each stream its keys and values into its
 * memory (so that the memory's are computed once) and the attention of
 * its queries over the memory and themselves on one of two paths: a few
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
#include "txl-rows.h"

void
txl_attn_positions(const struct txl_attn *a, int l, float *h, int n)
{
	if (a->kind->positions)
		a->kind->positions(a, l, h, n);
}

void
txl_attn_project(const struct txl_attn *a, int l, const float *h, float *xn,
		 float *buf, const struct txl_rows *r, struct txl_qkv *out)
{
	const struct txl_hparams *hp = &a->model->hp;
	const struct txl_layer *ly = &a->model->layers[l];
	const int d = hp->d_model, hd = hp->n_head * hp->d_head, n = r->n;
	const float *src = h;

	if (hp->pre_lnorm) {
		txl_layer_norm(xn, h, ly->ln_attn_g, ly->ln_attn_b, n, d,
			       a->model->ln_eps);
		src = xn;
	}
	switch (a->kind->proj) {
	case TXL_PROJ_QKV:
		/* w_heads = qkv_net(cat): q, k, v side by side */
		txl_rows_mul(buf, src, r, &ly->qkv);
		*out = (struct txl_qkv){ .q = buf, .kv = buf + hd,
					 .qs = 3 * hd, .kvs = 3 * hd };
		break;
	case TXL_PROJ_Q_KV:
	default:
		txl_rows_mul(buf, h, r, &ly->q_net);
		txl_rows_mul(buf + (size_t)n * hd, src, r, &ly->kv_net);
		*out = (struct txl_qkv){ .q = buf, .kv = buf + (size_t)n * hd,
					 .qs = hd, .kvs = 2 * hd };
		break;
	}
}

void
txl_attn_append(const struct txl_kv *kv, int l, const struct txl_qkv *p,
		int first, int n, int hd)
{
	for (int i = 0; i < n; i++) {
		const float *k = p->kv + (size_t)(first + i) * p->kvs;
		txl_kv_append(kv, l, i, k, k + hd);
	}
}

void
txl_attn_rows(struct txl_attn *a, struct txl_kv *kv, int l,
	      const struct txl_qkv *p, int first, int n, float *out)
{
	const int hd = a->model->hp.n_head * a->model->hp.d_head;
	const float *q = p->q + (size_t)first * p->qs;

	txl_attn_append(kv, l, p, first, n, hd);
	if (n <= TXL_ATTN_FEW_MAX)
		txl_attn_few(a, kv, l, n, q, p->qs, out);
	else
		txl_attn_seg(a, kv, l, n, q, p->qs, out);
}
