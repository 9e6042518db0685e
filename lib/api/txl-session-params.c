/* SPDX-License-Identifier: MIT */
/*
 * txl-session-params.c - a session's settings without a session: their
 * defaults, resolved and checked against a model, what each head keeps
 * of the memory, and what they make of a text (the receptive field, the
 * start of the tail that determines the state).
 */
#include <stdbool.h>
#include <stdint.h>

#include "txl-session-params.h"
#include "txl-attn.h"
#include "txl-kv.h"
#include "txl-log.h"
#include "txl-types.h"

struct txl_session_params
txl_session_params_default(void)
{
	return (struct txl_session_params){
		.size = sizeof(struct txl_session_params),
		.mem_len = TXL_FROM_MODEL,
		.seg_len = TXL_FROM_MODEL,
		.clamp_len = TXL_FROM_MODEL,
		.same_length = TXL_FROM_MODEL,
		.n_threads = 0,
		.stride = TXL_FROM_MODEL,
		.kv_type = TXL_KV_F32,
		.mem_init = TXL_FROM_MODEL,
	};
}

enum txl_status
txl_session_params_resolve(const struct txl_model *m,
			   const struct txl_session_params *in,
			   struct txl_session_params *out)
{
	const size_t min = TXL_END_OF(struct txl_session_params, kv_type);
	struct txl_session_params p = txl_session_params_default();
	enum txl_status st;

	if (!m || !out)
		return txl_fail(TXL_ERR_INVALID, "no model or no params to "
				"resolve into");
	if (in && (st = txl_copy_sized(&p, min, sizeof p, in,
				       "txl_session_params")) != TXL_OK)
		return st;

	const struct txl_hparams *hp = &m->hp;
	const bool memory = txl_attn_has_memory(hp);

	if (p.mem_len == TXL_FROM_MODEL)
		p.mem_len = memory ? hp->mem_len : 0;
	if (p.seg_len == TXL_FROM_MODEL)
		p.seg_len = hp->tgt_len;
	if (p.clamp_len == TXL_FROM_MODEL)
		p.clamp_len = hp->clamp_len;
	if (p.same_length == TXL_FROM_MODEL)
		p.same_length = memory && hp->same_length;
	if (p.stride == TXL_FROM_MODEL && !memory)
		p.stride = 1;
	if (p.mem_init == TXL_FROM_MODEL)
		p.mem_init = txl_attn_kind(hp->attn_type)->zero_memory
			? TXL_MEM_ZEROS : TXL_MEM_EMPTY;
	if (p.mem_len < 0 || p.mem_len > TXL_MEM_LEN_MAX)
		return txl_fail(TXL_ERR_INVALID, "mem_len %d out of range "
				"[0, %d]", p.mem_len, TXL_MEM_LEN_MAX);
	if (p.mem_len > 0 && !memory)
		return txl_fail(TXL_ERR_INVALID, "mem_len %d: a model of "
				"attn_type %d has no memory (the original code "
				"runs it with mem_len 0 only); it recomputes a "
				"window of seg_len tokens instead", p.mem_len,
				hp->attn_type);
	if (p.seg_len < 1 || p.seg_len > TXL_SEG_LEN_MAX)
		return txl_fail(TXL_ERR_INVALID, "seg_len %d out of range "
				"[1, %d]", p.seg_len, TXL_SEG_LEN_MAX);
	if (p.clamp_len < 0)
		return txl_fail(TXL_ERR_INVALID, "clamp_len %d is negative "
				"(0 = no clamping)", p.clamp_len);
	if (p.same_length != 0 && p.same_length != 1)
		return txl_fail(TXL_ERR_INVALID, "same_length must be 0 or 1");
	if (p.same_length && p.mem_len == 0)
		return txl_fail(TXL_ERR_INVALID, "same_length with mem_len 0 "
				"would mask every position");
	if (memory && p.stride != TXL_FROM_MODEL)
		return txl_fail(TXL_ERR_INVALID, "stride %d: only models "
				"without memory (attn_type 2, 3) evaluate "
				"windows", p.stride);
	if (!memory && (p.stride < 1 || p.stride > p.seg_len))
		return txl_fail(TXL_ERR_INVALID, "stride %d out of range "
				"[1, seg_len %d]", p.stride, p.seg_len);
	if (p.n_threads < 0)
		return txl_fail(TXL_ERR_INVALID, "n_threads %d is negative",
				p.n_threads);
	if (p.mem_init != TXL_MEM_EMPTY && p.mem_init != TXL_MEM_ZEROS)
		return txl_fail(TXL_ERR_INVALID, "mem_init %d is neither "
				"TXL_MEM_EMPTY nor TXL_MEM_ZEROS", p.mem_init);
	if (p.mem_init == TXL_MEM_EMPTY &&
	    txl_attn_kind(hp->attn_type)->zero_memory)
		return txl_fail(TXL_ERR_INVALID, "mem_init empty: an "
				"adaptive-span model's memory always starts as "
				"zero states, as its original code evaluates "
				"it");
	if (p.mem_init == TXL_MEM_ZEROS && hp->pre_lnorm && p.mem_len > 0)
		return txl_fail(TXL_ERR_INVALID, "mem_init zeros: the zero "
				"states of a pre-LayerNorm model have keys "
				"and values that are not 0, which libtxl does "
				"not compute");
	if (txl_kv_dtype(p.kv_type) == TXL_N_DTYPES) {
		char types[160];

		txl_kv_type_names(types, sizeof types);
		return txl_fail(TXL_ERR_INVALID, "kv_type %d is none of %s",
				p.kv_type, types);
	}
	const struct txl_type *kt = txl_type(txl_kv_dtype(p.kv_type));
	if (hp->d_head % kt->block != 0)
		return txl_fail(TXL_ERR_INVALID, "kv_type %s needs d_head "
				"to be a multiple of %d (blocks of %d values "
				"per head); this model's d_head is %d",
				kt->name, kt->block, kt->block, hp->d_head);
	if ((st = txl_attn_check(m, &p)) != TXL_OK)
		return st;
	/* heads with spans keep no more than their windows */
	if (m->spans && p.mem_len > m->window_max)
		p.mem_len = m->window_max;
	return txl_copy_sized_out(out, min, sizeof p, &p, "txl_session_params");
}

