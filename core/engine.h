/* SPDX-License-Identifier: MIT */
/*
 * engine.h - txlgen's use of libtxl: the model and its session, and
 * feeding text into the memory (prompts, --prime) segment by segment.
 * The engine's parts are defined in engine-model.h, engine-sampling.h
 * and engine-streams.h, each included where its fields are read.
 * Generation (generate.c) builds on it, and so do txlgen-server and
 * txlgen's modes (cmd/modes.h: scoring, token listings, the model's
 * description), its batch mode (cmd/main.c) and its REPL (cmd/repl.c).
 */
#ifndef TXLGEN_ENGINE_H
#define TXLGEN_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "txl.h"

#include "errors.h"
#include "input.h"
#include "output.h"
#include "settings.h"

/* A growing array of token ids. */
struct tokvec {
	int32_t *v;
	int n, cap;
};

/*
 * A run's engine, in three parts, each defined in a header of its own
 * and seen by the files that use it:
 *   engine-model.h     the model, its path and the tokenizer's scratch;
 *   engine-sampling.h  the sampler, its settings and seeds, the window of
 *                      recent tokens (the repeat penalty's);
 *   engine-streams.h   the session and its memory, the batch of streams,
 *                      the state and statistics of generation.
 * engine_load_model() makes them, engine_close() frees them.
 */
struct engine_model;
struct engine_sampling;
struct engine_streams;

struct engine {
	struct txlgen_options *opts;
	struct engine_model *mod;
	struct engine_sampling *samp;
	struct engine_streams *streams;
};

void tokvec_add(struct tokvec *t, const int32_t *ids, int n);
void tokvec_drop(struct tokvec *t, int n);  /* the first n */

/** Load the model and apply its recommended settings to the settings
 *  that have their defaults; prints errors, returns an exit code. */
int engine_load_model(struct engine *e, struct txlgen_options *opts,
		      const char *model_path);

void engine_close(struct engine *e);

/** Turns of an interactive session (the REPL): the memory keeps the last
 *  token of each, one sampler goes on across them, and the output of
 *  each starts a line (its leading space dropped). */
void engine_interactive(struct engine *e);

/** The settings as the run uses them (--print-config, /show): a shallow
 *  copy of e->opts, valid while they are, with the model's path and the
 *  seed picked for a run without --seed.  (The session's values of the
 *  settings that default to the model's come from config_print().) */
void engine_effective_options(const struct engine *e,
			      struct txlgen_options *shown);

/** The session settings the options ask for (the library resolves what
 *  they leave to the model). */
void engine_session_params(const struct engine *e,
			   struct txl_session_params *p);

/** The settings of the engine's session, as the library resolved them
 *  (txl_session_get_params()). */
struct txl_session_params engine_params(const struct engine *e);

/** Whether the model computes as --compute asks (a message and
 *  EXIT_USAGE if not). */
int engine_check_compute(const struct engine *e);

/** Create the session, or apply the current settings to the live one,
 *  which keeps its memory (txl_session_set_params).  Returns an exit
 *  code; on error the live session is unchanged. */
int engine_apply_settings(struct engine *e);

/** A session of the engine's model with settings @p p that computes as
 *  the options ask (--compute): more streams of one run. */
enum txl_status engine_session_new(struct engine *e,
				   const struct txl_session_params *p,
				   struct txl_session **out);

/** The window of recent ids (e->samp->recent) after @p ids[0..n) were
 *  fed to the engine's session. */
void engine_note_fed(struct engine *e, const int32_t *ids, int n);

/** Give the sampler @p smp, new, the ids of the text the session holds
 *  (the last repeat_last_n), as if it had sampled after them. */
void engine_seed_sampler(const struct engine *e, struct txl_sampler *smp);

/** Forget the memory (and the sampler's history of recent tokens; its
 *  random stream goes on). */
void engine_reset(struct engine *e);

/** The library's reason for the last failure, or a generic one. */
const char *engine_lib_error(enum txl_status st);

/** The exit code of a library call's status during a run: EXIT_OK,
 *  EXIT_INTERRUPTED (aborted, or a signal came), or EXIT_RUNTIME with
 *  the library's message. */
int engine_run_status(enum txl_status st);

/** Tokenize @p text; returns the count (ids in m->ids) or -1. */
int engine_tokenize(struct engine_model *m, const char *text, size_t len);

/* The memory this machine can still give without swapping: MemAvailable
 * of /proc/meminfo (free memory and the caches it can drop), else the
 * physical memory (what --n-samples and the server's sessions are
 * weighed against). */
double engine_available_bytes(void);

/* A logit bias made for the model: token ids and the bias of each. */
struct logit_bias {
	int32_t *ids;
	float *bias;
	int n;
};

/* @p spec's items ("ID=BIAS", or "TEXT=BIAS" for every token of TEXT;
 * BIAS from -100 to 100, or -inf) into *@p lb (what it held freed).
 * EXIT_OK, or EXIT_USAGE with the item and @p what (the option or
 * field) named in *@p err (malloc'd). */
int engine_logit_bias(struct engine_model *m, const struct strlist *spec,
		      const char *what, struct logit_bias *lb, char **err);
void logit_bias_free(struct logit_bias *lb);
/* The engine's --logit-bias made again (after a /set); EXIT_USAGE
 * (reported) if it names what the model has not. */
