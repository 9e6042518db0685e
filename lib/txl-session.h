/* SPDX-License-Identifier: MIT */
/*
 * txl-session.h - a session: one stream of text, with its settings, its
 * memory, its attention, its output layer and the rows it computes in
 * (txl-session.c; state files: txl-state.c; sampling: txl-sample.c).
 * Not installed.
 */
#ifndef TXL_SESSION_H
#define TXL_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "txl.h"
#include "txl-attn.h"
#include "txl-kv.h"
#include "txl-model.h"
#include "txl-output.h"

struct txl_session {
	const struct txl_model *model;
	struct txl_session_params params;	/* resolved */
	int mem_len, seg_len, clamp_len;
	bool same_length;
	int stride;		/* models without memory: tokens per window */
	int64_t n_past;		/* tokens fed */

	struct txl_kv kv;	/* the memory */
	struct txl_attn attn;
	struct txl_out out;

	/* models without memory (attn_type 2, 3): the last seg_len tokens
	 * fed, the context of the next window */
	int32_t *window;	/* (2 * seg_len): n_window, then a group */
	int n_window;

	float *last_h;		/* (d_model) output of the last position fed */
	bool have_last;

	/* the rows a segment is computed in (struct txl_forward) */
	float *h;		/* (seg_len, d_model) the residual stream */
	float *xn;		/* (seg_len, max(d_model, d_embed)) */
	float *att;		/* (seg_len, n_head * d_head) */
	float *tmp;		/* (seg_len, d_model) */
	float *ff;		/* (seg_len, d_inner) */
};

#endif /* TXL_SESSION_H */
