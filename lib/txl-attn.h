/* SPDX-License-Identifier: MIT */
/*
 * txl-attn.h - the attentions (txl-attn.c).  Not installed.
 */
#ifndef TXL_ATTN_H
#define TXL_ATTN_H

#include "txl-session.h"

/* Attention (txl-attn.c), every attn_type behind one interface:
 *   txl_attn_has_memory whether sessions keep a memory (the relative
 *                      attentions) or recompute windows (the absolute);
 *   txl_attn_n_dist    rows of the relative-position tables (0 for the
 *                      absolute attentions);
 *   txl_attn_bytes     the bytes of txl_attn_init()'s scratch buffers;
 *   txl_attn_init      the session's position tables and scratch buffers
 *                      (once per session);
 *   txl_attn_positions absolute positions added to the input of layer l
 *                      (attn_type 2 and 3; nothing for the relative ones);
 *   txl_attn_forward   the multi-head attention of the n rows of s->h
 *                      (layer l's input) over the window rows [base, base
 *                      + mlen + n) of its K and V (whose last n rows it
 *                      computes), into s->attn, before o_net. */
bool txl_attn_has_memory(const struct txl_hparams *hp);
int txl_attn_n_dist(const struct txl_hparams *hp, int clamp_len,
		    int klen_max);
double txl_attn_bytes(const struct txl_hparams *hp, int seg_len,
		      int klen_max, int n_dist, enum txl_dtype kv_dt,
		      int threads);
enum txl_status txl_attn_init(struct txl_session *s, int klen_max);
void txl_attn_free(struct txl_session *s);
void txl_attn_positions(struct txl_session *s, int l, int n);
void txl_attn_forward(struct txl_session *s, int l, int n, int base);

#endif /* TXL_ATTN_H */
