/* SPDX-License-Identifier: MIT */
/*
 * score.c - --score: the log-likelihood of a text under the model, with
 * the protocol of the original eval.py, read as a stream.
 *
 * The summary gives the mean negative log-likelihood per token, the
 * perplexity, the bits per byte and per character (UTF-8 code points:
 * what a character-level model's bits per token are, whatever its
 * vocabulary says), and the standard error of the mean NLL over tokens (sd / sqrt(n), as llama-perplexity reports it; neighbouring
 * tokens are not independent, so it is a lower bound of the real
 * uncertainty), carried over to bits per byte.  Interrupted, it gives the
 * same for what was scored so far, marked partial.
 *
 * Each prediction's rank (1 + the tokens of the vocabulary more likely
 * than the one that came) goes with its log-prob into the JSON rows and
 * the --html page; it takes the full distribution, which a full softmax
 * computes to score anyway and an adaptive one then computes too.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "engine-model.h"
#include "engine-streams.h"
#include "engine.h"
#include "html.h"
#include "modes.h"
#include "progress.h"
#include "signals.h"
#include "text.h"

struct score {
	struct engine *e;
	FILE *out;
	struct tokvec t;       /* tokens read, not yet scored as inputs */
	double *end;           /* end[i]: bytes of text up to the end of
				  token t.v[i] (interpolated in a chunk) */
	double *cend;          /* and characters */
	int end_cap;
	double *lp;            /* log-probs of a segment's targets */
	int *rank;             /* and their ranks, or NULL: not wanted */
	int64_t base;          /* input index of t.v[0] */
	int64_t total;         /* tokens read */
	uint64_t bytes;        /* bytes of text read (or that ids stand for) */
	uint64_t chars;        /* and their characters */
	double scored_bytes;   /* bytes up to the last token predicted */
	double scored_chars;
	int64_t n_pred;
	double sum_nll, mean, m2; /* Welford's running mean and M2 of NLL */
	struct utf8_state u8;  /* the text of the tokens, for JSON rows */
	struct strbuf text;
	struct kl_ref *kl;     /* --kl-ref, or NULL */
	struct html_page *html; /* --html, or NULL */
	bool lead;             /* the page has no text yet */
};

/* The characters of UTF-8 text: the bytes that are not continuations,
 * whatever the chunk boundaries cut. */
static uint64_t
count_chars(const char *s, size_t len)
{
	uint64_t n = 0;

	for (size_t i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xc0) != 0x80;
	return n;
}

/* Tokens @p ids, that end the text at sc->bytes and sc->chars: from
 * @p from bytes and @p cfrom characters before them. */
static void
add_tokens(struct score *sc, const int32_t *ids, int n, double from,
	   double cfrom)
{
	const double to = (double)sc->bytes, cto = (double)sc->chars;

	if (sc->t.n + n > sc->end_cap) {
		sc->end_cap = (sc->t.n + n) * 2;
		sc->end = xrealloc(sc->end, (size_t)sc->end_cap *
				   sizeof(double));
		sc->cend = xrealloc(sc->cend, (size_t)sc->end_cap *
				    sizeof(double));
	}
	/* whole bytes, so that a partial summary's bpb is its bytes' */
	for (int i = 0; i < n; i++) {
		sc->end[sc->t.n + i] = floor(from + (to - from) * (i + 1) / n);
		sc->cend[sc->t.n + i] = floor(cfrom + (cto - cfrom) *
					      (i + 1) / n);
	}
	tokvec_add(&sc->t, ids, n);
	sc->total += n;
}

