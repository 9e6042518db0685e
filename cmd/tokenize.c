/* SPDX-License-Identifier: MIT */
/*
 * tokenize.c - --tokenize: text to token ids, one line of ids per line of
 * text, or with --ids the way back (byte for byte where the tokenizer
 * keeps the text); with --json one object per token with its id and its
 * text.  Read as a stream, like --score.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-model.h"
#include "engine.h"
#include "modes.h"
#include "signals.h"
#include "text.h"

struct lister {
	struct engine *e;
	FILE *out;
	bool newline_tokens;   /* --ids: newlines are in the ids' text */
	int64_t pos;           /* tokens listed */
	uint64_t bytes;        /* bytes of text */
	bool line_start;       /* the next token starts a line */
	bool on_line;          /* ids already written on this line */
	struct utf8_state u8;
	struct strbuf text;
};

/* One token: its id, and its text as it continues the line. */
static void
list_token(struct lister *l, int32_t id)
{
	struct engine *e = l->e;
	int len = 0;
	const char *p = engine_piece(e->mod, id, &len);

	if (!p)
		len = 0;
	if (l->line_start && len > 0) {
		if (engine_drops_space(e->mod, id, p, len)) {
			p++;
			len--;
		}
		l->line_start = false;
	}
	l->text.len = 0;
	strbuf_add(&l->text, "", 0);
	utf8_feed(&l->u8, p, (size_t)len, &l->text);
	if (e->opts->ids)
		l->bytes += l->text.len;
	if (e->opts->json) {
		fprintf(l->out, "{\"pos\": %lld, \"id\": %d, \"text\": ",
			(long long)l->pos, (int)id);
		json_write_string(l->out, l->text.s, l->text.len);
		fputs("}\n", l->out);
	} else if (e->opts->ids) {
		fwrite(l->text.s, 1, l->text.len, l->out);
	} else {
		fprintf(l->out, "%s%d", l->on_line ? " " : "", (int)id);
		l->on_line = true;
	}
	l->pos++;
}

static void
end_line(struct lister *l)
{
	l->text.len = 0;
	utf8_finish(&l->u8, &l->text);
	if (!l->e->opts->json) {
		fwrite(l->text.s, 1, l->text.len, l->out);
		if (!l->newline_tokens)
			fputc('\n', l->out);
	}
	l->line_start = true;
	l->on_line = false;
}

/* Does the tokenizer keep a newline as a token (an identity normaliser,
 * byte fallback, the end-of-line symbol of a word-level vocabulary)?
 * Then the ids of a line end with the newline's, and the text they stand
 * for holds its newlines; with SentencePiece's default normalisation
 * newlines vanish, and only the lines of ids tell where they were. */
static bool
newline_is_token(struct engine *e)
{
	int n = engine_tokenize(e->mod, "\n", 1), len;

	for (int i = 0; i < n; i++) {
		const char *p = engine_piece(e->mod, e->mod->ids[i], &len);

		if (p && memchr(p, '\n', (size_t)len))
			return true;
	}
	return false;
}

int
engine_list_tokens(struct engine *e, struct input *in, FILE *out)
{
	struct lister l = { .e = e, .out = out, .line_start = true };
	struct tokvec t = { 0 };
	const char *chunk;
	size_t len;
	struct ids_reader idr = { .line = 1 };
	int rc = EXIT_OK, got;

	strbuf_add(&l.text, "", 0);
	/* ids to text: a line of ids is a line of text, whose newline is
	 * among the ids where the tokenizer keeps it (so that --tokenize
	 * and back give the text byte for byte) */
	l.newline_tokens = e->opts->ids && !e->opts->json &&
		newline_is_token(e);
	while ((got = input_next(in, &chunk, &len)) > 0) {
		bool nl = chunk[len - 1] == '\n';

		t.n = 0;
		if (e->opts->ids) {
			rc = engine_parse_ids(e, in->name, &idr, chunk, len,
					      &t);
			if (rc != EXIT_OK)
				break;
		} else {
			int k = engine_tokenize(e->mod, chunk, len);

			if (k < 0) {
				rc = EXIT_RUNTIME;
				break;
			}
			tokvec_add(&t, e->mod->ids, k);
			l.bytes += len;
		}
		for (int i = 0; i < t.n; i++)
			list_token(&l, t.v[i]);
		if (nl)
			end_line(&l);
		if (ferror(out))
			break;
	}
	if (got < 0)
		rc = interrupted ? EXIT_INTERRUPTED : EXIT_RUNTIME;
	/* the id the input ends with */
	t.n = 0;
	if (rc == EXIT_OK && e->opts->ids)
		rc = engine_parse_ids(e, in->name, &idr, NULL, 0, &t);
	for (int i = 0; rc == EXIT_OK && i < t.n; i++)
		list_token(&l, t.v[i]);
	if (rc == EXIT_OK && (!l.line_start || l.on_line))
		end_line(&l);
	if (rc == EXIT_OK && e->opts->json)
		fprintf(out, "{\"tokens\": %lld, \"bytes\": %llu}\n",
			(long long)l.pos, (unsigned long long)l.bytes);
	fflush(out);
	if (ferror(out)) {
		errmsg("writing output failed: %s", strerror(errno));
		rc = EXIT_RUNTIME;
	}
	strbuf_free(&l.text);
	free(t.v);
	return rc;
}
