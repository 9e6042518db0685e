/* SPDX-License-Identifier: MIT */
/*
 * docs.c - --score-docs: every line of the input a document of its own
 * (or, with --field, the string NAME of the JSON object on each line),
 * each scored from the same memory (an empty one, or that of --state-in
 * and --prime) with --score's protocol and numbers, one JSON object per
 * document on stdout, in input order.
 *
 * The documents go through --streams streams at once: a stream scores
 * one document a segment at a time and takes the next line when it is
 * done; a step feeds the next segment of every stream in one step of the
 * engine's batch (each weight read once for all of them).  Each document read takes a place in a ring of results until
 * every one before it is written, so that the output keeps the input's
 * order; no stream takes a new line while the ring is full.  So the
 * memory held is bounded (streams x a document, ring x a result),
 * whatever the size of the input, and a filter of any length (GNU
 * parallel --pipe, a job of a Slurm array) gives what one run gives.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "engine-model.h"
#include "engine-streams.h"
#include "engine.h"
#include "input.h"
#include "modes.h"
#include "progress.h"
#include "signals.h"
#include "text.h"

/* A longer line is malformed (its tokens, and the tokenizer's work on
 * them, are held whole). */
#define DOC_MAX_BYTES (16 << 20)
/* The longest "id" carried to the output (its JSON text). */
#define ID_MAX_BYTES 1024
/* Results a stream may be ahead of the oldest unwritten document. */
#define RING_PER_STREAM 4
/* The most inputs of one step of the batch (more streams' segments go in
 * several). */
#define STEP_ROWS_MAX 4096

/* A document read, in flight or waiting to be written. */
struct doc {
	int64_t line;
	char *id;               /* the JSON text of its "id", or NULL */
	int64_t tokens, predicted;
	uint64_t bytes;
	double sum_nll;
	bool done;
};

/* A stream and the document it scores. */
struct doc_stream {
	struct txl_session *s;
	struct doc *doc;        /* NULL: idle */
	struct tokvec t;        /* the document's tokens */
	int pos;                /* tokens scored as inputs so far */
};

struct docs {
	struct engine *e;
	struct input *in;
	FILE *out;
	const struct txl_session *start; /* the memory each document starts
					    from; NULL: an empty one */
	struct doc_stream *st;
	int n_st;
	struct doc *ring;
	int cap;
	int64_t head, tail;     /* documents written, read */
	int seg;                /* inputs per segment */
	int rows;               /* the most inputs of a step of the batch */
	struct doc_stream **go; /* a step's streams, */
	struct txl_session **sess; /* their sessions, */
	const int32_t **tok;    /* inputs */
	int *len;               /* and lengths */
	double *lp;
	struct strbuf line;
	int64_t line_no;        /* of the next line */
	bool eof;               /* no more documents are read */
	int rc_at_end;          /* --strict: the malformed line's code */
	int64_t n_tokens, n_malformed;
	struct tokvec ids;      /* the tokens of the document read last */
};

/* ------------------------------------------------------------------ */
/* Reading                                                             */

/*
 * The next line into d->line, NUL-terminated, without its line end
 * ("\n" or "\r\n").  Returns 1 with a line, 0 at the end of the input,
 * -1 on a read error (reported) or a signal.  *@p too_long: the line
 * was longer than DOC_MAX_BYTES (read through, not kept).
 */
static int
read_line(struct docs *d, bool *too_long)
{
	const char *chunk;
	size_t len;
	int got;

	d->line.len = 0;
	*too_long = false;
	for (;;) {
		got = input_next(d->in, &chunk, &len);
		if (got < 0)
			return -1;
		if (got == 0) {
			if (d->line.len == 0 && !*too_long)
				return 0;
			break;  /* a last line without its newline */
		}
		if (d->line.len + len > DOC_MAX_BYTES)
			*too_long = true;
		if (!*too_long)
			strbuf_add(&d->line, chunk, len);
		if (chunk[len - 1] == '\n')
			break;
	}
	if (*too_long)
		d->line.len = 0;
	if (d->line.len && d->line.s[d->line.len - 1] == '\n')
		d->line.len--;
	if (d->line.len && d->line.s[d->line.len - 1] == '\r')
		d->line.len--;
	strbuf_add(&d->line, "", 0);
	d->line.s[d->line.len] = '\0';
	return 1;
}

