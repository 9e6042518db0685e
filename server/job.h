/* SPDX-License-Identifier: MIT */
/*
 * job.h - one request's completions between the connection that made it
 * (api.c, http.c) and the scheduler that runs it (sched.c): the request,
 * the results, and its lifetime.  Each side holds a reference; the last
 * one let go frees it, whichever side that is.
 */
#ifndef TXLGEN_JOB_H
#define TXLGEN_JOB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "engine.h"
#include "settings.h"
#include "text.h"
#include "txl.h"

/* One token's logprobs, turned into JSON only when a response or an
 * event is written. */
struct lp_row {
	int32_t id;              /* the token */
	float lp;                /* its log-probability; NAN: null */
	size_t offset;           /* text_offset */
	uint8_t n_top;           /* alternatives: lp_alt[row * k ...] */
	bool no_top;             /* top_logprobs null (no row before) */
	bool lead;               /* its piece's first byte (a space) is not
				    in the text */
	int32_t rank;            /* 1 + the tokens the model found likelier;
				    0: null (no row before) */
};

struct lp_alt {
	int32_t id;
	float lp;
};

/* One choice: a prompt (or a session's text) and its continuation. */
struct task {
	struct job *job;
	int index;               /* of the choice in the response */
	int32_t *prompt;         /* its tokens */
	int n_prompt;
	const char *prompt_text; /* for echo's text_offset (job-owned) */
	size_t prompt_len;
	uint64_t seed;

	/* results, written by the scheduler under its lock */
	struct strbuf text;      /* released text (stop strings cut) */
	int n_gen;
	const char *finish;      /* "stop", "length", NULL while running */
	struct lp_row *lp;       /* logprobs rows, appended */
	struct lp_alt *lp_alt;   /* their alternatives, job->logprobs each */
	int n_lp, lp_cap;

	/* the stream's progress (its connection's alone) */
	size_t sent;             /* bytes of text streamed */
	int lp_sent;             /* logprob rows streamed */
	bool end_sent;           /* its finish_reason streamed */
};

struct job {
	atomic_int refs;         /* the connection and the scheduler */
	char id[40];
	time_t created;

	/* the request */
	bool stream, echo;
	int logprobs;            /* top alternatives per token; -1: none */
	int max_tokens;
	struct strlist stop;
	struct txl_sampler_params sp;
	struct logit_bias bias;  /* sp's: the request's, or the server's */
	bool ignore_eos;
	char *session;           /* its id, or NULL */
	bool keep_text;          /* echo: the prompt's text in the choice */

	int n_tasks;             /* n_prompts times n */
	int n_prompts;
	struct task *tasks;
	bool done_sent;          /* the stream's [DONE] */

	/* progress, under the scheduler's lock */
	int n_started, n_done;
	bool cancelled;          /* the client went away */
	bool cut;                /* the server stops: ended early */
	int status;              /* 0, or the HTTP status of a failure */
	char *error;
	int64_t prompt_tokens, completion_tokens;
	unsigned seq;            /* bumped at each change (streaming) */
	pthread_cond_t progress; /* its connection waits on it */
	double t_submit;         /* now_s() when queued */
	double t_first;          /* seconds from then to the first token */
};

/* An empty job with one reference (its maker's) and a fresh id. */
struct job *job_new(void);
void job_ref(struct job *j);
/* Let go of a reference (NULL: none); the last frees the job. */
void job_unref(struct job *j);
/* Append a logprobs row to @p t: its alternatives are @p n_top of
 * @p top; room for job->logprobs of them is kept per row. */
void task_add_logprob(struct task *t, const struct lp_row *row,
		      const struct lp_alt *top, int n_top);

#endif /* TXLGEN_JOB_H */
