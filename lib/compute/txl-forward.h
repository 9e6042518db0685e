/* SPDX-License-Identifier: MIT */
/*
 * txl-forward.h - the forward pass of a segment, for one stream or for
 * the streams of a batch at once (txl-forward.c).  Not installed.
 */
#ifndef TXL_FORWARD_H
#define TXL_FORWARD_H

#include <stdbool.h>
#include <stddef.h>

#include "txl.h"
#include "txl-attn.h"
#include "txl-kv.h"
#include "txl-model.h"
#include "txl-rows.h"

/* A stream's part of a forward pass: its memory and attention, and its
 * tokens, which are rows [first, first + n) of the pass. */
struct txl_forward_stream {
	struct txl_kv *kv;
	struct txl_attn *attn;
	const int32_t *tok;
	int first, n;		/* 1 <= n <= its seg_len */
	txl_abort_fn abort_cb;	/* asked before each layer */
	void *abort_data;
};

/* A forward pass: its streams, in the order of their rows, those of one
 * token first (rows [0, rows.n_one)); and the rows it computes in. */
struct txl_forward {
	const struct txl_model *model;
	const struct txl_forward_stream *st;
	int n_st;
	struct txl_rows rows;
	float *h;		/* (rows, d_model) the residual stream:
				   the last layer's outputs at the end */
	float *xn;		/* (rows, max(d_model, d_embed)) */
	float *att;		/* (rows, n_head * d_head) */
	float *tmp;		/* (rows, d_model) */
	float *ff;		/* (rows, d_inner) */
	float *qkv;		/* (rows, 3 * n_head * d_head) */
};

/* The rows a pass of up to n rows computes in, its h, xn, att, tmp and
 * ff: a session's (n its seg_len) or a batch's (its max_rows). */
struct txl_seg_rows {
	float *h, *xn, *att, *tmp, *ff;
};

/* Allocate @p r's rows; false when memory runs out (what was allocated
 * is then txl_seg_rows_free()'s to free, as always). */
bool txl_seg_rows_alloc(struct txl_seg_rows *r,
			const struct txl_hparams *hp, size_t n);
void txl_seg_rows_free(struct txl_seg_rows *r);

/* The forward pass of one segment of each stream: the last layer's
 * outputs into f->h, every memory updated; TXL_ABORTED (every memory as
 * it was) if an abort callback asks.  Each row computes what it computes
 * in a pass of its stream alone: exactly for streams of one token, else
 * to the rounding of sgemm on other rows (txl-rows.h). */
enum txl_status txl_forward(const struct txl_forward *f);

#endif /* TXL_FORWARD_H */