/* A malformed line: reported with its number, skipped; with --strict
 * the last line read. */
static void __attribute__((format(printf, 3, 4)))
malformed(struct docs *d, int64_t line, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	d->n_malformed++;
	errmsg("%s:%lld: %s%s", d->in->name, (long long)line, why,
	       d->e->opts->strict ? "; the run ends (--strict)" : "; skipped");
	if (d->e->opts->strict) {
		d->eof = true;
		d->rc_at_end = EXIT_RUNTIME;
	}
}

static const char *
json_kind(const cJSON *v)
{
	return cJSON_IsNull(v) ? "null" : cJSON_IsBool(v) ? "a boolean"
		: cJSON_IsNumber(v) ? "a number" : cJSON_IsString(v) ?
		"a string" : cJSON_IsArray(v) ? "an array" : "an object";
}

/* The first \u0000 escape in the strings of the JSON text @p s (of @p n
 * bytes), or NULL: a backslash that an even number of backslashes
 * precede, then u0000. */
static const char *
escaped_nul(const char *s, size_t n)
{
	for (size_t i = 0; i + 6 <= n; i++) {
		if (s[i] != '\\')
			continue;
		if (s[i + 1] == 'u' && s[i + 2] == '0' && s[i + 3] == '0' &&
		    s[i + 4] == '0' && s[i + 5] == '0')
			return s + i;
		i++;	/* the escaped character */
	}
	return NULL;
}

/* Whether @p s (of @p n bytes) is only JSON's whitespace. */
static bool
blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strchr(" \t\r\n", s[i]))
			return false;
	return true;
}

/* How many members of the object @p o are named @p key. */
static int
key_count(const cJSON *o, const char *key)
{
	const cJSON *c;
	int k = 0;

	cJSON_ArrayForEach(c, o)
		k += c->string && !strcmp(c->string, key);
	return k;
}

/*
 * The document of d->line (line @p line): its text into *@p text and
 * *@p len (pointing into d->line or *@p json, which the caller frees),
 * its id into doc->id.  False if the line is malformed (reported).
 */
static bool
parse_doc(struct docs *d, int64_t line, struct doc *doc, cJSON **json,
	  const char **text, size_t *len)
{
	const char *field = d->e->opts->field, *end = NULL, *nul;
	const cJSON *v, *id;

	*json = NULL;
	if (!field) {
		*text = d->line.s;
		*len = d->line.len;
		return true;
	}
	/* a NUL in the text (a raw byte, or \u0000 in a string) would
	 * end it early: cJSON's strings are C strings */
	nul = memchr(d->line.s, 0, d->line.len);
	if (nul) {
		malformed(d, line, "a NUL byte at byte %lld (JSON text holds "
			  "none)", (long long)(nul - d->line.s) + 1);
		return false;
	}
	if ((nul = escaped_nul(d->line.s, d->line.len))) {
		malformed(d, line, "\\u0000 (NUL) at byte %lld: a text with "
			  "NUL characters is not scored",
			  (long long)(nul - d->line.s) + 1);
		return false;
	}
	*json = cJSON_ParseWithLengthOpts(d->line.s, d->line.len + 1, &end,
					  true);
	if (!*json) {
		if (!d->line.len)
			malformed(d, line, "an empty line, not a JSON object");
		else if (blank(d->line.s, d->line.len))
			malformed(d, line, "a blank line, not a JSON object");
		else
			malformed(d, line, "not JSON (at byte %lld)",
				  end ? (long long)(end - d->line.s) + 1 : 1LL);
		return false;
	}
	if (!cJSON_IsObject(*json)) {
		malformed(d, line, "%s, not a JSON object", json_kind(*json));
		return false;
	}
	v = cJSON_GetObjectItemCaseSensitive(*json, field);
	if (!v) {
		malformed(d, line, "no \"%s\" in the object", field);
		return false;
	}
	/* which of two values is meant cannot be known (cJSON takes the
	 * first, Python's json the last): neither */
	if (key_count(*json, field) > 1 || key_count(*json, "id") > 1) {
		malformed(d, line, "\"%s\" twice in the object",
			  key_count(*json, field) > 1 ? field : "id");
		return false;
	}
	if (!cJSON_IsString(v)) {
		malformed(d, line, "\"%s\" is %s, not a string", field,
			  json_kind(v));
		return false;
	}
	id = cJSON_GetObjectItemCaseSensitive(*json, "id");
	if (id) {
		doc->id = json_string(id, -1);
		if (strlen(doc->id) > ID_MAX_BYTES) {
			malformed(d, line, "its \"id\" is longer than %d "
				  "bytes", ID_MAX_BYTES);
			free(doc->id);
			doc->id = NULL;
			return false;
		}
	}
	*text = v->valuestring;
	*len = strlen(v->valuestring);
	return true;
}

