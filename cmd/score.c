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
 * --part K/N scores the K-th of N equal runs of the text's tokens: it
 * reads the whole text's tokens, starts where the memory entering the
 * segment of its first token is determined (txl_session_tail_start():
 * the receptive field of that memory, from the start of a segment of the
 * whole run), counts the tokens before as read (txl_session_skip()),
 * feeds the rest up to that segment without scoring, then scores the
 * whole run's segments that hold its tokens, as the whole run computes
 * them, and counts only its own predictions (--score-merge: parts.c).
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

/* --part: a chunk's tokens in the whole text, and where their text ends */
struct span {
	int64_t end;           /* tokens up to the end of the chunk */
	double to, cto;        /* bytes and characters of text up to it */
};

/* --part: every token of the text */
struct whole_text {
	int32_t *ids;
	int64_t n, cap;
	struct span *spans;
	int64_t n_spans, spans_cap;
};

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
	struct whole_text *whole; /* --part, else NULL */
	int64_t part_from, part_to; /* --part: its tokens [from, to) */
	double part_bytes, part_chars; /* and their text */
	uint64_t fingerprint;  /* --part: of model, settings and tokens */
	int64_t part_read;     /* --part: tokens computed, not its own */
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

/* The text up to the end of token @p i of @p n that stand for the text
 * from @p from to @p to: its length shared out among them, whole. */
static double
token_end(double from, double to, int64_t i, int64_t n)
{
	return floor(from + (to - from) * (double)(i + 1) / (double)n);
}

/* --part: tokens @p ids, a chunk of them, into the whole text */
static void
keep_tokens(struct whole_text *w, const int32_t *ids, int n, double to,
	    double cto)
{
	if (w->n + n > w->cap) {
		w->cap = (w->n + n) * 2;
		w->ids = xrealloc(w->ids, (size_t)w->cap * sizeof(int32_t));
	}
	if (n > 0)
		memcpy(w->ids + w->n, ids, (size_t)n * sizeof(int32_t));
	w->n += n;
	if (w->n_spans == w->spans_cap) {
		w->spans_cap = w->spans_cap ? 2 * w->spans_cap : 1024;
		w->spans = xrealloc(w->spans, (size_t)w->spans_cap *
				    sizeof(struct span));
	}
	w->spans[w->n_spans++] = (struct span){ w->n, to, cto };
}

/* --part: the bytes (@p chars: the characters) of the text up to the end
 * of token @p i, as a whole run counts them (-1: 0). */
static double
text_end(const struct score *sc, int64_t i, bool chars)
{
	const struct whole_text *w = sc->whole;
	int64_t lo = 0, hi = w->n_spans - 1;

	if (i < 0)
		return 0;
	if (i >= w->n - 1)
		return chars ? (double)sc->chars : (double)sc->bytes;
	/* the first chunk that ends after token i */
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;

		if (w->spans[mid].end > i)
			hi = mid;
		else
			lo = mid + 1;
	}
	const int64_t start = lo ? w->spans[lo - 1].end : 0;
	const double from = lo ? (chars ? w->spans[lo - 1].cto :
				  w->spans[lo - 1].to) : 0;

	return token_end(from, chars ? w->spans[lo].cto : w->spans[lo].to,
			 i - start, w->spans[lo].end - start);
}

/* Tokens @p ids, that end the text at sc->bytes and sc->chars: from
 * @p from bytes and @p cfrom characters before them. */