int
txl_head_keep(const struct txl_model *m, int l, int h, int mem_len)
{
	const struct txl_head_span *sp = m->spans ?
		&m->spans[(size_t)l * m->hp.n_head + h] : NULL;
	/* a head with a span keeps its layer's window: the keys past its
	 * span count in its softmax's partition function (none if it reads
	 * nothing) */
	const int keep = !sp ? mem_len : sp->n > 0 ? sp->w : 0;

	return keep < mem_len ? keep : mem_len;
}

/* The positions of layer l that a segment's queries read before the
 * segment: its heads' longest memory. */
static int
layer_keep(const struct txl_model *m, int l, int mem_len)
{
	const int w = txl_model_layer_window(m, l);

	return w >= 0 && w < mem_len ? w : mem_len;
}

/* The tokens at the end of a text that determine a session's state.  A
 * memory of mem_len positions: the input of layer l+1 at position p is
 * computed from the inputs of layer l at the positions of the memory the
 * segment of p attends to and those of the segment up to p, [s - keep, p]
 * for a segment starting at s, so that p depends on the tokens from
 * s - keep, at most keep + n - 1 before it in segments of n; through
 * every layer, sum over l of (keep_l + n - 1) before the last token.  The
 * memory after the text, its last mem_len positions of each layer, and
 * the last output lie inside that field, and every computation of it sees
 * a memory full of positions of the field alone: read from a segment's
 * start that far back, into any memory, they are the same computations on
 * the same numbers.  (same_length sees less of the memory: counted
 * whole; an adaptive-span head keeps its layer's window.)  Without
 * memory: the window of seg_len tokens. */
int64_t
txl_session_receptive_field(const struct txl_model *m,
			    const struct txl_session_params *params,
			    int n_at_once)
{
	struct txl_session_params p = txl_session_params_default();
	int64_t field = 1;

	if (!m) {
		txl_fail(TXL_ERR_INVALID, "txl_session_receptive_field: no "
			 "model");
		return -1;
	}
	if (txl_session_params_resolve(m, params, &p) != TXL_OK)
		return -1;
	if (n_at_once < 1 || n_at_once > p.seg_len) {
		txl_fail(TXL_ERR_INVALID, "txl_session_receptive_field: %d "
			 "tokens at once out of range [1, seg_len %d]",
			 n_at_once, p.seg_len);
		return -1;
	}
	if (!txl_attn_has_memory(&m->hp))
		return p.seg_len;
	for (int l = 0; l < m->hp.n_layer; l++)
		field += layer_keep(m, l, p.mem_len) + n_at_once - 1;
	return field;
}

/* Where the tail of a text of n tokens that determines the state
 * starts, for a whole read's segments: the token m_L = n - 1 reads, in
 * layer L - 1, the inputs of that layer from the start of its memory,
 * m_(L-1) = seg_start(m_L) - keep_(L-1), and so on down to the tokens,
 * m_0; reading from the start of m_0's segment, every computation of the
 * field sees a memory full of the field's positions (as in
 * txl_session_receptive_field(), which is this for the worst end of a
 * segment).  Without memory: the last seg_len tokens, from the start of
 * a group of stride. */
int64_t
txl_session_tail_start(const struct txl_model *m,
		       const struct txl_session_params *params, int64_t n)
{
	struct txl_session_params p = txl_session_params_default();
	int64_t x = n - 1;

	if (!m) {
		txl_fail(TXL_ERR_INVALID, "txl_session_tail_start: no model");
		return -1;
	}
	if (txl_session_params_resolve(m, params, &p) != TXL_OK)
		return -1;
	if (n < 0) {
		txl_fail(TXL_ERR_INVALID, "txl_session_tail_start: a text of "
			 "%lld tokens", (long long)n);
		return -1;
	}
	if (!txl_attn_has_memory(&m->hp)) {
		x = n - p.seg_len;
		return x > 0 ? x / p.stride * p.stride : 0;
	}
	for (int l = m->hp.n_layer - 1; l >= 0 && x > 0; l--)
		x = x / p.seg_len * p.seg_len - layer_keep(m, l, p.mem_len);
	return x > 0 ? x / p.seg_len * p.seg_len : 0;
}