/* ------------------------------------------------------------------ */
/* Scoring                                                             */

/* The tokens of the document @p text (@p len bytes) into d->ids, as
 * --score makes those of the same text: in the chunks input_next() cuts
 * (at most 64 KiB, before a space where there is one), so that a
 * document of 16 MiB costs the tokenizer's memory of 64 KiB, not of the
 * whole (1.35 GB).  The number of tokens, or -1 (reported). */
static int
tokenize_doc(struct docs *d, const char *text, size_t len)
{
	struct input in;
	const char *chunk;
	size_t n;
	int got, k;

	d->ids.n = 0;
	input_open_text(&in, text, len, "document");
	while ((got = input_next(&in, &chunk, &n)) > 0) {
		if ((k = engine_tokenize(d->e->mod, chunk, n)) < 0) {
			got = -1;
			break;
		}
		tokvec_add(&d->ids, d->e->mod->ids, k);
	}
	input_close(&in);
	return got < 0 ? -1 : d->ids.n;
}

/* Start @p st on @p doc, whose tokens are d->ids[0..n): from the start
 * memory.  A document of fewer than 2 tokens predicts none and needs no
 * stream.  Returns an exit code. */
static int
begin_doc(struct docs *d, struct doc_stream *st, struct doc *doc, int n)
{
	enum txl_status ts = TXL_OK;

	doc->tokens = n;
	if (n < 2) {
		doc->done = true;
		return EXIT_OK;
	}
	st->doc = doc;
	st->t.n = 0;
	tokvec_add(&st->t, d->ids.v, n);
	st->pos = 0;
	if (d->start)
		ts = txl_session_copy(st->s, d->start);
	else
		txl_session_reset(st->s);
	return engine_run_status(ts);
}

/* Read documents into the idle streams while the ring has room; while
 * a stream has work, only what the input has ready.  Returns an exit
 * code. */
static int
fill_streams(struct docs *d)
{
	bool busy = false;

	for (int k = 0; k < d->n_st; k++)
		busy = busy || d->st[k].doc;
	for (int k = 0; k < d->n_st; k++) {
		struct doc_stream *st = &d->st[k];

		while (!st->doc && !d->eof && d->tail - d->head < d->cap) {
			if (busy && !input_ready(d->in))
				return EXIT_OK;
			struct doc *doc = &d->ring[d->tail % d->cap];
			int64_t line = d->line_no;
			const char *text;
			cJSON *json;
			size_t len;
			bool too_long;
			int got = read_line(d, &too_long), n, rc;

			if (got <= 0) {
				d->eof = true;
				if (got < 0)
					return interrupted ? EXIT_INTERRUPTED
						: EXIT_RUNTIME;
				break;
			}
			d->line_no++;
			*doc = (struct doc){ .line = line };
			if (too_long) {
				malformed(d, line, "longer than %d MiB",
					  DOC_MAX_BYTES >> 20);
				continue;
			}
			if (!parse_doc(d, line, doc, &json, &text, &len)) {
				cJSON_Delete(json);
				continue;
			}
			n = tokenize_doc(d, text, len);
			cJSON_Delete(json);
			if (n < 0)
				return EXIT_RUNTIME;
			doc->bytes = len;
			d->tail++;
			rc = begin_doc(d, st, doc, n);
			if (rc != EXIT_OK)
				return rc;
			busy = busy || st->doc;
		}
	}
	return EXIT_OK;
}

/* The inputs of @p st's next segment: t[pos .. pos + len), predicting
 * t[pos + 1 .. pos + len], as --score's segments. */
static int
segment_len(const struct docs *d, const struct doc_stream *st)
{
	const int len = st->t.n - 1 - st->pos;

	return len < d->seg ? len : d->seg;
}

/* After the segment of @p st was fed (its rows of output held): their
 * scores into its document.  Returns an exit code. */