static void
add_tokens(struct score *sc, const int32_t *ids, int n, double from,
	   double cfrom)
{
	const double to = (double)sc->bytes, cto = (double)sc->chars;

	if (sc->whole) {
		keep_tokens(sc->whole, ids, n, to, cto);
		sc->total += n;
		return;
	}

	if (sc->t.n + n > sc->end_cap) {
		sc->end_cap = (sc->t.n + n) * 2;
		sc->end = xrealloc(sc->end, (size_t)sc->end_cap *
				   sizeof(double));
		sc->cend = xrealloc(sc->cend, (size_t)sc->end_cap *
				    sizeof(double));
	}
	/* whole bytes, so that a partial summary's bpb is its bytes' */
	for (int i = 0; i < n; i++) {
		sc->end[sc->t.n + i] = token_end(from, to, i, n);
		sc->cend[sc->t.n + i] = token_end(cfrom, cto, i, n);
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

/* Score the predictions of t[1..n] from inputs t[0..n-1], one segment,
 * and count those of t[lo + 1 .. hi] (a part's share of it; a whole run:
 * all).  txl_session_score() computes only what the targets need: with
 * an adaptive softmax the head and each target's own cluster, never the
 * full distribution. */
static int
score_segment(struct score *sc, const int32_t *t, int n, int lo, int hi)
{
	struct engine *e = sc->e;
	enum txl_status st;
	int rc = engine_feed(e, t, n, TXL_LOGITS_ALL);

	if (rc == EXIT_OK && sc->kl)
		rc = kl_ref_feed(e, sc->kl, t, n);
	if (rc != EXIT_OK)
		return rc;
	if (sc->base == 0 && !sc->whole && (e->opts->json || sc->html)) {
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
	for (int i = lo; i < hi; i++) {
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
	sc->scored_bytes = sc->end[hi];
	sc->scored_chars = sc->cend[hi];
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

/* The summary's values, in summary_key's order. */
static void
figures_values(const struct score_figures *f, double v[N_SUMMARY])
{
	double n = (double)f->predicted;
	double nll = f->sum_nll / n;
	double se = f->predicted > 1 ? sqrt(f->m2 / (n - 1) / n) : NAN;
	double k = f->bytes > 0 ? 1 / log(2.0) / f->bytes : 0;

	v[0] = (double)f->tokens;
	v[1] = n;
	v[2] = f->bytes;
	v[3] = f->chars;
	v[4] = nll;
	v[5] = exp(nll);
	v[6] = f->sum_nll * k;
	v[7] = f->chars > 0 ? f->sum_nll / log(2.0) / f->chars : 0;
	v[8] = se;
	v[9] = se * n * k;
}

void
score_figures_write(FILE *out, bool json, const struct score_figures *f)
{
	double v[N_SUMMARY];

	figures_values(f, v);
	for (int i = 0; i < N_SUMMARY; i++) {
		if (!json) {
			fprintf(out, "%s %.*f\n", summary_key[i],
				summary_digits[i], v[i]);
			continue;
		}
		fprintf(out, "%s\"%s\": ", i ? ", " : "{", summary_key[i]);
		json_write_exact(out, v[i]);
	}
}

/* What was scored: the whole text's figures, a part's share of them, or
 * (@p partial) what an interrupted run scored. */
static struct score_figures
figures(const struct score *sc, bool partial)
{
	struct score_figures f = { .tokens = sc->total,
		.predicted = sc->n_pred, .sum_nll = sc->sum_nll,
		.m2 = sc->m2 };

	f.bytes = partial ? sc->scored_bytes : (double)sc->bytes;
	f.chars = partial ? sc->scored_chars : (double)sc->chars;
	if (sc->whole) {
		f.tokens = sc->part_to - sc->part_from;
		if (!partial) {
			f.bytes = sc->part_bytes;
			f.chars = sc->part_chars;
		}
	}
	return f;
}

static int
write_summary(const struct score *sc, bool partial)
{
	FILE *out = sc->out;
	const struct score_figures f = figures(sc, partial);
	const bool json = sc->e->opts->json;

	if (sc->html && !partial) {
		double v[N_SUMMARY];
		char buf[64];

		figures_values(&f, v);
		for (int i = 0; i < N_SUMMARY; i++) {
			snprintf(buf, sizeof(buf), "%.*f",
				 summary_digits[i], v[i]);
			html_item(sc->html, true, summary_key[i], buf);
		}
	}
	/* the page alone on stdout */
	if (sc->html && !sc->html->path)
		return EXIT_OK;
	score_figures_write(out, json, &f);
	if (sc->kl)
		kl_ref_summary(sc->kl, out, json, f.bytes);
	if (json)
		fprintf(out, ", \"partial\": %s", partial ? "true" : "false");
	else
		fprintf(out, "partial %s\n", partial ? "true" : "false");
	/* a part: what --score-merge needs */
	if (sc->whole && json) {
		fprintf(out, ", \"part\": \"%lld/%lld\", \"nll_sum\": ",
			(long long)sc->e->opts->part_k,
			(long long)sc->e->opts->part_n);
		json_write_exact(out, f.sum_nll);
		fputs(", \"nll_m2\": ", out);
		json_write_exact(out, f.m2);
		fprintf(out, ", \"fingerprint\": \"%016llx\"",
			(unsigned long long)sc->fingerprint);
	} else if (sc->whole) {
		fprintf(out, "part %lld/%lld\nfingerprint %016llx\n",
			(long long)sc->e->opts->part_k,
			(long long)sc->e->opts->part_n,
			(unsigned long long)sc->fingerprint);
	}
	if (json)
		fputs("}\n", out);
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

/* The tokens [*from, *to) of part @p k of @p n of a text of @p total. */
static void
part_range(int64_t total, int64_t k, int64_t n, int64_t *from, int64_t *to)
{
	/* floor(total * i / n) without overflow */
	*from = total / n * (k - 1) + total % n * (k - 1) / n;
	*to = total / n * k + total % n * k / n;
}

/* 64-bit FNV-1a of @p len bytes at @p p, going on from @p h. */
static uint64_t
part_hash(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* --part: a fingerprint of the model, the settings that shape the scores
 * and the text's tokens, which every part of one run has */
static uint64_t
fingerprint(const struct score *sc, const struct txl_session_params *p)
{
	const struct engine *e = sc->e;
	const struct whole_text *w = sc->whole;
	const int64_t v[] = { (int64_t)txl_model_fingerprint(e->mod->model),
		p->mem_len, p->seg_len, p->clamp_len, p->same_length,
		p->mem_init, p->stride, p->kv_type, e->opts->compute, w->n,
		(int64_t)sc->bytes, (int64_t)sc->chars };
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a's offset basis */
	unsigned char b[8];

	/* little-endian, whatever the machine */
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		for (int j = 0; j < 8; j++)
			b[j] = (unsigned char)((uint64_t)v[i] >> (8 * j));
		h = part_hash(h, b, 8);
	}
	for (int64_t i = 0; i < w->n; i++) {
		for (int j = 0; j < 4; j++)
			b[j] = (unsigned char)((uint32_t)w->ids[i] >> (8 * j));
		h = part_hash(h, b, 4);
	}
	return h;
}

/* --part: its share of the text read, score the whole run's segments that
 * hold its predictions, after reading, without scoring, what the first of
 * them sees.  Returns an exit code. */
static int
score_share(struct score *sc, struct progress *pg, int seg,
	    const struct txl_session_params *p)
{
	struct engine *e = sc->e;
	const struct whole_text *w = sc->whole;
	const int64_t total = w->n;
	int64_t first, s0, s1, start, last;
	double from, cfrom, b0;
	char run[64];
	int rc = EXIT_OK;

	part_range(total, e->opts->part_k, e->opts->part_n, &sc->part_from,
		   &sc->part_to);
	from = text_end(sc, sc->part_from - 1, false);
	cfrom = text_end(sc, sc->part_from - 1, true);
	sc->part_bytes = text_end(sc, sc->part_to - 1, false) - from;
	sc->part_chars = text_end(sc, sc->part_to - 1, true) - cfrom;
	sc->fingerprint = fingerprint(sc, p);
	/* its predictions: of the tokens [first, part_to) */
	first = sc->part_from > 1 ? sc->part_from : 1;
	if (first >= sc->part_to)
		return EXIT_OK;
	/* the whole run's segments: inputs [s, s + seg), targets one on */
	s0 = (first - 1) / seg * seg;
	s1 = (sc->part_to - 2) / seg * seg;
	last = s1 + (total - 1 - s1 < seg ? total - 1 - s1 : seg);
	start = txl_session_tail_start(e->mod->model, p, s0);
	if (start < 0) {
		errmsg("%s", engine_lib_error(TXL_ERR_INVALID));
		return EXIT_RUNTIME;
	}
	for (int64_t i = 0; i < start;) {
		int k = start - i > (1 << 30) ? 1 << 30 : (int)(start - i);
		enum txl_status st = txl_session_skip(e->streams->session,
						      w->ids + i, k);

		if (st != TXL_OK) {
			errmsg("%s", engine_lib_error(st));
			return EXIT_RUNTIME;
		}
		i += k;
	}
	progress_done(pg);
	b0 = text_end(sc, start - 1, false);
	progress_init(pg, (uint64_t)(text_end(sc, last, false) - b0));
	if (s0 > start && (rc = engine_feed(e, w->ids + start,
					    (int)(s0 - start),
					    TXL_LOGITS_NONE)) != EXIT_OK)
		return rc;
	sc->part_read = s0 - start;
	/* the characters that the tokens before its first leave unfinished */
	if (e->opts->json) {
		for (int64_t i = first > 16 ? first - 16 : 0; i < first; i++)
			token_text(sc, w->ids[i]);
	}
	sc->end = xrealloc(sc->end, (size_t)(seg + 1) * sizeof(double));
	sc->cend = xrealloc(sc->cend, (size_t)(seg + 1) * sizeof(double));
	sc->end_cap = seg + 1;
	for (int64_t s = s0; s <= s1; s += seg) {
		const int n = total - 1 - s < seg ? (int)(total - 1 - s) : seg;
		const int lo = first - s - 1 > 0 ? (int)(first - s - 1) : 0;
		const int hi = sc->part_to - s - 1 < n ?
			(int)(sc->part_to - s - 1) : n;

		for (int i = 0; i <= n; i++) {
			sc->end[i] = text_end(sc, s + i, false) - from;
			sc->cend[i] = text_end(sc, s + i, true) - cfrom;
		}
		sc->base = s;
		rc = score_segment(sc, w->ids + s, n, lo, hi);
		if (rc != EXIT_OK)
			return rc;
		/* what the part reads beside its own predictions */
		sc->part_read += n - (hi - lo);
		progress_show(pg, (uint64_t)(text_end(sc, s + n, false) - b0),
			      s + n - start, running(sc, run, sizeof(run)),
			      false);
	}
	return EXIT_OK;
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
	struct whole_text whole = { 0 };

	/* a part: the whole text's tokens first */
	if (e->opts->part)
		sc.whole = &whole;

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
		if (sc.whole)
			progress_show(&pg, in->consumed, sc.total,
				      "reading the text", false);
		/* a full segment and the token after it: as eval.py's
		 * iterator, inputs x[s:s+seg], targets x[s+1:s+seg+1] */
		while (sc.t.n > seg) {
			rc = score_segment(&sc, sc.t.v, seg, 0, seg);
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
	if (sc.whole) {
		rc = score_share(&sc, &pg, seg, &p);
		if (rc != EXIT_OK)
			goto out;
	} else if (sc.t.n > 1) {
		rc = score_segment(&sc, sc.t.v, sc.t.n - 1, 0, sc.t.n - 1);
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
	if (e->opts->stats && sc.whole) {
		double t1 = now_s() - t0;
		int64_t n = sc.n_pred + sc.part_read;

		fprintf(stderr, "txlgen: part %lld/%lld: scored %lld tokens "
			"and read %lld more in %.3f s (%.1f tokens/s)\n",
			(long long)e->opts->part_k, (long long)e->opts->part_n,
			(long long)sc.n_pred, (long long)sc.part_read, t1,
			t1 > 0 ? (double)n / t1 : 0.0);
		engine_print_mem(e, stderr, "txlgen: ");
	} else if (e->opts->stats) {
		double t1 = now_s() - t0;

		fprintf(stderr, "txlgen: scored %lld tokens in %.3f s "
			"(%.1f tokens/s)\n", (long long)sc.total, t1,
			t1 > 0 ? (double)sc.total / t1 : 0.0);
		engine_print_mem(e, stderr, "txlgen: ");
	}
out:
	progress_done(&pg);
	/* interrupted: what was scored so far is worth having (a part's
	 * only once its range is known) */
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
	free(whole.ids);
	free(whole.spans);
	return rc;
}
