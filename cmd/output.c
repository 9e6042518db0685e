/* SPDX-License-Identifier: MIT */
/*
 * output.c - streaming generated text to stdout.
 *
 * A token's piece may end inside a multi-byte character (byte-fallback
 * tokens carry one byte each), so bytes pass through an incremental UTF-8
 * repairer that holds them until the character is complete; what is not
 * UTF-8 becomes U+FFFD.  Stop strings are matched on the repaired text;
 * in text mode the text that could still turn into a stop string is held
 * back, so that a stop string is never printed.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output.h"

#define REPLACEMENT "\xef\xbf\xbd" /* U+FFFD */
#define COLOR_PROMPT "\033[1m"
#define COLOR_RESET "\033[0m"

void
strbuf_add(struct strbuf *b, const char *s, size_t len)
{
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		char *n;

		while (cap < b->len + len + 1)
			cap *= 2;
		n = realloc(b->s, cap);
		if (!n) {
			errmsg("out of memory");
			exit(EXIT_RUNTIME);
		}
		b->s = n;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, len);
	b->len += len;
	b->s[b->len] = '\0';
}

void
strbuf_free(struct strbuf *b)
{
	free(b->s);
	memset(b, 0, sizeof(*b));
}

/* Start a character with lead byte @p c; false if @p c cannot lead. */
static bool
utf8_lead(struct utf8_state *u, unsigned char c)
{
	u->lo = 0x80;
	u->hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf) {
		u->need = 1;
	} else if (c >= 0xe0 && c <= 0xef) {
		u->need = 2;
		if (c == 0xe0)
			u->lo = 0xa0;   /* no overlong forms */
		else if (c == 0xed)
			u->hi = 0x9f;   /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		u->need = 3;
		if (c == 0xf0)
			u->lo = 0x90;
		else if (c == 0xf4)
			u->hi = 0x8f;   /* nothing above U+10FFFF */
	} else {
		return false;
	}
	u->buf[0] = c;
	u->len = 1;
	return true;
}

void
utf8_feed(struct utf8_state *u, const char *s, size_t len, struct strbuf *out)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (u->need) {
			if (c >= u->lo && c <= u->hi) {
				u->buf[u->len++] = c;
				u->lo = 0x80;
				u->hi = 0xbf;
				if (--u->need == 0) {
					strbuf_add(out, (char *)u->buf,
						   (size_t)u->len);
					u->len = 0;
				}
				continue;
			}
			/* cut short: replace what was held, retry c */
			strbuf_add(out, REPLACEMENT, 3);
			u->need = 0;
			u->len = 0;
		}
		if (c < 0x80)
			strbuf_add(out, (char *)&c, 1);
		else if (!utf8_lead(u, c))
			strbuf_add(out, REPLACEMENT, 3);
	}
}

void
utf8_finish(struct utf8_state *u, struct strbuf *out)
{
	if (u->need)
		strbuf_add(out, REPLACEMENT, 3);
	u->need = 0;
	u->len = 0;
}

bool
utf8_valid(const char *s, size_t len)
{
	struct utf8_state u = { 0 };

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (u.need) {
			if (c < u.lo || c > u.hi)
				return false;
			u.lo = 0x80;
			u.hi = 0xbf;
			u.need--;
		} else if (c >= 0x80 && !utf8_lead(&u, c)) {
			return false;
		}
	}
	return u.need == 0;
}

void
json_write_string(FILE *f, const char *s, size_t len)
{
	putc('"', f);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		switch (c) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		default:
			if (c < 0x20 || c == 0x7f)
				fprintf(f, "\\u%04x", c);
			else
				putc(c, f);
		}
	}
	putc('"', f);
}

void
json_write_number(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.9g", v);
	else
		fputs("null", f);
}

void
out_init(struct output *out, FILE *f, const struct txlgen_options *opts,
	 bool newline_at_end)
{
	const char *nc = getenv("NO_COLOR");
	const char *term = getenv("TERM");
	bool tty = isatty(fileno(f));

	memset(out, 0, sizeof(*out));
	out->f = f;
	out->json = opts->json;
	out->flush_each = tty || opts->unbuffered;
	out->newline_at_end = newline_at_end && !opts->json;
	switch (opts->color) {
	case COLOR_ALWAYS:
		out->color = true;
		break;
	case COLOR_NEVER:
		out->color = false;
		break;
	default:
		out->color = tty && !(nc && *nc) &&
			!(term && !strcmp(term, "dumb"));
	}
	if (opts->json)
		out->color = false;
}

void
out_free(struct output *out)
{
	strbuf_free(&out->hold);
	strbuf_free(&out->tok);
}

