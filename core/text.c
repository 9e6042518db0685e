/* SPDX-License-Identifier: MIT */
/*
 * text.c - bytes as text: a growing buffer, UTF-8 repaired as it streams,
 * JSON literals, numbers for people, and widths on a terminal (UTF-8
 * checked byte by byte and lines made printable: utf8.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include <cJSON.h>

#include "errors.h"
#include "text.h"

#define REPLACEMENT "\xef\xbf\xbd" /* U+FFFD */

void
strbuf_add(struct strbuf *b, const char *s, size_t len)
{
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;

		while (cap < b->len + len + 1)
			cap *= 2;
		b->s = xrealloc(b->s, cap);
		b->cap = cap;
	}
	if (len)
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

void
json_write_chars(FILE *f, const char *s, size_t len)
{
	/* the characters JSON escapes by a letter (or themselves) */
	static const char *const escape[] = {
		['"'] = "\\\"", ['\\'] = "\\\\", ['\n'] = "\\n",
		['\r'] = "\\r", ['\t'] = "\\t",
	};

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < sizeof(escape) / sizeof(*escape) && escape[c])
			fputs(escape[c], f);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			putc(c, f);
	}
}

void
json_write_string(FILE *f, const char *s, size_t len)
{
	putc('"', f);
	json_write_chars(f, s, len);
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
json_write_exact(FILE *f, double v)
{
	char num[40];

	if (!isfinite(v)) {
		fputs("null", f);
	} else if (v == floor(v) && fabs(v) < 9007199254740992.0) {
		fprintf(f, "%.0f", v);
	} else {
		/* the fewest digits that do, as Python's repr() */
		for (int digits = 15; digits <= 17; digits++) {
			snprintf(num, sizeof(num), "%.*g", digits, v);
			if (strtod(num, NULL) == v)
				break;
		}
		fputs(num, f);
	}
}

static void
json_print_at(FILE *f, const cJSON *v, int indent, int depth)
{
	const bool obj = cJSON_IsObject(v);
	const cJSON *c;

	if (cJSON_IsNull(v) || cJSON_IsInvalid(v)) {
		fputs("null", f);
	} else if (cJSON_IsFalse(v)) {
		fputs("false", f);
	} else if (cJSON_IsTrue(v)) {
		fputs("true", f);
	} else if (cJSON_IsNumber(v)) {
		json_write_exact(f, v->valuedouble);
	} else if (cJSON_IsRaw(v)) {
		/* JSON written already (a 64-bit integer, exactly) */
		fputs(v->valuestring ? v->valuestring : "null", f);
	} else if (cJSON_IsString(v)) {
		const char *s = v->valuestring ? v->valuestring : "";

		json_write_string(f, s, strlen(s));
	} else if (!v->child) {
		fputs(obj ? "{}" : "[]", f);
	} else {
		fputc(obj ? '{' : '[', f);
		for (c = v->child; c; c = c->next) {
			if (indent >= 0)
				fprintf(f, "\n%*s", indent * (depth + 1), "");
			if (obj) {
				const char *k = c->string ? c->string : "";

				json_write_string(f, k, strlen(k));
				fputs(": ", f);
			}
			json_print_at(f, c, indent, depth + 1);
			if (c->next)
				fputs(indent >= 0 ? "," : ", ", f);
		}
		if (indent >= 0)
			fprintf(f, "\n%*s", indent * depth, "");
		fputc(obj ? '}' : ']', f);
	}
}

void
json_print(FILE *f, const cJSON *v, int indent)
{
	json_print_at(f, v, indent, 0);
}

char *
json_string(const cJSON *v, int indent)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);

	if (!f)
		die_oom();
	json_print(f, v, indent);
	if (fclose(f) != 0 || !s)
		die_oom();
	return s;
}

const char *
fmt_number(double v, char *buf, size_t len)
{
	if (isfinite(v) && v == floor(v) && fabs(v) < 1e18)
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "%.15g", v);
	return buf;
}

/* The code point at @p s (valid UTF-8 of @p k bytes). */
static unsigned
utf8_decode(const unsigned char *s, size_t k)
{
	static const unsigned char mask[] = { 0, 0x7f, 0x1f, 0x0f, 0x07 };
	unsigned cp = s[0] & mask[k];

	for (size_t i = 1; i < k; i++)
		cp = cp << 6 | (s[i] & 0x3f);
	return cp;
}

/* Columns of one character: wcwidth() where the locale knows it. */
static int
char_width(const unsigned char *s, size_t k)
{
	int w = wcwidth((wchar_t)utf8_decode(s, k));

	return w < 0 ? 1 : w;
}

int
text_width(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	int w = 0;

	for (size_t i = 0; i < n;) {
		size_t k = utf8_char_len(p + i, n - i);

		if (!k)
			k = 1;
		w += char_width(p + i, k);
		i += k;
	}
	return w;
}

void
text_fit(char *s, int cols)
{
	unsigned char *p = (unsigned char *)s;
	size_t n = strlen(s), cut = 0;
	int w = 0;

	if (text_width(s) <= cols)
		return;
	if (cols < 3) {
		s[cols > 0 ? cols : 0] = '\0';
		return;
	}
	/* the longest prefix that leaves room for "..." */
	for (size_t i = 0; i < n;) {
		size_t k = utf8_char_len(p + i, n - i);
		int cw;

		if (!k)
			k = 1;
		cw = char_width(p + i, k);
		if (w + cw > cols - 3)
			break;
		w += cw;
		i += k;
		cut = i;
	}
	memcpy(s + cut, "...", 4);
}
