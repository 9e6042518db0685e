/* SPDX-License-Identifier: MIT */
/*
 * engine.h - what txlgen does with a model: feeding text into the
 * session's memory (prompts, --prime), generating, scoring, and the
 * statistics.  Shared by batch mode (main.c) and the REPL (repl.c).
 */
#ifndef TXLGEN_ENGINE_H
#define TXLGEN_ENGINE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "txl.h"

#include "options.h"
#include "output.h"

/* Set by the SIGINT handler; polled by the library and between tokens. */
extern volatile sig_atomic_t interrupted;

/**
 * Install the SIGINT handler.  @p restart: system calls resume after it
 * (while writing, so that output is never cut by EINTR); false around
 * blocking reads of input, which must wake up on Ctrl-C.
 */
void sigint_setup(bool restart);

enum gen_end {
	GEN_LENGTH,       /* -n tokens generated */
	GEN_EOS,          /* the model ended the text */
	GEN_STOP,         /* a stop string */
	GEN_INTERRUPTED,  /* Ctrl-C */
	GEN_ERROR,        /* an error, already reported */
};

struct gen_stats {
	int n_prompt;         /* tokens fed before generating */
	int n_gen;            /* tokens generated */
	double t_prompt;      /* seconds */
	double t_gen;
	enum gen_end end;
};

struct engine {
	struct txl_model *model;
	const struct txl_hparams *hp;
	struct txl_session *session;
	struct txlgen_options *opts;
	const char *model_path;
	uint64_t seed;         /* the effective seed */
	bool keep_memory;      /* feed the last token too (REPL, --state-out) */
	bool trim_lead;        /* output starts a line: drop its leading
				  space even after a prompt (REPL) */
	bool have_logits;      /* the session's logits predict the next token */
	bool started;          /* the memory holds text */
	int32_t *ids;          /* tokenizer scratch */
	int ids_cap;
	float *logits;         /* n_token scratch */
	struct gen_stats last; /* of the last generation */
};

/** Load the model and create the session; prints errors, returns an exit
 *  code. */
int engine_open(struct engine *e, struct txlgen_options *opts,
		const char *model_path);
void engine_close(struct engine *e);

/** Create the session, or apply the current settings to the live one,
 *  which keeps its memory (txl_session_set_params).  Returns an exit
 *  code; on error the live session is unchanged. */
int engine_apply_settings(struct engine *e);

/** Forget the memory. */
void engine_reset(struct engine *e);

/** Tokenize @p text; returns the count (ids in e->ids) or -1. */
int engine_tokenize(struct engine *e, const char *text, size_t len);

/** Feed the file @p path ('-' = stdin) into the memory (--prime).
 *  Returns an exit code. */
int engine_prime(struct engine *e, const char *path);

/**
 * Generate a continuation of the memory and @p text to @p out.
 * Returns an exit code (EXIT_INTERRUPTED after Ctrl-C); e->last holds
 * the statistics.
 */
int engine_generate(struct engine *e, const char *text, size_t len,
		    struct output *out);

/** Print the statistics of the last generation (--stats) to stderr. */
void engine_print_stats(struct engine *e);

/** Score @p path ('-' = stdin) (--score).  Returns an exit code. */
int engine_score(struct engine *e, const char *path, FILE *out);

/** Save / load the memory; print errors; return an exit code. */
int engine_save(struct engine *e, const char *path);
int engine_load(struct engine *e, const char *path);

/** Seconds on a monotonic clock. */
double now_s(void);

/** Print "memory: ..." lines (REPL /mem, --stats) to @p f. */
void engine_print_mem(struct engine *e, FILE *f, const char *prefix);

#endif /* TXLGEN_ENGINE_H */
