/* SPDX-License-Identifier: MIT */
/*
 * txl-output.h - the output layer (txl-output.c).  Not installed.
 */
#ifndef TXL_OUTPUT_H
#define TXL_OUTPUT_H

#include "txl-session.h"

/* The output layer (txl-output.c). */
/* Append `rows` last-layer outputs to the rows of the output. */
void txl_output_keep(struct txl_session *s, const float *h, int rows);
/* The logits of every row held (s->logits), if not computed yet. */
void txl_output_logits(struct txl_session *s);
/* An adaptive softmax, one row at a time (for the sampler): the head's
 * log-probabilities of row r, the shortlist into short_lp[cutoffs[0]] and
 * the tail clusters into clus_lp[n_out - 1] (clus_lp[c - 1] = log p(the
 * token is in cluster c)); and the log-probabilities within cluster c of
 * row r into lp[hi - lo]. */
void txl_output_head(struct txl_session *s, int r, float *short_lp,
		     float *clus_lp);
void txl_output_tail(struct txl_session *s, int r, int c, float *lp);
/* The session's output layer back to the model's. */
void txl_output_reset(struct txl_session *s);

#endif /* TXL_OUTPUT_H */
