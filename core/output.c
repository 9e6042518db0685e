/* SPDX-License-Identifier: MIT */
/*
 * output.c - streaming generated text to stdout.
 *
 * A token's piece may end inside a multi-byte character (byte-fallback
 * tokens carry one byte each), so bytes pass through an incremental UTF-8
 * repairer that holds them until the character is complete; what is not
 * UTF-8 becomes U+FFFD.  Stop strings are matched on the repaired text;
 * in text mode the text that could still turn into a stop string is held
 * back, so that a stop string is never printed.  On a terminal, control
 * characters become U+FFFD too: a model file is untrusted input, and its
 * pieces must not send escape sequences to the user's terminal.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "output.h"

#define COLOR_PROMPT "\033[1m"
#define COLOR_TEXT "\033[36m"
#define COLOR_RESET "\033[0m"

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
	out->tty = tty;
	{
		struct stat sb;

		out->watch_reader = !out->flush_each && fileno(f) >= 0 &&
			fstat(fileno(f), &sb) == 0 &&
			(S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode));
	}
	out->newline_at_end = newline_at_end && !opts->json;
	out->sample = -1;
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
	out->in_prompt = false;
	out->in_color = false;
	out->wrote = false;
	out->last = 0;
}

/* Switch the colour to @p code (NULL: none). */
static void
set_color(struct output *out, const char *code)
{
	if (!out->color || out->json)
		return;
	if (out->in_color)
		fputs(COLOR_RESET, out->f);
	out->in_color = code != NULL;
	if (code)
		fputs(code, out->f);
}

static void
write_text(struct output *out, const char *s, size_t len)
{
	if (!len)
		return;
	if (!out->in_prompt && out->color_text && !out->in_color)
		set_color(out, COLOR_TEXT);
	out->wrote = true;
	out->last = s[len - 1];
	if (!out->tty) {
		fwrite(s, 1, len, out->f);
		return;
	}
	const unsigned char *u = (const unsigned char *)s;
	size_t from = 0;
	for (size_t i = 0; i < len;) {
		size_t c = u[i] == '\t' || u[i] == '\n' ? 0
			: text_control_len(u + i, len - i);
		if (!c) {
			i++;
			continue;
		}
		fwrite(s + from, 1, i - from, out->f);
		fputs("\xEF\xBF\xBD", out->f);	/* U+FFFD */
		i += c;
		from = i;
	}
	fwrite(s + from, 1, len - from, out->f);
}

/* Has the reader of a pipe or socket gone away?  (A block-buffered
 * stream would learn it only at its next flush, kilobytes later: an
 * endless generation into `head` would go on for seconds.) */
static bool
reader_gone(const struct output *out)
{
	struct pollfd p = { .fd = fileno(out->f), .events = 0 };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
}

static enum out_status
check(struct output *out)
{
	/* a flush into a closed pipe ends the program as SIGPIPE does
	 * (or fails with EPIPE where it is ignored) */
	if (out->flush_each || (out->watch_reader && reader_gone(out)))
		fflush(out->f);
	return ferror(out->f) ? OUT_ERROR : OUT_CONTINUE;
}

/* Close the echo of the prompt. */
static void
end_prompt(struct output *out)
{
	struct strbuf b = { 0 };

	if (!out->in_prompt)
		return;
	utf8_finish(&out->u8, &b);
	if (out->json) {
		json_write_chars(out->f, b.s, b.len);
		fputs("\"}\n", out->f);
	} else {
		write_text(out, b.s, b.len);
		set_color(out, NULL);
	}
	strbuf_free(&b);
	out->in_prompt = false;
	memset(&out->u8, 0, sizeof(out->u8));
}

enum out_status
out_prompt(struct output *out, const char *text, size_t len)
{
	struct strbuf b = { 0 };

	if (!len)
		return OUT_CONTINUE;
	if (!out->in_prompt) {
		out->in_prompt = true;
		if (out->json)
			fputs("{\"prompt\": \"", out->f);
		else
			set_color(out, COLOR_PROMPT);
	}
	utf8_feed(&out->u8, text, len, &b);
	if (out->json)
		json_write_chars(out->f, b.s, b.len);
	else
		write_text(out, b.s, b.len);
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

	end_prompt(out);
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
		fputc('{', out->f);
		if (out->sample >= 0)
			fprintf(out->f, "\"sample\": %d, ", out->sample);
		fprintf(out->f, "\"id\": %d, \"text\": ", (int)id);
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

bool
out_char_open(const struct output *out)
{
	return out->u8.need > 0;
}

bool
out_char_continues(const struct output *out, const char *piece, size_t len)
{
	unsigned char c = len ? (unsigned char)piece[0] : 0;

	return out->u8.need > 0 && len && c >= out->u8.lo && c <= out->u8.hi;
}

void
out_drop_open_char(struct output *out)
{
	memset(&out->u8, 0, sizeof(out->u8));
}

enum out_status
out_end(struct output *out, bool stopped)
{
	end_prompt(out);
	out->tok.len = 0;
	utf8_finish(&out->u8, &out->tok);
	if (!out->json) {
		if (!stopped) {
			write_text(out, out->hold.s, out->hold.len);
			write_text(out, out->tok.s, out->tok.len);
		}
		set_color(out, NULL);
		if (out->newline_at_end && out->wrote && out->last != '\n') {
			fputc('\n', out->f);
			out->last = '\n';
		}
	}
	out->hold.len = 0;
	fflush(out->f);
	return ferror(out->f) ? OUT_ERROR : OUT_CONTINUE;
}
