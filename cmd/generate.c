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

/* The token a text starts from when there is no prompt: the end of a
 * previous text, as the original corpora separate texts; else BOS. */
static int32_t
start_token(struct engine *e)
{
	int32_t t = txl_token_eos(e->model);

	if (t < 0)
		t = txl_token_bos(e->model);
	if (t < 0)
		t = txl_token_unk(e->model);
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

static bool
same_sampling(const struct txl_sampler_params *a,
	      const struct txl_sampler_params *b)
{
	return a->temp == b->temp && a->top_k == b->top_k &&
		a->top_p == b->top_p && a->min_p == b->min_p &&
		a->repeat_penalty == b->repeat_penalty &&
		a->repeat_last_n == b->repeat_last_n;
}

/*
 * The sampler of a generation; *@p seed gets the session's seed.  A
 * batch run makes one per generation, its random stream started from the
 * seed, so that a saved memory continued elsewhere gives the same text.
 * The REPL (e->keep_sampler) keeps one across turns: its random stream
 * goes on, so that the same input after /reset gives another sample, and
 * a session with --seed is reproducible as a whole.  A /set of a sampling
 * setting makes a new sampler with the next seed of the session's; a
 * /set seed starts again from that seed.
 */
static struct txl_sampler *
get_sampler(struct engine *e, uint64_t *seed)
{
	const struct txlgen_options *o = e->opts;
	struct txl_sampler_params sp = txl_sampler_params_default();
	uint64_t base = o->seed >= 0 ? (uint64_t)o->seed : e->seed;
	struct txl_sampler *smp;

	sp.temp = (float)o->temp;
	sp.top_k = o->top_k;
	sp.top_p = (float)o->top_p;
	sp.min_p = (float)o->min_p;
	sp.repeat_penalty = (float)o->repeat_penalty;
	sp.repeat_last_n = o->repeat_last_n;
	*seed = base;
	if (!e->keep_sampler) {
		sp.seed = base;
		return txl_sampler_new(&sp, e->hp->n_token);
	}
	if (e->sampler && e->sampler_seed == base &&
	    same_sampling(&sp, &e->sampler_params))
		return e->sampler;
	if (!e->sampler || e->sampler_seed != base)
		e->n_samplers = 0;
	sp.seed = nth_seed(base, e->n_samplers);
	smp = txl_sampler_new(&sp, e->hp->n_token);
	if (smp) {
		txl_sampler_free(e->sampler);
		e->sampler = smp;
		e->sampler_params = sp;
		e->sampler_seed = base;
		e->n_samplers++;
	}
	return smp;
}

/* Feed the prompt (or, with none and nothing to continue, the token a
 * text starts from).  *n_text: the prompt's tokens. */
static int
feed_prompt(struct engine *e, struct input *prompt, struct txl_sampler *smp,
	    struct output *out, int64_t *n_text)
{
	struct feed_opts fo = {
		/* as $(cat FILE): a file's final newlines are not part of
		 * the prompt; a --text or a REPL line is taken as is */
		.drop_final_newlines = prompt && prompt->fd >= 0,
		.sampler = smp,
		.echo = e->opts->echo ? out : NULL,
		.progress = true,
	};
	uint64_t bytes = 0;
	int rc;

	*n_text = 0;
	if (prompt) {
		rc = engine_feed_input(e, prompt, &fo, n_text, &bytes);
		/* also when a signal stopped it: --stats tells what was read */
		e->last.n_prompt = *n_text;
		if (rc != EXIT_OK)
			return rc;
		if (bytes)
			e->started = true;
	}
	e->last.n_prompt = *n_text;
	if (*n_text == 0 && !e->have_logits) {
		int32_t t = start_token(e);

		e->last.n_prompt = 1;
		return engine_feed(e, &t, 1, TXL_LOGITS_LAST);
	}
	return EXIT_OK;
}

/* Write token @p tok; drop its leading space where the text starts. */
static enum out_status
emit(struct engine *e, struct output *out, int32_t tok, double logprob,
     bool *drop_space)
{
	int plen;
	const char *p = engine_piece(e, tok, &plen);

	if (!p)
		plen = 0;
	if (*drop_space && plen > 0) {
		*drop_space = false;
		if (p[0] == ' ' && (e->trim_lead ||
				    engine_drops_space(e, tok, p, plen)))
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
	const char *p = engine_piece(e, tok, &plen);

	return p && out_char_continues(out, p, (size_t)plen);
}

/* The JSON summary of a generation. */
static int
write_summary(struct engine *e, FILE *f, uint64_t seed)
{
	const struct gen_stats *gs = &e->last;

	fprintf(f, "{\"n_prompt\": %lld, \"n_gen\": %d, "
		"\"prompt_tokens_per_s\": ", (long long)gs->n_prompt,
		gs->n_gen);
	json_write_number(f, gs->t_prompt > 0 ?
			  (double)gs->n_prompt / gs->t_prompt : 0);
	fputs(", \"gen_tokens_per_s\": ", f);
	json_write_number(f, gs->t_gen > 0 ? gs->n_gen / gs->t_gen : 0);
	fprintf(f, ", \"mem_fill\": %d, \"mem_len\": %d, "
		"\"n_past\": %lld, \"end\": \"%s\", \"seed\": %llu}\n",
		txl_session_mem_fill(e->session),
		txl_session_get_params(e->session).mem_len,
		(long long)txl_session_n_past(e->session),
		end_names[gs->end], (unsigned long long)seed);
	fflush(f);
	if (ferror(f)) {
		errmsg("writing output failed: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

/* Sample one token from the current logits; -1 on error (reported).
 * Without --ignore-eos the session samples: with an adaptive softmax,
 * greedy and plain temperature sampling then go cluster by cluster,
 * never computing the full distribution. */
static int32_t
sample(struct engine *e, struct txl_sampler *smp, double *logprob)
{
	const struct txlgen_options *o = e->opts;
	int32_t eos = txl_token_eos(e->model), tok;
	float lp;

	if (o->ignore_eos && eos >= 0) {
		const float *lg = txl_session_logits(e->session);

		memcpy(e->logits, lg, (size_t)e->hp->n_token * sizeof(float));
		e->logits[eos] = -INFINITY;
		tok = txl_sampler_sample(smp, e->logits, &lp);
		*logprob = o->json ? lg[tok] - txl_logsumexp(lg, e->hp->n_token)
			: lp;
	} else {
		tok = txl_session_sample(e->session, smp, &lp);
		*logprob = lp;
	}
	if (tok < 0 || tok >= e->hp->n_token) {
		errmsg("%s", engine_lib_error(TXL_ERR_INVALID));
		return -1;
	}
	return tok;
}

int
engine_generate(struct engine *e, struct input *prompt, struct output *out)
{
	struct txlgen_options *o = e->opts;
	struct gen_stats *gs = &e->last;
	struct txl_sampler *smp;
	int32_t eos = txl_token_eos(e->model), tok;
	bool drop_space, was_started = e->started;
	struct progress pg;
	uint64_t seed;
	int64_t n_text;
	double t0;
	int rc = EXIT_OK;

	memset(gs, 0, sizeof(*gs));
	gs->end = GEN_LENGTH;
	smp = get_sampler(e, &seed);
	if (!smp) {
		errmsg("%s", engine_lib_error(TXL_ERR_INVALID));
		gs->end = GEN_ERROR;
		return EXIT_USAGE;
	}

	out_begin(out, false, &o->stop);
	t0 = now_s();
	rc = feed_prompt(e, prompt, smp, out, &n_text);
	gs->t_prompt = now_s() - t0;
	if (rc != EXIT_OK)
		goto out;
	drop_space = e->trim_lead || (!was_started && n_text == 0);

	t0 = now_s();
	progress_init(&pg, 0);
	pg.on = pg.on && e->gen_progress;
	for (int i = 0; o->n_predict < 0 || i < o->n_predict ||
	     out_char_open(out); i++) {
		enum out_status os;
		bool last;
		double logprob;

		if (interrupted) {
			rc = EXIT_INTERRUPTED;
			break;
		}
		tok = sample(e, smp, &logprob);
		if (tok < 0) {
			rc = EXIT_RUNTIME;
			break;
		}
		/* past -n, a token only completes the last character */
		if (o->n_predict >= 0 && i >= o->n_predict &&
		    !continues_char(e, out, tok))
			break;
		gs->n_gen++;
		e->started = true;
		progress_count(&pg, gs->n_gen, o->n_predict > 0 ?
			       o->n_predict : 0);
		if (tok == eos && !o->ignore_eos) {
			gs->end = GEN_EOS;
			if (e->keep_memory)
				rc = engine_feed(e, &tok, 1, TXL_LOGITS_LAST);
			break;
		}
		os = emit(e, out, tok, logprob, &drop_space);
		if (os == OUT_ERROR) {
			rc = EXIT_RUNTIME;
			break;
		}
		/* the -n-th token, or one after it that completes (or
		 * cannot complete: at most 3 more) the last character */
		last = o->n_predict >= 0 && i + 1 >= o->n_predict &&
			(!out_char_open(out) ||
			 i + 1 >= o->n_predict + UTF8_MAX_CONT);
		if (os == OUT_STOP)
			gs->end = GEN_STOP;
		if ((os == OUT_STOP || last) && !e->keep_memory) {
			e->have_logits = false;
			break;
		}
		rc = engine_feed(e, &tok, 1, TXL_LOGITS_LAST);
		if (rc != EXIT_OK || os == OUT_STOP || last)
			break;
	}
	gs->t_gen = now_s() - t0;
	progress_done(&pg);
out:
	if (rc == EXIT_INTERRUPTED)
		gs->end = GEN_INTERRUPTED;
	else if (rc != EXIT_OK)
		gs->end = GEN_ERROR;
	/* a cut of the length or of Ctrl-C writes whole characters: the
	 * first bytes of one the model did not complete are dropped, not
	 * shown as U+FFFD */
	if (gs->end == GEN_LENGTH || gs->end == GEN_INTERRUPTED)
		out_drop_open_char(out);
	if (out_end(out, gs->end == GEN_STOP) == OUT_ERROR && rc == EXIT_OK)
		rc = EXIT_RUNTIME;
	if (rc == EXIT_RUNTIME && ferror(out->f))
		errmsg("writing output failed: %s", strerror(errno));
	if (o->json && gs->end != GEN_ERROR) {
		int wrc = write_summary(e, out->f, seed);

		if (rc == EXIT_OK)
			rc = wrc;
	}
	if (smp != e->sampler)
		txl_sampler_free(smp);
	return rc;
}

void
engine_print_stats(struct engine *e)
{
	const struct gen_stats *g = &e->last;
	uint64_t seed = e->opts->seed >= 0 ? (uint64_t)e->opts->seed : e->seed;

	fflush(stdout);
	fprintf(stderr, "txlgen: prompt: %lld token%s in %.3f s "
		"(%.1f tokens/s)\n", (long long)g->n_prompt,
		g->n_prompt == 1 ? "" : "s", g->t_prompt,
		g->t_prompt > 0 ? (double)g->n_prompt / g->t_prompt : 0.0);
	fprintf(stderr, "txlgen: generated: %d token%s in %.3f s "
		"(%.1f tokens/s), ended by %s, seed %llu\n", g->n_gen,
		g->n_gen == 1 ? "" : "s", g->t_gen,
		g->t_gen > 0 ? g->n_gen / g->t_gen : 0.0, end_names[g->end],
		(unsigned long long)seed);
	engine_print_mem(e, stderr, "txlgen: ");
}
