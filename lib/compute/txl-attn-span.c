/* SPDX-License-Identifier: MIT */
/*
 * txl-attn-span.c - the adaptive attention span (attn_type 4): the
 * SeqAttention of facebookresearch/adaptive-span (Sukhbaatar et al.,
 * 2019).
 *
 * A query attends to the positions before it, not to itself; the score of
 * the key at distance x is (q . k + q . key_pe[:, attn_span - x]) /
 * sqrt(d_head), with one table key_pe for every layer and head and no
 * biases.  After the softmax over the layer's window each head's soft
 * mask m(x) weighs the weights, which are divided by their sum + 1e-8:
 * the same as adding log m(x) to the scaled scores (txl_attn_mask()) and
 * dividing their exps by their sum + 1e-8 times the window's partition
 * function (txl_attn_divisor()).  A key whose mask is 0 weighs nothing:
 * a head reads the values of its span only (txl_attn_keys(); the spans:
 * struct txl_head_span, txl-model.c), and the keys of the rest of its
 * window for that partition function alone (txl_attn_rest()), which
 * matters where the head's scores favour those keys.  Each head's memory
 * keeps its layer's window, and starts as zero states (K = V = 0), as
 * the original's evaluation starts from a cache of zeros.
 *
 * The position table is held once, in the memory's type, row t the term
 * of distance t (row 0, the query's own position, is never read).
 */
#include <stdlib.h>
#include <string.h>

#include "txl-alloc.h"
#include "txl-attn.h"
#include "txl-log.h"
#include "txl-types.h"

/* distances 0 .. mem_len: a head keeps at most mem_len positions */
static int
n_dist_span(const struct txl_model *m, int clamp_len, int mem_len,
	    int klen_max)
{
	(void)m;
	(void)clamp_len;
	(void)klen_max;
	return mem_len + 1;
}

static enum txl_status
check_span(const struct txl_model *m, const struct txl_session_params *p)
{
	(void)m;
	if (p->clamp_len != 0)
		return txl_fail(TXL_ERR_INVALID, "clamp_len %d: an "
				"adaptive-span model's positions are its own "
				"table's (key_pe), which nothing clamps",
				p->clamp_len);
	if (p->same_length)
		return txl_fail(TXL_ERR_INVALID, "same_length: an "
				"adaptive-span model's heads attend to their "
				"spans, which same_length does not apply to");
	return TXL_OK;
}

/* R[t] = key_pe[:, attn_span - t] for t = 1 .. n_dist - 1, R[0] = 0 */
static enum txl_status
init_span(struct txl_attn *a, const struct txl_kv *kv)
{
	const struct txl_hparams *hp = &a->model->hp;
	const int D = hp->d_head, S = hp->attn_span;
	float *col = txl_alloc_floats((size_t)D);
	uint8_t *r = txl_alloc_bytes((size_t)a->n_dist * kv->row);

	if (!col || !r) {
		free(col);
		free(r);
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	}
	memset(r, 0, kv->row);
	for (int t = 1; t < a->n_dist; t++) {
		for (int d = 0; d < D; d++)
			col[d] = a->model->key_pe[(size_t)d * S + (S - t)];
		txl_narrow(r + (size_t)t * kv->row, col, kv->dt, (size_t)D);
	}
	free(col);
	for (int l = 0; l < hp->n_layer; l++)
		a->r[l] = r;
	return TXL_OK;
}

const struct txl_attn_kind txl_attn_adaptive_span = {
	.name = "adaptive attention span (Sukhbaatar et al.)",
	.memory = true,
	.proj = TXL_PROJ_QKV,
	.relative = true,
	.r_shared = true,
	.past_only = true,
	.zero_memory = true,
	.unscaled_input = true,
	.n_dist = n_dist_span,
	.check = check_span,
	.init = init_span,
};