static void
drop_tokens(struct score *sc, int n)
{
	memmove(sc->end, sc->end + n, (size_t)(sc->t.n - n) * sizeof(double));
	memmove(sc->cend, sc->cend + n, (size_t)(sc->t.n - n) *
		sizeof(double));
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

/* The token's text into the page: the text's first without the space
 * that SentencePiece puts before it (and its decoder takes off). */
static void
page_token(struct score *sc, double lp, int rank)
{
	const char *s = sc->text.s;
	size_t len = sc->text.len;

	if (sc->lead && len > 0) {
		sc->lead = false;
		if (s[0] == ' ')
			s++, len--;
	}
	html_token(sc->html, s, len, lp, rank);
}

/* rank[i]: 1 + the tokens more likely than targets[i] under row i.  A
 * full softmax's logits order the tokens as their log-probs do; an
 * adaptive one's are its log-probs, every cluster computed. */
static void
ranks(struct score *sc, const int32_t *targets, int n)
{
	const float *lg = txl_session_logits(sc->e->streams->session);
	const int V = sc->e->mod->hp->n_token;

	for (int i = 0; i < n; i++) {
		const float *row = lg + (size_t)i * V;
		const float x = row[targets[i]];
		int r = 1;

		for (int j = 0; j < V; j++)
			r += row[j] > x;
		sc->rank[i] = r;
	}
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
	if (sc->base == 0 && (e->opts->json || sc->html)) {
		token_text(sc, t[0]);  /* may begin a character */
		if (sc->html)
			page_token(sc, NAN, 0);
	}
	st = txl_session_score(e->streams->session, t + 1, n, sc->lp);
	if (st != TXL_OK) {
		errmsg("%s", engine_lib_error(st));
		return EXIT_RUNTIME;
	}
	if (sc->rank)
		ranks(sc, t + 1, n);
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
		if (e->opts->json || sc->html)
			token_text(sc, t[i + 1]);
		if (sc->html)
			page_token(sc, lp, sc->rank[i]);
		if (e->opts->json) {
			fprintf(sc->out, "{\"pos\": %lld, \"id\": %d, "
				"\"text\": ", (long long)(sc->base + i + 1),
				(int)t[i + 1]);
			json_write_string(sc->out, sc->text.s, sc->text.len);
			fputs(", \"logprob\": ", sc->out);
			json_write_number(sc->out, lp);
			fprintf(sc->out, ", \"rank\": %d", sc->rank[i]);
			if (sc->kl)
				kl_ref_json_row(sc->kl, i, sc->out);
			fputs("}\n", sc->out);
		}
	}
	sc->base += n;
	sc->scored_bytes = sc->end[n];
	sc->scored_chars = sc->cend[n];
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

/* The summary's lines of text, "key value", as the page shows them too. */
enum { N_SUMMARY = 10 };
static const char *const summary_key[N_SUMMARY] = { "tokens", "predicted",
	"bytes", "chars", "nll", "ppl", "bpb", "bpc", "nll_stderr",
	"bpb_stderr" };
static const int summary_digits[N_SUMMARY] = { 0, 0, 0, 0, 6, 4, 6, 6, 6,
	6 };

static int
write_summary(const struct score *sc, bool partial)
{
	FILE *out = sc->out;
	double bytes = partial ? sc->scored_bytes : (double)sc->bytes;
	double chars = partial ? sc->scored_chars : (double)sc->chars;
	double nll = sc->sum_nll / (double)sc->n_pred, se = nll_stderr(sc);
	double k = bytes > 0 ? 1 / log(2.0) / bytes : 0;
	double bpb = sc->sum_nll * k, bpb_se = se * (double)sc->n_pred * k;
	double bpc = chars > 0 ? sc->sum_nll / log(2.0) / chars : 0;
	const double v[N_SUMMARY] = { (double)sc->total, (double)sc->n_pred,
		bytes, chars, nll, exp(nll), bpb, bpc, se, bpb_se };

	if (sc->html && !partial) {
		char buf[64];

		for (int i = 0; i < N_SUMMARY; i++) {
			snprintf(buf, sizeof(buf), "%.*f",
				 summary_digits[i], v[i]);
			html_item(sc->html, true, summary_key[i], buf);
		}
	}
	/* the page alone on stdout */
	if (sc->html && !sc->html->path)
		return EXIT_OK;
	if (sc->e->opts->json) {
		fprintf(out, "{\"tokens\": %lld, \"predicted\": %lld, "
			"\"bytes\": %.0f, \"chars\": %.0f, \"nll\": ",
			(long long)sc->total, (long long)sc->n_pred, bytes,
			chars);
		json_write_number(out, nll);
		fputs(", \"ppl\": ", out);
		json_write_number(out, exp(nll));
		fputs(", \"bpb\": ", out);
		json_write_number(out, bpb);
		fputs(", \"bpc\": ", out);
		json_write_number(out, bpc);
		fputs(", \"nll_stderr\": ", out);
		json_write_number(out, se);
		fputs(", \"bpb_stderr\": ", out);
		json_write_number(out, bpb_se);
		if (sc->kl)
			kl_ref_summary(sc->kl, out, true, bytes);
		fprintf(out, ", \"partial\": %s}\n", partial ? "true" : "false");
	} else {
		for (int i = 0; i < N_SUMMARY; i++) {
			fprintf(out, "%s %.*f\n", summary_key[i],
				summary_digits[i], v[i]);
		}
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

/* The page's model and settings, then the page written. */
static int
write_page(struct score *sc, const char *name)
{
	static const char *const keys[] = { "seg_len", "mem_len", "clamp_len",
		"same_length", "mem_init", "score_stride", "kv_type",
		"compute", "adapt" };
	const struct engine *e = sc->e;
	const struct txl_hparams *hp = e->mod->hp;
	struct txlgen_options shown;
	char buf[128], *title;
	int rc;

	html_item(sc->html, false, "model", e->mod->path);
	snprintf(buf, sizeof(buf), "%d layers, d_model %d, %d heads, "
		 "attn_type %d", hp->n_layer, hp->d_model, hp->n_head,
		 (int)hp->attn_type);
	html_item(sc->html, false, "shape", buf);
	snprintf(buf, sizeof(buf), "%d tokens, %s", hp->n_token,
		 hp->n_cutoffs ? "adaptive softmax" : "full softmax");
	html_item(sc->html, false, "vocabulary", buf);
	engine_effective_options(e, &shown);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		char *v = config_value(setting_find(keys[i]), &shown,
				       e->streams->session);

		size_t n = strlen(v);

		/* a name without its JSON quotes */
		if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
			v[n - 1] = '\0';
			html_item(sc->html, false, keys[i], v + 1);
		} else {
			html_item(sc->html, false, keys[i], v);
		}
		free(v);
	}
	/* options of the command line alone */
	if (e->opts->ids)
		html_item(sc->html, false, "ids", "true");
	if (e->opts->kl_ref)
		html_item(sc->html, false, "kl_ref", e->opts->kl_ref);
	title = xrealloc(NULL, strlen(name) + 32);
	sprintf(title, "txlgen --score %s", name);
	rc = html_write(sc->html, title);
	free(title);
	return rc;
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
		double cfrom = (double)sc->chars;

		k = engine_tokenize(e->mod, chunk, len);
		if (k < 0)
			return EXIT_RUNTIME;
		sc->bytes += len;
		sc->chars += count_chars(chunk, len);
		add_tokens(sc, e->mod->ids, k, from, cfrom);
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
		double cfrom = (double)sc->chars;

		from = (double)sc->bytes;
		if (p && pl > 0) {
			sc->bytes += (uint64_t)pl;
			sc->chars += count_chars(p, (size_t)pl);
		}
		add_tokens(sc, ids.v + i, 1, from, cfrom);
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
	struct score sc = { .e = e, .out = out, .lead = true };
	struct html_page page;
	struct progress pg;
	const char *chunk;
	char run[64];
	size_t len;
	struct ids_reader idr = { .line = 1 };
	bool first_piece = true;
	int rc = EXIT_OK, got;
	double t0 = now_s();

	sc.lp = xrealloc(NULL, (size_t)p.seg_len * sizeof(double));
	if (e->opts->json || e->opts->html)
		sc.rank = xrealloc(NULL, (size_t)p.seg_len * sizeof(int));
	/* before any goto out: out ends the progress line */
	progress_init(&pg, in->size);
	/* a page that cannot be written fails before any work */
	if (e->opts->html) {
		if ((rc = html_open(&page, e->opts->html)) != EXIT_OK)
			goto out;
		sc.html = &page;
	}
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
	if (sc.html) {
		/* a character the text leaves unfinished */
		sc.text.len = 0;
		utf8_finish(&sc.u8, &sc.text);
		html_token_more(sc.html, sc.text.s, sc.text.len);
	}
	rc = write_summary(&sc, false);
	if (rc == EXIT_OK && sc.html) {
		rc = write_page(&sc, in->name);
		sc.html = NULL;
	}
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
	if (sc.html)
		html_discard(sc.html);
	strbuf_free(&sc.text);
	free(sc.rank);
	kl_ref_free(sc.kl);
	free(sc.t.v);
	free(sc.end);
	free(sc.cend);
	free(sc.lp);
	return rc;
}
