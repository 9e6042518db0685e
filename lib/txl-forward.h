/* SPDX-License-Identifier: MIT */
/*
 * txl-forward.h - the forward pass of a segment (txl-forward.c).  Not
 * installed.
 */
#ifndef TXL_FORWARD_H
#define TXL_FORWARD_H

#include "txl.h"
#include "txl-attn.h"
#include "txl-kv.h"
#include "txl-model.h"

/* What the forward pass of a segment works on: a stream's memory and
 * attention, and the rows it computes in (seg_len rows each). */
struct txl_forward {
	const struct txl_model *model;
	struct txl_kv *kv;
	struct txl_attn *attn;
	int mem_len;		/* positions the memory keeps */
	float *h;		/* (seg_len, d_model) the residual stream:
				   the last layer's outputs at the end */
	float *xn;		/* (seg_len, max(d_model, d_embed)) */
	float *att;		/* (seg_len, n_head * d_head) */
	float *tmp;		/* (seg_len, d_model) */
	float *ff;		/* (seg_len, d_inner) */
	txl_abort_fn abort_cb;	/* asked before each layer */
	void *abort_data;
};

/* The forward pass of one segment of n <= seg_len tokens: the last
 * layer's outputs into f->h, the memory updated; TXL_ABORTED (the
 * memory as it was) if the abort callback asks. */
enum txl_status txl_forward_segment(const struct txl_forward *f,
				    const int32_t *tok, int n);

#endif /* TXL_FORWARD_H */
