/* SPDX-License-Identifier: MIT */
/*
 * txl-sample.h - a sampler's state (txl-sample.c), which sampling from a
 * session's clusters (txl-sample-clusters.c) reads too.  Not installed.
 */
#ifndef TXL_SAMPLE_H
#define TXL_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#include "txl.h"

/* What the text waits for to end its last character: @need more
 * continuation bytes, the next in [lo, hi] (RFC 3629's table: no
 * overlong forms, no surrogates, nothing past U+10FFFF). */
struct utf8_wait {
	uint8_t need, lo, hi;
};

struct txl_sampler {
	struct txl_sampler_params p;
	int n_vocab;
	uint64_t rng;
	int32_t *history;	/* ring of the last repeat_last_n tokens */
	int n_hist, hist_pos;
	float *work;		/* (n_vocab) penalised logits, then probs */
	int32_t *idx;		/* (n_vocab) candidate ids */
	float *aux;		/* (n_vocab) typical's distances */
	uint32_t *seen;		/* (n_vocab) repeat penalty: stamp of the
				   last draw that penalised the token */
	uint32_t stamp;
	int32_t *count;		/* (n_vocab) draws of each token, for the
				   frequency and presence penalties */
	int32_t *drawn;		/* the tokens of count > 0 */
	int n_drawn;
	int32_t *bias_ids;	/* logit bias, owned */
	float *bias;
	int n_bias;
	float mu;		/* mirostat: the surprise cut, bits */

	/* txl_sampler_keep_utf8(): the model's pieces, the tokens that
	 * cannot start a character (masked between characters) and those
	 * that start with a continuation byte (the only candidates inside
	 * one), and what the text waits for now */
	const struct txl_model *u8_model;
	int32_t *u8_bad, *u8_cont;
	int n_u8_bad, n_u8_cont;
	struct utf8_wait u8;
	float *u8_keep;		/* (n_u8_cont) logits kept inside a char */
};

/* The next number of the sampler's random stream: uniform in [0, 1), 24
 * random bits. */
float txl_sampler_random(struct txl_sampler *s);

#endif /* TXL_SAMPLE_H */