int engine_make_bias(struct engine *e);

/** The bytes token @p id stands for (txl_token_piece), in a buffer of
 *  @p m's valid until the next call; *@p len their number.  NULL
 *  for an invalid id. */
const char *engine_piece(struct engine_model *m, int32_t id, int *len);

/** Does SentencePiece's decoder drop the leading space of token @p id's
 *  piece @p p when it starts a text?  (Only for tokenizers that add a
 *  space to every text.) */
bool engine_drops_space(struct engine_model *m, int32_t id, const char *p,
			int len);

/** Feed @p n tokens; reports errors.  Returns an exit code. */
int engine_feed(struct engine *e, const int32_t *ids, int n,
		enum txl_logits want);

/** The same into another session of the model (a stream of its own:
 *  --n-samples, --score-docs); e->streams->have_logits is left alone. */
int engine_feed_to(struct engine *e, struct txl_session *s,
		   const int32_t *ids, int n, enum txl_logits want);

/** Feed each session sessions[i] its n[i] tokens ids[i] (1 to seg_len)
 *  in one step of the engine's batch (made, or grown, for @p max_rows
 *  rows on first use), as engine_feed_to() of each;
 *  e->streams->have_logits set when the engine's session is one of
 *  them.  With @p logits, the logits of those that hold one row are
 *  computed from one read of the output layer.  Returns an exit code. */
int engine_feed_many(struct engine *e, struct txl_session *const *sessions,
		     const int32_t *const *ids, const int *n, int n_sessions,
		     enum txl_logits want, bool logits, int max_rows);

/** With --adapt, learn from the n rows of logits just computed, whose
 *  next tokens are targets[0..n-1].  Returns an exit code. */
int engine_adapt(struct engine *e, const int32_t *targets, int n);

/* How engine_feed_input() treats a text. */
struct feed_opts {
	bool drop_final_newlines;  /* as $(cat FILE): prompt files */
	struct txl_sampler *const *samplers; /* each gets every token
						(repeat penalty) */
	int n_samplers;
	struct output *echo;       /* gets the text read */
	bool progress;             /* progress line on a terminal */
};

/**
 * Feed the text of @p in into the memory in constant memory: tokenized
 * chunk by chunk, in whole segments aligned at its start (with --adapt
 * learning from each), the last segment giving the logits of the next
 * token; without --read-all or --adapt, a model with memory reads only
 * the segments of the receptive field at the end, the others counted
 * (e->streams->n_skipped), for the same state.  *@p n_tokens gets the
 * tokens fed, *@p bytes the bytes read (either may be NULL).  Returns an
 * exit code (EXIT_INTERRUPTED after a signal).
 */
int engine_feed_input(struct engine *e, struct input *in,
		      const struct feed_opts *fo, int64_t *n_tokens,
		      uint64_t *bytes);

/** Feed the file @p in (--prime).  Returns an exit code. */
int engine_prime(struct engine *e, struct input *in);

/** Save / load the memory; print errors; return an exit code.  A save
 *  that a signal interrupts (one that came after it began) leaves the old
 *  file and returns EXIT_INTERRUPTED. */
int engine_save(struct engine *e, const char *path);
/** Can a state be saved to @p path (before the work that leads to it)?
 *  What is there must be a regular file, the directory writable; else
 *  says why and returns EXIT_RUNTIME. */
int engine_check_save(const char *path);
int engine_load(struct engine *e, const char *path);

/** Print "memory: ..." lines (REPL /mem, --stats) to @p f. */
void engine_print_mem(struct engine *e, FILE *f, const char *prefix);

/* ---- the jobs, one file each ---- */

/**
 * Generate a continuation of the memory and @p prompt (NULL: none) to
 * @p out.  Returns an exit code (EXIT_INTERRUPTED after a signal);
 * e->streams->last holds the statistics.
 */
int engine_generate(struct engine *e, struct input *prompt,
		    struct output *out);

/** The token a text starts from when there is no prompt: the end of a
 *  previous text, as the original corpora separate texts; else BOS. */
int32_t engine_start_token(struct engine *e);

/** The last row of @p s's logits (the one that predicts what follows the
 *  text fed), or NULL. */
const float *engine_last_logits(struct engine *e, struct txl_session *s);

/** Sample one token from the current logits of @p s; -1 on error
 *  (reported).  Without @p ignore_eos the session samples: with an
 *  adaptive softmax, greedy and plain temperature sampling then go
 *  cluster by cluster, never computing the full distribution.  With it,
 *  *@p logprob is the token's under the model's full distribution when
 *  @p model_logprob, else under the distribution without the end. */
int32_t engine_sample(struct engine *e, struct txl_session *s,
		      struct txl_sampler *smp, bool ignore_eos,
		      bool model_logprob, double *logprob);

/** Write token @p tok to @p out; drop its leading space where the text
 *  starts (*@p drop_space, then cleared). */
enum out_status engine_emit(struct engine *e, struct output *out,
			    int32_t tok, double logprob, bool *drop_space);

/** The seed of sample @p k of --n-samples (or of choice k of a server's
 *  request) in a run of seed @p base: @p base itself for k = 0. */
uint64_t sample_seed(uint64_t base, int k);

/** Print the statistics of the last generation (--stats) to stderr. */
void engine_print_stats(struct engine *e);

#endif /* TXLGEN_ENGINE_H */
