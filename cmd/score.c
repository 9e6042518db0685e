/* SPDX-License-Identifier: MIT */
/*
 * score.c - --score: the log-likelihood of a text under the model, with
 * the protocol of the original eval.py, read as a stream.
 *
 * The summary gives the mean negative log-likelihood per token, the
 * perplexity, the bits per byte, and the standard error of the mean NLL
 * over tokens (sd / sqrt(n), as llama-perplexity reports it; neighbouring
 * tokens are not independent, so it is a lower bound of the real
 * uncertainty), carried over to bits per byte.  Interrupted, it gives the
 * same for what was scored so far, marked partial.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-model.h"
#include "engine-streams.h"
#include "engine.h"
#include "progress.h"
#include "signals.h"
#include "text.h"

struct score {
	struct engine *e;
	FILE *out;
	struct tokvec t;       /* tokens read, not yet scored as inputs */
	double *end;           /* end[i]: bytes of text up to the end of
				  token t.v[i] (interpolated in a chunk) */
	int end_cap;
	double *lp;            /* log-probs of a segment's targets */
	int64_t base;          /* input index of t.v[0] */
	int64_t total;         /* tokens read */
	uint64_t bytes;        /* bytes of text read (or that ids stand for) */
	double scored_bytes;   /* bytes up to the last token predicted */
	int64_t n_pred;
	double sum_nll, mean, m2; /* Welford's running mean and M2 of NLL */
	struct utf8_state u8;  /* the text of the tokens, for JSON rows */
	struct strbuf text;
	struct kl_ref *kl;     /* --kl-ref, or NULL */
};

static void
add_tokens(struct score *sc, const int32_t *ids, int n, double from,
	   double to)
{
	if (sc->t.n + n > sc->end_cap) {
		sc->end_cap = (sc->t.n + n) * 2;
		sc->end = xrealloc(sc->end, (size_t)sc->end_cap *
				   sizeof(double));
	}
	/* whole bytes, so that a partial summary's bpb is its bytes' */
	for (int i = 0; i < n; i++)
		sc->end[sc->t.n + i] = floor(from + (to - from) * (i + 1) / n);
	tokvec_add(&sc->t, ids, n);
	sc->total += n;
}

static void
drop_tokens(struct score *sc, int n)
{
	memmove(sc->end, sc->end + n, (size_t)(sc->t.n - n) * sizeof(double));
	tokvec_drop(&sc->t, n);
}

/* The text token @p id completes, into sc->text. */
static void
token_text(struct score *sc, int32_t id)
{
	int len;
	const char *p = engine_piece(sc->e->mod, id, &len);

	sc->text.len = 0;
	strbuf_add(&sc->text, "", 0);
	if (p)
		utf8_feed(&sc->u8, p, (size_t)len, &sc->text);
}

/* Score the predictions of t[1..n] from inputs t[0..n-1], one segment.
 * txl_session_score() computes only what the targets need: with an
 * adaptive softmax the head and each target's own cluster, never the
 * full distribution. */
