/* SPDX-License-Identifier: MIT */
/*
 * txl-attn-abs.c - the absolute attentions of mem_transformer.py
 * (MultiHeadAttn of the vanilla Transformer), whose positions are added
 * to the input rather than scored:
 *
 *   2  sinusoids added to the input of the first layer;
 *   3  learned positions (r_emb) added to the input of every layer.
 *
 * Models of either have no memory (the original code runs them with
 * mem_len 0 only): sessions recompute a window instead.
 */
#include "txl-alloc.h"
#include "txl-attn.h"
#include "txl-log.h"
#include "txl-ops.h"

/* attn_type 2: sinusoids of positions 0 .. n_pos-1 (clamped to clamp_len
 * like pos_seq), added to the input. */
static enum txl_status
init_sinusoid(struct txl_attn *a, const struct txl_kv *kv)
{
	const int d = a->model->hp.d_model;
	const int clamp = a->shape.clamp_len, seg = a->shape.seg_len;

	(void)kv;
	a->n_pos = clamp > 0 && clamp < seg ? clamp + 1 : seg;
	a->pos = txl_alloc_floats((size_t)a->n_pos * (size_t)d);
	if (!a->pos)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	for (int p = 0; p < a->n_pos; p++)
		txl_sinusoid(a->pos + (size_t)p * d, (float)p, d);
	return TXL_OK;
}

/* word_emb + pos_emb[-qlen:]: the last token is position 0 */
static void
add_sinusoid(const struct txl_attn *a, int l, float *h, int n)
{
	const int d = a->model->hp.d_model;

	if (l != 0)
		return;
	for (int i = 0; i < n; i++) {
		int p = n - 1 - i < a->n_pos ? n - 1 - i : a->n_pos - 1;
		const float *pe = a->pos + (size_t)p * d;
		float *hi = h + (size_t)i * d;
		for (int c = 0; c < d; c++)
			hi[c] += pe[c];
	}
}

/* attn_type 3: core_out += r_emb[l][-qlen:] (n <= max_klen: the session
 * refuses longer segments, as the original fails on them) */
static void
add_learned(const struct txl_attn *a, int l, float *h, int n)
{
	const struct txl_hparams *hp = &a->model->hp;
	const int d = hp->d_model;
	const float *pe = a->model->layers[l].r_emb +
		(size_t)(hp->max_klen - n) * d;

	for (size_t i = 0; i < (size_t)n * d; i++)
		h[i] += pe[i];
}

static enum txl_status
check_learned(const struct txl_model *m, const struct txl_session_params *p)
{
	if (p->seg_len > m->hp.max_klen)
		return txl_fail(TXL_ERR_INVALID, "seg_len %d is longer than "
				"the model's position table (max_klen %d)",
				p->seg_len, m->hp.max_klen);
	return TXL_OK;
}

const struct txl_attn_kind txl_attn_abs_sinusoid = {
	.name = "absolute sinusoidal positions at the input (vanilla "
		"Transformer)",
	.proj = TXL_PROJ_Q_KV,
	.init = init_sinusoid,
	.positions = add_sinusoid,
};

const struct txl_attn_kind txl_attn_abs_learned = {
	.name = "learned absolute positions in every layer (vanilla "
		"Transformer)",
	.proj = TXL_PROJ_Q_KV,
	.check = check_learned,
	.positions = add_learned,
};
