/* SPDX-License-Identifier: MIT */
/*
 * parts.h - one text scored in parts (--score --part K/N) and the parts
 * joined again (--score-merge): what score.c and parts.c share.
 */
#ifndef TXLGEN_PARTS_H
#define TXLGEN_PARTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "settings.h"

/* What a summary of --score is made of: the tokens, their predictions,
 * the bytes and characters of their text, and the sum of the predictions'
 * NLL and of their squared deviations from its mean. */
struct score_figures {
	int64_t tokens, predicted;
	double bytes, chars;
	double sum_nll, m2;
};

/**
 * Write the summary of @p f: with @p json the start of the JSON object
 * ({"tokens": ..., "bpb_stderr": ...), for the caller to go on and close,
 * every number with the digits that read back the same double; else a
 * "key value" line each.
 */
void score_figures_write(FILE *out, bool json, const struct score_figures *f);

/** The tokens [*from, *to) of part @p k of @p n of a text of @p total. */
void part_range(int64_t total, int64_t k, int64_t n, int64_t *from,
		int64_t *to);

/** 64-bit FNV-1a of @p len bytes at @p p, going on from @p h (the first
 *  call: PART_HASH_SEED). */
#define PART_HASH_SEED 0xcbf29ce484222325ull
uint64_t part_hash(uint64_t h, const void *p, size_t len);

/**
 * --score-merge: read the summary lines of the parts in @p files (the
 * --json output of --score --part K/N, or its last line) and write the
 * whole text's summary, as one --score run writes it (@p json: its JSON
 * line).  A missing, repeated or interrupted part, or one of another run,
 * is refused with a line naming it.  Returns an exit code.
 */
int score_merge(const struct strlist *files, bool json, FILE *out);

#endif /* TXLGEN_PARTS_H */