static int
score_segment(struct score *sc, int n)
{
	struct engine *e = sc->e;
	const int32_t *t = sc->t.v;
	enum txl_status st;
	int rc = engine_feed(e, t, n, TXL_LOGITS_ALL);

	if (rc == EXIT_OK && sc->kl)
		rc = kl_ref_feed(e, sc->kl, t, n);
	if (rc != EXIT_OK)
		return rc;
	if (sc->base == 0 && e->opts->json)
		token_text(sc, t[0]);  /* may begin a character */
	st = txl_session_score(e->streams->session, t + 1, n, sc->lp);
	if (st != TXL_OK) {
		errmsg("%s", engine_lib_error(st));
		return EXIT_RUNTIME;
	}
	if (sc->kl && (rc = kl_ref_compare(sc->kl, e->streams->session, t + 1,
					   n, sc->lp)) != EXIT_OK)
		return rc;
	for (int i = 0; i < n; i++) {
		double lp = sc->lp[i];
		double d = -lp - sc->mean;

		sc->sum_nll -= lp;
		sc->n_pred++;
		sc->mean += d / (double)sc->n_pred;
		sc->m2 += d * (-lp - sc->mean);
		if (e->opts->json) {
			token_text(sc, t[i + 1]);
			fprintf(sc->out, "{\"pos\": %lld, \"id\": %d, "
				"\"text\": ", (long long)(sc->base + i + 1),
				(int)t[i + 1]);
			json_write_string(sc->out, sc->text.s, sc->text.len);
			fputs(", \"logprob\": ", sc->out);
			json_write_number(sc->out, lp);
			if (sc->kl)
				kl_ref_json_row(sc->kl, i, sc->out);
			fputs("}\n", sc->out);
		}
	}
	sc->base += n;
	sc->scored_bytes = sc->end[n];
	rc = engine_adapt(e, t + 1, n);
	if (rc != EXIT_OK)
		return rc;
	if (ferror(sc->out)) {
		errmsg("writing output failed: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

/* Standard error of the mean NLL; NAN below two predictions. */
static double
nll_stderr(const struct score *sc)
{
	double n = (double)sc->n_pred;

	return sc->n_pred > 1 ? sqrt(sc->m2 / (n - 1) / n) : NAN;
}

/* "bpb 1.234 ± 0.005" so far, for the progress line. */
static const char *
running(const struct score *sc, char *buf, size_t len)
{
	double k = sc->scored_bytes > 0 ? 1 / log(2.0) / sc->scored_bytes : 0;

	if (sc->n_pred < 2 || k == 0)
		return NULL;
	snprintf(buf, len, "bpb %.4f \xc2\xb1 %.4f", sc->sum_nll * k,
		 nll_stderr(sc) * (double)sc->n_pred * k);
	return buf;
}

static int
write_summary(const struct score *sc, bool partial)
{
	FILE *out = sc->out;
	double bytes = partial ? sc->scored_bytes : (double)sc->bytes;
	double nll = sc->sum_nll / (double)sc->n_pred, se = nll_stderr(sc);
	double k = bytes > 0 ? 1 / log(2.0) / bytes : 0;
	double bpb = sc->sum_nll * k, bpb_se = se * (double)sc->n_pred * k;

	if (sc->e->opts->json) {
		fprintf(out, "{\"tokens\": %lld, \"predicted\": %lld, "
			"\"bytes\": %.0f, \"nll\": ", (long long)sc->total,
			(long long)sc->n_pred, bytes);
		json_write_number(out, nll);
		fputs(", \"ppl\": ", out);
		json_write_number(out, exp(nll));
		fputs(", \"bpb\": ", out);
		json_write_number(out, bpb);
		fputs(", \"nll_stderr\": ", out);
		json_write_number(out, se);
		fputs(", \"bpb_stderr\": ", out);
		json_write_number(out, bpb_se);
		if (sc->kl)
			kl_ref_summary(sc->kl, out, true, bytes);
		fprintf(out, ", \"partial\": %s}\n", partial ? "true" : "false");
	} else {
		fprintf(out, "tokens %lld\npredicted %lld\nbytes %.0f\n"
			"nll %.6f\nppl %.4f\nbpb %.6f\nnll_stderr %.6f\n"
			"bpb_stderr %.6f\n", (long long)sc->total,
			(long long)sc->n_pred, bytes, nll, exp(nll), bpb, se,
			bpb_se);
		if (sc->kl)
			kl_ref_summary(sc->kl, out, false, bytes);
		fprintf(out, "partial %s\n", partial ? "true" : "false");
	}
	fflush(out);
	if (ferror(out)) {
		errmsg("writing output failed: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

/* Read the next chunk into sc->t.  Returns an exit code. */
static int
take_chunk(struct score *sc, const char *name, struct ids_reader *idr,
	   const char *chunk, size_t len, bool *first_piece)
{
	struct engine *e = sc->e;
	double from = (double)sc->bytes;
	int k;

	if (!e->opts->ids) {
		k = engine_tokenize(e->mod, chunk, len);
		if (k < 0)
			return EXIT_RUNTIME;
		sc->bytes += len;
		add_tokens(sc, e->mod->ids, k, from, (double)sc->bytes);
		return EXIT_OK;
	}
	/* ids: the bytes are those of the text the ids stand for */
	struct tokvec ids = { 0 };
	int rc = engine_parse_ids(e, name, idr, chunk, len, &ids);

	for (int i = 0; rc == EXIT_OK && i < ids.n; i++) {
		int pl = 0;
		const char *p = engine_piece(e->mod, ids.v[i], &pl);

		if (p && pl > 0 && *first_piece && p[0] == ' ')
			pl--;
		if (p && pl > 0)
			*first_piece = false;
		from = (double)sc->bytes;
		if (p && pl > 0)
			sc->bytes += (uint64_t)pl;
		add_tokens(sc, ids.v + i, 1, from, (double)sc->bytes);
	}
	free(ids.v);
	return rc;
}

int
engine_score(struct engine *e, struct input *in, FILE *out)
{
	struct txl_session_params p = engine_params(e);
	/* a model without memory: whole groups of its stride per call, so
	 * that the windows stay aligned at the text's start */
	int seg = p.stride > 0 ? p.seg_len / p.stride * p.stride : p.seg_len;
	struct score sc = { .e = e, .out = out };
	struct progress pg;
	const char *chunk;
	char run[64];
	size_t len;
	struct ids_reader idr = { .line = 1 };
	bool first_piece = true;
	int rc = EXIT_OK, got;
	double t0 = now_s();

	sc.lp = xrealloc(NULL, (size_t)p.seg_len * sizeof(double));
	progress_init(&pg, in->size);
	/* the reference, and its vocabulary checked, before any reading */
	if (e->opts->kl_ref && (rc = kl_ref_open(e, &sc.kl)) != EXIT_OK)
		goto out;
	while ((got = input_next(in, &chunk, &len)) > 0) {
		rc = take_chunk(&sc, in->name, &idr, chunk, len,
				&first_piece);
		if (rc != EXIT_OK)
			goto out;
		/* a full segment and the token after it: as eval.py's
		 * iterator, inputs x[s:s+seg], targets x[s+1:s+seg+1] */
		while (sc.t.n > seg) {
			rc = score_segment(&sc, seg);
			if (rc != EXIT_OK)
				goto out;
			drop_tokens(&sc, seg);
			progress_show(&pg, in->consumed, sc.base,
				      running(&sc, run, sizeof(run)), false);
		}
	}
	if (got < 0) {
		rc = interrupted ? EXIT_INTERRUPTED : EXIT_RUNTIME;
		goto out;
	}
	/* the id the input ends with (at most one: sc.t.n <= seg + 1) */
	if (e->opts->ids &&
	    (rc = take_chunk(&sc, in->name, &idr, NULL, 0, &first_piece)))
		goto out;
	if (sc.total < 2) {
		errmsg("%s: nothing to score: %s", in->name, sc.total ?
		       "one token gives no prediction, at least 2 are needed" :
		       e->opts->ids ? "no token ids" : "no text");
		rc = EXIT_RUNTIME;
		goto out;
	}
	if (sc.t.n > 1) {
		rc = score_segment(&sc, sc.t.n - 1);
		if (rc != EXIT_OK)
			goto out;
	}
	progress_done(&pg);
	rc = write_summary(&sc, false);
	if (e->opts->stats) {
		double t1 = now_s() - t0;

		fprintf(stderr, "txlgen: scored %lld tokens in %.3f s "
			"(%.1f tokens/s)\n", (long long)sc.total, t1,
			t1 > 0 ? (double)sc.total / t1 : 0.0);
		engine_print_mem(e, stderr, "txlgen: ");
	}
out:
	progress_done(&pg);
	/* interrupted: what was scored so far is worth having */
	if (rc == EXIT_INTERRUPTED && sc.n_pred > 0 &&
	    write_summary(&sc, true) != EXIT_OK)
		rc = EXIT_RUNTIME;
	strbuf_free(&sc.text);
	kl_ref_free(sc.kl);
	free(sc.t.v);
	free(sc.end);
	free(sc.lp);
	return rc;
}
