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

static struct txl_sampler *
new_sampler(struct engine *e, uint64_t *seed)
{
	const struct txlgen_options *o = e->opts;
	struct txl_sampler_params sp = txl_sampler_params_default();

	sp.temp = (float)o->temp;
	sp.top_k = o->top_k;
	sp.top_p = (float)o->top_p;
	sp.min_p = (float)o->min_p;
	sp.repeat_penalty = (float)o->repeat_penalty;
	sp.repeat_last_n = o->repeat_last_n;
	/* each generation starts the random stream anew, so that a saved
	 * memory continued elsewhere gives the same text */
	sp.seed = o->seed >= 0 ? (uint64_t)o->seed : e->seed;
	*seed = sp.seed;
	return txl_sampler_new(&sp, e->hp->n_token);
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
	uint64_t seed;
	int64_t n_text;
	double t0;
	int rc = EXIT_OK;

	memset(gs, 0, sizeof(*gs));
	gs->end = GEN_LENGTH;
	smp = new_sampler(e, &seed);
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
	for (int i = 0; o->n_predict < 0 || i < o->n_predict; i++) {
		enum out_status os;
		bool last = o->n_predict >= 0 && i + 1 == o->n_predict;
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
		gs->n_gen++;
		e->started = true;
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
		if (os == OUT_STOP)
			gs->end = GEN_STOP;
		if ((os == OUT_STOP || last) && !e->keep_memory) {
			e->have_logits = false;
			break;
		}
		rc = engine_feed(e, &tok, 1, TXL_LOGITS_LAST);
		if (rc != EXIT_OK || os == OUT_STOP)
			break;
	}
	gs->t_gen = now_s() - t0;
out:
	if (rc == EXIT_INTERRUPTED)
		gs->end = GEN_INTERRUPTED;
	else if (rc != EXIT_OK)
		gs->end = GEN_ERROR;
	if (out_end(out, gs->end == GEN_STOP) == OUT_ERROR && rc == EXIT_OK)
		rc = EXIT_RUNTIME;
	if (rc == EXIT_RUNTIME && ferror(out->f))
		errmsg("writing output failed: %s", strerror(errno));
	if (o->json && gs->end != GEN_ERROR) {
		int wrc = write_summary(e, out->f, seed);

		if (rc == EXIT_OK)
			rc = wrc;
	}
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
