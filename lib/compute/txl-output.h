/* SPDX-License-Identifier: MIT */
/*
 * txl-output.h - the output layer of a session (txl-output.c).  Not
 * installed.
 */
#ifndef TXL_OUTPUT_H
#define TXL_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>

#include "txl.h"
#include "txl-model.h"
#include "txl-products.h"

/* A session's output layer: the model's, or its own copy of a full
 * softmax once txl_out_adapt() has changed it; the last layer's outputs
 * of the last eval (the rows), from which logits, scores and samples are
 * computed on demand. */
struct txl_out {
	const struct txl_model *model;
	int cap;		/* rows it can hold: seg_len */
	float *own_w, *own_b;	/* NULL until the first adapt */
	struct txl_mat w;	/* the full softmax's (or shortlist's) */
	const float *b;
	float *rows;		/* (cap, d_model) */
	int n_rows;		/* rows held */
	bool valid;		/* logits computed for them */
	const float *src;	/* the logits' output-layer inputs (rows of
				   `rows` or xn), for txl_out_adapt() */
	float *logits;		/* (cap, n_token) */
	float *head;		/* adaptive softmax: (cap, head size) */
	float *xn, *tmp;	/* the session's scratch: (cap, max(d_model,
				   d_embed)) and (cap, d_model) */
	enum txl_compute compute;	/* of the products (txl.h) */
};

/* Floats of the head of an adaptive softmax per row (0: none). */
int txl_out_head_size(const struct txl_hparams *hp);
/* An empty output of `cap` rows, borrowing the scratch xn and tmp; freed
 * with txl_out_free() in any case. */
enum txl_status txl_out_init(struct txl_out *o, const struct txl_model *m,
			     int cap, float *xn, float *tmp);
void txl_out_free(struct txl_out *o);

/* Forget the rows held (and their logits). */
void txl_out_clear(struct txl_out *o);
/* Append `rows` last-layer outputs to the rows held. */
void txl_out_keep(struct txl_out *o, const float *h, int rows);
/* The logits of every row held (o->logits), if not computed yet. */
void txl_out_logits(struct txl_out *o);
/* txl_out_logits() of n outputs of one model: those that hold one row
 * (of a full softmax without projection, or of an adaptive one) from one
 * read of the weights for all (txl_mul_each(), each row as alone; act:
 * its scratch for TXL_EACH_MAX rows), the others one by one. */
void txl_out_logits_many(struct txl_out *const *o, int n, float *act);
/* An adaptive softmax, one row at a time (for the sampler): the head's
 * log-probabilities of row r, the shortlist into short_lp[cutoffs[0]] and
 * the tail clusters into clus_lp[n_out - 1] (clus_lp[c - 1] = log p(the
 * token is in cluster c)); and the log-probabilities within cluster c of
 * row r into lp[hi - lo]. */
void txl_out_head(struct txl_out *o, int r, float *short_lp,
		  float *clus_lp);
void txl_out_tail(struct txl_out *o, int r, int c, float *lp);
/* txl_session_score() and txl_session_adapt() on the rows held. */
enum txl_status txl_out_score(struct txl_out *o, const int32_t *targets,
			      int n, double *logprobs);
enum txl_status txl_out_adapt(struct txl_out *o, const int32_t *targets,
			      int n, float lr);
/* The output layer back to the model's. */
void txl_out_reset(struct txl_out *o);
/* dst takes src's adapted output layer, if any (src goes back to the
 * model's). */
void txl_out_move_adapted(struct txl_out *dst, struct txl_out *src);
/* dst's output layer becomes a copy of src's (the model's, or an adapted
 * copy in dst's own buffers); TXL_ERR_NOMEM leaves dst unchanged. */
enum txl_status txl_out_copy_adapted(struct txl_out *dst,
				     const struct txl_out *src);

#endif /* TXL_OUTPUT_H */