void
out_begin(struct output *out, bool drop_space, const struct strlist *stops)
{
	out->drop_space = drop_space;
	memset(&out->u8, 0, sizeof(out->u8));
	out->stops = stops;
	out->max_stop = 0;
	for (int i = 0; stops && i < stops->n; i++)
		if (strlen(stops->v[i]) > out->max_stop)
			out->max_stop = strlen(stops->v[i]);
	out->hold.len = 0;
	out->tok.len = 0;
	out->wrote = false;
	out->last = 0;
}

static void
write_text(struct output *out, const char *s, size_t len)
{
	if (!len)
		return;
	fwrite(s, 1, len, out->f);
	out->wrote = true;
	out->last = s[len - 1];
}

static enum out_status
check(struct output *out)
{
	if (out->flush_each)
		fflush(out->f);
	return ferror(out->f) ? OUT_ERROR : OUT_CONTINUE;
}

enum out_status
out_prompt(struct output *out, const char *text, size_t len)
{
	struct strbuf b = { 0 };
	struct utf8_state u = { 0 };

	utf8_feed(&u, text, len, &b);
	utf8_finish(&u, &b);
	if (out->json) {
		fputs("{\"prompt\": ", out->f);
		json_write_string(out->f, b.s ? b.s : "", b.len);
		fputs("}\n", out->f);
	} else {
		if (out->color && b.len)
			fputs(COLOR_PROMPT, out->f);
		write_text(out, b.s, b.len);
		if (out->color && b.len)
			fputs(COLOR_RESET, out->f);
	}
	strbuf_free(&b);
	return check(out);
}

/*
 * Look for a stop string in the held text.  Returns the offset of the
 * first match, or -1 and sets *keep to the length of the longest tail
 * that is the beginning of some stop string (which must stay held).
 */
static long
find_stop(const struct output *out, size_t *keep)
{
	const struct strbuf *h = &out->hold;
	long best = -1;

	*keep = 0;
	for (int i = 0; i < out->stops->n; i++) {
		const char *st = out->stops->v[i];
		size_t sl = strlen(st);
		const char *m = memmem(h->s, h->len, st, sl);

		if (m && (best < 0 || m - h->s < best))
			best = m - h->s;
		if (m)
			continue;
		for (size_t k = sl - 1 < h->len ? sl - 1 : h->len; k > *keep;
		     k--) {
			if (!memcmp(h->s + h->len - k, st, k)) {
				*keep = k;
				break;
			}
		}
	}
	return best;
}

enum out_status
out_token(struct output *out, int32_t id, const char *piece, size_t len,
	  double logprob)
{
	enum out_status st = OUT_CONTINUE;
	size_t keep;
	long at;

	if (out->drop_space && len) {
		if (piece[0] == ' ') {
			piece++;
			len--;
		}
		out->drop_space = false;
	}
	out->tok.len = 0;
	utf8_feed(&out->u8, piece, len, &out->tok);

	if (out->stops && out->stops->n) {
		strbuf_add(&out->hold, out->tok.s ? out->tok.s : "",
			   out->tok.len);
		at = find_stop(out, &keep);
		if (at >= 0) {
			st = OUT_STOP;
			if (!out->json)
				write_text(out, out->hold.s, (size_t)at);
			out->hold.len = 0;
		} else {
			size_t n = out->hold.len - keep;

			if (!out->json)
				write_text(out, out->hold.s, n);
			memmove(out->hold.s, out->hold.s + n, keep);
			out->hold.len = keep;
		}
	} else if (!out->json) {
		write_text(out, out->tok.s, out->tok.len);
	}

	if (out->json) {
		fprintf(out->f, "{\"id\": %d, \"text\": ", (int)id);
		json_write_string(out->f, out->tok.s ? out->tok.s : "",
				  out->tok.len);
		fputs(", \"logprob\": ", out->f);
		json_write_number(out->f, logprob);
		fputs("}\n", out->f);
	}
	if (check(out) == OUT_ERROR)
		return OUT_ERROR;
	return st;
}

enum out_status
out_end(struct output *out, bool stopped)
{
	out->tok.len = 0;
	utf8_finish(&out->u8, &out->tok);
	if (!out->json) {
		if (!stopped) {
			write_text(out, out->hold.s, out->hold.len);
			write_text(out, out->tok.s, out->tok.len);
		}
		if (out->newline_at_end && out->wrote && out->last != '\n')
			write_text(out, "\n", 1);
	}
	out->hold.len = 0;
	fflush(out->f);
	return ferror(out->f) ? OUT_ERROR : OUT_CONTINUE;
}
