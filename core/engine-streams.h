/* SPDX-License-Identifier: MIT */
/*
 * engine-streams.h - the engine's streams (engine.h): the session and
 * the state of its memory, the batch that steps several streams at once,
 * and the state and statistics of generation.
 */
#ifndef TXLGEN_ENGINE_STREAMS_H
#define TXLGEN_ENGINE_STREAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "txl.h"

enum gen_end {
	GEN_LENGTH,       /* -n tokens generated */
	GEN_EOS,          /* the model ended the text */
	GEN_STOP,         /* a stop string */
	GEN_INTERRUPTED,  /* Ctrl-C or SIGTERM */
	GEN_ERROR,        /* an error, already reported */
};

struct gen_stats {
	int64_t n_prompt;     /* tokens fed before generating */
	int64_t n_skipped;    /* of them, counted but not computed */
	int n_gen;            /* tokens generated (by every sample) */
	double t_prompt;      /* seconds */
	double t_gen;
	enum gen_end end;     /* of the first sample */
};

/* How one continuation of --n-samples went. */
struct sample_stats {
	int n_gen;
	enum gen_end end;
	uint64_t seed;
};

struct engine_streams {
	struct txl_session *session;
	bool keep_memory;      /* feed the last token too (REPL, --state-out) */
	bool trim_lead;        /* output starts a line: drop its leading
				  space even after a prompt (REPL) */
	bool have_logits;      /* the session's logits predict the next token */
	bool started;          /* the memory holds text */
	int64_t n_skipped;     /* tokens of the last text fed that were
				  counted, not read (engine_feed_input) */
	struct gen_stats last; /* of the last generation */
	struct sample_stats *samples; /* and of each of its samples */
	int n_samples;
	bool gen_progress;     /* a progress line of generation on stderr,
				  when it is a terminal (stdout a file) */
	bool saving;           /* in engine_save() */
	unsigned signals_at_save; /* signals_received() when it began */
	struct txl_batch *batch; /* engine_feed_many()'s, or NULL */
	int batch_rows;        /* its max_rows */
};

#endif /* TXLGEN_ENGINE_STREAMS_H */
