/* SPDX-License-Identifier: MIT */
/*
 * modes.h - txlgen's modes on the engine besides generation, which are
 * the txlgen program's alone: --score (score.c, with --kl-ref in
 * klref.c and --html in html.c; its parts joined by --score-merge in
 * parts.c), --score-docs (docs.c), --tokenize (tokenize.c, reading ids
 * in ids.c) and --info (info.c).
 */
#ifndef TXLGEN_MODES_H
#define TXLGEN_MODES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "txl.h"

#include "engine.h"

/** Score the text (or with --ids the token ids) of @p in (--score). */
int engine_score(struct engine *e, struct input *in, FILE *out);

/* --score --kl-ref REF (klref.c): REF scores the same tokens in the
 * same pass, and each token's two distributions are compared. */
struct kl_ref;

/** Load REF and make its session as the engine's (its segments and
 *  memory length; --kl-ref-kv-type, --kl-ref-compute); a vocabulary not
 *  the model's is refused (EXIT_USAGE).  *@p out is to be freed with
 *  kl_ref_free() whatever the result.  Returns an exit code. */
int kl_ref_open(struct engine *e, struct kl_ref **out);
void kl_ref_free(struct kl_ref *k);
/** Feed REF the @p n tokens the engine's session was just fed. */
int kl_ref_feed(struct engine *e, struct kl_ref *k, const int32_t *ids,
		int n);
/** Compare the @p n rows of @p model's last eval with REF's: @p targets
 *  the tokens that came, @p lp their log-probs under the model. */
int kl_ref_compare(struct kl_ref *k, struct txl_session *model,
		   const int32_t *targets, int n, const double *lp);
/** REF's fields of row @p r of the last comparison, for a JSON row. */
void kl_ref_json_row(const struct kl_ref *k, int r, FILE *out);
/** REF's figures and the comparison's, as summary lines or JSON fields
 *  (", \"key\": value"); @p bytes those of the text scored. */
void kl_ref_summary(struct kl_ref *k, FILE *out, bool json, double bytes);

/* --score --part K/N (score.c) and --score-merge (parts.c): one text
 * scored in parts, and the parts' summaries joined into the whole text's;
 * both write the summary's figures. */
/* What a summary of --score is made of: the tokens, their predictions,
 * the bytes and characters of their text, and the sum of the predictions'
 * NLL and of their squared deviations from its mean. */
struct score_figures {
	int64_t tokens, predicted;
	double bytes, chars;
	double sum_nll, m2;
};

/**
 * Write the summary of @p f (score.c): with @p json the start of the JSON
 * object ({"tokens": ..., "bpb_stderr": ...), for the caller to go on and
 * close, every number with the digits that read back the same double;
 * else a "key value" line each.
 */
void score_figures_write(FILE *out, bool json, const struct score_figures *f);

/**
 * --score-merge: read the summary lines of the parts in @p files (the
 * --json output of --score --part K/N, or its last line) and write the
 * whole text's summary, as one --score run writes it (@p json: its JSON
 * line).  A missing, repeated or interrupted part, or one of another run,
 * is refused with a line naming it.  Returns an exit code.
 */
int score_merge(const struct strlist *files, bool json, FILE *out);

/** Score each document of @p in from the memory now held (an empty one
 *  unless primed), one JSON object each on @p out (--score-docs). */
int engine_score_docs(struct engine *e, struct input *in, FILE *out);

/** Text to ids, or with --ids ids to text (--tokenize). */
int engine_list_tokens(struct engine *e, struct input *in, FILE *out);

/* Reading token ids from chunks of text: where the last chunk left off.
 * Start with { .line = 1 }. */
struct ids_reader {
	int64_t line;          /* for messages */
	bool in_token;         /* a token goes on in the next chunk */
	bool bad;              /* it holds a byte that is no digit */
	bool nul;              /* a NUL byte */
	long long value;       /* its value, saturated past INT32_MAX */
	char raw[96];          /* its first bytes, for messages */
	int raw_len;
	bool raw_more;
	char sig[96];          /* its first digits but leading zeros */
	int sig_len;
	bool sig_more;
};

/**
 * Parse the token ids in the chunk @p s of @p len bytes (whitespace-
 * separated; a token may go on in the next chunk) into @p t; @p s NULL:
 * the end of the input.  Returns an exit code (a bad id is reported,
 * naming @p name and the line).
 */
int engine_parse_ids(struct engine *e, const char *name, struct ids_reader *r,
		     const char *s, size_t len, struct tokvec *t);

/** Describe the model (--info), as text or JSON.  Returns an exit code. */
int engine_info(struct engine *e, FILE *out);

#endif /* TXLGEN_MODES_H */