static int
score_segment(struct docs *d, struct doc_stream *st)
{
	struct doc *doc = st->doc;
	const int32_t *t = st->t.v + st->pos;
	const int len = segment_len(d, st);
	enum txl_status ts;

	ts = txl_session_score(st->s, t + 1, len, d->lp);
	if (ts != TXL_OK) {
		errmsg("%s", engine_lib_error(ts));
		return EXIT_RUNTIME;
	}
	for (int i = 0; i < len; i++)
		doc->sum_nll -= d->lp[i];
	doc->predicted += len;
	st->pos += len;
	d->n_tokens += len;
	if (st->pos == st->t.n - 1) {
		doc->done = true;
		st->doc = NULL;
	}
	return EXIT_OK;
}

/* Feed the segments of the streams go[0 .. n) in one step of the
 * engine's batch, then score them.  Returns an exit code. */
static int
feed_group(struct docs *d, struct doc_stream **go, int n)
{
	int rc;

	for (int k = 0; k < n; k++) {
		d->sess[k] = go[k]->s;
		d->tok[k] = go[k]->t.v + go[k]->pos;
		d->len[k] = segment_len(d, go[k]);
	}
	rc = n == 1 ? engine_feed_to(d->e, d->sess[0], d->tok[0], d->len[0],
				     TXL_LOGITS_ALL)
		: engine_feed_many(d->e, d->sess, d->tok, d->len, n,
				   TXL_LOGITS_ALL, false, d->rows);
	for (int k = 0; k < n && rc == EXIT_OK; k++)
		rc = score_segment(d, go[k]);
	return rc;
}

/* One step: a segment of every stream's document, the streams together
 * (each weight read once for all), as many rows at a time as the batch
 * takes.  Returns an exit code. */
