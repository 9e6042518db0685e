/* SPDX-License-Identifier: MIT */
/*
 * generate.c - continuing the text in the memory: the prompt is fed as
 * it is read, then tokens are sampled one at a time, each fed back, until
 * the length, the end of the text, a stop string or a signal.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine-model.h"
#include "engine-sampling.h"
#include "engine-streams.h"
#include "engine.h"
#include "output.h"
#include "progress.h"
#include "signals.h"
#include "text.h"

/* Bytes that follow the first of a UTF-8 character, at most. */
#define UTF8_MAX_CONT 3

static const char *const end_names[] = {
	"length", "eos", "stop", "interrupted", "error"
};

int32_t
engine_start_token(struct engine *e)
{
	int32_t t = txl_token_eos(e->mod->model);

	if (t < 0)
		t = txl_token_bos(e->mod->model);
	if (t < 0)
		t = txl_token_unk(e->mod->model);
	return t < 0 ? 0 : t;
}

/* The seed of the n-th sampler of a session whose seed is @p base: the
 * first takes @p base itself (as a run with --seed does), the others a
 * SplitMix64 step away, so that their streams do not overlap. */
static uint64_t
nth_seed(uint64_t base, uint64_t n)
{
	uint64_t z = base + n * 0x9e3779b97f4a7c15u;

	if (n == 0)
		return base;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

/* The seed of sample @p k of --n-samples in a run of seed @p base: @p base
 * for sample 0 (a run without --n-samples), else the top 53 bits of
 * nth_seed(), a seed that --seed takes, so that it makes that sample
 * alone, and one JSON carries exactly.  Sample k is so the same whatever
 * the number of samples. */
uint64_t
sample_seed(uint64_t base, int k)
{
	return k == 0 ? base : nth_seed(base, (uint64_t)k) >> 11;
}

/* (a logit bias made again marks the kept sampler's n_logit_bias -1) */
static bool
same_sampling(const struct txl_sampler_params *a,
	      const struct txl_sampler_params *b)
{
	return a->temp == b->temp && a->top_k == b->top_k &&
		a->top_p == b->top_p && a->min_p == b->min_p &&
		a->repeat_penalty == b->repeat_penalty &&
		a->repeat_last_n == b->repeat_last_n &&
		a->frequency_penalty == b->frequency_penalty &&
		a->presence_penalty == b->presence_penalty &&
		a->typical_p == b->typical_p &&
		a->mirostat_tau == b->mirostat_tau &&
		a->mirostat_eta == b->mirostat_eta &&
		a->n_logit_bias == b->n_logit_bias;
}

/* The sampling settings of the options, with seed @p seed. */
static struct txl_sampler_params
sampler_params(const struct engine *e, uint64_t seed)
{
	struct txl_sampler_params sp = options_sampler_params(e->opts, seed);

	sp.logit_bias_ids = e->samp->bias.ids;
	sp.logit_bias = e->samp->bias.bias;
	sp.n_logit_bias = e->samp->bias.n;
	return sp;
}

/*
 * The sampler of a generation; *@p seed gets the session's seed.  A
 * batch run makes one per generation, its random stream started from the
 * seed, so that a saved memory continued elsewhere gives the same text.
 * The REPL (e->samp->keep_sampler) keeps one across turns: its random stream
 * goes on, so that the same input after /reset gives another sample, and
 * a session with --seed is reproducible as a whole.  A /set of a sampling
 * setting makes a new sampler with the next seed of the session's; a
 * /set seed starts again from that seed.
 */
static struct txl_sampler *
get_sampler(struct engine *e, uint64_t *seed)
{
	const struct txlgen_options *o = e->opts;
	uint64_t base = o->seed >= 0 ? (uint64_t)o->seed : e->samp->seed;
	struct txl_sampler_params sp = sampler_params(e, base);
	struct txl_sampler *smp;

	*seed = base;
	if (!e->samp->keep_sampler) {
		smp = txl_sampler_new(&sp, e->mod->hp->n_token);
		engine_seed_sampler(e, smp);
		return smp;
	}
	if (e->samp->sampler && e->samp->sampler_seed == base &&
	    same_sampling(&sp, &e->samp->sampler_params))
		return e->samp->sampler;
	if (!e->samp->sampler || e->samp->sampler_seed != base)
		e->samp->n_samplers = 0;
	sp.seed = nth_seed(base, e->samp->n_samplers);
	smp = txl_sampler_new(&sp, e->mod->hp->n_token);
	if (smp) {
		engine_seed_sampler(e, smp);
		txl_sampler_free(e->samp->sampler);
		e->samp->sampler = smp;
		e->samp->sampler_params = sp;
		e->samp->sampler_seed = base;
		e->samp->n_samplers++;
	}
	return smp;
}

/* Feed the prompt (or, with none and nothing to continue, the token a
 * text starts from).  Each of the @p n_smp samplers gets its tokens
 * (repeat penalty).  *n_text: the prompt's tokens. */
static int
feed_prompt(struct engine *e, struct input *prompt,
	    struct txl_sampler *const *smp, int n_smp, struct output *out,
	    int64_t *n_text)
{
	struct feed_opts fo = {
		/* as $(cat FILE): a file's final newlines are not part of
		 * the prompt; a --text or a REPL line is taken as is */
		.drop_final_newlines = prompt && prompt->fd >= 0,
		.samplers = smp,
		.n_samplers = n_smp,
		.echo = e->opts->echo ? out : NULL,
		.progress = true,
	};
	uint64_t bytes = 0;
	int rc;

	*n_text = 0;
	e->streams->last.n_skipped = 0;
	if (prompt) {
		rc = engine_feed_input(e, prompt, &fo, n_text, &bytes);
		/* also when a signal stopped it: --stats tells what was read */
		e->streams->last.n_prompt = *n_text;
		e->streams->last.n_skipped = e->streams->n_skipped;
		if (rc != EXIT_OK)
			return rc;
		if (bytes)
			e->streams->started = true;
	}
	e->streams->last.n_prompt = *n_text;
	if (*n_text == 0 && !e->streams->have_logits) {
		int32_t t = engine_start_token(e);

		e->streams->last.n_prompt = 1;
		rc = engine_feed(e, &t, 1, TXL_LOGITS_LAST);
		/* the token a text starts from is no token of the text:
		 * none of the repeat penalty's window */
		if (rc == EXIT_OK && e->samp->recent.n > 0)
			e->samp->recent.n--;
		return rc;
	}
	return EXIT_OK;
}

enum out_status
engine_emit(struct engine *e, struct output *out, int32_t tok, double logprob,
	    bool *drop_space)
{
	int plen;
	const char *p = engine_piece(e->mod, tok, &plen);

	if (!p)
		plen = 0;
	if (*drop_space && plen > 0) {
		*drop_space = false;
		if (p[0] == ' ' && (e->streams->trim_lead ||
				    engine_drops_space(e->mod, tok, p, plen)))
			return out_token(out, tok, p + 1, (size_t)plen - 1,
					 logprob);
	}
	return out_token(out, tok, p, (size_t)plen, logprob);
}

/* Does token @p tok go on with the character the output holds open? */
static bool
continues_char(struct engine *e, struct output *out, int32_t tok)
{
	int plen;
	const char *p = engine_piece(e->mod, tok, &plen);

	return p && out_char_continues(out, p, (size_t)plen);
}

/* The JSON summary of a generation in session @p s; @p sample: the
 * sample it is of (--n-samples), -1 for the only one. */
static int
write_summary(FILE *f, struct txl_session *s, const struct gen_stats *gs,
	      uint64_t seed, int sample)
{
	fputc('{', f);
	if (sample >= 0)
		fprintf(f, "\"sample\": %d, ", sample);
	fprintf(f, "\"n_prompt\": %lld, \"n_gen\": %d, "
		"\"prompt_tokens_per_s\": ", (long long)gs->n_prompt,
		gs->n_gen);
	json_write_number(f, gs->t_prompt > 0 ?
			  (double)gs->n_prompt / gs->t_prompt : 0);
	fputs(", \"gen_tokens_per_s\": ", f);
	json_write_number(f, gs->t_gen > 0 ? gs->n_gen / gs->t_gen : 0);
	fprintf(f, ", \"mem_fill\": %d, \"mem_len\": %d, "
		"\"n_past\": %lld, \"end\": \"%s\", \"seed\": %llu}\n",
		txl_session_mem_fill(s), txl_session_get_params(s).mem_len,
		(long long)txl_session_n_past(s), end_names[gs->end],
		(unsigned long long)seed);
	fflush(f);
	return ferror(f) ? EXIT_RUNTIME : EXIT_OK;
}

const float *
engine_last_logits(struct engine *e, struct txl_session *s)
{
	const float *lg = txl_session_logits(s);
	int rows = txl_session_n_logits(s);

	return lg && rows > 1 ? lg + (size_t)(rows - 1) * e->mod->hp->n_token
		: lg;
}

int32_t
engine_sample(struct engine *e, struct txl_session *s, struct txl_sampler *smp,
	      bool ignore_eos, bool model_logprob, double *logprob)
{
	int32_t eos = txl_token_eos(e->mod->model), tok;
	float lp;

	if (ignore_eos && eos >= 0) {
		const float *lg = engine_last_logits(e, s);

		memcpy(e->mod->logits, lg,
		       (size_t)e->mod->hp->n_token * sizeof(float));
		e->mod->logits[eos] = -INFINITY;
		tok = txl_sampler_sample(smp, e->mod->logits, &lp);
		*logprob = lg[tok] - txl_logsumexp(lg, e->mod->hp->n_token);
		if (!isfinite(*logprob)) {
			/* the library's error (TXL_ERR_NUMERIC) for the
			 * same row, as without --ignore-eos */
			if (txl_session_sample(s, smp, &lp) < 0)
				errmsg("%s", engine_lib_error(TXL_ERR_NUMERIC));
			else
				errmsg("%s: the model produced non-finite "
				       "values (NaN or inf) in its logits",
				       e->mod->path);
			return -1;
		}
		if (!model_logprob)
			*logprob = lp;
	} else {
		tok = txl_session_sample(s, smp, &lp);
		*logprob = lp;
	}
	if (tok < 0 || tok >= e->mod->hp->n_token) {
		errmsg("%s", engine_lib_error(TXL_ERR_INVALID));
		return -1;
	}
	return tok;
}

/*
 * One continuation of the text: its session (sample 0's is the engine's
 * own, the others' copies of it made after the prompt), sampler and
 * output.  Several samples in plain text are shown one after another:
 * the first not yet shown writes to stdout, the others to a buffer of
 * their own (open_memstream) until their turn comes.
 */
struct stream {
	struct txl_session *s;
	struct txl_sampler *smp;
	struct output *out;     /* the caller's for sample 0, else own */
	struct output own;
	char *buf;              /* own.f's buffer while it is one */
	size_t buf_len;
	bool drop_space;
	bool done;              /* no more tokens */
	bool closed;            /* its text ended, its summary written */
	int i;                  /* tokens sampled */
	int32_t tok;            /* the token to feed next */
	struct sample_stats *ss;
};

enum step {
	STEP_FEED,              /* feed st->tok (then done if st->done) */
	STEP_DONE,              /* ended without feeding */
	STEP_ERROR,             /* *rc set, reported */
};

/* Sample and write the next token of @p st, the body of a generation's
 * loop: the length, the end of the text and the stop strings end it. */
static enum step
step_stream(struct engine *e, struct stream *st, int *rc)
{
	const struct txlgen_options *o = e->opts;
	int32_t eos = txl_token_eos(e->mod->model), tok;
	struct output *out = st->out;
	enum out_status os;
	double logprob;
	bool last;

	if (o->n_predict >= 0 && st->i >= o->n_predict && !out_char_open(out))
		return STEP_DONE;
	tok = engine_sample(e, st->s, st->smp, o->ignore_eos, o->json,
			    &logprob);
	if (tok < 0) {
		*rc = EXIT_RUNTIME;
		return STEP_ERROR;
	}
	/* past -n, a token only completes the last character */
	if (o->n_predict >= 0 && st->i >= o->n_predict &&
	    !continues_char(e, out, tok))
		return STEP_DONE;
	st->i++;
	st->ss->n_gen++;
	e->streams->last.n_gen++;
	if (st->s == e->streams->session)
		e->streams->started = true;
	st->tok = tok;
	if (tok == eos && !o->ignore_eos) {
		st->ss->end = GEN_EOS;
		/* the REPL's memory holds the end of the text too */
		st->done = true;
		return e->streams->keep_memory ? STEP_FEED : STEP_DONE;
	}
	os = engine_emit(e, out, tok, logprob, &st->drop_space);
	if (os == OUT_ERROR) {
		*rc = EXIT_RUNTIME;
		return STEP_ERROR;
	}
	/* the -n-th token, or one after it that completes (or cannot
	 * complete: at most 3 more) the last character */
	last = o->n_predict >= 0 && st->i >= o->n_predict &&
		(!out_char_open(out) || st->i >= o->n_predict + UTF8_MAX_CONT);
	if (os == OUT_STOP)
		st->ss->end = GEN_STOP;
	if (os == OUT_STOP || last) {
		st->done = true;
		if (!e->streams->keep_memory) {
			if (st->s == e->streams->session)
				e->streams->have_logits = false;
			return STEP_DONE;
		}
	}
	return STEP_FEED;
}

/* The sessions and tokens of a step of several streams (their batch). */
struct step_rows {
	struct txl_session **s;
	const int32_t **tok;
	int *n;
};

/* Whether sampling reads every logit of a row (txl_session_sample():
 * all but greedy or plain temperature sampling of an adaptive softmax,
 * which go cluster by cluster; --ignore-eos reads the row). */
static bool
reads_every_logit(const struct engine *e)
{
	const struct txlgen_options *o = e->opts;

	return e->mod->hp->n_cutoffs == 0 || o->ignore_eos ||
		o->repeat_penalty != 1 || (o->temp != 0 && (o->top_k > 0 ||
				o->top_p < 1 || o->min_p > 0));
}

/* Feed each stream of @p go its token: several in one step of the
 * engine's batch (each weight read once for all of them, and the
 * output layer too where sampling reads every logit), one alone as
 * always.  Each computes the numbers it computes alone.  Returns an exit
 * code. */
static int
feed_streams(struct engine *e, struct stream *const *go, int n,
	     const struct step_rows *r, int n_all)
{
	if (n == 0)
		return EXIT_OK;
	if (n == 1)
		return go[0]->s == e->streams->session
			? engine_feed(e, &go[0]->tok, 1, TXL_LOGITS_LAST)
			: engine_feed_to(e, go[0]->s, &go[0]->tok, 1,
					 TXL_LOGITS_LAST);
	for (int k = 0; k < n; k++) {
		r->s[k] = go[k]->s;
		r->tok[k] = &go[k]->tok;
		r->n[k] = 1;
	}
	return engine_feed_many(e, r->s, r->tok, r->n, n, TXL_LOGITS_LAST,
				reads_every_logit(e), n_all);
}

/* Whether @p n - 1 more sessions (copies of the engine's, for samples
 * 1..n-1) fit in the memory available now: refused before the prompt is
 * read or anything is shown, rather than killed while touching them. */
static int
check_samples_memory(struct engine *e, int n)
{
	struct txl_session_params p = engine_params(e);
	double bytes, have;

	if (n <= 1)
		return EXIT_OK;
	bytes = (double)txl_session_bytes(e->mod->model, &p) * (n - 1);
	have = engine_available_bytes();
	if (have > 0 && bytes > have) {
		errmsg("--n-samples %d: %d more sessions need %.1f GiB, more "
		       "than the %.1f GiB this machine has available", n, n - 1,
		       bytes / (1 << 30), have / (1 << 30));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

/* Sessions for samples 1..n-1, copies of the engine's after the prompt.
 * Returns an exit code. */
static int
copy_sessions(struct engine *e, struct stream *st, int n)
{
	struct txl_session_params p = engine_params(e);
	enum txl_status ts;
	int rc;

	for (int k = 1; k < n; k++) {
		ts = engine_session_new(e, &p, &st[k].s);
		if (ts == TXL_OK)
			ts = txl_session_copy(st[k].s, e->streams->session);
		if ((rc = engine_run_status(ts)) != EXIT_OK)
			return rc;
	}
	return EXIT_OK;
}

/* End the text of @p st (sample @p k of @p n): what a cut left open,
 * held text, the final newline; its JSON summary. */
static int
close_stream(struct engine *e, struct stream *st, int k, int n, int rc,
	     double t0)
{
	struct sample_stats *ss = st->ss;
	struct gen_stats gs = e->streams->last;

	st->closed = true;
	/* a cut of the length or of Ctrl-C writes whole characters: the
	 * first bytes of one the model did not complete are dropped, not
	 * shown as U+FFFD */
	if (ss->end == GEN_LENGTH || ss->end == GEN_INTERRUPTED)
		out_drop_open_char(st->out);
	if (out_end(st->out, ss->end == GEN_STOP) == OUT_ERROR &&
	    rc == EXIT_OK)
		rc = EXIT_RUNTIME;
	if (e->opts->json && ss->end != GEN_ERROR &&
	    (rc == EXIT_OK || rc == EXIT_INTERRUPTED)) {
		gs.n_gen = ss->n_gen;
		gs.t_gen = now_s() - t0;
		gs.end = ss->end;
		/* a sample cut short before its copy: the memory it would
		 * have started from */
		if (write_summary(st->out->f, st->s ? st->s
				  : e->streams->session, &gs, ss->seed,
				  n > 1 ? k : -1) != EXIT_OK)
			rc = EXIT_RUNTIME;
	}
	return rc;
}

/* Several samples in plain text: while the one shown (*front) has ended,
 * the separator line, then the next one's text so far, which goes on
 * stdout from then on.  *@p last: the last byte of the text shown. */
static int
show_samples(FILE *f, struct stream *st, int n, int *front, char *last)
{
	while (*front < n && st[*front].closed) {
		struct stream *next;

		if (st[*front].out->wrote)
			*last = st[*front].out->last;
		if (++*front == n)
			break;
		next = &st[*front];
		if (*last && *last != '\n')
			fputc('\n', f);
		fprintf(f, "--- sample %d ---\n", *front);
		*last = '\n';
		if (fclose(next->own.f) != 0)
			die_oom();
		fwrite(next->buf, 1, next->buf_len, f);
		free(next->buf);
		next->buf = NULL;
		next->own.f = f;
		if (next->own.flush_each)
			fflush(f);
		if (ferror(f))
			return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

/* The samples' samplers (seeds by sample_seed()) and outputs. */
static int
open_streams(struct engine *e, struct stream *st, int n, struct output *out,
	     uint64_t *seed)
{
	for (int k = 0; k < n; k++) {
		struct txl_sampler_params sp;

		st[k].ss = &e->streams->samples[k];
		*st[k].ss = (struct sample_stats){ .end = GEN_LENGTH };
		if (k == 0) {
			st[k].smp = get_sampler(e, seed);
			st[k].ss->seed = *seed;
			st[k].out = out;
			continue;
		}
		st[k].ss->seed = sample_seed(*seed, k);
		sp = sampler_params(e, st[k].ss->seed);
		st[k].smp = txl_sampler_new(&sp, e->mod->hp->n_token);
		if (!st[k].smp)
			break;
		engine_seed_sampler(e, st[k].smp);
		out_init(&st[k].own, out->f, e->opts, out->newline_at_end);
		out_begin(&st[k].own, false, &e->opts->stop);
		st[k].own.sample = k;
		st[k].out = &st[k].own;
		if (!e->opts->json) {
			st[k].own.f = open_memstream(&st[k].buf,
						     &st[k].buf_len);
			if (!st[k].own.f)
				die_oom();
		}
	}
	for (int k = 0; k < n; k++) {
		if (!st[k].smp) {
			errmsg("%s", engine_lib_error(TXL_ERR_INVALID));
			return EXIT_USAGE;
		}
	}
	if (n > 1)
		out->sample = 0;
	return EXIT_OK;
}

static void
close_streams(struct engine *e, struct stream *st, int n, FILE *f)
{
	for (int k = 0; k < n; k++) {
		if (st[k].smp != e->samp->sampler)
			txl_sampler_free(st[k].smp);
		if (k == 0)
			continue;
		if (st[k].own.f && st[k].own.f != f)
			fclose(st[k].own.f);	/* a buffer never shown */
		free(st[k].buf);
		out_free(&st[k].own);
		txl_session_free(st[k].s);
	}
	free(st);
}

int
engine_generate(struct engine *e, struct input *prompt, struct output *out)
{
	struct txlgen_options *o = e->opts;
	struct gen_stats *gs = &e->streams->last;
	const int n = o->n_samples > 1 ? (int)o->n_samples : 1;
	struct stream *st = xrealloc(NULL, (size_t)n * sizeof(*st));
	struct stream **go = xrealloc(NULL, (size_t)n * sizeof(*go));
	const struct step_rows rows = {
		.s = xrealloc(NULL, (size_t)n * sizeof(*rows.s)),
		.tok = xrealloc(NULL, (size_t)n * sizeof(*rows.tok)),
		.n = xrealloc(NULL, (size_t)n * sizeof(*rows.n)),
	};
	struct txl_sampler **smp = xrealloc(NULL, (size_t)n * sizeof(*smp));
	bool drop_space, was_started = e->streams->started, began;
	struct progress pg;
	uint64_t seed;
	int64_t n_text;
	double t0;
	int rc, front = 0, active = n;
	char last = 0;

	memset(st, 0, (size_t)n * sizeof(*st));
	memset(gs, 0, sizeof(*gs));
	gs->end = GEN_LENGTH;
	free(e->streams->samples);
	e->streams->samples = xrealloc(NULL, (size_t)n *
				       sizeof(*e->streams->samples));
	e->streams->n_samples = n;
	out_begin(out, false, &o->stop);
	rc = open_streams(e, st, n, out, &seed);
	if (rc != EXIT_OK) {
		gs->end = GEN_ERROR;
		goto out;
	}
	for (int k = 0; k < n; k++)
		smp[k] = st[k].smp;

	t0 = now_s();
	rc = check_samples_memory(e, n);
	/* sample 0 under its line as the others (before the echo of the
	 * prompt, which it continues) */
	if (rc == EXIT_OK && n > 1 && !o->json) {
		fprintf(out->f, "--- sample 0 ---\n");
		last = '\n';
	}
	if (rc == EXIT_OK)
		rc = feed_prompt(e, prompt, smp, n, out, &n_text);
	gs->t_prompt = now_s() - t0;
	st[0].s = e->streams->session;
	if (rc == EXIT_OK && n > 1)
		rc = copy_sessions(e, st, n);
	/* no sample began: none is shown (no empty lines of samples) */
	began = rc == EXIT_OK;
	drop_space = e->streams->trim_lead || (!was_started && n_text == 0);
	for (int k = 0; k < n; k++)
		st[k].drop_space = drop_space;

	t0 = now_s();
	progress_init(&pg, 0);
	pg.on = pg.on && e->streams->gen_progress;
	while (rc == EXIT_OK && active > 0) {
		int n_go = 0;

		if (interrupted) {
			rc = EXIT_INTERRUPTED;
			break;
		}
		for (int k = 0; k < n && rc == EXIT_OK; k++) {
			if (st[k].done)
				continue;
			switch (step_stream(e, &st[k], &rc)) {
			case STEP_FEED:
				go[n_go++] = &st[k];
				break;
			case STEP_DONE:
				st[k].done = true;
				break;
			case STEP_ERROR:
				break;
			}
		}
		if (rc == EXIT_OK)
			rc = feed_streams(e, go, n_go, &rows, n);
		if (rc != EXIT_OK)
			break;
		progress_count(&pg, gs->n_gen, o->n_predict > 0 ?
			       (int64_t)o->n_predict * n : 0);
		active = 0;
		for (int k = 0; k < n; k++) {
			active += !st[k].done;
			if (st[k].done && !st[k].closed)
				rc = close_stream(e, &st[k], k, n, rc, t0);
		}
		if (rc == EXIT_OK && n > 1 && !o->json)
			rc = show_samples(out->f, st, n, &front, &last);
	}
	gs->t_gen = now_s() - t0;
	progress_done(&pg);
	/* what a signal or an error cut short: each sample's text so far */
	for (int k = 0; k < n; k++) {
		if (st[k].closed)
			continue;
		st[k].ss->end = rc == EXIT_INTERRUPTED ? GEN_INTERRUPTED
			: rc != EXIT_OK ? GEN_ERROR : st[k].ss->end;
		rc = close_stream(e, &st[k], k, n, rc, t0);
	}
	if (n > 1 && !o->json && began &&
	    show_samples(out->f, st, n, &front, &last) != EXIT_OK &&
	    rc == EXIT_OK)
		rc = EXIT_RUNTIME;
	if (rc == EXIT_RUNTIME && ferror(out->f))
		errmsg("writing output failed: %s", strerror(errno));
	gs->end = st[0].ss->end;
out:
	out->sample = -1;
	close_streams(e, st, n, out->f);
	free(go);
	free(rows.s);
	free(rows.tok);
	free(rows.n);
	free(smp);
	return rc;
}

void
engine_print_stats(struct engine *e)
{
	const struct gen_stats *g = &e->streams->last;
	uint64_t seed = e->opts->seed >= 0 ? (uint64_t)e->opts->seed
		: e->samp->seed;

	fflush(stdout);
	fprintf(stderr, "txlgen: prompt: %lld token%s in %.3f s "
		"(%.1f tokens/s", (long long)g->n_prompt,
		g->n_prompt == 1 ? "" : "s", g->t_prompt,
		g->t_prompt > 0 ? (double)g->n_prompt / g->t_prompt : 0.0);
	/* the receptive field's: the others cannot change the memory */
	if (g->n_skipped > 0)
		fprintf(stderr, "; the last %lld computed, the rest counted",
			(long long)(g->n_prompt - g->n_skipped));
	fputs(")\n", stderr);
	if (e->streams->n_samples > 1) {
		fprintf(stderr, "txlgen: generated: %d token%s in %.3f s "
			"(%.1f tokens/s) in %d samples\n", g->n_gen,
			g->n_gen == 1 ? "" : "s", g->t_gen, g->t_gen > 0 ?
			g->n_gen / g->t_gen : 0.0, e->streams->n_samples);
		for (int k = 0; k < e->streams->n_samples; k++) {
			const struct sample_stats *ss =
				&e->streams->samples[k];

			fprintf(stderr, "txlgen: sample %d: %d token%s, ended: "
				"%s, seed %llu\n", k, ss->n_gen,
				ss->n_gen == 1 ? "" : "s", end_names[ss->end],
				(unsigned long long)ss->seed);
		}
	} else {
		fprintf(stderr, "txlgen: generated: %d token%s in %.3f s "
			"(%.1f tokens/s), ended: %s, seed %llu\n", g->n_gen,
			g->n_gen == 1 ? "" : "s", g->t_gen, g->t_gen > 0 ?
			g->n_gen / g->t_gen : 0.0, end_names[g->end],
			(unsigned long long)seed);
	}
	engine_print_mem(e, stderr, "txlgen: ");
}
