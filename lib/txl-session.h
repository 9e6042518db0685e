/* SPDX-License-Identifier: MIT */
/*
 * txl-session.h - a session's state (txl-session.c: its settings, buffers
 * and life; txl-forward.c: the forward pass; txl-attn.c: attention;
 * txl-output.c: the output layer; txl-state.c: state files).  Not
 * installed.
 */
#ifndef TXL_SESSION_H
#define TXL_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "txl.h"
#include "txl-alloc.h"
#include "txl-model.h"

struct txl_session {
	const struct txl_model *model;
	struct txl_session_params params;	/* resolved */
	int mem_len, seg_len, clamp_len;
	bool same_length;
	int stride;		/* models without memory: tokens per window */

	/* memory: positions [kv_start, kv_start + mlen) of k[l] and v[l],
	 * held in kv_dt (params.kv_type), as are the rows of r.  Head-major
	 * (txl_kv_row()): a head's keys are contiguous, so that its pass
	 * over a long memory streams rather than picking d_head values out
	 * of every n_head * d_head (two to four times faster reads of a
	 * 3,800-position memory in a micro-benchmark) */
	int cap;		/* positions per K/V buffer */
	int kv_start, mlen;
	int64_t n_past;
	enum txl_dtype kv_dt;	/* TXL_F32, TXL_F16, TXL_BF16, TXL_Q8_0 or
				   TXL_Q4_0 */
	size_t kv_row;		/* bytes of one head's row: d_head values */
	uint8_t **k, **v;	/* (n_layer) x (n_head, cap, d_head) */

	/* models without memory (attn_type 2, 3): the last seg_len tokens
	 * fed, the context of the next window */
	int32_t *window;	/* (2 * seg_len): n_window, then a group */
	int n_window;

	/* the output layer: the model's, or the session's own copy of a
	 * full softmax once txl_session_adapt() has changed it */
	float *own_out_w, *own_out_b;	/* NULL until the first adapt */
	struct txl_mat out_w;
	const float *out_b;

	float *last_h;		/* (d_model) output of the last position fed */
	bool have_last;
	/* the output rows of the last eval: the last layer's outputs, from
	 * which logits, scores and samples are computed on demand */
	float *rows;		/* (seg_len, d_model) */
	int n_logits;		/* rows held */
	bool logits_valid;	/* logits computed for them */
	const float *logits_src; /* the logits' output-layer inputs (rows of
				    `rows` or xn), for txl_session_adapt() */

	/* position tables of the relative attentions (txl-attn.c):
	 * per layer, row t is the term of distance t */
	int n_dist;		/* rows: distances 0 .. n_dist-1 */
	uint8_t **r;		/* (n_layer) x (n_head, n_dist, d_head), in
				   kv_dt */
	float **r_bias;		/* attn_type 1: (n_layer) x (n_dist, n_head) */
	int n_pos;		/* attn_type 2: rows of pos */
	float *pos;		/* attn_type 2: (n_pos, d_model) sinusoids */

	/* scratch, sized for seg_len rows */
	float *h;		/* (seg_len, d_model) the residual stream */
	float *xn;		/* (seg_len, max(d_model, d_embed)) */
	float *qkv;		/* (seg_len, 3 * n_head * d_head) */
	/* segments of more queries (txl-attn.c, attend_segment()): a slot
	 * of scratch per thread */
	float *seg;		/* seg_slots slots */
	int seg_slots;
	/* segments of a few queries (txl-attn.c, txl_attn_bytes()) */
	int klen_max;		/* the most keys a query sees */
	float *fq;		/* q + r_w_bias, q + r_r_bias per query, head */
	int16_t *fq16;		/* with a Q8_0 memory: the queries of fq (or
				   q itself) in int16, per query and head */
	float *fq16d;		/* their scales, one per TXL_QK values */
	int8_t *fq8;		/* with a Q4_0 memory: the same in int8 */
	float *fq8d;		/* their scales */
	int32_t *fq8off;	/* their offsets (struct txl_q8_act) */
	float *fsc;		/* scores per head, query: klen_max each */
	float *part;		/* per head, key block, query: the partial
				   softmax (d_head sums, max, sum of exps) */
	float *attn;		/* (seg_len, n_head * d_head) */
	float *tmp;		/* (seg_len, d_model) */
	float *ff;		/* (seg_len, d_inner) */
	float *logits;		/* (seg_len, n_token) */
	float *head;		/* adaptive softmax: (seg_len, head size) */
};

/* true if the session's abort callback asks to stop */
static inline bool
txl_aborted(const struct txl_session *s)
{
	return s->params.abort_cb && s->params.abort_cb(s->params.abort_data);
}

/* 64-byte aligned room for `rows` positions of K, V or R (every head)
 * in the session's kv_dt. */
static inline uint8_t *
txl_alloc_kv(const struct txl_session *s, size_t rows)
{
	return txl_alloc_bytes(rows * (size_t)s->model->hp.n_head * s->kv_row);
}

/* Row `pos` of head h in a head-major buffer of `rows` positions. */
static inline uint8_t *
txl_kv_row(const struct txl_session *s, uint8_t *buf, int rows, int h,
	   int pos)
{
	return buf + ((size_t)h * (size_t)rows + (size_t)pos) * s->kv_row;
}
/* The storage type of a kv_type (TXL_N_DTYPES if it is none). */
enum txl_dtype txl_kv_dtype(int kv_type);

#endif /* TXL_SESSION_H */