static int
step(struct docs *d)
{
	int n = 0, rows = 0, rc = EXIT_OK;

	for (int k = 0; k < d->n_st && rc == EXIT_OK; k++) {
		struct doc_stream *st = &d->st[k];

		if (!st->doc)
			continue;
		if (rows + segment_len(d, st) > d->rows) {
			rc = feed_group(d, d->go, n);
			n = rows = 0;
		}
		d->go[n++] = st;
		rows += segment_len(d, st);
	}
	if (rc == EXIT_OK && n)
		rc = feed_group(d, d->go, n);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Writing                                                             */

static void
write_doc(FILE *f, const struct doc *doc)
{
	double nll = doc->predicted ? doc->sum_nll / (double)doc->predicted
		: NAN;

	fprintf(f, "{\"line\": %lld, ", (long long)doc->line);
	if (doc->id)
		fprintf(f, "\"id\": %s, ", doc->id);
	fprintf(f, "\"tokens\": %lld, \"predicted\": %lld, \"bytes\": %llu, "
		"\"nll\": ", (long long)doc->tokens, (long long)doc->predicted,
		(unsigned long long)doc->bytes);
	json_write_number(f, nll);
	fputs(", \"ppl\": ", f);
	json_write_number(f, exp(nll));
	fputs(", \"bpb\": ", f);
	json_write_number(f, doc->predicted && doc->bytes ?
			  doc->sum_nll / log(2.0) / (double)doc->bytes : NAN);
	fputs("}\n", f);
}

/* Write the documents done, in input order, up to the first still in
 * flight.  Returns an exit code. */
static int
write_done(struct docs *d)
{
	bool wrote = false;

	while (d->head < d->tail && d->ring[d->head % d->cap].done) {
		struct doc *doc = &d->ring[d->head % d->cap];

		write_doc(d->out, doc);
		free(doc->id);
		doc->id = NULL;
		d->head++;
		wrote = true;
	}
	if (wrote)
		fflush(d->out);
	if (ferror(d->out)) {
		errmsg("writing output failed: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

/* ------------------------------------------------------------------ */

static int
open_streams(struct docs *d)
{
	struct engine *e = d->e;
	struct txl_session_params p = engine_params(e);
	double bytes = (double)txl_session_bytes(e->mod->model, &p) * d->n_st;
	double have = (double)sysconf(_SC_PHYS_PAGES) *
		(double)sysconf(_SC_PAGESIZE);
	enum txl_status ts;

	if (have > 0 && bytes > have) {
		errmsg("--streams %d: the sessions need %.1f GiB, more than "
		       "this machine's %.1f GiB", d->n_st, bytes / (1 << 30),
		       have / (1 << 30));
		return EXIT_RUNTIME;
	}
	for (int k = 0; k < d->n_st; k++) {
		ts = engine_session_new(e, &p, &d->st[k].s);
		if (ts != TXL_OK) {
			errmsg("%s", engine_lib_error(ts));
			return EXIT_RUNTIME;
		}
	}
	return EXIT_OK;
}

int
engine_score_docs(struct engine *e, struct input *in, FILE *out)
{
	const struct txlgen_options *o = e->opts;
	struct txl_session_params p = engine_params(e);
	struct docs d = {
		.e = e, .in = in, .out = out,
		.start = e->streams->started ? e->streams->session : NULL,
		.n_st = (int)o->streams,
		.line_no = o->first_line,
		/* a model without memory: whole groups of its stride per
		 * call, as --score */
		.seg = p.stride > 0 ? p.seg_len / p.stride * p.stride
			: p.seg_len,
	};
	struct progress pg;
	char extra[64];
	double t0 = now_s();
	int rc;

	d.cap = d.n_st * RING_PER_STREAM;
	d.st = xrealloc(NULL, (size_t)d.n_st * sizeof(*d.st));
	memset(d.st, 0, (size_t)d.n_st * sizeof(*d.st));
	d.ring = xrealloc(NULL, (size_t)d.cap * sizeof(*d.ring));
	memset(d.ring, 0, (size_t)d.cap * sizeof(*d.ring));
	d.lp = xrealloc(NULL, (size_t)p.seg_len * sizeof(double));
	/* a step's rows: every stream's segment, up to a bound on the
	 * batch's scratch (a few MB a thousand rows) */
	d.rows = d.n_st * d.seg < STEP_ROWS_MAX ? d.n_st * d.seg
		: STEP_ROWS_MAX;
	if (d.rows < d.seg)
		d.rows = d.seg;
	d.go = xrealloc(NULL, (size_t)d.n_st * sizeof(*d.go));
	d.sess = xrealloc(NULL, (size_t)d.n_st * sizeof(*d.sess));
	d.tok = xrealloc(NULL, (size_t)d.n_st * sizeof(*d.tok));
	d.len = xrealloc(NULL, (size_t)d.n_st * sizeof(*d.len));
	progress_init(&pg, in->size);

	rc = open_streams(&d);
	while (rc == EXIT_OK) {
		/* the ring emptied first, for the documents read next */
		rc = write_done(&d);
		if (rc == EXIT_OK)
			rc = fill_streams(&d);
		if (rc == EXIT_OK)
			rc = write_done(&d);
		if (rc != EXIT_OK || (d.head == d.tail && d.eof))
			break;
		rc = step(&d);
		if (rc == EXIT_OK && interrupted)
			rc = EXIT_INTERRUPTED;
		snprintf(extra, sizeof(extra), "%lld documents",
			 (long long)d.head);
		progress_show(&pg, in->consumed, d.n_tokens, extra, false);
	}
	progress_done(&pg);
	/* what was done before a signal or an error is written; the rest
	 * starts at the first line not written */
	if (rc != EXIT_OK && write_done(&d) != EXIT_OK)
		rc = EXIT_RUNTIME;
	if (rc == EXIT_INTERRUPTED)
		errmsg("--score-docs: %lld documents written; the next one "
		       "read is line %lld", (long long)d.head, (long long)(
		       d.head < d.tail ? d.ring[d.head % d.cap].line :
		       d.line_no));
	if (rc == EXIT_OK)
		rc = d.rc_at_end;
	if (o->stats) {
		double t = now_s() - t0;

		fprintf(stderr, "txlgen: scored %lld documents, %lld tokens "
			"predicted, in %.3f s (%.1f tokens/s) with %d "
			"streams; %lld malformed line%s\n", (long long)d.head,
			(long long)d.n_tokens, t, t > 0 ?
			(double)d.n_tokens / t : 0.0, d.n_st,
			(long long)d.n_malformed, d.n_malformed == 1 ? "" :
			"s");
	}
	for (int k = 0; k < d.n_st; k++) {
		txl_session_free(d.st[k].s);
		free(d.st[k].t.v);
	}
	for (int i = 0; i < d.cap; i++)
		free(d.ring[i].id);
	free(d.ids.v);
	free(d.st);
	free(d.ring);
	free(d.lp);
	free(d.go);
	free(d.sess);
	free(d.tok);
	free(d.len);
	strbuf_free(&d.line);
	return rc;
}
