/* SPDX-License-Identifier: MIT */
/*
 * feed.c - feeding text into the memory.
 *
 * Text is fed as it is read, chunk by chunk (input.c), in whole segments
 * aligned at the start of the text, as if it were fed at once: a prompt
 * or a --prime file of any size costs the same memory.  With --adapt each
 * segment is learned from once its next token is known.
 *
 * What a model with memory holds after a text depends only on the text's
 * last tokens, its receptive field (txl_session_receptive_field()): so,
 * unless --read-all or --adapt asks for every token, the whole segments
 * before the last field's worth are only counted (txl_session_skip()),
 * never computed, and the session ends bit for bit as after reading them.
 * A model without memory computes nothing but its last window anyway.
 */
#include <stdlib.h>
#include <string.h>

#include "engine-model.h"
#include "engine-streams.h"
#include "engine.h"
#include "output.h"
#include "progress.h"
#include "signals.h"
#include "text.h"

/* Blank lines after a line of a prompt file are held back until text
 * follows (final newlines are dropped); at most this many bytes. */
#define HOLD_MAX (1 << 20)

int
engine_adapt(struct engine *e, const int32_t *targets, int n)
{
	enum txl_status st;

	if (e->opts->adapt <= 0)
		return EXIT_OK;
	st = txl_session_adapt(e->streams->session, targets, n,
			       (float)e->opts->adapt);
	e->streams->have_logits = false;
	if (st != TXL_OK) {
		errmsg("%s", engine_lib_error(st));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

int
engine_feed_to(struct engine *e, struct txl_session *s, const int32_t *ids,
	       int n, enum txl_logits want)
{
	enum txl_status st = txl_session_eval(s, ids, n, want);

	if (s == e->streams->session && st == TXL_OK)
		engine_note_fed(e, ids, n);
	return engine_run_status(st);
}

int
engine_feed_many(struct engine *e, struct txl_session *const *sessions,
		 const int32_t *const *ids, const int *n, int n_sessions,
		 enum txl_logits want, bool logits, int max_rows)
{
	enum txl_status st;

	if (!e->streams->batch || e->streams->batch_rows < max_rows) {
		struct txl_batch_params p = txl_batch_params_default();

		txl_batch_free(e->streams->batch);
		e->streams->batch = NULL;
		p.max_rows = max_rows;
		st = txl_batch_new(e->mod->model, &p, &e->streams->batch);
		if (st != TXL_OK) {
			errmsg("%s", engine_lib_error(st));
			return EXIT_RUNTIME;
		}
		e->streams->batch_rows = max_rows;
	}
	st = txl_batch_eval(e->streams->batch, sessions, ids, n, n_sessions,
			    want);
	if (st == TXL_OK && logits && want != TXL_LOGITS_NONE)
		st = txl_batch_logits(e->streams->batch, sessions, n_sessions);
	for (int i = 0; i < n_sessions; i++) {
		if (sessions[i] != e->streams->session)
			continue;
		e->streams->have_logits = st == TXL_OK &&
					  want != TXL_LOGITS_NONE;
		if (st == TXL_OK)
			engine_note_fed(e, ids[i], n[i]);
	}
	return engine_run_status(st);
}

int
engine_feed(struct engine *e, const int32_t *ids, int n, enum txl_logits want)
{
	int rc = engine_feed_to(e, e->streams->session, ids, n, want);

	e->streams->have_logits = rc == EXIT_OK && want != TXL_LOGITS_NONE;
	return rc;
}

/* Feed the whole segments of ids[0..n) that leave at least one token
 * over, so that each one's next token is known: *fed of them, a multiple
 * of seg_len, so the segments are where one feed of all n would put
 * them.  With --adapt one at a time, learning from each.  Returns an
 * exit code. */
static int
feed_segments(struct engine *e, const int32_t *ids, int n, int *fed)
{
	int seg = engine_params(e).seg_len, rc = EXIT_OK;
	int k = n > 0 ? (n - 1) / seg * seg : 0;

	*fed = k;
	if (k == 0)
		return EXIT_OK;
	if (e->opts->adapt <= 0)
		return engine_feed(e, ids, k, TXL_LOGITS_NONE);
	for (int i = 0; i < k && rc == EXIT_OK; i += seg) {
		rc = engine_feed(e, ids + i, seg, TXL_LOGITS_ALL);
		if (rc == EXIT_OK)
			rc = engine_adapt(e, ids + i + 1, seg);
	}
	return rc;
}

struct feeder {
	struct engine *e;
	const struct feed_opts *fo;
	struct tokvec t;      /* tokens not fed yet */
	int64_t total;        /* tokens in all */
	int64_t skipped;      /* of them, counted but not read */
	uint64_t bytes;       /* bytes of text taken */
	int64_t field;        /* tokens that determine the state; 0: read
				 every token */
	int seg;              /* the session's seg_len */
};

/* Count the first k tokens held as read, not computing them. */
static int
skip_tokens(struct feeder *f, int k)
{
	enum txl_status st;

	if (k <= 0)
		return EXIT_OK;
	st = txl_session_skip(f->e->streams->session, f->t.v, k);
	if (st != TXL_OK) {
		errmsg("%s", engine_lib_error(st));
		return EXIT_RUNTIME;
	}
	f->e->streams->have_logits = false;
	/* text of the session all the same: the repeat penalty's window */
	engine_note_fed(f->e, f->t.v, k);
	tokvec_drop(&f->t, k);
	f->skipped += k;
	return EXIT_OK;
}

/* While the text comes: skip the whole segments at the start of the
 * tokens held that leave the receptive field after them (whatever the
 * text's length), so that they stay where a whole read puts them. */
static int
skip_segments(struct feeder *f)
{
	return skip_tokens(f, f->t.n > f->field ?
			   (int)((f->t.n - f->field) / f->seg * f->seg) : 0);
}

/* At its end: skip the segments before this text's own tail, up to
 * seg_len - 1 fewer tokens in each layer than the field. */
static int
skip_to_tail(struct feeder *f)
{
	struct txl_session_params p = engine_params(f->e);
	const int64_t start = txl_session_tail_start(f->e->mod->model, &p,
						     f->total);

	if (start < 0) {
		errmsg("%s", engine_lib_error(TXL_ERR_INVALID));
		return EXIT_RUNTIME;
	}
	return skip_tokens(f, (int)(start - f->skipped));
}

/* Tokenize @p s and feed the whole segments it completes. */
static int
take_text(struct feeder *f, const char *s, size_t len)
{
	struct engine *e = f->e;
	int k, rc;

	if (!len)
		return EXIT_OK;
	if (f->fo->echo && out_prompt(f->fo->echo, s, len) == OUT_ERROR)
		return EXIT_RUNTIME;
	f->bytes += len;
	k = engine_tokenize(e->mod, s, len);
	if (k < 0)
		return EXIT_RUNTIME;
	for (int j = 0; j < f->fo->n_samplers; j++)
		for (int i = 0; i < k; i++)
			txl_sampler_accept(f->fo->samplers[j], e->mod->ids[i]);
	tokvec_add(&f->t, e->mod->ids, k);
	f->total += k;
	/* with a receptive field, nothing is computed before the end: a
	 * segment may yet turn out to lie before the field */
	if (f->field > 0)
		return skip_segments(f);
	rc = feed_segments(e, f->t.v, f->t.n, &k);
	if (rc == EXIT_OK)
		tokvec_drop(&f->t, k);
	return rc;
}

static bool
only_newlines(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != '\n' && s[i] != '\r')
			return false;
	return true;
}

int
engine_feed_input(struct engine *e, struct input *in,
		  const struct feed_opts *fo, int64_t *n_tokens,
		  uint64_t *bytes)
{
	struct feeder f = { .e = e, .fo = fo };
	struct strbuf held = { 0 };  /* a line whose final newlines may be
					the text's last (fo->drop_final_) */
	struct progress pg;
	const char *chunk;
	size_t len;
	int rc = EXIT_OK, got;

	e->streams->n_skipped = 0;
	if (!e->opts->read_all && e->opts->adapt <= 0 &&
	    txl_model_has_memory(e->mod->model)) {
		struct txl_session_params p = engine_params(e);

		f.seg = p.seg_len;
		f.field = txl_session_receptive_field(e->mod->model, &p,
						      p.seg_len);
		if (f.field < 0) {
			errmsg("%s", engine_lib_error(TXL_ERR_INVALID));
			return EXIT_RUNTIME;
		}
	}
	progress_init(&pg, in->size);
	pg.on = pg.on && fo->progress;
	while ((got = input_next(in, &chunk, &len)) > 0) {
		if (!fo->drop_final_newlines) {
			rc = take_text(&f, chunk, len);
		} else if (only_newlines(chunk, len) && held.len &&
			   held.len + len <= HOLD_MAX) {
			strbuf_add(&held, chunk, len);
		} else {
			rc = take_text(&f, held.s, held.len);
			held.len = 0;
			strbuf_add(&held, chunk, len);
		}
		if (rc != EXIT_OK)
			goto out;
		progress_show(&pg, in->consumed, f.total, NULL, false);
	}
	if (got < 0) {
		rc = interrupted ? EXIT_INTERRUPTED : EXIT_RUNTIME;
		goto out;
	}
	while (held.len && (held.s[held.len - 1] == '\n' ||
			    held.s[held.len - 1] == '\r'))
		held.len--;
	rc = take_text(&f, held.s, held.len);
	if (rc != EXIT_OK)
		goto out;
	if (f.field > 0 && (rc = skip_to_tail(&f)) != EXIT_OK)
		goto out;
	if (f.t.n)
		rc = engine_feed(e, f.t.v, f.t.n, TXL_LOGITS_LAST);
out:
	progress_done(&pg);
	e->streams->n_skipped = f.skipped;
	if (n_tokens)
		*n_tokens = f.total;
	if (bytes)
		*bytes = f.bytes;
	strbuf_free(&held);
	free(f.t.v);
	return rc;
}

int
engine_prime(struct engine *e, struct input *in)
{
	struct feed_opts fo = { .progress = true };
	int64_t n = 0;
	int rc = engine_feed_input(e, in, &fo, &n, NULL);

	if (n)
		e->streams->started = true;
	return rc;
}
