/* SPDX-License-Identifier: MIT */
/*
 * ids.c - token ids written as text (--score --ids, --tokenize --ids).
 *
 * The text comes in chunks (input.c), which a token longer than a chunk
 * (leading zeros, or garbage) straddles: a token is taken when the
 * whitespace after it, or the end of the input, is seen, so that the ids
 * do not depend on where the chunks end.
 */
#include <stdint.h>
#include <string.h>

#include "engine-model.h"
#include "engine.h"
#include "modes.h"

static bool
is_space(char c)
{
	return c && strchr(" \t\n\r\v\f", c);
}

#define SHOWN 40  /* bytes of a token quoted in messages */

/* Append @p c to @p buf (of *n bytes, at most SHOWN shown: *more set
 * past them), a NUL as "\0" (errmsg() would end the message there). */
static void
show(char *buf, int *n, bool *more, char c)
{
	if (*n >= SHOWN) {
		*more = true;
		return;
	}
	if (c == '\0') {
		buf[(*n)++] = '\\';
		c = '0';
	}
	buf[(*n)++] = c;
}

/* The token just ended: check it and add it to @p t. */
static int
end_token(struct engine *e, const char *name, struct ids_reader *r,
	  struct tokvec *t)
{
	int32_t id;

	r->in_token = false;
	if (r->bad) {
		/* errmsg() makes the quoted input printable */
		errmsg("%s: line %lld: '%.*s%s' is not a token id%s", name,
		       (long long)r->line, r->raw_len, r->raw,
		       r->raw_more ? "..." : "", r->nul ?
		       " (it holds a NUL byte)" : "");
		return EXIT_RUNTIME;
	}
	if (r->value >= e->mod->hp->n_token) {
		errmsg("%s: line %lld: token id %.*s%s is out of range "
		       "(0 .. %d)", name, (long long)r->line, r->sig_len,
		       r->sig, r->sig_more ? "..." : "",
		       e->mod->hp->n_token - 1);
		return EXIT_RUNTIME;
	}
	id = (int32_t)r->value;
	tokvec_add(t, &id, 1);
	return EXIT_OK;
}

int
engine_parse_ids(struct engine *e, const char *name, struct ids_reader *r,
		 const char *s, size_t len, struct tokvec *t)
{
	if (!s)  /* the end of the input */
		return r->in_token ? end_token(e, name, r, t) : EXIT_OK;
	for (size_t i = 0; i < len; i++) {
		const char c = s[i];

		if (is_space(c)) {
			if (r->in_token && end_token(e, name, r, t) != EXIT_OK)
				return EXIT_RUNTIME;
			if (c == '\n')
				r->line++;
			continue;
		}
		if (!r->in_token) {
			r->in_token = true;
			r->bad = r->nul = r->raw_more = r->sig_more = false;
			r->raw_len = r->sig_len = 0;
			r->value = 0;
		}
		show(r->raw, &r->raw_len, &r->raw_more, c);
		if (c < '0' || c > '9') {
			r->bad = true;
			r->nul |= c == '\0';
			continue;
		}
		/* the value saturates; leading zeros are not significant */
		if (r->value <= INT32_MAX)
			r->value = r->value * 10 + (c - '0');
		if (c != '0' || r->sig_len > 0)
			show(r->sig, &r->sig_len, &r->sig_more, c);
	}
	return EXIT_OK;
}
